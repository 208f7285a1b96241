"""cgad.torch's optimizers described as torch describes its own to its generic optimizer tests: an ``OptimizerInfo``
(torch.testing._internal.common_optimizers, in the torch 2.x wheel) per class, whose inputs span the state formats
(optimizer_cases.py) and the hyperparameter variants torch's own inputs try (a non-default lr, weight decay, a
tensor lr). test_torch2_optim_generic.py runs the generic checks that apply to an optimizer that is not torch's over
them (docs/python.md, "torch 2.x protocol").

What the infos declare, and why: no foreach/fused/differentiable implementation (supported_impls=(): the step is
cgad's fast path, and those flags are refused when True), no sparse or complex parameters (refused with the
reason), no closure required; error inputs are cgad's refusals (InputError is a ValueError, as torch's)."""
import torch
from torch.testing._internal.common_optimizers import (ErrorOptimizerInput, OptimizerErrorEnum, OptimizerInfo,
                                                        OptimizerInput)

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


def _errors(cls, base):
    def errors(device, dtype):
        param = torch.nn.Parameter(torch.randn(3, device=device, dtype=dtype))
        nan = torch.nn.Parameter(torch.randn(3, device=device, dtype=dtype))
        nan.grad = torch.tensor([float("nan"), 0.0, 0.0], dtype=dtype)  # in the fragment a bare PACGAD step reads

        def construction(kwargs, regex, error=cgad.InputError, params=None):
            return ErrorOptimizerInput(OptimizerInput(params=[param] if params is None else params,
                                                      kwargs=dict(base, **kwargs)),
                                       error_on=OptimizerErrorEnum.CONSTRUCTION_ERROR, error_type=error,
                                       error_regex=regex)
        out = [
            construction(dict(lr=-1e-2), "lr"),
            construction(dict(foreach=True), "foreach=True is not supported"),
            construction({}, "iterable of Tensors or dicts", TypeError, params=param),  # torch's own check
            ErrorOptimizerInput(OptimizerInput(params=[nan], kwargs=dict(base, on_nonfinite="raise")),
                                error_on=OptimizerErrorEnum.STEP_ERROR, error_type=cgad.InputError,
                                error_regex="step skipped, nonfinite-gradient at parameter 0 element 0"),
        ]
        if cls not in (Nesterov, SDM):
            out.append(construction(dict(betas=(1.0, 0.999)), "beta1"))
            out.append(construction(dict(eps=0.0), "eps"))
        return out
    return errors


def _info(cls, base, formats, decays=True):
    return OptimizerInfo(cls, optim_inputs_func=_inputs(base, formats, decays),
                         optim_error_inputs_func=_errors(cls, base), supported_impls=(),
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
