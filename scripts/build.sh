#!/usr/bin/env bash
# Shared by the two README commands: install dependencies, configure and build into ./build. With target names
# (scripts/report.sh passes `cgad`), builds only those and what they need; with none, everything. The configure
# and build settings are CMakePresets.json's `release` preset.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cmake-preset.sh
echo "== [1/3] dependencies (Debian packages) =="
bash scripts/bootstrap.sh
echo "== [2/3] configure (CMake, Release; CUDA backend if nvcc is found) =="
cmake_configure release build
targets=()
for t in "$@"; do targets+=(--target "$t"); done
echo "== [3/3] build ${*:-everything} (this takes a few minutes on 2 cores) =="
cmake --build --preset release -j"$(nproc)" "${targets[@]}"
