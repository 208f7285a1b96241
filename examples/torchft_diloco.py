#!/usr/bin/python3
"""torchft's DiLoCo with cgad as the outer optimizer: two replica groups on the loopback, one of them stopped and
restarted mid-run, healing cgad's state through torchft's state_dict transfer.

Everything torchft runs is torchft's own (torchft 0.2): an in-process Lighthouse, one Manager per replica group
over gloo, its `DiLoCo` wrapper (Streaming DiLoCo with --fragments > 1 and --fragment-sync-delay > 0). The two
groups run in threads of this process, as torchft's own integration tests run them. cgad changes two things in a
torchft DiLoCo script and needs a third to stay as it is (docs/python.md, "torchft"):

  * the outer optimizer: cgad.torch.CGAD (--outer cgad), cgad.torch.Gated over torch's AdamW (--outer gated), or,
    for Streaming DiLoCo, cgad.torch.PACGAD with one param group per DiLoCo fragment (--outer pa-cgad), or Gated
    with fragments="groups" over an AdamW with one param group per fragment (--outer gated);
  * cgad.torch.wire_torchft(outer, manager, staleness), the step pre-hook that supplies each outer step's
    staleness (and, for PA-CGAD, the fragment torchft is syncing): torchft calls outer_optimizer.step() with no
    arguments;
  * nothing for healing: torchft's DiLoCo already puts outer_optimizer.state_dict() into the state a recovering
    replica group receives and calls load_state_dict() with it, and cgad's state_dict carries its whole state.

torchft's DiLoCo is synchronous, so every pseudo-gradient it averages is fresh: the staleness here is injected by
wire_torchft's pre-hook, τ = a value drawn from --seed and the outer step's number, 0..--tau, the same in every replica group
(see staleness_of). A pre-hook, not a queue that delays pseudo-gradients: it is the one place a real source of τ
plugs into torchft's bare step() call, and it leaves torchft's algorithm and its healed state as they are (a queue
would hold model-sized pseudo-gradients that torchft does not transfer to a recovering group). The task is a small
MLP regressing a fixed random teacher; each group trains on its own shard.
Printed: every committed outer step of group 0 (fragment, τ, the τ the gate saw, σ, held-out loss), the restart and
healing of group 1, whether the two groups agree bit for bit at every outer step both ran, and a summary.

    PYTHONPATH=build/python python examples/torchft_diloco.py --outer pa-cgad --fragments 2 \
        --fragment-sync-delay 1 --restart-at 3
"""
import argparse
import logging
import os
import random
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import torch.distributed as dist
    from torchft.local_sgd import DiLoCo
    from torchft.manager import Manager
    from torchft.process_group import ProcessGroupGloo
    from torchft.coordination import LighthouseServer
    TORCHFT_ERROR = None
except Exception as e:  # torchft needs torch 2.x; Debian's torch 1.13 cannot import it
    TORCHFT_ERROR = f"{type(e).__name__}: {e}"

import cgad.torch
from example_args import (SEED, TIMEOUT, Parser, check_cgad, check_memory, entry_point, integer, quadratic_count,
                          real)

FEATURES = 8
OUTER = ("cgad", "gated", "pa-cgad")


