#!/usr/bin/env bash
# The fuzzing leg of CI: builds the libFuzzer targets of fuzz/ with clang in build-fuzz (the libraries
# instrumented for coverage, AddressSanitizer and UndefinedBehaviorSanitizer; CUDA, benchmarks, tests and the
# Python module off) and runs each from a copy of its checked-in seed corpus for a fixed number of inputs with a
# fixed seed (FUZZ_SEED, default 1), so that CI explores the same inputs on every run and a finding is never a
# matter of luck or of the machine's speed; FUZZ_SECONDS (default 120) caps each target's time on a slow machine.
# For deeper runs by hand, raise FUZZ_RUNS_SCALE (default 1) or vary FUZZ_SEED. A crash, sanitizer report, uncaught
# exception or input slower than 10 s fails the leg; libFuzzer writes the input that did it to
# build-fuzz/artifacts/, which then belongs in fuzz/corpus/<target>/ once fixed. The build's settings are
# CMakePresets.json's `fuzz` preset.
#   bash scripts/fuzz.sh [target ...]      (default: every target)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cmake-preset.sh
seconds="${FUZZ_SECONDS:-120}"
seed="${FUZZ_SEED:-1}"
scale="${FUZZ_RUNS_SCALE:-1}"
# Inputs per target: about 30 s each on the 2-core build machine (2026-12-01).
declare -A runs=([fuzz_replay_stream]=600000 [fuzz_part_file]=150000 [fuzz_state_bytes]=300000
                 [fuzz_bf16_text]=2000000 [fuzz_decimal_number]=800000)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_replay_stream fuzz_part_file fuzz_state_bytes fuzz_bf16_text fuzz_decimal_number)
bash scripts/bootstrap.sh clang libclang-rt-14-dev
cmake_configure fuzz build-fuzz
cmake --build --preset fuzz -j"$(nproc)" --target "${targets[@]}"
mkdir -p build-fuzz/artifacts
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
for t in "${targets[@]}"; do
  name="${t#fuzz_}"
  work="build-fuzz/corpus/$name"
  rm -rf "$work" && mkdir -p "$work"
  cp fuzz/corpus/"$name"/* "$work"/
  n=$(( ${runs[$t]} * scale ))
  echo "== fuzz $t: $n inputs, seed $seed, at most ${seconds} s (corpus: $(ls fuzz/corpus/"$name" | wc -l) files) =="
  status=0
  "build-fuzz/fuzz/$t" -runs="$n" -seed="$seed" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="build-fuzz/artifacts/$name-" -print_final_stats=1 "$work" > "build-fuzz/$name.log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    tail -n 60 "build-fuzz/$name.log"
    echo "fuzz: $t failed (status $status); the input is in build-fuzz/artifacts/" >&2
    exit 1
  fi
  grep -E '^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|stat::new_units_added' "build-fuzz/$name.log" | tail -n 3
done
