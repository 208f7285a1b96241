#!/usr/bin/env bash
# README command 2: set up, build, and run the whole test suite (CTest label `ci`). Pass --long to add the
# long-running studies (label `long`), which CI does not run.
set -euo pipefail
cd "$(dirname "$0")/.."
labels="ci"
[ "${1:-}" = "--long" ] && labels="ci|long"
bash scripts/build.sh
echo "== tests (ctest -L '$labels') =="
ctest --test-dir build -L "$labels" --output-on-failure -j"$(nproc)"
