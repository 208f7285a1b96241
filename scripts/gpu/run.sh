#!/usr/bin/env bash
# The prepared GPU check (docs/gpu.md), run on the GPU machine from the folder scripts/gpu-check.sh assembled:
#   ./run.sh [RESULTS_FILE]          (default: results.txt beside this script)
# Runs, in this order and each under its own time limit (at most 450 s together, so the whole check fits in
# 8 minutes with the machine's start-up):
#   1. the GPU tests (fastpath_cuda_test: CUDA against the CPU backend bit for bit; adversarial_test's overflow
#      refusal on the device), which must see a GPU: a run where they skip for want of one fails;
#   2. compute-sanitizer memcheck (with leak check), racecheck, initcheck and synccheck over a subset of the GPU
#      tests that reaches every kernel path (misaligned fragments, tensor boundaries, q8, a second stream);
#   3. the bandwidth benchmark: the step for bf16 parameters with q8 state and for fp32/fp32, each timed against a
#      device-to-device copy of the same bytes in the same run (ratio_to_copy; the goal is >= 0.85).
# Everything goes to one results file; the exit status is 1 when any step failed (a test, a sanitizer report, a
# time limit, a missing tool) and 0 otherwise. A bandwidth ratio under the goal is reported, not failed: it is a
# measurement, not a correctness check.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
results="${1:-$here/results.txt}"
log_dir="$here/logs"
mkdir -p "$log_dir"
: >"$results"
summary=()
failed=0

say() { echo "$*" | tee -a "$results"; }
record() {  # record NAME STATUS DETAIL
  summary+=("$(printf '%-28s %-6s %s' "$1" "$2" "$3")")
  [ "$2" = PASS ] || failed=1
}
# run_step NAME SECONDS LOG COMMAND...: runs COMMAND under `timeout`, its output in LOG and at the end of the
# results file; returns the command's status (124 when the time limit stopped it).
run_step() {
  local name="$1" limit="$2" log="$3"; shift 3
  local start=$SECONDS status
  say "== $name (limit ${limit} s): $*"
  timeout --signal=TERM --kill-after=10 "$limit" "$@" >"$log" 2>&1
  status=$?
  say "   exit status $status after $((SECONDS - start)) s; last lines of $(basename "$log"):"
  tail -n 25 "$log" | sed 's/^/   | /' >>"$results"
  return "$status"
}

say "cgad GPU check, $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"
[ -f BUILD_INFO.txt ] && sed 's/^/build: /' BUILD_INFO.txt >>"$results"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader \
    2>&1 | sed 's/^/gpu: /' | tee -a "$results"
else
  say "gpu: nvidia-smi not found"
fi

# The copied C++ runtime (libstdc++.so.6, libgcc_s.so.1) needs the glibc it was built against (VERIFY.txt); on an
# older glibc the machine's own C++ runtime (GCC 12's or newer) serves instead.
if ! ./fastpath_cuda_test --gtest_list_tests >/dev/null 2>"$log_dir/start.log"; then
  if grep -q 'GLIBC_' "$log_dir/start.log" && [ -f libstdc++.so.6 ]; then
    mkdir -p unused-libs && mv libstdc++.so.6 libgcc_s.so.1 unused-libs/
    say "note: this glibc is older than the copied libstdc++ needs; using the machine's C++ runtime"
  else
    say "note: fastpath_cuda_test does not start: $(head -n 3 "$log_dir/start.log")"
  fi
fi

# 1. The GPU tests. A skip for want of a device would make a green run mean nothing, so it fails here.
no_device='no usable CUDA device|no CUDA device in this machine'
for t in "fastpath_cuda_test:120:" "adversarial_test:30:--gtest_filter=OverflowRule.*"; do
  binary="${t%%:*}" rest="${t#*:}"
  limit="${rest%%:*}" filter="${rest#*:}"
  log="$log_dir/$binary.log"
  if run_step "$binary" "$limit" "$log" "./$binary" ${filter:+"$filter"} --gtest_color=no; then
    if grep -Eq "$no_device" "$log"; then
      record "$binary" FAIL "the tests saw no CUDA device (they skipped)"
    else
      record "$binary" PASS "$(grep -E '^\[  PASSED  \]' "$log" | tail -n 1)"
    fi
  else
    status=$?
    record "$binary" FAIL "exit status $status ($(grep -cE '^\[  FAILED  \]' "$log") FAILED lines)"
  fi
done

