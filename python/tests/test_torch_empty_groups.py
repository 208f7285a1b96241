"""An empty param group is taken where torch takes one (the no-decay side of a Hugging Face style decay/no-decay
split may hold nothing): in the constructor and add_param_group, first or last, on every optimizer, with
state_dict() and load_state_dict(), under PACGAD's fragments and the Gated wrapper. It steps nothing, and every
other group steps bit for bit as in the same optimizer without it."""
import copy

import pytest
import torch

import cgad
from cgad.torch import CGAD, PACGAD, SDM, Adam, AdamDecay, Gated, Nesterov
from conftest import state_bits

OPTIMIZERS = [CGAD, AdamDecay, Adam, Nesterov, SDM]
SIZES = (300, 40)


def model(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(n, generator=g)) for n in SIZES]


def feed(params, event):
    g = torch.Generator().manual_seed(100 + event)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g) * 0.1


def bits(params):
    return [p.detach().view(torch.int32).numpy().tobytes() for p in params]


def make(cls, params, empty_at, state):
    split = [{"params": params[:1]}, {"params": params[1:]}]
    if empty_at is None:
        return cls(split, state=state)
    split.insert(empty_at, {"params": []})
    if empty_at == len(split) - 1:  # the last one added later, through add_param_group
        opt = cls(split[:-1], state=state)
        opt.add_param_group(split[-1])
        return opt
    return cls(split, state=state)


@pytest.mark.parametrize("state", ["fp32", "q8"])
@pytest.mark.parametrize("empty_at", [0, 1, 2], ids=["first", "between", "added"])
@pytest.mark.parametrize("cls", OPTIMIZERS, ids=lambda c: c.__name__)
def test_an_empty_group_steps_nothing_and_the_others_step_as_without_it(cls, empty_at, state):
    params, twin_params = model(), model()
    opt, twin = make(cls, params, empty_at, state), make(cls, twin_params, None, state)
    assert len(opt.param_groups) == 3 and opt.param_groups[empty_at]["params"] == []
    for e in range(3):
        feed(params, e)
        feed(twin_params, e)
        report, twin_report = opt.step(staleness=e), twin.step(staleness=e)
        assert report.applied and report.reason == twin_report.reason
        assert report.groups[empty_at].reason == "no-gradient"
    assert bits(params) == bits(twin_params)
    assert state_bits(opt)[0] == state_bits(twin)[0]
    # state_dict() and load_state_dict(): into a fresh optimizer of the same groups, which then steps alike.
    copies = [torch.nn.Parameter(p.detach().clone()) for p in params]
    other = make(cls, copies, empty_at, state)
    other.load_state_dict(copy.deepcopy(opt.state_dict()))
    assert state_bits(other) == state_bits(opt)
    feed(params, 7)
    feed(copies, 7)
    assert opt.step() == other.step()
    assert bits(params) == bits(copies)


def test_only_empty_groups_step_nothing():
    opt = CGAD([{"params": []}])
    opt.add_param_group({"params": []})
    report = opt.step()
    assert not report.applied and report.reason == "no-gradient"
    assert opt.state_dict()["state"] == {}
    CGAD([{"params": []}, {"params": []}]).load_state_dict(opt.state_dict())


def test_an_empty_group_beside_a_warm_start_from_torch_adam():
    params = model()
    adam = torch.optim.Adam([{"params": params}, {"params": []}])
    feed(params, 0)
    adam.step()
    opt = CGAD([{"params": model()}, {"params": []}])
    opt.load_state_dict(adam.state_dict())
    assert opt.state_dict()["param_groups"][1]["cgad_counters"]["steps"] == 0


def test_an_empty_group_is_a_fragment_of_pacgad_that_steps_nothing():
    params, twin_params = model(), model()
    opt = PACGAD([{"params": params[:1]}, {"params": []}, {"params": params[1:]}], fragments="groups")
    twin = PACGAD([{"params": twin_params[:1]}, {"params": twin_params[1:]}], fragments="groups")
    feed(params, 0)
    feed(twin_params, 0)
    assert opt.step(fragment=1).reason == "no-gradient"  # the empty fragment: nothing to apply; its round ends
    twin.advance_round()
    assert opt.step(fragment=0).applied and twin.step(fragment=0).applied
    assert opt.step(fragment=2).applied and twin.step(fragment=1).applied
    assert bits(params) == bits(twin_params)
    other = PACGAD([{"params": model()[:1]}, {"params": []}, {"params": model()[1:]}], fragments="groups")
    other.load_state_dict(opt.state_dict())
    assert state_bits(other) == state_bits(opt)


def test_a_pacgad_of_one_empty_group_steps_nothing():
    opt = PACGAD([{"params": []}])
    assert opt.step(fragment=0).reason == "no-gradient"
    PACGAD([{"params": []}]).load_state_dict(opt.state_dict())
    # P fragments cut the group's elements into P non-empty ranges, which none cannot give (as 5 fragments of 3).
    with pytest.raises(cgad.InputError, match="PACGAD param group 0: .*2 fragments over 0 parameters"):
        PACGAD([{"params": []}], fragments=2)


@pytest.mark.parametrize("inner", ["cgad-adam", "torch-adamw"])
def test_gated_over_an_optimizer_with_an_empty_group(inner):
    params, twin_params = model(), model()

    def wrapped(ps, split):
        groups = [{"params": ps[:1]}, {"params": []}, {"params": ps[1:]}] if split else \
            [{"params": ps[:1]}, {"params": ps[1:]}]
        return Gated(Adam(groups, lr=1e-2) if inner == "cgad-adam" else torch.optim.AdamW(groups, lr=1e-2))

    opt, twin = wrapped(params, True), wrapped(twin_params, False)
    for e in range(3):
        feed(params, e)
        feed(twin_params, e)
        opt.step(staleness=e)
        twin.step(staleness=e)
    assert bits(params) == bits(twin_params)
    wrapped(model(), True).load_state_dict(opt.state_dict())


def test_gated_fragments_from_groups_with_an_empty_group():
    params = model()
    opt = Gated(Adam([{"params": params[:1]}, {"params": []}, {"params": params[1:]}], lr=1e-2),
                fragments="groups", tau_cut=4)
    feed(params, 0)
    before = bits(params)
    assert not opt.step(fragment=1).applied
    assert bits(params) == before
    assert opt.step(fragment=2).applied


def test_an_empty_group_does_not_make_the_others_mix_devices_or_meshes():
    """An empty group has no backend of its own: the first group with parameters sets the optimizer's."""
    params = model()
    opt = CGAD([{"params": []}, {"params": params}])
    with pytest.raises(cgad.InputError, match="capturable"):
        CGAD([{"params": []}, {"params": params}], capturable=True)
    feed(params, 0)
    assert opt.step().applied
