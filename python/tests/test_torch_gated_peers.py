"""Gated over each real optimizer it runs on the CPU (docs/python.md, "CGAD over the optimizer you already run"):
torch's Adam and AdamW (for-loop, foreach, fused), bitsandbytes' Adam8bit and AdamW8bit (which run on the CPU
since 0.50), torchao's AdamW8bit and AdamW4bit. Over each, on a small tensor and on one large enough for the 8-bit
or 4-bit state to be used (bitsandbytes quantizes tensors of min_8bit_size = 4096 elements or more; torchao
those of 4096 or more whose size its block divides), the tests show:

- the scaling is exact: what the wrapped step is given is g = fl32(sigma * delta) bit for bit, computed here
  apart from cgad (numpy's float32 product), and the result -- parameters and every bit of the state -- equals
  the bare optimizer stepped on that g; the caller's .grad is that g after the step (scaled in place);
- a zero-gate event dropped by on_zero_gate="skip", and an event refused for a NaN, leave the wrapped optimizer
  uncalled and its parameters, state and step counts bit for bit as they were."""
import numpy as np
import pytest
import torch

from cgad.torch import Gated
from conftest import peer, require_torch
from gated_support import capture_grads, param_bits, same_bits, sigma_times, state_bits

SMALL, LARGE = (10, 10), (64, 128)  # 100 elements, and 8192: quantized by bitsandbytes and torchao alike


def _torch(name, **flags):
    def make(params):
        if flags.get("fused"):
            require_torch((2, 4), "torch.optim's fused Adam/AdamW on the CPU")
        return getattr(torch.optim, name)(params, lr=1e-2, **flags)
    return make


def _bnb(name):
    def make(params):
        return getattr(peer("bitsandbytes").optim, name)(params, lr=1e-2)
    return make


def _torchao(name):
    def make(params):
        return getattr(peer("torchao.optim"), name)(params, lr=1e-2)
    return make


PEERS = {
    "torch-Adam-for-loop": _torch("Adam", foreach=False), "torch-Adam-foreach": _torch("Adam", foreach=True),
    "torch-Adam-fused": _torch("Adam", fused=True), "torch-AdamW-for-loop": _torch("AdamW", foreach=False),
    "torch-AdamW-foreach": _torch("AdamW", foreach=True), "torch-AdamW-fused": _torch("AdamW", fused=True),
    "bnb-Adam8bit": _bnb("Adam8bit"), "bnb-AdamW8bit": _bnb("AdamW8bit"),
    "torchao-AdamW8bit": _torchao("AdamW8bit"), "torchao-AdamW4bit": _torchao("AdamW4bit"),
}


def twins(seed):
    g = torch.Generator().manual_seed(seed)
    init = [torch.randn(SMALL, generator=g), torch.randn(LARGE, generator=g)]
    return [torch.nn.Parameter(t.clone()) for t in init], [torch.nn.Parameter(t.clone()) for t in init]


def deltas(seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(SMALL, generator=g) * 0.1, torch.randn(LARGE, generator=g) * 0.1]


def check_quantized(name, opt, large):
    """The 8-bit (4-bit) state really is in use for the large tensor, so its kernel is the one tested."""
    state = opt.state[large]
    if name.startswith("bnb"):
        assert state["state1"].dtype == torch.uint8 and state["state2"].dtype == torch.uint8
    elif name.startswith("torchao"):
        assert type(state["exp_avg"]) is not torch.Tensor and type(state["exp_avg_sq"]) is not torch.Tensor


