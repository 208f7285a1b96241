"""cgad.torch.Gated's own behaviour (docs/python.md, "CGAD over the optimizer you already run"; the gate and the
step rules of docs/design.md §3): its sigma is the fast path's float; over cgad.torch's own Adam it is cgad's
CGAD, Adam-Decay and PA-CGAD bit for bit, and over its Nesterov cgad's SDM; g is sigma*delta rounded once in the
gradient's dtype; the zero gate, NaN/Inf and overflow refusal, counters, reports, state_dict, copies, torch's
optimizer protocol, and bad input. test_torch_gated_peers.py runs it over bitsandbytes, torchao and torch's three
Adam implementations; test_torch_gated_bound.py against CGAD over torch's Adam."""
import copy
import io
import pickle
from fractions import Fraction

import numpy as np
import pytest
import torch

import cgad
from cgad import _cgad
from cgad.torch import CGAD, PACGAD, SDM, Adam, AdamDecay, Gated, Nesterov
from cgad.torch._pseudo_gradient import scaled
from conftest import denotes, require_torch
from gated_support import capture_grads, param_bits, same_bits, state_bits

TAUS = [0, 1, 2, 5, 9, 16, 31, 32, 33, 40]


def params(seed, shapes=((7,), (3, 5))):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g)) for s in shapes]


def grads(seed, ps, scale=0.1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(p.shape, generator=g, dtype=p.dtype) * scale for p in ps]


def give(ps, ds):
    for p, d in zip(ps, ds):
        p.grad = d.clone()


# --- sigma --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method, reference, alpha, tau_cut", [
    ("cgad", CGAD, 0.2, 32), ("cgad", CGAD, "0.05", "16"), ("adam-decay", AdamDecay, "0.2", 32),
    ("sdm", SDM, 0.2, 32)])
def test_sigma_is_the_float_the_fast_path_scales_by(method, reference, alpha, tau_cut):
    """The wrapper's sigma is the fast path's own (cgad.torch's report of the same event), from the user's decimal
    alpha, whether it is given as a number or as text."""
    ours, theirs = params(0), params(0)
    # cgad.torch takes alpha as a number only; the float of "0.05" has the same shortest decimal.
    gate = {"alpha": float(alpha), "tau_cut": int(tau_cut)} if reference is CGAD else \
        {"alpha": float(alpha)} if reference is AdamDecay else {}
    fast = reference(theirs, **gate)
    gated = Gated(torch.optim.SGD(ours, lr=0.0), method=method, alpha=alpha, tau_cut=tau_cut)
    for tau in TAUS:
        give(ours, grads(tau, ours))
        give(theirs, grads(tau, theirs))
        mine, its = gated.step(staleness=tau), fast.step(staleness=tau)
        assert mine.sigma == its.sigma and mine.tau_effective == its.tau_effective == tau, (tau, mine, its)
        assert np.float32(mine.sigma) == mine.sigma  # a float32 value
    if method == "sdm":
        assert gated.last_report.sigma == float(np.float32(1 / 41))


# The configurations a bound schedule is checked over: each gate, α and τ_cut of several magnitudes, both zero-gate
# policies, PA-CGAD's fragments.
SCHEDULES = [
    {"optimizer": "cgad", "alpha": "0.2", "tau_cut": 32},
    {"optimizer": "cgad", "alpha": "0.05", "tau_cut": 7, "on_zero_gate": "skip"},
    {"optimizer": "pa-cgad", "alpha": "1.3", "tau_cut": 5, "fragments": 3, "on_zero_gate": "skip"},
    {"optimizer": "adam-decay", "alpha": "3.7", "tau_cut": 32},
    {"optimizer": "sdm"},
    {"optimizer": "nesterov"},
]


