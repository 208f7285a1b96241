"""DTensor parameters (FSDP2's, tensor parallelism's) are stepped through their local shards, as torchao 0.18.0's
torchao/optim/adam.py steps them: bit for bit as the same optimizer over the plain local tensors, with opt.state[p]
holding DTensors of the parameter's mesh and placements, and a NaN/Inf refusal decided by every rank of the mesh
together (docs/python.md, "torchft"). Checked on a one-rank gloo mesh, sharded and replicated, and on two ranks where
only one rank's shard holds a NaN."""
import os
import tempfile

import pytest
import torch

import cgad
from cgad.torch import CGAD, PACGAD, Adam, Nesterov
from conftest import require_torch

OPTIMIZERS = [CGAD, PACGAD, Adam, Nesterov]
NEEDS = ((2, 4), "torch.distributed.tensor (DTensor)")


def _kwargs(cls, state):
    kwargs = dict(fragments="groups") if cls is PACGAD else {}
    return dict(kwargs, state=state)


def _init(rank, world_size, path):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world_size)


@pytest.fixture
def mesh():
    require_torch(*NEEDS)
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    with tempfile.TemporaryDirectory() as directory:
        _init(0, 1, os.path.join(directory, "store"))
        try:
            yield init_device_mesh("cpu", (1,))
        finally:
            dist.destroy_process_group()


def _placement(name):
    from torch.distributed.tensor import Replicate, Shard
    return {"Shard(0)": Shard(0), "Replicate()": Replicate()}[name]


def _bits(t):
    """A tensor's bit pattern (bit-identity is the claim, NaN included)."""
    t = t.detach()
    return t.view(torch.int16) if t.dtype == torch.bfloat16 else t.view(torch.int32) if t.dtype == torch.float32 \
        else t


def _models(mesh, placement, dtype):
    """The same values as DTensor parameters (with DTensor gradients) and as plain ones."""
    from torch.distributed.tensor import distribute_tensor
    gen = torch.Generator().manual_seed(7)
    values = [torch.randn(shape, generator=gen).to(dtype) for shape in ((600,), (24, 40))]
    dparams = [torch.nn.Parameter(distribute_tensor(v.clone(), mesh, [placement])) for v in values]
    plain = [torch.nn.Parameter(v.clone()) for v in values]
    return dparams, plain


def _give_gradients(dparams, plain, seed, nan=False):
    from torch.distributed.tensor import distribute_tensor
    gen = torch.Generator().manual_seed(seed)
    for d, p in zip(dparams, plain):
        g = torch.randn(p.shape, generator=gen).to(p.dtype)
        if nan:
            g.view(-1)[5] = float("nan")
        p.grad = g.clone()
        d.grad = distribute_tensor(g.clone(), d.device_mesh, d.placements)


