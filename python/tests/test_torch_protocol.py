"""cgad.torch's optimizers in torch.optim's protocol, as frameworks drive them: lr = 0 (a schedule that reaches 0),
torch's flags passed at their defaults, step(closure) returning the loss, staleness as any integral value, what a
NaN step does (on_nonfinite) and the count of steps by what became of them, the zero-gate reason whether the event
ran or was dropped, and PA-CGAD with one fragment per param group (torchft's module fragments)."""
import re
import warnings

import numpy as np
import pytest
import torch

import cgad
from cgad.torch import CGAD, PACGAD, Adam, AdamDecay, Nesterov, SDM
from conftest import SOURCE_DIR, bits


def params(dtype=torch.float32, sizes=(300, 17, 260), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(n, generator=g).to(dtype)) for n in sizes]


def feed(ps, seed):
    g = torch.Generator().manual_seed(seed)
    for p in ps:
        p.grad = (torch.randn(p.shape, generator=g) * 0.1).to(p.dtype)


def param_bits(ps):
    return [bits(p).tobytes() for p in ps]


def assert_steps_alike(opt, ps, plain, reference, events=2):
    """Steps opt over ps and plain over reference on the same pseudo-gradients; their parameters' bits must agree."""
    for e in range(events):
        feed(ps, e)
        feed(reference, e)
        opt.step()
        plain.step()
    assert param_bits(ps) == param_bits(reference)


def buffers(opt, ps, names):
    return [bits(opt.state_buffer(p, name)).tobytes() for p in ps for name in names]


# --- lr = 0 ---------------------------------------------------------------------------------------------------------

ZERO_LR = [(CGAD, ["m", "v"]), (AdamDecay, ["m", "v"]), (Adam, ["m", "v"]), (Nesterov, ["b"]), (SDM, ["b"])]


@pytest.mark.parametrize("state", ["fp32", "bf16", "q8"])
@pytest.mark.parametrize("cls,names", ZERO_LR, ids=[c.__name__ for c, _ in ZERO_LR])
def test_zero_lr_keeps_the_parameters_bits_and_advances_the_state_as_torch(cls, names, state):
    runs = []
    for lr in (0.0, 1e-2):
        ps = params(torch.bfloat16, seed=3)
        opt = cls(ps, lr=lr, state=state)
        for e, tau in enumerate((0, 2, 40)):
            feed(ps, e)
            assert opt.step(staleness=tau).applied
        runs.append((param_bits(ps), buffers(opt, ps, names), opt.counters()))
    (still, still_state, still_t), (moved, moved_state, moved_t) = runs
    assert still == param_bits(params(torch.bfloat16, seed=3))  # theta did not move, bit for bit
    assert moved != still
    assert still_state == moved_state and still_t == moved_t  # t and the buffers advance as at lr > 0


def test_schedules_that_reach_zero_run():
    ps = params()
    opt = CGAD(ps, lr=1e-2)
    warmup = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: step / 4)  # warmup from lr = 0
    decay = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0, end_factor=0.0, total_iters=3)
    for e in range(6):
        feed(ps, e)
        assert opt.step().applied
        (warmup if e < 3 else decay).step()
    assert opt.param_groups[0]["lr"] == 0.0
    before = param_bits(ps)
    feed(ps, 9)
    assert opt.step().applied and param_bits(ps) == before
    opt.param_groups[0]["lr"] = -1e-3
    with pytest.raises(cgad.InputError, match="lr must be finite and >= 0"):
        opt.step()


# --- torch's flags ----------------------------------------------------------------------------------------------------

FLAGS = ["foreach", "fused", "capturable", "differentiable", "maximize", "amsgrad"]


def test_falsy_torch_flags_are_accepted():
    ps = params()
    opt = CGAD(ps, foreach=None, fused=None, capturable=False, differentiable=False, maximize=False, amsgrad=False)
    reference = params()
    plain = CGAD(reference)
    assert_steps_alike(opt, ps, plain, reference)
    Nesterov(params(), foreach=False, fused=False, maximize=False)


