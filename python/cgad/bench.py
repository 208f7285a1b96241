"""The roofline of cgad's step for benchmarks run from Python (bench/torch_peers.py).

The roofline is the step's in-place twin (cgad::bench::InPlaceWorkload): one pass over buffers laid out as the
step's that reads and writes, in place, exactly the bytes one step of that configuration moves -- the fp32
pseudo-gradient read, the parameters and every moment read and written -- with the arithmetic left out. A step's
ratio to it (roofline seconds / step seconds) is the fraction of the bandwidth limit the step reaches.

    from cgad.bench import roofline_seconds, InPlaceTwin, step_bytes
    roofline_seconds("fp32", "fp32", "adam", 1 << 24, threads=2, min_seconds=0.2)
    twin = InPlaceTwin("fp32", "fp32", "adam", 1 << 24, 2); twin.run(); twin.time(0.2)

params: "fp32" or "bf16"; state: "fp32", "bf16" or "q8"; optimizer: cgad.torch's names ("cgad", "pa-cgad",
"adam-decay", "adam", "nesterov", "sdm"); threads: 0 for every core. An unknown name is an InputError (a
ValueError).
"""
from ._numerics import InPlaceTwin, cpu_isa, roofline_seconds, step_bytes

__all__ = ["InPlaceTwin", "cpu_isa", "roofline_seconds", "step_bytes"]
