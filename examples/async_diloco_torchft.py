#!/usr/bin/python3
"""Asynchronous DiLoCo on torchft's parameter server: one server process (cgad.torch.parameter_server.OuterServer,
torchft 0.2's ParameterServer stepping a cgad outer optimizer with the real staleness) and N worker processes of
different speeds on the loopback; optionally a worker killed (SIGKILL) and restarted with a new session, and the
server killed and restarted from its checkpoint. docs/python.md, "Asynchronous DiLoCo on torchft's
ParameterServer".

Each worker runs --rounds rounds: pull θ and its version v, run H inner AdamW steps on its shard of the
character-level task of examples/diloco_torch.py (the same small model, CharLM), push Δ = θ - θ_local with v.
Worker k sleeps (k + 1) * --slow seconds per inner step. The server steps each Δ as it arrives with τ = its version
now - v, counts a version per applied Δ, and checkpoints atomically before it answers; it ends once every worker
has said it is done. A killed worker loses the round it was in; restarted, it runs its --rounds again. Printed: the faults injected, the τ histogram, the held-out loss (nats per character) of the initial
and final θ; --json writes the same, with every event (worker, τ, reason), atomically.

    PYTHONPATH=build/python RUST_LOG=warn python examples/async_diloco_torchft.py --outer cgad --workers 3 \
        --rounds 8 --kill-worker-at 3 --kill-server-at 8 --dir /tmp/ps

Roles: without --role this is the launcher: it forks the server and the workers, each running this script's main
with its own arguments and --role server / --role worker --worker k (a fork starts in milliseconds where a new
interpreter importing torch and torchft takes seconds, a minute on a loaded machine; every process is still its
own, with its own sockets, and a SIGKILL ends one alone). Exit status: 0 when every worker finished, 1 when a process failed or the run
outlasted --timeout, 2 for bad arguments (one line).
"""
import argparse
import collections
import importlib
import ipaddress
import json
import multiprocessing
import os
import socket
import sys
import time

import torch

import atomic_file
import diloco_torch
import trap_in_training
from diloco_torch import OUTER, TEXT, CharLM
from example_args import SEED, TIMEOUT, Parser, integer, read_corpus, real

GPT_HEADS = 4
POLL = 0.2  # seconds between the launcher's looks at the server's checkpoint (a load of it), and the server's