def parse_args(argv):
    p = Parser(description=__doc__.split("\n\n")[0])
    positive, nonnegative = integer(at_least=1), integer(at_least=0)
    p.add_argument("--outer", choices=OUTER, default="cgad",
                   help="cgad.torch.CGAD, cgad.torch.Gated over torch.optim.AdamW (PA-CGAD with --fragments > 1), "
                        "or cgad.torch.PACGAD (one fragment per param group)")
    p.add_argument("--state", choices=["fp32", "bf16", "q8"], default="fp32",
                   help="CGAD's and PACGAD's state format (Gated keeps AdamW's)")
    p.add_argument("--fragments", type=positive, default=1, help="DiLoCo model fragments (>= 2: Streaming DiLoCo)")
    p.add_argument("--sync-every", type=positive, default=8,
                   help="inner steps between two syncs of one fragment (torchft's sync_every)")
    p.add_argument("--fragment-sync-delay", type=nonnegative, default=0,
                   help="inner steps a fragment's allreduce overlaps before its outer step")
    p.add_argument("--outer-steps", type=positive, default=12, help="committed outer steps (torchft's manager steps)")
    p.add_argument("--restart-at", type=integer(at_least=-1), default=-1,
                   help="stop replica group 1 when its manager reaches this step and restart it (-1: never)")
    p.add_argument("--tau", type=nonnegative, default=6, help="largest injected staleness, in outer rounds")
    p.add_argument("--tau-cut", type=positive, default=32, help="CGAD's tau_cut")
    p.add_argument("--alpha", type=real(at_least=0), default=0.2, help="CGAD's alpha")
    # 1e-2, not the 3e-3 the other examples start from: torchft's DiLoCo takes one outer step per round, where
    # 5e-3-1e-2 was best (docs/results/outer-lr.md); on this task 3e-3 ended 12 steps at held-out MSE 0.74-1.36
    # against 1e-2's 0.19-0.37 (seeds 0-2).
    p.add_argument("--outer-lr", type=real(at_least=0), default=1e-2, help="the outer optimizer's learning rate")
    p.add_argument("--inner-lr", type=real(at_least=0), default=1e-2, help="the inner AdamW's learning rate")
    p.add_argument("--width", type=positive, default=32, help="hidden units per layer")
    p.add_argument("--batch", type=positive, default=32, help="examples per inner step")
    p.add_argument("--seed", type=SEED, default=0, help="0..2^32 - 1")
    p.add_argument("--timeout", type=TIMEOUT, default=30.0,
                   help="seconds any quorum, collective or checkpoint transfer may take")
    p.add_argument("--quiet", action="store_true", help="print the summary only")
    args = p.parse_args(argv)
    # torchft's own conditions (torchft 0.2's DiLoCo.__init__), said here in one line instead of its
    # traceback from inside a replica group's thread.
    if args.sync_every % args.fragments:
        p.error("--sync-every must be a multiple of --fragments (each fragment syncs every sync_every / fragments "
                "inner steps)")
    if args.fragment_sync_delay >= args.sync_every // args.fragments:
        p.error("--fragment-sync-delay must be below --sync-every / --fragments")
    if args.outer == "cgad" and args.fragments > 1:
        # torchft calls the outer step with the other fragments' parameters still holding the last inner step's
        # gradients: an optimizer over all of them would step those too. PACGAD's (and Gated's with
        # fragments="groups") step(fragment=f) reads f's only.
        p.error("--fragments > 1 (Streaming DiLoCo) takes --outer pa-cgad or gated")
    if args.fragments > args.tau_cut:
        p.error("--fragments must be <= --tau-cut (a round-robin fragment is fragments - 1 rounds old)")
    if args.restart_at >= args.outer_steps or args.restart_at < -1 or args.restart_at == 0:
        p.error("--restart-at must be -1 or in 1..--outer-steps - 1 (a group stopped before the first commit has "
                "nothing to heal)")
    # Each of the two replica groups holds the model, its gradients, AdamW's two moments, DiLoCo's backup of the
    # global parameters and the outer optimizer's two moments: seven float32 copies; the held-out loss runs 1024
    # examples through a hidden layer, two activations of 1024 x --width floats at least.
    def parameters(width):
        return sum(q.numel() for q in make_model(argparse.Namespace(**{**vars(args), "width": width})).parameters())
    check_memory(p, f"--width {args.width} with --fragments {args.fragments}",
                 2 * 7 * 4 * quadratic_count(args.width, parameters) + 2 * 1024 * 4 * args.width)
    if args.outer != "gated" or hasattr(cgad.torch, "Gated"):
        check_cgad(p, lambda: make_outer(args, [nn.Linear(1, 1) for _ in range(args.fragments)]))
    return args


# --- the model, its fragments and the task ---------------------------------------------------------------------

def make_model(args):
    """An MLP of --fragments tanh layers and a linear output, as a list of fragments: fragment i is hidden layer
    i (the last one also holds the output layer), the module lists torchft's DiLoCo syncs one at a time."""
    init = torch.Generator().manual_seed(args.seed)
    fragments, width_in = [], FEATURES
    for i in range(args.fragments):
        layers = [nn.Linear(width_in, args.width), nn.Tanh()]
        if i == args.fragments - 1:
            layers.append(nn.Linear(args.width, 1))
        fragments.append(nn.Sequential(*layers))
        width_in = args.width
    model = nn.Sequential(*fragments)
    with torch.no_grad():  # the same initial weights in every group and incarnation, from --seed alone
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=init) / p.shape[-1] ** 0.5)
    return model


