"""cgad: Cosine-Gated Adam-Decay, the staleness-aware outer optimizer for asynchronous DiLoCo, from Python.

``import cgad`` gives the numerics -- the staleness gate, the bound constants, the replay of a pseudo-gradient
stream through either backend and the rounding-noise study's lockstep run, computed by the same C++ libraries
the ``cgad`` command calls -- and ``import cgad.torch`` the ``torch.optim.Optimizer`` classes (CGAD,
PACGAD, AdamDecay, Adam, Nesterov, SDM) over cgad's fast path. See docs/python.md.

Every refusal of bad input is a :class:`cgad.InputError` (a ``ValueError``) with a one-line reason.

The numerics live in a second compiled module (``cgad._numerics``, with MPFR, GMP and MPFI) that is loaded the
first time one of them is used (``cgad.replay``, ``cgad.sigma_exact``, ``import cgad.numerics``, ...), so that a
trainer's ``import cgad.torch`` loads only the fast path's module ``cgad._cgad`` (docs/design.md §7).
"""
import importlib
from typing import TYPE_CHECKING, Any

from ._cgad import InputError, __version__, cuda_available, cuda_unavailable_reason

if TYPE_CHECKING:  # a type checker sees the lazy names' own types; at run time they load when first used
    from .differential import Replay, noise, replay
    from .numerics import bound_constants, gamma, gamma_exact, gate_table, sigma, sigma_exact

# Each public name of the numerics, with the submodule it is imported from when first asked for (PEP 562).
_LAZY = {
    "Replay": "differential",
    "noise": "differential",
    "replay": "differential",
    "bound_constants": "numerics",
    "gamma": "numerics",
    "gamma_exact": "numerics",
    "gate_table": "numerics",
    "sigma": "numerics",
    "sigma_exact": "numerics",
}

__all__ = [
    "InputError",
    "Replay",
    "__version__",
    "bound_constants",
    "cuda_available",
    "cuda_unavailable_reason",
    "gamma",
    "gamma_exact",
    "gate_table",
    "noise",
    "replay",
    "sigma",
    "sigma_exact",
]


def __getattr__(name: str) -> Any:
    if name in ("numerics", "differential"):  # `import cgad` made them attributes before they were lazy
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value  # asked once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
