#!/usr/bin/env bash
# README command 1: set up, build the `cgad` command (only it and the libraries it links, not the tests or the
# benchmarks), and run the main job, `cgad report` on its built-in defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh cgad
echo "== cgad report =="
./build/apps/cgad/cgad report "$@"
