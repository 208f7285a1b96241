"""opt.state is the state the steps use (docs/python.md, "State"): edits of it are taken or refused
with the reason before anything changes, torch's reset idiom restarts, a frozen parameter's state stays as it is,
load_state_dict follows torch's rules and keeps earlier references live, a reshaped parameter's state follows it, a
parameter swapped into param_groups is refused, and one optimizer's groups share one thread pool."""
import collections
import os

import pytest
import torch

import cgad
from cgad.torch import CGAD, Adam, Nesterov
from conftest import state_bits

SIZES = (300, 17, 260)
FORMATS = ["fp32", "bf16", "q8"]


def model(seed=0, sizes=SIZES):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(n, generator=g)) for n in sizes]


def feed(params, event, skip=()):
    g = torch.Generator().manual_seed(100 + event)
    for k, p in enumerate(params):
        grad = torch.randn(p.shape, generator=g) * 0.1
        p.grad = None if k in skip else grad


def stepped(state="fp32", steps=3, cls=CGAD, **kwargs):
    params = model()
    opt = cls(params, state=state, **kwargs)
    for e in range(steps):
        feed(params, e)
        opt.step()
    return params, opt


def clone_of(params, opt, state):
    """A second optimizer over copies of ``params``, loaded from opt's state_dict (a deep copy)."""
    copies = [torch.nn.Parameter(p.detach().clone()) for p in params]
    other = CGAD(copies, state=state)
    sd = opt.state_dict()
    other.load_state_dict({"state": {i: {n: (t.clone() if isinstance(t, torch.Tensor) else t) for n, t in e.items()}
                                     for i, e in sd["state"].items()},
                           "param_groups": sd["param_groups"]})
    return copies, other


def step_both(a_params, a, b_params, b, event):
    feed(a_params, event)
    feed(b_params, event)
    return a.step(), b.step()


# --- class 10: the state the steps use and the state opt.state shows are one ----------------------------------------


@pytest.mark.parametrize("state", FORMATS)
def test_a_replaced_state_tensor_is_the_one_the_step_updates(state):
    params, opt = stepped(state)
    name = "exp_avg" if state != "q8" else "state1"
    replaced = opt.state[params[0]][name].clone()
    if state == "q8":
        replaced.fill_(int(opt.state[params[0]][name].flatten()[0]))  # valid codes: any byte is a code
    else:
        replaced.zero_()
    opt.state[params[0]][name] = replaced
    copies, other = clone_of(params, opt, state)  # the edited state, loaded into another optimizer
    step_both(params, opt, copies, other, 7)
    assert opt.state[params[0]][name] is replaced, "the step did not update the tensor opt.state holds"
    for p, q in zip(params, copies):
        assert torch.equal(p, q)
        for n in opt.state[p]:
            assert torch.equal(opt.state[p][n], other.state[q][n]), n
    assert opt.state_dict()["state"][0][name] is replaced


@pytest.mark.parametrize("reset", ["clear", "new-defaultdict", "empty-entries"])
@pytest.mark.parametrize("state", FORMATS)
def test_removing_every_entry_restarts_the_optimizer_as_torch_does(reset, state):
    params, opt = stepped(state)
    if reset == "clear":
        opt.state.clear()
    elif reset == "new-defaultdict":
        opt.state = collections.defaultdict(dict)
    else:
        for p in params:
            opt.state[p] = {}
    fresh_params = [torch.nn.Parameter(p.detach().clone()) for p in params]
    fresh = CGAD(fresh_params, state=state)
    step_both(params, opt, fresh_params, fresh, 9)
    for p, q in zip(params, fresh_params):
        assert torch.equal(p, q)
        assert opt.state[p]["step"].item() == 1
        for n in fresh.state[q]:
            assert torch.equal(opt.state[p][n], fresh.state[q][n]), n
    assert opt.state_dict()["param_groups"][0]["cgad_counters"]["steps"] == 1


def test_state_dict_after_clear_is_the_restarted_state():
    params, opt = stepped("fp32")
    opt.state.clear()
    sd = opt.state_dict()
    assert sd["param_groups"][0]["cgad_counters"]["steps"] == 0
    assert all(torch.count_nonzero(sd["state"][i]["exp_avg"]) == 0 for i in range(len(params)))


