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


def number_text(value: Any, name: str) -> str:
    """A number as the decimal text the libraries parse (their one number grammar, core/real_scalar.hpp): a float by
    its shortest decimal (``repr``), an integer exactly, text as it is."""
    if isinstance(value, bool) or not isinstance(value, (str, numbers.Real)):
        raise _cgad.InputError(f"{name} must be a number or decimal text, got {value!r}")
    if isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return str(int(value))
    return repr(float(value))


def integer(value: Any, name: str, least: int, most: int, where: Optional[str] = None) -> int:
    """``value`` as an int in [least, most] (most: the C++ type's largest value, or a tighter limit); a bool is
    not an integer here (Python's True == 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not least <= value <= most:
        prefix = f"{where}: " if where else ""
        raise _cgad.InputError(f"{prefix}{name} must be an integer in [{least}, {_NAMED.get(most, most)}], "
                               f"got {value!r}")
    return int(value)
