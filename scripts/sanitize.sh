#!/usr/bin/env bash
# The sanitizer legs of CI, each in a build folder of its own, CUDA, benchmarks and the Python module
# off (the first two do not run under a sanitizer here; an instrumented module cannot load into an uninstrumented
# interpreter): `asan` builds everything with AddressSanitizer + UndefinedBehaviorSanitizer and runs
# `ctest -L ci`; `tsan` builds with ThreadSanitizer (the CPU step's ifunc clones off) and runs the tests whose
# code runs on several threads. Every error stops the process that hit it (halt_on_error, propagated to the
# `cgad` processes the CLI tests start through the environment) and fails its test.
#   bash scripts/sanitize.sh asan|tsan
set -euo pipefail
cd "$(dirname "$0")/.."
leg="${1:?usage: sanitize.sh asan|tsan}"
jobs="$(nproc)"
# -O1 -g1: line tables for the reports, and a build about half as long as -O2 -g on 2 cores.
common=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DCGAD_ENABLE_CUDA=OFF
        -DCGAD_BUILD_BENCH=OFF -DCGAD_BUILD_PYTHON=OFF)
case "$leg" in
  asan)
    flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    cmake -S . -B build-asan "${common[@]}" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
    cmake --build build-asan -j"$jobs"
    export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
    # The install test builds an uninstrumented consumer against the instrumented libraries, which cannot link; the
    # package is checked by the normal leg.
    ctest --test-dir build-asan -L ci -E '^install_consumer_test$' --output-on-failure -j"$jobs" --timeout 1500
    ;;
  tsan)
    flags="-fsanitize=thread -fno-omit-frame-pointer"
    # The CPU step's ISA versions are plain functions picked at run time (cpu_isa.hpp), so TSan runs them all (the
    # GNU ifunc clones they replaced crashed its runtime and had to be left out).
    cmake -S . -B build-tsan "${common[@]}" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread"
    # fastpath_thread_pool_test: one pool run from several threads at once (how the Python binding steps an
    # optimizer from whichever thread calls it); its fork test is left out (TSan does not support threads
    # started after a multithreaded fork). The Python step itself is not run here: the module is not built.
    threaded=(fastpath_step_test fastpath_fingerprint_test fastpath_state_file_test fastpath_thread_pool_test
              simulate_sweep_test simulate_cli_test cgad)
    cmake --build build-tsan -j"$jobs" --target "${threaded[@]}"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
    ctest --test-dir build-tsan -L ci --output-on-failure -j"$jobs" --timeout 1500 \
      -R '^(FastpathStep|FastpathFingerprint|FastpathStateFile|FastpathThreadPool|SimulateSweep|SimulateCli)\.'
    ;;
  *) echo "sanitize.sh: unknown leg '$leg' (asan or tsan)" >&2; exit 2 ;;
esac
