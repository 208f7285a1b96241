#!/usr/bin/python3
"""cgad's CPU step next to PyTorch's CPU Adam and AdamW, on the same tensors, as ratios to the same roofline.

    PYTHONPATH=build/python PYTHON bench/torch_peers.py --threads 2 [--layouts flat,split,gpt2-125m]
                         [--size 16777216] [--tensors 16] [--repeats 5] [--min-seconds 0.2] [--json]

PYTHON is Debian's /usr/bin/python3 (torch 1.13) or the pinned environment's build-venv/bin/python (torch 2.x,
whose CPU Adam has a fused kernel).

In one process, with torch.set_num_threads(T) and cgad's fast path and roofline on T threads, over n fp32
parameters with a fixed fp32 gradient, this times real optimizer steps (``p.grad = g; opt.step()``, after one
warm-up step that also creates the optimizer state):

  torch.optim.Adam  (foreach=False, foreach=True, and fused=True where the installed torch has it on the CPU)
  torch.optim.AdamW (the same three; weight_decay=0.01, torch's default)
  cgad.torch.Adam   (state="fp32"; weight_decay 0, and 0.01 in AdamW form), cgad.torch.CGAD (state="fp32",
                    staleness 1, so the gate and bias corrections run)
  the roofline: cgad's in-place twin of an fp32-parameter, fp32-state Adam step (cgad.bench.InPlaceTwin, the
                C++ cgad::bench::InPlaceWorkload): one in-place pass over buffers laid out as the step's that
                reads and writes exactly the step's bytes with the arithmetic left out

on the layouts asked for: "flat", one tensor of --size parameters; "split", the same parameters in --tensors
tensors (where foreach's multi-tensor kernels differ from the per-tensor loop); "gpt2-125m", the 148 tensors of
GPT-2 small (124M parameters: two large embeddings, four matrices a layer, many 768-element vectors), the tensor
list a 125M-parameter transformer's optimizer steps. Every contender is timed once per round,
round after round (--repeats rounds), so that all of them, the roofline included, see the same machine load;
each timing runs steps until it has lasted --min-seconds. For each it prints min/median/max seconds per step,
parameters per second, and its ratio to the roofline: the roofline's median seconds per pass / its own median
seconds per step (1.0 = the bandwidth limit, with the twin measured in the same run), and its speed-up over
torch's fastest step on the same layout (the median of the fastest torch contender / its own median).

Bytes: every contender is credited with the same 28 bytes per parameter -- parameter read + write (8), gradient
read (4), exp_avg read + write (8), exp_avg_sq read + write (8) -- the bytes one fused pass must move and the
twin moves. torch's foreach=False (and, to a lesser degree, foreach=True) makes several passes over
memory per step and so moves more than that; the ratio still credits it with only the 28 bytes, i.e. it measures
how close each step comes to the time the bytes of an ideal single pass need, not the bandwidth it achieves.
"""
import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

import torch

import cgad
import cgad.torch
from cgad.bench import InPlaceTwin, cpu_isa, step_bytes

BYTES_PER_PARAM = 28  # fp32 θ r/w (8), fp32 grad r (4), fp32 m r/w (8), fp32 v r/w (8)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def gpt2_small_shapes():
    """The parameter tensors of GPT-2 small (124,439,808 parameters; the output layer tied to the token
    embedding, so it has no tensor of its own), in the order model.parameters() lists them: what a 125M-parameter
    transformer's optimizer steps -- two large embeddings, 4 matrices a layer, and many small vectors."""
    d, vocab, context, layers = 768, 50257, 1024, 12
    shapes = [(vocab, d), (context, d)]
    for _ in range(layers):
        shapes += [(d,), (d,),                      # ln_1
                   (d, 3 * d), (3 * d,),            # attention: qkv projection
                   (d, d), (d,),                    # attention: output projection
                   (d,), (d,),                      # ln_2
                   (d, 4 * d), (4 * d,),            # mlp: up
                   (4 * d, d), (d,)]                # mlp: down
    return shapes + [(d,), (d,)]                    # ln_f