@pytest.mark.parametrize("spec", SCHEDULES, ids=lambda s: s["optimizer"])
def test_the_bound_schedule_is_the_planners_sigma_and_zero_gate_bit_for_bit(spec):
    """_cgad.Schedule, built once from a configuration, gives the bits of σ(τ), the zero-gate decision and the
    outcome of an event (NaN/Inf first, then the zero gate's drop, then overflow) that the fast path's step itself
    reports: a CPU stepper's preview of the same event (planner, schedule and report of the step,
    step_planner.cpp) over a τ range past τ_cut and far beyond it, under the policy given and under "skip" (which
    names a zero gate in the report). The schedule survives a pickle with its configuration."""
    schedule = _cgad.Schedule(spec)
    copied = pickle.loads(pickle.dumps(schedule))
    skipping = dict(spec, on_zero_gate="skip")
    fragments = spec.get("fragments", 1)
    grad = torch.ones(fragments, dtype=torch.float32)  # one element per fragment, as the schedule's own layout
    steppers = {name: _cgad.CpuStepper(s, [fragments], _cgad.ThreadPool(1)) for name, s in
                (("given", spec), ("skip", skipping))}
    for tau in list(range(0, 70)) + [10**3, 2**40, 2**62, 2**63 - 1]:
        given = steppers["given"].preview([grad.data_ptr()], tau, 0)
        skipped = steppers["skip"].preview([grad.data_ptr()], tau, 0)
        sigma = schedule.sigma(tau)
        assert np.float32(sigma).view(np.uint32) == np.float32(given["sigma"]).view(np.uint32), (tau, sigma, given)
        assert copied.sigma(tau) == sigma
        zero = skipped["reason"] == "zero-gate"
        assert schedule.zero_gate(tau) == zero == copied.zero_gate(tau), (tau, skipped)
        # The order of the refusals and the zero gate's drop: the step's report of a finite, a NaN and a huge Δ.
        for value in (1.0, float("nan"), float(np.finfo(np.float32).max)):
            delta = torch.full((fragments,), value, dtype=torch.float32)
            report = steppers["given"].preview([delta.data_ptr()], tau, 0)
            overflowing = value == value and float(np.float32(sigma)) * value >= _cgad.Schedule.refused_magnitude
            assert schedule.outcome(tau, value != value, overflowing) == report["reason"], (tau, value, report)
    with pytest.raises(cgad.InputError, match="staleness"):
        schedule.sigma(-1)


def test_the_schedule_s_refusal_magnitude_is_the_step_s_overflow_rule():
    """Gated refuses |σ·Δ| >= Schedule.refused_magnitude (_pseudo_gradient.py): the fast path's step refuses a Δ of
    exactly that magnitude at σ = 1 and takes the float just below it."""
    limit = _cgad.Schedule.refused_magnitude
    stepper = _cgad.CpuStepper({"optimizer": "cgad"}, [1], _cgad.ThreadPool(1))
    for value, reason in ((limit, "overflowing-gradient"), (np.nextafter(np.float32(limit), np.float32(0)), "none")):
        grad = torch.tensor([float(value)], dtype=torch.float32)
        assert stepper.preview([grad.data_ptr()], 0, 0)["reason"] == reason, value
    assert _cgad.Schedule({"optimizer": "sdm"}).refused_magnitude == limit


# --- over cgad.torch's own optimizers: cgad's methods bit for bit ---------------------------------------------------

@pytest.mark.parametrize("state", ["fp32", "bf16", "q8"])
@pytest.mark.parametrize("method, reference", [("cgad", CGAD), ("adam-decay", AdamDecay)])
def test_over_cgad_adam_it_is_cgad_bit_for_bit(state, method, reference):
    """cgad.torch.Adam fed g = fl32(sigma*delta) steps exactly as CGAD (AdamDecay) on delta: both run the fast
    path's element update, whose first operation is that product (docs/design.md §5)."""
    ours, theirs = params(1, ((300,), (20, 30))), params(1, ((300,), (20, 30)))
    gated = Gated(Adam(ours, lr=1e-2, state=state), method=method, on_zero_gate="apply")
    fast = reference(theirs, lr=1e-2, state=state)
    for event, tau in enumerate(TAUS + TAUS[::-1]):
        ds = grads(10 + event, ours)
        give(ours, ds)
        give(theirs, ds)
        mine, its = gated.step(staleness=tau), fast.step(staleness=tau)
        assert (mine.applied, mine.reason, mine.sigma) == (its.applied, its.reason, its.sigma)
        assert param_bits(gated) == param_bits(fast), f"event {event}"
        assert state_bits(gated) == state_bits(fast), f"event {event}"


