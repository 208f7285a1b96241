"""Taking or loading a torch.distributed.checkpoint (DCP) checkpoint never changes what the next step computes, and a
resumed run continues bit for bit like an uninterrupted one -- or the load is refused with the reason (docs/python.md,
"torch 2.x protocol"; docs/design.md §7):

- DCP's lazy initialisation (a zero-gradient step at lr 0 on an optimizer whose ``state`` is empty) allocates state
  and steps nothing: not a cgad.torch optimizer after opt.state.clear(), not a never-stepped Gated (its counts, round
  and ages), and it allocates every fragment's state of Gated(fragments="groups"), so that a checkpoint loads;
- every piece of state cgad.torch or Gated keeps (Gated's ``cgad_gated``, the optimizers' ``cgad_counters``)
  survives DCP's nested and flattened forms, in memory and through dcp.save/dcp.load;
- q8 state loaded onto another sharding is refused with the reason (its absmax blocks are each shard's own), while
  fp32 state reshards; a DTensor state_dict loaded into plain parameters is refused naming the DTensor.

The matrix: {CGAD fp32, CGAD q8, PACGAD, Gated(AdamW), Gated(AdamW, fragments="groups")} x {nested, flattened} x
{in memory, dcp.save/load} x {fresh optimizer, resumed run} x {plain, DTensor on one rank, DTensor on two ranks with
and without a change of sharding}; the two-rank cases all run in one spawned gloo group."""
import copy
import itertools
import os
import tempfile
import warnings

import pytest
import torch

import cgad
from cgad.torch import CGAD, PACGAD, Adam, Gated
from conftest import require_torch
from optimizer_cases import CASES, feed
from test_torch2_dtensor import NEEDS, _init, mesh  # noqa: F401 (mesh: the one-rank gloo mesh fixture)

KINDS = ("CGAD-fp32", "CGAD-q8", "PACGAD", "Gated-AdamW", "Gated-AdamW-groups")
DTENSOR_KINDS = KINDS  # Gated too: it scales DTensor pseudo-gradients by their local shards
FRAGMENTED = ("PACGAD", "Gated-AdamW-groups")
# (flatten, disk, resumed): every form a checkpoint takes, of a never-stepped optimizer and of a run
FORMS = list(itertools.product((False, True), (False, True), (False, True)))
SHARDED = "absmax blocks are each shard's own"


@pytest.fixture(autouse=True)
def _torch24():
    require_torch(*NEEDS)


class Net(torch.nn.Module):
    """Two parameters, one per param group (a fragment each where fragments="groups"); (4, 512) spans q8 blocks
    whichever way two ranks shard it."""

    def __init__(self, seed):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.a = torch.nn.Parameter(torch.randn(4, 512, generator=g))
        self.b = torch.nn.Parameter(torch.randn(2, 256, generator=g))


def _dtensor(t):
    from torch.distributed.tensor import DTensor
    return isinstance(t, DTensor)


def full(t):
    return t.full_tensor() if _dtensor(t) else t


def placed(value, mesh, placements):
    """``value``, the same on every rank, as a DTensor of ``placements`` on a one-dimensional ``mesh``: each rank
    cuts its own shard (distribute_tensor would scatter it, a collective per tensor)."""
    from torch.distributed.tensor import DTensor, Shard
    local = value
    if isinstance(placements[0], Shard):
        local = value.chunk(mesh.size(0), dim=placements[0].dim)[mesh.get_local_rank(0)]
    return DTensor.from_local(local.contiguous(), mesh, placements, run_check=False)


def net(seed, mesh=None, placement=None):
    """A Net, its parameters DTensors of ``placement`` on ``mesh`` where given."""
    m = Net(seed)
    if mesh is not None:
        for name, p in list(m.named_parameters()):
            setattr(m, name, torch.nn.Parameter(placed(p.detach().clone(), mesh, [placement])))
    return m


def copy_values(target, source):
    """The source's parameter values into the target's, whatever either's sharding."""
    with torch.no_grad():
        for t, s in zip(target.parameters(), source.parameters()):
            value = full(s).detach().clone()
            if _dtensor(t):
                t.to_local().copy_(placed(value, t.device_mesh, t.placements).to_local())
            else:
                t.copy_(value)


def make(kind, m):
    groups = [{"params": [m.a]}, {"params": [m.b]}]
    if kind.startswith("CGAD"):
        return CGAD(groups, state=kind.split("-")[1])
    if kind == "PACGAD":
        return PACGAD(groups, fragments="groups")
    return Gated(torch.optim.AdamW(groups, lr=1e-2), fragments="groups" if kind in FRAGMENTED else None)


