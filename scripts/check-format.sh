#!/usr/bin/env bash
# The format check (CTest `format_check`, label ci): every tracked C++/CUDA file must already be as clang-format
# writes it under the repository's .clang-format (`clang-format --dry-run -Werror`). The file list comes from git,
# so build folders and untracked scratch files are never checked; outside a git checkout (a source tarball) there
# is no such list and the check is skipped (exit 77) with the reason. To fix: clang-format -i FILE.
#   bash scripts/check-format.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd -P)"
format="${CLANG_FORMAT:-clang-format}"
top="$(git -C "$repo" rev-parse --show-toplevel 2>/dev/null || true)"
if [ "$top" != "$repo" ]; then
  echo "format check skipped: $repo is not a git checkout (a tarball?), so there is no list of tracked files" >&2
  exit 77
fi
if ! command -v "$format" >/dev/null 2>&1; then
  echo "check-format: $format not found (scripts/bootstrap.sh installs Debian's clang-format)" >&2
  exit 2
fi
files=()
while IFS= read -r -d '' f; do
  if [ -f "$repo/$f" ]; then files+=("$repo/$f"); fi  # a tracked file deleted in the work tree is not checked
done < <(git -C "$repo" ls-files -z -- '*.cpp' '*.hpp' '*.cc' '*.h' '*.cu' '*.cuh')
if [ ${#files[@]} -eq 0 ]; then
  echo "check-format: git lists no C++/CUDA files in $repo" >&2
  exit 2
fi
status=0
"$format" --dry-run -Werror "${files[@]}" || status=$?
if [ "$status" -ne 0 ]; then
  echo "check-format: files above are not clang-format clean ($("$format" --version)); run clang-format -i on them" >&2
  exit 1
fi
echo "format check: ${#files[@]} files clang-format clean ($("$format" --version))"