@pytest.mark.parametrize("edit", ["del-moment", "del-absmax", "partial-clear", "resize", "set-other-size", "dtype",
                                  "not-a-tensor", "non-contiguous"])
def test_an_edit_the_step_cannot_take_is_refused_before_anything_changes(edit):
    state = "q8" if edit == "del-absmax" else "fp32"
    params, opt = stepped(state)
    p = params[0]
    if edit == "del-moment":
        del opt.state[p]["exp_avg_sq"]
    elif edit == "del-absmax":
        del opt.state[p]["absmax2"]
    elif edit == "partial-clear":
        del opt.state[params[1]]
    elif edit == "resize":
        opt.state[p]["exp_avg"].resize_(0)
    elif edit == "set-other-size":
        opt.state[p]["exp_avg"].set_(torch.zeros(7))
    elif edit == "dtype":
        opt.state[p]["exp_avg"] = opt.state[p]["exp_avg"].double()
    elif edit == "not-a-tensor":
        opt.state[p]["exp_avg_sq"] = 0.0
    else:
        opt.state[p]["exp_avg"] = torch.zeros(2 * p.numel())[::2]
    before = [q.detach().clone() for q in params]
    feed(params, 5)
    with pytest.raises(cgad.InputError, match="nothing was stepped"):
        opt.step()
    assert all(torch.equal(q, b) for q, b in zip(params, before))
    with pytest.raises(cgad.InputError):  # nor would a checkpoint record it
        opt.state_dict()


def test_set_to_a_tensor_of_the_right_size_is_taken():
    params, opt = stepped("fp32")
    p = params[0]
    target = torch.zeros(p.numel())
    opt.state[p]["exp_avg"].set_(target)
    feed(params, 4)
    opt.step()
    assert opt.state[p]["exp_avg"].data_ptr() == target.data_ptr()
    assert torch.count_nonzero(target) > 0, "the step did not write where exp_avg now points"


# --- class 11: a frozen parameter's state is left as it is ----------------------------------------------------------


@pytest.mark.parametrize("state", FORMATS)
@pytest.mark.parametrize("how", ["replaced", "set"])
def test_a_frozen_parameters_replaced_state_is_what_it_resumes_from(state, how):
    params, opt = stepped(state)
    ref_params, ref = clone_of(params, opt, state)
    frozen = params[1]
    for name in list(opt.state[frozen]):
        if name == "step":
            continue
        t = opt.state[frozen][name]
        if how == "replaced":
            opt.state[frozen][name] = t.clone()
        else:
            t.set_(t.clone())
    kept = {n: t.clone() for n, t in opt.state[frozen].items() if n != "step"}
    feed(params, 6, skip={1})
    feed(ref_params, 6, skip={1})
    opt.step()
    ref.step()
    for n, t in kept.items():
        assert torch.equal(opt.state[frozen][n], t), f"{n} of the frozen parameter changed"
    step_both(params, opt, ref_params, ref, 7)  # the frozen one steps again, from the state it kept
    for p, q in zip(params, ref_params):
        assert torch.equal(p, q)


# --- class 12: load_state_dict follows torch's rules ----------------------------------------------------------------


@pytest.mark.parametrize("case", ["empty-state", "one-missing", "keyed-by-names", "repeated-index", "index-too-big",
                                  "index-not-int"])
def test_a_state_dict_torch_would_not_map_is_refused(case):
    params, opt = stepped("fp32")
    sd = opt.state_dict()
    state = {i: dict(e) for i, e in sd["state"].items()}
    groups = [dict(g) for g in sd["param_groups"]]
    if case == "empty-state":
        state = {}
    elif case == "one-missing":
        del state[1]
    elif case == "keyed-by-names":
        state = {f"p{i}": e for i, e in state.items()}
    elif case == "repeated-index":
        groups[0]["params"] = [0, 0, 2]
    elif case == "index-too-big":
        groups[0]["params"] = [0, 1, 5]
    else:
        groups[0]["params"] = [0, 1, "2"]
    other = CGAD(model(1), state="fp32")
    before = {n: t.clone() for n, t in other.state[other.param_groups[0]["params"][0]].items()}
    with pytest.raises(cgad.InputError):
        other.load_state_dict({"state": state, "param_groups": groups})
    after = other.state[other.param_groups[0]["params"][0]]
    assert all(torch.equal(after[n], t) for n, t in before.items())


