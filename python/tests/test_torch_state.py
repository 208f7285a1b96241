"""opt.state[p] in torch's layout, on the fast path's live state: torch's names for fp32/bf16 state, bitsandbytes'
for q8, the tensors a step updates in place; state_dict() by reference; equal to torch.optim.Adam's moments within
the derived fp32 bound; torch.optim.Adam/AdamW state as a warm start; per-group state formats."""
import math

import numpy as np
import pytest
import torch

import cgad
from cgad.torch import CGAD, PACGAD, Adam, Nesterov
from conftest import bits, state_bits

SIZES = (300, 17, 260)


def model(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(n, generator=g).to(dtype)) for n in SIZES]


def feed(params, event):
    g = torch.Generator().manual_seed(100 + event)
    for p in params:
        p.grad = (torch.randn(p.shape, generator=g) * 0.1).to(p.dtype)


LAYOUTS = [
    (dict(state="fp32"), Adam, {"exp_avg": torch.float32, "exp_avg_sq": torch.float32}),
    (dict(state="bf16"), CGAD, {"exp_avg": torch.bfloat16, "exp_avg_sq": torch.bfloat16}),
    (dict(state="fp32"), Nesterov, {"momentum_buffer": torch.float32}),
    (dict(state="q8"), CGAD, {"state1": torch.uint8, "state2": torch.uint8, "absmax1": torch.float32,
                              "absmax2": torch.float32}),
    (dict(state="q8"), Nesterov, {"state1": torch.uint8, "absmax1": torch.float32}),
]


@pytest.mark.parametrize("kwargs,cls,names", LAYOUTS, ids=["adam-fp32", "cgad-bf16", "nesterov-fp32", "cgad-q8",
                                                            "nesterov-q8"])
def test_state_holds_torch_and_bnb_names_on_the_live_state(kwargs, cls, names):
    params = model()
    opt = cls(params, **kwargs)
    before = {id(p): {n: t.data_ptr() for n, t in opt.state[p].items()} for p in params}
    for e in range(3):
        feed(params, e)
        opt.step()
    for p in params:
        state = opt.state[p]
        assert set(state) == {"step", *names}
        assert state["step"].dtype == torch.float32 and state["step"].dim() == 0 and state["step"].item() == 3
        for name, dtype in names.items():
            assert state[name].dtype == dtype
            want = (math.ceil(p.numel() / 256),) if name.startswith("absmax") else p.shape
            assert state[name].shape == want, name
            assert state[name].data_ptr() == before[id(p)][name], f"{name} moved: not the state the step updates"
    # The moments are what the fast path holds (fp32 and bf16 exactly; read_buffer dequantizes).
    if kwargs["state"] != "q8":
        first = "exp_avg" if "exp_avg" in names else "momentum_buffer"
        for p in params:
            assert torch.equal(opt.state[p][first].float(), opt.state_buffer(p, "m" if first == "exp_avg" else "b"))


def test_tensors_under_min_q8_size_keep_fp32_state_under_bnb_names():
    params = model()
    opt = CGAD(params, state="q8", min_q8_size=260)
    feed(params, 0)
    opt.step()
    assert set(opt.state[params[1]]) == {"step", "state1", "state2"}  # 17 < 260: fp32, as bnb's under min_8bit_size
    assert opt.state[params[1]]["state1"].dtype == torch.float32
    assert torch.equal(opt.state[params[1]]["state1"], opt.state_buffer(params[1], "m"))
    assert opt.state[params[0]]["state1"].dtype == torch.uint8


def test_state_dict_returns_references_in_torch_layout():
    params = model()
    opt = CGAD(params)
    feed(params, 0)
    opt.step()
    sd = opt.state_dict()
    assert sorted(sd["state"]) == [0, 1, 2] and sd["param_groups"][0]["params"] == [0, 1, 2]
    for i, p in enumerate(params):
        for name, t in opt.state[p].items():
            assert sd["state"][i][name] is t
    feed(params, 1)
    held = sd["state"][0]["exp_avg"].clone()
    opt.step()
    assert not torch.equal(held, sd["state"][0]["exp_avg"])  # live: the step updated what state_dict returned