@pytest.mark.parametrize("flag", FLAGS)
def test_truthy_torch_flags_are_refused_with_the_reason(flag):
    with pytest.raises(cgad.InputError, match=f"{flag}=True is not supported \\(.+\\); None or False is taken"):
        CGAD(params(), **{flag: True})
    with pytest.raises(TypeError, match="unexpected keyword argument 'foreachh'"):
        CGAD(params(), foreachh=None)


def refused_flag(flag, group):
    return pytest.raises(cgad.InputError, match=f"^CGAD param group {group}: {flag}=True is not supported \\(.+\\); "
                                                "None or False is taken$")


@pytest.mark.parametrize("flag", FLAGS)
def test_a_truthy_torch_flag_in_a_param_group_is_refused_on_every_path_changing_nothing(flag):
    # torch.optim.Adam honours a group's own amsgrad or maximize: taking the group and ignoring it would be a
    # silent wrong answer, whichever way the flag reached the group.
    with refused_flag(flag, 0):
        CGAD([{"params": params(), flag: True}])
    with pytest.raises(cgad.InputError, match=f"^Nesterov param group 0: {flag}=True is not supported"):
        Nesterov([{"params": params(), flag: True}])

    ps = params()
    opt = CGAD(ps)
    with refused_flag(flag, 1):
        opt.add_param_group({"params": params(sizes=(5,)), flag: True})
    assert len(opt.param_groups) == 1

    opt.param_groups[0][flag] = True  # set by hand before a step
    feed(ps, 1)
    before = param_bits(ps)
    with refused_flag(flag, 0):
        opt.step()
    assert param_bits(ps) == before and opt.counters() == {"t": [0]}
    opt.param_groups[0][flag] = False
    assert opt.step().applied

    saved = opt.state_dict()
    saved["param_groups"][0][flag] = True
    with refused_flag(flag, 0):
        opt.load_state_dict(saved)
    assert flag in opt.param_groups[0] and opt.param_groups[0][flag] is False  # the groups are as they were


def test_falsy_torch_flags_and_a_users_own_keys_in_a_param_group_are_taken():
    falsy = dict(foreach=None, fused=None, capturable=False, differentiable=False, maximize=False, amsgrad=False)
    ps, reference = params(), params()
    opt = CGAD([{"params": ps[:2], "name": "body", **falsy}])
    opt.add_param_group({"params": ps[2:], "name": "head", **falsy})
    plain = CGAD([{"params": reference[:2]}, {"params": reference[2:]}])
    assert_steps_alike(opt, ps, plain, reference)
    assert [g["name"] for g in opt.param_groups] == ["body", "head"]
    opt.load_state_dict(opt.state_dict())  # a state_dict carrying them loads
    assert opt.param_groups[1]["maximize"] is False


@pytest.mark.parametrize("cls,kwargs,key,value", [
    (CGAD, {}, "seed", 7), (CGAD, {}, "threads", 1), (CGAD, {}, "on_nonfinite", "raise"),
    (Nesterov, {}, "seed", 0), (PACGAD, dict(fragments="groups"), "fragments", 2)],
    ids=["seed", "threads", "on_nonfinite", "nesterov-seed", "pacgad-fragments"])
def test_an_optimizer_wide_keyword_in_a_param_group_is_refused(cls, kwargs, key, value):
    # These are the whole optimizer's (its seed keys stochastic rounding for every group): a group's own would
    # have been ignored.
    message = f"^{cls.__name__} param group 0: {key} is the whole optimizer's .+ the group's {key}={value!r} would"
    with pytest.raises(cgad.InputError, match=message):
        cls([{"params": params(), key: value}], **kwargs)
    ps = params()
    opt = cls([{"params": ps}], **kwargs)
    opt.param_groups[0][key] = value
    feed(ps, 1)
    with pytest.raises(cgad.InputError, match=message):
        opt.step()


