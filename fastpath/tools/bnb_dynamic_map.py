#!/usr/bin/python3
"""Prints bitsandbytes' 8-bit dynamic quantization maps as hexfloats, one per line.

The formula is bitsandbytes' `functional.create_dynamic_map(signed, max_exponent_bits=7, total_bits=8)`,
unchanged in substance from release 0.44.0 through 0.50.1 (0.49 only spelled `total_bits - (1 if signed
else 1)` as `total_bits - 1` and pinned the linspace dtype to float32, which was already the default).
It is restated here in our own words; it needs PyTorch, because the float32 rounding of torch.linspace,
of the means and of the scale product is part of the map's definition.

For each exponent i = 0..6, take n = 2^i + 1 (signed) or 2^(i+1) + 1 (unsigned) points of
linspace(0.1, 1, n) in float32, the n-1 midpoints of consecutive points (float32), scaled by 10^(i-6)
(a Python float, cast to float32 by the tensor product); the signed map also takes their negatives.
Then 0 and 1 are appended and the 256 values are sorted.

Usage: ATEN_CPU_CAPABILITY=avx2 bnb_dynamic_map.py > data/bnb_maps_torch1.13_avx2.txt (and default, avx512):
the last bits depend on the vector width torch picks; proptests/fastpath/fastpath_q8_test.cpp compares our maps with
each of the files in data/, made with Debian's python3-torch 1.13.1.
"""
import torch


def dynamic_map(signed):
    values = []
    for i in range(7):
        points = 2 ** i + 1 if signed else 2 ** (i + 1) + 1
        grid = torch.linspace(0.1, 1, points, dtype=torch.float32)
        centres = (grid[:-1] + grid[1:]) / 2.0
        scaled = (10 ** (i - 6)) * centres
        values += scaled.tolist()
        if signed:
            values += (-(10 ** (i - 6)) * centres).tolist()
    values += [0.0, 1.0]
    assert len(values) == 256
    return sorted(torch.tensor(values, dtype=torch.float32).tolist())


def main():
    import os
    print("# bitsandbytes dynamic maps built by torch", torch.__version__, "with ATEN_CPU_CAPABILITY =",
          os.environ.get("ATEN_CPU_CAPABILITY", "(unset)"))
    print("# signed map, then unsigned map: 256 float32 hexfloats each, ascending")
    for signed in (True, False):
        for code in dynamic_map(signed):
            print(float(code).hex())


if __name__ == "__main__":
    main()
