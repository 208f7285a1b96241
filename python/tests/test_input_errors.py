"""Every public entry point refuses a bad argument with cgad.InputError and its reason -- not pybind11's TypeError,
RuntimeError or OverflowError, torch's KeyError or an IndexError -- and refuses what it used to take silently:
counters(-1) (the last group), a parameter sharing memory with one of another param group (stepped twice), a
state_dict whose param_groups hold lr = NaN (the failure came a step later), a gate table of 16777217 rows."""
import math
import time

import pytest
import torch

import cgad
from cgad.torch import CGAD, PACGAD
from conftest import state_bits

STREAM = {"params": [0.5, -1.25], "events": [{"grad": [0.1, -0.2], "tau": 0}]}


def params():
    torch.manual_seed(0)
    return [torch.randn(10, requires_grad=True), torch.randn(7, requires_grad=True)]


def fed(ps):
    for p in ps:
        p.grad = torch.randn_like(p)
    return ps


def stepped_optimizer():
    ps = fed(params())
    opt = CGAD(ps)
    opt.step()
    return ps, opt


def appended_tensor():
    ps, opt = stepped_optimizer()
    extra = torch.zeros(3, requires_grad=True)
    extra.grad = torch.ones(3)
    opt.param_groups[0]["params"].append(extra)
    opt.step()


def mixed_group_changed(change):
    """A group of float32 and bfloat16 parameters (one fast-path optimizer per dtype inside) whose parameter list
    changed after construction: a tensor appended was left unstepped, one removed was an IndexError."""
    ps = [torch.randn(10, requires_grad=True), torch.randn(7, requires_grad=True).bfloat16().detach().requires_grad_()]
    opt = CGAD(ps)
    change(opt.param_groups[0]["params"])
    fed(opt.param_groups[0]["params"])
    opt.step()


def state_dict_without(key):
    ps, opt = stepped_optimizer()
    sd = opt.state_dict()
    del sd[key]
    opt.load_state_dict(sd)


def state_dict_with_bad_counters():
    ps, opt = stepped_optimizer()
    sd = opt.state_dict()
    sd["param_groups"][0]["cgad_counters"]["t"] = [-1]
    opt.load_state_dict(sd)


def group_without_lr():
    ps, opt = stepped_optimizer()
    del opt.param_groups[0]["lr"]
    opt.step()


BAD_CALLS = [
    (lambda: stepped_optimizer()[1].step(staleness=2 ** 63), "staleness must be an integer in \\[0, 2\\^63 - 1\\]"),
    (lambda: cgad.sigma_exact(1, precision=-1), "precision \\(bits\\) must be an integer in"),
    (lambda: cgad.sigma_exact(1, precision=10 ** 10), "precision \\(bits\\) must be an integer in"),
    (lambda: cgad.replay(STREAM, precision=-1), "precision \\(bits\\) must be an integer in"),
    (lambda: cgad.noise(steps=10, precision=10 ** 10), "precision \\(bits\\) must be an integer in"),
    (lambda: cgad.sigma_exact(1, digits=2 ** 40), "digits must be an integer in"),
    (lambda: CGAD(params(), min_q8_size=2 ** 64), "min_q8_size must be an integer in \\[0, 2\\^64 - 1\\]"),
    (lambda: cgad.replay(STREAM, backend="fastpath", min_q8_size=2 ** 64), "min_q8_size must be an integer in"),
    (lambda: cgad.noise(steps=10, min_q8_size=2 ** 64), "min_q8_size must be an integer in"),
    (lambda: CGAD(params(), seed=2 ** 64), "seed must be an integer in \\[0, 2\\^64 - 1\\]"),
    (lambda: cgad.replay(STREAM, backend="fastpath", seed=-1), "seed must be an integer in"),
    (lambda: cgad.replay(STREAM, backend="fastpath", seed=2 ** 64), "seed must be an integer in"),
    (lambda: cgad.noise(steps=10, seed=-1), "seed must be an integer in"),
    (lambda: cgad.noise(steps=10, seed=True), "seed must be an integer in"),
    (lambda: cgad.noise(steps=1.5), "steps must be an integer in"),
    (lambda: cgad.noise(steps=10, scale_range="big"), "scale_range must be a real number"),
    (lambda: cgad.noise(steps=10, delays=3), "delays must be a string"),
    (lambda: cgad.replay(STREAM, tau_cut=1.5), "tau_cut must be an integer in"),
    (lambda: cgad.replay(STREAM, buffer=True), "buffer must be an integer in"),
    (lambda: cgad.replay(STREAM, optimizer=3), "optimizer must be a string"),
    (lambda: cgad.bound_constants(tau_cut=1.5), "tau_cut must be an integer in"),
    (lambda: cgad.bound_constants(tau_cut=2 ** 70), "tau_cut must be an integer in"),
    (lambda: CGAD(params(), lr=10 ** 400), "lr: '1000000000000"),
    (lambda: CGAD(params(), threads=2 ** 32), "threads must be an integer in \\[0, 2\\^32 - 1\\]"),
    (lambda: cgad.replay(STREAM, lr=10 ** 400), "lr must be <= 2\\^38"),
    (lambda: state_dict_without("param_groups"), "must hold 'state' \\(a dict\\) and 'param_groups'"),
    (lambda: state_dict_without("state"), "must hold 'state' \\(a dict\\) and 'param_groups'"),
    (state_dict_with_bad_counters, "cgad_counters.*impossible step count"),
    (appended_tensor, "the param group now has 3 parameters, its optimizer state was made for 2"),
    (lambda: mixed_group_changed(lambda ps: ps.append(torch.zeros(3, requires_grad=True))),
     "param group 0: the param group now has 3 parameters, its optimizer state was made for 2"),
    (lambda: mixed_group_changed(lambda ps: ps.pop()),
     "param group 0: the param group now has 1 parameters, its optimizer state was made for 2"),
    (group_without_lr, "the param group has no 'lr'"),
    (lambda: stepped_optimizer()[1].counters(-1), "group must be an integer in \\[0, 0\\], got -1"),
    (lambda: stepped_optimizer()[1].counters(1), "group must be an integer in \\[0, 0\\], got 1"),
    (lambda: stepped_optimizer()[1].counters(0.0), "group must be an integer in"),
    (lambda: (lambda ps, o: o.state_buffer(ps[0], 0))(*stepped_optimizer()), "a state buffer's name is a string"),
    (lambda: PACGAD(params(), fragments=2).step(fragment=2 ** 64), "fragment must be an integer in"),
]


