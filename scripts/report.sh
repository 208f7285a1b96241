#!/usr/bin/env bash
# README command 1: set up, build, and run the main job, `cgad report` on its built-in defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
echo "== cgad report =="
./build/apps/cgad/cgad report "$@"