def task(seed, n, shard):
    """(x, y): a fixed random teacher (from seed alone), inputs drawn for the shard."""
    teacher = torch.Generator().manual_seed(seed + 7919)
    w1, w2 = torch.randn(FEATURES, 16, generator=teacher), torch.randn(16, 1, generator=teacher) / 4
    g = torch.Generator().manual_seed(seed * 1000 + 1 + shard)
    x = torch.randn(n, FEATURES, generator=g)
    return x, torch.tanh(x @ w1) @ w2


def held_out_loss(model, args):
    x, y = task(args.seed, 1024, 999)
    with torch.no_grad():
        return F.mse_loss(model(x), y).item()


# --- cgad as torchft's outer optimizer ---------------------------------------------------------------------------

def make_outer(args, fragments):
    """The outer optimizer torchft's DiLoCo is given in place of its SGD(lr=0.7, momentum=0.9, nesterov=True)."""
    params = [p for f in fragments for p in f.parameters()]
    if args.outer == "cgad":
        return cgad.torch.CGAD(params, lr=args.outer_lr, alpha=args.alpha, tau_cut=args.tau_cut, state=args.state,
                               threads=1)
    if args.outer == "gated" and args.fragments == 1:
        return cgad.torch.Gated(torch.optim.AdamW(params, lr=args.outer_lr, weight_decay=0.0), method="cgad",
                                alpha=args.alpha, tau_cut=args.tau_cut)
    if args.outer == "gated":
        # PA-CGAD over AdamW: one AdamW param group per fragment, each a fragment of the wrapper.
        adamw = torch.optim.AdamW([{"params": list(f.parameters())} for f in fragments], lr=args.outer_lr,
                                  weight_decay=0.0)
        return cgad.torch.Gated(adamw, method="cgad", alpha=args.alpha, tau_cut=args.tau_cut, fragments="groups")
    # One PACGAD shared by every fragment, one param group per fragment: the fragments' ages are counted on one
    # clock of outer rounds, which per-fragment optimizers would not share (docs/design.md §3, PA-CGAD).
    return cgad.torch.PACGAD([{"params": list(f.parameters())} for f in fragments], fragments="groups",
                             lr=args.outer_lr, alpha=args.alpha, tau_cut=args.tau_cut, state=args.state, threads=1)


def staleness_of(seed, tau_max, step):
    """The staleness injected into the outer step that completes manager step ``step``: drawn from the seed and
    the step alone, so every replica group, a restarted one included, supplies the same τ to the same step (two
    groups given different τ would compute different updates from the same averaged pseudo-gradient)."""
    return random.Random(seed * 1_000_003 + step).randint(0, tau_max)


# --- what each group records, to compare the two ---------------------------------------------------------------

