"""The checks of the integer arguments every public entry point takes, made before they reach the C++ module:
pybind11's own conversion would raise TypeError (a float, a bool taken as 1, a negative count) or OverflowError
(past the C++ type's range) where the package promises cgad.InputError with the reason; and numbers as the decimal
text the libraries parse. Here, not in cgad.numerics, so that cgad.torch uses them without loading cgad._numerics."""
import numbers
from typing import Any, Optional, Union

from . import _cgad

INT64_MAX = 2 ** 63 - 1
UINT32_MAX = 2 ** 32 - 1
UINT64_MAX = 2 ** 64 - 1
_NAMED = {INT64_MAX: "2^63 - 1", UINT32_MAX: "2^32 - 1", UINT64_MAX: "2^64 - 1"}

# A number as the functions take it: a Python number, or decimal text read exactly.
Number = Union[int, float, str]


def shown(value: Any) -> str:
    """``value`` as a refusal quotes it: its repr, cut short (a 5000-digit string makes no one-line message)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def number_text(value: Any, name: str, where: Optional[str] = None) -> str:
    """A number as the decimal text the libraries parse (their one number grammar, core/real_scalar.hpp, which
    refuses other text with the reason): a float, NumPy's included, by its shortest decimal (``repr``), an integer
    exactly however large (the library's range check then names the range), text as it is."""
    prefix = f"{where}: " if where else ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _cgad.InputError(f"{prefix}{name} must be a number or decimal text, got {shown(value)}")
    if isinstance(value, numbers.Integral):
        return str(int(value))
    try:
        return repr(float(value))
    except OverflowError:  # a Fraction or Decimal past double's range
        raise _cgad.InputError(f"{prefix}{name} = {shown(value)} is beyond the range of a double") from None


def integer(value: Any, name: str, least: int, most: int, where: Optional[str] = None, text: bool = False) -> int:
    """``value`` as an int in [least, most] (most: the C++ type's largest value, or a tighter limit); a bool is
    not an integer here (Python's True == 1). text=True also takes the decimal text of one (ASCII digits: "²" is
    a digit to str.isdigit, and int() refuses past 4300 digits with a ValueError of its own)."""
    if text and isinstance(value, str) and value.isascii() and value.strip().isdigit() and \
            len(value.strip()) <= len(str(most)):
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not least <= int(value) <= most:
        prefix = f"{where}: " if where else ""
        raise _cgad.InputError(f"{prefix}{name} must be an integer in [{least}, {_NAMED.get(most, most)}], "
                               f"got {shown(value)}")
    return int(value)
