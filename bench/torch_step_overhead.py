#!/usr/bin/python3
"""Seconds per cgad.torch step (``p.grad = g; opt.step()``) on the tensor lists where its per-step costs outside the
arithmetic show: "small-300" (300 tensors of 1024 to 4096 elements) and "gpt2-125m" (GPT-2 small's 148 tensors),
the layouts of bench/torch_peers.py, as one param group and as four (a multi-group step previews every group before
stepping any), with the state fp32 or q8.

    PYTHONPATH=build/python PYTHON bench/torch_step_overhead.py [--layouts small-300,gpt2-125m] [--threads 1]
                                   [--state fp32] [--groups 1,4] [--repeats 5] [--min-seconds 0.5]

Each configuration is timed --repeats times (each timing runs steps until it has lasted --min-seconds, after one
step that makes the state), the configurations taking turns round by round so they see the same machine load; it
prints min/median/max seconds per step. Only cgad.torch's public API is used, so the same script times any build."""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peers import layout_shapes, make_layout, time_steps  # noqa: E402

import cgad.torch  # noqa: E402


class Steps:
    def __init__(self, layout, groups, state, threads):
        self.name = f"{layout}, {groups} group(s), state={state}"
        values, self.grads = make_layout(layout_shapes(layout, 0, 0), 1)
        self.params = [torch.nn.Parameter(v) for v in values]
        split = [self.params[g::groups] for g in range(groups)]
        self.opt = cgad.torch.Adam([{"params": ps} for ps in split], lr=1e-3, state=state, threads=threads)
        self.run()

    def run(self):
        for p, g in zip(self.params, self.grads):
            p.grad = g
        assert self.opt.step().applied


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layouts", default="small-300,gpt2-125m")
    ap.add_argument("--groups", default="1,4")
    ap.add_argument("--state", default="fp32")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--min-seconds", type=float, default=0.5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for layout in args.layouts.split(","):
        work = [Steps(layout, int(g), args.state, args.threads) for g in args.groups.split(",")]
        times = {w.name: [] for w in work}
        for _ in range(args.repeats):
            for w in work:
                times[w.name].append(time_steps(w, args.min_seconds))
        for w in work:
            t = times[w.name]
            print(f"{w.name}: min {min(t) * 1e3:.2f} ms, median {statistics.median(t) * 1e3:.2f} ms, "
                  f"max {max(t) * 1e3:.2f} ms per step ({len(t)} repeats)", flush=True)
        del work


if __name__ == "__main__":
    main()
