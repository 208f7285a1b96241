#!/usr/bin/python3
"""Seconds per cgad.torch step (``p.grad = g; opt.step()``) on the tensor lists where its per-step costs outside the
arithmetic show: "small-300" (300 tensors of 1024 to 4096 elements) and "gpt2-125m" (GPT-2 small's 148 tensors),
the layouts of bench/torch_peers.py, as one param group and as four (a multi-group step previews every group before
stepping any), with the state fp32 or q8.

    PYTHONPATH=build/python PYTHON bench/torch_step_overhead.py [--layouts small-300,gpt2-125m] [--threads 1]
                                   [--state fp32] [--groups 1,4] [--live-check on] [--repeats 5]
                                   [--min-seconds 0.5]

Each configuration is timed --repeats times (each timing runs steps until it has lasted --min-seconds, after one
step that makes the state), the configurations taking turns round by round so they see the same machine load; it
prints min/median/max seconds per step. Only cgad.torch's public API is used, so the same script times any build,
except for --live-check off: the floor the check of opt.state (cgad/torch/_live.py) is measured against, the same
step with each CPU group's check replaced, on that optimizer only, by handing the entries back as they are -- this
build's internals (LiveState), so "off" times this build only. "on,off" times both in one run; the check's cost per
tensor is their difference over the number of tensors. With the check on it also prints the check alone (each CPU
group's CpuGroup.current: reading opt.state and finding what changed since the last step, which main's builds
since torch owns the state share) in microseconds per tensor, min/median/max over the same rounds: a difference of
two step times drowns in a shared machine's noise, the check alone does not."""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peers import layout_shapes, make_layout, time_steps  # noqa: E402

import cgad.torch  # noqa: E402


def skip_live_check(opt):
    """Each CPU group of ``opt`` hands its opt.state entries to the step unchecked (the floor of --live-check off)."""
    for group in opt._groups:
        live = group.live
        live.entries = lambda state, params, where, reset, live=live: [state[p] for p in live.params]
        live.steps_changed = lambda entries: []
        live.record_steps = lambda entries: None
        live.check_stepped = lambda buffers, where: None


class Steps:
    def __init__(self, layout, groups, state, threads, check):
        self.name = f"{layout}, {groups} group(s), state={state}, live check {check}"
        values, self.grads = make_layout(layout_shapes(layout, 0, 0), 1)
        self.params = [torch.nn.Parameter(v) for v in values]
        split = [self.params[g::groups] for g in range(groups)]
        self.opt = cgad.torch.Adam([{"params": ps} for ps in split], lr=1e-3, state=state, threads=threads)
        self.run()
        self.checked = check == "on"
        if not self.checked:
            skip_live_check(self.opt)

    def run(self):
        for p, g in zip(self.params, self.grads):
            p.grad = g
        assert self.opt.step().applied



class Check:
    """One run: each CPU group's check of opt.state, as a step makes it before anything else."""

    def __init__(self, steps):
        self.opt = steps.opt

    def run(self):
        for group, fast in zip(self.opt.param_groups, self.opt._groups):
            fast.current(self.opt.state, group["params"], "bench")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layouts", default="small-300,gpt2-125m")
    ap.add_argument("--groups", default="1,4")
    ap.add_argument("--state", default="fp32")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--live-check", default="on", help="on, off or on,off (off: this build only)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--min-seconds", type=float, default=0.5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for layout in args.layouts.split(","):
        work = [Steps(layout, int(g), args.state, args.threads, check) for g in args.groups.split(",")
                for check in args.live_check.split(",")]
        times = {w.name: [] for w in work}
        checks = {w.name: [] for w in work if w.checked}
        for _ in range(args.repeats):
            for w in work:
                times[w.name].append(time_steps(w, args.min_seconds))
                if w.checked:
                    checks[w.name].append(time_steps(Check(w), args.min_seconds / 4) / len(w.params))
        for w in work:
            t = times[w.name]
            print(f"{w.name}: min {min(t) * 1e3:.2f} ms, median {statistics.median(t) * 1e3:.2f} ms, "
                  f"max {max(t) * 1e3:.2f} ms per step ({len(t)} repeats)", flush=True)
            if w.checked:
                c = checks[w.name]
                print(f"    the check alone: min {min(c) * 1e6:.2f} us, median {statistics.median(c) * 1e6:.2f} us, "
                      f"max {max(c) * 1e6:.2f} us per tensor", flush=True)
        del work


if __name__ == "__main__":
    main()
