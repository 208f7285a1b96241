"""The q8 maps a q8 optimizer of the Adam family quantizes with, given as data (``q8_maps=``): bitsandbytes' dynamic
maps as the installed package builds them, or any pair of maps of their shape. The built-in maps (q8_maps=None) are
bitsandbytes' formula with torch.linspace's element-by-element rule, the same on every machine; the maps an install
builds differ from them in the last bit of some codes, by its torch's vectorised linspace (docs/design.md §5,
fastpath/include/cgad/fastpath/detail/q8_maps.hpp). The fast path checks the codes (StepConfig::q8_codes)."""
import torch

from .. import _cgad

_CODES = 256


def _map_values(value, which, where):
    """One map as 256 Python floats (each a float32 value, exactly)."""
    try:
        tensor = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as e:
        raise _cgad.InputError(f"{where}: q8_maps' {which} map must be a float32 tensor or array of 256 codes "
                               f"({e})") from None
    if tensor.dtype != torch.float32 or tuple(tensor.shape) != (_CODES,):
        raise _cgad.InputError(f"{where}: q8_maps' {which} map must be a float32 tensor or array of 256 codes, got "
                               f"{tensor.dtype} of shape {tuple(tensor.shape)}")
    return tuple(tensor.detach().cpu().tolist())


def _installed_bitsandbytes(where):
    try:
        from bitsandbytes.functional import create_dynamic_map
    except Exception as e:  # ImportError, or an install that fails while importing
        raise _cgad.InputError(f"{where}: q8_maps='bitsandbytes' builds the maps with the installed bitsandbytes, "
                               f"which cannot be imported ({type(e).__name__}: {e})") from None
    return create_dynamic_map(signed=True), create_dynamic_map(signed=False)


def q8_codes(q8_maps, where):
    """``q8_maps`` as the fast path's q8_codes: None (the built-in maps), or (signed, unsigned) codes as floats.
    Takes None, "bitsandbytes" or a pair (signed map, unsigned map) of 256-element float32 tensors or arrays."""
    if q8_maps is None:
        return None
    if isinstance(q8_maps, str):
        if q8_maps != "bitsandbytes":
            raise _cgad.InputError(f"{where}: q8_maps must be None, 'bitsandbytes' or a pair (signed, unsigned) of "
                                   f"256-element float32 maps, got {q8_maps!r}")
        q8_maps = _installed_bitsandbytes(where)
    if not isinstance(q8_maps, (tuple, list)) or len(q8_maps) != 2:
        raise _cgad.InputError(f"{where}: q8_maps must be None, 'bitsandbytes' or a pair (signed, unsigned) of "
                               f"256-element float32 maps, got {type(q8_maps).__name__}")
    return tuple(_map_values(m, which, where) for m, which in zip(q8_maps, ("signed", "unsigned")))


def saved_codes(entry):
    """The q8 codes a state_dict's param group entry records (None: the built-in maps), as q8_codes gives them."""
    saved = entry.get("q8_maps")
    if isinstance(saved, (tuple, list)) and len(saved) == 2:
        try:
            return tuple(tuple(float(x) for x in m) for m in saved)
        except (TypeError, ValueError):
            pass
    return saved