def test_an_index_listed_twice_is_refused_where_the_shapes_would_let_it_load():
    sizes = (64, 64, 64)
    params = model(sizes=sizes)
    opt = CGAD(params, state="fp32")
    feed(params, 0)
    opt.step()
    sd = opt.state_dict()
    sd["param_groups"][0]["params"] = [0, 0, 2]  # parameter 1 would get parameter 0's moments
    other = CGAD(model(1, sizes=sizes), state="fp32")
    with pytest.raises(cgad.InputError, match="once"):
        other.load_state_dict(sd)


def test_a_fresh_optimizers_empty_state_loads():
    fresh = CGAD(model(), state="fp32")
    other = CGAD(model(1), state="fp32")
    other.load_state_dict(fresh.state_dict())
    assert other.state_dict()["param_groups"][0]["cgad_counters"]["steps"] == 0


# --- class 13: impossible state written into opt.state is refused before the step ----------------------------------


@pytest.mark.parametrize("state,name,value", [
    ("fp32", "exp_avg_sq", float("nan")), ("fp32", "exp_avg_sq", -1.0), ("fp32", "exp_avg", float("inf")),
    ("bf16", "exp_avg", 3e38), ("q8", "absmax2", float("nan")), ("q8", "absmax1", 3e38),
    ("fp32", "exp_avg", 1e30),  # beside v: no run of steps makes |m| that large (the joint bound)
])
def test_impossible_state_is_refused_and_nothing_changes(state, name, value):
    params, opt = stepped(state)
    opt.state[params[2]][name][0] = value
    before = [p.detach().clone() for p in params]
    feed(params, 8)
    with pytest.raises(cgad.InputError, match="parameter 2's state holds an impossible"):
        opt.step()
    assert all(torch.equal(p, b) for p, b in zip(params, before))


def test_impossible_nesterov_state_is_refused():
    params, opt = stepped("fp32", cls=Nesterov)
    opt.state[params[0]]["momentum_buffer"][3] = float("nan")
    feed(params, 8)
    with pytest.raises(cgad.InputError, match="impossible"):
        opt.step()


# --- a state written past its version counter is checked all the same (fourth pass, class 7) -----------------------


def _fill(t, value):
    t.data.fill_(value)


def _copy(t, value):
    t.data.copy_(torch.full_like(t, value))


def _numpy(t, value):
    t.numpy()[:] = value  # a float32 tensor's memory, written by NumPy


def _item_of_data(t, value):
    with torch.no_grad():
        t.data[0] = value


# (optimizer options, state name, value, write): every write path leaves the tensor's _version as it was, so the
# entry looks untouched; before the fix each step put NaN into parameter 2 and reported applied. The q8 state's, whose
# check costs next to nothing beside the step (_live.LiveState.checked_each_step).
BYPASSING_WRITES = {
    "absmax2-nan-numpy": (dict(state="q8"), "absmax2", float("nan"), _numpy),
    "absmax2-negative-fill": (dict(state="q8"), "absmax2", -1.0, _fill),
    "absmax1-inf-copy": (dict(state="q8"), "absmax1", float("inf"), _copy),
    "absmax1-nan-data-item": (dict(state="q8"), "absmax1", float("nan"), _item_of_data),
    "bnb-absmax2-inf-fill": (dict(state="q8", q8_semantics="bnb", min_q8_size=0), "absmax2", float("inf"), _fill),
    "fp32-fallback-v-negative-numpy": (dict(state="q8", min_q8_size=1 << 20), "state2", -1.0, _numpy),
    "fp32-fallback-m-nan-copy": (dict(state="q8", min_q8_size=1 << 20), "state1", float("nan"), _copy),
    "nesterov-absmax1-nan-fill": (dict(state="q8", cls=Nesterov), "absmax1", float("nan"), _fill),
}


@pytest.mark.parametrize("case", list(BYPASSING_WRITES))
def test_a_state_written_past_its_version_counter_is_refused_before_anything_changes(case):
    options, name, value, write = BYPASSING_WRITES[case]
    params, opt = stepped(**options)
    target = opt.state[params[2]][name]
    version = target._version
    write(target, value)
    assert target._version == version  # what made the write invisible before
    before = [p.detach().clone() for p in params]
    state_before = state_bits(opt)
    feed(params, 8)
    with pytest.raises(cgad.InputError, match="parameter 2's state holds an impossible"):
        opt.step()
    assert all(torch.equal(p, b) for p, b in zip(params, before))
    assert state_bits(opt) == state_before


