#!/usr/bin/env bash
# README command 2: set up, build, and run the whole test suite (CTest labels `ci` and `slurm`; the Slurm test
# installs and starts a one-node cluster, so it needs root and is skipped without it). Pass --long to add the
# long-running studies (label `long`), which CI does not run (CMakePresets.json's `release` test preset, with the
# labels given here). The sanitizer legs are scripts/sanitize.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
labels="ci|slurm"
[ "${1:-}" = "--long" ] && labels="ci|slurm|long"
bash scripts/build.sh
echo "== tests (ctest -L '$labels') =="
ctest --preset release -L "$labels" -j"$(nproc)"
