"""cgad.torch's optimizer state in torch's layout. On the CPU, ``opt.state[p]`` holds the state itself: torch tensors
that cgad.torch allocated, whose data pointers every step hands the fast path (fastpath/table_stepper.hpp: the step
takes caller-owned state as it takes caller-owned parameters), so what state_dict() shows, what torch.save and
torch.distributed.checkpoint write and read, and what the steps use are one. state_dict() returns references, as
torch.optim's does:

- "step": a 0-dim float32 tensor, as in torch.optim.AdamW (torch/optim/adamw.py, 1.13): the applied steps (for
  PA-CGAD, those of the fragment holding the tensor's first element);
- fp32 or bf16 state: "exp_avg", "exp_avg_sq" (Adam family) or "momentum_buffer" (Nesterov, SDM: torch's SGD
  name), float32 or bfloat16, of the parameter's shape;
- q8 state: bitsandbytes' names (bitsandbytes/optim/optimizer.py, Optimizer2State and Optimizer1State): "state1",
  "state2" (uint8 codes, the parameter's shape) and "absmax1", "absmax2" (float32, one per 256-element block);
  a tensor under min_q8_size keeps "state1", "state2" in float32, as bnb's does under min_8bit_size.

What the per-parameter "step" cannot say -- the step count of every fragment, PA-CGAD's synchronization rounds,
the optimizer and seed the state was made by -- goes with each param group of state_dict()["param_groups"], under
COUNTERS. A torch.optim.Adam/AdamW state_dict (no COUNTERS) is taken as a warm start for fp32 state.

Edits of opt.state between steps (_live.py checks them before a step changes anything): a state tensor replaced or
changed in place is taken if it has the dtype, size, device and layout the format gives and a state a run can
reach (the state file's checks), refused with the reason otherwise; a tensor of the parameter's size but another
shape is viewed in the parameter's shape; every parameter of a group losing its state (opt.state.clear(), a new
opt.state) restarts the group from zero moments and counts, as torch.optim restarts; some losing it is refused."""
import numbers

import torch

from .. import _cgad
from . import _q8_maps

# Each param group's key for its counters. A live param group holds it as None (state_dict() fills in the
# counters): torch.distributed.checkpoint's flattened optimizer state_dict (flatten_optimizer_state_dict=True, as
# torchtitan saves) rebuilds each loaded group from the keys of the live group it loads into, and would drop a key
# only state_dict() had.
COUNTERS = "cgad_counters"
# The param-group keys that fix the state's format and meaning: a state_dict must have been saved with the same.
FORMAT_KEYS = ("state", "rounding", "q8_semantics", "v_map", "min_q8_size")
# What a warm start from torch.optim.Adam/AdamW takes of its param groups, besides the moments and the step.
WARM_START_KEYS = ("lr", "betas", "eps", "weight_decay")
# torch.optim flags under which torch's exp_avg/exp_avg_sq mean something else than Adam's moments.
_WARM_START_REFUSED = ("amsgrad", "maximize")
# Every name a state format above gives a tensor's state, and AMSGrad's (torch's Adam): a state_dict entry holding
# one this optimizer's format does not have is another format's state, refused. Any other key of an entry is the
# user's (opt.state[p]["x"] = 1, as torch.optim keeps it): carried through state_dict() and load_state_dict() as
# given, read by no step ("step" is the counters').
STATE_NAMES = frozenset(("exp_avg", "exp_avg_sq", "momentum_buffer", "state1", "state2", "absmax1", "absmax2",
                         "max_exp_avg_sq"))


def moment_names(fmt, adam_family):
    """The names of a tensor's moments, with their absmax names for q8 codes (None otherwise)."""
    if fmt in ("fp32", "bf16"):
        return [("exp_avg", None), ("exp_avg_sq", None)] if adam_family else [("momentum_buffer", None)]
    return [(f"state{i}", f"absmax{i}" if fmt == "q8" else None) for i in range(1, 3 if adam_family else 2)]


def dtype_of(kind, name):
    """The torch dtype of state ``name`` in a tensor whose state shape is ``kind`` (CpuStepper.shape)."""
    if name.startswith("absmax"):
        return torch.float32
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "q8": torch.uint8, "fp32-fallback": torch.float32}[kind]


