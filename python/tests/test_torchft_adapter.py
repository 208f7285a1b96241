"""cgad.torch.wire_torchft (docs/python.md, "torchft"): torchft's DiLoCo calls outer_optimizer.step() bare, after
Manager.should_commit() has counted the step; the wiring must make that bare step the step(staleness=τ(step),
fragment=(step - 1) mod P) a user would call, bit for bit, and refuse what it cannot wire. Driven here by a
manager that only counts steps, as torchft's does, so that it runs without torchft; examples/torchft_diloco.py
(test_torchft_diloco.py) wires it into torchft's own DiLoCo. Step hooks are torch 2.x's."""
import warnings

import pytest
import torch

import cgad
from cgad.torch import CGAD, PACGAD, Adam, Gated, wire_torchft
from conftest import bits, require_torch


class Manager:
    """torchft's Manager as the outer step sees it: current_step() counts the committed steps."""

    def __init__(self):
        self.step = 0

    def current_step(self):
        return self.step


def fragments(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [[torch.nn.Parameter(torch.randn(n, generator=g))] for n in (40, 7, 23)]


def feed(ps, seed):
    g = torch.Generator().manual_seed(seed)
    for p in ps:
        p.grad = torch.randn(p.shape, generator=g) * 0.1


def tau_of(step):
    return (5 * step) % 7


MAKERS = {
    "PACGAD": lambda frags: PACGAD([{"params": f} for f in frags], fragments="groups", tau_cut=6),
    "Gated": lambda frags: Gated(torch.optim.AdamW([{"params": f} for f in frags]), fragments="groups", tau_cut=6),
    "CGAD": lambda frags: CGAD([p for f in frags for p in f], tau_cut=6),
}


@pytest.mark.parametrize("name", MAKERS)
def test_a_wired_bare_step_is_the_explicit_step(name):
    require_torch((2, 0), "optimizer step hooks")
    by_fragment = name != "CGAD"
    wired_frags, twin_frags = fragments(), fragments()
    wired, twin = MAKERS[name](wired_frags), MAKERS[name](twin_frags)
    manager = Manager()
    wire_torchft(wired, manager, tau_of)
    for step in range(1, 9):
        manager.step = step  # should_commit() counted it before DiLoCo's step()
        for frags in (wired_frags, twin_frags):
            feed([p for f in frags for p in f], step)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the staleness was given: no warning
            wired.step()
        fragment = {"fragment": (step - 1) % 3} if by_fragment else {}
        twin.step(staleness=tau_of(step), **fragment)
        assert wired.last_report == twin.last_report
    assert [bits(p).tobytes() for f in wired_frags for p in f] == [bits(p).tobytes() for f in twin_frags for p in f]


def test_synchronous_is_tau_zero_without_a_warning_and_remove_undoes_it():
    require_torch((2, 0), "optimizer step hooks")
    ps = [p for f in fragments() for p in f]
    opt, manager = CGAD(ps), Manager()
    wiring = wire_torchft(opt, manager, "synchronous")
    feed(ps, 0)
    manager.step = 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert opt.step().tau_effective == 0
    with pytest.raises(cgad.InputError, match="wired already"):
        wire_torchft(opt, manager, tau_of)
    wiring.remove()
    wire_torchft(opt, manager, tau_of)  # a new source, once the first is removed
    assert opt.step().tau_effective == tau_of(4)


def test_what_cannot_be_wired_is_refused_and_nothing_registered():
    require_torch((2, 0), "optimizer step hooks")
    frags, manager = fragments(), Manager()
    ps = [p for f in frags for p in f]
    opt = CGAD(ps)
    for bad, match in [((torch.optim.SGD(ps, lr=1.0), manager, "synchronous"), "one of cgad.torch's"),
                       ((PACGAD(ps, fragments=3), manager, "synchronous"), "fragments='groups'"),
                       (([MAKERS["PACGAD"](frags), CGAD(ps)], manager, "synchronous"), "serves every fragment"),
                       (([opt, opt], manager, "synchronous"), "given twice"),
                       ((opt, manager, 3), "'synchronous'"),
                       ((opt, manager, "sync"), "'synchronous'"),
                       ((opt, object(), "synchronous"), "current_step")]:
        with pytest.raises(cgad.InputError, match=match):
            wire_torchft(*bad)
    feed(ps, 0)
    with pytest.warns(RuntimeWarning, match="never given a staleness"):
        opt.step()  # nothing was wired: the forgotten source is said
    wire_torchft([Adam(ps), opt], manager, "synchronous")  # DiLoCo's list, one optimizer per fragment


def test_torch_1_13_is_refused_in_one_line():
    if hasattr(torch.optim.Optimizer, "register_step_pre_hook"):
        pytest.skip("this torch has step hooks")
    with pytest.raises(cgad.InputError, match="step hooks"):
        wire_torchft(CGAD([torch.nn.Parameter(torch.ones(2))]), Manager(), "synchronous")
