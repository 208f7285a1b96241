#!/usr/bin/env bash
# Builds, on a machine without a GPU, the self-contained folder that checks the CUDA backend on one
# (docs/gpu.md):
#   scripts/gpu-check.sh --out DIR [--build BUILD_DIR] [--jobs N]
# BUILD_DIR (default build-gpu/) is a CMake build of its own: Release, CUDA on for sm_90, the Python module off,
# the CUDA runtime static (CGAD_CUDA_STATIC_RUNTIME), MPFR, GMP and MPFI taken from their static archives, gtest
# and rapidcheck static (Debian ships them only so). Debian has no static Google Benchmark, so the benchmark links
# libbenchmark.so, which is copied beside the binaries with the C++ runtime it was built against
# (libstdc++.so.6, libgcc_s.so.1); every binary's RUNPATH is $ORIGIN, so they are found there and the binaries
# need nothing of the target machine but glibc and the NVIDIA driver.
# DIR gets the GPU tests (fastpath_cuda_test, adversarial_test), the CUDA benchmark (fastpath_cuda_bench), those
# libraries, run.sh (scripts/gpu/run.sh), README.txt, BUILD_INFO.txt and VERIFY.txt. The final check (also
# written to VERIFY.txt) fails the script unless every ELF file in DIR needs only glibc and files beside it (no
# libmpfr, libgmp, libmpfi, libcudart, gtest or rapidcheck), ldd resolves everything else into DIR, the CUDA
# binaries carry their device code and a statically linked runtime, and each binary starts and lists its tests.
# DIR is replaced whole; a DIR that exists and was not made by this script is refused.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
source "$repo/scripts/cmake-preset.sh"
out="" build="$repo/build-gpu" jobs="$(nproc)"
usage() { echo "usage: scripts/gpu-check.sh --out DIR [--build BUILD_DIR] [--jobs N]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || usage; out="$2"; shift 2 ;;
    --build) [ $# -ge 2 ] || usage; build="$2"; shift 2 ;;
    --jobs) [ $# -ge 2 ] || usage; jobs="$2"; shift 2 ;;
    *) usage ;;
  esac
