"""state_dict() / load_state_dict(): a resumed optimizer continues bit for bit -- for every state format (fp32,
bf16, q8 with cgad's and bitsandbytes' semantics), fp32 and bf16 parameters, several param groups, PA-CGAD's
fragments and ages, Nesterov's momentum -- also through torch.save / torch.load to a file; cast and mismatched
state is refused with its reason and changes nothing."""
import copy

import pytest
import torch

import cgad
from cgad.torch import CGAD, PACGAD, Adam, Nesterov
from conftest import bits, state_bits


def model(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(n, generator=g).to(dtype)) for n in (300, 17, 260)]


def feed(params, event, dtype):
    g = torch.Generator().manual_seed(100 + event)
    for p in params:
        p.grad = (torch.randn(p.shape, generator=g) * 0.1).to(dtype)


def snapshot(params, opt):
    return [bits(p) for p in params], state_bits(opt)


def same(a, b):
    return all((x == y).all() for x, y in zip(a[0], b[0])) and a[1] == b[1]


FORMATS = [
    ("fp32", dict(state="fp32"), torch.float32),
    ("bf16", dict(state="bf16"), torch.bfloat16),
    ("bf16-stochastic", dict(state="bf16", rounding="stochastic", seed=3), torch.bfloat16),
    ("q8", dict(state="q8"), torch.bfloat16),
    ("q8-fp32-params", dict(state="q8", min_q8_size=100), torch.float32),
    ("q8-bnb", dict(state="q8", q8_semantics="bnb", min_q8_size=256), torch.bfloat16),
    ("q8-zero-free", dict(state="q8", v_map="zero-free"), torch.bfloat16),
]


def make(cls, params, kwargs, groups):
    if groups == 1:
        return cls(params, threads=2, **kwargs)
    return cls([{"params": params[:2]}, {"params": params[2:], "lr": 3e-3}], threads=2, **kwargs)


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("fmt", FORMATS, ids=[f[0] for f in FORMATS])
def test_resume_is_bit_identical_through_torch_save(tmp_path, fmt, groups):
    _, kwargs, dtype = fmt
    params = model(dtype)
    opt = make(CGAD, params, kwargs, groups)
    for e, tau in enumerate([0, 3, 1]):
        feed(params, e, dtype)
        opt.step(staleness=tau)
    path = tmp_path / "opt.pt"
    torch.save({"params": [p.detach().clone() for p in params], "opt": opt.state_dict()}, path)
    loaded = torch.load(path)
    resumed_params = [torch.nn.Parameter(p) for p in loaded["params"]]
    resumed = make(CGAD, resumed_params, kwargs, groups)
    resumed.load_state_dict(loaded["opt"])
    assert same(snapshot(params, opt), snapshot(resumed_params, resumed))
    for e, tau in enumerate([2, 0, 5, 40], start=3):
        feed(params, e, dtype)
        feed(resumed_params, e, dtype)
        a, b = opt.step(staleness=tau), resumed.step(staleness=tau)
        assert a == b
        assert same(snapshot(params, opt), snapshot(resumed_params, resumed)), f"event {e}"


@pytest.mark.parametrize("cls,kwargs", [(PACGAD, dict(fragments=4, state="q8")), (Nesterov, dict(state="q8")),
                                        (Adam, dict(state="bf16"))], ids=["pacgad", "nesterov", "adam"])
def test_every_optimizer_resumes_bit_identically(cls, kwargs):
    params = model(torch.bfloat16)
    opt = cls(params, **kwargs)
    step = (lambda o, e, tau: o.step(staleness=tau, fragment=e % 4)) if cls is PACGAD else \
        (lambda o, e, tau: o.step(staleness=tau))
    for e in range(5):
        feed(params, e, torch.bfloat16)
        step(opt, e, e % 3)
    copies = [torch.nn.Parameter(p.detach().clone()) for p in params]
    resumed = cls(copies, **kwargs)
    resumed.load_state_dict(copy.deepcopy(opt.state_dict()))
    assert opt.counters() == resumed.counters()
    for e in range(5, 9):
        feed(params, e, torch.bfloat16)
        feed(copies, e, torch.bfloat16)
        assert step(opt, e, 2) == step(resumed, e, 2)
        assert same(snapshot(params, opt), snapshot(copies, resumed))


