"""cgad: Cosine-Gated Adam-Decay, the staleness-aware outer optimizer for asynchronous DiLoCo, from Python.

``import cgad`` gives the numerics -- the staleness gate, the bound constants, the replay of a pseudo-gradient
stream through either backend and the rounding-noise study's lockstep run, computed by the same C++ libraries
the ``cgad`` command calls -- and ``import cgad.torch`` the ``torch.optim.Optimizer`` classes (CGAD,
PACGAD, AdamDecay, Adam, Nesterov, SDM) over cgad's fast path. See docs/python.md.

Every refusal of bad input is a :class:`cgad.InputError` (a ``ValueError``) with a one-line reason.
"""
from ._cgad import InputError, __version__, cuda_available, cuda_unavailable_reason
from .differential import Replay, noise, replay
from .numerics import bound_constants, gamma, gamma_exact, gate_table, sigma, sigma_exact

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
