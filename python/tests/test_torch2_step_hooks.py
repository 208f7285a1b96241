"""torch 2.x's step hooks on cgad.torch's optimizers (docs/python.md, "torch 2.x protocol"): the per-optimizer and
global pre/post hooks fire exactly once per step() call, in torch's order, whatever became of the step -- applied, a
NaN step refused with on_nonfinite "skip" or "warn", a zero gate dropped, a step with no gradient -- since torch runs
them around every call of step() that returns; a step that raises (on_nonfinite="raise") runs the pre-hooks only,
as a torch step that raises does. A pre-hook may supply the staleness (torchft calls step() bare)."""
import warnings

import pytest
from torch.optim import optimizer as torch_optimizer

import cgad
from cgad.torch import CGAD
from conftest import bits, require_torch, state_bits
from optimizer_cases import CASES, feed, params


@pytest.fixture(autouse=True)
def _torch2():
    require_torch((2, 0), "torch.optim's step hooks")


class Recorder:
    """Registers the four kinds of step hook on ``opt`` and records which fired, in order."""

    def __init__(self, opt):
        self.fired = []
        self.handles = [
            torch_optimizer.register_optimizer_step_pre_hook(self._hook("global-pre")),
            opt.register_step_pre_hook(self._hook("pre")),
            opt.register_step_post_hook(self._hook("post")),
            torch_optimizer.register_optimizer_step_post_hook(self._hook("global-post")),
        ]

    def _hook(self, name):
        def hook(optimizer, args, kwargs):
            self.fired.append(name)
        return hook

    def take(self):
        fired, self.fired = self.fired, []
        return fired

    def remove(self):
        for handle in self.handles:
            handle.remove()


ONE_STEP = ["global-pre", "pre", "post", "global-post"]  # torch's order (Optimizer.profile_hook_step)


@pytest.mark.parametrize("cls,kwargs", CASES)
def test_every_step_fires_each_hook_once_whatever_became_of_it(cls, kwargs):
    ps = params()
    opt = cls(ps, **kwargs)
    recorder = Recorder(opt)
    try:
        feed(ps, 0)
        assert opt.step(staleness=1).applied
        assert recorder.take() == ONE_STEP
        ps[0].grad[3] = float("nan")  # in the first fragment, which a bare PACGAD step reads
        assert opt.step().reason == "nonfinite-gradient"        # refused, on_nonfinite="skip"
        assert recorder.take() == ONE_STEP
        opt.on_nonfinite = "warn"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            opt.step()
        assert recorder.take() == ONE_STEP
        opt.on_nonfinite = "raise"
        with pytest.raises(cgad.InputError):
            opt.step()
        assert recorder.take() == ["global-pre", "pre"]  # as torch: an exception in step() skips the post-hooks
        opt.zero_grad(set_to_none=True)
        assert opt.step().reason == "no-gradient"
        assert recorder.take() == ONE_STEP
        feed(ps, 1)
        assert opt.step(lambda: 2.5) == 2.5                     # with a closure: its loss, the hooks once
        assert recorder.take() == ONE_STEP
        assert opt.counters["applied"] == 2
    finally:
        recorder.remove()
    feed(ps, 2)
    opt.step()
    assert recorder.take() == []  # removed hooks fire no more


def test_a_dropped_zero_gate_step_fires_each_hook_once():
    ps = params()
    opt = CGAD(ps, on_zero_gate="skip", tau_cut=4)
    recorder = Recorder(opt)
    try:
        feed(ps, 0)
        report = opt.step(staleness=4)
        assert (report.applied, report.reason) == (False, "zero-gate")
        assert recorder.take() == ONE_STEP
    finally:
        recorder.remove()


@pytest.mark.parametrize("cls,kwargs", CASES)
def test_a_pre_hook_may_supply_the_staleness_of_a_bare_step(cls, kwargs):
    # torchft's DiLoCo calls step() with no arguments: a pre-hook returning (args, kwargs) gives it the staleness,
    # and the step is the one step(staleness=3) takes.
    stepped, hooked = params(), params()
    plain, opt = cls(stepped, **kwargs), cls(hooked, **kwargs)
    opt.register_step_pre_hook(lambda optimizer, args, kw: (args, dict(kw, staleness=3)))
    for e in range(2):
        feed(stepped, e)
        feed(hooked, e)
        plain.step(staleness=3)
        assert opt.step().tau_effective == plain.last_report.tau_effective
    assert [bits(p).tobytes() for p in stepped] == [bits(p).tobytes() for p in hooked]
    assert state_bits(plain) == state_bits(opt)