def event(kind, opt, m, e):
    """Event ``e``: the same pseudo-gradient whatever the sharding, a staleness, fragment e % 2 where there are
    fragments; the gradients are then taken away, as a trainer's zero_grad(set_to_none=True)."""
    g = torch.Generator().manual_seed(1000 + e)
    for p in m.parameters():
        value = torch.randn(p.shape, generator=g) * 0.1
        p.grad = placed(value, p.device_mesh, p.placements) if _dtensor(p) else value
    report = opt.step(staleness=e % 3, fragment=e % 2) if kind in FRAGMENTED else opt.step(staleness=e % 3)
    assert report.applied
    for p in m.parameters():
        p.grad = None


def fingerprint(m, opt):
    """Every bit a next step reads: the parameters, each state tensor (full tensors of DTensors), the counts, each
    group's fast-path counters or fragment age, and Gated's round."""
    def raw(t):
        t = full(t).detach().contiguous().reshape(-1)
        return t.view({torch.float32: torch.int32, torch.bfloat16: torch.int16}.get(t.dtype, t.dtype)).numpy().tobytes()
    out = [raw(p) for p in m.parameters()]
    for p in m.parameters():
        entry = opt.state[p]
        out.append(sorted((name, raw(v)) for name, v in entry.items() if isinstance(v, torch.Tensor)))
    out.append(dict(opt.counters))
    out.append([opt.counters(g) for g in range(len(opt.param_groups))])
    out.append(getattr(opt, "_round", None))
    return out


def resume(kind, flatten, disk, resumed, path, source, target):
    """Runs an uninterrupted optimizer U and a checkpointed one S (the same events; S's state taken with
    get_optimizer_state_dict after 0 or 3 of them), and T, a fresh optimizer over S's parameter values loaded from
    that checkpoint (in memory, or through dcp.save and dcp.load in place, as DCP loads); then three more events on
    each. ``source()``/``target()`` make the Nets. Returns ("refused", message, what T's next step said) or
    ("resumed", U == S, U == T)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_optimizer_state_dict,
                                                         set_optimizer_state_dict)
    options = StateDictOptions(flatten_optimizer_state_dict=flatten)
    net_u, net_s = source(), source()
    u, s = make(kind, net_u), make(kind, net_s)
    before = 3 if resumed else 0
    for e in range(before):
        event(kind, u, net_u, e)
        event(kind, s, net_s, e)
    saved = get_optimizer_state_dict(net_s, s, options=options)
    net_t = target()
    copy_values(net_t, net_s)
    t = make(kind, net_t)
    try:
        if disk:
            with warnings.catch_warnings():  # one rank: DCP warns that it runs without a process group, as meant
                warnings.simplefilter("ignore", UserWarning)
                dcp.save({"optim": saved}, checkpoint_id=path)
                loaded = {"optim": get_optimizer_state_dict(net_t, t, options=options)}
                dcp.load(loaded, checkpoint_id=path)
            saved = loaded["optim"]
        else:  # a copy, as a checkpoint kept in memory is: torch.optim's load_state_dict (Gated's wrapped AdamW)
            saved = copy.deepcopy(saved)  # takes the saved tensors themselves, which S's next steps would move
        set_optimizer_state_dict(net_t, t, saved, options=options)
    except cgad.InputError as e:
        # dcp.load filled T's own state tensors before the refusal: T must not step (or save) them as its state.
        try:
            event(kind, t, net_t, before)
            after = "stepped"
        except cgad.InputError as later:
            after = str(later)
        return ("refused", str(e), after)
    for e in range(before, before + 3):
        for opt, m in ((u, net_u), (s, net_s), (t, net_t)):
            event(kind, opt, m, e)
    fu = fingerprint(net_u, u)
    return ("resumed", fingerprint(net_s, s) == fu, fingerprint(net_t, t) == fu)


def _case_id(kind, flatten, disk, resumed):
    return (f"{kind}-{'flattened' if flatten else 'nested'}-{'dcp.save-load' if disk else 'in-memory'}-"
            f"{'resumed' if resumed else 'fresh'}")


@pytest.mark.parametrize("flatten,disk,resumed", FORMS, ids=[_case_id("", *f)[1:] for f in FORMS])
@pytest.mark.parametrize("kind", KINDS)
def test_plain_parameters_resume_bit_for_bit(tmp_path, kind, flatten, disk, resumed):
    assert resume(kind, flatten, disk, resumed, str(tmp_path), lambda: net(0), lambda: net(5)) == \
        ("resumed", True, True)


@pytest.mark.parametrize("flatten,disk,resumed", FORMS, ids=[_case_id("", *f)[1:] for f in FORMS])
@pytest.mark.parametrize("kind", DTENSOR_KINDS)
def test_dtensor_parameters_on_one_rank_resume_bit_for_bit(mesh, tmp_path, kind, flatten, disk, resumed):
    """On one rank every sharding's shard is the whole tensor: through dcp.save/load, Shard(0) loads into Shard(1) (q8
    blocks coincide); in memory, where nothing reshards a DTensor, into Shard(0)."""
    from torch.distributed.tensor import Shard
    assert resume(kind, flatten, disk, resumed, str(tmp_path), lambda: net(0, mesh, Shard(0)),
                  lambda: net(5, mesh, Shard(1) if disk else Shard(0))) == ("resumed", True, True)


def _two_ranks(rank, store, directory, results):
    """Every two-rank case on rank ``rank``: each kind and form through dcp.save/load, into the same sharding
    (Shard(1)) and from Shard(1) into Shard(0) (in memory nothing crosses ranks: the one-rank rows cover it); writes
    the outcomes to ``results``.<rank>."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
    _init(rank, 2, store)
    try:
        mesh = init_device_mesh("cpu", (2,))
        outcomes = {}
        forms = [form for form in FORMS if form[1]]
        for n, (kind, form, (sharding, placement)) in enumerate(itertools.product(
                DTENSOR_KINDS, forms, (("same", Shard(1)), ("changed", Shard(0))))):
            outcomes[(sharding, kind) + form] = resume(kind, *form, os.path.join(directory, str(n)),
                                                       lambda: net(0, mesh, Shard(1)),
                                                       lambda: net(5, mesh, placement))
        torch.save(outcomes, f"{results}.{rank}")
    finally:
        dist.destroy_process_group()


