#!/usr/bin/python3
"""cgad's CPU step next to the real CPU optimizers people run -- PyTorch's Adam and AdamW (fp32 state), or
bitsandbytes' and torchao's 8-bit (and 4-bit) Adam (--state q8) -- on the same tensors, as ratios to each other
and to the same roofline.

    PYTHONPATH=build/python PYTHON bench/torch_peers.py --threads 2 [--state fp32|q8] [--params fp32|bf16]
                         [--layouts flat,split,gpt2-125m,small-300] [--size 16777216] [--tensors 16]
                         [--repeats 5] [--min-seconds 0.2] [--passes] [--json]

PYTHON is Debian's /usr/bin/python3 (torch 1.13; fp32 state only) or the pinned environment's
build-venv/bin/python (torch 2.x, whose CPU Adam has a fused kernel; bitsandbytes 0.50 and torchao 0.18).

In one process, with torch.set_num_threads(T) and cgad's fast path and roofline on T threads, over parameters of
the chosen format with fixed gradients, this times real optimizer steps (``p.grad = g; opt.step()``, after a first
step, timed apart, that creates the optimizer state -- and for torchao compiles its step):

  --state fp32: torch.optim.Adam (foreach=False, foreach=True, and fused=True where the installed torch has it
                on the CPU), torch.optim.AdamW (the same three; weight_decay=0.01, torch's default),
                cgad.torch.Adam (state="fp32"; weight_decay 0, and 0.01 in AdamW form), cgad.torch.CGAD
                (state="fp32", staleness 1, so the gate and bias corrections run), and the same CGAD timed as
                opt.form_pseudo_gradient(start) and its step (fp32 parameters; the formed Δ needs no scan),
                beside torch's fused AdamW timed with the same Δ formed by torch.sub;
  --state q8:   cgad.torch.Adam(state="q8") in cgad's semantics, in bitsandbytes' (q8_semantics="bnb") and with
                the zero-free v map, bitsandbytes.optim.Adam8bit (its CPU path), torchao.optim.AdamW8bit and
                AdamW4bit (weight decay 0);
  the roofline: cgad's in-place twin of the Adam step in the same formats (cgad.bench.InPlaceTwin, the C++
                cgad::bench::InPlaceWorkload): one in-place pass over buffers laid out as cgad's step's that reads
                and writes exactly the step's bytes with the arithmetic left out

on the layouts asked for: "flat", one tensor of --size parameters; "split", the same parameters in --tensors
tensors (where foreach's multi-tensor kernels differ from the per-tensor loop); "gpt2-125m", the 148 tensors of
GPT-2 small (124M parameters: two large embeddings, four matrices a layer, many 768-element vectors), the tensor
list a 125M-parameter transformer's optimizer steps; "small-300", 300 tensors of 1024 to 4096 elements (a fixed
draw), where a step's per-tensor overhead shows. With --passes, two passes a step contains are timed beside the
steps: one read of every Δ, and cgad's refusal scan alone. Every contender is timed once per round,
round after round (--repeats rounds), so that all of them, the roofline included, see the same machine load;
each timing runs steps until it has lasted --min-seconds. For each it prints min/median/max seconds per step,
parameters per second, its ratio to the roofline (the roofline's median seconds per pass / its own median seconds
per step, the twin measured in the same run), its speed-up over the fastest real peer on the same layout (that
peer's median / its own median), the first step's seconds and the bytes of its optimizer state.

Bytes: every contender is credited with the bytes per parameter the twin moves (cgad.bench.step_bytes; 28 for fp32
parameters and state: parameter, exp_avg, exp_avg_sq read and written, gradient read). A peer that makes several
passes over memory (torch's foreach=False, foreach=True) moves more than that, and one with smaller state
(torchao's 4-bit) less; the credit is the same for all, so the GB/s column measures how close each step comes to
the time the bytes of cgad's single pass need, not the bandwidth it achieves.
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
    if layout == "small-300":
        return [(int(s),) for s in torch.randint(1024, 4097, (300,), generator=torch.Generator().manual_seed(300))]
    return gpt2_small_shapes()


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def make_layout(shapes, seed, params="fp32"):
    """(params, grads): tensors of the given shapes in the parameter format's dtype (the gradient's too, as
    autograd makes it), N(0, 1) parameters and N(0, 1e-6) gradients."""
    gen = torch.Generator().manual_seed(seed)
    dtype = DTYPES[params]
    values = [torch.randn(s, generator=gen, dtype=torch.float32).to(dtype) for s in shapes]
    grads = [torch.randn(s, generator=gen, dtype=torch.float32).mul_(1e-3).to(dtype) for s in shapes]
    return values, grads


def state_bytes(opt):
    """The bytes of an optimizer's state tensors (torchao's quantized subclasses counted by their inner tensors)."""
    def size(t):
        if type(t) is not torch.Tensor and hasattr(t, "__tensor_flatten__"):
            names, _ = t.__tensor_flatten__()
            return sum(size(getattr(t, name)) for name in names)
        return t.numel() * t.element_size()
    return sum(size(t) for state in opt.state.values() for t in state.values() if isinstance(t, torch.Tensor))


class OptimizerStep:
    """One real optimizer step per run: the fixed gradients set as .grad, then opt.step()."""

    def __init__(self, name, layout, make, params, grads, step_kwargs=None, check=None, peer=False):
        self.name, self.layout, self.peer = name, layout, peer  # peer: a real optimizer of another package
        self.params, self.grads = params, grads
        self.opt = make(params)
        self.step_kwargs = step_kwargs or {}
        self.check = check
        self.first_step_s = self.state_bytes = None

    def run(self):
        for p, g in zip(self.params, self.grads):
            p.grad = g
        out = self.opt.step(**self.step_kwargs)
        return out

    def warm_up(self):
        """The first step, timed apart: it makes the state (and, for torchao, compiles the step)."""
        start = time.perf_counter()
        out = self.run()
        self.first_step_s = time.perf_counter() - start
        self.state_bytes = state_bytes(self.opt)
        if self.check is not None:
            self.check(out)


class FormedStep(OptimizerStep):
    """A step of the pseudo-gradient DiLoCo forms, Δ = θ_start − θ, timed with its formation: cgad's
    opt.form_pseudo_gradient (Δ written and checked in one pass, which lets the step skip its scan of Δ), or for a
    torch optimizer torch.sub(start, p, out=.grad) -- the same 12 bytes a parameter. θ_start is θ + the fixed
    gradient, so Δ stays near it as θ moves; Δ goes into buffers of this contender's own, not the shared gradients."""

    def __init__(self, name, layout, make, params, grads, step_kwargs=None, check=None):
        super().__init__(name, layout, make, params, grads, step_kwargs, check)
        self.starts = [(p + g).contiguous() for p, g in zip(params, grads)]
        self.buffers = [torch.empty_like(p) for p in params]

    def run(self):
        for p, b in zip(self.params, self.buffers):
            p.grad = b
        if hasattr(self.opt, "form_pseudo_gradient"):
            self.opt.form_pseudo_gradient(self.starts)
        else:
            with torch.no_grad():
                for p, s, b in zip(self.params, self.starts, self.buffers):
                    torch.sub(s, p, out=b)
        return self.opt.step(**self.step_kwargs)