def test_scheduled_lr_survives_a_resume():
    params = model(torch.float32)
    opt = CGAD(params, lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for e in range(3):
        feed(params, e, torch.float32)
        opt.step()
        sched.step()
    copies = [torch.nn.Parameter(p.detach().clone()) for p in params]
    resumed = CGAD(copies, lr=1e-2)
    resumed.load_state_dict(opt.state_dict())
    assert resumed.param_groups[0]["lr"] == opt.param_groups[0]["lr"] == 5e-3
    for e in range(3, 6):
        feed(params, e, torch.float32)
        feed(copies, e, torch.float32)
        opt.step()
        resumed.step()
        assert same(snapshot(params, opt), snapshot(copies, resumed))


def refused(opt, params, state_dict, expected):
    before = snapshot(params, opt)
    with pytest.raises(cgad.InputError, match=expected):
        opt.load_state_dict(state_dict)
    assert same(before, snapshot(params, opt))


def test_cast_and_mismatched_state_is_refused_and_changes_nothing():
    params = model(torch.bfloat16)
    opt = CGAD(params, state="q8")
    feed(params, 0, torch.bfloat16)
    opt.step(staleness=1)
    good = copy.deepcopy(opt.state_dict())
    target_params = model(torch.bfloat16, seed=1)
    target = CGAD(target_params, state="q8")
    feed(target_params, 0, torch.bfloat16)
    target.step()

    cast = copy.deepcopy(good)  # what torch 1.13's Optimizer.load_state_dict does to floating-point state
    cast["state"][0]["absmax1"] = cast["state"][0]["absmax1"].to(torch.bfloat16)
    refused(target, target_params, cast, "absmax1 is torch.bfloat16 .* this optimizer's torch.float32")
    renamed = copy.deepcopy(good)
    renamed["state"][1]["exp_avg"] = renamed["state"][1].pop("state1")
    refused(target, target_params, renamed, "another state format or optimizer")
    counters = copy.deepcopy(good)
    counters["param_groups"][0]["cgad_counters"]["t"] = [2 ** 62]
    refused(target, target_params, counters, "impossible step count")
    refused(target, target_params, {k: v for k, v in good.items() if k != "param_groups"}, "must hold 'state'")
    refused(target, target_params, torch.optim.Adam(target_params).state_dict(), "warm start for fp32 state only")

    other_format = CGAD(model(torch.bfloat16), state="bf16")
    refused(other_format, list(other_format.param_groups[0]["params"]), good, "state='q8', this one state='bf16'")
    other_class = Adam(model(torch.bfloat16), state="q8")
    refused(other_class, list(other_class.param_groups[0]["params"]), good, "saved by a cgad optimizer, this is adam")
    other_semantics = CGAD(model(torch.bfloat16), state="q8", q8_semantics="bnb", min_q8_size=0)
    refused(other_semantics, list(other_semantics.param_groups[0]["params"]), good, "q8_semantics='cgad'")
    other_map = CGAD(model(torch.bfloat16), state="q8", v_map="zero-free")
    refused(other_map, list(other_map.param_groups[0]["params"]), good, "v_map='dynamic'")
    other_seed = CGAD(model(torch.bfloat16), state="q8", seed=5)
    refused(other_seed, list(other_seed.param_groups[0]["params"]), good, "seed 0, this optimizer's is 5")
    other_sizes_params = [torch.nn.Parameter(torch.zeros(n, dtype=torch.bfloat16)) for n in (300, 18, 259)]
    refused(CGAD(other_sizes_params, state="q8"), other_sizes_params, good, "of shape \\(17,\\), this optimizer's")
    two_groups = [{"params": target_params[:1]}, {"params": target_params[1:]}]
    refused(CGAD(two_groups, state="q8"), target_params, good, "a list of 2 dicts")


def test_a_state_no_run_reaches_is_refused():
    """The state file's checks (fastpath/src/state_contents.cpp) hold for a state_dict's tensors: |m| = 2^100 beside
    v = 0 (a step from it would be ~2^100/eps) and a NaN moment are refused, changing nothing."""
    params = model(torch.float32)
    opt = CGAD(params)
    feed(params, 0, torch.float32)
    opt.step()
    for name, value in (("exp_avg", 2.0 ** 100), ("exp_avg_sq", float("nan"))):
        bad = copy.deepcopy(opt.state_dict())
        bad["state"][0][name][7] = value
        bad["state"][0]["exp_avg_sq"][7] = 0.0 if name == "exp_avg" else value
        refused(opt, params, bad, "parameter 0's state holds an impossible")


def test_state_moves_between_parameter_formats():
    """The moments do not depend on the parameters' format: bf16 parameters' state resumes over fp32 ones."""
    params = model(torch.bfloat16)
    opt = CGAD(params, state="q8")
    feed(params, 0, torch.bfloat16)
    opt.step(staleness=1)
    wide = [torch.nn.Parameter(p.detach().float()) for p in params]
    resumed = CGAD(wide, state="q8")
    resumed.load_state_dict(opt.state_dict())
    assert state_bits(resumed) == state_bits(opt)


def test_v_map_is_checked_at_construction():
    with pytest.raises(cgad.InputError, match="unknown v map 'none'"):
        CGAD(model(torch.bfloat16), state="q8", v_map="none")
    with pytest.raises(cgad.InputError, match="v map zero-free is a map of q8 second moments"):
        CGAD(model(torch.bfloat16), state="fp32", v_map="zero-free")
    with pytest.raises(cgad.InputError, match="v_map must be a string"):
        CGAD(model(torch.bfloat16), state="q8", v_map=1)


def _written_in_place(state_dict):
    """Writes every state tensor of ``state_dict`` in place, as dcp.load fills the tensors it was handed."""
    for entry in state_dict["state"].values():
        for t in entry.values():
            t.copy_(t.clone())


@pytest.mark.parametrize("fmt", ["fp32", "q8"])
def test_a_refused_load_of_the_optimizers_own_tensors_written_in_place_steps_and_saves_nothing_until_a_load_or_a_reset(
        fmt):
    """state_dict() (DCP's get_optimizer_state_dict) hands out opt.state's own tensors, and dcp.load fills them in
    place before load_state_dict sees them: when that load is refused, the bytes are in the live state already, so
    the optimizer neither steps nor saves that state until a load is taken or opt.state is cleared. A refused
    state_dict whose tensors were not written (a copy, or the handed-out tensors untouched) blocks nothing."""
    params = model(torch.float32)
    opt = CGAD(params, state=fmt, min_q8_size=0)
    feed(params, 0, torch.float32)
    opt.step(staleness=1)
    good = copy.deepcopy(opt.state_dict())
    for bad in (copy.deepcopy(good), opt.state_dict()):  # a copy; the live tensors, not written
        bad["param_groups"][0]["lr"] = -1.0
        with pytest.raises(cgad.InputError):
            opt.load_state_dict(bad)
    feed(params, 1, torch.float32)
    assert opt.step(staleness=1).applied  # neither blocked anything
    shared = opt.state_dict()
    _written_in_place(shared)
    shared["param_groups"][0]["lr"] = -1.0
    with pytest.raises(cgad.InputError):
        opt.load_state_dict(shared)

    def live():  # the parameters and opt.state's tensors as they are (state_dict() is refused now)
        tensors = list(params) + [t for p in params for _, t in sorted(opt.state[p].items())]
        return [t.detach().reshape(-1).view(torch.uint8).clone() for t in tensors]
    before = live()
    for call in (lambda: opt.step(staleness=1), opt.state_dict):
        with pytest.raises(cgad.InputError, match="holds what was loaded into its tensors"):
            call()
    assert all(torch.equal(x, y) for x, y in zip(live(), before))
    opt.load_state_dict(good)  # a load taken ends it
    assert opt.step(staleness=1).applied
    shared = opt.state_dict()
    _written_in_place(shared)
    shared["param_groups"][0]["lr"] = -1.0
    with pytest.raises(cgad.InputError):
        opt.load_state_dict(shared)
    opt.state.clear()  # and so does the documented reset
    assert opt.step(staleness=1).applied