def test_dtensor_parameters_on_two_ranks_resume_or_refuse_a_change_of_sharding():
    """Two ranks, (4, 512) and (2, 256) parameters sharded Shard(1), through dcp.save/load: every case resumes bit
    for bit into Shard(1); into Shard(0), fp32 state reshards bit for bit (its step is per element) and q8 state is
    refused on both ranks with the reason -- its absmax blocks, each rank's own, would decode other elements'
    codes."""
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as directory:
        results = os.path.join(directory, "result")
        mp.spawn(_two_ranks, args=(os.path.join(directory, "store"), directory, results), nprocs=2, join=True)
        seen = [torch.load(f"{results}.{rank}") for rank in range(2)]
    assert seen[0].keys() == seen[1].keys() and len(seen[0]) == len(DTENSOR_KINDS) * len(FORMS)
    for rank in range(2):
        for (sharding, kind, *form), outcome in sorted(seen[rank].items()):
            case = f"rank {rank} {sharding} {_case_id(kind, *form)}"
            if sharding == "changed" and kind == "CGAD-q8":
                assert outcome[0] == "refused" and SHARDED in outcome[1], case
                assert "saved sharded as dimension 1 over 2 ranks, the parameter is sharded as dimension 0 over " \
                       "2 ranks" in outcome[1], case
                if form[1]:  # dcp.load wrote into T's state in place: T steps nothing until a load or a reset
                    assert "opt.state holds what was loaded into its tensors" in outcome[2], case
            else:
                assert outcome == ("resumed", True, True), case


