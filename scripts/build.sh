#!/usr/bin/env bash
# Shared by the two README commands: install dependencies, configure and build into ./build. With target names
# (scripts/report.sh passes `cgad`), builds only those and what they need; with none, everything.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== [1/3] dependencies (Debian packages) =="
bash scripts/bootstrap.sh
echo "== [2/3] configure (CMake, Release; CUDA backend if nvcc is found) =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
targets=()
for t in "$@"; do targets+=(--target "$t"); done
echo "== [3/3] build ${*:-everything} (this takes a few minutes on 2 cores) =="
cmake --build build -j"$(nproc)" "${targets[@]}"
