#!/usr/bin/python3
"""Where the v-zero trap of 8-bit outer state fires in real training: a small pre-LayerNorm GPT trained by
asynchronous DiLoCo records the pseudo-gradients its server receives, and `cgad noise --stream` replays them through
bitsandbytes' 8-bit Adam (dynamic and zero-free v maps, Adam-Decay and CGAD) against the MPFR reference, per tensor.

The text is one that Debian's base-files package ships: /usr/share/common-licenses/GPL-3 by default (--text takes
any file, e.g. /usr/share/common-licenses/GFDL-1.3 for a second text). Characters are the tokens; the last tenth is
held out. The model: token and position embeddings, --layers blocks of (LayerNorm, causal self-attention with a
fused qkv, LayerNorm, a 4x MLP with GELU), a final LayerNorm and an untied readout. --outlier-dims K scales the
first K dimensions of every LayerNorm's output by --outlier-scale R (a fixed gain, a proxy for the massive
activations of large models: Sun et al. 2024, arXiv 2402.17762).

DiLoCo as `cgad simulate` models it (docs/results/simulate.md): one arrival per outer round; at round r worker
k = r mod K starts from the server's parameters of round r - tau_r, runs H inner steps (AdamW or SGD, its state kept
across its jobs), and its pseudo-gradient delta = theta_start - theta_local reaches the server with staleness tau_r,
heavy-tailed (70 % fresh, 30 % floor(8/U), capped at --tau-max and at r). The server steps with torch's Adam in fp32
(the stream is what it received; the 8-bit study replays that stream open-loop).

    PYTHONPATH=build/python /usr/bin/python3 examples/trap_in_training.py --inner sgd --width 64 \\
        --cgad build/apps/cgad/cgad --stream /tmp/lm-sgd.jsonl

--stream is written atomically (examples/atomic_file.py): a full disk leaves an earlier stream as it was. A
--stream that is the --text or --cgad file (any name or link of it) is refused before training. Exit status: 0;
1 when the training diverged (the stream is not written) or the study failed; 2 for bad arguments or a stream
that could not be written, with one line on stderr.
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import atomic_file
from example_args import (SEED, Parser, check_memory, check_output, entry_point, input_file, integer, quadratic_count,
                          read_corpus, real)

TEXT = "/usr/share/common-licenses/GPL-3"
KINDS = (("embed", "embedding"), ("attn", "attention"), ("mlp", "MLP"), ("head", "readout"))


def parse_args(argv):
    p = Parser(description=__doc__.split("\n\n")[0])
    positive, nonnegative = integer(at_least=1), integer(at_least=0)
    p.add_argument("--text", type=input_file, default=TEXT, help="the training text (default: base-files' GPL-3)")
    p.add_argument("--width", type=positive, default=64, help="d_model")
    p.add_argument("--layers", type=positive, default=2)
    p.add_argument("--heads", type=positive, default=4)
    p.add_argument("--context", type=positive, default=32, help="characters per training sequence")
    p.add_argument("--batch", type=positive, default=16, help="sequences per inner step")
    p.add_argument("--workers", type=positive, default=4, help="K")
    p.add_argument("--inner-steps", type=positive, default=16, help="H")
    p.add_argument("--inner", choices=["adamw", "sgd"], default="adamw", help="inner optimizer")
    p.add_argument("--inner-lr", type=real(at_least=0), help="inner lr (default 1e-3 AdamW, 0.3 SGD)")
    p.add_argument("--outer-lr", type=real(at_least=0), default=3e-3, help="the server's Adam lr")
    p.add_argument("--rounds", type=positive, default=64, help="outer rounds = recorded events")
    p.add_argument("--tau-max", type=nonnegative, default=64, help="cap of the heavy-tailed staleness")
    p.add_argument("--outlier-dims", type=nonnegative, default=0, help="K: LayerNorm output dimensions scaled by R")
    p.add_argument("--outlier-scale", type=real(above=0), default=1.0, help="R")
    p.add_argument("--seed", type=SEED, default=0, help="0..2^32 - 1")
    p.add_argument("--stream", help="where the recorded stream goes, written atomically; not the --text or --cgad "
                                    "file (default: a temporary file, removed)")
    p.add_argument("--cgad", type=input_file,
                   help="the cgad binary; without it the stream is recorded and the study is not run")
    p.add_argument("--min-q8-size", type=nonnegative, default=1024,
                   help="tensors under this many elements keep fp32 state in the study (bitsandbytes: 4096)")
    p.add_argument("--threads", type=positive, default=1, help="torch CPU threads")
    args = p.parse_args(argv)
    if args.width % args.heads:
        p.error("--width must be a multiple of --heads")
    if args.outlier_dims > args.width:
        p.error("--outlier-dims must be in [0, --width]")
    if args.inner_lr is None:
        args.inner_lr = 1e-3 if args.inner == "adamw" else 0.3
    if args.stream is not None:
        check_output(p, "--stream", args.stream, (args.text, args.cgad))
    args.corpus = read_corpus(p, args.text, args.context, args.workers)
    # The server and each worker hold a model and its gradients, the server's Adam two moments: at least 4 + 2 K
    # float32 copies of the parameters (AdamW workers two more each, the round snapshots more still).
    vocab = len(set(args.corpus))

    def parameters(width):
        return sum(q.numel() for q in GPT(vocab, argparse.Namespace(**{**vars(args), "width": width})).parameters())
    check_memory(p, f"--width {args.width} with --layers {args.layers} and --workers {args.workers}",
                 (4 + 2 * args.workers) * 4 * quadratic_count(args.width, parameters,
                                                              tuple(k * args.heads for k in (1, 2, 3))))
    return args


class GainedLayerNorm(nn.LayerNorm):
    """LayerNorm whose output's first K dimensions are multiplied by a fixed R (not trained)."""

    def __init__(self, width, outlier_dims, outlier_scale):
        super().__init__(width)
        gain = torch.ones(width)
        gain[:outlier_dims] = outlier_scale
        self.register_buffer("gain", gain)

    def forward(self, x):
        return super().forward(x) * self.gain


