"""A param group's state as it lives in ``opt.state``: torch tensors on the parameters' device (CPU or CUDA) whose
data pointers each step hands the fast path (fastpath/table_stepper.hpp, cuda_table_stepper.hpp), read anew from
``opt.state`` before every step. What torch ops did to them since the last step or load is seen through each
tensor's identity, data pointer and version counter (``_version``, which every in-place op, ``set_`` and ``resize_``
advance), compared for all tensors at once by the compiled module (``_cgad.StateKeys``, python/src/state_keys.cpp:
no Python bytecode per tensor on a step where nothing changed), and only a changed tensor is checked -- its dtype,
size, device and layout, and its values by the state file's rules (CpuStepper.check_states, on host copies of a
CUDA group's) -- so an impossible state is refused before anything changes.
"""
import operator
import re

import torch

from .. import _cgad
from . import _dtensor, _state


def refuse(where, why):
    raise _cgad.InputError(f"{where}: {why}")


class LiveState:
    """The state of one fast-path optimizer's tensors (``params``, in its layout) in ``opt.state``. A DTensor
    parameter's entry holds DTensors (_dtensor.wrap); every check and every pointer is its local tensors'
    (_dtensor.local_state), so an edit of a state DTensor is seen as an edit of a plain state tensor."""

    def __init__(self, engine, params, adam_family):
        self.engine = engine
        self.params = list(params)  # the tensors the state was made for: opt.state's keys
        self.shards = [_dtensor.local(p) for p in self.params]  # what the fast path steps of each
        self.dtensor = any(map(_dtensor.is_dtensor, self.params))
        self.adam_family = adam_family
        self.shapes = [engine.shape(k) for k in range(len(self.params))]
        self.names = [_state.moment_names(s["kind"], adam_family) for s in self.shapes]
        self.own = [sorted(n for pair in names for n in pair if n is not None) for names in self.names]
        # The tensors whose state check_stepped() reads before every step: those whose check costs next to nothing
        # beside the step -- q8 codes (any byte is valid: only the absmax, one per 256-element block, are read)
        # and a q8 configuration's fp32 fallback (tensors under min_q8_size). A tensor of fp32 or bf16 state is
        # not: checking its every (m, v) pair took 13 times the step (docs/python.md, "Edits of opt.state").
        self.checked_each_step = [s["kind"] in ("q8", "fp32-fallback") for s in self.shapes]
        self.seen = _cgad.StateKeys(self.own, torch.Tensor, True)  # the state tensors when last taken
        self.step_seen = _cgad.StateKeys([["step"]] * len(self.params), torch.Tensor, False)  # when last filled
        self.pointers = [None] * len(self.params)  # per tensor: buffers() of the entry last taken
        self.versions = [None] * len(self.params)  # per tensor: its state DTensors' _dtensor.versions() when taken

    def fresh(self, k):
        state = _state.fresh_state(self.shapes[k], self.shards[k], self.adam_family)
        return {name: t if name == "step" else _dtensor.wrap(t, self.params[k]) for name, t in state.items()}

    def local(self, k, entry):
        """Tensor k's entry with its state DTensors by their local tensors (the entry itself for a plain one)."""
        return _dtensor.local_state(entry, self.params[k], self.own[k])

    def dtype(self, k, name):
        return _state.dtype_of(self.shapes[k]["kind"], name)

    def size(self, k, name):
        return self.shapes[k]["absmax"] if name.startswith("absmax") else self.shapes[k]["values"]

    def shape(self, k, name):
        return (self.shapes[k]["absmax"],) if name.startswith("absmax") else tuple(self.shards[k].shape)

    def buffers(self, k, entry):
        """Tensor k's state buffer pointers in the order CpuStepper takes them (values, absmax per moment)."""
        out = []
        for name, absmax in self.names[k]:
            out += [entry[name].data_ptr(), 0 if absmax is None else entry[absmax].data_ptr()]
        return out

    def record(self, k, entry):
        """Takes tensor k's entry (as opt.state holds it) as checked: its tensors' keys, and their pointers
        (pointers(k) until it changes)."""
        if self.dtensor:
            self.versions[k] = _dtensor.versions(entry, self.own[k])
            entry = self.local(k, entry)
        self.seen.record(k, entry, self.shards[k])
        self.pointers[k] = self.buffers(k, entry)

    def record_steps(self, entries):
        """After the "step" tensors were filled with the counts (_state.refresh_steps)."""
        self.step_seen.record_all(entries, self.shards)

    def steps_changed(self, entries):
        """The tensors whose "step" is not the tensor last filled, untouched since: only these _state.check_steps
        compares with the count (a comparison of a tensor per parameter, the largest cost of a step on small
        tensors)."""
        return self.step_seen.stale(entries, self.shards)

    def entries(self, state, group_params, where, counters_reset):
        """Tensor k's entry of ``state`` (opt.state) for every k, checked, after taking what changed since the last
        step or load: the state the next step reads. ``counters_reset`` restarts the counts (a group reset)."""
        if not all(map(operator.is_, group_params, self.params)):
            k = next(k for k, (p, q) in enumerate(zip(group_params, self.params)) if p is not q)
            refuse(where, f"parameter {k} is another tensor than the one its optimizer state was made for (a "
                          "tensor put into param_groups by hand); cgad.torch keeps the state of the tensors it was "
                          "given -- update a parameter in place (p.data = ..., p.copy_(...)) or make a new optimizer "
                          "for new ones")
        raw = list(map(state.get, self.params)) if isinstance(state, dict) else [None] * len(self.params)
        got = [self.local(k, entry) for k, entry in enumerate(raw)] if self.dtensor else raw
        # Changed: an entry not as last taken -- another tensor, memory or version, a name removed, or a parameter
        # reshaped since (p.data = p.data.view(...)), whose moments then follow it. Every test below looks at these
        # only: an entry unchanged since it was taken passed them then.
        changed = self.seen.stale(got, self.shards)
        if self.dtensor:  # an in-place op on a state DTensor advances its version, not its local tensor's
            changed = sorted(set(changed).union(k for k, entry in enumerate(raw)
                                                if _dtensor.versions(entry, self.own[k]) != self.versions[k]))
        if not changed:
            return got
        present = {k: [n for n in self.own[k] if isinstance(got[k], dict) and n in got[k]] for k in changed}
        for k in changed:
            if present[k] and len(present[k]) != len(self.own[k]):
                missing = [n for n in self.own[k] if n not in present[k]]
                refuse(where, f"parameter {k}'s state has no {missing} (removed from opt.state[p]); its format "
                              f"holds {self.own[k]} -- nothing was stepped (opt.state.clear() restarts the whole "
                              "optimizer from zero)")
        lost = [k for k in changed if not present[k]]
        if lost and len(lost) != len(got):
            refuse(where, f"the state of parameter(s) {lost} was removed from opt.state while the others of the "
                          "param group keep theirs; cgad steps a group's tensors with one step count, so it cannot "
                          "restart some of them -- nothing was stepped (opt.state.clear() restarts every group)")
        if lost:
            for k, p in enumerate(self.params):
                entry = raw[k] if isinstance(raw[k], dict) else {}
                entry.update(self.fresh(k))
                state[p] = entry
                got[k] = self.local(k, entry)
                self.record(k, entry)
            counters_reset()
            return got
        for k in changed:
            self._check_tensors(k, got[k], raw[k], where)
        self._check_values(changed, got, where)
        for k in changed:
            self.record(k, raw[k])
        return got

    def _check_tensors(self, k, entry, raw, where):
        """Tensor k's state tensors (``entry``: by their local tensors; ``raw``: as opt.state holds them) have the
        dtype, size, device and layout its format gives, and a DTensor parameter's are DTensors of its mesh and
        placements; one of the parameter's size and another shape is replaced by a view of the parameter's shape
        (the parameter was reshaped: p.data = p.data.view(...))."""
        p = self.shards[k]
        for name in self.own[k]:
            t = entry[name]
            label = f"parameter {k}'s opt.state[p][{name!r}]"
            if self.dtensor and t is raw[name]:  # not a DTensor of the parameter's mesh and placements
                given = f"a DTensor with placements {list(t.placements)}" if _dtensor.is_dtensor(t) else \
                    f"a {type(t).__name__}"
                refuse(where, f"{label} is {given}; a DTensor parameter's state is DTensors of its mesh and "
                              f"placements {list(self.params[k].placements)} -- nothing was stepped")
            if not isinstance(t, torch.Tensor) or type(t) is not torch.Tensor:
                refuse(where, f"{label} is a {type(t).__name__}, not a plain tensor -- nothing was stepped")
            if t.dtype != self.dtype(k, name) or t.numel() != self.size(k, name) or t.device != p.device or \
                    t.layout != torch.strided or not t.is_contiguous():
                refuse(where, f"{label} is a {'' if t.is_contiguous() else 'non-contiguous '}{t.dtype} tensor of "
                              f"shape {tuple(t.shape)} on {t.device}; the state format needs a contiguous "
                              f"{self.dtype(k, name)} tensor of shape {self.shape(k, name)} on {p.device} -- "
                              "nothing was stepped")
            if tuple(t.shape) != self.shape(k, name) and p.numel() == self.shapes[k]["values"]:
                entry[name] = t.view(self.shape(k, name))  # (a parameter of another size is refused by the step)

    def check_stepped(self, buffers, where):
        """Before every CPU step: the values of the q8 state it reads (``buffers``: per tensor, pointers() of its
        entry, or [] for a tensor left out; checked_each_step says which tensors), by the state file's rules as an
        edit is, whether or not the entry changed. A write that advances no version counter -- ``.data.fill_()``,
        ``.data.copy_()``, ``.numpy()[:] = ...``, an in-place op on ``.data`` -- leaves the entry looking untouched
        (entries() takes it as it was), and an absmax made NaN or negative that way would turn the step's
        parameters into NaN while it reports "applied": refused here instead, before anything changes. No Python
        call per tensor (the compiled check walks the tensors)."""
        which = [k for k, b in enumerate(buffers) if b and self.checked_each_step[k]]
        if which:
            _check_buffers(self.engine, buffers, which, where, self._labels(which))

    def _check_values(self, which, entries, where):
        host = {k: self.on_host(k, entries[k]) for k in which}  # held while the check reads them
        buffers = [self.buffers(k, host[k]) if k in which else [] for k in range(len(entries))]
        _check_buffers(self.engine, buffers, which, where, self._labels(which))

    def invalid(self, entries):
        """(k, why) for each tensor k whose state in ``entries`` (the ones the step just read) the state file's
        rules refuse: where a step found elements with invalid state (block_step.hpp's guard) it left them as they
        were, so they are still there. The compiled check, one tensor at a time, only on this failure path; a
        tensor whose state passes has a NaN/Inf parameter value (an invalid θ is left as it is too)."""
        found = []
        for k, entry in enumerate(entries):
            host = self.on_host(k, entry)
            buffers = [self.buffers(k, host) if j == k else [] for j in range(len(entries))]
            try:
                self.engine.check_states(buffers, [k])
            except _cgad.InputError as e:
                why = str(e).replace(f"tensor {k}'s state ", "", 1)
                found.append((k, f"opt.state[p]{''.join(f'[{n!r}]' for n in self._keys_in(k, why))} {why}"))
                continue
            if not bool(torch.isfinite(self.shards[k]).all()):
                found.append((k, "holds NaN/Inf values itself"))
        return found

    def _keys_in(self, k, why):
        """The state keys of tensor k that check_states' message ``why`` names (state_contents.cpp's wording: the
        moment's letter, after "absmax ... of" for a q8 absmax; an (m, v) pair names both)."""
        letters = ["m", "v"] if self.adam_family else ["b"]
        found = re.search(r"impossible (?:q8 absmax \d+ = \S+ of ([mvb])\b|\S+ ([mvb])\[|\S+ (pair))", why)
        if found is None:
            return self.own[k]
        absmax, value, pair = found.groups()
        if pair:
            return [values for values, _ in self.names[k]]
        names = self.names[k][letters.index(absmax or value)]
        return [names[1] if absmax else names[0]]

    def _labels(self, which):
        return {k: f"parameter {k}" for k in which}

    def read(self, entry, k, name):
        """Tensor k's moment ``name`` ("m", "v" or "b") dequantized to float32 (a NumPy array)."""
        moment = {"m": 0, "v": 1, "b": 0}.get(name)
        if moment is None or (name == "b") == self.adam_family:
            raise _cgad.InputError(f"no state buffer {name!r} (this optimizer has "
                                   f"{['m', 'v'] if self.adam_family else ['b']})")
        return self.engine.read_state(self.buffers(k, self.on_host(k, entry)), k, moment)

    def on_host(self, k, entry):
        """Tensor k's state tensors where the fast path's checks and reads (CpuStepper) can read them: as they are
        on the CPU, copies of a CUDA parameter's (which wait for the device)."""
        if self.shards[k].device.type == "cpu":
            return entry
        return {name: entry[name].to("cpu") for name in self.own[k]}


