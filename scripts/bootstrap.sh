#!/usr/bin/env bash
# Installs the Debian packages cgad builds against, skipping what is already there, and any further packages named
# as arguments (scripts/fuzz.sh adds clang and its libFuzzer runtime). Idempotent: a second run installs nothing.
# nvcc is not installed here (it comes with the machine image at /usr/local/cuda); without it the CUDA backend is
# simply not built.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  ninja-build                          # the generator of every CMakePresets.json preset
  clang-format                         # the format check (scripts/check-format.sh, CTest format_check)
  libmpfr-dev libgmp-dev libmpfi-dev   # the reference's arbitrary precision, the theory's intervals
  libboost-dev                         # Boost.Multiprecision (mpfr_float)
  librapidcheck-dev libgtest-dev       # property tests
  libbenchmark-dev                     # benchmarks
  librandom123-dev                     # Philox for stochastic rounding
  libcli11-dev nlohmann-json3-dev      # the command line and its JSON
  gnuplot-nox                          # figures (PNG) for reports
  python3-numpy python3-pytest         # the independent bitsandbytes emulator (proptests/bnb), run by /usr/bin/python3
  python3-dev pybind11-dev             # the Python package's module (python/)
  python3-torch                        # cgad.torch, its tests and examples/diloco_torch.py
  python3-venv python3-pip             # pip install . (pyproject.toml, docs/python.md)
)
packages+=("$@")

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "[bootstrap] all ${#packages[@]} packages already installed"
  exit 0
fi
echo "[bootstrap] installing: ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "[bootstrap] done"
