"""cgad.torch's optimizers described as torch describes its own to its generic optimizer tests: an ``OptimizerInfo``
(torch.testing._internal.common_optimizers, in the torch 2.x wheel) per class, whose inputs span the state formats
(optimizer_cases.py) and the hyperparameter variants torch's own inputs try (a non-default lr, weight decay, a
tensor lr). test_torch2_optim_generic.py runs the generic checks that apply to an optimizer that is not torch's over
them (docs/python.md, "torch 2.x protocol").

What the infos declare, and why: no foreach/fused/differentiable implementation (supported_impls=(): the step is
cgad's fast path, and those flags are refused when True), no sparse or complex parameters (refused with the
reason), no closure required; error inputs are torch's own for every optimizer (get_error_inputs_for_all_optims) and
cgad's refusals, given params=None where torch gives None (InputError is a ValueError, as torch's)."""
import torch
from torch.testing._internal.common_optimizers import (ErrorOptimizerInput, OptimizerErrorEnum, OptimizerInfo,
                                                        OptimizerInput, get_error_inputs_for_all_optims)

import cgad
from cgad.torch import CGAD, PACGAD, SDM, Adam, AdamDecay, Nesterov
from optimizer_cases import ADAM_FORMATS, MOMENTUM_FORMATS


def _inputs(base, formats, decays):
    def inputs(device, dtype=None):
        out = [OptimizerInput(params=None, kwargs=dict(base), desc="default")]
        out.append(OptimizerInput(params=None, kwargs=dict(base, lr=base.get("lr", 1e-3) * 3), desc="non-default lr"))
        out.append(OptimizerInput(params=None, kwargs=dict(base, lr=torch.tensor(base.get("lr", 1e-3))),
                                  desc="tensor lr"))
        if decays:
            out.append(OptimizerInput(params=None, kwargs=dict(base, weight_decay=0.1), desc="nonzero weight_decay"))
        for name, fmt in formats[1:]:
            out.append(OptimizerInput(params=None, kwargs=dict(base, **fmt), desc=f"state {name}"))
        return out
    return inputs


def _errors(cls, base, formats):
    def errors(device, dtype):
        """Every error input in every state format the class takes (a format's own checks run beside these)."""
        return [ErrorOptimizerInput(OptimizerInput(params=e.optimizer_error_input.params,
                                                   kwargs=dict(fmt, **e.optimizer_error_input.kwargs),
                                                   desc=f"{e.optimizer_error_input.desc}, state {name}"),
                                    error_on=e.error_on, error_type=e.error_type, error_regex=e.error_regex)
                for name, fmt in formats for e in format_free(device, dtype)]

    def format_free(device, dtype):
        param = torch.nn.Parameter(torch.randn(3, device=device, dtype=dtype))
        nan = torch.nn.Parameter(torch.randn(3, device=device, dtype=dtype))
        nan.grad = torch.tensor([float("nan"), 0.0, 0.0], dtype=dtype)  # in the fragment a bare PACGAD step reads

        def construction(kwargs, regex, error=cgad.InputError, params=None):
            # params=None, as torch's own error inputs give them: the hyperparameters are checked first.
            return ErrorOptimizerInput(OptimizerInput(params=params, kwargs=dict(base, **kwargs)),
                                       error_on=OptimizerErrorEnum.CONSTRUCTION_ERROR, error_type=error,
                                       error_regex=regex)
        # What torch's harness gives every optimizer of its own (invalid params, duplicates, a tensor lr of two
        # elements, named and unnamed params mixed), then cgad's refusals.
        out = [_as_cgad_refuses(e, cls, base) for e in get_error_inputs_for_all_optims(device, dtype)] + [
            construction(dict(lr=-1e-2), "lr must be finite and >= 0"),
            construction(dict(lr=torch.tensor(-1e-2)), "lr must be finite and >= 0"),
            construction(dict(lr="1e-2x"), "'1e-2x' is not a number"),
            construction(dict(foreach=True), "foreach=True is not supported"),
            construction(dict(fused=True), "fused=True is not supported"),
            construction(dict(differentiable=True), "differentiable=True is not supported"),
            construction({}, "iterable of Tensors or dicts", TypeError, params=param),  # torch's own check
            ErrorOptimizerInput(OptimizerInput(params=[nan], kwargs=dict(base, on_nonfinite="raise")),
                                error_on=OptimizerErrorEnum.STEP_ERROR, error_type=cgad.InputError,
                                error_regex="step skipped, nonfinite-gradient at parameter 0 element 0"),
        ]
        if cls in (Nesterov, SDM):
            out.append(construction(dict(momentum=1.0), "momentum must lie in"))
            out.append(construction(dict(momentum=-0.1), "momentum must lie in"))
        else:
            out.append(construction(dict(betas=(1.0, 0.999)), "beta1 must lie in"))
            out.append(construction(dict(betas=(0.9, -0.1)), "beta2 must lie in"))
            out.append(construction(dict(betas=(0.9,)), "betas must be a pair"))
            out.append(construction(dict(eps=0.0), "eps"))
            out.append(construction(dict(weight_decay=-1), "weight_decay must be finite and >= 0"))
        if cls in (CGAD, PACGAD):
            out.append(construction(dict(tau_cut=0), "tau_cut must be an integer in"))
            out.append(construction(dict(tau_cut="²"), "tau_cut must be an integer in"))
        return out
    return errors


def _as_cgad_refuses(error, cls, base):
    """torch's error input, or cgad's refusal where it differs: a parameter listed twice in a group, which torch
    warns of and then steps twice, is refused (it would be updated twice in place: docs/python.md, "Parameters");
    PACGAD with fragments=P refuses a second param group before torch looks into it."""
    given = error.optimizer_error_input
    regex = None
    if issubclass(error.error_type, Warning):
        regex = "parameter 0 and parameter 1 share memory"
    elif cls is PACGAD and base.get("fragments") != "groups" and isinstance(given.params, list) and \
            sum(isinstance(g, dict) for g in given.params) > 1:
        regex = "PACGAD takes one param group"
    if regex is None:
        return error
    return ErrorOptimizerInput(given, error_on=error.error_on, error_type=cgad.InputError, error_regex=regex)


def _info(cls, base, formats, decays=True):
    return OptimizerInfo(cls, optim_inputs_func=_inputs(base, formats, decays),
                         optim_error_inputs_func=_errors(cls, base, formats), supported_impls=(),
                         supports_complex=False, supports_sparse=False, step_requires_closure=False)


def infos():
    """One OptimizerInfo per optimizer. Nesterov and SDM take lr 0.01: their default 0.7 is DiLoCo's outer lr for
    pseudo-gradients and diverges on the checks' raw gradients, as torch's SGD inputs carry their own lr."""
    return [
        _info(CGAD, {}, ADAM_FORMATS),
        _info(PACGAD, dict(fragments=2), ADAM_FORMATS),
        _info(AdamDecay, {}, ADAM_FORMATS),
        _info(Adam, {}, ADAM_FORMATS),
        _info(Nesterov, dict(lr=0.01), MOMENTUM_FORMATS, decays=False),
        _info(SDM, dict(lr=0.01), MOMENTUM_FORMATS, decays=False),
    ]