def test_sdm_over_cgad_nesterov_is_cgad_sdm_bit_for_bit():
    ours, theirs = params(2), params(2)
    gated, fast = Gated(Nesterov(ours, lr=0.7), method="sdm"), SDM(theirs, lr=0.7)
    for event, tau in enumerate(TAUS):
        ds = grads(20 + event, ours)
        give(ours, ds)
        give(theirs, ds)
        assert gated.step(staleness=tau).sigma == fast.step(staleness=tau).sigma
        assert param_bits(gated) == param_bits(fast) and state_bits(gated) == state_bits(fast)


@pytest.mark.parametrize("on_zero_gate", ["apply", "skip"])
def test_pa_cgad_over_groups_is_cgad_pacgad_bit_for_bit(on_zero_gate):
    """fragments="groups": each param group a fragment gated by sigma(max(tau, age)) (docs/design.md §3), with
    PACGAD's rounds -- step(fragment=f) ends one, end_round=False leaves it open, advance_round() ends it -- over
    cgad.torch.Adam equals cgad.torch.PACGAD(fragments="groups"): reports, ages, parameters and state. tau_cut = 4
    with 3 fragments, so a fragment left alone reaches a zero gate by its age alone."""
    shapes = ((40,), (8, 5), (13,))
    ours, theirs = params(3, shapes), params(3, shapes)
    groups = lambda ps: [{"params": [p]} for p in ps]  # noqa: E731
    gated = Gated(Adam(groups(ours), lr=1e-2), fragments="groups", tau_cut=4, on_zero_gate=on_zero_gate)
    fast = PACGAD(groups(theirs), lr=1e-2, fragments="groups", tau_cut=4, on_zero_gate=on_zero_gate)
    schedule = [(0, 0, True), (1, 0, True), (2, 1, True), (0, 0, False), (1, 2, True), (2, 0, True),
                (None, None, None), (None, None, None), (None, None, None), (0, 1, True), (1, 0, True),
                (2, 3, True), (2, 0, True), (0, 5, True)]
    for event, (f, tau, end) in enumerate(schedule):
        if f is None:
            gated.advance_round()
            fast.advance_round()
            continue
        ds = grads(30 + event, ours)
        give(ours, ds)  # every group has a .grad; the event reads fragment f's only
        give(theirs, ds)
        mine = gated.step(staleness=tau, fragment=f, end_round=end)
        its = fast.step(staleness=tau, fragment=f, end_round=end)
        assert (mine.applied, mine.reason, mine.sigma, mine.tau_effective) == \
            (its.applied, its.reason, its.sigma, its.tau_effective), f"event {event}: {mine} != {its}"
        assert [gated.counters(g)["age"] for g in range(3)] == [fast.counters(g)["age"] for g in range(3)]
        assert param_bits(gated) == param_bits(fast) and state_bits(gated) == state_bits(fast), f"event {event}"
        # The stepped fragment's .grad holds g = fl(sigma*delta) (scaled in place); every other one is put back.
        assert all(same_bits(p.grad, scaled(d, mine.sigma) if g == f and mine.applied else d)
                   for g, (p, d) in enumerate(zip(ours, ds))), "every other .grad is put back"
    assert gated.counters["zero-gate"] == fast.counters["zero-gate"] >= 1


# --- g = sigma * delta, rounded once --------------------------------------------------------------------------------