# --- each class on its own ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls,kwargs", CASES)
def test_a_checkpoint_of_a_reset_optimizer_steps_nothing(cls, kwargs):
    """After opt.state.clear() (the documented restart) DCP's lazy initialisation runs a step; it must not count:
    the run that took the checkpoint then steps as one that did not."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
    runs = []
    for checkpoint in (False, True):
        m = Net(0)
        opt = cls(m.parameters(), **kwargs)
        ps = list(m.parameters())
        feed(ps, 0)
        opt.step(staleness=1)
        opt.state.clear()
        for p in ps:
            p.grad = None
        if checkpoint:
            saved = get_optimizer_state_dict(m, opt)
            assert all(int(entry["step"]) == 0 for entry in saved["state"].values())
            assert opt.counters() == cls(Net(0).parameters(), **kwargs).counters()
        feed(ps, 1)
        opt.step(staleness=2)
        runs.append(fingerprint(m, opt))
    assert runs[0] == runs[1]


@pytest.mark.parametrize("fragments", [None, "groups"])
@pytest.mark.parametrize("wrapped", [torch.optim.AdamW, Adam], ids=["torch-AdamW", "cgad-Adam"])
def test_a_checkpoint_of_a_reset_gated_steps_nothing(wrapped, fragments):
    """As for cgad.torch's optimizers: Gated over torch's AdamW or cgad.torch's Adam, after opt.state.clear(); two
    events after it, so that every fragment has stepped (the lazy initialisation allocates each one's state, as a
    fragment's first step would)."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
    kind = "Gated-AdamW-groups" if fragments else "Gated-AdamW"
    runs = []
    for checkpoint in (False, True):
        m = Net(0)
        opt = Gated(wrapped([{"params": [m.a]}, {"params": [m.b]}], lr=1e-2), fragments=fragments)
        event(kind, opt, m, 0)
        opt.state.clear()
        if checkpoint:
            get_optimizer_state_dict(m, opt)
        event(kind, opt, m, 1)
        event(kind, opt, m, 2)
        runs.append(fingerprint(m, opt))
    assert runs[0] == runs[1]


@pytest.mark.parametrize("fragments", [None, "groups"])
def test_a_checkpoint_of_a_never_stepped_gated_steps_nothing(fragments):
    """Gated over torch's AdamW, never stepped: get_optimizer_state_dict leaves its counts, round and fragment ages
    as they were, allocates every fragment's state with step 0, and the next steps are those of a run that took no
    checkpoint."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
    kind = "Gated-AdamW-groups" if fragments else "Gated-AdamW"
    plain_m, m = Net(0), Net(0)
    plain, opt = make(kind, plain_m), make(kind, m)
    saved = get_optimizer_state_dict(m, opt)
    assert sorted(saved["state"]) == ["a", "b"]
    assert all(int(entry["step"]) == 0 for entry in saved["state"].values())
    assert dict(opt.counters) == dict(plain.counters) and opt._round == 0 and opt.last_report is None
    assert [opt.counters(g) for g in range(2)] == [plain.counters(g) for g in range(2)]
    for e in range(3):
        event(kind, plain, plain_m, e)
        event(kind, opt, m, e)
    assert fingerprint(m, opt) == fingerprint(plain_m, plain)


def test_gated_adam_by_groups_resumes_through_dcp(tmp_path):
    """The usual resume -- get_optimizer_state_dict of a fresh optimizer, dcp.load, set_optimizer_state_dict -- of
    Gated(torch Adam, fragments="groups") loads every fragment's Adam state (DCP's lazy initialisation allocates
    them all), nested and flattened."""
    for flatten in (False, True):
        assert resume("Gated-AdamW-groups", flatten, True, True, str(tmp_path / str(flatten)), lambda: net(0),
                      lambda: net(5)) == ("resumed", True, True)


@pytest.mark.parametrize("disk", [False, True], ids=["in-memory", "dcp.save-load"])
def test_gated_state_survives_the_flattened_form(tmp_path, disk):
    """A Gated run saved at round 5 in DCP's flattened form (torchtitan's) loads at round 5, with its counts and
    ages: ``cgad_gated`` is a key of the live param groups, which the flattened form keeps."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_optimizer_state_dict,
                                                         set_optimizer_state_dict)
    options = StateDictOptions(flatten_optimizer_state_dict=True)
    kind = "Gated-AdamW-groups"
    m, other = Net(0), Net(5)
    opt, loaded_into = make(kind, m), make(kind, other)
    for e in range(5):
        event(kind, opt, m, e)
    saved = get_optimizer_state_dict(m, opt, options=options)
    assert any(key.endswith(".cgad_gated") for key in saved)
    if disk:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            dcp.save({"optim": saved}, checkpoint_id=str(tmp_path))
            template = {"optim": get_optimizer_state_dict(other, loaded_into, options=options)}
            dcp.load(template, checkpoint_id=str(tmp_path))
        saved = template["optim"]
    set_optimizer_state_dict(other, loaded_into, saved, options=options)
    assert loaded_into._round == 5 and dict(loaded_into.counters) == dict(opt.counters)
    assert [loaded_into.counters(g) for g in range(2)] == [opt.counters(g) for g in range(2)]


def test_a_dtensor_state_dict_into_plain_parameters_is_refused_naming_it(mesh):
    from torch.distributed.tensor import Shard
    m, plain = net(0, mesh, Shard(0)), Net(0)
    opt, into = make("CGAD-fp32", m), make("CGAD-fp32", plain)
    event("CGAD-fp32", opt, m, 0)
    before = fingerprint(plain, into)
    with pytest.raises(cgad.InputError, match=r"CGAD param group 0 parameter 0: the state's exp_avg is a DTensor with "
                                              r"placements \[Shard\(dim=0\)\] and the parameter a plain tensor; load "
                                              r"it into DTensor parameters"):
        into.load_state_dict(opt.state_dict())
    assert fingerprint(plain, into) == before
