#!/usr/bin/python3
"""Asynchronous DiLoCo in plain PyTorch, with cgad.torch's outer optimizers.

K workers are simulated in one process. In every outer round each worker runs H inner AdamW steps on its own
batches of a small character-level language model, starting from the global parameters it last received, and
sends its pseudo-gradient delta = theta_start - theta_local to the server; the pseudo-gradient arrives some
rounds later (its staleness tau, drawn per worker and round uniformly from 0..--tau, or --tau for every one with
--delay constant). In each round the server applies what arrives, one outer step per distinct staleness, each
worker's pseudo-gradient weighted 1/K (the sum of those with that staleness over K, stepped with it), so that a
round moves the parameters by as much pseudo-gradient as a synchronous one; then every worker takes the new
global parameters. --tau 0 is synchronous DiLoCo (Douillard et al. 2023): one step on the mean of the K. With --outer pa-cgad each arriving
pseudo-gradient carries one fragment of the parameters (round robin over workers and rounds), as a
bandwidth-limited partial synchronization.

The text is the GNU GPL version 3, which ships with every Debian system (base-files:
/usr/share/common-licenses/GPL-3); the last tenth is held out, and the loss printed per round is the global
model's mean cross-entropy (nats per character) on fixed held-out batches.

    PYTHONPATH=build/python /usr/bin/python3 examples/diloco_torch.py --outer cgad --tau 4
"""
import math
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import cgad.torch as outer
from example_args import (SEED, Parser, check_cgad, check_memory, entry_point, integer, quadratic_count, read_corpus,
                          real)

TEXT = "/usr/share/common-licenses/GPL-3"
OUTER = {"cgad": outer.CGAD, "pa-cgad": outer.PACGAD, "adam-decay": outer.AdamDecay, "adam": outer.Adam,
         "nesterov": outer.Nesterov, "sdm": outer.SDM}


def parse_args(argv):
    p = Parser(description=__doc__.split("\n\n")[0])
    positive = integer(at_least=1)
    p.add_argument("--outer", choices=sorted(OUTER), default="cgad", help="outer optimizer")
    p.add_argument("--outer-lr", type=real(at_least=0),
                   help="outer learning rate (default 0.7 for nesterov and sdm, the DiLoCo recipe; 3e-3 for the "
                        "Adam family, the start docs/results/outer-lr.md measured)")
    p.add_argument("--state", default="fp32", choices=["fp32", "bf16", "q8"], help="outer optimizer state format")
    p.add_argument("--q8-semantics", default="cgad", choices=["cgad", "bnb"],
                   help="8-bit state semantics (Adam family)")
    p.add_argument("--params", default="fp32", choices=["fp32", "bf16"],
                   help="the global parameters' dtype (the workers always train in fp32)")
    p.add_argument("--tau", type=integer(at_least=0), default=4, help="largest staleness in outer rounds")
    p.add_argument("--delay", choices=["uniform", "constant"], default="uniform",
                   help="staleness uniform in 0..tau per worker and round, or tau for every pseudo-gradient")
    p.add_argument("--fragments", type=positive, default=2, help="PA-CGAD's fragments")
    p.add_argument("--workers", type=positive, default=4, help="K")
    p.add_argument("--inner-steps", type=positive, default=10, help="H")
    p.add_argument("--inner-lr", type=real(at_least=0), default=3e-3, help="inner AdamW learning rate")
    p.add_argument("--rounds", type=positive, default=30, help="outer rounds")
    p.add_argument("--batch", type=positive, default=32, help="windows per inner step")
    p.add_argument("--context", type=positive, default=16,
                   help="characters the model sees before the one it predicts")
    p.add_argument("--width", type=positive, default=128, help="hidden units per layer")
    p.add_argument("--layers", type=positive, default=2, help="hidden layers")
    p.add_argument("--seed", type=SEED, default=0, help="0..2^32 - 1")
    p.add_argument("--threads", type=positive, default=1,
                   help="torch CPU threads, and cgad's (a model this small gains little from more)")
    p.add_argument("--quiet", action="store_true", help="print the summary only")
    p.add_argument("--tensorboard", metavar="DIR",
                   help="write the outer optimizer's metrics() and the held-out loss there every round (TensorBoard "
                        "event files; needs the tensorboard package)")
    args = p.parse_args(argv)
    args.writer = None
    if args.tensorboard is not None:
        try:  # torch's SummaryWriter imports the tensorboard package, which cgad does not pin (docs/python.md)
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            p.error(f"--tensorboard needs the tensorboard package (pip install tensorboard): {e}")
        args.writer = SummaryWriter
    args.corpus = read_corpus(p, TEXT, args.context, args.workers)
    # The server and each worker hold a model and its gradients, each worker AdamW's two moments, the outer
    # optimizer two more: at least 4 + 4 K float32 copies of the parameters.
    vocab = len(set(args.corpus))

    def parameters(width):
        return sum(q.numel() for q in CharLM(vocab, width, args.layers, args.context).parameters())
    check_memory(p, f"--width {args.width} with --layers {args.layers} and --workers {args.workers}",
                 (4 + 4 * args.workers) * 4 * quadratic_count(args.width, parameters))
    dtype = torch.float32 if args.params == "fp32" else torch.bfloat16
    check_cgad(p, lambda: make_outer([nn.Parameter(torch.zeros(1, dtype=dtype)) for _ in range(args.fragments)], args))
    return args