@pytest.mark.parametrize("cls", [Nesterov, SDM])
@pytest.mark.parametrize("key,value", [("nesterov", False), ("dampening", 0.1), ("weight_decay", 1e-4)])
def test_an_sgd_key_that_would_change_the_step_is_refused_in_a_nesterov_group(cls, key, value):
    # The outer step is torch.optim.SGD's with nesterov=True, dampening 0 and no weight decay: a group ported from
    # SGD with another value would step differently there, and ignoring it would be a silent wrong answer.
    message = f"^{cls.__name__} param group 0: {key}={value!r} is not supported"
    with pytest.raises(cgad.InputError, match=message):
        cls([{"params": params(), key: value}])
    ps = params()
    opt = cls([{"params": ps}])
    opt.param_groups[0][key] = value
    feed(ps, 1)
    before = param_bits(ps)
    with pytest.raises(cgad.InputError, match=message):
        opt.step()
    assert param_bits(ps) == before


@pytest.mark.parametrize("cls", [Nesterov, SDM])
def test_sgd_keys_at_the_value_this_step_has_are_taken_in_a_nesterov_group(cls):
    ps, reference = params(), params()
    opt = cls([{"params": ps, "nesterov": True, "dampening": 0, "weight_decay": 0.0}])
    plain = cls([{"params": reference}])
    assert_steps_alike(opt, ps, plain, reference)


def test_a_param_group_holds_the_hyperparameters_its_optimizer_reads_and_no_others():
    # Adam has no sigma and Adam-Decay no gate: an alpha or tau_cut in their groups would be read by no step, and
    # setting it would change nothing.
    gate = {"alpha", "tau_cut", "on_zero_gate"}
    assert gate <= set(CGAD(params()).param_groups[0]) and gate <= set(PACGAD(params()).param_groups[0])
    assert "alpha" in AdamDecay(params()).param_groups[0]
    assert not {"tau_cut", "on_zero_gate"} & set(AdamDecay(params()).param_groups[0])
    assert not gate & set(Adam(params()).param_groups[0])
    assert {"lr", "betas", "eps", "weight_decay"} <= set(Adam(params()).param_groups[0])


# --- step(closure), last_report ---------------------------------------------------------------------------------------

def test_step_with_a_closure_returns_its_loss_as_torch_does():
    model = torch.nn.Linear(4, 1)
    x, y = torch.randn(8, 4), torch.randn(8, 1)

    def closure():
        model.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    opt = CGAD(model.parameters(), lr=1e-2)
    loss = opt.step(closure)
    assert isinstance(loss, torch.Tensor) and loss.dim() == 0
    expected = torch.optim.AdamW(torch.nn.Linear(4, 1).parameters()).step(lambda: torch.tensor(2.5))
    assert opt.step(lambda: torch.tensor(2.5)) == expected == torch.tensor(2.5)
    assert opt.last_report.applied and opt.last_report.loss == torch.tensor(2.5)
    report = opt.step(staleness=1)  # without a closure: the report, as before
    assert report is opt.last_report and report.loss is None and report.tau_effective == 1


# --- staleness --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tau", [3, np.int64(3), np.uint8(3), np.array(3), np.array(3, dtype=np.uint16),
                                 torch.tensor(3), torch.tensor(3, dtype=torch.int32)],
                         ids=["int", "np.int64", "np.uint8", "np.array", "np.array-uint16", "tensor", "tensor-int32"])
def test_any_integral_staleness_is_taken(tau):
    got, want = params(), params()
    a, b = CGAD(got), CGAD(want)
    feed(got, 1)
    feed(want, 1)
    assert a.step(staleness=tau).tau_effective == 3
    b.step(staleness=3)
    assert param_bits(got) == param_bits(want)
    a.staleness = tau  # the attribute a bare step() reads
    feed(got, 2)
    assert a.step().tau_effective == 3