def abs_recurrence(grads, beta, square):
    """max over steps of M_t = beta M_{t-1} + (1 - beta) |g_t| (|g_t|^2 for the second moment), in float64."""
    m = torch.zeros_like(grads[0], dtype=torch.float64)
    top = torch.zeros_like(m)
    for g in grads:
        g = g.double().abs()
        m = beta * m + (1 - beta) * (g * g if square else g)
        top = torch.maximum(top, m)
    return top


def test_moments_equal_torch_adams_within_the_fp32_bound():
    """After t steps on the same gradients, each moment of cgad's Adam and torch.optim.Adam's differ by at most
    2 * c * u * t * max_s M_s: each implementation's moment carries per step at most c roundings relative to the
    step's absolute terms (m: beta*m, (1-beta)*g, their sum, and the rounded coefficient, c = 4; v: one more for
    g*g, c = 5), damped by beta per later step, so its error is <= c u sum_s beta^(t-s) M_s <= c u t max M;
    u = 2^-24."""
    torch.manual_seed(3)
    ours_params, torch_params = model(), model()
    # torch gets the float32 lr the fast path rounds 1e-3 to (step_config.cpp) and the betas as the decimals: its
    # fl32(beta) and fl32(1 - beta) (1 - beta in double, rounded once) are then the fast path's, which forms 1 - beta
    # from the decimal (docs/design.md, "Derived constants and how each is rounded"), and only the order of
    # operations differs.
    lr, betas = float(np.float32(1e-3)), (0.9, 0.999)
    ours = Adam(ours_params, lr=1e-3)
    theirs = torch.optim.Adam(torch_params, lr=lr, betas=betas, eps=float(np.float32(1e-8)))
    grads = [[torch.randn(n) * 10 ** (e % 3 - 1) for n in SIZES] for e in range(12)]
    for event in grads:
        for p, q, g in zip(ours_params, torch_params, event):
            p.grad, q.grad = g.clone(), g.clone()
        ours.step()
        theirs.step()
    u, t = 2.0 ** -24, len(grads)
    for k, (p, q) in enumerate(zip(ours_params, torch_params)):
        for name, beta, square, c in (("exp_avg", betas[0], False, 4), ("exp_avg_sq", betas[1], True, 5)):
            bound = 2 * c * u * t * abs_recurrence([e[k] for e in grads], beta, square)
            diff = (ours.state[p][name].double() - theirs.state[q][name].double()).abs()
            worst = int(torch.argmax(diff - bound))
            assert bool((diff <= bound).all()), (f"{name} of tensor {k}, element {worst}: "
                                                 f"{float(diff[worst]).hex()} > {float(bound[worst]).hex()}")
        assert ours.state[p]["step"].item() == theirs.state[q]["step"].item() == t


def test_torch_adamw_state_is_a_warm_start():
    torch_params, ours_params = model(), model()
    theirs = torch.optim.AdamW(torch_params, lr=2e-3, betas=(0.8, 0.99), weight_decay=0.01)
    for e in range(4):
        feed(torch_params, e)
        theirs.step()
    ours = CGAD(ours_params)
    ours.load_state_dict(theirs.state_dict())
    group = ours.param_groups[0]
    assert (group["lr"], tuple(group["betas"]), group["weight_decay"]) == (2e-3, (0.8, 0.99), 0.01)
    assert group["alpha"] == 0.2 and group["state"] == "fp32"  # what AdamW has not keeps this optimizer's
    assert not {"optimizer", "seed", "fragments"} & set(group)  # the whole optimizer's, in no param group
    for p, q in zip(ours_params, torch_params):
        for name in ("exp_avg", "exp_avg_sq"):
            assert (bits(ours.state[p][name]) == bits(theirs.state[q][name])).all()
        assert ours.state[p]["step"].item() == 4
    assert ours.counters()["t"] == [4]
    feed(ours_params, 9)
    assert ours.step().applied