class Block(nn.Module):
    def __init__(self, width, heads, outliers):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = GainedLayerNorm(width, *outliers), GainedLayerNorm(width, *outliers)
        self.attn = nn.ModuleDict({"qkv": nn.Linear(width, 3 * width), "proj": nn.Linear(width, width)})
        self.mlp = nn.ModuleDict({"fc1": nn.Linear(width, 4 * width), "fc2": nn.Linear(4 * width, width)})

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.attn["qkv"](self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        y = (scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.attn["proj"](y)
        return x + self.mlp["fc2"](F.gelu(self.mlp["fc1"](self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, args):
        super().__init__()
        outliers = (args.outlier_dims, args.outlier_scale)
        self.embed = nn.ModuleDict({"token": nn.Embedding(vocab, args.width),
                                    "position": nn.Embedding(args.context, args.width)})
        self.blocks = nn.ModuleList(Block(args.width, args.heads, outliers) for _ in range(args.layers))
        self.ln_f = GainedLayerNorm(args.width, *outliers)
        self.head = nn.Linear(args.width, vocab)

    def forward(self, x):
        h = self.embed["token"](x) + self.embed["position"](torch.arange(x.shape[1]))
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln_f(h))


def kind_of(name):
    """The tensor kind a parameter's name says: embedding, attention, MLP, readout or norm (LayerNorm's own)."""
    parts = name.split(".")
    for key, kind in KINDS:
        if key in parts:
            return kind
    return "norm"


def sequences(data, batch, context, generator):
    """`batch` windows of context + 1 characters: inputs and their next characters."""
    starts = torch.randint(0, len(data) - context - 1, (batch,), generator=generator)
    windows = torch.stack([data[s:s + context + 1] for s in starts])
    return windows[:, :-1], windows[:, 1:]


def loss_of(model, x, y):
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


class Diverged(Exception):
    pass


def heavy_tailed(rng, r, tau_max):
    tau = 0 if rng.random() < 0.7 else int(8 / (1.0 - rng.random()))
    return min(tau, tau_max, r)


def train(args, write_event):
    """Runs the DiLoCo training, handing each arrival (delta as one flat float list, tau) to write_event; returns
    the parameter names, sizes and initial flat values, and the held-out losses."""
    torch.manual_seed(args.seed)
    text = args.corpus
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    data = torch.tensor([index[c] for c in text], dtype=torch.long)
    split = len(data) * 9 // 10
    train_data, held_out = data[:split], data[split:]
    shards = [train_data[k * split // args.workers:(k + 1) * split // args.workers] for k in range(args.workers)]
    evals = [sequences(held_out, 64, args.context, torch.Generator().manual_seed(1000 + i)) for i in range(2)]

    server = GPT(len(vocab), args)
    names = [n for n, _ in server.named_parameters()]
    flat = lambda model: torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    snapshots = [flat(server)]  # the server's parameters at the start of each round
    initial = snapshots[0].tolist()
    workers = [GPT(len(vocab), args) for _ in range(args.workers)]
    make = (lambda ps: torch.optim.AdamW(ps, lr=args.inner_lr, weight_decay=0.0)) if args.inner == "adamw" else \
        (lambda ps: torch.optim.SGD(ps, lr=args.inner_lr))
    inner = [make(w.parameters()) for w in workers]
    generators = [torch.Generator().manual_seed(args.seed * 1000 + k) for k in range(args.workers)]
    outer = torch.optim.Adam(server.parameters(), lr=args.outer_lr)
    delays = random.Random(args.seed)

    def evaluate():
        with torch.no_grad():
            return sum(loss_of(server, x, y).item() for x, y in evals) / len(evals)

    losses = [evaluate()]
    for r in range(args.rounds):
        tau = heavy_tailed(delays, r, args.tau_max)
        k = r % args.workers
        w = workers[k]
        start = snapshots[r - tau]
        torch.nn.utils.vector_to_parameters(start.clone(), w.parameters())  # the snapshot stays as it was
        for _ in range(args.inner_steps):
            x, y = sequences(shards[k], args.batch, args.context, generators[k])
            inner[k].zero_grad(set_to_none=True)
            loss_of(w, x, y).backward()
            inner[k].step()
        delta = start - flat(w)
        if not torch.isfinite(delta).all():  # the inner run diverged: a stream of it would study nothing real
            raise Diverged(f"round {r}: worker {k}'s pseudo-gradient is not finite (inner {args.inner} at lr "
                           f"{args.inner_lr:g} diverged; lower --inner-lr)")
        write_event(delta.tolist(), tau)
        offset = 0
        for p in server.parameters():
            p.grad = delta[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        outer.step()
        snapshots.append(flat(server))
        losses.append(evaluate())
        if not math.isfinite(losses[-1]):
            break
    sizes = [p.numel() for p in server.parameters()]
    return names, sizes, initial, losses


def record(args, path):
    """Trains and writes the replay stream (docs/commands.md: params and tensors, then grad and tau per event)."""
    events = []
    names, sizes, initial, losses = train(args, lambda g, tau: events.append((g, tau)))
    with atomic_file.replacing(path) as f:  # a full disk or a kill leaves an earlier stream as it was
        f.write(json.dumps({"params": initial, "tensors": sizes}) + "\n")
        for g, tau in events:
            f.write(json.dumps({"grad": g, "tau": tau}) + "\n")
    return names, sizes, losses


def study(args, stream):
    """`cgad noise --stream` over the recording: bitsandbytes' semantics, dynamic and zero-free v maps, Adam-Decay,
    CGAD and CGAD skip; returns {scenario: [per-tensor trap dicts]} at the stream's last event."""
    cmd = [args.cgad, "noise", "--stream", stream, "--state", "q8", "--q8-semantics", "bnb",
           "--v-map", "dynamic,zero-free", "--optimizers", "adam-decay,cgad,cgad-skip",
           "--min-q8-size", str(args.min_q8_size), "--log-every", str(args.rounds), "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"trap_in_training: {' '.join(cmd)} failed: {run.stderr.strip()}")
    return {r["scenario"].split("/stream:")[0]: r["samples"][-1]["tensors"] for r in json.loads(run.stdout)["runs"]}


def by_kind(names, sizes, tensors, min_q8_size):
    """Per tensor kind over its 8-bit tensors: v = 0 share (size-weighted), largest step/eta (fast | exact), share
    of element-steps past 5 eta, and which tensor took the largest step."""
    out = {}
    for name, size, t in zip(names, sizes, tensors):
        if size < min_q8_size:
            continue
        acc = out.setdefault(kind_of(name), {"size": 0, "v0": 0.0, "over5": 0.0, "max": 0.0, "ref": 0.0, "at": ""})
        trap = t["trap"]
        acc["size"] += size
        acc["v0"] += trap["v_zero_fraction"] * size
        acc["over5"] += trap["step_over_5lr_fraction"] * size
        acc["ref"] = max(acc["ref"], trap["reference_max_step_over_lr"])
        if trap["max_step_over_lr"] >= acc["max"]:
            acc["max"], acc["at"] = trap["max_step_over_lr"], name
    for acc in out.values():
        acc["v0"] /= acc["size"]
        acc["over5"] /= acc["size"]
    return out


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    began = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        stream = args.stream or os.path.join(tmp, "stream.jsonl")
        try:
            names, sizes, losses = record(args, stream)
        except Diverged as e:
            print(f"trap_in_training: {e}", file=sys.stderr)
            return 1
        except OSError as e:  # the stream could not be written (a full disk, no permission): nothing replaced
            print(f"trap_in_training: cannot write --stream {stream}: {e.strerror or e}", file=sys.stderr)
            return 2
        print(f"trained: {args.inner} inner, width {args.width}, {sum(sizes)} parameters in {len(sizes)} tensors, "
              f"outliers {args.outlier_dims} x {args.outlier_scale:g}, text {args.text}: held-out loss "
              f"{losses[0]:.4f} -> {losses[-1]:.4f} over {len(losses) - 1} rounds ({time.time() - began:.1f} s)")
        if not args.cgad:
            return 0 if math.isfinite(losses[-1]) else 1
        results = study(args, stream)
    print("scenario | kind | 8-bit elements | v stored as 0 | steps > 5 eta | largest step / eta (exact) | at")
    for scenario, tensors in results.items():
        for kind, a in sorted(by_kind(names, sizes, tensors, args.min_q8_size).items()):
            print(f"{scenario} | {kind} | {a['size']} | {a['v0']:.3g} | {a['over5']:.3g} | {a['max']:.3g} "
                  f"({a['ref']:.3g}) | {a['at']}")
    print(f"done in {time.time() - began:.1f} s")
    return 0 if math.isfinite(losses[-1]) else 1


if __name__ == "__main__":
    entry_point(main)
