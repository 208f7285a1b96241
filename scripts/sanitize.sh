#!/usr/bin/env bash
# The sanitizer legs of CI, each in a build folder of its own, CUDA, benchmarks and the Python module
# off (the first two do not run under a sanitizer here; an instrumented module cannot load into an uninstrumented
# interpreter): `asan` builds everything with AddressSanitizer + UndefinedBehaviorSanitizer and runs
# `ctest -L ci`; `tsan` builds with ThreadSanitizer (the CPU step's ifunc clones off) and runs the tests whose
# code runs on several threads. Every error stops the process that hit it (halt_on_error, propagated to the
# `cgad` processes the CLI tests start through the environment) and fails its test. The flags, targets, filters and
# sanitizer options are CMakePresets.json's `asan` and `tsan` presets (configure, build and test).
#   bash scripts/sanitize.sh asan|tsan
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cmake-preset.sh
leg="${1:?usage: sanitize.sh asan|tsan}"
jobs="$(nproc)"
# Both legs build at -O1 -g1: line tables for the reports, and a build about half as long as -O2 -g on 2 cores.
case "$leg" in
  asan)
    # Every ci test but the install test, which builds an uninstrumented consumer against the instrumented
    # libraries, which cannot link; the package is checked by the normal leg.
    cmake_configure asan build-asan
    cmake --build --preset asan -j"$jobs"
    ctest --preset asan -j"$jobs"
    ;;
  tsan)
    # The CPU step's ISA versions are plain functions picked at run time (cpu_isa.hpp), so TSan runs them all (the
    # GNU ifunc clones they replaced crashed its runtime and had to be left out).
    cmake_configure tsan build-tsan
    # Only the tests whose code runs on several threads are built and run. fastpath_thread_pool_test: one pool run
    # from several threads at once (how the Python binding steps an optimizer from whichever thread calls it); its
    # fork test is left out (TSan does not support threads started after a multithreaded fork). The Python step
    # itself is not run here: the module is not built.
    cmake --build --preset tsan -j"$jobs"
    ctest --preset tsan -j"$jobs"
    ;;
  *) echo "sanitize.sh: unknown leg '$leg' (asan or tsan)" >&2; exit 2 ;;
esac