def test_warm_starts_that_cannot_be_are_refused():
    params = model()
    amsgrad = torch.optim.Adam(params, amsgrad=True)
    feed(params, 0)
    amsgrad.step()
    with pytest.raises(cgad.InputError, match="amsgrad=True"):
        CGAD(model()).load_state_dict(amsgrad.state_dict())
    sgd = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    sgd.step()
    with pytest.raises(cgad.InputError, match=r"holds \['momentum_buffer'\].*another state format"):
        CGAD(model()).load_state_dict(sgd.state_dict())
    with pytest.raises(cgad.InputError, match="warm start for the Adam family only"):
        Nesterov(model()).load_state_dict(sgd.state_dict())
    with pytest.raises(cgad.InputError, match="warm start for fp32 state only"):
        CGAD(model(), state="bf16").load_state_dict(torch.optim.Adam(params).state_dict())


def test_param_groups_keep_their_own_state_format():
    """bitsandbytes users keep embeddings in 32-bit state: a group's state, min_q8_size, rounding and q8_semantics
    are its own, and step as an optimizer made with them would."""
    params = model(torch.bfloat16)
    groups = [{"params": params[:1], "state": "bf16", "rounding": "stochastic"},
              {"params": params[1:], "q8_semantics": "bnb", "min_q8_size": 256}]
    opt = CGAD(groups, state="q8", seed=7)
    alone = [model(torch.bfloat16)[:1], model(torch.bfloat16)[1:]]
    singles = [CGAD(alone[0], state="bf16", rounding="stochastic", seed=7),
               CGAD(alone[1], state="q8", q8_semantics="bnb", min_q8_size=256, seed=7)]
    for e in range(3):
        feed(params, e)
        feed(alone[0] + alone[1], e)
        opt.step(staleness=e)
        for single in singles:
            single.step(staleness=e)
    assert opt.state[params[0]]["exp_avg"].dtype == torch.bfloat16
    assert opt.state[params[1]]["state1"].dtype == torch.float32  # 17 < 256
    assert opt.state[params[2]]["state1"].dtype == torch.uint8
    for p, q in zip(params, alone[0] + alone[1]):
        assert (bits(p) == bits(q)).all()
    owners = [singles[0]] + [singles[1]] * 2
    for p, q, single in zip(params, alone[0] + alone[1], owners):
        assert set(opt.state[p]) == set(single.state[q])
        for name, t in opt.state[p].items():
            assert torch.equal(t.reshape(-1).view(torch.uint8), single.state[q][name].reshape(-1).view(torch.uint8))
    opt.param_groups[0]["state"] = "fp32"
    feed(params, 5)
    with pytest.raises(cgad.InputError, match="state"):
        opt.step()


@pytest.mark.parametrize("key,value,what", [
    ("state", "bf16", "state format"), ("rounding", "stochastic", "rounding"), ("q8_semantics", "bnb", "q8 semantics"),
    ("v_map", "zero-free", "v map"), ("min_q8_size", 7, "min_q8_size")])
def test_a_state_format_key_changed_after_construction_is_refused_at_the_step_changing_nothing(key, value, what):
    """The state was made in the group's format: v_map too (its q8 codes decode through the map, and the fast path
    took another one silently, reading v through it)."""
    params = model(torch.bfloat16)
    opt = CGAD([{"params": params[:1]}, {"params": params[1:]}], state="q8")
    feed(params, 0)
    opt.step()
    opt.param_groups[1][key] = value
    feed(params, 1)
    before, state = [bits(p).tobytes() for p in params], state_bits(opt)
    with pytest.raises(cgad.InputError, match=f"^CGAD param group 1: new hyperparameters must keep the optimizer's "
                                              f"{what} \\(its state depends on it\\)$"):
        opt.step()
    assert [bits(p).tobytes() for p in params] == before and state_bits(opt) == state


def mixed_model(seed=0):
    """A bf16 model with an fp32 LayerNorm-like parameter between bf16 ones."""
    g = torch.Generator().manual_seed(seed)
    dtypes = (torch.bfloat16, torch.float32, torch.bfloat16)
    return [torch.nn.Parameter(torch.randn(n, generator=g).to(d)) for n, d in zip(SIZES, dtypes)]


