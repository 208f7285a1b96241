"""opt.metrics() (docs/python.md, "Metrics"): plain Python numbers for a logger, read from what the optimizer
kept -- the last report's σ and effective staleness, the given τ, the step counters, ‖Δ‖ of the last step's
pseudo-gradients, and the trap figures while watched -- on cgad.torch's optimizers and on Gated."""
import math

import pytest
import torch

from cgad.torch import CGAD, PACGAD, Adam, Gated, Nesterov


def params(sizes=(300, 17), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(n, generator=g)) for n in sizes]


def feed(ps, seed):
    g = torch.Generator().manual_seed(seed)
    for p in ps:
        p.grad = torch.randn(p.shape, generator=g) * 0.1


# torch's float32 norm of n elements against the exact one: within n·u relative (u = 2^-24, a recursive sum's
# bound; torch's cascade sums do better), n < 2^9 here.
NORM_TOLERANCE = 2 ** 9 * 2 ** -24


def norm(tensors):
    """The L2 norm in float64 (math.fsum of exact squares of float32 values: correctly rounded sums)."""
    return math.sqrt(math.fsum(float(x) ** 2 for t in tensors for x in t.double().reshape(-1)))


def plain(metrics):
    """Every value a Python int or float (a logger's scalar), never a tensor or a NumPy number."""
    return all(type(v) in (int, float) for v in metrics.values())


@pytest.mark.parametrize("make", [lambda ps: CGAD(ps, tau_cut=8), lambda ps: Gated(Adam(ps), tau_cut=8)],
                         ids=["CGAD", "Gated"])
def test_metrics_follow_the_steps(make):
    ps = params()
    opt = make(ps)
    first = opt.metrics()
    assert plain(first) and first["steps"] == 0 and "tau" not in first  # no step yet: counts only
    feed(ps, 0)
    opt.step(staleness=2)
    assert "delta_norm" not in opt.metrics() and opt.metrics()["tau"] == 2  # ‖Δ‖ is opt-in: it reads Δ once more
    opt.watch_delta_norm()
    feed(ps, 1)
    deltas = [p.grad.clone() for p in ps]
    report = opt.step(staleness=3)
    m = opt.metrics()
    assert plain(m)
    assert (m["tau"], m["tau_effective"], m["last_applied"]) == (3, 3, 1)
    assert m["sigma"] == report.sigma  # the report's own float, not recomputed
    assert m["delta_norm"] == pytest.approx(norm(deltas), rel=NORM_TOLERANCE)
    feed(ps, 2)
    opt.step(staleness=8)  # tau_cut: the gate is 0
    ps[1].grad[4] = float("nan")
    opt.step(staleness=1)  # refused, nothing changed
    m = opt.metrics()
    assert (m["steps"], m["applied"], m["zero_gate"], m["nonfinite_gradient"], m["no_gradient"]) == (4, 2, 1, 1, 0)
    assert (m["tau"], m["last_applied"], m["sigma"]) == (1, 0, opt.last_report.sigma)
    assert math.isnan(m["delta_norm"])
    opt.zero_grad(set_to_none=True)
    opt.step(staleness=2)
    m = opt.metrics()
    assert (m["no_gradient"], m["delta_norm"], m["last_applied"]) == (1, 0.0, 0)


def test_pa_cgad_metrics_tell_the_given_staleness_from_the_effective_one():
    ps = params()
    opt = PACGAD([{"params": [p]} for p in ps], fragments="groups", tau_cut=8)
    opt.watch_delta_norm()
    for r in range(3):
        feed(ps, r)
        opt.step(staleness=0, fragment=r % 2)
    m = opt.metrics()
    # fragment 0 synced in rounds 0 and 2: one round missed, so the gate saw τ = max(0, 1) = 1.
    assert (m["tau"], m["tau_effective"]) == (0, 1) == (0, opt.last_report.tau_effective)
    assert m["delta_norm"] == pytest.approx(norm([ps[0].grad]), rel=NORM_TOLERANCE)  # the stepped fragment's Δ alone


def test_trap_figures_while_watched():
    ps = params(sizes=(4096, 300))
    opt = CGAD(ps, state="q8", min_q8_size=0)
    feed(ps, 0)
    opt.step(staleness=0)
    assert not any(k.startswith("trap_") for k in opt.metrics())  # watching is opt-in
    opt.watch_traps()
    feed(ps, 1)
    opt.step(staleness=0)
    m, stats = opt.metrics(), opt.trap_stats()
    assert plain(m)
    sizes = [p.numel() for p in ps]
    expected = sum(stats[i]["last"]["v_zero_fraction"] * n for i, n in enumerate(sizes)) / sum(sizes)
    assert m["trap_v_zero_fraction"] == pytest.approx(expected, rel=1e-15)
    assert m["trap_max_step_over_lr"] == max(s["since_start"]["max_step_over_lr"] for s in stats.values())
    assert 0 < m["trap_max_step_over_lr"]


def test_staleness_blind_optimizers_report_too():
    ps = params()
    opt = Nesterov(ps)
    feed(ps, 0)
    opt.step()
    m = opt.metrics()
    assert plain(m) and (m["tau"], m["sigma"], m["applied"]) == (0, 1.0, 1)