def _bits(t):
    """A tensor's bit patterns, comparable with torch.equal (NaN equals itself)."""
    t = t.detach().contiguous()
    return t.view(torch.int16 if t.dtype == torch.bfloat16 else torch.int32)


def _numpy_any(t, value):
    """As _numpy, for bf16 state too (NumPy has no bfloat16: its bits, through an int16 view of the memory)."""
    if t.dtype != torch.bfloat16:
        return _numpy(t, value)
    t.view(torch.int16).numpy()[:] = int(torch.tensor(value, dtype=torch.bfloat16).view(torch.int16))


WRITES = {"fill": _fill, "copy": _copy, "numpy": _numpy_any, "data-item": _item_of_data}
# fp32 and bf16 state, whose values no check reads before a step (a full check cost 13x the step): the kernel's
# guard (docs/design.md §3) keeps the elements whose state it finds invalid and the step reports them.
INVALID_STATE = {
    "cgad-v-negative": (CGAD, "exp_avg_sq", -1.0),
    "cgad-m-nan": (CGAD, "exp_avg", float("nan")),
    "adam-v-nan": (Adam, "exp_avg_sq", float("nan")),
    "adam-m-inf": (Adam, "exp_avg", float("inf")),
    "nesterov-b-nan": (Nesterov, "momentum_buffer", float("nan")),
}


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("state", ["fp32", "bf16"])
@pytest.mark.parametrize("case", list(INVALID_STATE))
def test_state_written_past_its_version_counter_never_makes_a_nan_parameter(case, state, write):
    cls, name, value = INVALID_STATE[case]
    params, opt = stepped(state, cls=cls)
    twin_params, twin = stepped(state, cls=cls)  # the reference: the same steps, its state left valid
    target = opt.state[params[2]][name]
    version = target._version
    WRITES[write](target, value)
    assert target._version == version  # the write the version counter does not see
    bad = ~torch.isfinite(target.float()) | (target.float() < 0 if name == "exp_avg_sq" else False)
    assert bad.any() and (write != "data-item" or int(bad.sum()) == 1)
    before, state_before = params[2].detach().clone(), {n: t.clone() for n, t in opt.state[params[2]].items()}
    feed(params, 8)
    feed(twin_params, 8)
    with pytest.raises(cgad.InputError, match=rf"{int(bad.sum())} element\(s\).*parameter 2's opt\.state\[p\]"
                                              rf"\['{name}'\].*past its version counter.*left as they were"):
        opt.step()
    twin.step()
    assert all(bool(torch.isfinite(p).all()) for p in params), "a step put NaN/Inf into a parameter"
    # The elements with invalid state kept every bit (parameter and state); every other element took the step.
    assert torch.equal(_bits(params[2][bad]), _bits(before[bad]))
    for n, t in opt.state[params[2]].items():
        if n != "step":
            assert torch.equal(_bits(t[bad]), _bits(state_before[n][bad])), n
            assert torch.equal(_bits(t[~bad]), _bits(twin.state[twin_params[2]][n][~bad])), n
    assert torch.equal(_bits(params[2][~bad]), _bits(twin_params[2][~bad]))
    for p, q in zip(params[:2], twin_params[:2]):
        assert torch.equal(_bits(p), _bits(q))
        for n, t in opt.state[p].items():
            assert torch.equal(_bits(t), _bits(twin.state[q][n])), n


def test_a_state_written_past_its_version_counter_and_put_right_steps_on():
    params, opt = stepped("q8")
    twin_params, twin = stepped("q8")
    v = opt.state[params[0]]["absmax2"]
    good = v.clone()
    v.data.fill_(-1.0)
    feed(params, 8)
    with pytest.raises(cgad.InputError):
        opt.step()
    v.data.copy_(good)  # the restore idiom, itself past the counter
    for e in (8, 9):
        a, b = step_both(params, opt, twin_params, twin, e)
        assert a.applied and b.applied
    assert all(torch.equal(p, q) for p, q in zip(params, twin_params))
    assert state_bits(opt) == state_bits(twin)


# --- class 14: a reshaped parameter's state follows its shape -------------------------------------------------------