def test_a_group_mixing_bf16_and_fp32_parameters_steps_as_groups_of_one_dtype_would():
    params, split = mixed_model(), mixed_model()
    opt = CGAD(params, state="q8", rounding="stochastic", seed=2)
    by_dtype = CGAD([{"params": [split[0], split[2]]}, {"params": [split[1]]}], state="q8", rounding="stochastic",
                    seed=2)
    for e in range(4):
        feed(params, e)
        feed(split, e)
        a, b = opt.step(staleness=e), by_dtype.step(staleness=e)
        assert (a.applied, a.reason, a.sigma) == (b.applied, b.reason, b.sigma)
    for p, q in zip(params, split):
        assert (bits(p) == bits(q)).all()
        for name, t in opt.state[p].items():
            assert torch.equal(t.reshape(-1).view(torch.uint8), by_dtype.state[q][name].reshape(-1).view(torch.uint8))
    # A NaN in the fp32 parameter refuses the bf16 ones too, and says where.
    before = state_bits(opt), [bits(p).tobytes() for p in params]
    feed(params, 9)
    params[1].grad[5] = float("nan")
    report = opt.step()
    assert (report.applied, report.reason, report.nonfinite_param, report.nonfinite_index) == \
        (False, "nonfinite-gradient", 1, 5)
    assert (state_bits(opt), [bits(p).tobytes() for p in params]) == before
    # Its state resumes bit for bit.
    copies = [torch.nn.Parameter(p.detach().clone()) for p in params]
    resumed = CGAD(copies, state="q8", rounding="stochastic", seed=2)
    resumed.load_state_dict(opt.state_dict())
    assert state_bits(resumed) == state_bits(opt)
    feed(params, 10)
    feed(copies, 10)
    opt.step()
    resumed.step()
    assert all((bits(p) == bits(q)).all() for p, q in zip(params, copies))


def test_pacgad_refuses_a_group_mixing_dtypes():
    """PA-CGAD's fragments cut the group's tensors concatenated, which two fast-path optimizers cannot share."""
    with pytest.raises(cgad.InputError, match="mixes float32 and bfloat16"):
        PACGAD(mixed_model(), fragments=2)


@pytest.mark.parametrize("cls", [CGAD, Nesterov], ids=["cgad", "nesterov"])
@pytest.mark.parametrize("edit,taken", [("del", False), (1, True), (1.0, True), (5, False), (True, False),
                                        ("tensor-5", False), ("string", False)],
                         ids=["removed", "int", "float", "other-int", "bool", "other-tensor", "string"])
def test_an_edited_step_entry_is_taken_when_it_says_the_count_and_refused_before_anything_changes_otherwise(
        cls, edit, taken):
    """opt.state[p]["step"] mirrors the fast path's count (_state.check_steps): a Python number equal to it (as
    bitsandbytes keeps an int) is taken back as torch's 0-dim float32 tensor; anything else is refused before the
    parameters, the state, the count or the report change -- it used to fail after the step had moved them."""
    params, twin = model(), model()
    opt, ref = cls(params), cls(twin)
    for o, ps in ((opt, params), (ref, twin)):
        feed(ps, 0)
        o.step()
    p = params[0]
    if edit == "del":
        del opt.state[p]["step"]
    elif edit == "tensor-5":
        opt.state[p]["step"] = torch.tensor(5.0)
    elif edit == "string":
        opt.state[p]["step"] = "1"
    else:
        opt.state[p]["step"] = edit
    feed(params, 1)
    feed(twin, 1)
    before, report = [bits(q).tolist() for q in params], opt.last_report
    moments = [{name: bits(t).tolist() for name, t in opt.state[q].items() if name != "step"} for q in params]
    if taken:
        opt.step()
        ref.step()
        assert [bits(q).tolist() for q in params] == [bits(q).tolist() for q in twin]
        assert state_bits(opt) == state_bits(ref)
        step = opt.state[p]["step"]
        assert isinstance(step, torch.Tensor) and step.dtype == torch.float32 and step.dim() == 0 and step == 2
    else:
        with pytest.raises(cgad.InputError, match="parameter 0: opt.state\\[p\\]\\['step'\\] is .*, the optimizer's "
                                                  "step count is 1"):
            opt.step()
        assert [bits(q).tolist() for q in params] == before
        assert [{name: bits(t).tolist() for name, t in opt.state[q].items() if name != "step"} for q in params] \
            == moments
        assert opt.last_report is report and opt.state_dict()["param_groups"][0]["cgad_counters"]["steps"] == 1
