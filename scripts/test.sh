#!/usr/bin/env bash
# README command 2: set up, build, and run the whole test suite (CTest labels `ci` and `slurm`; the Slurm test
# installs and starts a one-node cluster, so it needs root and is skipped without it). The Python suite runs twice:
# under Debian's torch 1.13 and under the pinned PyPI environment (torch 2.x, bitsandbytes, torchao, torchft),
# which scripts/python-env.sh creates in build-venv/ with cgad pip-installed into it. Pass --long to add the
# long-running studies (label `long`), which CI does not run (CMakePresets.json's `release` test preset, with the
# labels given here). The sanitizer legs are scripts/sanitize.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cmake-preset.sh
labels="ci|slurm"
[ "${1:-}" = "--long" ] && labels="ci|slurm|long"
bash scripts/build.sh
echo "== the pinned PyPI environment (scripts/python-env.sh) =="
peer_python=$(bash scripts/python-env.sh build-venv | tail -n 1)
cmake_configure release build -DCGAD_PEER_PYTHON="$peer_python" > /dev/null
echo "== tests (ctest -L '$labels') =="
ctest --preset release -L "$labels" -j"$(nproc)"
