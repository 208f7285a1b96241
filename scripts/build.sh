#!/usr/bin/env bash
# Shared by the two README commands: install dependencies, configure and build into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== [1/3] dependencies (Debian packages) =="
bash scripts/bootstrap.sh
echo "== [2/3] configure (CMake, Release; CUDA backend if nvcc is found) =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
echo "== [3/3] build (this takes a few minutes on 2 cores) =="
cmake --build build -j"$(nproc)"
