"""The beta rule on the decimal (docs/design.md §3): cgad.torch takes betas and a momentum just below 1 whose float32
is 1 (0.99999999, 0.999999999), as torch.optim.Adam and torch.optim.SGD take them, and refuses in one line, quoting
the value as given, what its arithmetic cannot represent. Before, each of these was refused as "got 1".

Adam: the moments are checked against torch.optim.Adam with test_torch_adam_moments_fidelity.py's bound (its
docstring derives it, including the term for beta1's float against torch 2's lerp). Nesterov: torch.optim.SGD
(nesterov=True) forms buf = mu*buf + g and g + mu*buf with the same float32 mu = 1.0, so both sides compute the same
buffer and direction to the bit (each one float addition; torch may fuse mu*buf + g into an fma, exact at mu = 1);
theta - lr*dir may then differ by torch's possible fma: at most one rounding of lr*dir and of theta per step."""
import numpy as np
import pytest
import torch

import cgad
import cgad.torch
from test_torch_adam_moments_fidelity import run

U = 2.0 ** -24


@pytest.mark.parametrize("betas", [(0.9, 0.99999999), (0.99999999, 0.999999999)])
def test_adam_betas_whose_float_is_one_step_as_torch(betas):
    mine, other, bound_m, bound_v = run(torch.optim.Adam, betas, 0.0, n=256)
    for name, bound in (("exp_avg", bound_m), ("exp_avg_sq", bound_v)):
        diff = np.abs(mine[name] - other[name])
        assert np.all(diff <= bound), f"betas {betas}: {name} differs by up to {np.max(diff / bound):.3g} bounds"


def test_nesterov_momentum_whose_float_is_one_steps_as_sgd():
    gen = torch.Generator().manual_seed(3)
    init = torch.randn(64, generator=gen)
    grads = [torch.randn(64, generator=gen) for _ in range(4)]
    ours, theirs = torch.nn.Parameter(init.clone()), torch.nn.Parameter(init.clone())
    fast = cgad.torch.Nesterov([ours], lr=0.7, momentum=0.999999999, threads=1)
    peer = torch.optim.SGD([theirs], lr=0.7, momentum=0.999999999, nesterov=True)
    bound = torch.zeros(64, dtype=torch.float64)
    buf = torch.zeros(64, dtype=torch.float64)
    for g in grads:
        ours.grad, theirs.grad = g.clone(), g.clone()
        fast.step()
        peer.step()
        buf = buf + g.double()
        direction = g.double() + buf
        bound += 2 * U * (theirs.detach().double().abs() + 0.7 * direction.abs()) * (1 + 2.0 ** -20)
    diff = (ours.detach().double() - theirs.detach().double()).abs()
    assert torch.all(diff <= bound), f"theta differs by up to {float((diff / bound).max()):.3g} bounds"


@pytest.mark.parametrize("value", [1.0, 1.0000001, 2])
def test_a_beta_of_one_or_more_is_refused_quoting_it(value):
    p = torch.nn.Parameter(torch.zeros(4))
    with pytest.raises(cgad.InputError, match=f"beta2 must lie in \\[0, 1\\), got '{value!r}'"):
        cgad.torch.Adam([p], betas=(0.9, value))
    with pytest.raises(cgad.InputError, match=f"momentum must lie in \\[0, 1\\), got '{value!r}'"):
        cgad.torch.Nesterov([p], momentum=value)


def test_bnb_semantics_refuses_a_beta_whose_float_is_one_quoting_it():
    p = torch.nn.Parameter(torch.zeros(4))
    with pytest.raises(cgad.InputError, match=r"1.0f - beta\), which would be 0, got '0.99999999'"):
        cgad.torch.Adam([p], betas=(0.9, 0.99999999), state="q8", q8_semantics="bnb")