def exact_product_rounds_to(g, delta, sigma, dtype):
    """Whether every element of g is the correctly rounded (to nearest even) value of the exact sigma*delta."""
    for x, d in zip(g.float().tolist(), delta.float().tolist()):
        exact = Fraction(d) * Fraction(sigma)
        negative = np.copysign(1.0, d) * np.copysign(1.0, sigma) < 0  # the sign of a zero product too
        text = f"{'-' if negative else ''}{abs(exact.numerator)}/{exact.denominator}"
        if not denotes(text, x, dtype):
            return False
    return True


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_narrow_gradients_are_scaled_with_one_rounding(dtype):
    """torch forms a bf16 (fp16) tensor times a scalar in float32 and rounds again; where that float32 lies half-way
    between two narrow values, the second rounding goes to even and can miss the exact product's nearest value.
    scaled() rounds once: checked in exact rational arithmetic on every such case found among 2^20 random
    (sigma, delta) pairs -- there must be some, or this test shows nothing -- and on 2000 others."""
    g = torch.Generator().manual_seed(5)
    n = 1 << 20
    bits = torch.randint(-(1 << 15), 1 << 15, (n,), generator=g, dtype=torch.int32).to(torch.int16)
    delta = bits.view(dtype)
    delta = torch.where(torch.isfinite(delta), delta, torch.ones_like(delta))
    sigmas = torch.rand(n, generator=g, dtype=torch.float32)
    naive = (delta.float() * sigmas).to(dtype)
    # scaled() is elementwise in sigma too (n is below its chunk), which finds the differing pairs at once.
    ours = scaled(delta, sigmas.double())
    differing = torch.nonzero(ours.view(torch.int16) != naive.view(torch.int16)).flatten().tolist()
    for i in differing + list(range(2000)):
        s = float(sigmas[i])
        one = scaled(delta[i:i + 1], s)
        assert same_bits(one, ours[i:i + 1])
        assert exact_product_rounds_to(one, delta[i:i + 1], s, dtype), \
            f"element {i}: {float(delta[i]).hex()} * {s.hex()} -> {float(one[0]).hex()}, not the nearest {dtype}"
    assert differing, "no double-rounding case among the random pairs: the test would show nothing"
    print(f"\n{dtype}: {len(differing)} pairs where torch's float32-then-{dtype} product misses the nearest value")