@pytest.mark.parametrize("tau,message", [
    (3.0, "integer number of outer rounds, got the float 3.0"),
    (np.float32(3), "got the float 3.0"),
    (torch.tensor(3.0), "a tensor of dtype torch.float32"),
    (torch.tensor([1, 2]), "shape \\(2,\\)"),
    (torch.tensor(True), "dtype torch.bool"),
    (True, "staleness must be an integer in"),
    (torch.tensor(-1), "staleness must be an integer in \\[0, "),
    # One rule for every kind of value: 0-dim and integral (a one-element tensor or array has a dimension).
    (torch.tensor([3]), "0-dim integer value\\), got a tensor of dtype torch.int64 and shape \\(1,\\)"),
    (torch.tensor([[3]]), "shape \\(1, 1\\)"),
    (np.array([3]), "got an array of dtype int64 and shape \\(1,\\)"),
    (np.array(3.0), "an array of dtype float64 and shape \\(\\)"),
    (np.array(True), "an array of dtype bool"),
    (np.array(-1), "staleness must be an integer in \\[0, "),
], ids=["float", "np.float32", "float-tensor", "two-element", "bool-tensor", "bool", "negative-tensor",
        "one-element-tensor", "1x1-tensor", "one-element-array", "float-array", "bool-array", "negative-array"])
def test_non_integral_staleness_is_refused_with_the_reason(tau, message):
    ps = params()
    opt = CGAD(ps)
    feed(ps, 1)
    before = param_bits(ps)
    with pytest.raises(cgad.InputError, match=message):
        opt.step(staleness=tau)
    assert param_bits(ps) == before


# --- on_nonfinite, counters -------------------------------------------------------------------------------------------

def nan_step(opt, ps):
    feed(ps, 5)
    ps[1].grad[3] = float("nan")
    return opt.step()


def test_on_nonfinite_skip_warn_raise():
    ps = params()
    opt = CGAD(ps)  # default "skip": the report and the counter, no warning
    opt.staleness = 0  # given (a bare step never given one warns once: test_torch_staleness_warning.py)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nan_step(opt, ps).reason == "nonfinite-gradient"
    assert opt.counters["nonfinite-gradient"] == 1
    ps = params()
    opt = CGAD(ps, on_nonfinite="warn")
    before = param_bits(ps)
    with pytest.warns(RuntimeWarning, match="step skipped, nonfinite-gradient at parameter 1 element 3"):
        nan_step(opt, ps)
    assert param_bits(ps) == before and torch.isnan(ps[1].grad[3])  # nothing changed; the gradient is the caller's
    opt.on_nonfinite = "raise"
    with pytest.raises(cgad.InputError, match="nonfinite-gradient at parameter 1 element 3"):
        nan_step(opt, ps)
    assert param_bits(ps) == before and opt.counters["nonfinite-gradient"] == 2
    assert opt.last_report.reason == "nonfinite-gradient"
    with pytest.raises(cgad.InputError, match="on_nonfinite must be one of skip, warn, raise, got 'ignore'"):
        CGAD(params(), on_nonfinite="ignore")


def test_counters_count_steps_by_what_became_of_them():
    ps = params()
    opt = CGAD(ps, tau_cut=8)
    assert opt.counters == {"applied": 0, "nonfinite-gradient": 0, "overflowing-gradient": 0, "zero-gate": 0,
                            "no-gradient": 0}
    feed(ps, 1)
    opt.step()
    opt.step(staleness=8)  # a zero gate, run by "apply"
    nan_step(opt, ps)
    feed(ps, 2)
    ps[0].grad[0] = 2.0 ** 64
    opt.step()
    for p in ps:
        p.grad = None
    opt.step()
    opt.param_groups[0]["on_zero_gate"] = "skip"
    feed(ps, 3)
    opt.step(staleness=9)  # a zero gate, dropped by "skip"
    assert opt.counters == {"applied": 1, "nonfinite-gradient": 1, "overflowing-gradient": 1, "zero-gate": 2,
                            "no-gradient": 1}
    assert opt.counters() == {"t": [2]}  # called: the fast path's own counters, as before


# --- the zero-gate reason ---------------------------------------------------------------------------------------------

