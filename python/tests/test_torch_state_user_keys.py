"""What a user (or a framework) puts into an optimizer's state beside cgad's own survives as torch.optim keeps it
(docs/python.md, "torch 2.x protocol"): a key of a parameter's entry (opt.state[p]["x"] = 1, a tensor of the
user's) and a key of opt.state that is no parameter (torch's own hook tests set opt.state["test"] = 1) go through
state_dict(), load_state_dict() into another optimizer, torch.save/torch.load and deepcopy, as given; the step
reads none of them, and another state format's names are still refused."""
import copy
import io

import pytest
import torch

import cgad
from cgad.torch import CGAD
from conftest import bits, state_bits
from optimizer_cases import CASES, feed, params


def own_state(opt):
    """state_bits without the user's keys (conftest's state_bits reads every entry as a tensor)."""
    sd = opt.state_dict()
    stripped = {"state": {i: {k: v for k, v in e.items() if k not in ("x", "note", "ema")}
                          for i, e in sd["state"].items() if isinstance(i, int)},
                "param_groups": sd["param_groups"]}

    class View:
        def state_dict(self):
            return stripped
    return state_bits(View())


def with_user_keys(cls, kwargs):
    ps = params()
    opt = cls(ps, **kwargs)
    feed(ps, 0)
    opt.step(staleness=1)
    opt.state[ps[0]]["x"] = 1
    opt.state[ps[2]]["note"] = "warm"
    opt.state[ps[2]]["ema"] = torch.arange(4.0)
    opt.state["test"] = {"epoch": 3}
    return ps, opt


def assert_user_keys(opt, ps):
    assert opt.state[ps[0]]["x"] == 1
    assert opt.state[ps[2]]["note"] == "warm"
    assert torch.equal(opt.state[ps[2]]["ema"], torch.arange(4.0))
    assert opt.state["test"] == {"epoch": 3}
    assert "x" not in opt.state[ps[1]]


@pytest.mark.parametrize("cls,kwargs", CASES)
def test_user_keys_survive_state_dict_load_save_and_copies(cls, kwargs):
    ps, opt = with_user_keys(cls, kwargs)
    sd = opt.state_dict()
    assert sd["state"][0]["x"] == 1 and sd["state"]["test"] == {"epoch": 3}

    target_params = params(seed=1)
    target = cls(target_params, **kwargs)
    target.load_state_dict(copy.deepcopy(sd))
    assert_user_keys(target, target_params)
    assert own_state(target) == own_state(opt)

    buffer = io.BytesIO()
    torch.save(sd, buffer)
    buffer.seek(0)
    from_file = cls(params(seed=2), **kwargs)
    from_file.load_state_dict(torch.load(buffer))
    assert_user_keys(from_file, from_file.param_groups[0]["params"])

    copied = copy.deepcopy(opt)
    assert_user_keys(copied, copied.param_groups[0]["params"])


@pytest.mark.parametrize("cls,kwargs", CASES)
def test_user_keys_change_no_step(cls, kwargs):
    ps, opt = with_user_keys(cls, kwargs)
    plain_params = params()
    plain = cls(plain_params, **kwargs)
    feed(plain_params, 0)
    plain.step(staleness=1)
    # A parameter without a gradient beside others: the group puts its state back after the step (docs/python.md,
    # "Param groups"), which must leave the user's keys alone.
    for e, (stepped, other) in enumerate(((ps, plain_params), (ps[:2], plain_params[:2])), start=1):
        for p, q in zip(ps, plain_params):
            p.grad = q.grad = None
        feed(stepped, e)
        feed(other, e)
        opt.step(staleness=0)
        plain.step(staleness=0)
    assert [bits(p).tobytes() for p in ps] == [bits(p).tobytes() for p in plain_params]
    assert own_state(opt) == own_state(plain)
    assert_user_keys(opt, ps)


def test_another_formats_state_names_are_still_refused():
    ps, opt = with_user_keys(CGAD, dict(state="fp32"))
    sd = copy.deepcopy(opt.state_dict())
    sd["state"][1]["momentum_buffer"] = torch.zeros(17)  # Nesterov's, not a user's key
    with pytest.raises(cgad.InputError, match="another state format"):
        CGAD(params(), state="fp32").load_state_dict(sd)
