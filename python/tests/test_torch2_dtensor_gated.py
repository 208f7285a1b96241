"""cgad.torch.Gated over DTensor parameters, FSDP2's (torch.distributed.fsdp.fully_shard) with DTensor
pseudo-gradients of their mesh and placements, as torchft's DiLoCo sets them (docs/python.md, "CGAD over the
optimizer you already run"): each rank scales its local shards in place and steps the wrapped optimizer, bit for
bit as the same Gated over plain tensors holding that rank's shards; a NaN/Inf or an overflowing pseudo-gradient on
any rank's shard refuses the event on every rank, changing nothing; the state goes through
torch.distributed.checkpoint, nested and flattened, and resumes bit for bit. Run on a one-rank gloo mesh in this
process and on two ranks (one spawned group for every check), over torch's AdamW (fused and for-loop) and SGD
Nesterov. The checks are torch code on the mesh's device: the same run on a CUDA mesh is the GPU's check."""
import math
import os
import tempfile

import pytest
import torch

from cgad.torch import Gated
from conftest import require_torch
from gated_support import tensor_bytes

NEEDS = ((2, 6), "torch.distributed.fsdp.fully_shard (FSDP2)")

WRAPPED = {
    "adamw-fused": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, fused=True),
    "adamw-for-loop": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=False),
    "sgd-nesterov": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
}
# (staleness, where a poisoned element goes: None, or (rank, value)); the plain twin steps the applied ones only.
EVENTS = [(0, None), (3, None), (2, ("last", float("nan"))), (1, ("first", 2.0 ** 70)), (7, None),
          (40, ("last", float("-inf"))), (40, None), (5, None)]


def _model(seed):
    # The last Linear's weight (1, 6) and bias (1,) leave rank 1 of two an empty shard (fully_shard's Shard(0)).
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.Tanh(), torch.nn.Linear(6, 1))


def _sharded(mesh, seed):
    from torch.distributed.fsdp import fully_shard
    model = _model(seed)
    fully_shard(model, mesh=mesh)
    return model


def _give(dparams, plain, seed, poison=None):
    """The same full pseudo-gradients on every rank, as DTensors of each parameter's placements; each plain twin
    gets its rank's local shard. poison = (rank, value): written into the first element of that rank's shard of
    the first parameter (the first Linear's weight, which every rank holds part of)."""
    from torch.distributed.tensor import distribute_tensor
    gen = torch.Generator().manual_seed(seed)
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    for k, (d, p) in enumerate(zip(dparams, plain)):
        full = torch.randn(d.shape, generator=gen) * 0.1
        if poison is not None and k == 0:
            target = 0 if poison[0] == "first" else world - 1
            full[math.ceil(d.shape[0] / world) * target, 0] = poison[1]
        d.grad = distribute_tensor(full, d.device_mesh, d.placements)
        assert d.grad.to_local().shape == d.to_local().shape
        if p is not None:
            p.grad = d.grad.to_local().clone()
    return rank


def _local_bits(t):
    return tensor_bytes(t.to_local() if hasattr(t, "to_local") else t)


def _state_bits(optimizer, params):
    return [(k, name, _local_bits(t) if isinstance(t, torch.Tensor) else repr(t))
            for k, p in enumerate(params) for name, t in sorted(optimizer.state.get(p, {}).items())]


def _snapshot(gated, params):
    return ([_local_bits(p) for p in params], [_local_bits(p.grad) for p in params], _state_bits(gated, params))


def _steps_as_plain(mesh, name):
    """Gated(X) over FSDP2 DTensors against Gated(X) over plain tensors holding this rank's shards, event by event."""
    from torch.distributed.tensor import DTensor
    model = _sharded(mesh, 1)
    dparams = list(model.parameters())
    plain = [torch.nn.Parameter(p.to_local().detach().clone()) for p in dparams]
    ours, twin = Gated(WRAPPED[name](dparams)), Gated(WRAPPED[name](plain))
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    for event, (tau, poison) in enumerate(EVENTS):
        _give(dparams, plain, 100 + event, poison)
        before = _snapshot(ours, dparams)
        report = ours.step(staleness=tau)
        if poison is not None:
            reason = "nonfinite-gradient" if not math.isfinite(poison[1]) else "overflowing-gradient"
            assert (report.applied, report.reason) == (False, reason), (name, event, report)
            here = (0 if poison[0] == "first" else world - 1) == rank
            assert (report.nonfinite_param, report.nonfinite_index) == ((0, 0) if here else (None, None)), report
            assert _snapshot(ours, dparams) == before, (name, event, "a refused event changed something")
            continue
        theirs = twin.step(staleness=tau)
        assert (report.applied, report.reason, report.sigma) == (theirs.applied, theirs.reason, theirs.sigma)
        assert report.applied and (report.reason == "zero-gate") == (tau >= 32), (name, event, report)
        assert _snapshot(ours, dparams) == _snapshot(twin, plain), (name, event)
        assert all(isinstance(p.grad, DTensor) for p in dparams)  # the DTensor given, holding g
    assert dict(ours.counters) == dict(dict(twin.counters), **{"nonfinite-gradient": 2, "overflowing-gradient": 1})
    return model, ours