def fresh_state(shape, param, adam_family):
    """A tensor's zero state as torch tensors on the parameter's device (q8 codes at the map's code of 0, as the
    fast path's own state starts: fastpath/detail/host_state.hpp), and its "step"."""
    out = {"step": torch.tensor(0.0)}
    for m, (name, absmax) in enumerate(moment_names(shape["kind"], adam_family)):
        dtype = dtype_of(shape["kind"], name)
        if dtype == torch.uint8:
            out[name] = torch.full(param.shape, shape["initial_codes"][m], dtype=torch.uint8, device=param.device)
        else:
            out[name] = torch.zeros(param.shape, dtype=dtype, device=param.device)
        if absmax is not None:
            out[absmax] = torch.zeros(shape["absmax"], dtype=torch.float32, device=param.device)
    return out


def step_count(counters, fragment, adam_family):
    return counters["t"][fragment] if adam_family else counters["steps"]


def check_steps(states, first_fragments, counters, adam_family, where, which):
    """Before a step changes anything: each tensor's "step" must still say the fast path's count (refresh_steps
    fills it after the step). A Python number equal to it (bitsandbytes keeps an int) is taken, as the 0-dim
    float32 tensor torch keeps; a removed entry, another value or another kind is refused with the reason, since
    the count is the fast path's and only load_state_dict() changes it. Only the tensors in ``which`` are looked
    at: the others' "step" is the tensor refresh_steps filled, untouched since (_live.LiveState.steps_changed)."""
    for k in which:
        state = states[k]
        want = step_count(counters, first_fragments[k], adam_family)
        step = state.get("step")
        if isinstance(step, torch.Tensor) and step.dim() == 0 and step.dtype.is_floating_point and step == want:
            continue
        if isinstance(step, numbers.Real) and not isinstance(step, bool) and step == want:
            state["step"] = torch.tensor(float(want))
            continue
        shown = "removed" if "step" not in state else f"{step!r}"
        refuse(f"{where} parameter {k}", f"opt.state[p]['step'] is {shown}, the optimizer's step count is {want}; "
                                         "the count is the optimizer's own (load_state_dict() changes it), so "
                                         "nothing was stepped")


def refresh_steps(states, first_fragments, counters, adam_family):
    for state, fragment in zip(states, first_fragments):
        state["step"].fill_(step_count(counters, fragment, adam_family))


def counters_entry(optimizer_name, seed, counters, q8_codes=None):
    """A param group's entry: the optimizer and seed its state was made by, its counters and, where they are not the
    built-in ones, the q8 maps its codes are codes of (cgad.torch's q8_maps=), as two lists of 256 floats."""
    entry = {"optimizer": optimizer_name, "seed": seed, **counters}
    if q8_codes is not None:
        entry["q8_maps"] = [list(m) for m in q8_codes]
    return entry


def refuse(where, why):
    raise _cgad.InputError(f"{where}: {why}")


def check_saved_group(saved, ours, optimizer_name, seed, where, q8_codes=None):
    """Refuses a saved param group whose state another optimizer, format, seed or q8 maps (``q8_codes``: this
    group's, None for the built-in maps) made."""
    entry = saved[COUNTERS]
    if not isinstance(entry, dict):
        refuse(where, f"the state_dict's '{COUNTERS}' must be a dict, got {type(entry).__name__}")
    if entry.get("optimizer") != optimizer_name:
        refuse(where, f"the state_dict was saved by a {entry.get('optimizer')} optimizer, this is {optimizer_name}")
    if entry.get("seed") != seed:
        refuse(where, f"the state_dict's state was made with seed {entry.get('seed')!r}, this optimizer's is {seed}")
    saved_codes = _q8_maps.saved_codes(entry)
    if saved_codes != q8_codes:
        if saved_codes is None or q8_codes is None:
            named = {True: "the built-in q8 maps", False: "q8 maps of its own (q8_maps=)"}
            why = f"was quantized with {named[saved_codes is None]}, this optimizer has {named[q8_codes is None]}"
        else:
            why = "was quantized with other q8 maps than this optimizer's (q8_maps=)"
        refuse(where, f"the state_dict's state {why}; make the optimizer with the maps it was saved with")
    for key in FORMAT_KEYS:
        if saved.get(key) != ours.get(key):
            refuse(where, f"the state_dict's param group has {key}={saved.get(key)!r}, this one {key}="
                          f"{ours.get(key)!r} (another state format; make the optimizer with the saved one)")


def warm_start_group(saved, ours, where):
    """This param group with a torch.optim.Adam/AdamW group's hyperparameters; refuses what Adam's state cannot
    start (another state format, AMSGrad's or maximize's)."""
    if ours.get("state") != "fp32":
        refuse(where, f"a state_dict of torch.optim (no '{COUNTERS}') is a warm start for fp32 state only; this "
                      f"param group has state={ours.get('state')!r}")
    for flag in _WARM_START_REFUSED:
        if saved.get(flag):
            refuse(where, f"the state_dict's param group has {flag}=True; its state is not Adam's moments")
    return dict(ours, **{k: saved[k] for k in WARM_START_KEYS if k in saved})


