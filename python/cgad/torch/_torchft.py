"""cgad.torch.wire_torchft: one call that makes a cgad outer optimizer take its staleness, and PA-CGAD its
fragment, inside torchft's DiLoCo and Streaming DiLoCo, which call ``outer_optimizer.step()`` with no arguments
(docs/python.md, "torchft"). It is the step pre-hook a user would otherwise write by hand (and could forget: a
staleness-gated optimizer then warns once, _staleness.py), registered on the optimizer; torchft needs nothing
else of it.

The staleness source is named, never implied: a callable of the manager's step (torchft's Manager.current_step()
inside the outer step: the number of the step it completes, 1 for the first -- should_commit() counts the commit
before DiLoCo steps), returning τ in outer rounds (a parameter server's version difference, an injected delay), or
"synchronous": τ = 0 on purpose, synchronous DiLoCo. The fragment: Streaming DiLoCo syncs fragment
(step - 1) mod P in round robin (torchft 0.2's DiLoCo._current_fragment), so an optimizer whose param groups are
the fragments (PACGAD(fragments="groups"), Gated(fragments="groups")) steps that group, and each committed manager
step is one PA-CGAD round (docs/design.md §3)."""
from __future__ import annotations

import numbers
import weakref
from typing import Any, Callable, Dict, List, Literal, Tuple, Union

from .. import _cgad
from ._gated import Gated
from ._optimizers import PACGAD, _FastpathOptimizer
from ._types import Staleness

# What wire_torchft wires: one cgad.torch optimizer, or DiLoCo's list of them (one per fragment).
Outer = Union[_FastpathOptimizer, Gated]

WHERE = "cgad.torch.wire_torchft"
SYNCHRONOUS = "synchronous"
# The optimizers wired now (a copy, as torch's, starts without hooks: it is not wired).
_WIRED: weakref.WeakSet[Outer] = weakref.WeakSet()


class Wiring:
    """What wire_torchft returns: ``remove()`` takes every hook it registered off again."""

    def __init__(self, handles: List[Tuple[Outer, Any]]) -> None:
        self._handles = handles

    def remove(self) -> None:
        for optimizer, handle in self._handles:
            handle.remove()
            _WIRED.discard(optimizer)
        self._handles = []


def _by_fragment(opt: Outer) -> bool:
    return (isinstance(opt, PACGAD) and opt._by_groups) or (isinstance(opt, Gated) and opt.fragments == "groups")


def _check(opt: Any, several: bool) -> None:
    if not isinstance(opt, (_FastpathOptimizer, Gated)):
        raise _cgad.InputError(f"{WHERE}: the outer optimizer must be one of cgad.torch's (CGAD, PACGAD, AdamDecay, "
                               f"Adam, Nesterov, SDM, Gated), got {type(opt).__name__}")
    if not hasattr(opt, "register_step_pre_hook"):
        raise _cgad.InputError(f"{WHERE}: needs torch 2.x's optimizer step hooks (torchft runs on torch 2.x), this "
                               "torch has none")
    if opt in _WIRED:
        raise _cgad.InputError(f"{WHERE}: {type(opt).__name__} is wired already (a second staleness source would "
                               "replace the first); remove() the first wiring")
    if isinstance(opt, PACGAD) and not opt._by_groups:
        raise _cgad.InputError(f"{WHERE}: PACGAD's fragments must be torchft's model fragments: "
                               "PACGAD([{'params': f.parameters()} for f in fragments], fragments='groups')")
    if several and _by_fragment(opt):
        raise _cgad.InputError(f"{WHERE}: one {type(opt).__name__} with fragments='groups' serves every fragment "
                               "(its ages need one clock of rounds): pass it alone, as DiLoCo's outer_optimizer")


def wire_torchft(outer: Union[Outer, List[Outer], Tuple[Outer, ...]], manager: Any,
                 staleness: Union[Literal["synchronous"], Callable[[int], Staleness]]) -> Wiring:
    """Registers on ``outer`` (a cgad.torch optimizer, or DiLoCo's list of them, one per fragment) the step
    pre-hook that gives torchft's bare ``step()`` ``staleness=`` (from ``staleness``: "synchronous", or a callable
    of ``manager.current_step()`` returning τ) and, for an optimizer whose param groups are the fragments,
    ``fragment=``. Returns a Wiring, whose remove() undoes it. Refuses (InputError, nothing registered) a
    non-cgad optimizer, one wired already, PACGAD over range fragments, and a staleness that is neither."""
    optimizers = list(outer) if isinstance(outer, (list, tuple)) else [outer]
    if not optimizers:
        raise _cgad.InputError(f"{WHERE}: no outer optimizer given")
    for opt in optimizers:
        _check(opt, len(optimizers) > 1)
    if len({id(o) for o in optimizers}) != len(optimizers):
        raise _cgad.InputError(f"{WHERE}: the same optimizer is given twice")
    tau_of: Callable[[int], Staleness]
    if isinstance(staleness, str) and staleness == SYNCHRONOUS:
        tau_of = lambda step: 0  # noqa: E731
    elif callable(staleness) and not isinstance(staleness, (str, numbers.Number)):
        tau_of = staleness
    else:
        raise _cgad.InputError(f"{WHERE}: staleness must be 'synchronous' (tau = 0 on purpose) or a callable of "
                               f"the manager's step returning tau, got {staleness!r}")
    if not callable(getattr(manager, "current_step", None)):
        raise _cgad.InputError(f"{WHERE}: manager must be torchft's Manager (it has current_step()), got "
                               f"{type(manager).__name__}")

    def pre_hook(opt: Outer, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
        step = manager.current_step()
        kwargs = dict(kwargs, staleness=tau_of(step))
        if _by_fragment(opt):
            kwargs["fragment"] = (step - 1) % len(opt.param_groups)
        return args, kwargs

    handles = []
    for opt in optimizers:
        handles.append((opt, opt.register_step_pre_hook(pre_hook)))
        _WIRED.add(opt)
    return Wiring(handles)