class Twin:
    peer = False

    def __init__(self, n, threads, layout, params, state):
        self.name, self.layout = f"roofline: cgad in-place twin ({params} params, {state} state, Adam)", layout
        self.twin = InPlaceTwin(params, state, "adam", n, threads)

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


def contenders(layout, params, grads, threads, fused, state="fp32"):
    if state == "q8":
        return contenders_8bit(layout, params, grads, threads)
    out = []
    for cls, wd in ((torch.optim.Adam, 0.0), (torch.optim.AdamW, 0.01)):
        variants = [("foreach=False", dict(foreach=False)), ("foreach=True", dict(foreach=True))]
        if fused[cls.__name__] is None:
            variants.append(("fused=True", dict(fused=True)))
        for label, flags in variants:
            out.append(OptimizerStep(f"torch.optim.{cls.__name__}({label})", layout,
                                     lambda ps, cls=cls, wd=wd, flags=flags: cls(ps, lr=1e-3, weight_decay=wd,
                                                                                  **flags),
                                     params, grads, peer=True))
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
    if fused["AdamW"] is None:
        out.append(FormedStep("torch.optim.AdamW(fused=True), Δ formed by torch + step", layout,
                              lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01, fused=True),
                              params, grads))
    if params[0].dtype == torch.float32 and hasattr(cgad.torch.CGAD, "form_pseudo_gradient"):
        out.append(FormedStep("cgad.torch.CGAD(state=fp32, staleness=1), Δ formed + step", layout,
                              lambda ps: cgad.torch.CGAD(ps, lr=1e-3, state="fp32", threads=threads),
                              params, grads, step_kwargs=dict(staleness=1), check=applied))
    return out