def integral_step(value, where):
    """A saved "step" (a tensor, as torch's; an int, as bnb's) as an int >= 0."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        refuse(where, f"the state's step must be an integer >= 0, got {value!r}")
    return int(value)


def own_names(entry):
    """The names in a state entry that are state of some format (STATE_NAMES), not "step" or the user's."""
    return sorted(n for n in entry if n in STATE_NAMES)


def saved_entry(live_names, dtypes, shapes, saved, where):
    """The moments of a saved state entry to copy into a tensor's live state, by name (detached tensors), after
    refusing another set of names, dtype or size. ``dtypes``/``shapes``: the live state's per name. The moments
    keep their own dtype: never cast to the parameter's, as torch.optim's load_state_dict casts floating state (fp32
    moments of bf16 parameters stay fp32)."""
    if not isinstance(saved, dict):
        refuse(where, f"the state must be a dict of tensors, got {type(saved).__name__}")
    given = own_names(saved)
    if live_names != given:
        refuse(where, f"the state holds {given}, this optimizer's state format holds {live_names} (another state "
                      "format or optimizer)")
    out = {}
    for name in live_names:
        value = saved[name]
        if not isinstance(value, torch.Tensor):
            refuse(where, f"the state's {name} is a {type(value).__name__}, not a tensor")
        if value.dtype != dtypes[name] or value.shape != shapes[name]:
            refuse(where, f"the state's {name} is {value.dtype} of shape {tuple(value.shape)}, this optimizer's "
                          f"{dtypes[name]} of shape {tuple(shapes[name])}")
        out[name] = value.detach()
    return out


def user_keys(saved):
    """An entry's own keys (not STATE_NAMES, not "step"), which load_state_dict sets as given."""
    return {name: value for name, value in saved.items() if name != "step" and name not in STATE_NAMES}


def _tensors(state_dict):
    """(tensor, its local tensor) of every tensor of a state_dict's "state" (a DTensor's local shard is its memory)."""
    saved = state_dict.get("state") if isinstance(state_dict, dict) else None
    for entry in (saved.values() if isinstance(saved, dict) else ()):
        for t in (entry.values() if isinstance(entry, dict) else ()):
            if isinstance(t, torch.Tensor):
                local = t.to_local() if hasattr(t, "to_local") else t
                if local.numel() > 0:
                    yield t, local


def handed_out(state_dict):
    """What state_dict() hands out by reference, by memory: each state tensor's version counters (its own and its
    local tensor's: an in-place op on a DTensor advances the DTensor's), to tell later whether it was written."""
    return {local.data_ptr(): (t._version, local._version) for t, local in _tensors(state_dict)}


def written_since(state_dict, handed):
    """Whether a tensor of ``state_dict`` is one state_dict() handed out (``handed``: handed_out() of it) and has
    been written in place since -- as dcp.load fills the tensors get_optimizer_state_dict returned."""
    return any(local.data_ptr() in handed and handed[local.data_ptr()] != (t._version, local._version)
               for t, local in _tensors(state_dict))


def pack(param_groups, state):
    """torch.optim.Optimizer.state_dict()'s layout without its hooks (_hooks.py runs them): each group with its
    parameters as indices in order of appearance, and the state by those indices -- the entries themselves, so
    the tensors are references to the live state. A key of ``state`` that is not a tensor (torch's own hook tests
    put opt.state["test"] = 1) is kept as it is, as torch keeps it."""
    index, start = {}, 0
    groups = []
    for group in param_groups:
        packed = {k: v for k, v in group.items() if k != "params"}
        for i, p in enumerate(group["params"], start):  # positions, as torch numbers them (a repeat keeps its first)
            index.setdefault(id(p), i)
        packed["params"] = [index[id(p)] for p in group["params"]]
        start += len(packed["params"])
        groups.append(packed)
    for k in state:
        if isinstance(k, torch.Tensor) and id(k) not in index:
            raise _cgad.InputError(f"opt.state holds the state of a tensor of shape {tuple(k.shape)} that is no "
                                   "parameter of param_groups (a parameter replaced in param_groups?); put "
                                   "parameters in through add_param_group or a new optimizer")
    packed_state = {(index[id(k)] if isinstance(k, torch.Tensor) else k): v for k, v in state.items()}
    return {"state": packed_state, "param_groups": groups}