def test_float32_and_float64_gradients_are_one_ieee_product():
    g = torch.Generator().manual_seed(6)
    for dtype in (torch.float32, torch.float64):
        delta = torch.randn(4096, generator=g, dtype=dtype) * 10.0 ** torch.randint(-30, 30, (4096,), generator=g)
        s = float(np.float32(cgad.sigma(7)))
        expected = delta.numpy() * np.array(s, dtype=delta.numpy().dtype)
        assert np.array_equal(scaled(delta, s).numpy(), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_grad_is_scaled_in_place_and_is_what_the_wrapped_step_reads(dtype):
    """.grad is scaled in place (no second pseudo-gradient): after an applied event each .grad is the tensor given,
    holding g = scaled(delta) -- a non-contiguous one (a transposed view) and one tensor that is two parameters'
    .grad (scaled once) included -- and the wrapped step read exactly that g; at tau = 0 (sigma = 1) it is delta."""
    ps = [torch.nn.Parameter(torch.zeros(s, dtype=dtype)) for s in ((5, 3), (6,), (6,))]
    seen, sgd = [], torch.optim.SGD(ps, lr=1.0)
    gated = Gated(sgd)
    capture_grads(sgd, seen)
    for event, tau in enumerate([3, 0, 9]):
        gen = torch.Generator().manual_seed(50 + event)
        ds = [torch.randn(3, 5, generator=gen).to(dtype).t(), torch.randn(6, generator=gen).to(dtype)]
        given = [ds[0].t().clone().t(), ds[1].clone()]
        ps[0].grad, ps[1].grad, ps[2].grad = given[0], given[1], given[1]
        assert not ps[0].grad.is_contiguous()
        report = gated.step(staleness=tau)
        assert report.applied and (report.sigma == 1.0) == (tau == 0)
        gs = [scaled(d, report.sigma) for d in ds]
        assert all(p.grad is g for p, g in zip(ps, [given[0], given[1], given[1]]))  # the tensors given
        assert same_bits(ps[0].grad, gs[0]) and same_bits(ps[1].grad, gs[1]) and same_bits(ps[2].grad, gs[1])
        assert all(same_bits(got, g) for got, g in zip(seen[-1], [gs[0], gs[1], gs[1]]))


# --- the zero gate, refusals, counters ------------------------------------------------------------------------------

def test_apply_runs_the_wrapped_step_on_zero_gradients_at_a_zero_gate():
    ps = params(7)
    adam = torch.optim.Adam(ps, lr=1e-2)
    gated = Gated(adam, on_zero_gate="apply")
    seen = []
    capture_grads(adam, seen)
    give(ps, grads(70, ps))
    gated.step(staleness=0)
    ds = grads(71, ps)
    give(ps, ds)
    report = gated.step(staleness=32)
    assert (report.applied, report.reason, report.sigma, report.tau_effective) == (True, "zero-gate", 0.0, 32)
    assert len(seen) == 2 and all(same_bits(got, d * 0.0) for got, d in zip(seen[-1], ds))  # 0*delta: signed zeros
    assert all(float(adam.state[p]["step"]) == 2 for p in ps)
    assert gated.counters["zero-gate"] == 1 and gated.counters["applied"] == 1


def two_group_adam(seed):
    ps = params(seed, ((6,), (4, 4), (9,)))
    adam = torch.optim.Adam([{"params": ps[:1]}, {"params": ps[1:], "lr": 3e-3}], lr=1e-2)
    return ps, adam


@pytest.mark.parametrize("poison, tau, on_zero_gate, reason", [
    (float("nan"), 3, "apply", "nonfinite-gradient"), (float("-inf"), 3, "apply", "nonfinite-gradient"),
    (2.0 ** 64, 0, "apply", "overflowing-gradient"), (float("nan"), 32, "skip", "nonfinite-gradient")])
def test_a_refused_event_changes_nothing_and_says_where(poison, tau, on_zero_gate, reason):
    """NaN/Inf first -- also where the zero gate would drop the event -- then |sigma*delta| >= 2^63 (the overflow
    rule), in the last group: nothing of any group changes, the wrapped step is not called, the caller's .grad
    keeps its bits, and the report names the parameter (state_dict order) and the element."""
    ps, adam = two_group_adam(8)
    gated = Gated(adam, on_zero_gate=on_zero_gate)
    seen = []
    capture_grads(adam, seen)
    give(ps, grads(80, ps))
    gated.step(staleness=1)
    before = (param_bits(gated), state_bits(gated), len(seen))
    ds = grads(81, ps)
    ds[2][4] = poison
    give(ps, ds)
    given = [p.grad for p in ps]
    report = gated.step(staleness=tau)
    assert (report.applied, report.reason, report.nonfinite_param, report.nonfinite_index) == (False, reason, 2, 4)
    assert (param_bits(gated), state_bits(gated), len(seen)) == before
    assert all(p.grad is g and same_bits(g, d) for p, g, d in zip(ps, given, ds))
    assert gated.counters[reason] == 1 and gated.counters["applied"] == 1


def test_sigma_zero_never_overflows_and_on_nonfinite_warns_or_raises():
    ps, adam = two_group_adam(9)
    gated = Gated(adam, on_zero_gate="apply")
    ds = grads(90, ps)
    ds[0][0] = 2.0 ** 100  # sigma = 0 at tau >= tau_cut: g = 0, applied (element_update.hpp refuses_event)
    give(ps, ds)
    assert gated.step(staleness=40).applied
    ds[0][0] = float("nan")
    give(ps, ds)
    gated.on_nonfinite = "warn"
    with pytest.warns(RuntimeWarning, match="parameter 0 element 0"):
        gated.step(staleness=0)
    gated.on_nonfinite = "raise"
    before = state_bits(gated)
    with pytest.raises(cgad.InputError, match="nonfinite-gradient at parameter 0 element 0"):
        gated.step(staleness=0)
    assert state_bits(gated) == before and gated.counters["nonfinite-gradient"] == 2


def test_no_gradient_anywhere_is_reported_and_the_wrapped_step_not_called():
    ps = params(10)
    adam = torch.optim.Adam(ps)
    gated, seen = Gated(adam), []
    capture_grads(adam, seen)
    report = gated.step(staleness=0)
    assert (report.applied, report.reason) == (False, "no-gradient") and not seen
    assert gated.counters["no-gradient"] == 1


# --- torch's optimizer protocol -------------------------------------------------------------------------------------

def test_bare_step_closure_scheduler_zero_grad_and_add_param_group():
    ps = params(11)
    gated = Gated(torch.optim.Adam(ps[:1], lr=1e-2))
    gated.add_param_group({"params": ps[1:], "lr": 5e-3})
    assert gated.param_groups is gated.optimizer.param_groups and gated.state is gated.optimizer.state
    schedule = torch.optim.lr_scheduler.StepLR(gated, step_size=1, gamma=0.5)
    give(ps, grads(110, ps))
    gated.staleness = 5  # what torchft's bare step() uses
    report = gated.step()
    assert report.tau_effective == 5 and report.sigma == gated._config.sigma(5)

    def closure():
        give(ps, grads(111, ps))
        return torch.tensor(3.0)
    assert float(gated.step(closure, staleness=2)) == 3.0 and gated.last_report.tau_effective == 2
    schedule.step()
    assert [g["lr"] for g in gated.optimizer.param_groups] == [5e-3, 2.5e-3]
    gated.zero_grad(set_to_none=True)
    assert all(p.grad is None for p in ps)
    with pytest.raises(cgad.InputError, match="staleness must be an integer"):
        gated.step(staleness=2.0)


def test_step_hooks_fire_once_per_step_and_a_pre_hook_may_supply_the_staleness():
    """torch >= 2's step hooks: the wrapper's fire on each of its steps, dropped ones included, and a pre-hook may
    return the staleness (torchft calls step() bare); the wrapped optimizer's fire only when its step runs; a
    global hook sees both optimizers' steps, the wrapper's around the wrapped one's."""
    require_torch((2, 0), "torch.optim step hooks")
    from torch.optim.optimizer import register_optimizer_step_pre_hook
    ps = params(12)
    adam = torch.optim.Adam(ps)
    gated = Gated(adam, on_zero_gate="skip")
    calls = []
    gated.register_step_pre_hook(lambda o, a, k: (a, dict(k, staleness=7)))
    gated.register_step_post_hook(lambda o, a, k: calls.append(("post", k.get("staleness"))))
    adam.register_step_pre_hook(lambda o, a, k: calls.append(("wrapped", None)))
    handle = register_optimizer_step_pre_hook(lambda o, a, k: calls.append(("global", type(o).__name__)))
    try:
        give(ps, grads(120, ps))
        assert gated.step().tau_effective == 7
        gated.register_step_pre_hook(lambda o, a, k: (a, dict(k, staleness=32)))  # runs after the first: dropped
        assert gated.step().reason == "zero-gate"
    finally:
        handle.remove()
    assert calls == [("global", "Gated"), ("global", "Adam"), ("wrapped", None), ("post", 7),
                     ("global", "Gated"), ("post", 32)]


def test_state_dict_hooks_run_although_gated_overrides_the_methods():
    require_torch((2, 0), "torch.optim state_dict hooks")
    ps = params(13)
    gated = Gated(torch.optim.Adam(ps))
    calls = []
    gated.register_state_dict_pre_hook(lambda o: calls.append("pre"))
    gated.register_state_dict_post_hook(lambda o, sd: calls.append("post"))
    gated.register_load_state_dict_pre_hook(lambda o, sd: calls.append("load-pre"))
    gated.register_load_state_dict_post_hook(lambda o: calls.append("load-post"))
    gated.load_state_dict(gated.state_dict())
    assert calls == ["pre", "post", "load-pre", "load-post"]


# --- state_dict and copies ------------------------------------------------------------------------------------------

def run_pa(seed, gated, ps, events):
    for event, (f, tau) in enumerate(events):
        give(ps, grads(seed + event, ps))
        gated.step(staleness=tau, fragment=f)


def pa_gated(seed):
    ps = params(seed, ((5,), (3, 4), (6,)))
    adam = torch.optim.Adam([{"params": [p]} for p in ps], lr=1e-2)
    return ps, Gated(adam, fragments="groups", tau_cut=8, alpha="0.3", on_zero_gate="skip")


def test_state_dict_round_trip_resumes_bit_for_bit():
    """Through torch.save/torch.load into a new Gated over a new Adam over new parameters (of the same values):
    the wrapped optimizer's state, the gate's settings (alpha as the user's decimal), the counts and PA-CGAD's
    round and ages; both then step to the same bits."""
    ps, gated = pa_gated(14)
    run_pa(140, gated, ps, [(0, 0), (1, 2), (2, 9), (0, 1), (1, 0)])
    buffer = io.BytesIO()
    torch.save(gated.state_dict(), buffer)
    qs = [torch.nn.Parameter(p.detach().clone()) for p in ps]
    other = Gated(torch.optim.Adam([{"params": [q]} for q in qs], lr=1.0), fragments="groups", tau_cut=30)
    buffer.seek(0)
    other.load_state_dict(torch.load(buffer))
    assert (other.alpha, other.tau_cut, other.on_zero_gate) == ("0.3", 8, "skip")
    assert other.counters == gated.counters and other.state_dict()["param_groups"] == gated.state_dict()[
        "param_groups"]
    assert [other.counters(g) for g in range(3)] == [gated.counters(g) for g in range(3)]
    for events in ([(2, 1), (2, 0)], [(0, 3), (1, 1), (2, 40)]):
        run_pa(150, gated, ps, events)
        run_pa(150, other, qs, events)
        assert param_bits(other) == param_bits(gated) and state_bits(other) == state_bits(gated)


def test_deepcopy_and_pickle_give_an_optimizer_that_steps_to_the_same_bits():
    ps, gated = pa_gated(15)
    torch.optim.lr_scheduler.StepLR(gated, step_size=100)  # wraps gated.step, which pickle cannot take
    run_pa(160, gated, ps, [(0, 0), (1, 3)])
    for make in (copy.deepcopy, lambda x: pickle.loads(pickle.dumps(x))):
        ps2, copied = make((ps, gated))
        assert copied.optimizer is not gated.optimizer and copied.param_groups[0]["params"][0] is ps2[0]
        before = param_bits(gated)
        run_pa(170, copied, ps2, [(2, 0), (0, 1)])
        assert param_bits(gated) == before, "stepping the copy changed the original"
        run_pa(170, gated, ps, [(2, 0), (0, 1)])
        assert param_bits(copied) == param_bits(gated) and state_bits(copied) == state_bits(gated)
        assert copied.counters == gated.counters


def test_the_wrapped_optimizer_s_own_state_dict_is_a_warm_start():
    ps = params(16)
    adam = torch.optim.Adam(ps, lr=1e-2)
    give(ps, grads(160, ps))
    adam.step()
    gated = Gated(torch.optim.Adam([torch.nn.Parameter(p.detach().clone()) for p in ps], lr=1e-2))
    gated.load_state_dict(adam.state_dict())
    assert state_bits(gated) == state_bits(adam) and gated.counters["applied"] == 0


@pytest.mark.parametrize("change, message", [
    (lambda sd: [g["cgad_gated"].update(method="adam-decay") for g in sd["param_groups"]], "method='adam-decay'"),
    (lambda sd: sd["param_groups"][0]["cgad_gated"].update(round=7), "differs from group 0's in round"),
    (lambda sd: sd["param_groups"][1].pop("cgad_gated"), "only some param groups"),
    (lambda sd: [g["cgad_gated"].update(fragments=None) for g in sd["param_groups"]], "fragments=None"),
    (lambda sd: [g["cgad_gated"]["counts"].update(applied=-1) for g in sd["param_groups"]], "applied"),
    (lambda sd: sd["param_groups"][2]["cgad_gated"].update(last_sync=99), "last_sync"),
    (lambda sd: [g["cgad_gated"].update(alpha="-1") for g in sd["param_groups"]], "alpha"),
])
def test_a_mismatched_state_dict_is_refused_changing_nothing(change, message):
    ps, gated = pa_gated(17)
    run_pa(180, gated, ps, [(0, 0), (1, 3)])
    saved = copy.deepcopy(gated.state_dict())
    change(saved)
    before = (gated.state_dict()["param_groups"], state_bits(gated), dict(gated.counters))
    with pytest.raises(cgad.InputError, match=message):
        gated.load_state_dict(saved)
    assert (gated.state_dict()["param_groups"], state_bits(gated), dict(gated.counters)) == before


# --- bad input ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    ({"method": "adam"}, "method must be one of cgad, adam-decay, sdm"),
    ({"alpha": -0.1}, "alpha must be finite and >= 0"),
    ({"alpha": "x"}, "alpha"),
    ({"tau_cut": 0}, "tau_cut must be an integer in \\[1, "),
    ({"tau_cut": 2.5}, "tau_cut must be an integer"),
    ({"on_zero_gate": "drop"}, "on_zero_gate must be one of apply, skip"),
    ({"fragments": 3}, "fragments must be None or 'groups'"),
    ({"method": "sdm", "fragments": "groups"}, "fragments='groups' is PA-CGAD"),
    ({"on_nonfinite": "ignore"}, "on_nonfinite must be one of"),
])
def test_bad_arguments_are_refused_in_one_line(kwargs, message):
    with pytest.raises(cgad.InputError, match=message) as error:
        Gated(torch.optim.Adam(params(18)), **kwargs)
    assert str(error.value).startswith("Gated: ") and "\n" not in str(error.value)