def tensor_bytes(t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def state_bytes(opt):
    """Every bit of an optimizer's state_dict, comparable with ==: tensors as (dtype, shape, bytes), anything else
    (hyperparameters, cgad's counters) as its repr, in a fixed order."""
    out = []

    def walk(where, x):
        if isinstance(x, torch.Tensor):
            out.append((where, str(x.dtype), tuple(x.shape), tensor_bytes(x)))
        elif isinstance(x, dict):
            for k in sorted(x, key=repr):
                walk(where + (k,), x[k])
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                walk(where + (i,), v)
        else:
            out.append((where, repr(x)))

    walk((), opt.state_dict())
    return out


class Recorder:
    """Step hooks on the outer optimizer that record, per committed outer step, the staleness and fragment it got,
    the report, the state before and after the step, and the parameters it stepped (the new global values of the
    synced fragment: DiLoCo copies them into its backup right after the step)."""

    def __init__(self, outer, manager, names, incarnation):
        self.records, self._before = [], None
        self._manager, self._names, self._incarnation = manager, names, incarnation
        # Registered after wire_torchft's pre-hook, so these see the keywords it returns.
        outer.register_step_pre_hook(self._pre)
        outer.register_step_post_hook(self._post)

    def _stepped(self, opt, kwargs):
        """The parameters the step moves, by name: the given fragment's group, or every group."""
        fragment = kwargs.get("fragment")
        return {self._names[id(p)]: p.detach().clone() for i, g in enumerate(opt.param_groups)
                if fragment is None or i == fragment for p in g["params"]}

    def _pre(self, opt, hook_args, kwargs):
        # The parameters before the step are what torchft restored them to, its backup of the global ones.
        self._before = state_bytes(opt), self._stepped(opt, kwargs)

    def _post(self, opt, hook_args, kwargs):
        report = getattr(opt, "last_report", None)
        self.records.append({
            "step": self._manager.current_step(), "incarnation": self._incarnation,
            "staleness": kwargs.get("staleness"), "fragment": kwargs.get("fragment"),
            "tau_effective": getattr(report, "tau_effective", None), "sigma": getattr(report, "sigma", None),
            "reason": getattr(report, "reason", None), "applied": getattr(report, "applied", None),
            "state_before": self._before[0], "state_after": state_bytes(opt),
            "params_before": self._before[1], "params": self._stepped(opt, kwargs),
        })


# --- one replica group -------------------------------------------------------------------------------------------

class Stopped(Exception):
    """A replica group stopped on purpose (--restart-at), as a crash would stop it."""


def run_group(group, incarnation, lighthouse, args, stop_at=None, log=print):
    """One incarnation of replica group ``group``: a fresh model from the initial weights, fresh optimizers and a
    fresh Manager (as a restarted process has), training until the manager has committed --outer-steps steps, or
    raising Stopped when it reaches ``stop_at``. Returns its records and the model."""
    timeout = timedelta(seconds=args.timeout)
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timeout)
    model = make_model(args)
    fragments = list(model)
    names = {id(p): n for n, p in model.named_parameters()}
    inner = torch.optim.AdamW(model.parameters(), lr=args.inner_lr)
    outer = make_outer(args, fragments)

    # What torchft transfers to a recovering group besides DiLoCo's own keys (each fragment's backup of the global
    # parameters and outer_optimizer.state_dict()): the model and the inner optimizer, as torchft's DiLoCo
    # trainer registers them. Copies: torchft's HTTP checkpoint transport serves CPU tensors by reference, and
    # during a fragment_sync_delay this group trains on while the recovering one may still be reading them.
    def state_dict():
        return {"model": {k: v.clone() for k, v in model.state_dict().items()},
                "inner": inner.state_dict()}

    def load_state_dict(sd):
        model.load_state_dict(sd["model"])
        inner.load_state_dict(sd["inner"])

    manager = Manager(pg=ProcessGroupGloo(timeout=timeout), load_state_dict=load_state_dict,
                      state_dict=state_dict, min_replica_size=2, use_async_quorum=False,
                      replica_id=f"group{group}", store_addr="127.0.0.1", store_port=store.port, rank=0,
                      world_size=1, lighthouse_addr=lighthouse, hostname="127.0.0.1", timeout=timeout,
                      quorum_timeout=timeout, connect_timeout=timeout)
    try:
        # The staleness of each outer step, and PA-CGAD's fragment, through torchft's bare step() (docs/python.md).
        cgad.torch.wire_torchft(outer, manager, lambda step: staleness_of(args.seed, args.tau, step))
        recorder = Recorder(outer, manager, names, incarnation)
        x, y = task(args.seed, 4096, group)
        batches = torch.Generator().manual_seed(args.seed * 1000 + 10 * group + incarnation)
        with DiLoCo(manager, fragments, inner, outer, sync_every=args.sync_every,
                    fragment_sync_delay=args.fragment_sync_delay, backup_device=torch.device("cpu"),
                    pin_memory=False):
            while manager.current_step() < args.outer_steps:
                if stop_at is not None and manager.current_step() == stop_at:
                    log(f"group {group} stopped at manager step {stop_at}; restarting it")
                    raise Stopped(recorder.records)
                batch = torch.randint(0, x.shape[0], (args.batch,), generator=batches)
                loss = F.mse_loss(model(x[batch]), y[batch])
                inner.zero_grad()
                loss.backward()
                inner.step()  # DiLoCo's post-hook on the inner optimizer runs the fragment syncs
        return recorder.records, model
    finally:
        manager.shutdown(wait=False)


