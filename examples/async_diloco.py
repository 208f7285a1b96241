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
[version] then the flat parameters; it sends [PUSH, v] then the flat delta; it sends [DONE, 0] when finished. Each
worker talks to the server over its own two-rank process group, served by its own thread of the server, so that
every receive has a real timeout: a gloo timeout closes every connection of its group (a timed-out wait in
gloo/transport/tcp/unbound_buffer.cc, as torch 1.13 and 2.13 vendor it, signals "Application timeout caused pair
closure" to the whole context), and a receive from any source has none.

A worker the server hears nothing from for --timeout seconds (its H local steps included) is reported stalled; one
whose connection breaks (it died) is reported lost. Either way the server goes on with the others: the events it
applied from that worker stay in the output and the histogram, and the run ends with the survivors.

Exit status: 0 when every worker finished; 3 when the run finished degraded (a worker stalled or was lost; each
is named on stderr with the events it had applied); 1 when the server failed; 2 for bad arguments (one line).
"""
import collections
import datetime
import os
import re
import socket
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from example_args import SEED, TIMEOUT, Parser, check_cgad, check_memory, entry_point, integer, real

PULL, PUSH, DONE = 0, 1, 2
FEATURES = 16
MAX_WORKERS = 256
DEGRADED = 3  # the exit status of a run that finished without one of its workers (stalled or lost)


def parse_args(argv):
    p = Parser(description=__doc__.split("\n\n")[0])
    positive = integer(at_least=1)
    # Each worker is a process, a two-rank gloo group (its own TCP connection) and a thread on the server: a few
    # hundred is already past what one machine serves, and far past a small-scale study.
    p.add_argument("--workers", type=integer(at_least=1, at_most=MAX_WORKERS), default=3,
                   help=f"N worker processes (the server is one more), at most {MAX_WORKERS}")
    p.add_argument("--rounds", type=positive, default=6, help="pseudo-gradients each worker sends")
    p.add_argument("--inner-steps", type=positive, default=10, help="H, local AdamW steps per round")
    p.add_argument("--inner-lr", type=real(at_least=0), default=3e-3, help="local AdamW learning rate")
    # 3e-3, as diloco_torch.py's CGAD: at 1e-2 CGAD's Adam-normalized first steps (each element moves about lr per
    # event) overshoot this small student, and the held-out loss rose after 12 events in 1 of 6 loaded runs (0.905 ->
    # 0.928) and after 24 in 5 of 6 (up to 1.43); at 3e-3 it fell to 0.29-0.53 in every run, loaded or not.
    p.add_argument("--outer-lr", type=real(at_least=0), default=3e-3, help="the server's CGAD learning rate")
    p.add_argument("--state", default="fp32", choices=["fp32", "bf16", "q8"], help="the server's CGAD state format")
    p.add_argument("--slow", type=real(at_least=0, at_most=60.0), default=0.002,
                   help="extra seconds per local step for each worker rank")
    p.add_argument("--width", type=positive, default=64, help="hidden units of the student")
    p.add_argument("--seed", type=SEED, default=0, help="0..2^32 - 1")
    p.add_argument("--timeout", type=TIMEOUT, default=120.0,
                   help="seconds the server waits for a worker's next message before it reports the worker stalled "
                        "and goes on without it (also the connection set-up's)")
    args = p.parse_args(argv)
    # Every process (the server and each worker) holds the student's θ and, at least, its gradient, AdamW's two
    # moments, the round's starting point and a pseudo-gradient: six float32 copies of its parameters.
    check_memory(p, f"--width {args.width} with --workers {args.workers}",
                 (args.workers + 1) * 6 * 4 * student_parameters(args.width))
    check_cgad(p, lambda: server_optimizer([nn.Parameter(torch.zeros(1))], args))
    return args


def server_optimizer(params, args):
    """The server's outer optimizer; parse_args builds one over a placeholder first, so that what cgad refuses
    (--outer-lr 1e12) is refused before any process starts, not in a traceback from the server's process."""
    import cgad.torch

    return cgad.torch.CGAD(params, lr=args.outer_lr, state=args.state)


def student_parameters(width):
    """The parameter count of student(width): two hidden layers of `width` units."""
    return FEATURES * width + width + width * width + width + width + 1


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


def worker(rank, args, link):
    torch.manual_seed(args.seed + rank)
    model = student(args.width)
    inner = torch.optim.AdamW(model.parameters(), lr=args.inner_lr)
    x, y = task(args.seed, 4096, rank)
    flat = parameters_to_vector(model.parameters()).detach()
    version = torch.zeros(1, dtype=torch.int64)
    for _ in range(args.rounds):
        dist.send(header(PULL), dst=0, group=link)
        dist.recv(version, src=0, group=link)
        dist.recv(flat, src=0, group=link)
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
        dist.send(header(PUSH, int(version)), dst=0, group=link)
        dist.send(delta, dst=0, group=link)
    dist.send(header(DONE), dst=0, group=link)


def gloo_reason(error):
    """The reason in a gloo transport error, without its source location and advice: "Read error
    [127.0.0.1]:904: Connection reset by peer"."""
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    return re.sub(r"^\[[^\]]*\] ", "", first).split(". ")[0]


class Lost(Exception):
    """A worker the server cannot hear from any more: stalled past --timeout, or its connection broke."""


class Server:
    """The parameter server: one thread per worker (serve) receives that worker's messages over its own group;
    the model, its optimizer and the event record change under one lock, so events are applied one at a time in
    the order they arrive."""

    def __init__(self, args):
        torch.manual_seed(args.seed)
        self.args = args
        self.timeout = datetime.timedelta(seconds=args.timeout)
        self.model = student(args.width)
        self.params = list(self.model.parameters())
        self.opt = server_optimizer(self.params, args)
        self.lock = threading.Lock()
        self.version = 0
        self.histogram = collections.Counter()
        self.applied = collections.Counter()  # events applied per worker
        self.pulled = {}  # the version each worker was last sent, the server's own record of where its delta started
        self.lost = {}  # worker: what became of it
        self.failure = None

    def receive(self, tensor, w, link):
        self.complete(lambda: dist.irecv(tensor, src=w, group=link), "nothing from it")

    def send(self, tensor, w, link):
        self.complete(lambda: dist.isend(tensor, dst=w, group=link), "a send to it did not complete")

    def complete(self, start, waiting):
        """Starts a transfer with the worker and waits for it at most --timeout: one that ends in an error sooner
        lost its connection (the worker died); one that takes the whole timeout is a stalled worker (gloo's
        send, too, waits for the receiver to take the data)."""
        began = time.monotonic()
        try:
            completed = start().wait(self.timeout)
        except RuntimeError as e:
            if time.monotonic() - began < self.args.timeout:
                raise Lost(f"lost: its connection broke ({gloo_reason(e)})") from None
            completed = False
        if completed is False:  # torch may say a timeout by returning False rather than raising
            raise Lost(f"stalled: {waiting} for {time.monotonic() - began:.1f} s (--timeout {self.args.timeout:g})")

    def serve(self, w, link):
        message = torch.zeros(2, dtype=torch.int64)
        delta = torch.zeros(sum(p.numel() for p in self.params))
        try:
            while True:
                self.receive(message, w, link)
                kind, value = int(message[0]), int(message[1])
                if kind == PULL:
                    with self.lock:
                        self.pulled[w] = self.version
                        version, flat = self.version, parameters_to_vector(self.params).detach().clone()
                    self.send(torch.tensor([version], dtype=torch.int64), w, link)
                    self.send(flat, w, link)
                elif kind == PUSH:
                    self.receive(delta, w, link)
                    with self.lock:
                        self.apply(w, value, delta)
                elif kind == DONE:
                    return
                else:
                    raise RuntimeError(f"worker {w} sent an unknown message kind {kind}")
        except Lost as e:
            with self.lock:
                self.lost[w] = str(e)
                print(f"async_diloco: worker {w} {e}; its {self.applied[w]} applied events are kept and the run "
                      f"goes on without it", file=sys.stderr, flush=True)
        except Exception as e:  # a broken protocol or a failed step: the whole run fails, saying why
            with self.lock:
                self.failure = self.failure or f"{type(e).__name__}: {e}"

    def apply(self, w, value, delta):
        if self.pulled.get(w) != value:
            raise RuntimeError(f"worker {w} says its delta started at version {value}, it was sent "
                               f"{self.pulled.get(w)}")
        tau = self.version - value
        at = 0
        for p in self.params:
            p.grad = delta[at:at + p.numel()].view_as(p).clone()
            at += p.numel()
        returned = self.opt.step(staleness=tau)
        # cgad.torch keeps the step's report in last_report (torch's step() returns the closure's loss); where it
        # has no last_report, step() returns the report.
        report = getattr(self.opt, "last_report", returned)
        print(f"event {sum(self.histogram.values()):3d} worker {w} started at version {value} applied at version "
              f"{self.version} staleness {tau} reported tau {report.tau_effective} sigma {report.sigma:.6f} "
              f"applied {report.applied}", flush=True)
        self.histogram[tau] += 1
        self.applied[w] += 1
        if report.applied:
            self.version += 1

    def held_out(self, x, y):
        with torch.no_grad():
            return F.mse_loss(self.model(x), y).item()


def server(args, links):
    """Serves every worker until each is done, stalled or lost; returns the exit status."""
    s = Server(args)
    held_x, held_y = task(args.seed, 2048, 0x7fff)
    before = s.held_out(held_x, held_y)
    threads = [threading.Thread(target=s.serve, args=(w, link), name=f"worker {w}")
               for w, link in enumerate(links, start=1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if s.failure:
        print(f"async_diloco: {s.failure}", file=sys.stderr)
        return 1
    after = s.held_out(held_x, held_y)
    print("staleness histogram: " + " ".join(f"{tau}:{s.histogram[tau]}" for tau in sorted(s.histogram)))
    without = "".join(f", worker {w} {s.lost[w].split(':')[0]} after {s.applied[w]} events" for w in sorted(s.lost))
    print(f"summary: {sum(s.histogram.values())} events from {args.workers} workers{without}, version {s.version}, "
          f"held-out loss {before:.6f} -> {after:.6f}", flush=True)
    return DEGRADED if s.lost else 0


def run(rank, args, port):
    """One process: rank 0 the server, the others workers. Exits with the server's status (a worker: 0, or 1
    where the server stopped talking to it; the server says what became of it)."""
    # gloo's connections to 127.0.0.1 only, whatever the machine's network.
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    timeout = datetime.timedelta(seconds=args.timeout)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=args.workers + 1, timeout=timeout)
        # Each worker's own group with the server (see the protocol above): a timeout ends that group only.
        links = [dist.new_group([0, w], timeout=timeout) for w in range(1, args.workers + 1)]
    except RuntimeError as e:
        if rank == 0:
            print(f"async_diloco: the {args.workers} workers did not all connect within --timeout {args.timeout:g} s "
                  f"({str(e).splitlines()[0]})", file=sys.stderr)
        sys.exit(1)
    if rank == 0:
        code = server(args, links)
    else:
        try:
            worker(rank, args, links[rank - 1])
            code = 0
        except RuntimeError:
            code = 1
    dist.destroy_process_group()
    sys.exit(code)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(1)  # N + 1 processes share the machine's cores
    # fork: the children share the parent's imported torch instead of importing it again (seconds each).
    # Not torch.multiprocessing's start_processes(join=True): it ends every process when one exits, so one dead
    # worker took the server and every applied event with it.
    fork = mp.get_context("fork")
    port = free_port()
    processes = [fork.Process(target=run, args=(rank, args, port)) for rank in range(args.workers + 1)]
    for p in processes:
        p.start()
    processes[0].join()
    status = processes[0].exitcode
    for p in processes[1:]:
        # After a clean run every worker has sent DONE and is only closing its connections; after any other, a
        # worker still there is one the server gave up on (stopped, or talking to no one): it is ended here.
        p.join(timeout=args.timeout if status == 0 else 0)
        if p.is_alive():
            p.kill()
            p.join()
    return status if status in (0, 1, DEGRADED) else 1


if __name__ == "__main__":
    entry_point(main)
