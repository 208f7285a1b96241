"""Gated over torch.optim.Adam (for-loop, foreach, fused on the CPU) against cgad.torch.CGAD(state="fp32") on one
stream of pseudo-gradients with mixed delays, up to tau = 40 past tau_cut = 32 (docs/python.md, "CGAD over the
optimizer you already run"). Adam is constructed as users construct it (double betas, lr and eps), with an lr
schedule on the wrapper.

Both receive the same g = fl32(sigma * delta) -- checked bit for bit, so what differs is Adam alone. The tolerance
is derived, element by element, from three terms (u = 2^-24, first order in u, each side bounded separately):

1. Each side's rounding, against the same side computed in exact arithmetic with the constants it really uses.
   m: cgad forms fl(fl(b1*m) + fl((1-b1)*g)), two products and a sum, error <= u(b1|m| + (1-b1)|g|) + u|m'|;
   torch >= 2 forms m + w1*(g - m) (lerp, or its fmadd in the fused kernel), error <= 2u*w1(|g| + |m|) + u|m'|;
   torch 1.13 forms fl(fl(b1*m) + fl(w1*g)) as cgad. All are <= 3u(|m| + w|g|) (b1 >= 1/2), the bound used; an
   old error decays by the side's own factor on m (b1, or 1 - w1 for the lerp), at most max(b1, 1 - w1).
   v: both form fl(fl(b2*v) + fl(fl(c*g)*g)) (torch's addcmul, or the fused kernel's products): error
   <= u*b2*v + 2u*c*g^2 + u*v' <= 4u(b2*v + c*g^2). The update U = lr*mhat/(sqrt(vhat) + eps) carries
   lr*(e_m/bc1)/D + lr*|mhat|*(e_v/bc2)/(2*r*D^2) (r = sqrt(vhat), D = r + eps) and 7u|U| of its own roundings,
   counted on each side: cgad rounds bc1 and bc2 to float and divides m and v by them (2u on mhat, 2u on vhat,
   so 1u + 1u for the square root on r), adds eps (D: 3u), divides (1u) and multiplies by lr (1u); torch rounds
   sqrt(v) (1u), the double sqrt(bc2) to float (1u) and divides by it (1u), adds eps (D: 4u), divides m by D
   (1u) and multiplies by the double lr/bc1 rounded to float (2u). theta - U rounds once: u(|theta| + |U|).
   The whole is multiplied by 1 + 2^-16 for the second-order terms (k*u <= 2^-19 for every count k here).
2. The two sides' constants (docs/python.md). Both multiply by fl32(b) and by w = fl32(1 - b), 1 - b of the
   user's decimal (cgad forms it from the decimal's text, docs/design.md "Derived constants and how each is
   rounded"; torch in double from the double b, rounded once: the same floats for these betas, checked below), and
   both form their bias corrections 1 - b^t from the decimal b (torch in double, cgad to within 2^-53 relative);
   torch takes lr in double where cgad rounds it to float, and torch >= 2's lerp decays m by 1 - w1 where cgad
   multiplies by fl32(b1). The term is not linearised here: both sides' exact-arithmetic recurrences are run, in
   float64, with their own constants, and |theta_gated_exact - theta_cgad_exact| enters the bound as computed.
3. float64's own rounding in evaluating those recurrences: <= 2^-40 (|theta| + sum |U|) (about 20 operations a
   step at 2^-53 each, over 60 steps, is below 2^-42).

|theta_gated - theta_cgad| <= term 2 + (1 + 2^-16)(term 1, gated side + term 1, cgad side) + term 3.
"""
import importlib
import inspect
from fractions import Fraction

import numpy as np
import pytest
import torch

from cgad.torch import CGAD, Gated
from conftest import require_torch
from gated_support import capture_grads, nearest_float32, sigma_times

U = 2.0 ** -24
EVENTS = 60
TAUS = [0, 3, 40, 1, 12, 0, 33, 5, 31, 2, 8, 0, 17, 26, 4, 0, 39, 1, 6, 32]  # 4 of 20 at tau >= tau_cut = 32
LR, MILESTONE, GAMMA, BETAS, EPS = 1e-2, 25, 0.3, (0.9, 0.999), 1e-8