def outer_lr(args):
    """--outer-lr, or the default of the outer optimizer's family."""
    if args.outer_lr is not None:
        return args.outer_lr
    return 0.7 if args.outer in ("nesterov", "sdm") else 3e-3


def make_outer(params, args):
    """The outer optimizer over the global parameters, with the options the command line chose."""
    kwargs = dict(state=args.state, threads=args.threads, lr=outer_lr(args))
    if args.outer not in ("nesterov", "sdm"):
        kwargs["q8_semantics"] = args.q8_semantics
        # bitsandbytes' default keeps tensors under 4096 elements in fp32; in a model this small that would be
        # almost every tensor, so the 8-bit state is asked for on all of them.
        if args.q8_semantics == "bnb":
            kwargs["min_q8_size"] = 0
    if args.outer == "pa-cgad":
        kwargs["fragments"] = args.fragments
    return OUTER[args.outer](params, **kwargs)


class CharLM(nn.Module):
    """A small character-level language model: the previous --context characters' embeddings, concatenated, through
    --layers tanh hidden layers of --width units, to logits over the next character (Bengio et al. 2003's
    architecture; seven tensors by default, of 1440 to 32768 elements, so q8 blocks restart at each)."""

    def __init__(self, vocab, width, layers, context, embedding=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, embedding)
        sizes = [context * embedding] + [width] * layers
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.head = nn.Linear(sizes[-1], vocab)

    def forward(self, x):
        h = self.embed(x).flatten(1)
        for layer in self.hidden:
            h = torch.tanh(layer(h))
        return self.head(h)


def batches(data, batch, context, generator):
    """`batch` windows of `context` characters and the character after each."""
    starts = torch.randint(0, len(data) - context - 1, (batch,), generator=generator)
    x = torch.stack([data[s:s + context] for s in starts])
    return x, data[starts + context]


def loss_of(model, x, y):
    return F.cross_entropy(model(x), y)