def _check_buffers(engine, buffers, which, where, labels):
    """The fast path's check of the values (finite, in range, m bounded by v), naming the parameter."""
    try:
        engine.check_states(buffers, sorted(which))
    except _cgad.InputError as e:
        message = str(e)
        for k in sorted(which, reverse=True):
            message = message.replace(f"tensor {k}'s state", f"{labels[k]}'s state", 1)
        refuse(where, f"{message} -- nothing was stepped or loaded")


def invalid_state_message(name, found):
    """The one-line error of an applied step whose param groups (``found``: (where, [(k, why)], count) each)
    reported elements with invalid state, naming each parameter and state key (docs/python.md, "Edits of
    opt.state")."""
    parts = "; ".join(f"{w}: parameter {k}'s {why}" for w, places, _ in found for k, why in places)
    count = sum(c for _, _, c in found)
    return (f"{name}: {count} element(s) had invalid state when stepped -- {parts or 'no state found invalid'}. "
            "The state was written past its version counter (.data, .numpy(), a copy_ into .data), which "
            "cgad.torch checks only when the counter moves. The step was applied: the elements with invalid state "
            "were left as they were (parameter and state), every other element stepped and the step was counted; "
            "put the state right (or opt.state.clear()) before the next step")


def check_saved(engine, live, moments, where):
    """Refuses saved moments (``moments[k]``: {name: tensor} or None) holding a state no run reaches, reading them
    where they lie (copies only where one is not a contiguous CPU tensor: a state_dict loaded onto another device)."""
    held, buffers, which = [], [], []
    for k, saved in enumerate(moments):
        if saved is None:
            buffers.append([])
            continue
        entry = {name: t.to("cpu").contiguous() for name, t in saved.items()}  # the check reads host memory
        held.append(entry)
        buffers.append(live.buffers(k, entry))
        which.append(k)
    if which:
        _check_buffers(engine, buffers, which, where, {k: f"parameter {k}" for k in which})