@pytest.mark.parametrize("make, message", [
    (lambda ps: [torch.optim.Adam(ps)], "must be a torch.optim.Optimizer, got list"),
    (lambda ps: Gated(torch.optim.Adam(ps)), "already a Gated one"),
    (lambda ps: CGAD(ps), "CGAD gates by its own staleness"),
])
def test_what_is_not_an_optimizer_to_gate_is_refused(make, message):
    with pytest.raises(cgad.InputError, match=message) as error:
        Gated(make(params(19)))
    assert "\n" not in str(error.value)


def test_fragments_and_rounds_are_checked():
    ps = params(20, [(2,)] * 5)
    with pytest.raises(cgad.InputError, match="needs tau_cut >= 5"):
        Gated(torch.optim.Adam([{"params": [p]} for p in ps]), fragments="groups", tau_cut=4)
    gated = Gated(torch.optim.Adam(ps), fragments=None)
    with pytest.raises(cgad.InputError, match="fragments='groups' takes fragment="):
        gated.step(fragment=1)
    with pytest.raises(cgad.InputError, match="PA-CGAD"):
        gated.advance_round()
    pa = Gated(torch.optim.Adam([{"params": [p]} for p in ps[:2]]), fragments="groups")
    with pytest.raises(cgad.InputError, match=r"fragment must be a param group's index in \[0, 1\]"):
        pa.step(fragment=2)
    pa.optimizer.add_param_group({"params": ps[2:3]})
    with pytest.raises(cgad.InputError, match="changed outside Gated.add_param_group"):
        pa.step(fragment=0)