@pytest.mark.parametrize("call,message", BAD_CALLS, ids=[m for _, m in BAD_CALLS])
def test_bad_arguments_are_input_errors(call, message):
    with pytest.raises(cgad.InputError, match=message):
        call()


def test_gate_table_has_the_commands_tau_cut_bound():
    start = time.monotonic()
    with pytest.raises(cgad.InputError, match="tau_cut must be an integer in \\[1, 1000000\\], got 16777217"):
        cgad.gate_table(tau_cut=16777217)
    assert time.monotonic() - start < 1.0
    assert len(cgad.gate_table(tau_cut=3, precision=128)) == 5


def test_parameters_sharing_memory_across_param_groups_are_refused():
    w = torch.zeros(10)
    with pytest.raises(cgad.InputError, match="param group 0 parameter 0 and param group 1 parameter 0 share memory"):
        CGAD([{"params": [w[0:6]]}, {"params": [w[4:10]]}])
    with pytest.raises(cgad.InputError, match="share memory"):
        CGAD([{"params": [w.view(10)]}, {"params": [w.view(2, 5)]}])
    CGAD([{"params": [w[0:5]]}, {"params": [w[5:10]]}])  # disjoint halves of one tensor are fine
    # Made to share memory after construction: refused at the step, before anything changes.
    a, b = torch.zeros(10), torch.zeros(10)
    opt = CGAD([{"params": [a]}, {"params": [b]}])
    b.data = a.data
    a.grad, b.grad = torch.ones(10), torch.ones(10)
    with pytest.raises(cgad.InputError, match="share memory"):
        opt.step()
    assert torch.count_nonzero(a) == 0


def test_a_state_dict_with_a_nan_lr_is_refused_on_load_changing_nothing():
    ps, opt = stepped_optimizer()
    sd = opt.state_dict()
    before = state_bits(opt)
    for key, value in (("lr", math.nan), ("lr", -1.0), ("betas", (0.9,)), ("eps", "tiny")):
        bad = opt.state_dict()
        bad["param_groups"][0][key] = value
        with pytest.raises(cgad.InputError, match=key.rstrip("s")):
            opt.load_state_dict(bad)
    assert opt.param_groups[0]["lr"] == sd["param_groups"][0]["lr"]
    assert state_bits(opt) == before
    opt.load_state_dict(sd)
    fed(ps)
    assert opt.step().applied
