"""torch 2.x's state_dict and load_state_dict hooks on cgad.torch's optimizers, which replace both methods
(docs/python.md, "torch 2.x protocol"): the pre-hooks run first, the post-hooks see the finished state_dict (cgad's
counters included) and may replace it; load_state_dict's pre-hooks get a shallow copy and may replace it, its
post-hooks run after the load, and not after a refused one. Copies (deepcopy, pickle) carry no hooks, as copies of
torch's optimizers do."""
import copy
import pickle

import pytest
import torch

import cgad
from cgad.torch import CGAD, Gated
from cgad.torch._hooks import HOOK_TABLES
from conftest import bits, require_torch, state_bits
from optimizer_cases import CASES, feed, params


@pytest.fixture(autouse=True)
def _torch2():
    require_torch((2, 1), "torch.optim's state_dict and load_state_dict hooks")


def stepped(cls, kwargs, seed=0):
    ps = params(seed=seed)
    opt = cls(ps, **kwargs)
    for e in range(2):
        feed(ps, e)
        opt.step(staleness=e)
    return ps, opt


@pytest.mark.parametrize("cls,kwargs", CASES)
def test_state_dict_hooks_run_in_order_and_the_post_hook_sees_the_finished_state_dict(cls, kwargs):
    _, opt = stepped(cls, kwargs)
    seen = []
    opt.register_state_dict_pre_hook(lambda o: seen.append("pre"))
    opt.register_state_dict_pre_hook(lambda o: seen.append("first pre"), prepend=True)

    def post(o, sd):
        seen.append(("post", "cgad_counters" in sd["param_groups"][0]))
        return dict(sd, replaced=True)

    opt.register_state_dict_post_hook(post)
    sd = opt.state_dict()
    assert seen == ["first pre", "pre", ("post", True)]  # the counters are in before any post-hook runs
    assert sd["replaced"] is True


@pytest.mark.parametrize("cls,kwargs", CASES)
def test_load_state_dict_hooks_run_and_a_pre_hook_may_replace_the_state_dict(cls, kwargs):
    _, source = stepped(cls, kwargs)
    saved = source.state_dict()
    _, opt = stepped(cls, kwargs, seed=1)
    seen = []

    def replace(o, sd):
        seen.append("replace")
        out = copy.deepcopy(sd)
        out["param_groups"][0]["lr"] = 0.003
        return out

    def edit(o, sd):
        seen.append("edit")
        sd["param_groups"][0]["lr"] = 0.002  # the shallow copy's list is the caller's: torch's contract

    opt.register_load_state_dict_pre_hook(edit)
    opt.register_load_state_dict_pre_hook(replace, prepend=True)
    opt.register_load_state_dict_post_hook(lambda o: seen.append(("post", o.param_groups[0]["lr"])))
    opt.load_state_dict(saved)
    assert seen == ["replace", "edit", ("post", 0.002)]
    assert opt.param_groups[0]["lr"] == 0.002
    assert state_bits(opt) == state_bits(source)  # and the state is the saved one, bit for bit


def test_a_refused_load_runs_the_pre_hooks_and_not_the_post_hooks():
    _, opt = stepped(CGAD, {})
    bad = copy.deepcopy(opt.state_dict())
    bad["state"][0]["exp_avg"] = bad["state"][0]["exp_avg"].to(torch.bfloat16)
    before = state_bits(opt)
    seen = []
    opt.register_load_state_dict_pre_hook(lambda o, sd: seen.append("pre"))
    opt.register_load_state_dict_post_hook(lambda o: seen.append("post"))
    with pytest.raises(cgad.InputError, match="exp_avg is torch.bfloat16"):
        opt.load_state_dict(bad)
    assert seen == ["pre"]
    assert state_bits(opt) == before


@pytest.mark.parametrize("copier", [copy.deepcopy, lambda o: pickle.loads(pickle.dumps(o))], ids=["deepcopy", "pickle"])
def test_copies_carry_no_hooks_and_a_lambda_hook_does_not_stop_pickle(copier):
    ps, opt = stepped(CGAD, dict(state="q8"))
    before = state_bits(opt)
    fired = []
    opt.register_step_pre_hook(lambda o, a, k: fired.append("step"))
    opt.register_state_dict_post_hook(lambda o, sd: fired.append("state_dict"))
    opt.register_load_state_dict_pre_hook(lambda o, sd: fired.append("load"))
    copied = copier(opt)
    assert fired == []  # making the copy ran no hook
    assert state_bits(copied) == before
    copied_params = copied.param_groups[0]["params"]
    feed(copied_params, 5)
    copied.step(staleness=2)
    copied.load_state_dict(copied.state_dict())
    assert fired == []
    feed(ps, 5)
    opt.step(staleness=2)
    assert fired == ["step"]
    assert [bits(p).tobytes() for p in ps] == [bits(p).tobytes() for p in copied_params]


@pytest.mark.parametrize("copier", [copy.deepcopy, lambda o: pickle.loads(pickle.dumps(o))], ids=["deepcopy", "pickle"])
def test_a_gated_copy_carries_no_hooks_as_a_copy_of_torchs_optimizer(copier):
    """Gated follows torch's rule for copies (the wrapped torch.optim.Adam's own copy shows it): the torchft
    recipe's lambda pre-hook that supplies the staleness does not stop pickle, and the copy steps without it."""
    torch_copy = copier(_with_hooks(torch.optim.Adam(params(sizes=(8,)), lr=1e-2), []))
    assert all(not getattr(torch_copy, table) for table in HOOK_TABLES)
    ps = params(sizes=(8, 3))
    fired = []
    opt = _with_hooks(Gated(torch.optim.Adam(ps, lr=1e-2)), fired)
    copied = copier(opt)
    assert fired == [] and all(not getattr(copied, table) for table in HOOK_TABLES)
    copied_params = copied.param_groups[0]["params"]
    feed(copied_params, 0)
    copied.step(staleness=3)  # the staleness the original's pre-hook supplies
    copied.load_state_dict(copied.state_dict())
    assert fired == [] and copied.last_report.tau_effective == 3
    feed(ps, 0)
    opt.step()
    assert fired == ["post"] and opt.last_report.tau_effective == 3
    assert [bits(p).tobytes() for p in ps] == [bits(p).tobytes() for p in copied_params]


def _with_hooks(opt, fired):
    opt.register_step_pre_hook(lambda o, a, k: (a, dict(k, staleness=3)) if isinstance(o, Gated) else None)
    opt.register_step_post_hook(lambda o, a, k: fired.append("post"))
    opt.register_state_dict_post_hook(lambda o, sd: fired.append("state_dict"))
    opt.register_load_state_dict_pre_hook(lambda o, sd: fired.append("load"))
    return opt
