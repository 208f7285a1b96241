"""torch's generic optimizer checks (the ones pytorch's test/test_optim.py runs over every OptimizerInfo of its
optim_db) that apply to an optimizer that is not torch's, run over cgad.torch's optimizers as optim_infos.py
describes them (docs/python.md, "torch 2.x protocol", lists which apply, which pass and why the others do not).
Written here after what each of torch's checks asserts, not copied; where cgad's step is deterministic a check
asserts bits where torch's asserts closeness.

Not run here, as they do not apply: the foreach/fused checks (parity with the for-loop, peak memory, large tensors,
meta parameters, found_inf, set_default_dtype, defaults to foreach, CPU against CUDA fused, mixed devices and
dtypes: cgad has neither implementation and refuses the flags), sparse (Rosenbrock) and complex parameters
(refused: see test_complex_parameters_are_refused_with_the_reason), second-order optimizers (no closure needed),
and the CUDA and multi-GPU checks (no CUDA torch here)."""
import copy
import io

import pytest
import torch

import cgad
from cgad.torch import PACGAD
from conftest import bits, require_torch, state_bits
from optimizer_cases import OPTIMIZERS


@pytest.fixture(params=[cls for cls, _ in OPTIMIZERS], ids=[cls.__name__ for cls, _ in OPTIMIZERS])
def info(request):
    require_torch((2, 2), "torch's OptimizerInfo harness (torch.testing._internal.common_optimizers)")
    import optim_infos
    return next(i for i in optim_infos.infos() if i.optim_cls is request.param)


def inputs(info):
    return info.optim_inputs_func(device="cpu")


