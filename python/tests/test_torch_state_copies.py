"""copy.deepcopy and pickle give a working optimizer: a deepcopied pair of model and optimizer steps to the same
bits as the original, and independently of it; an unpickled optimizer holds the same state and steps."""
import copy
import pickle

import pytest
import torch

import cgad
from cgad.torch import CGAD, PACGAD, Nesterov
from conftest import bits, state_bits

MAKERS = {
    "cgad-fp32": lambda m: CGAD(m.parameters(), lr=1e-2),
    "cgad-q8-two-groups": lambda m: CGAD([{"params": [m.weight]}, {"params": [m.bias], "state": "fp32"}],
                                         state="q8", rounding="stochastic", seed=4),
    "pacgad": lambda m: PACGAD(m.parameters(), fragments=3, state="bf16"),
    "nesterov": lambda m: Nesterov(m.parameters()),
}


def make(name):
    torch.manual_seed(0)
    model = torch.nn.Linear(40, 30).to(torch.bfloat16 if name == "pacgad" else torch.float32)
    return model, MAKERS[name](model)


def feed(model, event):
    g = torch.Generator().manual_seed(50 + event)
    for p in model.parameters():
        p.grad = (torch.randn(p.shape, generator=g) * 0.1).to(p.dtype)


def outer_step(opt, event):
    if isinstance(opt, PACGAD):
        return opt.step(staleness=event % 3, fragment=event % 3)
    return opt.step(staleness=event % 3)


def snapshot(model, opt):
    return [bits(p).tobytes() for p in model.parameters()], state_bits(opt)


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_deepcopied_model_and_optimizer_step_to_the_same_bits(name):
    model, opt = make(name)
    for e in range(2):
        feed(model, e)
        outer_step(opt, e)
    twin_model, twin = copy.deepcopy((model, opt))
    assert twin.param_groups[0]["params"][0] is twin_model.weight
    assert snapshot(model, opt) == snapshot(twin_model, twin)
    for e in range(2, 6):
        feed(model, e)
        feed(twin_model, e)
        assert outer_step(opt, e) == outer_step(twin, e)
        assert snapshot(model, opt) == snapshot(twin_model, twin), f"event {e}"
    before = snapshot(model, opt)
    feed(twin_model, 9)
    outer_step(twin, 9)
    assert snapshot(model, opt) == before  # the copy has state of its own


@pytest.mark.parametrize("name", list(MAKERS))
def test_an_unpickled_optimizer_holds_the_state_and_steps(name):
    model, opt = make(name)
    feed(model, 0)
    outer_step(opt, 0)
    opt.staleness = 2
    loaded = pickle.loads(pickle.dumps(opt))
    assert state_bits(loaded) == state_bits(opt)
    assert loaded.staleness == 2 and loaded.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    for p in loaded.param_groups[0]["params"]:
        p.grad = torch.ones_like(p)
    assert outer_step(loaded, 1).applied


@pytest.mark.parametrize("copier", ["deepcopy", "pickle"])
def test_an_optimizer_watching_its_traps_copies_and_the_copy_watches_nothing_until_asked(copier):
    """watch_traps()'s tallies watch the original's steps: a copy carries none, as a copy of a torch optimizer
    carries no hooks, and watches its own steps from its own watch_traps()."""
    model, opt = make("cgad-q8-two-groups")
    opt.watch_traps()
    feed(model, 0)
    outer_step(opt, 0)
    stats = opt.trap_stats()
    if copier == "deepcopy":
        twin_model, twin = copy.deepcopy((model, opt))
    else:
        twin_model, twin = pickle.loads(pickle.dumps((model, opt)))
    assert snapshot(model, opt) == snapshot(twin_model, twin)
    assert opt.trap_stats() == stats  # the original still watches
    with pytest.raises(cgad.InputError, match="watch_traps"):
        twin.trap_stats()
    twin.watch_traps()
    for e in (1, 2):
        feed(model, e)
        feed(twin_model, e)
        assert outer_step(opt, e) == outer_step(twin, e)
    assert snapshot(model, opt) == snapshot(twin_model, twin)
    assert [s["last"] for s in twin.trap_stats().values()] == [s["last"] for s in opt.trap_stats().values()]
