"""The staleness gate and the convergence bound's constants (docs/design.md §3, §6), from cgad's C++ libraries:
sigma and gamma in double from ``cgad._cgad``, the exact (MPFR, MPFI) ones from ``cgad._numerics``, which importing
this module loads.

Numbers may be given as Python numbers or as decimal text. A float is taken by its shortest decimal (``repr``),
so ``alpha=0.2`` means the decimal 0.2 -- in the exact (MPFR) functions too, where it is rounded once at the
working precision, exactly as ``cgad gate --alpha 0.2`` reads it -- and not the binary double nearest to it.
"""
from typing import Any, Optional

from . import _cgad, _numerics
from ._arguments import INT64_MAX, UINT32_MAX, Number, integer
from ._arguments import number_text as _text

_GATES = ("cosine", "exponential", "none")


def _gate(gate: str) -> str:
    if gate not in _GATES:
        raise _cgad.InputError(f"gate must be one of {', '.join(_GATES)}, got {gate!r}")
    return gate


# The most rows gate_table makes, as `cgad gate` (apps/cgad/cmd_gate.cpp): a typo in tau_cut should not run for
# minutes and fill memory.
MAX_TABLE_TAU_CUT = 1_000_000


def _precision(precision: int) -> int:
    """A precision in bits; the library then checks it against the range of the call it is for."""
    return integer(precision, "precision (bits)", 0, UINT32_MAX)


def _digits(digits: Optional[int]) -> Optional[int]:
    return None if digits is None else integer(digits, "digits", 2, UINT32_MAX)


def sigma(tau: Number, alpha: Number = 0.2, tau_cut: Number = 32, gate: str = "cosine") -> float:
    """sigma(tau) = gamma(tau) * exp(-alpha * tau) in double precision (the arithmetic the fast path evaluates it
    in before rounding it once to float). ``gate``: "cosine" (CGAD), "exponential" (Adam-Decay) or "none" (Adam).
    tau may be any real >= 0 (the optimizers take integers)."""
    return _cgad.sigma(_text(tau, "tau"), _text(alpha, "alpha"), _text(tau_cut, "tau_cut"), _gate(gate))


def gamma(tau: Number, alpha: Number = 0.2, tau_cut: Number = 32, gate: str = "cosine") -> float:
    """The cosine gate gamma(tau) = (1 + cos(pi * tau / tau_cut)) / 2 for tau <= tau_cut, else 0, in double
    (1 for the exponential and none gates)."""
    return _cgad.gamma(_text(tau, "tau"), _text(alpha, "alpha"), _text(tau_cut, "tau_cut"), _gate(gate))


def sigma_exact(tau: Number, alpha: Number = "0.2", tau_cut: Number = 32, gate: str = "cosine", precision: int = 256,
                digits: Optional[int] = None) -> str:
    """sigma(tau) in MPFR at ``precision`` bits, as a decimal string: ``digits`` significant digits, correctly
    rounded from the MPFR value, or (default) enough digits to read that value back. Each MPFR operation rounds
    once, so the MPFR value is within a few units in its last place of the true sigma (as ``cgad gate``)."""
    return _numerics.sigma_exact(_text(tau, "tau"), _text(alpha, "alpha"), _text(tau_cut, "tau_cut"), _gate(gate),
                             _precision(precision), _digits(digits))["value"]


def gamma_exact(tau: Number, alpha: Number = "0.2", tau_cut: Number = 32, gate: str = "cosine", precision: int = 256,
                digits: Optional[int] = None) -> str:
    """gamma(tau) in MPFR as a decimal string (see sigma_exact)."""
    return _numerics.gamma_exact(_text(tau, "tau"), _text(alpha, "alpha"), _text(tau_cut, "tau_cut"), _gate(gate),
                             _precision(precision), _digits(digits))["value"]


def gate_table(alpha: Number = "0.2", tau_cut: int = 32, precision: int = 256,
               digits: Optional[int] = None) -> list[dict[str, Any]]:
    """The rows of ``cgad gate``: for tau = 0 .. tau_cut + 1, a dict with the integer ``tau``, ``gamma`` and
    ``sigma`` as exact decimal strings (MPFR at ``precision`` bits) and ``sigma_float`` (the MPFR value rounded
    to the nearest double)."""
    tau_cut = integer(tau_cut, "tau_cut", 1, MAX_TABLE_TAU_CUT, text=True)
    rows = []
    for tau in range(tau_cut + 2):
        s = _numerics.sigma_exact(str(tau), _text(alpha, "alpha"), str(tau_cut), "cosine", _precision(precision),
                              _digits(digits))
        g = _numerics.gamma_exact(str(tau), _text(alpha, "alpha"), str(tau_cut), "cosine", _precision(precision),
                              _digits(digits))
        rows.append({"tau": tau, "gamma": g["value"], "sigma": s["value"], "sigma_float": s["float"]})
    return rows


def bound_constants(alpha: Number = "0.2", tau_cut: int = 32, precision: int = 256,
                    digits: Optional[int] = None) -> dict[str, Any]:
    """The constants of the convergence bound for the cosine gate, as ``cgad bound`` computes them: a dict with
    ``B1`` = sup tau*sigma(tau), ``B2`` = sup tau^2*sigma(tau) and ``W`` = sum_{tau=1..tau_cut} sigma(tau), each
    with its MPFR ``value`` (decimal string), ``float``, and certified MPFI ``enclosure`` ({"lo", "hi"}, printed
    rounded outward so the printed interval still contains the constant); B1 and B2 also with their maximizer and
    the integer-tau maxima; ``inequalities``: every claimed inequality (B1 <= 1/(e*alpha), ...) with both sides'
    enclosures and its ``verdict`` (``proved`` is True when certified); ``precision_bits`` in effect."""
    tau_cut = integer(tau_cut, "tau_cut", -INT64_MAX - 1, INT64_MAX, text=True)  # the library's range check
    return _numerics.bound_constants(_text(alpha, "alpha"), tau_cut, _precision(precision), _digits(digits))