def problem(contiguous=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    if contiguous:
        weight, bias = torch.randn(10, 5, generator=g), torch.randn(10, generator=g)
    else:  # every other element of a larger tensor
        weight, bias = torch.randn(10, 5, 2, generator=g)[..., 0], torch.randn(10, 2, generator=g)[..., 0]
    return torch.nn.Parameter(weight), torch.nn.Parameter(bias), torch.randn(5, generator=g)


def closure_for(opt, weight, bias, x):
    def closure():
        opt.zero_grad()
        loss = (weight.mv(x) + bias).pow(2).sum()
        loss.backward()
        return loss
    return closure


def all_bits(tensors):
    return [bits(t).tobytes() for t in tensors]


def test_inputs_do_not_specify_global_cliquey_kwargs(info):
    for i in inputs(info):
        assert not {"foreach", "fused", "differentiable"} & set(i.kwargs), i.desc


def test_errors(info):
    """As torch's test_errors: a construction error raised (or warned) by the constructor, a step error by step()
    of an optimizer that constructed."""
    for error in info.optim_error_inputs_func(device="cpu", dtype=torch.float32):
        given = error.optimizer_error_input
        expect = pytest.warns if issubclass(error.error_type, Warning) else pytest.raises
        if error.error_on.name == "STEP_ERROR":
            opt = info.optim_cls(given.params, **given.kwargs)
            with expect(error.error_type, match=error.error_regex):
                opt.step()
        else:
            with expect(error.error_type, match=error.error_regex):
                info.optim_cls(given.params, **given.kwargs)


@pytest.mark.parametrize("with_scheduler", [False, True])
def test_goes_right_direction(info, with_scheduler):
    for scheduler_makers in (info.scheduler_inputs if with_scheduler else [[]]):
        for i in inputs(info):
            weight, bias, x = problem()
            opt = info.optim_cls([weight, bias], **copy.deepcopy(i.kwargs))
            schedulers = [make(opt) for make in scheduler_makers]
            closure = closure_for(opt, weight, bias, x)
            initial = closure().item()
            for _ in range(20):
                loss = closure()
                opt.step()
                for s in schedulers:
                    s.step(loss.item()) if isinstance(s, torch.optim.lr_scheduler.ReduceLROnPlateau) else s.step()
            assert closure().item() < initial, i.desc


def test_non_contiguous_parameters_are_refused_with_the_reason(info):
    # torch's check runs non-contiguous parameters too; cgad.torch updates parameters in place, where they lie,
    # and refuses them (docs/python.md, "Parameters").
    weight, bias, _ = problem(contiguous=False)
    with pytest.raises(cgad.InputError, match="is not contiguous"):
        info.optim_cls([weight, bias], **inputs(info)[0].kwargs)


def test_complex_parameters_are_refused_with_the_reason(info):
    with pytest.raises(cgad.InputError, match="complex64"):
        info.optim_cls([torch.nn.Parameter(torch.randn(4, dtype=torch.complex64))], **inputs(info)[0].kwargs)


def two_groups(info, weight_kwargs, bias_kwargs, weight, bias, **outer):
    if info.optim_cls is PACGAD:
        pytest.skip("a PACGAD step applies one fragment: with fragments='groups' a bare step() steps group 0 only "
                    "(docs/python.md, \"PACGAD\"), so torch's two-group checks do not describe it")
    return info.optim_cls([dict(params=[weight], **weight_kwargs), dict(params=[bias], **bias_kwargs)], **outer)


def test_param_group_with_lrscheduler_goes_right_direction(info):
    for scheduler_makers in info.scheduler_inputs:
        weight, bias, x = problem()
        base = inputs(info)[0].kwargs
        opt = two_groups(info, dict(base), dict(base, lr=0.01), weight, bias)
        schedulers = [make(opt) for make in scheduler_makers]
        closure = closure_for(opt, weight, bias, x)
        initial = closure().item()
        for _ in range(20):
            loss = opt.step(closure)
            for s in schedulers:
                s.step(loss.item()) if isinstance(s, torch.optim.lr_scheduler.ReduceLROnPlateau) else s.step()
        assert closure().item() < initial


def test_param_groups_weight_decay(info):
    for i in inputs(info):
        weight, bias, x = problem()
        bias_kwargs = dict(i.kwargs)
        if "weight_decay" in bias_kwargs:
            bias_kwargs["weight_decay"] = 0.0
        opt = two_groups(info, dict(i.kwargs), bias_kwargs, weight, bias)
        closure = closure_for(opt, weight, bias, x)
        initial = closure().item()
        for _ in range(20):
            closure()
            opt.step()
        assert closure().item() < initial, i.desc


def test_param_groups_lr(info):
    for i in inputs(info):
        weight, bias, x = problem()
        irrelevant = torch.nn.Parameter(torch.randn(2))
        before = all_bits([irrelevant])
        if info.optim_cls is PACGAD:
            pytest.skip("a PACGAD step applies one fragment (see two_groups)")
        relevant = dict(i.kwargs)
        relevant.setdefault("lr", 1e-3)  # the group's own lr, above the optimizer's 1e-28
        opt = info.optim_cls([dict(params=[weight, bias], **relevant), dict(params=[irrelevant])],
                             **dict(i.kwargs, lr=1e-28))
        closure = closure_for(opt, weight, bias, x)
        initial = closure().item()
        for _ in range(20):
            closure()
            irrelevant.grad = torch.rand_like(irrelevant)
            opt.step()
        assert closure().item() < initial, i.desc
        assert all_bits([irrelevant]) == before, i.desc  # lr 1e-28 moves no float32 of magnitude ~1


def test_tensor_lr(info):
    # torch's asserts closeness; the same float32 lr gives the same bits here (test_torch_tensor_lr.py).
    for i in inputs(info):
        if isinstance(i.kwargs.get("lr"), torch.Tensor):
            continue
        runs = []
        for lr in (i.kwargs.get("lr", 1e-3), torch.tensor(i.kwargs.get("lr", 1e-3))):
            weight, bias, x = problem()
            opt = info.optim_cls([weight, bias], **dict(i.kwargs, lr=lr))
            closure = closure_for(opt, weight, bias, x)
            for _ in range(5):
                closure()
                opt.step()
            runs.append(all_bits([weight, bias]))
        assert runs[0] == runs[1], i.desc


def test_step_is_noop_when_params_have_no_grad(info):
    for i in inputs(info):
        ps = [torch.randn(2, 3) for _ in range(2)]
        before = all_bits(ps)
        opt = info.optim_cls(ps, **copy.deepcopy(i.kwargs))
        assert opt.step(lambda: torch.tensor([1.0])) == torch.tensor([1.0])
        assert all_bits(ps) == before and opt.last_report.reason == "no-gradient", i.desc


def test_step_is_noop_for_zero_grads(info):
    for i in inputs(info):
        if i.kwargs.get("weight_decay", 0) != 0:
            continue  # decoupled decay moves theta whatever the gradient, as torch's check says of its own
        param = torch.nn.Parameter(torch.randn(5, 1))
        before = all_bits([param])
        opt = info.optim_cls([param], **copy.deepcopy(i.kwargs))
        param.grad = torch.zeros_like(param)
        opt.step()
        assert all_bits([param]) == before, i.desc


def test_optimizer_can_be_printed(info):
    for i in inputs(info):
        text = repr(info.optim_cls([torch.nn.Parameter(torch.randn(2, 3))], **copy.deepcopy(i.kwargs)))
        assert text.startswith(info.optim_cls.__name__), i.desc


def primed(info, kwargs, named, steps=5, seed=0):
    weight, bias, x = problem(seed=seed)
    given = [("weight", weight), ("bias", bias)] if named else [weight, bias]
    opt = info.optim_cls(given, **copy.deepcopy(kwargs))
    closure = closure_for(opt, weight, bias, x)
    for _ in range(steps):
        closure()
        opt.step()
    return opt, (weight, bias, x)


def without_names(sd):
    sd = copy.deepcopy(sd)
    for group in sd["param_groups"]:
        group.pop("param_names", None)
    return sd


@pytest.mark.parametrize("named", [(False, False), (True, False), (False, True), (True, True)],
                         ids=["plain", "named-to-plain", "plain-to-named", "named"])
def test_state_dict_deterministic(info, named):
    if any(named):
        require_torch((2, 6), "named parameters in torch.optim")
    for i in inputs(info):
        opt, (weight, bias, x) = primed(info, i.kwargs, named[0])
        with torch.no_grad():
            weight_c, bias_c = torch.nn.Parameter(weight.clone()), torch.nn.Parameter(bias.clone())
        given = [("weight", weight_c), ("bias", bias_c)] if named[1] else [weight_c, bias_c]
        opt_c = info.optim_cls(given, **copy.deepcopy(i.kwargs))
        opt_c.load_state_dict(copy.deepcopy(opt.state_dict()))
        closure, closure_c = closure_for(opt, weight, bias, x), closure_for(opt_c, weight_c, bias_c, x)
        for _ in range(5):
            closure()
            closure_c()
            opt.step()
            opt_c.step()
            assert all_bits([weight, bias]) == all_bits([weight_c, bias_c]), i.desc
        assert state_bits(opt) == state_bits(opt_c), i.desc
        assert repr(without_names(opt.state_dict())["param_groups"]) == \
            repr(without_names(opt_c.state_dict())["param_groups"]), i.desc  # repr: a tensor lr has no ==
        # A group listed twice is packed twice alike (the next step refuses such param_groups, docs/python.md).
        opt_c.param_groups.extend(opt_c.param_groups)
        assert repr(without_names(opt.state_dict())["param_groups"][-1]) == \
            repr(without_names(opt_c.state_dict())["param_groups"][-1]), i.desc


def test_can_load_older_state_dict(info):
    for i in inputs(info):
        opt, _ = primed(info, i.kwargs, False)
        old = copy.deepcopy(opt.state_dict())
        for group in old["param_groups"]:
            for flag in info.not_og_supported_flags:
                group.pop(flag, None)
        opt.load_state_dict(old)
        opt.step()
        assert opt.last_report is not None


def test_can_load_from_to_named_state_dict(info):
    require_torch((2, 6), "named parameters in torch.optim")
    for i in inputs(info):
        for named_from, named_to in ((True, False), (False, True), (True, True)):
            opt, (weight, bias, x) = primed(info, i.kwargs, named_from)
            given = [("weight", weight), ("bias", bias)] if named_to else [weight, bias]
            opt2 = info.optim_cls(given, **copy.deepcopy(i.kwargs))
            opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
            closure_for(opt2, weight, bias, x)()
            opt2.step()
            assert opt2.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"], i.desc


def entry_bits(entry):
    return {k: (bits(t) if t.is_floating_point() else t.numpy()).tobytes() for k, t in entry.items()}


def test_save_load_equality_with_weights_only(info):
    for i in inputs(info):
        sd = primed(info, i.kwargs, False)[0].state_dict()
        buffer = io.BytesIO()
        torch.save(sd, buffer)
        for weights_only in (False, True):
            buffer.seek(0)
            loaded = torch.load(buffer, weights_only=weights_only)
            assert repr(loaded["param_groups"]) == repr(sd["param_groups"]), i.desc  # a tensor lr has no ==
            assert {k: entry_bits(e) for k, e in loaded["state"].items()} == \
                {k: entry_bits(e) for k, e in sd["state"].items()}, i.desc


def test_load_nontensor_step(info):
    for i in inputs(info):
        opt, _ = primed(info, i.kwargs, False)
        sd = copy.deepcopy(opt.state_dict())
        for entry in sd["state"].values():
            entry["step"] = entry["step"].item()
        before = state_bits(opt)
        opt.load_state_dict(sd)
        assert state_bits(opt) == before, i.desc
        opt.step()


def test_state_dict_hooks(info):
    for i in inputs(info):
        opt = info.optim_cls([torch.nn.Parameter(torch.rand(2, 3))], **copy.deepcopy(i.kwargs))
        opt.register_state_dict_pre_hook(lambda o: o.state.__setitem__("test", 1))

        def post(o, sd):
            sd["ran_pre_hook"] = sd["state"].pop("test", None) == 1
            return sd

        assert opt.state_dict()["state"]["test"] == 1
        opt.register_state_dict_post_hook(post)
        sd = opt.state_dict()
        assert sd["ran_pre_hook"] and "test" not in sd["state"], i.desc


def test_load_state_dict_hooks_and_prepend(info):
    for i in inputs(info):
        opt = info.optim_cls([torch.nn.Parameter(torch.rand(2, 3))], **copy.deepcopy(i.kwargs))
        sd = opt.state_dict()

        def set_lr(value, replace):
            def hook(o, given):
                out = copy.deepcopy(given) if replace else given
                out["param_groups"][0]["lr"] = value
                return out if replace else None
            return hook

        opt.register_load_state_dict_pre_hook(set_lr(0.002, False))
        opt.load_state_dict(sd)
        assert opt.param_groups[0]["lr"] == 0.002
        opt.register_load_state_dict_pre_hook(set_lr(0.003, True), prepend=True)
        opt.register_load_state_dict_post_hook(lambda o: o.state.__setitem__("ran_post", o.param_groups[0]["lr"]))
        opt.load_state_dict(sd)
        assert opt.param_groups[0]["lr"] == 0.002 and opt.state["ran_post"] == 0.002, i.desc


def test_step_hooks(info):
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
    for i in inputs(info):
        params = [torch.tensor([1.0, 1.0])]
        opt, sgd = info.optim_cls(params, **copy.deepcopy(i.kwargs)), torch.optim.SGD(params)
        fired = []
        handles = [register_optimizer_step_pre_hook(lambda o, a, k: fired.append(0)),
                   register_optimizer_step_post_hook(lambda o, a, k: fired.append(5))]
        for o in (opt, sgd):
            handles.append(o.register_step_pre_hook(lambda o, a, k: fired.append(1)))
            handles.append(o.register_step_post_hook(lambda o, a, k: fired.append(2)))
        opt.step()
        sgd.step()
        opt.step()
        assert fired == [0, 1, 2, 5] * 3, i.desc
        for handle in handles:
            handle.remove()
        opt.step()
        assert fired == [0, 1, 2, 5] * 3, i.desc


def test_deepcopy_copies_all_public_attrs(info):
    for i in inputs(info):
        opt, _ = primed(info, i.kwargs, False, steps=3)
        public = {k for k in opt.__dict__ if not k.startswith("_")}
        assert public == {k for k in copy.deepcopy(opt).__dict__ if not k.startswith("_")}, i.desc


def test_non_empty_state(info):
    for i in inputs(info):
        model = torch.nn.Linear(5, 5)
        opt = info.optim_cls(model.parameters(), **copy.deepcopy(i.kwargs))
        model(torch.rand(2, 5)).sum().backward()
        opt.step()
        assert opt.state and all(len(entry) > 0 for entry in opt.state.values()), i.desc
