"""The 8-bit and 4-bit optimizers people run -- bitsandbytes' Adam8bit/AdamW8bit on the CPU and torchao's
AdamW8bit/AdamW4bit -- stepped on a replay stream (docs/commands.md: a header {"params", "tensors"}, then
{"grad", "tau"} events) beside the MPFR reference, with the rounding-noise study's figures per tensor
(docs/results/noise.md, docs/results/peers.md).

Each peer is wrapped in ``cgad.torch.Gated(method="cgad")``, so it is fed fl32(σ(τ)·Δ) with the fast path's σ,
exactly what cgad's own step is fed. The reference is `cgad noise`'s (``cgad.noise`` over the same stream with
fp32 state and fp32 parameters: the reference does not depend on the fast side, which it never re-synchronizes
with, so its θ, m, v after the last event are the lockstep reference's). The figures are the noise study's
definitions: the trap tallies are ``cgad.torch._trap_stats``'s (share of decoded v exactly 0, share of
element-steps with |Δθ| > 5·lr, largest |Δθ|/lr, lr rounded to float32 as the fast path uses it), and the error
summaries are those of differential/noise_lockstep.hpp (v relative over v_ref > 0, m in units of sqrt(v_ref),
θ in units of lr: mean |·|, RMS, max |·|, signed mean), which ``test_peers_lockstep.py`` checks equal to what
``cgad.noise`` computes in C++ for cgad's own step. Needs torch 2.x with bitsandbytes and torchao for the peers
(python/requirements/peers.txt); cgad.torch's rows run anywhere."""
import json
import math
import os
import tempfile
from typing import Any, Callable, Optional

import numpy as np
import torch

from . import _cgad, differential
from .torch import _trap_stats

# The noise study's defaults (docs/results/noise.md), which `cgad noise` runs with.
LR, BETAS, EPS = 1e-3, (0.9, 0.999), 1e-8
ALPHA, TAU_CUT = "0.2", 32

PEERS = ("bnb-adam8bit", "bnb-adamw8bit", "torchao-adamw8bit", "torchao-adamw4bit")
CGAD_ROWS = ("cgad-q8-cgad", "cgad-q8-bnb", "cgad-q8-bnb-zero-free", "cgad-fp32")


def synthetic_stream(sizes: list[int], steps: int, seed: int, scale_range: float,
                     delays: str = "heavy") -> dict[str, Any]:
    """A stream drawn from the noise study's distribution (noise_lockstep.hpp): element i has a fixed scale
    R^-w, w uniform in [0, 1]; each event's Δ_i = scale_i·z, z standard normal, rounded to float32; θ0 standard
    normal; delays "paper" (uniform over {0, 1, 2, 4, 8, 16}) or "heavy" (70 % paper, 30 % ⌊8/U⌋). The draws are
    NumPy's Philox, not the C++ study's, so the numbers are not `cgad noise --seeds`'s own: every implementation,
    cgad's included, runs this one stream (as `cgad noise --stream`)."""
    rng = np.random.Generator(np.random.Philox(seed))
    n = int(sum(sizes))
    scale = (float(scale_range) ** -rng.uniform(size=n)).astype(np.float32)
    theta0 = rng.standard_normal(n).astype(np.float32)
    events = []
    for _ in range(steps):
        grad = (scale * rng.standard_normal(n).astype(np.float32)).astype(np.float32)
        if delays == "heavy" and rng.uniform() < 0.3:
            tau = int(math.floor(8.0 / max(rng.uniform(), 1e-9)))
        else:
            tau = (0, 1, 2, 4, 8, 16)[int(rng.integers(6))]
        events.append({"grad": grad, "tau": tau})
    return {"params": theta0, "tensors": [int(s) for s in sizes], "events": events}


def write_stream(stream: dict[str, Any], path: str) -> str:
    """Writes a stream dict as the JSON lines `cgad replay` and `cgad noise --stream` read. Each float32 value is
    written as the shortest decimal of its (exact) double, which lies within half a double's spacing of it, so
    the reader's one rounding to float32 gives it back, and so does Python's json followed by a cast."""
    def floats(x):
        return np.asarray(x, dtype=np.float32).reshape(-1).astype(np.float64).tolist()
    with open(path, "w") as f:
        f.write(json.dumps({"params": floats(stream["params"]), "tensors": list(stream["tensors"])}) + "\n")
        for e in stream["events"]:
            f.write(json.dumps({"grad": floats(e["grad"]), "tau": int(e["tau"])}) + "\n")
    return path