def parse_args(argv):
    p = Parser(description=__doc__.split("\n\n")[0])
    positive = integer(at_least=1)
    p.add_argument("--outer", choices=["cgad", "adam-decay", "nesterov", "pa-cgad", "sdm"], default="cgad",
                   help="the server's outer optimizer")
    p.add_argument("--outer-lr", type=real(at_least=0),
                   help="outer learning rate (default 0.7 / --workers for nesterov and sdm, 3e-3 for the Adam "
                        "family)")
    p.add_argument("--tau-cut", type=positive, default=32, help="the cosine gate's cutoff (CGAD, PA-CGAD)")
    p.add_argument("--workers", type=integer(at_least=1, at_most=64), default=3, help="N worker processes")
    p.add_argument("--rounds", type=positive, default=8, help="pseudo-gradients each worker pushes")
    p.add_argument("--inner-steps", type=positive, default=10, help="H")
    p.add_argument("--inner-lr", type=real(at_least=0), default=3e-3, help="inner AdamW learning rate")
    p.add_argument("--batch", type=positive, default=32, help="windows per inner step")
    p.add_argument("--context", type=positive, default=16, help="characters the model sees")
    p.add_argument("--model", choices=["charlm", "gpt"], default="charlm",
                   help="the examples' character-level models: diloco_torch.py's CharLM (an MLP over --context "
                        "characters) or trap_in_training.py's GPT (pre-LayerNorm blocks of 4 heads)")
    p.add_argument("--width", type=positive, default=128, help="hidden units per layer (the GPT's d_model)")
    p.add_argument("--layers", type=positive, default=2, help="hidden layers (the GPT's blocks)")
    p.add_argument("--slow", type=real(at_least=0, at_most=60.0), default=0.005,
                   help="worker k sleeps (k + 1) times this many seconds per inner step")
    p.add_argument("--kill-worker-at", type=positive,
                   help="SIGKILL worker 0 once the server holds this many of its pseudo-gradients, then restart it")
    p.add_argument("--kill-server-at", type=positive,
                   help="SIGKILL the server at this version, then restart it from its checkpoint")
    p.add_argument("--dir", required=True, help="a folder for the checkpoint, the event log and the workers' logs")
    p.add_argument("--json", help="write the summary here (atomically)")
    p.add_argument("--seed", type=SEED, default=0, help="0..2^32 - 1")
    p.add_argument("--timeout", type=TIMEOUT, default=300.0, help="seconds the whole run may take")
    p.add_argument("--role", choices=["server", "worker"], help=argparse.SUPPRESS)
    p.add_argument("--worker", type=integer(at_least=0), default=0, help=argparse.SUPPRESS)
    p.add_argument("--port", type=integer(at_least=1, at_most=65535), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.model == "gpt" and args.width % GPT_HEADS:
        p.error(f"--width must be a multiple of {GPT_HEADS} (the GPT's heads), got {args.width}")
    if not os.path.isdir(args.dir):
        p.error(f"--dir {args.dir}: not a folder")
    if args.role is None and os.path.exists(paths(args)[0]):
        p.error(f"--dir {args.dir} holds a checkpoint (outer.ckpt) already: give an empty folder")
    for option in ("kill_worker_at", "kill_server_at"):  # versions every run reaches, whatever the timing
        if getattr(args, option) is not None and getattr(args, option) >= args.rounds:
            p.error(f"--{option.replace('_', '-')} must be below --rounds {args.rounds}, got {getattr(args, option)}")
    args.corpus = read_corpus(p, TEXT, args.context, args.workers)
    if args.role is None:
        try:
            importlib.import_module("torchft")  # torch 2.x's; the forked processes need it
        except Exception as e:
            p.error(f"needs torchft (pip install torchft, torch 2.x): {type(e).__name__}: {e}")
        # Every process of this run is on this machine and talks over the loopback; but torchft's ParameterServer
        # hands each session its TCPStore by the host's name, so that name must resolve to a loopback address.
        host = socket.gethostname()
        try:
            resolved = socket.gethostbyname(host)
        except OSError as e:
            p.error(f"this host's name {host!r} does not resolve ({e}); torchft's ParameterServer names its store by it")
        if not ipaddress.ip_address(resolved).is_loopback:
            p.error(f"this host's name {host!r} resolves to {resolved}, not a loopback address: torchft's "
                    "ParameterServer names its store by it, and this example keeps every connection on the loopback")
    return args


# --- the task, as examples/diloco_torch.py's ------------------------------------------------------------------

def task(args):
    """(vocabulary size, the workers' shards, the held-out batches), from the text."""
    text = args.corpus
    vocab = sorted(set(text))
    data = torch.tensor([vocab.index(c) for c in text], dtype=torch.long)
    split = len(data) * 9 // 10
    train, held_out = data[:split], data[split:]
    shards = [train[k * len(train) // args.workers:(k + 1) * len(train) // args.workers] for k in range(args.workers)]
    evals = [draw(args, held_out, 256, torch.Generator().manual_seed(1000 + i)) for i in range(4)]
    return len(vocab), shards, evals


def initial_model(args, vocab):
    torch.manual_seed(args.seed)
    if args.model == "gpt":  # trap_in_training.py's, without its outlier features
        return trap_in_training.GPT(vocab, argparse.Namespace(width=args.width, heads=GPT_HEADS, context=args.context,
                                                              layers=args.layers, outlier_dims=0, outlier_scale=1.0))
    return CharLM(vocab, args.width, args.layers, args.context)


def draw(args, data, batch, generator):
    """A batch of the model's kind: next characters after --context ones (CharLM), or sequences (GPT)."""
    module = trap_in_training if args.model == "gpt" else diloco_torch
    return (module.sequences if args.model == "gpt" else module.batches)(data, batch, args.context, generator)


def loss_of(args, model, x, y):
    return (trap_in_training if args.model == "gpt" else diloco_torch).loss_of(model, x, y)


def outer_optimizer(args, params):
    # DiLoCo's Nesterov recipe, lr 0.7, steps the mean of N workers' pseudo-gradients; here each arrives alone, so
    # a round of N events moves as far at 0.7 / N. The Adam family normalizes Δ: 3e-3, as examples/diloco_torch.py.
    lr = args.outer_lr if args.outer_lr is not None else \
        (0.7 / args.workers if args.outer in ("nesterov", "sdm") else 3e-3)
    kwargs = dict(lr=lr, threads=1)
    if args.outer in ("cgad", "pa-cgad"):
        kwargs["tau_cut"] = args.tau_cut
    return OUTER[args.outer](params, **kwargs)


def held_out(args, model, evals):
    with torch.no_grad():
        return sum(loss_of(args, model, x, y).item() for x, y in evals) / len(evals)


def paths(args):
    return os.path.join(args.dir, "outer.ckpt"), os.path.join(args.dir, "events")


# --- the server -------------------------------------------------------------------------------------------------

def server(args):
    from cgad.torch.parameter_server import OuterServer
    torch.set_num_threads(1)
    vocab, _, _ = task(args)
    model = initial_model(args, vocab)
    params = list(model.parameters())
    checkpoint, events = paths(args)
    ps = OuterServer(params, outer_optimizer(args, params), checkpoint, port=args.port, events=events)
    print(f"server {'resumed at version ' + str(ps.version) if ps.resumed else 'started'}", flush=True)
    deadline = time.monotonic() + args.timeout
    while len(ps.finished) < args.workers and time.monotonic() < deadline:
        time.sleep(POLL)
    return 0 if len(ps.finished) == args.workers else 1


# --- a worker ---------------------------------------------------------------------------------------------------

def worker(args):
    """--rounds rounds; a failed session (the server died) is replaced by a new one, and the round it was in is
    run again. Each pushed round is logged as a JSON line: the version pulled, the version and τ answered."""
    from cgad.torch.parameter_server import Session
    torch.set_num_threads(1)
    vocab, shards, _ = task(args)
    model = initial_model(args, vocab)
    inner = torch.optim.AdamW(model.parameters(), lr=args.inner_lr, weight_decay=0.0)
    size = sum(p.numel() for p in model.parameters())
    data = torch.Generator().manual_seed(args.seed * 1000 + args.worker + 1000 * os.getpid())
    address = f"http://127.0.0.1:{args.port}/new_session"
    deadline, rounds = time.monotonic() + args.timeout, 0
    with open(os.path.join(args.dir, f"worker{args.worker}.jsonl"), "a") as log:
        while time.monotonic() < deadline:
            try:
                with Session(address, size, args.worker) as session:
                    while rounds < args.rounds:
                        version, theta = session.pull()
                        # A copy: vector_to_parameters makes the parameters views of the vector it is given.
                        torch.nn.utils.vector_to_parameters(theta.clone(), model.parameters())
                        for _ in range(args.inner_steps):
                            x, y = draw(args, shards[args.worker], args.batch, data)
                            inner.zero_grad(set_to_none=True)
                            loss_of(args, model, x, y).backward()
                            inner.step()
                            time.sleep((args.worker + 1) * args.slow)
                        delta = theta - torch.nn.utils.parameters_to_vector(model.parameters()).detach()
                        now, tau = session.push(version, delta)
                        rounds += 1
                        log.write(json.dumps({"pid": os.getpid(), "pulled": version, "version": now, "tau": tau})
                                  + "\n")
                        log.flush()
                return 0  # the session's end said this worker is done
            except Exception:  # the server is down or restarting: a new session once it is back
                time.sleep(0.2)
    return 1


# --- the launcher -----------------------------------------------------------------------------------------------

def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _role(argv):
    """A forked process's life: this script's main with its role's arguments, then exit with its status."""
    try:
        status = main(argv)
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def start(argv, role, port, extra=()):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo on the loopback, in every process forked from here
    os.environ.setdefault("RUST_LOG", "warn")
    process = multiprocessing.get_context("fork").Process(
        target=_role, args=([*argv, "--role", role, "--port", str(port), *extra],), daemon=True)
    process.start()
    return process


def progress(checkpoint):
    """(the version, worker 0's events) that the server's checkpoint holds ((0, 0) before it has one)."""
    try:
        saved = torch.load(checkpoint, weights_only=False)
    except (FileNotFoundError, EOFError, RuntimeError):
        return 0, 0
    return saved["version"], sum(1 for event in saved["log"] if event[0] == 0)


def launch(argv, args, log=print):
    begun = time.monotonic()
    checkpoint, _ = paths(args)
    port = free_port()
    procs = {"server": start(argv, "server", port)}
    for k in range(args.workers):
        procs[k] = start(argv, "worker", port, ("--worker", str(k)))
    faults = {"worker": args.kill_worker_at, "server": args.kill_server_at}
    done, deadline = [], time.monotonic() + args.timeout
    try:
        while procs["server"].is_alive():
            if time.monotonic() > deadline:
                log("the run outlasted --timeout")
                return 1, done
            version, worker0 = progress(checkpoint)
            for what, at in faults.items():
                if at is not None and (worker0 if what == "worker" else version) >= at:
                    victim = 0 if what == "worker" else "server"
                    procs[victim].kill()  # SIGKILL
                    procs[victim].join()
                    log(f"killed the {what} at version {version} ({time.monotonic() - begun:.1f} s); restarting it")
                    procs[victim] = start(argv, "worker" if what == "worker" else "server", port,
                                          ("--worker", "0") if what == "worker" else ())
                    faults[what] = None
                    done.append({"killed": what, "at_version": version})
            time.sleep(POLL)
        status = procs["server"].exitcode
        for k in range(args.workers):  # each said it was done before the server could end
            procs[k].join(timeout=max(1.0, deadline - time.monotonic()))
            status = status or (1 if procs[k].exitcode is None else procs[k].exitcode)
        log(f"the run took {time.monotonic() - begun:.1f} s")
        return status, done
    finally:
        for p in procs.values():
            if p.is_alive():
                p.kill()
                p.join()


def summary(args, faults):
    checkpoint, _ = paths(args)
    saved = torch.load(checkpoint, weights_only=False)
    vocab, _, evals = task(args)
    model = initial_model(args, vocab)
    before = held_out(args, model, evals)
    with torch.no_grad():
        for p, v in zip(model.parameters(), saved["params"]):
            p.copy_(v)
    taus = collections.Counter(tau for _, _, _, tau, _ in saved["log"])
    return {"outer": args.outer, "workers": args.workers, "events": saved["version"], "stepped": saved["stepped"],
            "faults": faults, "tau_histogram": {str(t): taus[t] for t in sorted(taus)},
            "log": [{"worker": w, "started": s, "tau": t, "reason": r} for w, _, s, t, r in saved["log"]],
            "held_out_before": before, "held_out_after": held_out(args, model, evals)}


def main(argv):
    args = parse_args(argv)
    if args.role == "server":
        return server(args)
    if args.role == "worker":
        return worker(args)
    status, faults = launch(argv, args)
    if status != 0:
        print("cgad: the run failed (a process exited with an error)", file=sys.stderr)
        return 1
    out = summary(args, faults)
    print(f"{args.outer}: {out['events']} events from {args.workers} workers, τ histogram "
          + " ".join(f"{t}:{n}" for t, n in out["tau_histogram"].items())
          + f"; held-out loss {out['held_out_before']:.4f} -> {out['held_out_after']:.4f}")
    if args.json:
        with atomic_file.replacing(args.json) as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
