"""cgad.torch's state_dict entry: each param group's fast-path state as the fast path's own versioned,
checksummed bytes (fastpath/state_file.hpp), held in a uint8 tensor under the top-level key "cgad".

torch 1.13's Optimizer.load_state_dict casts every floating-point tensor of the per-parameter "state" to the
parameter's dtype and rebuilds every iterable in it element by element, so neither q8 codes nor raw bytes would
survive there; the top-level entry is left alone by torch, and torch.save stores the tensor's bytes as they are.
The bytes carry the configuration and layout they were made for, and the fast path refuses bytes that are
corrupt, truncated, of another version, or of another configuration, with its reason."""
import numpy as np
import torch

from .. import _cgad

KEY = "cgad"
FORMAT = "cgad.torch state_dict 1"


def pack(optimizer_name, groups):
    """The entry for ``groups`` (the optimizer's _groups.Group list)."""
    return {
        "format": FORMAT,
        "version": _cgad.__version__,
        "optimizer": optimizer_name,
        "groups": [{
            "spec": dict(g.spec),
            "sizes": list(g.sizes),
            "state": torch.from_numpy(np.frombuffer(g.engine.save_bytes(), dtype=np.uint8).copy()),
        } for g in groups],
    }


def unpack(state_dict, optimizer_name, group_count, where):
    """The checked entry of ``state_dict``: its groups' (spec, sizes, state bytes as a NumPy uint8 array)."""
    if not isinstance(state_dict, dict) or KEY not in state_dict:
        raise _cgad.InputError(f"{where}: the state_dict has no '{KEY}' entry (it was not saved by a cgad.torch "
                               "optimizer)")
    entry = state_dict[KEY]
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        raise _cgad.InputError(f"{where}: the state_dict's '{KEY}' entry is not in the format '{FORMAT}'")
    if entry.get("optimizer") != optimizer_name:
        raise _cgad.InputError(f"{where}: the state_dict was saved by a {entry.get('optimizer')} optimizer, this is "
                               f"{optimizer_name}")
    groups = entry.get("groups")
    if not isinstance(groups, list) or len(groups) != group_count:
        raise _cgad.InputError(f"{where}: the state_dict holds {len(groups) if isinstance(groups, list) else 'no'} "
                               f"param groups' state, this optimizer has {group_count} param groups")
    # torch's own part, which torch's load_state_dict reads with [] (a KeyError, a TypeError where it is missing).
    torch_groups = state_dict.get("param_groups")
    if "state" not in state_dict or not isinstance(torch_groups, list) or len(torch_groups) != group_count or \
            not all(isinstance(g, dict) for g in torch_groups):
        raise _cgad.InputError(f"{where}: the state_dict must hold 'state' and 'param_groups' (a list of "
                               f"{group_count} dicts), as torch.optim's state_dict() makes them")
    out = []
    for i, g in enumerate(groups):
        state = g.get("state") if isinstance(g, dict) else None
        if not isinstance(state, torch.Tensor) or state.dtype != torch.uint8 or state.dim() != 1:
            raise _cgad.InputError(f"{where}: param group {i}'s state must be a one-dimensional uint8 tensor, got "
                                   f"{type(state).__name__ if not isinstance(state, torch.Tensor) else state.dtype}")
        spec, sizes = g.get("spec"), g.get("sizes")
        if not isinstance(spec, dict) or not isinstance(sizes, list):
            raise _cgad.InputError(f"{where}: param group {i}'s '{KEY}' entry must hold 'spec' (a dict) and 'sizes' "
                                   "(a list)")
        out.append((dict(spec), list(sizes), state.detach().cpu().contiguous().numpy()))
    return out