def read_stream(path: str) -> dict[str, Any]:
    """A replay JSON-lines stream (whole-vector events) as a dict of float32 arrays. Numbers are read as doubles
    and then rounded to float32, which is the reader's one rounding for the streams write_stream and cgad's
    recorders write (float32 values as exact doubles); a decimal of more digits could round twice here."""
    with open(path) as f:
        header = json.loads(f.readline())
        events = [json.loads(line) for line in f if line.strip()]
    for e in events:
        if e.get("fragment", 0) != 0:
            raise ValueError(f"{path}: the peers take whole-vector events (fragment 0)")
    params = np.array(header["params"], dtype=np.float32)
    return {"params": params, "tensors": header.get("tensors") or [params.size],
            "events": [{"grad": np.array(e["grad"], dtype=np.float32), "tau": int(e["tau"])} for e in events]}


def error_summary(fast: np.ndarray, ref: np.ndarray, unit: np.ndarray, mask: Optional[np.ndarray] = None) -> dict:
    """(fast − ref)/unit over the elements of ``mask``: mean |·|, RMS, max |·|, signed mean (bias), as
    differential/noise_lockstep.hpp's ErrorSummary."""
    fast, ref, unit = (np.broadcast_to(np.asarray(a, dtype=np.float64), np.shape(ref)) for a in (fast, ref, unit))
    if mask is not None:
        fast, ref, unit = fast[mask], ref[mask], unit[mask]
    e = (fast - ref) / unit
    if e.size == 0:
        return {"mean_abs": 0.0, "rms": 0.0, "max_abs": 0.0, "bias": 0.0}
    return {"mean_abs": float(np.abs(e).mean()), "rms": float(np.sqrt((e * e).mean())),
            "max_abs": float(np.abs(e).max()), "bias": float(e.mean())}


def _zero_share(values: np.ndarray) -> float:
    """The share of elements exactly 0, in the array's own dtype (a float64 reference's too, which the fast path's
    float32 trap counter, cgad._cgad.TrapTally, does not take)."""
    return float((values == 0).sum()) / values.size if values.size else 0.0


def figures(theta: np.ndarray, m: np.ndarray, v: np.ndarray, ref: dict, lr32: float) -> dict:
    """The error figures of one tensor against the reference's final θ, m, v (noise_lockstep.hpp), and m's sign
    flips: the share of elements whose m has the opposite sign of the reference's (a stored 0 is not a flip; it is
    counted by m_zero_fraction)."""
    vr, mr, tr = ref["v_ref"], ref["m_ref"], ref["theta_ref"]
    live = vr > 0
    return {"v": error_summary(v, vr, vr, live), "m": error_summary(m, mr, np.sqrt(np.where(live, vr, 1.0)), live),
            "theta": error_summary(theta, tr, lr32),
            "m_sign_flip_fraction": float((m.astype(np.float64) * mr < 0).sum()) / m.size if m.size else 0.0,
            "m_zero_fraction": _zero_share(m), "v_zero_fraction": _zero_share(v)}


def reference(stream_path: str, precision: int = 128) -> dict:
    """The MPFR reference after the stream's last event (CGAD apply, the noise study's hyperparameters), from
    `cgad noise --stream` with fp32 parameters and fp32 state: theta_ref, m_ref, v_ref (rounded to double), the
    reference's largest |Δθ|/lr over the run and per tensor (tensor_max_step_over_lr)."""
    run = differential.noise("cgad", params="fp32", state="fp32", stream=stream_path, log_every=1 << 30,
                             precision=precision)
    out = {k: run["final"][k] for k in ("theta_ref", "m_ref", "v_ref")}
    out["max_step_over_lr"] = float(run["samples"]["reference_max_step_over_lr"][-1])
    out["tensor_max_step_over_lr"] = [t["reference_max_step_over_lr"] for t in run["tensors"]]
    return out


def reference_for(stream: dict[str, Any], precision: int = 128) -> dict:
    """reference() of a stream given as a dict (written to a temporary file for `cgad noise --stream`)."""
    with tempfile.TemporaryDirectory() as d:
        return reference(write_stream(stream, os.path.join(d, "s.jsonl")), precision)