def layout_shapes(layout, n, tensors):
    """The tensor shapes of a layout: "flat" (one tensor of n), "split" (`tensors` tensors of n in all, the last
    taking the remainder) or "gpt2-125m" (gpt2_small_shapes(); n is ignored)."""
    if layout == "flat":
        return [(n,)]
    if layout == "split":
        sizes = [n // tensors] * tensors
        sizes[-1] += n - sum(sizes)
        return [(s,) for s in sizes]
    return gpt2_small_shapes()


def make_layout(shapes, seed):
    """(params, grads): fp32 tensors of the given shapes, N(0, 1) parameters and N(0, 1e-6) gradients."""
    gen = torch.Generator().manual_seed(seed)
    params = [torch.randn(s, generator=gen, dtype=torch.float32) for s in shapes]
    grads = [torch.randn(s, generator=gen, dtype=torch.float32).mul_(1e-3) for s in shapes]
    return params, grads


class OptimizerStep:
    """One real optimizer step per run: the fixed gradients set as .grad, then opt.step()."""

    def __init__(self, name, layout, make, params, grads, step_kwargs=None, check=None):
        self.name, self.layout = name, layout
        self.params, self.grads = params, grads
        self.opt = make(params)
        self.step_kwargs = step_kwargs or {}
        self.check = check

    def run(self):
        for p, g in zip(self.params, self.grads):
            p.grad = g
        out = self.opt.step(**self.step_kwargs)
        return out

    def warm_up(self):
        out = self.run()
        if self.check is not None:
            self.check(out)


class Twin:
    def __init__(self, n, threads, layout):
        self.name, self.layout = "roofline: cgad in-place twin (fp32 params, fp32 state, Adam)", layout
        self.twin = InPlaceTwin("fp32", "fp32", "adam", n, threads)

    def warm_up(self):
        self.twin.run()

    def time(self, min_seconds):
        return self.twin.time(min_seconds)


def time_steps(work, min_seconds):
    """Seconds per run over enough runs (at least one) to last min_seconds."""
    if isinstance(work, Twin):
        return work.time(min_seconds)
    runs = 0
    start = time.perf_counter()
    while True:
        work.run()
        runs += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / runs


def torch_fused_cpu(cls):
    """None if cls(fused=True) steps an fp32 CPU tensor in this torch, else why not."""
    p = torch.zeros(8, dtype=torch.float32)
    p.grad = torch.ones(8, dtype=torch.float32)
    try:
        cls([p], lr=1e-3, fused=True).step()
    except (TypeError, RuntimeError, ValueError) as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


def applied(report):
    if not report.applied:
        raise SystemExit(f"cgad's warm-up step was not applied: {report.reason}")


def contenders(layout, params, grads, threads, fused):
    out = []
    for cls, wd in ((torch.optim.Adam, 0.0), (torch.optim.AdamW, 0.01)):
        variants = [("foreach=False", dict(foreach=False)), ("foreach=True", dict(foreach=True))]
        if fused[cls.__name__] is None:
            variants.append(("fused=True", dict(fused=True)))
        for label, flags in variants:
            out.append(OptimizerStep(f"torch.optim.{cls.__name__}({label})", layout,
                                     lambda ps, cls=cls, wd=wd, flags=flags: cls(ps, lr=1e-3, weight_decay=wd,
                                                                                  **flags),
                                     params, grads))
    out.append(OptimizerStep("cgad.torch.Adam(state=fp32)", layout,
                             lambda ps: cgad.torch.Adam(ps, lr=1e-3, state="fp32", threads=threads),
                             params, grads, check=applied))
    out.append(OptimizerStep("cgad.torch.Adam(state=fp32, weight_decay=0.01)", layout,
                             lambda ps: cgad.torch.Adam(ps, lr=1e-3, weight_decay=0.01, state="fp32",
                                                        threads=threads),
                             params, grads, check=applied))
    out.append(OptimizerStep("cgad.torch.CGAD(state=fp32, staleness=1)", layout,
                             lambda ps: cgad.torch.CGAD(ps, lr=1e-3, state="fp32", threads=threads),
                             params, grads, step_kwargs=dict(staleness=1), check=applied))
    return out


LAYOUTS = ("flat", "split", "gpt2-125m")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads and cgad's threads (default 2)")
    ap.add_argument("--size", type=int, default=1 << 24,
                    help="fp32 parameters of the flat and split layouts (default 2^24)")
    ap.add_argument("--layouts", default="flat,split",
                    help=f"comma-separated, of {', '.join(LAYOUTS)} (default flat,split)")
    ap.add_argument("--repeats", type=int, default=5, help="rounds of timings, each contender once a round")
    ap.add_argument("--tensors", type=int, default=16, help="tensors of the split layout (default 16)")
    ap.add_argument("--min-seconds", type=float, default=0.2, help="least duration of one timing (default 0.2)")
    ap.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    args = ap.parse_args()
    if args.threads < 1 or args.size < 1 or args.repeats < 1 or args.tensors < 1 or args.min_seconds < 0:
        ap.error("--threads, --size, --repeats and --tensors must be >= 1, --min-seconds >= 0")
    layouts = args.layouts.split(",")
    if not layouts or any(layout not in LAYOUTS for layout in layouts) or len(set(layouts)) != len(layouts):
        ap.error(f"--layouts must name distinct layouts of {', '.join(LAYOUTS)}, got {args.layouts!r}")
    if "split" in layouts and args.tensors > args.size:
        ap.error("--tensors must not exceed --size")

    torch.set_num_threads(args.threads)
    threads = args.threads
    fused = {name: torch_fused_cpu(getattr(torch.optim, name)) for name in ("Adam", "AdamW")}
    notes = [f"torch.optim.{name}(fused=True) skipped: not available on the CPU in torch {torch.__version__} "
             f"({why})" for name, why in fused.items() if why is not None]

    # Per layout: its roofline (a twin over the layout's parameter count) and its contenders, all on the layout's
    # own tensors; the ratios compare each step with the twin and with torch's fastest step of the same layout.
    works, sizes, twins = [], {}, {}
    for seed, layout in enumerate(layouts):
        shapes = layout_shapes(layout, args.size, args.tensors)
        n = sum(math.prod(s) for s in shapes)
        sizes[layout] = (n, len(shapes))
        assert step_bytes("fp32", "fp32", "adam", n) == BYTES_PER_PARAM * n, n
        twins[layout] = Twin(n, threads, layout)
        params, grads = make_layout(shapes, seed=seed)
        works += [twins[layout]] + contenders(layout, params, grads, threads, fused)
    for w in works:
        w.warm_up()

    timings = {id(w): [] for w in works}
    for _ in range(args.repeats):
        for w in works:
            timings[id(w)].append(time_steps(w, args.min_seconds))

    medians = {id(w): statistics.median(timings[id(w)]) for w in works}
    best_torch = {layout: min(medians[id(w)] for w in works if w.layout == layout and w.name.startswith("torch."))
                  for layout in layouts}
    rows = []
    for w in works:
        t, median = timings[id(w)], medians[id(w)]
        n = sizes[w.layout][0]
        rows.append(dict(name=w.name, layout=w.layout, parameters=n, tensors=sizes[w.layout][1], min_s=min(t),
                         median_s=median, max_s=max(t), params_per_s=n / median,
                         gb_per_s_at_28_b=BYTES_PER_PARAM * n / median / 1e9,
                         ratio_to_roofline=medians[id(twins[w.layout])] / median,
                         speedup_over_best_torch=best_torch[w.layout] / median, samples_s=t))

    machine = dict(cpu=cpu_model(), logical_cpus=os.cpu_count(), torch=torch.__version__,
                   torch_threads=torch.get_num_threads(), cgad=cgad._cgad.__version__, cgad_isa=cpu_isa(),
                   python=platform.python_version())
    config = dict(threads=threads, repeats=args.repeats, min_seconds=args.min_seconds,
                  layouts={layout: dict(parameters=n, tensors=k) for layout, (n, k) in sizes.items()},
                  bytes_per_param=BYTES_PER_PARAM)
    if args.json:
        json.dump(dict(machine=machine, config=config, results=rows, notes=notes), sys.stdout, indent=2)
        print()
        return

    print(f"machine: {machine['cpu']} ({machine['logical_cpus']} logical CPUs); torch {machine['torch']}, "
          f"torch threads {machine['torch_threads']}; cgad {machine['cgad']} ({machine['cgad_isa']}); "
          f"python {machine['python']}")
    print(f"{threads} threads, {args.repeats} alternating rounds of >= {args.min_seconds} s each; every step "
          f"credited with {BYTES_PER_PARAM} B/param; layouts: "
          + "; ".join(f"{layout} = {n} parameters in {k} tensors" for layout, (n, k) in sizes.items()))
    name_w = max(len(r["name"]) for r in rows)
    header = (f"{'step':<{name_w}}  {'layout':<10} {'min ms':>9} {'median ms':>9} {'max ms':>9} "
              f"{'Mparams/s':>10} {'GB/s@28B':>9} {'/roofline':>9} {'/torch':>7}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['name']:<{name_w}}  {r['layout']:<10} {r['min_s'] * 1e3:9.3f} {r['median_s'] * 1e3:9.3f} "
              f"{r['max_s'] * 1e3:9.3f} {r['params_per_s'] / 1e6:10.1f} {r['gb_per_s_at_28_b']:9.2f} "
              f"{r['ratio_to_roofline']:9.3f} {r['speedup_over_best_torch']:7.2f}")
    print("/torch: torch's fastest median step on the same layout / this median step (> 1: faster than torch)")
    for note in notes:
        print("note:", note)


if __name__ == "__main__":
    main()
