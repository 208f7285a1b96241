"""The check of opt.state a CPU step makes first (cgad/torch/_live.py) costs no Python call per tensor: what changed
since the last step is found by the compiled module (_cgad.StateKeys, python/src/state_keys.cpp), which sees every
edit the Python check saw -- an in-place op, set_, a .data assignment, another tensor, a removed name, a non-tensor or
a tensor subclass, a parameter reshaped -- and nothing else."""
import sys

import pytest
import torch

from cgad import _cgad
from cgad.torch import Adam

NAMES = ["exp_avg", "exp_avg_sq"]


def _live_calls(tensors, state):
    """Python calls made in _live.py during one step (after two) of Adam over ``tensors`` tensors of 64 elements."""
    params = [torch.nn.Parameter(torch.full((64,), 0.5)) for _ in range(tensors)]
    opt = Adam(params, lr=1e-3, state=state)
    for _ in range(3):
        for p in params:
            p.grad = torch.full((64,), 1e-3)
        if _ == 2:
            calls = []
            sys.setprofile(lambda frame, event, arg: calls.append(frame.f_code.co_name)
                           if event == "call" and frame.f_code.co_filename.endswith("_live.py") else None)
            try:
                assert opt.step().applied
            finally:
                sys.setprofile(None)
    return calls


@pytest.mark.parametrize("state", ["fp32", "q8"])
def test_the_state_check_makes_no_python_call_per_tensor(state):
    few, many = _live_calls(3, state), _live_calls(60, state)
    assert few == many, f"3 tensors: {len(few)} calls, 60 tensors: {len(many)} calls in _live.py"


def _keys(with_shape=True):
    params = [torch.nn.Parameter(torch.zeros(2, 3)), torch.nn.Parameter(torch.zeros(4))]
    entries = [{"exp_avg": torch.zeros(2, 3), "exp_avg_sq": torch.ones(2, 3), "mine": 1},
               {"exp_avg": torch.zeros(4), "exp_avg_sq": torch.ones(4)}]
    keys = _cgad.StateKeys([NAMES, NAMES], torch.Tensor, with_shape)
    return keys, entries, params


def test_nothing_is_stale_once_recorded_and_everything_before():
    keys, entries, params = _keys()
    assert keys.stale(entries, params) == [0, 1]
    keys.record(0, entries[0], params[0])
    assert keys.stale(entries, params) == [1]
    keys.record_all(entries, params)
    assert keys.stale(entries, params) == []
    entries[0]["mine"] = 2  # a key it was not made with
    entries[0]["exp_avg"].clone().add_(1)  # a copy's version is the copy's
    assert keys.stale(entries, params) == []


# Each edit of entry (or parameter) 1, which only entry 1 must see.
EDITS = {
    "an in-place op": lambda e, p: e["exp_avg_sq"].add_(0),
    "set_ to other memory": lambda e, p: e["exp_avg"].set_(torch.zeros(p.shape)),
    ".data assigned": lambda e, p: setattr(e["exp_avg"], "data", torch.zeros(p.shape)),
    "another tensor": lambda e, p: e.update(exp_avg=e["exp_avg"].clone()),
    "a name removed": lambda e, p: e.pop("exp_avg_sq"),
    "a non-tensor": lambda e, p: e.update(exp_avg=0.0),
    "a tensor subclass": lambda e, p: e.update(exp_avg=torch.nn.Parameter(e["exp_avg"], requires_grad=False)),
    "the entry emptied": lambda e, p: e.clear(),
    "the parameter reshaped": lambda e, p: setattr(p, "data", p.data.view(2, 2)),
    "the last state tensor reshaped": lambda e, p: setattr(e["exp_avg_sq"], "data", e["exp_avg_sq"].data.view(2, 2)),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_every_edit_the_step_must_see_makes_the_entry_stale(edit):
    keys, entries, params = _keys()
    keys.record_all(entries, params)
    EDITS[edit](entries[1], params[1])
    assert keys.stale(entries, params) == [1]


def test_an_entry_that_is_no_dict_is_stale():
    keys, entries, params = _keys()
    keys.record_all(entries, params)
    entries[0] = None
    assert keys.stale(entries, params) == [0]


def test_without_shape_a_reshape_is_not_looked_at():
    keys, entries, params = _keys(with_shape=False)
    keys.record_all(entries, params)
    params[1].data = params[1].data.view(2, 2)
    assert keys.stale(entries, params) == []


def test_an_entry_that_does_not_read_stays_stale_when_recorded():
    keys, entries, params = _keys()
    entries[1].pop("exp_avg")
    keys.record_all(entries, params)
    assert keys.stale(entries, params) == [1]


def test_lists_of_another_length_are_refused():
    keys, entries, params = _keys()
    with pytest.raises(ValueError, match="1 entries and 2 parameters for 2 tensors"):
        keys.stale(entries[:1], params)
    with pytest.raises(IndexError):
        keys.record(2, entries[0], params[0])