def cgad_row(stream_path: str, row: str, precision: int = 128, min_q8_size: Optional[int] = None) -> list[dict]:
    """cgad's own fast path on the stream through `cgad noise --stream` (fp32 parameters): "cgad-q8-cgad",
    "cgad-q8-bnb" (bitsandbytes' CUDA formula), "cgad-q8-bnb-zero-free", "cgad-fp32". Returns per tensor the
    noise engine's own trap tallies and error figures (``engine``), and the figures of ``figures`` from the
    engine's final θ, m, v (the same error summaries, and m's sign flips, which the engine does not report)."""
    state, sem, vmap = {"cgad-q8-cgad": ("q8", "cgad", "dynamic"), "cgad-q8-bnb": ("q8", "bnb", "dynamic"),
                        "cgad-q8-bnb-zero-free": ("q8", "bnb", "zero-free"),
                        "cgad-fp32": ("fp32", "cgad", "dynamic")}[row]
    run = differential.noise("cgad", params="fp32", state=state, q8_semantics=sem, v_map=vmap,
                             min_q8_size=min_q8_size, stream=stream_path, log_every=1 << 30, precision=precision)
    f = run["final"]
    lr32 = float(np.float32(LR))
    out, begin = [], 0
    for t in run["tensors"]:
        at = slice(begin, begin + t["size"])
        begin += t["size"]
        ref = {"theta_ref": f["theta_ref"][at], "m_ref": f["m_ref"][at], "v_ref": f["v_ref"][at]}
        row_out = {"size": t["size"], "kind": state, "v_lowest_code_fraction": None}
        row_out.update(figures(f["theta_fast"][at], f["m_fast"][at], f["v_fast"][at], ref, lr32))
        row_out.update({k: t[k] for k in ("step_over_5lr_fraction", "max_step_over_lr",
                                          "reference_max_step_over_lr")}, engine=t)
        out.append(row_out)
    return out


def make_peer(name: str, params: list, **kw) -> torch.optim.Optimizer:
    """The real optimizer ``name`` (PEERS) over ``params`` with the noise study's hyperparameters, weight decay 0
    (the reference's). bitsandbytes keeps fp32 state for tensors under min_8bit_size (4096,
    bitsandbytes/optim/optimizer.py Optimizer2State.init_state); torchao quantizes a tensor of >= 4096 elements
    that its block size divides (torchao/optim/adam.py _AdamBase._new_buffer), block 256 (8-bit) or 128 (4-bit)."""
    common = dict(lr=LR, betas=BETAS, eps=EPS, weight_decay=0.0)
    if name.startswith("bnb-"):
        import bitsandbytes as bnb
        cls = {"bnb-adam8bit": bnb.optim.Adam8bit, "bnb-adamw8bit": bnb.optim.AdamW8bit}[name]
        return cls(params, **common, **kw)
    if name.startswith("torchao-"):
        import torchao.optim as ao
        cls = {"torchao-adamw8bit": ao.AdamW8bit, "torchao-adamw4bit": ao.AdamW4bit}[name]
        return cls(params, **common, **kw)
    if name.startswith("cgad.torch"):  # cgad.torch.Adam inside Gated is CGAD (test_torch_gated.py)
        from .torch import Adam
        return Adam(params, **common, **kw)
    raise ValueError(f"unknown peer {name!r}; one of {PEERS} or 'cgad.torch'")