def test_an_event_at_a_zero_gate_says_so_whether_it_ran_or_was_dropped():
    ps = params()
    opt = CGAD(ps, tau_cut=8)
    feed(ps, 1)
    assert opt.step(staleness=7).reason == "none"
    before = param_bits(ps)
    report = opt.step(staleness=8)
    assert (report.applied, report.reason, report.sigma) == (True, "zero-gate", 0.0)
    assert param_bits(ps) != before  # "apply": Delta discarded, theta moved by the momentum alone
    assert report.groups[0].reason == "zero-gate"
    opt.param_groups[0]["on_zero_gate"] = "skip"
    before = param_bits(ps)
    report = opt.step(staleness=30)
    assert (report.applied, report.reason) == (False, "zero-gate") and param_bits(ps) == before
    # Adam-Decay has no gate: a sigma that underflows to 0 is no zero gate.
    decay = AdamDecay(params(), alpha=200.0)
    feed(decay.param_groups[0]["params"], 1)
    report = decay.step(staleness=1)
    assert (report.applied, report.reason, report.sigma) == (True, "none", 0.0)
    pa = PACGAD(params(), fragments=2, tau_cut=2)  # the gate PA-CGAD sees is at max(tau, age)
    feed(pa.param_groups[0]["params"], 1)
    for _ in range(2):
        pa.advance_round()
    report = pa.step(staleness=0, fragment=1)
    assert (report.tau_effective, report.reason, report.applied) == (2, "zero-gate", True)


# --- PA-CGAD with a fragment per param group --------------------------------------------------------------------------

# Sizes whose equal element split (three fragments of 512) puts whole tensors in each: [300, 212], [512], [500, 12].
SIZES = [300, 212, 512, 500, 12]
GROUPS = [[0, 1], [2], [3, 4]]
SCHEDULE = [(0, 0), (1, 2), (2, 0), (0, 3), (1, 1), (1, 0), (2, 5), (0, 0)]  # (fragment, staleness)


@pytest.mark.parametrize("kwargs", [dict(state="fp32"), dict(state="bf16"), dict(state="q8"),
                                    dict(state="q8", q8_semantics="bnb", min_q8_size=0),
                                    dict(state="q8", on_zero_gate="skip", tau_cut=3)],
                         ids=["fp32", "bf16", "q8", "q8-bnb", "q8-skip"])
def test_fragments_from_param_groups_step_as_the_element_ranges_holding_the_same_tensors(kwargs):
    split_ps, group_ps = params(torch.bfloat16, SIZES, seed=8), params(torch.bfloat16, SIZES, seed=8)
    split = PACGAD(split_ps, fragments=3, **kwargs)
    assert [tuple(b) for b in split._groups[0].fragments] == [(0, 512), (512, 512), (1024, 512)]
    by_groups = PACGAD([{"params": [group_ps[i] for i in g]} for g in GROUPS], fragments="groups", **kwargs)
    for e, (fragment, tau) in enumerate(SCHEDULE):
        feed(split_ps, 20 + e)
        feed(group_ps, 20 + e)
        a = split.step(staleness=tau, fragment=fragment)
        b = by_groups.step(staleness=tau, fragment=fragment)
        where = f"event {e}"
        assert (a.applied, a.reason, a.tau_effective, a.sigma) == (b.applied, b.reason, b.tau_effective, b.sigma), where
        assert param_bits(split_ps) == param_bits(group_ps), where
        assert buffers(split, split_ps, ["m", "v"]) == buffers(by_groups, group_ps, ["m", "v"]), where
        counters = split.counters()
        assert [by_groups.counters(g) for g in range(3)] == \
            [{"t": [counters["t"][f]], "age": [counters["age"][f]]} for f in range(3)], where


