"""A staleness-gated optimizer whose bare step() was never given a staleness warns once (docs/python.md,
"torchft"): a forgotten pre-hook would otherwise run CGAD at τ = 0, σ = 1 -- plain Adam -- saying nothing."""
import warnings

import pytest
import torch

from cgad.torch import CGAD, PACGAD, SDM, Adam, AdamDecay, Gated, Nesterov

GATED = {
    "CGAD": lambda ps: CGAD(ps),
    "PACGAD": lambda ps: PACGAD(ps, fragments=2),
    "AdamDecay": lambda ps: AdamDecay(ps),
    "SDM": lambda ps: SDM(ps),
    "Gated": lambda ps: Gated(torch.optim.SGD(ps, lr=0.1)),
}
BLIND = {"Adam": lambda ps: Adam(ps), "Nesterov": lambda ps: Nesterov(ps)}
MESSAGE = "never given a staleness"


def stepped(make):
    ps = [torch.nn.Parameter(torch.ones(8))]
    opt = make(ps)
    ps[0].grad = torch.full((8,), 0.5)
    return opt


@pytest.mark.parametrize("name", GATED)
def test_a_gate_never_given_a_staleness_warns_once(name):
    opt = stepped(GATED[name])
    with pytest.warns(RuntimeWarning, match=MESSAGE):
        opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()  # once
    assert opt.staleness == 0


@pytest.mark.parametrize("name", GATED)
@pytest.mark.parametrize("given", ["attribute", "keyword"])
def test_a_given_staleness_even_zero_is_no_warning(name, given):
    opt = stepped(GATED[name])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if given == "attribute":
            opt.staleness = 0
            opt.step()
        else:
            opt.step(staleness=0)
        opt.step()  # bare, after a staleness was given once


@pytest.mark.parametrize("name", BLIND)
def test_staleness_blind_optimizers_never_warn(name):
    opt = stepped(BLIND[name])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