@pytest.mark.parametrize("name", list(PEERS))
def test_the_wrapped_step_gets_sigma_times_delta_exactly_and_steps_as_the_bare_optimizer(name):
    ours, theirs = twins(1)
    gated, bare = Gated(PEERS[name](ours)), PEERS[name](theirs)
    seen = []
    capture_grads(gated.optimizer, seen)
    for event, tau in enumerate([0, 5, 33, 1, 12, 40, 2]):  # 33 and 40: past tau_cut, applied on g = 0*delta
        ds = deltas(100 + event)
        for p, d in zip(ours, ds):
            p.grad = d.clone()
        given = [p.grad for p in ours]
        report = gated.step(staleness=tau)
        assert report.applied and report.tau_effective == tau and (report.sigma == 0) == (tau >= 32)
        gs = [sigma_times(d, report.sigma) for d in ds]
        assert len(seen) == event + 1
        for k, (g, got) in enumerate(zip(gs, seen[-1])):
            assert same_bits(got, g), f"event {event} tensor {k}: the wrapped step was not given fl32(sigma*delta)"
        for p, got, g in zip(ours, given, gs):
            assert p.grad is got and same_bits(p.grad, g), "the caller's .grad must hold g, scaled in place"
        for q, g in zip(theirs, gs):
            q.grad = g
        bare.step()
        assert param_bits(gated) == param_bits(bare), f"event {event}: parameters differ from the bare optimizer's"
        assert state_bits(gated) == state_bits(bare), f"event {event}: state differs from the bare optimizer's"
    check_quantized(name, gated, ours[1])


@pytest.mark.parametrize("name", list(PEERS))
def test_a_dropped_zero_gate_event_and_a_refused_one_leave_the_wrapped_optimizer_untouched(name):
    ours, theirs = twins(2)
    gated, bare = Gated(PEERS[name](ours), on_zero_gate="skip"), PEERS[name](theirs)
    seen = []
    capture_grads(gated.optimizer, seen)

    def event(seed, tau, nan_at=None):
        ds = deltas(seed)
        for p, d in zip(ours, ds):
            p.grad = d.clone()
        if nan_at:
            ours[1].grad[nan_at] = float("nan")
        return ds, gated.step(staleness=tau)

    def follow(ds, sigma):
        for q, d in zip(theirs, ds):
            q.grad = sigma_times(d, sigma)
        bare.step()

    for seed, tau in ((200, 0), (201, 3)):
        ds, report = event(seed, tau)
        follow(ds, report.sigma)
    before = (param_bits(gated), state_bits(gated), len(seen))

    ds, report = event(202, 32)
    assert (report.applied, report.reason, report.sigma) == (False, "zero-gate", 0.0)
    assert (param_bits(gated), state_bits(gated), len(seen)) == before, "a dropped event changed the optimizer"

    ds, report = event(203, 1, nan_at=(17, 5))
    assert (report.applied, report.reason, report.nonfinite_param, report.nonfinite_index) == \
        (False, "nonfinite-gradient", 1, 17 * LARGE[1] + 5)
    assert (param_bits(gated), state_bits(gated), len(seen)) == before, "a refused event changed the optimizer"
    assert gated.counters["zero-gate"] == 1 and gated.counters["nonfinite-gradient"] == 1

    ds, report = event(204, 1)  # the bare optimizer never saw the two events above
    assert report.applied
    follow(ds, report.sigma)
    assert param_bits(gated) == param_bits(bare) and state_bits(gated) == state_bits(bare)
    check_quantized(name, gated, ours[1])


def test_bf16_parameters_over_torch_adam_get_sigma_times_delta_rounded_once():
    """bfloat16 gradients (a bf16 model's): g = fl_bf16(sigma * delta) rounded once, which torch's own bf16
    product (formed in float32, rounded again) is not always; the bare optimizer stepped on that g agrees."""
    from cgad.torch._pseudo_gradient import scaled
    ours, theirs = twins(3)
    ours = [torch.nn.Parameter(p.detach().bfloat16()) for p in ours]
    theirs = [torch.nn.Parameter(p.detach().bfloat16()) for p in theirs]
    gated, bare = Gated(torch.optim.Adam(ours, lr=1e-2)), torch.optim.Adam(theirs, lr=1e-2)
    seen = []
    capture_grads(gated.optimizer, seen)
    for event, tau in enumerate([0, 7, 19, 33]):
        ds = [d.bfloat16() for d in deltas(300 + event)]
        for p, d in zip(ours, ds):
            p.grad = d.clone()
        report = gated.step(staleness=tau)
        gs = [scaled(d, report.sigma) for d in ds]  # test_torch_gated.py shows scaled() rounds once
        assert all(same_bits(got, g) for got, g in zip(seen[-1], gs))
        for q, g in zip(theirs, gs):
            q.grad = g
        bare.step()
        assert param_bits(gated) == param_bits(bare) and state_bits(gated) == state_bits(bare)
    assert np.isfinite(ours[1].detach().float().numpy()).all()
