#!/usr/bin/python3
"""The side-by-side table of docs/results/peers.md: cgad's own q8 step (cgad noise --stream) and the real
bitsandbytes / torchao optimizers (cgad.peers) on one synthetic stream of the noise study's distribution, with
every figure against the MPFR reference; and bitsandbytes' CPU step against cgad's reading of its CUDA kernel,
bit for bit, after 1 and all steps. Needs the pinned environment (python/requirements/peers.txt).

    PYTHONPATH=build/python build-venv/bin/python examples/peers_table.py --size 4096 --steps 1000 \\
        --scale-range 1e5 --seed 1

--json is written atomically (examples/atomic_file.py) and may not be the --stream file. Bad arguments and a --json
that cannot be written end in one line on stderr and exit status 2.
"""
import json
import os
import sys
import tempfile
import time

import numpy as np

import cgad.peers as P

import atomic_file
from example_args import SEED, Parser, check_memory, check_output, entry_point, input_file, integer, real

PEER_ROWS = ("bnb-adam8bit", "bnb-adamw8bit", "torchao-adamw8bit", "torchao-adamw4bit")


def main(argv):
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=integer(at_least=1), nargs="+", default=[4096], help="tensor sizes of the stream")
    p.add_argument("--steps", type=integer(at_least=1), default=1000)
    p.add_argument("--scale-range", type=real(at_least=1), default=1e5,
                   help="R: element i's gradient scale is R^-w, w uniform in [0, 1]")
    p.add_argument("--seed", type=SEED, default=1, help="0..2^32 - 1")
    p.add_argument("--delays", choices=["heavy", "paper"], default="heavy")
    p.add_argument("--stream", type=input_file, help="a recorded replay stream instead of the synthetic one")
    p.add_argument("--json", help="write every row's figures here (atomically; not the --stream file)")
    a = p.parse_args(argv)
    if a.json is not None:
        check_output(p, "--json", a.json, (a.stream,))
    if a.stream is None:
        # The synthetic stream is held as float32 arrays (4 bytes a value) and written to a temporary JSON-lines
        # file that each run reads back as float32 arrays again: at least 8 bytes a value at the peak.
        check_memory(p, f"--size {' '.join(map(str, a.size))} --steps {a.steps}", 8 * sum(a.size) * a.steps)
    return table(a)  # a malformed --stream is found by the reader that first parses it: entry_point says so in one line


def table(a):
    with tempfile.TemporaryDirectory() as d:
        path = a.stream
        if path is None:
            path = P.write_stream(P.synthetic_stream(a.size, a.steps, a.seed, a.scale_range, a.delays),
                                  os.path.join(d, "s.jsonl"))
        t = time.time()
        ref = P.reference(path)
        rows = {}
        for row in P.CGAD_ROWS:
            rows[row] = P.cgad_row(path, row)
        last = len(P.read_stream(path)["events"])
        thetas = {}
        for name in PEER_ROWS:
            out = P.run(name, path, reference_state=ref, checkpoints=(1, last))
            rows[name] = out["tensors"]
            thetas[name] = out["checkpoints"]
        out = P.run("cgad.torch", path, reference_state=ref, checkpoints=(1, last), state="q8", q8_semantics="bnb")
        rows["cgad.torch-q8-bnb"] = out["tensors"]
        thetas["cgad.torch-q8-bnb"] = out["checkpoints"]
    what = (f"recorded {a.stream}" if a.stream else
            f"sizes {a.size} R {a.scale_range:g} seed {a.seed} delays {a.delays}")
    print(f"# stream: {what}, {last} events ({time.time() - t:.0f} s); reference max step "
          f"{ref['max_step_over_lr']:.3g} lr")
    print("| implementation | tensor | state | v stored as 0 | v at lowest code | m = 0 | m sign flips | "
          "steps > 5η | max step/η | v bias / RMS | m err RMS (√v units) | θ drift RMS / max (η) |")
    print("|" + "---|" * 12)
    for name, tensors in rows.items():
        for k, r in enumerate(tensors):
            low = "—" if r.get("v_lowest_code_fraction") is None else f"{r['v_lowest_code_fraction']:.4g}"
            print(f"| {name} | {k} ({r.get('size', '')}) | {r.get('kind', '')} | {r['v_zero_fraction']:.4g} | {low} | "
                  f"{r['m_zero_fraction']:.4g} | {r['m_sign_flip_fraction']:.4g} | {r['step_over_5lr_fraction']:.3g} | "
                  f"{r['max_step_over_lr']:.3g} | {r['v']['bias']:.3g} / {r['v']['rms']:.3g} | {r['m']['rms']:.3g} | "
                  f"{r['theta']['rms']:.3g} / {r['theta']['max_abs']:.3g} |")
    for step in sorted(thetas["bnb-adam8bit"]):
        c = P.differing_bits(thetas["bnb-adam8bit"][step], thetas["cgad.torch-q8-bnb"][step])
        w = P.differing_bits(thetas["bnb-adam8bit"][step], thetas["bnb-adamw8bit"][step])
        print(f"after {step} steps: bitsandbytes CPU vs cgad q8_semantics=bnb: θ differs in {c['differing']} of "
              f"{c['of']} elements, max {c['max_ulps']} ulps; Adam8bit vs AdamW8bit (weight decay 0): "
              f"{w['differing']} differ")
    if a.json:
        try:
            with atomic_file.replacing(a.json) as f:
                json.dump({k: [{q: w for q, w in r.items() if q != "engine"} for r in v] for k, v in rows.items()},
                          f, indent=1)
        except OSError as e:  # a full disk, no permission: an earlier --json file stays as it was
            print(f"peers_table: cannot write --json {a.json}: {e.strerror or e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    entry_point(main)