def test_fragments_from_param_groups_refuse_what_the_range_split_refuses():
    ps = params()
    groups = [{"params": [p]} for p in ps]
    # Refused where the groups are given: the constructor, a group's own tau_cut, add_param_group.
    with pytest.raises(cgad.InputError, match="PACGAD: fragments='groups' with 3 param groups needs tau_cut >= 3, "
                                              "got 2"):
        PACGAD(groups, fragments="groups", tau_cut=2)
    with pytest.raises(cgad.InputError, match="with 2 param groups needs tau_cut >= 2, got 1"):  # as group 1 comes
        PACGAD([groups[0], dict(groups[1], tau_cut=1), groups[2]], fragments="groups")
    opt = PACGAD(groups[:2], fragments="groups", tau_cut=2)
    with pytest.raises(cgad.InputError, match="with 3 param groups needs tau_cut >= 3, got 2"):
        opt.add_param_group(groups[2])
    assert len(opt.param_groups) == 2 and len(opt.state) == 2
    # ... and at the step, where a group's tau_cut was lowered since.
    opt.param_groups[1]["tau_cut"] = 1
    feed(ps, 1)
    before = param_bits(ps)
    with pytest.raises(cgad.InputError, match="2 param groups needs tau_cut >= 2, got 1"):
        opt.step(fragment=0)
    assert param_bits(ps) == before
    opt = PACGAD([{"params": [p]} for p in params()], fragments="groups")
    with pytest.raises(cgad.InputError, match="fragment 3 does not exist \\(fragments='groups': there are 3"):
        opt.step(fragment=3)
    with pytest.raises(cgad.InputError, match="fragments='groups' makes each param group a fragment"):
        PACGAD([{"params": ps[:1]}, {"params": ps[1:]}], fragments=2)


# --- docs -------------------------------------------------------------------------------------------------------------

def test_the_documented_sigma_value_is_the_one_returned():
    text = (SOURCE_DIR / "docs" / "python.md").read_text()
    shown = re.search(r"cgad\.sigma\(4\)\s+# ([0-9.]+)", text)
    assert shown, "docs/python.md shows cgad.sigma(4) with its value"
    digits = shown.group(1).rstrip(".")
    assert repr(cgad.sigma(4)).startswith(digits), (digits, cgad.sigma(4))


@pytest.mark.parametrize("state", ["fp32", "bf16", "q8"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_parameter_without_a_gradient_is_left_untouched_and_the_others_step_as_without_it(state, dtype):
    """torch.optim skips a parameter whose grad is None (a frozen or unused one) while the rest of its group steps:
    its values and state keep their bits, and every other parameter ends with the bits of an optimizer that never
    held it (q8 blocks restart at every tensor, so no other tensor's update reads it)."""
    torch.manual_seed(7)
    shapes = [(300,), (17, 3), (260,)]
    start = [torch.randn(s).to(dtype) for s in shapes]
    ps = [torch.nn.Parameter(t.clone()) for t in start]
    without = [torch.nn.Parameter(t.clone()) for i, t in enumerate(start) if i != 1]
    opt = cgad.torch.CGAD(ps, lr=1e-2, state=state, min_q8_size=0, threads=1)
    ref = cgad.torch.CGAD(without, lr=1e-2, state=state, min_q8_size=0, threads=1)
    for tau in (0, 3, 1, 5):
        grads = [torch.randn(s) for s in shapes]
        for i, (p, g) in enumerate(zip(ps, grads)):
            p.grad = None if i == 1 else g.to(dtype)
        for p, g in zip(without, [grads[0], grads[2]]):
            p.grad = g.to(dtype)
        frozen_state = {k: v.clone() for k, v in opt.state[ps[1]].items() if k != "step"}
        assert opt.step(staleness=tau).applied and ref.step(staleness=tau).applied
        assert torch.equal(ps[1].detach().view(torch.int16 if dtype == torch.bfloat16 else torch.int32),
                           start[1].view(torch.int16 if dtype == torch.bfloat16 else torch.int32))
        for k, v in frozen_state.items():
            assert torch.equal(opt.state[ps[1]][k], v), k
    bits = torch.int16 if dtype == torch.bfloat16 else torch.int32
    for p, q in zip([ps[0], ps[2]], without):
        assert torch.equal(p.detach().view(bits), q.detach().view(bits))
        for k in opt.state[p]:
            if k != "step":
                assert torch.equal(opt.state[p][k], ref.state[q][k]), k