def contenders_8bit(layout, params, grads, threads):
    """8-bit (and torchao's 4-bit) blockwise Adam, weight decay 0, lr 1e-3: cgad.torch's q8 state in its own
    semantics, bitsandbytes' (its CUDA kernel's formula) and with the zero-free v map, against the real
    bitsandbytes Adam8bit (its CPU path since 0.50) and torchao's AdamW8bit and AdamW4bit (a torch.compile'd
    step per parameter on the CPU; the first step, timed apart, compiles it)."""
    out = [OptimizerStep(f"cgad.torch.Adam(state=q8{label})", layout,
                         lambda ps, kw=kw: cgad.torch.Adam(ps, lr=1e-3, state="q8", threads=threads, **kw),
                         params, grads, check=applied)
           for label, kw in ((", q8_semantics=cgad", {}), (", q8_semantics=bnb", dict(q8_semantics="bnb")),
                             (", v_map=zero-free", dict(v_map="zero-free")))]
    import bitsandbytes
    out.append(OptimizerStep(f"bitsandbytes.optim.Adam8bit ({bitsandbytes.__version__}, CPU)", layout,
                             lambda ps: bitsandbytes.optim.Adam8bit(ps, lr=1e-3), params, grads, peer=True))
    import torchao
    import torchao.optim
    for cls in (torchao.optim.AdamW8bit, torchao.optim.AdamW4bit):
        out.append(OptimizerStep(f"torchao.optim.{cls.__name__} ({torchao.__version__})", layout,
                                 lambda ps, cls=cls: cls(ps, lr=1e-3, weight_decay=0.0), params, grads, peer=True))
    return out


class Pass:
    """Not a step: one pass the steps contain, timed alone to say what a step's time is made of."""
    peer = False

    def __init__(self, name, layout, run):
        self.name, self.layout, self.run = name, layout, run

    def warm_up(self):
        self.run()


def passes(layout, params, grads, threads):
    """The read of every Δ once (torch's sum, the least a pass over Δ costs), and cgad's refusal scan alone: the
    NaN/Inf and overflow check a cgad step makes over Δ before it writes anything (docs/design.md §3), through the
    group's preview (the scan a multi-group step runs per group; an internal of cgad.torch)."""
    opt = cgad.torch.CGAD([torch.nn.Parameter(p.detach().clone()) for p in params], lr=1e-3, state="fp32",
                          threads=threads)
    group_params = opt.param_groups[0]["params"]
    for p, g in zip(group_params, grads):
        p.grad = g
    fast = opt._groups[0]
    prepared = fast.prepare(group_params, 0, "bench", opt.state)
    return [Pass("pass: one read of every Δ (torch .sum())", layout, lambda: [g.sum() for g in grads]),
            Pass("pass: cgad's refusal scan of Δ alone", layout, lambda: fast.preview(prepared, 1, 0))]


