"""Gated's own state in a state_dict: each param group's entry carries ``cgad_gated`` -- the gate's settings, the
step counts by outcome, and PA-CGAD's round and that group's last synchronized round -- beside the wrapped
optimizer's own keys. Param-group entries survive where a state_dict travels (torch.save, torchft's healing
transfer, torch.distributed.checkpoint). The wrapped optimizer's live param groups hold the key as None (hold_keys),
as cgad.torch's hold theirs (_state.COUNTERS): DCP's flattened optimizer state_dict (flatten_optimizer_state_dict=
True, as torchtitan saves) rebuilds each loaded group from the keys of the live group it loads into, and would drop
a key only state_dict() had; its step never reads it, and its load never sees it (without_entries)."""
from .. import _cgad
from .._arguments import INT64_MAX, integer
from ._gated_config import GateConfig
from ._protocol import saved_counts

KEY = "cgad_gated"
_FIELDS = ("method", "alpha", "tau_cut", "on_zero_gate", "fragments", "round", "last_sync", "counts")


def entries(config, round_, last_sync, counts):
    """The ``cgad_gated`` entry of each of len(last_sync) param groups (fresh dicts: a state_dict is the caller's)."""
    common = {"method": config.method, "alpha": config.alpha, "tau_cut": config.tau_cut,
              "on_zero_gate": config.on_zero_gate, "fragments": config.fragments, "round": round_,
              "counts": dict(counts)}
    return [dict(common, last_sync=s) for s in last_sync]


def hold_keys(param_groups):
    """Puts the key, as None, into every live param group that lacks it (state_dict() fills it in)."""
    for group in param_groups:
        group.setdefault(KEY, None)


def without_entries(state_dict):
    """The state_dict the wrapped optimizer loads: its param groups without ``cgad_gated`` (copies; the rest by
    reference, as torch.optim's load_state_dict takes it)."""
    out = dict(state_dict)
    out["param_groups"] = [{k: v for k, v in g.items() if k != KEY} for g in state_dict["param_groups"]]
    return out


def parse(state_dict, config, groups, where):
    """The wrapper state a state_dict holds: None where no param group has ``cgad_gated`` or each holds it as None
    (the wrapped optimizer's own state_dict: its state loads and the wrapper keeps its own), else (GateConfig,
    round, last_sync, counts).
    Refuses (InputError) one of another method or fragments setting, one only some groups carry, and values no
    run reaches; checks everything before the caller changes anything."""
    saved = state_dict.get("param_groups") if isinstance(state_dict, dict) else None
    if not isinstance(saved, list) or not all(isinstance(g, dict) for g in saved) or len(saved) != groups:
        raise _cgad.InputError(f"{where}: the state_dict must hold 'param_groups', a list of {groups} dicts (one per "
                               "param group of the wrapped optimizer), as state_dict() makes it")
    present = [g.get(KEY) is not None for g in saved]
    if not any(present):
        return None
    if not all(present):
        raise _cgad.InputError(f"{where}: only some param groups of the state_dict carry '{KEY}'")
    found = [g[KEY] for g in saved]
    for index, entry in enumerate(found):
        if not isinstance(entry, dict) or set(entry) != set(_FIELDS):
            raise _cgad.InputError(f"{where}: param group {index}'s '{KEY}' must be a dict of {', '.join(_FIELDS)}, "
                                   f"got {entry!r}")
    first = found[0]
    for index, entry in enumerate(found):
        differing = [k for k in _FIELDS if k != "last_sync" and entry[k] != first[k]]
        if differing:
            raise _cgad.InputError(f"{where}: param group {index}'s '{KEY}' differs from group 0's in "
                                   f"{', '.join(differing)}")
    for key in ("method", "fragments"):
        if first[key] != getattr(config, key):
            raise _cgad.InputError(f"{where}: the state_dict is of a Gated with {key}={first[key]!r}, this one has "
                                   f"{key}={getattr(config, key)!r}")
    loaded = GateConfig.make(first["method"], first["alpha"], first["tau_cut"], first["on_zero_gate"],
                             first["fragments"])
    round_ = integer(first["round"], "round", 0, INT64_MAX - 1, where)
    last_sync = [integer(e["last_sync"], f"param group {i}'s last_sync", -1, round_, where)
                 for i, e in enumerate(found)]
    counts = saved_counts(found, "counts", where)
    return loaded, round_, last_sync, counts