done
[ -n "$out" ] || usage
marker=".cgad-gpu-check"
if [ -e "$out" ] && [ ! -e "$out/$marker" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "gpu-check: $out exists and was not made by this script; not replacing it" >&2
  exit 2
fi

nvcc="${CUDACXX:-/usr/local/cuda/bin/nvcc}"
if [ ! -x "$nvcc" ]; then
  echo "gpu-check: no nvcc at $nvcc (set CUDACXX); the GPU folder needs the CUDA compiler, not a GPU" >&2
  exit 2
fi
# The static archives, where the compiler driver finds them (it prints the bare name when it finds none).
static_lib() {
  local path
  path="$(gcc -print-file-name="lib$1.a")"
  if [ "$path" = "lib$1.a" ] || [ ! -f "$path" ]; then
    echo "gpu-check: no static lib$1.a (Debian's lib$1-dev ships it)" >&2
    exit 2
  fi
  echo "$path"
}
mpfr_a="$(static_lib mpfr)" gmp_a="$(static_lib gmp)" mpfi_a="$(static_lib mpfi)"

fresh="a fresh build folder"
if [ -f "$build/CMakeCache.txt" ]; then fresh="an existing build folder (incremental)"; fi
# The gpu-check build preset names the same three; the build here is of BUILD_DIR, which a build preset cannot name.
targets=(fastpath_cuda_test adversarial_test fastpath_cuda_bench)
start=$SECONDS
echo "== gpu-check: configure $build"
mkdir -p "$build"
# CMakePresets.json's gpu-check preset has the fixed settings; nvcc and the static archives are this machine's.
# pkg_check_modules and FindMPFI look their libraries up through these cache variables; set beforehand, they
# are taken as found, so the imported targets name the static archives.
cmake_configure gpu-check "$build" -S "$repo" -B "$build" -DCMAKE_CUDA_COMPILER="$nvcc" \
  -Dpkgcfg_lib_MPFR_mpfr="$mpfr_a" -Dpkgcfg_lib_MPFR_gmp="$gmp_a" -Dpkgcfg_lib_GMP_gmp="$gmp_a" \
  -DMPFI_LIBRARY="$mpfi_a" >"$build/gpu-check-configure.log" 2>&1 \
  || { cat "$build/gpu-check-configure.log" >&2; exit 1; }
echo "== gpu-check: build ${targets[*]} (-j$jobs)"
cmake --build "$build" -j"$jobs" --target "${targets[@]}"
build_seconds=$((SECONDS - start))

echo "== gpu-check: assemble $out"
rm -rf "$out"
mkdir -p "$out"
touch "$out/$marker"
cp "$build/proptests/fastpath/fastpath_cuda_test" "$build/proptests/fastpath/adversarial_test" "$build/bench/fastpath_cuda_bench" "$out/"
# The shared libraries that are not glibc's, resolved as the loader resolves them here, copied under their sonames.
glibc_re='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|ld-linux-x86-64\.so\.2|linux-vdso\.so\.1)$'
for binary in "$out"/fastpath_cuda_test "$out"/adversarial_test "$out"/fastpath_cuda_bench; do
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r soname path; do
    if ! [[ "$soname" =~ $glibc_re ]] && [ ! -e "$out/$soname" ]; then cp -L "$path" "$out/$soname"; fi
  done
done
install -m 0755 "$repo/scripts/gpu/run.sh" "$out/run.sh"
cp "$repo/scripts/gpu/README.txt" "$out/README.txt"
{
  echo "commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n), $( . /etc/os-release && echo "$PRETTY_NAME"), $(gcc --version | head -n 1)"
  echo "$("$nvcc" --version | grep -o 'release [0-9.]*, V[0-9.]*'), sm_90 SASS + compute_90 PTX, --fmad=false"
  echo "configure and build of the three targets: ${build_seconds} s with -j$jobs in $fresh"
} >"$out/BUILD_INFO.txt"

# The final check: what the folder needs from the machine it is copied to.
verify() {
  local dir="$1" ok=0 file needed runpath
  for file in "$dir"/*; do
    readelf -h "$file" >/dev/null 2>&1 || continue
    needed="$(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')"
    runpath="$(readelf -d "$file" | sed -En 's/.*\((RUNPATH|RPATH)\).*\[(.*)\]/\2/p')"
    echo "$(basename "$file"): NEEDED $(echo $needed)${runpath:+; RUNPATH $runpath}; glibc symbol versions up to $(
      readelf -V --wide "$file" | grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -n 1)"
    for lib in $needed; do
      if [[ "$lib" =~ (mpfr|gmp|mpfi|cudart|gtest|rapidcheck) ]]; then
        echo "  FAIL: links $lib dynamically"; ok=1
      elif ! [[ "$lib" =~ $glibc_re ]] && [ ! -e "$dir/$lib" ]; then
        echo "  FAIL: needs $lib, which is neither glibc nor beside it"; ok=1
      fi
    done
    if [ -x "$file" ] && [ "${file##*.so*}" = "$file" ]; then  # an executable: its libraries must come from DIR
      if [ -n "$(echo "$needed" | grep -Ev "$glibc_re")" ] && [ "$runpath" != '$ORIGIN' ]; then
        echo "  FAIL: RUNPATH is '$runpath', not \$ORIGIN"; ok=1
      fi
      while read -r soname arrow path _; do
        [ "$arrow" = "=>" ] || continue
        if [ "$path" = "not" ]; then echo "  FAIL: ldd: $soname not found"; ok=1
        elif ! [[ "$soname" =~ $glibc_re ]] && [ "$(dirname "$path")" != "$dir" ]; then
          echo "  FAIL: ldd resolves $soname to $path, outside the folder"; ok=1
        fi
      done < <(ldd "$file")
      echo "  ldd: $(ldd "$file" | awk '$2 == "=>" {printf "%s => %s; ", $1, $3}')"
      local inside=""
      for symbol in mpfr_init2 __gmpz_init mpfi_init2 cudaMalloc; do
        if readelf -Ws --wide "$file" | awk -v s="$symbol" '$8 == s && $7 != "UND" {found = 1} END {exit !found}'; then
          inside="$inside $symbol"
        fi
      done
      echo "  statically linked in (defined here):${inside:- none of mpfr_init2, __gmpz_init, mpfi_init2, cudaMalloc}"
      if readelf -S --wide "$file" | grep -q '\.nv_fatbin'; then
        local runtime
        runtime="$(readelf -Ws --wide "$file" | awk '$8 == "cudaGetDeviceCount" && $7 != "UND"' | wc -l)"
        if [ "$runtime" -eq 0 ]; then echo "  FAIL: device code but no statically linked CUDA runtime"; ok=1
        else echo "  device code (.nv_fatbin) and the CUDA runtime linked in (cudaGetDeviceCount defined)"; fi
      else
        echo "  FAIL: no device code (.nv_fatbin section)"; ok=1
      fi
    fi
  done
  echo "the folder needs glibc $(for file in "$dir"/*; do readelf -V --wide "$file" 2>/dev/null; done |
    grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -n 1 | sed 's/GLIBC_//') or later (and the NVIDIA driver)"
  # Each binary starts with only the folder's libraries (no LD_LIBRARY_PATH) and lists what it would run.
  local tests benchmarks
  tests="$(env -i PATH=/usr/bin:/bin "$dir/fastpath_cuda_test" --gtest_list_tests | grep -c '^  ' || true)"
  benchmarks="$(env -i PATH=/usr/bin:/bin "$dir/fastpath_cuda_bench" --benchmark_list_tests=true | grep -c '^CudaStep/' || true)"
  echo "fastpath_cuda_test lists $tests tests, fastpath_cuda_bench $benchmarks benchmarks"
  [ "$tests" -gt 0 ] && [ "$benchmarks" -gt 0 ] || { echo "  FAIL: a binary did not start"; ok=1; }
  env -i PATH=/usr/bin:/bin "$dir/adversarial_test" --gtest_filter='OverflowRule.*' --gtest_list_tests >/dev/null \
    || { echo "  FAIL: adversarial_test did not start"; ok=1; }
  [ -x "$dir/run.sh" ] && [ -f "$dir/README.txt" ] || { echo "  FAIL: run.sh or README.txt missing"; ok=1; }
  if [ "$ok" -eq 0 ]; then echo "VERIFIED: no binary links MPFR, GMP, MPFI or cudart dynamically"; fi
  return "$ok"
}
echo "== gpu-check: verify"
status=0
verify "$(cd "$out" && pwd)" >"$out/VERIFY.txt" || status=$?
cat "$out/VERIFY.txt"
du -sh "$out" | awk '{print "== gpu-check: " $2 " holds " $1}'
ls -l "$out" | awk 'NR > 1 {printf "   %10s %s\n", $5, $9}'
if [ "$status" -ne 0 ]; then
  echo "gpu-check: FAILED the final check (see above)" >&2
  exit 1
fi
echo "== gpu-check: done in $((SECONDS - start)) s; copy $out to the GPU machine and run ./run.sh there (docs/gpu.md)"