# 2. compute-sanitizer: on PATH, in the CUDA toolkit, or wherever the image put it.
sanitizer="$(command -v compute-sanitizer 2>/dev/null || true)"
if [ -z "$sanitizer" ]; then
  for candidate in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer \
                   /usr/local/cuda-*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer \
                   /opt/nvidia/*/*/compute-sanitizer; do
    [ -x "$candidate" ] && { sanitizer="$candidate"; break; }
  done
fi
if [ -z "$sanitizer" ]; then
  sanitizer="$(find / -xdev -maxdepth 7 -name compute-sanitizer -type f -perm -u+x 2>/dev/null | head -n 1)"
fi
# Misaligned and aligned PA-CGAD fragments (the agent's three paths, every format, q8 and its fp32 fallback), a
# stream of the caller's, a captured graph replayed (the schedule and commit kernels on device counters) and the
# state-file copies: every kernel and copy path in a few hundred steps.
subset='FastpathCuda.PaCgad*:FastpathCuda.NonDefaultStream*:FastpathCuda.CapturedGraph*:FastpathCuda.StateFiles*'
if [ -z "$sanitizer" ]; then
  say "== compute-sanitizer: not found on PATH, under /usr/local/cuda* or /opt/nvidia"
  record "compute-sanitizer" FAIL "not found"
else
  say "== compute-sanitizer: $sanitizer ($("$sanitizer" --version 2>&1 | grep -i version | head -n 1))"
  for tool in memcheck racecheck initcheck synccheck; do
    extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    log="$log_dir/sanitizer-$tool.log"
    if run_step "sanitizer $tool" 50 "$log" "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 99 \
         ./fastpath_cuda_test "--gtest_filter=$subset" --gtest_color=no; then
      if grep -Eq "$no_device" "$log"; then
        record "sanitizer $tool" FAIL "the tests saw no CUDA device under the sanitizer"
      else
        record "sanitizer $tool" PASS "$(grep -E 'ERROR SUMMARY' "$log" | tail -n 1)"
      fi
    else
      status=$?
      why="exit status $status"
      [ "$status" = 99 ] && why="errors reported: $(grep -E 'ERROR SUMMARY' "$log" | tail -n 1)"
      [ "$status" = 124 ] && why="did not finish within 50 s"
      record "sanitizer $tool" FAIL "$why"
    fi
  done
fi

# 3. The bandwidth benchmark: 2^24 and 2^28 parameters, each configuration against a copy timed in the same run.
bench_json="$log_dir/bench.json"
filter='^CudaStep/cgad/(bf16/q8|fp32/fp32)/(16777216|268435456)/manual_time$'
if run_step "fastpath_cuda_bench" 100 "$log_dir/bench.log" ./fastpath_cuda_bench "--benchmark_filter=$filter" \
     --benchmark_min_time=0.2 --benchmark_out="$bench_json" --benchmark_out_format=json --benchmark_color=false; then
  measured="$(grep -c '"ratio_to_copy"' "$bench_json" 2>/dev/null || true)"
  if grep -q 'skipped' "$log_dir/bench.log"; then
    record "fastpath_cuda_bench" FAIL "skipped: $(grep -m1 skipped "$log_dir/bench.log")"
  elif [ "${measured:-0}" -ne 4 ]; then
    record "fastpath_cuda_bench" FAIL "$measured of the 4 benchmarks measured ($(head -n 1 "$log_dir/bench.log"))"
  else
    record "fastpath_cuda_bench" PASS "ratios below"
    say "== bandwidth (bytes counted as bench/include/cgad/bench/workloads.hpp's step_bytes; goal ratio >= 0.85)"
    if command -v python3 >/dev/null 2>&1; then
      python3 - "$bench_json" <<'EOF' | tee -a "$results"
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    ratio = b.get("ratio_to_copy", 0.0)
    print(f"   {b['name']:<34} {b['real_time']:>10.1f} us  {b.get('bytes_per_second', 0) / 1e12:6.3f} TB/s"
          f"  ratio_to_copy {ratio:.3f}  {'meets' if ratio >= 0.85 else 'BELOW'} the 0.85 goal")
EOF
    else
      grep -E '^CudaStep' "$log_dir/bench.log" | sed 's/^/   /' | tee -a "$results"
    fi
  fi
else
  status=$?
  record "fastpath_cuda_bench" FAIL "exit status $status"
fi

say ""
say "== summary ($((SECONDS)) s in all; logs in $log_dir)"
for line in "${summary[@]}"; do say "$line"; done
if [ "$failed" -ne 0 ]; then
  say "RESULT: FAIL"
  exit 1
fi
say "RESULT: PASS"
