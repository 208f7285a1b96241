#!/usr/bin/python3
"""Asynchronous DiLoCo with a real parameter server: one server process and N worker processes over
torch.distributed (gloo, on 127.0.0.1 only), the server applying each pseudo-gradient through cgad.torch.CGAD
with the staleness it really has.

Each worker repeats --rounds times: it asks the server for the global parameters and their version v (the number
of pseudo-gradients the server has applied), runs H local AdamW steps on its own shard of a regression task (a
small MLP student learning a fixed random teacher), and sends its pseudo-gradient delta = theta_start - theta_local
together with v. Workers run at different speeds (worker w sleeps (w - 1) * --slow seconds per local step), so
the server receives deltas computed from old parameters: it applies each one as it arrives, with staleness
tau = version_now - v, then increments its version. Every event is printed as it is applied, then the measured
staleness histogram and the held-out loss (mean squared error) before and after.

    PYTHONPATH=build/python /usr/bin/python3 examples/async_diloco.py --workers 3 --rounds 6

Protocol (point-to-point, tensors of int64 headers then float32 payloads): a worker sends [PULL, 0] and receives
[version] then the flat parameters; it sends [PUSH, v] then the flat delta; it sends [DONE, 0] when finished. The
server serves whichever worker speaks next (dist.recv without a source) and stops when every worker is done.
"""
import argparse
import collections
import datetime
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

PULL, PUSH, DONE = 0, 1, 2
FEATURES = 16


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=3, help="N worker processes (the server is one more)")
    p.add_argument("--rounds", type=int, default=6, help="pseudo-gradients each worker sends")
    p.add_argument("--inner-steps", type=int, default=10, help="H, local AdamW steps per round")
    p.add_argument("--inner-lr", type=float, default=3e-3, help="local AdamW learning rate")
    p.add_argument("--outer-lr", type=float, default=1e-2, help="the server's CGAD learning rate")
    p.add_argument("--state", default="fp32", choices=["fp32", "bf16", "q8"], help="the server's CGAD state format")
    p.add_argument("--slow", type=float, default=0.002, help="extra seconds per local step for each worker rank")
    p.add_argument("--width", type=int, default=64, help="hidden units of the student")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds any one message may take")
    args = p.parse_args(argv)
    for name in ("workers", "rounds", "inner_steps", "width"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.slow < 0 or args.timeout <= 0:
        p.error("--slow must be >= 0 and --timeout > 0")
    return args


def student(width):
    return nn.Sequential(nn.Linear(FEATURES, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(),
                         nn.Linear(width, 1))


def task(seed, n, shard):
    """(x, y) of the regression task: a fixed random teacher (the same in every process), inputs by shard."""
    teacher = torch.Generator().manual_seed(seed)
    w1, w2 = torch.randn(FEATURES, 32, generator=teacher), torch.randn(32, 1, generator=teacher) / 32 ** 0.5
    g = torch.Generator().manual_seed(seed * 1000 + 1 + shard)
    x = torch.randn(n, FEATURES, generator=g)
    return x, torch.tanh(x @ w1) @ w2


def header(kind, value=0):
    return torch.tensor([kind, value], dtype=torch.int64)


def worker(rank, args):
    torch.manual_seed(args.seed + rank)
    model = student(args.width)
    inner = torch.optim.AdamW(model.parameters(), lr=args.inner_lr)
    x, y = task(args.seed, 4096, rank)
    flat = parameters_to_vector(model.parameters()).detach()
    version = torch.zeros(1, dtype=torch.int64)
    for _ in range(args.rounds):
        dist.send(header(PULL), dst=0)
        dist.recv(version, src=0)
        dist.recv(flat, src=0)
        with torch.no_grad():
            vector_to_parameters(flat, model.parameters())
        start = flat.clone()
        for _ in range(args.inner_steps):
            batch = torch.randint(0, x.shape[0], (64,))
            loss = F.mse_loss(model(x[batch]), y[batch])
            inner.zero_grad()
            loss.backward()
            inner.step()
            time.sleep(args.slow * (rank - 1))
        delta = start - parameters_to_vector(model.parameters()).detach()
        dist.send(header(PUSH, int(version)), dst=0)
        dist.send(delta, dst=0)
    dist.send(header(DONE), dst=0)


def server(args):
    import cgad.torch

    torch.manual_seed(args.seed)
    model = student(args.width)
    params = list(model.parameters())
    opt = cgad.torch.CGAD(params, lr=args.outer_lr, state=args.state)
    held_x, held_y = task(args.seed, 2048, 0x7fff)

    def held_out():
        with torch.no_grad():
            return F.mse_loss(model(held_x), held_y).item()

    before = held_out()
    version = 0
    histogram = collections.Counter()
    done = 0
    pulled = {}  # the version each worker was last sent, the server's own record of where its delta started
    message = torch.zeros(2, dtype=torch.int64)
    delta = torch.zeros(sum(p.numel() for p in params))
    while done < args.workers:
        src = dist.recv(message)
        kind, value = int(message[0]), int(message[1])
        if kind == PULL:
            pulled[src] = version
            dist.send(torch.tensor([version], dtype=torch.int64), dst=src)
            dist.send(parameters_to_vector(params).detach(), dst=src)
        elif kind == PUSH:
            dist.recv(delta, src=src)
            if pulled.get(src) != value:
                raise RuntimeError(f"worker {src} says its delta started at version {value}, it was sent "
                                   f"{pulled.get(src)}")
            tau = version - value
            at = 0
            for p in params:
                p.grad = delta[at:at + p.numel()].view_as(p).clone()
                at += p.numel()
            returned = opt.step(staleness=tau)
            # cgad.torch keeps the step's report in last_report (torch's step() returns the closure's loss);
            # where it has no last_report, step() returns the report.
            report = getattr(opt, "last_report", returned)
            print(f"event {sum(histogram.values()):3d} worker {src} started at version {value} applied at version "
                  f"{version} staleness {tau} reported tau {report.tau_effective} sigma {report.sigma:.6f} "
                  f"applied {report.applied}", flush=True)
            histogram[tau] += 1
            if report.applied:
                version += 1
        elif kind == DONE:
            done += 1
        else:
            raise RuntimeError(f"worker {src} sent an unknown message kind {kind}")
    after = held_out()
    print("staleness histogram: " + " ".join(f"{tau}:{histogram[tau]}" for tau in sorted(histogram)))
    print(f"summary: {sum(histogram.values())} events from {args.workers} workers, version {version}, "
          f"held-out loss {before:.6f} -> {after:.6f}")


def run(rank, args, port):
    # gloo's connections to 127.0.0.1 only, whatever the machine's network.
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.workers + 1,
                            timeout=datetime.timedelta(seconds=args.timeout))
    try:
        if rank == 0:
            server(args)
        else:
            worker(rank, args)
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(1)  # N + 1 processes share the machine's cores
    # fork: the children share the parent's imported torch instead of importing it again (seconds each).
    mp.start_processes(run, args=(args, free_port()), nprocs=args.workers + 1, join=True, start_method="fork")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
