#!/usr/bin/python3
"""cgad.torch.Gated(X) against X itself, the optimizer it wraps, step for step on the same tensors: what gating an
optimizer you already run costs (docs/python.md, "CGAD over the optimizer you already run").

    PYTHONPATH=build/python PYTHON bench/torch_gated.py [--layouts flat,gpt2-125m] [--size 16777216]
                       [--optimizers adam-fused,adamw-for-loop,sgd-nesterov,bnb-adamw8bit] [--threads 1,2]
                       [--repeats 5] [--steps 3] [--staleness 3]

X: torch.optim.Adam(fused=True), torch.optim.AdamW(foreach=False) (the for-loop), torch.optim.SGD(momentum=0.9,
nesterov=True), bitsandbytes.optim.AdamW8bit (its CPU path; skipped where bitsandbytes is not installed). Layouts
as bench/torch_peers.py's: "flat", one tensor of --size parameters; "gpt2-125m", GPT-2 small's 148 tensors.

One X at a time (GPT-2 small's parameters, pseudo-gradients and two optimizers' states are 3-4 GiB), the bare step
(``opt.step()``) and the gated one (``gated.step(staleness=tau)``) step the same parameters, taking turns round by
round (--repeats rounds of --steps steps each) so that both see the same machine load. Gated scales ``.grad`` in
place, so before every step of either contender the pseudo-gradients are copied back from a saved Δ, outside the
timed region (each step is timed alone). Prints, per X, layout and thread count, min/median/max milliseconds per
step of each and the ratio gated / bare: the ratio of the medians, and min/median/max of the per-round ratios
(the two timed back to back)."""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peers import cpu_model, layout_shapes, make_layout  # noqa: E402

from cgad.torch import Gated  # noqa: E402


def bnb_adamw8bit(params):
    import bitsandbytes
    return bitsandbytes.optim.AdamW8bit(params, lr=1e-3)


OPTIMIZERS = {
    "adam-fused": lambda ps: torch.optim.Adam(ps, lr=1e-3, fused=True),
    "adamw-for-loop": lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=False),
    "sgd-nesterov": lambda ps: torch.optim.SGD(ps, lr=1e-3, momentum=0.9, nesterov=True),
    "bnb-adamw8bit": bnb_adamw8bit,
}


class Contender:
    """X's step, bare or gated, on shared parameters whose .grad is restored from the saved Δ before each step."""

    def __init__(self, name, opt, params, grads, saved, staleness):
        self.name, self.opt, self.params, self.grads, self.saved = name, opt, params, grads, saved
        self.kwargs = {"staleness": staleness} if isinstance(opt, Gated) else {}
        self.times = []

    def step(self):
        for p, g, s in zip(self.params, self.grads, self.saved):
            g.copy_(s)
            p.grad = g
        start = time.perf_counter()
        self.opt.step(**self.kwargs)
        return time.perf_counter() - start

    def round(self, steps):
        self.times.append(statistics.mean(self.step() for _ in range(steps)))


def ms(values):
    return f"{min(values) * 1e3:.2f} / {statistics.median(values) * 1e3:.2f} / {max(values) * 1e3:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layouts", default="flat,gpt2-125m")
    ap.add_argument("--size", type=int, default=1 << 24)
    ap.add_argument("--optimizers", default=",".join(OPTIMIZERS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--staleness", type=int, default=3, help="the gated step's tau (sigma < 1 at tau > 0)")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {cpu_model()}; ms per step min / median / max of {args.repeats} rounds of "
          f"{args.steps} steps; gated at staleness {args.staleness}", flush=True)
    for threads in map(int, args.threads.split(",")):
        torch.set_num_threads(threads)
        for layout in args.layouts.split(","):
            for name in args.optimizers.split(","):
                values, saved = make_layout(layout_shapes(layout, args.size, 0), 1)
                params = [torch.nn.Parameter(v) for v in values]
                grads = [s.clone() for s in saved]
                try:
                    bare = Contender(name, OPTIMIZERS[name](params), params, grads, saved, args.staleness)
                    gated = Contender(f"Gated({name})", Gated(OPTIMIZERS[name](params)), params, grads, saved,
                                      args.staleness)
                except ImportError as e:
                    print(f"{threads} thread(s), {layout}, {name}: skipped ({e})", flush=True)
                    continue
                bare.step(), gated.step()  # the first steps make the state
                for _ in range(args.repeats):
                    bare.round(args.steps)
                    gated.round(args.steps)
                ratios = [g / b for g, b in zip(gated.times, bare.times)]
                print(f"{threads} thread(s), {layout}, {name}: bare {ms(bare.times)} ms, gated {ms(gated.times)} "
                      f"ms; gated/bare {statistics.median(gated.times) / statistics.median(bare.times):.3f} "
                      f"(per round {min(ratios):.3f} / {statistics.median(ratios):.3f} / {max(ratios):.3f})",
                      flush=True)
                del bare, gated, params, grads, saved, values


if __name__ == "__main__":
    main()