def train(args):
    """One run with parse_args's arguments: the held-out loss before the first round and after each (it stops at
    the first that is not finite), the outer events' counts and the seconds the rounds took. Printed per round
    unless --quiet; bench/outer_lr_sweep.py calls it once per grid point and seed."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    text = args.corpus
    vocab = sorted(set(text))
    data = torch.tensor([vocab.index(c) for c in text], dtype=torch.long)
    split = len(data) * 9 // 10
    train, held_out = data[:split], data[split:]
    shards = [train[k * len(train) // args.workers:(k + 1) * len(train) // args.workers]
              for k in range(args.workers)]
    eval_batches = [batches(held_out, 256, args.context, torch.Generator().manual_seed(1000 + i)) for i in range(4)]

    # The global model (the server's parameters, in --params) and one fp32 copy per worker with its inner AdamW.
    server = CharLM(len(vocab), args.width, args.layers, args.context)
    dtype = torch.float32 if args.params == "fp32" else torch.bfloat16
    server.to(dtype)
    global_params = list(server.parameters())
    workers = [CharLM(len(vocab), args.width, args.layers, args.context) for _ in range(args.workers)]
    for w in workers:
        w.load_state_dict({k: v.float() for k, v in server.state_dict().items()})
    inner = [torch.optim.AdamW(w.parameters(), lr=args.inner_lr, weight_decay=0.0) for w in workers]
    generators = [torch.Generator().manual_seed(args.seed * 1000 + k) for k in range(args.workers)]

    opt = make_outer(global_params, args)

    def evaluate():
        server_fp32 = CharLM(len(vocab), args.width, args.layers, args.context)
        server_fp32.load_state_dict({k: v.float() for k, v in server.state_dict().items()})
        with torch.no_grad():
            return sum(loss_of(server_fp32, x, y).item() for x, y in eval_batches) / len(eval_batches)

    delays = random.Random(args.seed)
    pending = {}  # arrival round -> [(staleness, worker, pseudo-gradient tensors)]
    start = time.time()
    losses, counts = [evaluate()], {"events": 0, "applied": 0, "zero-gate": 0, "refused": 0}
    writer = args.writer(args.tensorboard) if args.writer is not None else None
    if writer is not None:
        opt.watch_delta_norm()  # metrics()'s delta_norm too (opt-in: one more read of each Δ)
    if not args.quiet:
        print(f"round {0:4d}  held-out loss {losses[0]:.4f}")
    for r in range(args.rounds):
        for k, (w, o, g) in enumerate(zip(workers, inner, generators)):
            start_params = [p.detach().clone() for p in w.parameters()]
            for _ in range(args.inner_steps):
                x, y = batches(shards[k], args.batch, args.context, g)
                o.zero_grad(set_to_none=True)
                loss_of(w, x, y).backward()
                o.step()
            delta = [(s - p.detach()).to(dtype) for s, p in zip(start_params, w.parameters())]
            tau = args.tau if args.delay == "constant" else delays.randint(0, args.tau)
            pending.setdefault(r + tau, []).append((tau, k, delta))
        arrivals = pending.pop(r, [])
        for tau in sorted({a[0] for a in arrivals}):
            group = [a for a in arrivals if a[0] == tau]
            for i, p in enumerate(global_params):
                p.grad = (torch.stack([d[i].float() for _, _, d in group]).sum(0) / args.workers).to(dtype)
            if args.outer == "pa-cgad":
                report = opt.step(staleness=tau, fragment=(group[0][1] + r) % args.fragments, end_round=False)
            else:
                report = opt.step(staleness=tau)
            counts["events"] += 1
            counts["applied" if report.applied else ("zero-gate" if report.reason == "zero-gate" else "refused")] += 1
        if args.outer == "pa-cgad":
            opt.advance_round()
        for w in workers:  # every worker continues from the new global parameters
            with torch.no_grad():
                for p, q in zip(w.parameters(), global_params):
                    p.copy_(q.float())
        losses.append(evaluate())
        if writer is not None:  # plain numbers: the round's last outer step and the counts so far (docs/python.md)
            for name, value in opt.metrics().items():
                writer.add_scalar(f"outer/{name}", value, r + 1)
            writer.add_scalar("held_out_loss", losses[-1], r + 1)
        if not args.quiet:
            print(f"round {r + 1:4d}  held-out loss {losses[-1]:.4f}  events {len(arrivals)}")
        if not math.isfinite(losses[-1]):
            break
    elapsed = time.time() - start
    if writer is not None:
        writer.close()
    return losses, counts, elapsed


def main(argv):
    args = parse_args(argv)
    losses, counts, elapsed = train(args)
    print(f"summary: outer {args.outer} (state {args.state}, lr {outer_lr(args)}), tau {args.tau} ({args.delay}), "
          f"K {args.workers}, H {args.inner_steps}, rounds {args.rounds}: held-out loss {losses[0]:.4f} -> "
          f"{losses[-1]:.4f} (best {min(losses):.4f}); {counts['events']} outer events, {counts['applied']} applied, "
          f"{counts['zero-gate']} at a zero gate, {counts['refused']} refused; {elapsed:.1f} s")
    return 0 if math.isfinite(losses[-1]) else 1


if __name__ == "__main__":
    entry_point(main)