@pytest.mark.parametrize("state", FORMATS)
def test_state_follows_a_reshaped_parameter(state):
    params, opt = stepped(state)
    params[0].data = params[0].data.view(20, 15)
    feed(params, 3)
    opt.step()
    value_names = [n for n in opt.state[params[0]] if n in ("exp_avg", "exp_avg_sq", "state1", "state2")]
    for n in value_names:
        assert opt.state[params[0]][n].shape == (20, 15), n
    reshaped = model()
    reshaped[0] = torch.nn.Parameter(reshaped[0].detach().view(20, 15))
    other = CGAD(reshaped, state=state)
    other.load_state_dict(opt.state_dict())  # the checkpoint loads into the reshaped model


def test_a_parameter_of_another_size_is_refused():
    params, opt = stepped("fp32")
    params[0].data = torch.zeros(10)
    feed(params, 3)
    with pytest.raises(cgad.InputError, match="elements"):
        opt.step()


# --- class 15: a tensor swapped into param_groups ------------------------------------------------------------------


def test_a_parameter_swapped_into_param_groups_is_refused():
    params, opt = stepped("fp32")
    swapped = torch.nn.Parameter(torch.zeros(SIZES[1]))
    opt.param_groups[0]["params"][1] = swapped
    feed(opt.param_groups[0]["params"], 4)
    before = [p.detach().clone() for p in opt.param_groups[0]["params"]]
    with pytest.raises(cgad.InputError, match="another tensor"):
        opt.step()
    assert all(torch.equal(p, b) for p, b in zip(opt.param_groups[0]["params"], before))
    with pytest.raises(cgad.InputError, match="another tensor"):
        opt.state_dict()


# --- class 16: references taken before load_state_dict stay live ----------------------------------------------------


@pytest.mark.parametrize("state", FORMATS)
def test_references_taken_before_a_load_stay_the_live_state(state):
    params, opt = stepped(state)
    sd_before = opt.state_dict()
    refs = {n: t for n, t in opt.state[params[0]].items()}
    _, source = stepped(state, steps=5)
    opt.load_state_dict(source.state_dict())
    feed(params, 11)
    opt.step()
    for n, t in refs.items():
        assert opt.state[params[0]][n] is t, n
        assert sd_before["state"][0][n] is t, n
    assert opt.state[params[0]]["step"].item() == 6


# --- class 19: one thread pool per optimizer ------------------------------------------------------------------------


def threads_now():
    return len(os.listdir("/proc/self/task"))


def test_an_optimizers_groups_share_one_thread_pool():
    before = threads_now()
    params = model(sizes=[64] * 64)
    opt = CGAD([{"params": [p]} for p in params], threads=4)
    for e in range(2):
        feed(params, e)
        opt.step()
    started = threads_now() - before
    assert started <= 3, f"{started} threads for 64 param groups at threads=4"
    del opt


def test_groups_at_the_default_thread_count_share_one_pool():
    before = threads_now()
    params = model(sizes=[16] * 200)
    opt = CGAD([{"params": [p]} for p in params])
    feed(params, 0)
    opt.step()
    started = threads_now() - before
    assert started <= max(1, os.cpu_count() - 1), f"{started} threads for 200 param groups"
    del opt


# --- hyperparameters parsed only when they change: a change is still taken at the next step -------------------------


@pytest.mark.parametrize("how", ["float", "tensor-in-place", "betas-list-in-place"])
def test_a_changed_setting_is_taken_by_the_next_step(how):
    params, opt = stepped("fp32")
    group = opt.param_groups[0]
    if how == "float":
        group["lr"] = 0.0
    elif how == "tensor-in-place":
        group["lr"] = torch.tensor(1e-3)
        feed(params, 3)
        opt.step()
        group["lr"].fill_(0.0)
    else:
        group["betas"] = [0.9, 0.999]
        feed(params, 3)
        opt.step()
        group["betas"][0] = 0.5
    before = [p.detach().clone() for p in params]
    feed(params, 4)
    opt.step()
    moved = [not torch.equal(p, b) for p, b in zip(params, before)]
    if how == "betas-list-in-place":
        copies, other = clone_of(params, opt, "fp32")  # takes the state_dict's betas (0.5, 0.999)
        assert other.param_groups[0]["betas"][0] == 0.5
        step_both(params, opt, copies, other, 5)
        assert all(torch.equal(p, q) for p, q in zip(params, copies))
    else:
        assert not any(moved), "lr = 0 was not taken: the group's old lr stepped"
