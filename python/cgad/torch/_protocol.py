"""The parts of torch.optim's protocol that cgad.torch's step() and constructors take as torch and its frameworks
pass them: torch's optimizer flags, the staleness as any integral value, what a NaN/Inf step does, and the count
of steps by what became of them."""
import numbers
import warnings
from typing import Dict, List

import numpy as np
import torch

from .. import _cgad
from .._arguments import INT64_MAX, integer

# torch.optim flags these optimizers do not have. Frameworks pass them all, set to their defaults (None or False),
# so a falsy value is taken (it asks for nothing); a truthy one is refused with the reason, never ignored.
UNSUPPORTED_FLAGS = {
    "fused": "its step is cgad's fast path, not torch's fused kernel",
    "foreach": "its step is cgad's fast path, not torch's foreach kernels",
    "capturable": "capturable is the optimizer's keyword, capturable=True for CUDA parameters, not a param group's",
    "differentiable": "the fast path's step is not differentiable",
    "amsgrad": "AMSGrad's max of past second moments is not part of CGAD",
    "maximize": "the outer step descends the pseudo-gradient",
}


def _check_flag(flag, value, where):
    if value is not None and value is not False:
        raise _cgad.InputError(f"{where}: {flag}={value!r} is not supported ({UNSUPPORTED_FLAGS[flag]}); "
                               "None or False is taken")


def check_flags(flags, name):
    """Refuses a truthy torch flag (InputError, with why) and an unknown keyword (TypeError, as Python does)."""
    for flag, value in flags.items():
        if flag not in UNSUPPORTED_FLAGS:
            raise TypeError(f"{name}() got an unexpected keyword argument '{flag}'")
        _check_flag(flag, value, name)


def check_group_flags(group, where):
    """Refuses a truthy torch flag in a param group, as the keyword is: torch.optim.Adam honours a group's own
    amsgrad or maximize, and torch's add_param_group, a user's param_groups[i][flag] = True and a state_dict's
    groups can all put one there. Any other key is the user's, as torch takes it."""
    for flag in UNSUPPORTED_FLAGS:
        if flag in group:
            _check_flag(flag, group[flag], where)


def staleness(value, where):
    """The staleness as an int, by one rule: a 0-dim integral value of any kind -- a Python int, a NumPy integer,
    a 0-dim NumPy array or torch tensor of an integer dtype; a float, even an integral one, a bool and an array or
    tensor with dimensions (even of one element) are refused -- staleness counts outer rounds, one number."""
    if isinstance(value, torch.Tensor) or isinstance(value, np.ndarray):
        integral = not (value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool) \
            if isinstance(value, torch.Tensor) else value.dtype.kind in "iu"
        if value.ndim != 0 or not integral:
            raise _cgad.InputError(f"{where}: staleness must be one integer number of outer rounds (a 0-dim integer "
                                   f"value), got {'a tensor' if isinstance(value, torch.Tensor) else 'an array'} of "
                                   f"dtype {value.dtype} and shape {tuple(value.shape)}")
        value = value.item()
    if isinstance(value, numbers.Real) and not isinstance(value, (numbers.Integral, bool)):
        raise _cgad.InputError(f"{where}: staleness must be an integer number of outer rounds, got the float "
                               f"{value} (round it, if it is a count)")
    return integer(value, "staleness", 0, INT64_MAX, where)


NONFINITE_POLICIES = ("skip", "warn", "raise")


def check_policy(policy, where):
    if not isinstance(policy, str) or policy not in NONFINITE_POLICIES:
        raise _cgad.InputError(f"{where}: on_nonfinite must be one of {', '.join(NONFINITE_POLICIES)}, got "
                               f"{policy!r}")
    return policy


def report_refusal(report, policy, where):
    """What on_nonfinite asks for once a step was refused for a NaN/Inf or overflowing pseudo-gradient (nothing was
    changed, and the gradients are left as they were): nothing more ("skip"), a RuntimeWarning ("warn"), or an
    InputError ("raise")."""
    if policy == "skip":
        return
    message = (f"{where}: step skipped, {report.reason} at parameter {report.nonfinite_param} element "
               f"{report.nonfinite_index}; no parameter or state changed (on_nonfinite={policy!r})")
    if policy == "warn":
        warnings.warn(message, RuntimeWarning, stacklevel=4)
    else:
        raise _cgad.InputError(message)


# The reasons a step is counted under: "applied" for a step applied with nothing to remark, else its reason.
COUNTED = ("applied", "nonfinite-gradient", "overflowing-gradient", "zero-gate", "no-gradient")


def new_counts():
    return {reason: 0 for reason in COUNTED}


def saved_counts(entries, key, where):
    """The counts of steps by outcome that a state_dict's param-group entries carry under ``key`` (each group's
    alike, as state_dict() writes them), checked: None where no entry has them (a state_dict from before they were
    saved, or torch's), else a dict of COUNTED. Refuses (InputError) ones only some groups carry, groups that
    differ, and values no run reaches."""
    present = [isinstance(e, dict) and key in e for e in entries]
    if not any(present):
        return None
    if not all(present) or any(e[key] != entries[0][key] for e in entries):
        raise _cgad.InputError(f"{where}: the param groups' '{key}' must be present in each and alike (the "
                               "optimizer's counts of steps by outcome)")
    counts = entries[0][key]
    if not isinstance(counts, dict) or set(counts) != set(COUNTED):
        raise _cgad.InputError(f"{where}: '{key}' must be a dict of {', '.join(COUNTED)}, got {counts!r}")
    return {k: integer(counts[k], f"{key}[{k!r}]", 0, INT64_MAX, where) for k in COUNTED}


def count(counts, report):
    counts["applied" if report.reason == "none" else report.reason] += 1


class Counters(dict):
    """``opt.counters``: a copy of the steps counted by what became of them (COUNTED). Calling it,
    ``opt.counters(group)``, gives the fast path's own counters of a param group instead (step counts "t",
    PA-CGAD's "age"), as before this dict existed."""

    def __init__(self, counts, engine_counters):
        super().__init__(counts)
        self._engine_counters = engine_counters

    def __call__(self, group: int = 0) -> Dict[str, List[int]]:
        return self._engine_counters(group)