def test_unsupported_gradients_are_refused_with_the_reason():
    p = torch.nn.Parameter(torch.zeros(4, dtype=torch.float32))
    gated = Gated(torch.optim.SGD([p], lr=0.1))
    p.grad = torch.zeros(4).to_sparse()
    with pytest.raises(cgad.InputError, match="param group 0 parameter 0: .* not a dense tensor"):
        gated.step()
    c = torch.nn.Parameter(torch.zeros(4, dtype=torch.complex64))
    gated = Gated(torch.optim.SGD([c], lr=0.1))
    c.grad = torch.ones(4, dtype=torch.complex64)
    with pytest.raises(cgad.InputError, match="torch.complex64; float32, float64, bfloat16 and float16"):
        gated.step()
    # Scaled in place: a tensor whose elements share memory is refused before anything is written.
    ps = params(12)
    gated = Gated(torch.optim.SGD(ps, lr=0.1))
    ps[0].grad, ps[1].grad = torch.ones(7), torch.ones(1).expand(3, 5)
    before = param_bits(gated)
    with pytest.raises(cgad.InputError, match=r"parameter 1: the pseudo-gradient's elements share memory"):
        gated.step(staleness=3)
    assert param_bits(gated) == before and same_bits(ps[0].grad, torch.ones(7))