@pytest.mark.parametrize("placement", ["Shard(0)", "Replicate()"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("state", ["fp32", "q8"])
@pytest.mark.parametrize("cls", OPTIMIZERS, ids=lambda c: c.__name__)
def test_dtensor_steps_bit_for_bit_as_the_plain_local_tensors(mesh, placement, dtype, state, cls):
    from torch.distributed.tensor import DTensor
    dparams, plain = _models(mesh, _placement(placement), dtype)
    ours, theirs = cls(dparams, **_kwargs(cls, state)), cls(plain, **_kwargs(cls, state))
    for step in range(3):
        _give_gradients(dparams, plain, seed=step)
        assert ours.step(staleness=step).applied and theirs.step(staleness=step).applied
        for d, p in zip(dparams, plain):
            assert type(d.data) is DTensor
            assert torch.equal(_bits(d.to_local()), _bits(p))
    for d, p in zip(dparams, plain):
        mine, plain_state = ours.state[d], theirs.state[p]
        assert sorted(mine) == sorted(plain_state)
        for name, t in mine.items():
            if name == "step":  # a plain 0-dim tensor, as torchao keeps it
                assert type(t) is torch.Tensor and torch.equal(t, plain_state[name])
                continue
            assert isinstance(t, DTensor) and t.device_mesh == mesh
            if t.to_local().shape == d.to_local().shape:
                assert tuple(t.placements) == tuple(d.placements) and t.shape == d.shape
            assert torch.equal(_bits(t.to_local()), _bits(plain_state[name]))


def test_an_empty_param_group_beside_dtensor_ones_steps_nothing(mesh):
    """An empty group (torch takes one) has no mesh of its own: the DTensor groups step as without it, first or
    added later, and its state_dict loads."""
    dparams, plain = _models(mesh, _placement("Shard(0)"), torch.float32)
    ours = CGAD([{"params": []}, {"params": dparams}])
    ours.add_param_group({"params": []})
    theirs = CGAD(plain)
    for step in range(2):
        _give_gradients(dparams, plain, seed=step)
        assert ours.step(staleness=step).applied and theirs.step(staleness=step).applied
    assert all(torch.equal(_bits(d.to_local()), _bits(p)) for d, p in zip(dparams, plain))
    copies = [torch.nn.Parameter(d.detach().clone()) for d in dparams]
    CGAD([{"params": []}, {"params": copies}, {"params": []}]).load_state_dict(ours.state_dict())


@pytest.mark.parametrize("placement", ["Shard(0)", "Replicate()"])
@pytest.mark.parametrize("state", ["fp32", "q8"])
def test_dtensor_state_dict_round_trip_resumes_bit_for_bit(mesh, placement, state):
    from torch.distributed.tensor import DTensor
    dparams, plain = _models(mesh, _placement(placement), torch.float32)
    first = CGAD(dparams, state=state)
    _give_gradients(dparams, plain, seed=1)
    assert first.step(staleness=0).applied
    saved = first.state_dict()
    assert all(isinstance(t, DTensor) for entry in saved["state"].values() for n, t in entry.items() if n != "step")
    snapshot = {i: {n: t.to_local().clone() if isinstance(t, DTensor) else t.clone() for n, t in e.items()}
                for i, e in saved["state"].items()}
    params = [d.detach().clone() for d in dparams]
    # A second optimizer over copies of the parameters, loaded from the state_dict, steps as the first.
    copies = [torch.nn.Parameter(d.detach().clone()) for d in dparams]
    second = CGAD(copies, state=state)
    second.load_state_dict(saved)
    for k, d in enumerate(copies):
        for name, t in second.state[d].items():
            want = snapshot[k][name]
            assert torch.equal(_bits(t.to_local() if isinstance(t, DTensor) else t), _bits(want))
    for opt, ps in ((first, dparams), (second, copies)):
        _give_gradients(ps, [torch.nn.Parameter(p.to_local().clone()) for p in params], seed=2)
        assert opt.step(staleness=1).applied
    for a, b in zip(dparams, copies):
        assert torch.equal(_bits(a.to_local()), _bits(b.to_local()))


def test_an_edit_of_a_state_dtensor_is_seen(mesh):
    """The live-state check keys a state DTensor's local tensor: an in-place edit of the DTensor is seen and
    checked as one of a plain state tensor (here, a negative second moment no run reaches: refused)."""
    dparams, plain = _models(mesh, _placement("Shard(0)"), torch.float32)
    opt = CGAD(dparams)
    _give_gradients(dparams, plain, seed=1)
    assert opt.step(staleness=0).applied
    before = [d.to_local().clone() for d in dparams]
    opt.state[dparams[0]]["exp_avg_sq"].fill_(-1.0)
    _give_gradients(dparams, plain, seed=2)
    with pytest.raises(cgad.InputError, match="parameter 0's state"):
        opt.step(staleness=0)
    assert all(torch.equal(_bits(d.to_local()), _bits(b)) for d, b in zip(dparams, before))


def test_a_state_tensor_that_is_not_a_dtensor_of_the_placements_is_refused(mesh):
    dparams, plain = _models(mesh, _placement("Shard(0)"), torch.float32)
    opt = CGAD(dparams)
    opt.state[dparams[1]]["exp_avg"] = torch.zeros(dparams[1].shape)
    _give_gradients(dparams, plain, seed=1)
    with pytest.raises(cgad.InputError, match=r"parameter 1's opt.state\[p\]\['exp_avg'\] is a Tensor; a DTensor "
                                              r"parameter's state is DTensors of its mesh and placements"):
        opt.step(staleness=0)


def test_backward_through_a_graph_that_saved_a_dtensor_parameter_before_the_step_raises(mesh):
    """As for a plain parameter (test_torch_autograd.py): the step changes the DTensor's values in place, so a
    graph that saved it before must not use the new values."""
    dparams, plain = _models(mesh, _placement("Shard(0)"), torch.float32)
    opt = CGAD(dparams)
    loss = (dparams[0] * dparams[0]).sum()
    _give_gradients(dparams, plain, seed=1)
    assert opt.step(staleness=0).applied
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_a_gradient_of_other_placements_is_refused(mesh):
    from torch.distributed.tensor import Replicate, distribute_tensor
    dparams, plain = _models(mesh, _placement("Shard(0)"), torch.float32)
    opt = Adam(dparams)
    before = [d.to_local().clone() for d in dparams]
    dparams[0].grad = distribute_tensor(torch.ones(dparams[0].shape), mesh, [Replicate()])
    dparams[1].grad = distribute_tensor(torch.ones(dparams[1].shape), mesh, dparams[1].placements)
    with pytest.raises(cgad.InputError, match=r"parameter 0 is a DTensor with placements \[Shard\(dim=0\)\], its "
                                              r"gradient a DTensor with placements \[Replicate\(\)\]"):
        opt.step()
    dparams[0].grad = torch.ones(dparams[0].shape)
    with pytest.raises(cgad.InputError, match="parameter 0 is a DTensor .*, its gradient a Tensor"):
        opt.step()
    assert all(torch.equal(_bits(d.to_local()), _bits(b)) for d, b in zip(dparams, before))


def test_dtensor_and_plain_parameters_go_in_separate_optimizers(mesh):
    dparams, plain = _models(mesh, _placement("Shard(0)"), torch.float32)
    with pytest.raises(cgad.InputError, match="mixes DTensor and plain parameters"):
        CGAD([dparams[0], plain[0]])
    opt = CGAD([dparams[0]])
    with pytest.raises(cgad.InputError, match="one optimizer's parameters are all plain or all DTensors"):
        opt.add_param_group({"params": [plain[1]]})
    assert len(opt.param_groups) == 1


@pytest.mark.parametrize("placement", ["Shard(0)", "Replicate()"])
@pytest.mark.parametrize("cls", OPTIMIZERS, ids=lambda c: c.__name__)
def test_a_nan_step_is_refused_changing_nothing(mesh, placement, cls):
    from torch.distributed.tensor import DTensor
    dparams, plain = _models(mesh, _placement(placement), torch.float32)
    opt = cls(dparams, **_kwargs(cls, "fp32"))
    _give_gradients(dparams, plain, seed=1)
    assert opt.step(staleness=0).applied
    params = [d.to_local().clone() for d in dparams]
    state = [{n: (t.to_local() if isinstance(t, DTensor) else t).clone() for n, t in opt.state[d].items()}
             for d in dparams]
    _give_gradients(dparams, plain, seed=2, nan=True)
    report = opt.step(staleness=0)
    assert not report.applied and report.reason == "nonfinite-gradient"
    for d, p, s in zip(dparams, params, state):
        assert torch.equal(_bits(d.to_local()), _bits(p))
        for n, t in opt.state[d].items():
            assert torch.equal(_bits(t.to_local() if isinstance(t, DTensor) else t), _bits(s[n]))


def _two_ranks(rank, path, results):
    """Rank ``rank`` of two: a Shard(0) parameter whose gradient holds a NaN on rank 1's shard only, then a finite
    one; writes what it saw to ``results``."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    import torch.distributed as dist
    _init(rank, 2, path)
    try:
        mesh = init_device_mesh("cpu", (2,))
        values = torch.arange(16, dtype=torch.float32)
        p = torch.nn.Parameter(distribute_tensor(values.clone(), mesh, [Shard(0)]))
        opt = CGAD([p])
        grad = torch.ones(16)
        grad[12] = float("nan")  # in rank 1's shard (elements 8..15)
        p.grad = distribute_tensor(grad, mesh, [Shard(0)])
        refused = opt.step(staleness=0)
        unchanged = torch.equal(p.to_local(), values[8 * rank:8 * rank + 8])
        p.grad = distribute_tensor(torch.ones(16), mesh, [Shard(0)])
        applied = opt.step(staleness=0)
        # q8 state of a parameter sharded unevenly (15 elements: 8 and 7) is refused on every rank.
        uneven = torch.nn.Parameter(distribute_tensor(torch.ones(15), mesh, [Shard(0)]))
        try:
            CGAD([uneven], state="q8")
            q8_uneven = "taken"
        except cgad.InputError as e:
            q8_uneven = str(e)
        torch.save({"refused": (refused.applied, refused.reason), "unchanged": unchanged,
                    "applied": applied.applied, "moved": not torch.equal(p.to_local(), values[8 * rank:8 * rank + 8]),
                    "q8_uneven": q8_uneven}, f"{results}.{rank}")
    finally:
        dist.destroy_process_group()


def test_the_refusal_is_every_ranks_on_two_ranks():
    """Only rank 1's shard holds a NaN: both ranks refuse the step and keep their shards; the next finite step is
    applied on both (the ranks agree through one all_reduce per step). q8 state of an unevenly sharded parameter
    is refused on both."""
    require_torch(*NEEDS)
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as directory:
        results = os.path.join(directory, "result")
        mp.spawn(_two_ranks, args=(os.path.join(directory, "store"), results), nprocs=2, join=True)
        seen = [torch.load(f"{results}.{rank}") for rank in range(2)]
    for rank in range(2):
        assert seen[rank] == {"refused": (False, "nonfinite-gradient"), "unchanged": True, "applied": True,
                              "moved": True, "q8_uneven": seen[rank]["q8_uneven"]}, rank
        assert seen[rank]["q8_uneven"] == ("CGAD param group 0: parameter 0 is a DTensor sharded unevenly (dimension "
                                           "0 of length 15 over 2 shards); its q8 state's absmax blocks and state "
                                           "format are each shard's own, which a checkpoint places only for shards "
                                           "of one size -- use fp32 or bf16 state, or an even sharding"), rank


@pytest.mark.parametrize("state", ["fp32", "q8"])
def test_dtensor_state_through_dcp_save_and_load_resumes_bit_for_bit(mesh, tmp_path, state):
    """torch.distributed.checkpoint writes and reads the state DTensors (get_optimizer_state_dict over a module
    with DTensor parameters, dcp.save, dcp.load in place into a new optimizer's, set_optimizer_state_dict)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict, set_optimizer_state_dict
    from torch.distributed.tensor import DTensor, distribute_tensor

    def model(seed):
        m = torch.nn.Linear(40, 24)
        gen = torch.Generator().manual_seed(seed)
        for name, p in list(m.named_parameters()):
            values = torch.randn(p.shape, generator=gen)
            setattr(m, name, torch.nn.Parameter(distribute_tensor(values, mesh, [_placement("Shard(0)")])))
        return m

    def step(m, opt, seed):
        gen = torch.Generator().manual_seed(seed)
        for p in m.parameters():
            p.grad = distribute_tensor(torch.randn(p.shape, generator=gen), mesh, p.placements)
        assert opt.step(staleness=0).applied

    first = model(3)
    opt = CGAD(first.parameters(), state=state)
    step(first, opt, 1)
    saved = get_optimizer_state_dict(first, opt)
    assert all(isinstance(t, DTensor) for entry in saved["state"].values() for n, t in entry.items() if n != "step")
    dcp.save({"optim": saved}, checkpoint_id=str(tmp_path))
    second = model(3)
    with torch.no_grad():  # the parameters as the first optimizer's step left them
        for a, b in zip(first.parameters(), second.parameters()):
            b.to_local().copy_(a.to_local())
    resumed = CGAD(second.parameters(), state=state)
    loaded = {"optim": get_optimizer_state_dict(second, resumed)}
    dcp.load(loaded, checkpoint_id=str(tmp_path))
    set_optimizer_state_dict(second, resumed, loaded["optim"])
    step(first, opt, 2)
    step(second, resumed, 2)
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(_bits(a.to_local()), _bits(b.to_local()))