def run_replica_group(group, lighthouse, args, log=print):
    """Replica group ``group``, restarted once if --restart-at stops it. Returns (records, model)."""
    stop_at = args.restart_at if group == 1 and args.restart_at > 0 else None
    try:
        return run_group(group, 0, lighthouse, args, stop_at, log)
    except Stopped as stopped:
        first = stopped.args[0]
        records, model = run_group(group, 1, lighthouse, args, None, log)
        return first + records, model


def run(args, log=print):
    """Both replica groups against one in-process Lighthouse; returns {group: (records, model)}."""
    lighthouse = LighthouseServer(bind="127.0.0.1:0", min_replicas=2, join_timeout_ms=100,
                                  heartbeat_timeout_ms=2000)
    try:
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="replica-group") as pool:
            futures = {g: pool.submit(run_replica_group, g, lighthouse.address(), args, log) for g in (0, 1)}
            return {g: f.result() for g, f in futures.items()}
    finally:
        lighthouse.shutdown()


def global_model(args, records):
    """The global model after the last committed step: the initial weights with each fragment's parameters as
    its last outer step left them (the backup DiLoCo restores every fragment to)."""
    model = make_model(args)
    values = dict(model.named_parameters())
    with torch.no_grad():
        for r in records:
            for name, t in r["params"].items():
                values[name].copy_(t)
    return model


def compare(a, b):
    """The outer steps both groups ran, and the first one at which they differ (None if none)."""
    by_step = {r["step"]: r for r in b}
    common = [r for r in a if r["step"] in by_step]
    for r in common:
        s = by_step[r["step"]]
        same = all(r[k] == s[k] for k in ("staleness", "fragment", "tau_effective", "sigma", "state_before",
                                          "state_after")) and \
            all(r[k].keys() == s[k].keys() and all(tensor_bytes(r[k][n]) == tensor_bytes(s[k][n]) for n in r[k])
                for k in ("params_before", "params"))
        if not same:
            return len(common), r["step"]
    return len(common), None


def main(argv):
    args = parse_args(argv)
    if TORCHFT_ERROR is not None:
        sys.exit(f"torchft_diloco: torchft cannot be imported here ({TORCHFT_ERROR}); it needs torch 2.x")
    if args.outer == "gated" and not hasattr(cgad.torch, "Gated"):
        sys.exit("torchft_diloco: this cgad has no cgad.torch.Gated")
    # gloo's connections on the loopback only, whatever the machine's network.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)  # two replica groups share the machine's cores
    # torchft's Python warnings of a CPU-only run (no NCCL flight recorder) and torch's about the read-only buffers
    # a checkpoint is loaded from; torchft's Rust side logs as RUST_LOG says.
    logging.getLogger("torchft").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message="The given buffer is not writable")
    before = held_out_loss(make_model(args), args)
    lock = threading.Lock()

    def log(line):
        with lock:
            print(line, flush=True)

    results = run(args, log)
    (records0, _), (records1, _) = results[0], results[1]
    if not args.quiet:
        for r in records0:
            loss = held_out_loss(global_model(args, [q for q in records0 if q["step"] <= r["step"]]), args)
            log(f"step {r['step']:3d} fragment {r['fragment'] if r['fragment'] is not None else 0} "
                f"staleness {r['staleness']} gated at {r['tau_effective']} sigma {r['sigma']:.6f} "
                f"reason {r['reason']} held-out loss {loss:.6f}")
    healed = [r for r in records1 if r["incarnation"] == 1]
    if healed:
        log(f"group 1 restarted and healed: it took outer steps {healed[0]['step']}..{healed[-1]['step']} after "
            "healing")
    steps, differ = compare(records0, records1)
    log(f"groups agree bit for bit on {steps} common outer steps" if differ is None else
        f"groups DIFFER at outer step {differ}")
    after = held_out_loss(global_model(args, records0), args)
    log(f"summary: {args.outer} ({args.state}) outer, {args.fragments} fragment(s), {len(records0)} outer steps, "
        f"held-out loss {before:.6f} -> {after:.6f}")
    return 0 if differ is None else 1


if __name__ == "__main__":
    entry_point(main)
