#!/usr/bin/env bash
# The pinned PyPI environment: a venv (default build-venv/, beside the other build folders) over Debian's
# /usr/bin/python3 holding exactly python/requirements/peers.txt -- torch 2.x (CPU), bitsandbytes, torchao,
# torchft and the test run's needs -- build.txt (cgad's build backend, scikit-build-core), typecheck.txt (mypy,
# which python/tests/test_typing.py runs), and cgad itself, pip-installed from this checkout. scripts/test.sh runs the
# Python suite in it (CTest's python_pinned_* tests) beside Debian's torch 1.13; docs/testing.md.
#
#   scripts/python-env.sh [DIR]   creates or updates DIR; prints the path of DIR/bin/python on stdout and its
#                                 progress on stderr. A relative DIR is the caller's, taken before anything else.
#   scripts/python-env.sh --help  prints this usage
#
# Only a folder this script made is ever replaced: DIR may be missing, empty, or a venv holding the script's mark
# (.cgad-python-env, written as the venv is made, or the requirements stamp of a finished one); anything else --
# a user's own venv, any other folder -- is refused (exit status 2) and left as it is, before pip or rm runs.
#
# A second run reinstalls nothing from PyPI while the requirements files are unchanged (a stamp inside the venv
# records their hash), and rebuilds cgad incrementally (pyproject.toml's build-wheel/, through ccache where the
# caller set CMAKE_CXX_COMPILER_LAUNCHER). PyPI's torch 2.13.0 wheel is a CUDA build of several GB: unless a CPU
# wheel of the pinned release lies in one of pip's find-links folders (these build machines keep one there), the
# script stops and says so; CGAD_TORCH_DOWNLOAD=1 lets pip fetch whatever PyPI serves.
set -euo pipefail
die() { echo "python-env: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//; p}' "$0"; }

venv= given=
take() {
  [ -z "$given" ] || die "one folder only, got '$venv' and '$1' (usage: scripts/python-env.sh [DIR])"
  [ -n "$1" ] || die "the folder is an empty name"
  venv=$1 given=1
}
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --) shift; for arg; do take "$arg"; done; break ;;
    -*) die "unknown option '$1' (usage: scripts/python-env.sh [DIR]; --help says more)" ;;
    *) take "$1" ;;
  esac
  shift
done
# The caller's relative DIR, resolved before the cd below (which would put it inside the checkout).
case $venv in
  "" | /*) ;;
  *) venv=$PWD/$venv ;;
esac
cd "$(dirname "$0")/.."
source=$PWD
venv=${venv:-$source/build-venv}
requirements=python/requirements/peers.txt
backend=python/requirements/build.txt
typecheck=python/requirements/typecheck.txt
python=/usr/bin/python3
mark="$venv/.cgad-python-env"
stamp="$venv/.cgad-requirements.sha256"

# Whether DIR may be (re)made here: it is missing or empty, or this script made it.
ours() {
  [ ! -e "$venv" ] && [ ! -L "$venv" ] && return 0
  [ -d "$venv" ] && [ ! -L "$venv" ] || return 1
  [ -z "$(ls -A "$venv")" ] || [ -f "$mark" ] || [ -f "$stamp" ]
}

[ -x "$python" ] || die "$python is missing (scripts/bootstrap.sh installs Debian's python3, python3-venv)"

torch_pin=$(sed -n 's/^torch==\([^ #]*\).*/\1/p' "$requirements")
[ -n "$torch_pin" ] || die "$requirements pins no torch (torch==X.Y.Z)"

# The CPU wheel of the pinned torch in pip's find-links (pip config, PIP_FIND_LINKS), or the user's consent to
# download PyPI's.
cpu_wheel_present() {
  local links
  links=$("$python" -m pip config get global.find-links 2>/dev/null || true)
  links="$links ${PIP_FIND_LINKS:-}"
  local dir
  for dir in $links; do
    dir=${dir#file://}
    compgen -G "$dir/torch-${torch_pin}+cpu-*.whl" > /dev/null && return 0
  done
  return 1
}

wanted=$(cat "$requirements" "$backend" "$typecheck" | sha256sum | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  # Only a venv of ours is replaced: a user's venv (a pyvenv.cfg without our mark) or any other folder stays.
  ours || die "$venv exists and was not made by scripts/python-env.sh (no $(basename "$mark")); it is left as it \
is: name another folder, or remove it yourself"
  if ! cpu_wheel_present && [ "${CGAD_TORCH_DOWNLOAD:-}" != 1 ]; then
    die "no CPU wheel of torch ${torch_pin} in pip's find-links; PyPI's is a CUDA build of several GB. Put \
torch-${torch_pin}+cpu-*.whl in a folder named by PIP_FIND_LINKS, or set CGAD_TORCH_DOWNLOAD=1 to download it"
  fi
  echo "[python-env] creating $venv from $requirements, $backend and $typecheck" >&2
  rm -rf -- "$venv"
  "$python" -m venv -- "$venv"
  : > "$mark"
  start=$SECONDS
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements" -r "$backend" \
    -r "$typecheck" 2>&1 >&2 \
    | { grep -v "^WARNING: Location 'file://.*' is ignored" >&2 || true; }
  "$venv/bin/python" - "$requirements" "$backend" "$typecheck" >&2 <<'PY'
# Every pin holds in the venv (pip's resolver could have taken another release for a package the file names).
import importlib.metadata, re, sys
wrong = []
for line in (line for path in sys.argv[1:] for line in open(path)):
    m = re.match(r"\s*([A-Za-z0-9_.-]+)==([^\s#]+)", line)
    if not m:
        continue
    name, pin = m.groups()
    try:
        got = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        wrong.append(f"{name}: missing")
        continue
    if got.split("+")[0] != pin:
        wrong.append(f"{name}: {got}, pinned {pin}")
if wrong:
    sys.exit("python-env: the venv does not hold the pinned releases: " + "; ".join(wrong))
import torch
if torch.version.cuda is not None:
    print(f"python-env: note: torch {torch.__version__} is a CUDA build (CUDA {torch.version.cuda})")
PY
  echo "$wanted" > "$stamp"
  echo "[python-env] pinned packages installed in $((SECONDS - start)) s" >&2
fi

# cgad from this checkout, as a user installs it (docs/python.md), with the venv's own build backend (build.txt).
start=$SECONDS
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --no-index \
  --force-reinstall "$source" >&2
echo "[python-env] cgad installed from $source in $((SECONDS - start)) s" >&2
echo "$(cd "$venv" && pwd)/bin/python"
