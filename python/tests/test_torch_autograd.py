"""The step changes parameters in place as torch's optimizers do, so it advances their version counters: backward()
through a graph that saved a parameter before the step raises torch's "modified by an inplace operation" (it
returned a gradient computed from the stepped values), as after torch.optim.Adam; a refused step changes nothing
and leaves the graph usable."""
import pytest
import torch

from cgad.torch import CGAD, Nesterov


@pytest.mark.parametrize("make", [lambda ps: torch.optim.Adam(ps), lambda ps: CGAD(ps), lambda ps: Nesterov(ps),
                                  lambda ps: CGAD(ps, state="q8")], ids=["torch-adam", "cgad", "nesterov", "cgad-q8"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_through_a_graph_saved_before_the_step_is_refused(make, dtype):
    p = torch.randn(64, dtype=dtype, requires_grad=True)
    opt = make([p])
    loss = (p * p).sum()  # saves p for its backward
    p.grad = torch.ones_like(p)
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_a_refused_step_leaves_the_graph_usable():
    p = torch.randn(8, requires_grad=True)
    opt = CGAD([p])
    loss = (p * p).sum()
    version = p._version
    p.grad = torch.full_like(p, float("nan"))
    assert not opt.step().applied
    assert p._version == version
    p.grad = None
    loss.backward()
    assert torch.equal(p.grad, 2 * p.detach())