def _dcp_round_trip(mesh, name, flatten, directory):
    """get_optimizer_state_dict of a stepped Gated over FSDP2, dcp.save, dcp.load into a new model's Gated,
    set_optimizer_state_dict; then both step alike. Returns (counters saved, counters loaded) for the caller."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_optimizer_state_dict,
                                                         set_optimizer_state_dict)
    options = StateDictOptions(flatten_optimizer_state_dict=flatten)
    first = _sharded(mesh, 2)
    saved_opt = Gated(WRAPPED[name](list(first.parameters())))
    for event in range(3):
        _give(list(first.parameters()), [None] * 4, 200 + event)
        assert saved_opt.step(staleness=event).applied
    dcp.save({"optim": get_optimizer_state_dict(first, saved_opt, options=options)}, checkpoint_id=directory)
    second = _sharded(mesh, 3)
    with torch.no_grad():
        for a, b in zip(first.parameters(), second.parameters()):
            b.to_local().copy_(a.to_local())
    resumed = Gated(WRAPPED[name](list(second.parameters())))
    loaded = {"optim": get_optimizer_state_dict(second, resumed, options=options)}
    dcp.load(loaded, checkpoint_id=directory)
    set_optimizer_state_dict(second, resumed, loaded["optim"], options=options)
    states = [_state_bits(o, list(m.parameters())) for o, m in ((saved_opt, first), (resumed, second))]
    assert states[0] == states[1], (name, flatten, "the loaded state differs")
    for m, opt in ((first, saved_opt), (second, resumed)):
        _give(list(m.parameters()), [None] * 4, 300)
        assert opt.step(staleness=4).applied
    assert [_local_bits(p) for p in first.parameters()] == [_local_bits(p) for p in second.parameters()]
    return dict(saved_opt.counters), dict(resumed.counters)


def _all_checks(directory):
    """Every check on this process's rank of the current group; returns the DCP counters by case."""
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (torch.distributed.get_world_size(),))
    counters = {}
    for name in WRAPPED:
        _steps_as_plain(mesh, name)
    for flatten in (False, True):
        counters[flatten] = _dcp_round_trip(mesh, "adamw-fused", flatten,
                                            os.path.join(directory, f"dcp-{int(flatten)}"))
    return counters


def _init(rank, world_size, directory):
    torch.distributed.init_process_group("gloo", init_method=f"file://{os.path.join(directory, 'store')}",
                                         rank=rank, world_size=world_size)


def _rank(rank, directory):
    _init(rank, 2, directory)
    try:
        torch.save(_all_checks(directory), os.path.join(directory, f"result.{rank}"))
    finally:
        torch.distributed.destroy_process_group()


def _dcp_counters_restored(counters):
    for flatten, (saved, loaded) in counters.items():
        assert saved == loaded, f"Gated's step counts through DCP ({'flattened' if flatten else 'nested'})"


def test_gated_over_fully_shard_on_one_rank():
    require_torch(*NEEDS)
    with tempfile.TemporaryDirectory() as directory:
        _init(0, 1, directory)
        try:
            counters = _all_checks(directory)
        finally:
            torch.distributed.destroy_process_group()
    _dcp_counters_restored(counters)


def test_gated_over_fully_shard_on_two_ranks_steps_and_refuses_alike():
    """Two ranks, one spawned group: the poisoned element lies on one rank's shard, and both ranks refuse."""
    require_torch(*NEEDS)
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as directory:
        mp.spawn(_rank, args=(directory,), nprocs=2, join=True)
        counters = [torch.load(os.path.join(directory, f"result.{rank}")) for rank in range(2)]
    assert counters[0] == counters[1]
    _dcp_counters_restored(counters[0])
