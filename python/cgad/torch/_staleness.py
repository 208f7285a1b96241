"""The staleness a bare ``step()`` uses (``opt.staleness``), and the warning when a gate never receives one.

torchft and every framework that owns the loop call ``step()`` with no arguments, so the staleness reaches the
optimizer through ``opt.staleness``, a step pre-hook, or cgad.torch.wire_torchft (docs/python.md, "torchft"). A
forgotten hook would leave a staleness-gated optimizer (CGAD, PA-CGAD, Adam-Decay, SDM, Gated) stepping at τ = 0,
σ = 1 -- plain Adam or Nesterov -- with nothing said: its first bare step that was never given a staleness warns
once. A staleness given once (the keyword, or ``opt.staleness = tau``, 0 included: "synchronous" says it) counts
as given, and the optimizers without a gate (Adam, Nesterov) never warn."""
from __future__ import annotations

import warnings
from typing import Any, Callable, Optional

from ._types import Staleness as StalenessValue

# The fast path's names of the optimizers whose step depends on the staleness (docs/design.md §3).
GATED_BY_STALENESS = ("cgad", "pa-cgad", "adam-decay", "sdm")


class Staleness:
    """``opt.staleness`` as a class attribute: 0 until assigned, and an assignment marks the staleness as given."""

    def __get__(self, opt: Any, owner: Any = None) -> Any:
        return self if opt is None else opt.__dict__.get("_staleness", 0)

    def __set__(self, opt: Any, value: StalenessValue) -> None:
        opt.__dict__["_staleness"] = value
        opt.__dict__["_staleness_given"] = True


def of_step(opt: Any, given: Optional[StalenessValue], gated: bool, where: str,
            check: Callable[[Any, str], int]) -> int:
    """The staleness of a step called with ``staleness=given`` (None: bare), as ``check(value, where)`` takes it
    (a refused value marks nothing), warning once per optimizer when a ``gated`` optimizer's bare step finds that
    no staleness was ever given."""
    if given is not None:
        tau = check(given, where)
        opt.__dict__["_staleness_given"] = True
        return tau
    if gated and not opt.__dict__.get("_staleness_given", False):
        opt.__dict__["_staleness_given"] = True  # once
        warnings.warn(f"{where}: step() was never given a staleness: it gates at tau = 0 (sigma = 1, no decay); "
                      "pass step(staleness=tau), set opt.staleness, or wire it with cgad.torch.wire_torchft "
                      "(staleness='synchronous' says tau = 0 on purpose)", RuntimeWarning, stacklevel=4)
    return check(opt.staleness, where)