def peer_state(opt: torch.optim.Optimizer, p: torch.Tensor) -> dict:
    """A parameter's m and v as the peer stores them, decoded to float32 arrays, and the share of v at its map's
    lowest code (bitsandbytes: qmap2[0] = 0; torchao 8-bit: 0; torchao 4-bit: 1/16 of the block's scale; fp32
    state: None), and the state's kind."""
    if hasattr(opt, "state_buffer"):  # cgad.torch: its own decoding of its state (any format)
        return {"m": opt.state_buffer(p, "m").reshape(-1).numpy(), "v": opt.state_buffer(p, "v").reshape(-1).numpy(),
                "v_lowest_code_fraction": None, "kind": "cgad"}
    st = opt.state[p]
    if "state2" in st:  # bitsandbytes' Optimizer2State
        if "qmap2" in st and st["state2"].dtype == torch.uint8:
            m = torch.ops.bitsandbytes.dequantize_blockwise(st["state1"], st["absmax1"], st["qmap1"], 256,
                                                            torch.float32)
            v = torch.ops.bitsandbytes.dequantize_blockwise(st["state2"], st["absmax2"], st["qmap2"], 256,
                                                            torch.float32)
            lowest = int(torch.argmin(st["qmap2"]))
            at_lowest = float((st["state2"] == lowest).sum()) / p.numel()
            return {"m": m.reshape(-1).numpy(), "v": v.reshape(-1).numpy(), "v_lowest_code_fraction": at_lowest,
                    "kind": "8-bit"}
        return {"m": st["state1"].reshape(-1).float().numpy(), "v": st["state2"].reshape(-1).float().numpy(),
                "v_lowest_code_fraction": None, "kind": "fp32"}
    if "exp_avg_sq" in st:  # torchao (its subclasses) or torch
        ea, eas = st["exp_avg"], st["exp_avg_sq"]
        deq = (lambda t: t.dequantize().float()) if hasattr(eas, "dequantize") and hasattr(eas, "qmap") else \
            (lambda t: t.float())
        m, v = deq(ea).reshape(-1), deq(eas).reshape(-1)
        if hasattr(eas, "qmap"):
            # The lowest code's value times the block's scale, compared as float32 as dequant_with_qmap forms it.
            low = eas.qmap.min()
            blocks = eas.scale.numel()
            floor = (low * eas.scale).repeat_interleave(v.numel() // blocks)
            at_lowest = float((v == floor).sum()) / v.numel()
            kind = "4-bit" if type(eas).__name__.endswith("4bit") else "8-bit"
            return {"m": m.numpy(), "v": v.numpy(), "v_lowest_code_fraction": at_lowest, "kind": kind}
        return {"m": m.numpy(), "v": v.numpy(), "v_lowest_code_fraction": None, "kind": "fp32"}
    raise ValueError(f"no state of a known optimizer for this parameter: {sorted(st)}")


def run(name: str, stream: Any, *, reference_state: Optional[dict] = None, precision: int = 128,
        checkpoints: tuple = (), make: Optional[Callable] = None, **peer_kw) -> dict:
    """Steps the peer ``name`` (PEERS, or "cgad.torch" with cgad.torch.Adam's keywords, e.g. state="q8") wrapped in
    Gated(method="cgad") over every event of ``stream`` (a path or a dict as synthetic_stream returns) with fp32
    parameters, and returns {"tensors": [per tensor: size, kind, v_lowest_code_fraction, step_over_5lr_fraction,
    max_step_over_lr and, with the reference, the error figures], "theta": the final parameters (float32),
    "checkpoints": {k: θ after event k}, "params": the parameter tensors, "optimizer": the peer itself}. The reference is computed from the stream's file unless given."""
    from .torch import Gated
    path = None
    if isinstance(stream, (str, os.PathLike)):
        path = os.fspath(stream)
        stream = read_stream(path)
    sizes = list(stream["tensors"])
    theta0 = np.asarray(stream["params"], dtype=np.float32)
    bounds = np.cumsum([0] + sizes)
    params = [torch.nn.Parameter(torch.from_numpy(theta0[bounds[k]:bounds[k + 1]].copy())) for k in range(len(sizes))]
    inner = (make or make_peer)(name, params, **peer_kw)
    opt = Gated(inner, method="cgad", alpha=ALPHA, tau_cut=TAU_CUT)
    lr32 = float(np.float32(LR))
    tallies = [_cgad.TrapTally() for _ in params]
    snaps = {}
    with torch.no_grad():
        for step, e in enumerate(stream["events"], 1):
            g = np.asarray(e["grad"], dtype=np.float32)
            for k, p in enumerate(params):
                p.grad = torch.from_numpy(g[bounds[k]:bounds[k + 1]].copy())
            before = [_trap_stats.host_float32(p) for p in params]
            opt.step(staleness=int(e["tau"]))
            for k, p in enumerate(params):
                tallies[k].add(before[k], _trap_stats.host_float32(p), lr32)
            if step in checkpoints:
                snaps[step] = np.concatenate([p.detach().numpy().copy() for p in params])
    theta = np.concatenate([p.detach().numpy().copy() for p in params])
    if reference_state is None:
        reference_state = reference(path, precision) if path else reference_for(stream, precision)
    out = []
    for k, p in enumerate(params):
        st = peer_state(inner, p)
        at = slice(int(bounds[k]), int(bounds[k + 1]))
        ref = {key: reference_state[key][at] for key in ("theta_ref", "m_ref", "v_ref")}
        row = {"size": sizes[k], "kind": st["kind"], "v_lowest_code_fraction": st["v_lowest_code_fraction"]}
        row.update(_trap_stats.step_fractions(tallies[k]))
        row.update(figures(theta[at], st["m"], st["v"], ref, lr32))
        row["reference_max_step_over_lr"] = reference_state["tensor_max_step_over_lr"][k]
        out.append(row)
    return {"tensors": out, "theta": theta, "checkpoints": snaps, "params": params, "optimizer": inner}


def differing_bits(a: np.ndarray, b: np.ndarray) -> dict:
    """Two float32 vectors bit by bit: the elements that differ and the largest distance in ulps (the distance
    between their bit patterns on the ordered integer line)."""
    ia = np.asarray(a, dtype=np.float32).view(np.int32).astype(np.int64)
    ib = np.asarray(b, dtype=np.float32).view(np.int32).astype(np.int64)
    order = lambda i: np.where(i < 0, -(i & 0x7FFFFFFF), i)  # noqa: E731
    d = np.abs(order(ia) - order(ib))
    return {"differing": int((d != 0).sum()), "of": int(d.size), "max_ulps": int(d.max()) if d.size else 0}