LAYOUTS = ("flat", "split", "gpt2-125m", "small-300")


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
    ap.add_argument("--state", choices=("fp32", "q8"), default="fp32",
                    help="fp32: torch's Adam/AdamW against cgad's fp32 state (default); q8: the 8-bit optimizers "
                         "(bitsandbytes, torchao 8- and 4-bit) against cgad's q8 state")
    ap.add_argument("--params", choices=tuple(DTYPES), default="fp32", help="parameter format (default fp32)")
    ap.add_argument("--passes", action="store_true",
                    help="also time one read of every Δ and cgad's refusal scan alone (what a step is made of)")
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
        twins[layout] = Twin(n, threads, layout, args.params, args.state)
        params, grads = make_layout(shapes, seed=seed, params=args.params)
        works += [twins[layout]] + contenders(layout, params, grads, threads, fused, args.state)
        if args.passes:
            works += passes(layout, params, grads, threads)
    for w in works:
        w.warm_up()

    timings = {id(w): [] for w in works}
    for _ in range(args.repeats):
        for w in works:
            timings[id(w)].append(time_steps(w, args.min_seconds))

    medians = {id(w): statistics.median(timings[id(w)]) for w in works}
    best_peer = {layout: min(medians[id(w)] for w in works if w.layout == layout and w.peer) for layout in layouts}
    per_param = step_bytes(args.params, args.state, "adam", 1 << 20) / (1 << 20)  # the step's bytes a parameter
    rows = []
    for w in works:
        t, median = timings[id(w)], medians[id(w)]
        n = sizes[w.layout][0]
        rows.append(dict(name=w.name, layout=w.layout, parameters=n, tensors=sizes[w.layout][1], min_s=min(t),
                         median_s=median, max_s=max(t), params_per_s=n / median,
                         gb_per_s_at_step_bytes=per_param * n / median / 1e9,
                         ratio_to_roofline=medians[id(twins[w.layout])] / median,
                         speedup_over_best_peer=best_peer[w.layout] / median,
                         first_step_s=getattr(w, "first_step_s", None), state_bytes=getattr(w, "state_bytes", None),
                         samples_s=t))

    machine = dict(cpu=cpu_model(), logical_cpus=os.cpu_count(), torch=torch.__version__,
                   torch_threads=torch.get_num_threads(), cgad=cgad._cgad.__version__, cgad_isa=cpu_isa(),
                   python=platform.python_version())
    config = dict(threads=threads, repeats=args.repeats, min_seconds=args.min_seconds, params=args.params,
                  state=args.state, layouts={layout: dict(parameters=n, tensors=k) for layout, (n, k) in sizes.items()},
                  step_bytes_per_param=per_param)
    if args.json:
        json.dump(dict(machine=machine, config=config, results=rows, notes=notes), sys.stdout, indent=2)
        print()
        return

    print(f"machine: {machine['cpu']} ({machine['logical_cpus']} logical CPUs); torch {machine['torch']}, "
          f"torch threads {machine['torch_threads']}; cgad {machine['cgad']} ({machine['cgad_isa']}); "
          f"python {machine['python']}")
    print(f"{threads} threads, {args.params} parameters, {args.state} state, {args.repeats} alternating rounds of >= "
          f"{args.min_seconds} s each; every step credited with the twin's {per_param:g} B/param; layouts: "
          + "; ".join(f"{layout} = {n} parameters in {k} tensors" for layout, (n, k) in sizes.items()))
    name_w = max(len(r["name"]) for r in rows)
    header = (f"{'step':<{name_w}}  {'layout':<10} {'min ms':>9} {'median ms':>9} {'max ms':>9} "
              f"{'Mparams/s':>10} {'GB/s':>7} {'/roofline':>9} {'/peer':>6} {'1st s':>7} {'state MB':>9}")
    print(header)
    print("-" * len(header))
    for r in rows:
        first = "" if r["first_step_s"] is None else f"{r['first_step_s']:7.2f}"
        size = "" if r["state_bytes"] is None else f"{r['state_bytes'] / 1e6:9.1f}"
        print(f"{r['name']:<{name_w}}  {r['layout']:<10} {r['min_s'] * 1e3:9.3f} {r['median_s'] * 1e3:9.3f} "
              f"{r['max_s'] * 1e3:9.3f} {r['params_per_s'] / 1e6:10.1f} {r['gb_per_s_at_step_bytes']:7.2f} "
              f"{r['ratio_to_roofline']:9.3f} {r['speedup_over_best_peer']:6.2f} {first:>7} {size:>9}")
    print("/peer: the fastest real peer's median step on the same layout / this median step (> 1: faster); 1st s: "
          "the first step, timed apart (it makes the state; torchao's compiles its step); state MB: the optimizer "
          "state's tensors after it")
    for note in notes:
        print("note:", note)


if __name__ == "__main__":
    main()