def f32(x):
    return float(np.float32(x))


def stream(n, seed):
    g = torch.Generator().manual_seed(seed)
    deltas = [torch.randn(n, generator=g) * (0.1 + 0.9 * (k % 3)) for k in range(EVENTS)]
    taus = (TAUS * (EVENTS // len(TAUS) + 1))[:EVENTS]
    return deltas, taus


def torch_lerps_m():
    """Whether the installed torch forms Adam's m as m + w1*(g - m) (torch >= 2) or b1*m + w1*g (1.13)."""
    return "lerp_" in inspect.getsource(importlib.import_module("torch.optim.adam"))


def exact_side(gs, lrs, theta0, m_decay, m_weight, v_decay, v_weight, bc1, bc2, lr_of, eps):
    """One side's trajectory in exact arithmetic (float64) with its own constants; returns theta and the sum of
    |U| over the stream, and the per-step (m, v, U, bc1, bc2, lr) the rounding bound needs."""
    m = np.zeros_like(theta0)
    v = np.zeros_like(theta0)
    th = theta0.copy()
    moved = np.zeros_like(theta0)
    steps = []
    for t, (g, lr) in enumerate(zip(gs, lrs), start=1):
        m_old, v_old = m, v
        m = m_decay * m + m_weight * g
        v = v_decay * v + v_weight * g * g
        b1, b2 = bc1(t), bc2(t)
        r = np.sqrt(v / b2)
        upd = lr_of(lr) * (m / b1) / (r + eps)
        th = th - upd
        moved += np.abs(upd)
        steps.append((g, m_old, v_old, m, v, upd, b1, b2, lr_of(lr), r, th))
    return th, moved, steps


def rounding_bound(steps, m_decay, m_weight, v_decay, v_weight, eps):
    """Term 1 of the module docstring along one side's exact trajectory."""
    e_m = e_v = e_theta = 0.0
    for g, m_old, v_old, m, v, upd, b1, b2, lr, r, th in steps:
        e_m = m_decay * e_m + 3 * U * (np.abs(m_old) + m_weight * np.abs(g))
        e_v = v_decay * e_v + 4 * U * (v_decay * v_old + v_weight * g * g)
        d = r + eps
        with np.errstate(divide="ignore", invalid="ignore"):
            from_v = np.where(r > 0, np.abs(m / b1) * (e_v / b2) / (2 * r * d * d), 0.0)
        e_upd = lr * (e_m / b1 / d + from_v) + 7 * U * np.abs(upd)
        e_theta = e_theta + e_upd + U * (np.abs(th) + np.abs(upd))
    return e_theta


def ulps(a, b):
    """|a - b| in units of the last place of b's float32 value."""
    return np.abs(a - b) / np.spacing(np.abs(b).astype(np.float32)).astype(np.float64)


@pytest.mark.parametrize("impl", ["for-loop", "foreach", "fused"])
def test_gated_torch_adam_equals_fp32_cgad_within_the_derived_bound(impl):
    if impl == "fused":
        require_torch((2, 4), "torch.optim.Adam(fused=True) on the CPU")
    n = 4096
    deltas, taus = stream(n, seed=7)
    init = torch.randn(n, generator=torch.Generator().manual_seed(3))
    ours, theirs = torch.nn.Parameter(init.clone()), torch.nn.Parameter(init.clone())
    flags = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}[impl]
    adam = torch.optim.Adam([ours], lr=LR, betas=BETAS, eps=EPS, **flags)
    gated = Gated(adam, method="cgad", alpha=0.2, tau_cut=32)
    cgad = CGAD([theirs], lr=LR, betas=BETAS, eps=EPS, state="fp32", threads=2)
    schedules = [torch.optim.lr_scheduler.MultiStepLR(o, milestones=[MILESTONE], gamma=GAMMA) for o in (gated, cgad)]
    seen = []
    capture_grads(adam, seen)
    gs, lrs = [], []
    for delta, tau in zip(deltas, taus):
        ours.grad, theirs.grad = delta.clone(), delta.clone()
        lrs.append(gated.param_groups[0]["lr"])
        mine, reference = gated.step(staleness=tau), cgad.step(staleness=tau)
        assert mine.applied and reference.applied and mine.tau_effective == reference.tau_effective == tau
        assert mine.sigma == reference.sigma and (mine.sigma == 0) == (tau >= 32)
        g = sigma_times(delta, mine.sigma)
        assert np.array_equal(seen[-1][0].numpy().view(np.int32), g.numpy().view(np.int32)), "Adam saw another g"
        gs.append(g.double().numpy())
        for s in schedules:
            s.step()
    assert gated.param_groups[0]["lr"] == cgad.param_groups[0]["lr"] == LR * GAMMA
    assert len(seen) == EVENTS
    # cgad rounds each decimal (repr) once to float32; f32 below rounds the double: the same floats for these.
    for x in (LR, LR * GAMMA, EPS, *BETAS):
        assert nearest_float32(repr(x)) == np.float32(x)

    theta0 = init.double().numpy()
    b1f, b2f, epsf = f32(BETAS[0]), f32(BETAS[1]), f32(EPS)
    w1, w2 = f32(1 - BETAS[0]), f32(1 - BETAS[1])
    torch_m_decay = 1 - w1 if torch_lerps_m() else b1f
    torch_side = dict(m_decay=torch_m_decay, m_weight=w1, v_decay=b2f, v_weight=w2, eps=epsf)
    # cgad's 1 - b is the float nearest 1 - (the decimal), torch's the double 1 - b rounded to float: the same here.
    for b, w in zip(BETAS, (w1, w2)):
        assert nearest_float32(str(1 - Fraction(repr(b)))) == np.float32(w)
    cgad_side = dict(m_decay=b1f, m_weight=w1, v_decay=b2f, v_weight=w2, eps=epsf)
    th_t, moved_t, steps_t = exact_side(gs, lrs, theta0, bc1=lambda t: 1 - BETAS[0] ** t,
                                        bc2=lambda t: 1 - BETAS[1] ** t, lr_of=lambda lr: lr, **torch_side)
    th_c, moved_c, steps_c = exact_side(gs, lrs, theta0, bc1=lambda t: 1 - BETAS[0] ** t, bc2=lambda t: 1 - BETAS[1] ** t,
                                        lr_of=f32, **cgad_side)
    constants = np.abs(th_t - th_c)
    rounding = (1 + 2.0 ** -16) * (rounding_bound(steps_t, **torch_side) + rounding_bound(steps_c, **cgad_side))
    evaluation = 2.0 ** -40 * (np.abs(th_t) + np.maximum(moved_t, moved_c))
    bound = constants + rounding + evaluation

    a, b = ours.detach().double().numpy(), theirs.detach().double().numpy()
    diff = np.abs(a - b)
    worst = int(np.argmax(diff / bound))
    assert np.all(diff <= bound), (
        f"element {worst}: gated {float(a[worst]).hex()} cgad {float(b[worst]).hex()}, |diff| = "
        f"{float(diff[worst]).hex()} > bound {float(bound[worst]).hex()} (constants {constants[worst]:.3e}, "
        f"rounding {rounding[worst]:.3e})")
    err = ulps(a, b)
    at = int(np.argmax(err))
    rel = diff / (np.abs(b) + np.maximum(moved_t, moved_c))
    print(f"\n{impl}: |theta_gated - theta_cgad| in ulps of theta_cgad: max {err.max():.0f} at element {at} "
          f"(gated {float(a[at]).hex()}, cgad {float(b[at]).hex()}; there the constants' term is "
          f"{ulps(b + constants, b)[at]:.0f} ulps and the bound {ulps(b + bound, b)[at]:.0f}), "
          f"rms {np.sqrt(np.mean(err ** 2)):.2f}; "
          f"max |diff| / (|theta| + sum |U|) = {rel.max():.2e} (u = {U:.2e}); largest diff/bound "
          f"{float(np.max(diff / bound)):.3f} at element {worst}")
