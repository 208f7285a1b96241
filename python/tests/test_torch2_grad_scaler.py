"""torch.amp.GradScaler.step(opt, staleness=tau) forwards tau to every cgad.torch optimizer (docs/python.md, "torch 2.x
protocol"): GradScaler passes step()'s keywords through, after unscaling the gradients in place. With a power-of-two
scale the unscaled gradients are the unscaled loss's exactly, so the step is bit for bit opt.step(staleness=tau) on
them. A scale that overflows makes GradScaler skip the step: the optimizer is not called (no count, no hook)."""
import pytest
import torch

from conftest import bits, require_torch, state_bits
from optimizer_cases import CASES


@pytest.fixture(autouse=True)
def _torch23():
    require_torch((2, 3), "torch.amp.GradScaler on the CPU")


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 30), torch.nn.Tanh(), torch.nn.Linear(30, 1))


def loss_of(m, e):
    g = torch.Generator().manual_seed(e)
    return m(torch.randn(16, 12, generator=g)).pow(2).mean()


@pytest.mark.parametrize("cls,kwargs", CASES)
def test_grad_scaler_forwards_the_staleness(cls, kwargs):
    scaled_model, plain_model = model(), model()
    scaled, plain = cls(scaled_model.parameters(), **kwargs), cls(plain_model.parameters(), **kwargs)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=1000)
    for e, tau in enumerate((0, 3, 5)):
        scaled.zero_grad()
        scaler.scale(loss_of(scaled_model, e)).backward()
        scaler.step(scaled, staleness=tau)
        scaler.update()
        plain.zero_grad()
        loss_of(plain_model, e).backward()
        plain.step(staleness=tau)
        assert scaled.last_report.tau_effective == plain.last_report.tau_effective
        assert scaled.last_report.sigma == plain.last_report.sigma
    assert [bits(p).tobytes() for p in scaled_model.parameters()] == \
        [bits(p).tobytes() for p in plain_model.parameters()]
    assert state_bits(scaled) == state_bits(plain)


def test_an_overflowing_scale_skips_the_step_without_calling_the_optimizer():
    from cgad.torch import CGAD
    m = model()
    opt = CGAD(m.parameters())
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append(k))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 127)
    (scaler.scale(loss_of(m, 0)) * 4).backward()  # past float32's range: inf gradients
    before = [bits(p).tobytes() for p in m.parameters()]
    scaler.step(opt, staleness=2)
    assert calls == [] and opt.last_report is None and opt.counters()["t"] == [0]
    assert [bits(p).tobytes() for p in m.parameters()] == before
