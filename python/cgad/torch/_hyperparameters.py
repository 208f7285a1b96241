"""The one parser of the hyperparameters every cgad.torch class takes (CGAD, PACGAD, AdamDecay, Adam, Nesterov, SDM
and Gated: lr, betas, eps, weight_decay, alpha, tau_cut, momentum, on_zero_gate), as a constructor's keywords and
as a param group's keys. A number is any ``numbers.Real`` (NumPy's scalars included), a one-element tensor (torch
takes a tensor lr) or decimal text, handed on as the decimal text the library parses and range-checks once
(core/optimizer_options.hpp); τ_cut is any ``numbers.Integral`` or the decimal text of one. What it refuses is a
cgad.InputError, a ValueError as torch's own refusals of hyperparameters are."""
import torch

from .. import _cgad
from .._arguments import INT64_MAX, integer, number_text, shown


def number(value, name, where):
    """A real hyperparameter as decimal text. A tensor must hold one element, torch's rule for a tensor lr
    (torch.optim.Adam: "Tensor lr must be 1-element")."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise _cgad.InputError(f"{where}: Tensor {name} must be 1-element, got one of shape {tuple(value.shape)}")
        value = value.item()
    return number_text(value, name, where)


def tau_cut(value, where):
    """τ_cut as the int the library takes (its range check, [1, 2^24], then names the range)."""
    return integer(value, "tau_cut", 1, INT64_MAX, where, text=True)


def on_zero_gate(value, where):
    """The zero-gate policy as text; anything else reaches the library as its repr, which it refuses by name."""
    return value if isinstance(value, str) else shown(value)


def parse(group, keys, where):
    """The fast-path spec entries of the hyperparameters ``keys`` of ``group`` (a param group, or a constructor's
    defaults)."""
    spec = {}
    for key in keys:
        if key not in group:
            raise _cgad.InputError(f"{where}: the param group has no '{key}'")
        value = group[key]
        if key == "betas":
            if not isinstance(value, (tuple, list)) or len(value) != 2:
                raise _cgad.InputError(f"{where}: betas must be a pair (beta1, beta2), got {shown(value)}")
            spec["beta1"], spec["beta2"] = (number(b, f"beta{i + 1}", where) for i, b in enumerate(value))
        elif key == "tau_cut":
            spec[key] = tau_cut(value, where)
        elif key == "on_zero_gate":
            spec[key] = on_zero_gate(value, where)
        else:
            spec[key] = number(value, key, where)
    return spec
