"""One fast-path optimizer per torch param group (per dtype in a group mixing float32 and bfloat16 parameters), over
the group's tensors, which both backends step where they lie (the fast path's tensor-table step: a pointer per
parameter, per pseudo-gradient and per state tensor; fastpath/table_stepper.hpp on the CPU, cuda_table_stepper.hpp on
CUDA, one seam). opt.state[p] is the state the steps use on either backend: torch tensors allocated by torch on the
parameter's device (_state.py, _live.py). The groups of one CPU optimizer share one thread pool; a CUDA group runs on
torch's current stream and waits for nothing."""
import torch

from .. import _cgad
from . import _dtensor, _formed, _live, _state
from ._report import REFUSED, GroupReport, LazyStepReport, combine, group_report, no_gradient
from ._tensors import (PARAM_FORMATS, backend, check_count, check_no_aliasing, gradients, group_layout, held, named,
                       param_pointers)


class Group:
    """The fast-path optimizer of one param group, on the CPU or on CUDA. ``spec`` is its configuration as text
    (step_config.cpp). Its state is opt.state's tensors (_live.py), read anew before each step; ``states`` the
    initial entries. The state's values are checked and read by a CpuStepper of the group's layout (``host``: the
    CPU group's own stepper), on host copies for a CUDA group. A parameter without a gradient is left out of the
    step (a null table entry) on either backend."""

    def __init__(self, spec, params, pool, where):
        self.mesh = _dtensor.group_mesh(params, where)  # DTensor parameters': their local shards are stepped
        self.empty = not params  # torch takes an empty group: it steps nothing and fixes no backend or mesh
        self.layout = group_layout([_dtensor.local(p) for p in params], where)
        fmt, device, sizes = self.layout
        self.spec = dict(spec, params=fmt)
        if self.mesh is not None and self.spec["state"] == "q8":
            _dtensor.check_even(params, where)
        self.adam_family = self.spec["optimizer"] not in ("nesterov", "sdm")
        self.sizes = sizes
        self.formed = None  # what form() recorded of Δ for the next step (formed_unchanged takes it once)
        try:  # [(offset, size)], as the fast path cuts; P non-empty ranges (none for an empty group's P >= 2)
            self.fragments = _cgad.fragment_bounds(self.spec, sizes)
            self.schedule = _cgad.Schedule(self.spec)  # the report's zero gate (_report.group_report)
        except _cgad.InputError as e:
            raise _cgad.InputError(f"{where}: {e}") from None
        self.begins = [0]
        for size in sizes:
            self.begins.append(self.begins[-1] + size)
        self.device = device
        self.cuda = backend(device, where) == "cuda"
        # The CPU steppers' thread pool: the optimizer's, shared by its CPU groups; a CUDA group's host checks run
        # on the calling thread alone (a pool of one starts no worker).
        self.host_pool = pool() if not self.cuda else _cgad.ThreadPool(1)
        if self.cuda:
            self.engine = _cgad.CudaStepper(self.spec, self.sizes, self.stream())
            self.veto = _veto(self.device, self.stream())  # made here, outside any capture (it allocates)
            self.host = _cgad.CpuStepper(self.spec, self.sizes, self.host_pool)
        else:
            self.engine = self.host = _cgad.CpuStepper(self.spec, self.sizes, self.host_pool)
        self.live = _live.LiveState(self.host, params, self.adam_family)
        self.states = [self.live.fresh(k) for k in range(len(params))]
        for k, entry in enumerate(self.states):
            self.live.record(k, entry)
        self.first_fragments = [self.first_fragment(k) for k in range(len(self.sizes))]
        self.entries = self.states  # opt.state's entries as the last step or state_dict() took them

    def stream(self):
        """torch's current stream on a CUDA group's device, as the integer the fast path takes (on torch's current
        stream, not the legacy default one, which a capture on another stream forbids)."""
        return torch.cuda.current_stream(self.device).cuda_stream

    def raw_counters(self):
        """The counters as the state file holds them (a CUDA group's wait for its steps)."""
        return self.engine.raw_counters(self.stream()) if self.cuda else self.engine.raw_counters()

    def counters(self):
        """The fast path's named counters ("t", "age"; a CUDA group's wait for its steps)."""
        return self.engine.counters(self.stream()) if self.cuda else self.engine.counters()

    def set_raw_counters(self, counters):
        if self.cuda:
            self.engine.set_raw_counters(counters, self.stream())
        else:
            self.engine.set_raw_counters(counters)

    def tensors_in(self, fragment, where):
        """Indices of the non-empty tensors with elements in ``fragment``."""
        if not 0 <= fragment < len(self.fragments):
            raise _cgad.InputError(f"{where}: fragment {fragment} does not exist (there are {len(self.fragments)})")
        offset, size = self.fragments[fragment]
        return [k for k in range(len(self.sizes))
                if self.sizes[k] > 0 and self.begins[k] < offset + size and self.begins[k + 1] > offset]

    def locate(self, fragment, index):
        """(tensor, flat index in it) of element ``index`` of ``fragment`` (a report's nonfinite_index)."""
        at = self.fragments[fragment][0] + index
        for k in range(len(self.sizes)):
            if self.begins[k] <= at < self.begins[k + 1]:
                return k, at - self.begins[k]
        raise AssertionError("element outside the parameter vector")

    def first_fragment(self, k):
        """The fragment holding tensor k's first element (the last one for an empty tensor at the end)."""
        begin = self.begins[k]
        return next((f for f, (offset, size) in enumerate(self.fragments) if begin < offset + size),
                    len(self.fragments) - 1)

    def configure(self, spec, where):
        """Takes the group's hyperparameters for the next step (an lr schedule): a no-op when unchanged. A changed
        state format (_state.FORMAT_KEYS) is refused, by the fast path, since the state was made in the old one."""
        spec = dict(spec, params=self.spec["params"])
        if spec != self.spec:
            try:
                if self.cuda:
                    self.engine.set_hyperparameters(spec, self.stream())
                self.host.set_hyperparameters(spec)  # the state's reach (its checks) depends on the betas
                schedule = _cgad.Schedule(spec)  # taken by the steppers above: α or τ_cut may have changed
            except _cgad.InputError as e:
                raise _cgad.InputError(f"{where}: {e}") from None
            self.spec, self.schedule = spec, schedule

    def advance_round(self):
        """Ends an outer round for PA-CGAD's ages."""
        if self.cuda:
            self.engine.advance_round(self.stream())
        else:
            self.engine.advance_round()

    def _zero_counters(self):
        return {"t": [0] * len(self.fragments), "last_sync": [-1] * len(self.fragments), "round": 0, "steps": 0}

    def current(self, state, params, where):
        """The entries of opt.state the next step reads, checked (_live.LiveState.entries); a group whose every
        entry was removed restarts from zero."""
        check_count(params, len(self.sizes), where)
        self.entries = self.live.entries(state, params, where, lambda: self.set_raw_counters(self._zero_counters()))
        return self.entries

    def prepare(self, params, fragment, where, state):
        """The event's operands (parameter, gradient and state pointers, with tensors that keep the memory they
        point to alive until the step has ended), or None when the group has no pseudo-gradient to apply. A CUDA
        group's "step" entries are not compared with the count here (that would wait for the device): state_dict()
        and load_state_dict() bring them up to date."""
        entries = self.current(state, params, where)
        if not self.cuda:
            _state.check_steps(entries, self.first_fragments, self.engine.raw_counters(), self.adam_family, where,
                               self.live.steps_changed(entries))
        if self.mesh is not None:  # a "step" check_steps replaced went into the local view of the entry
            for p, entry in zip(params, entries):
                state[p]["step"] = entry["step"]
        views = held([_dtensor.local(p) for p in params])
        ptrs = param_pointers(views, self.layout, where)
        sources = params if self.mesh is None else _dtensor.gradient_sources(params, where)
        gathered = gradients(sources, self.tensors_in(fragment, where), where)
        if gathered is None:
            return None
        grads, missing = gathered
        buffers = [[] if g is None else self.live.pointers[k] for k, g in enumerate(grads)]
        if not self.cuda:  # every state the step reads is checked, however it was written
            self.live.check_stepped(buffers, where)
        # The entries' tensors as they are now: another thread may replace opt.state[p][...] while the step runs,
        # and these keep the memory the step writes alive.
        held_state = [dict(e) for e in entries]
        return (ptrs, [0 if g is None else g.data_ptr() for g in grads], grads, views, missing, buffers, entries,
                held_state)

    def export(self):
        """What the group's entry in state_dict()["param_groups"] carries besides torch's keys; a CUDA group's
        "step" entries are brought up to date with it."""
        counters = self.raw_counters()
        if self.cuda:  # the entries current() took (state_dict() calls it first)
            _state.refresh_steps(self.entries, self.first_fragments, counters, self.adam_family)
            self.live.record_steps(self.entries)
        entry = _state.counters_entry(self.spec["optimizer"], self.spec["seed"], counters, self.spec.get("q8_codes"))
        layouts = self._q8_layouts()
        if any(layouts):  # q8 state of sharded DTensors: the sharding its absmax blocks were made under
            entry[_Q8_SHARDS] = layouts
        return entry

    def _q8_layouts(self):
        """Per tensor: the sharding its q8 codes' absmax blocks follow (_dtensor.block_layout), None for another
        state format (fp32, bf16, a tensor under min_q8_size) or an unsplit parameter."""
        return [_dtensor.block_layout(p) if shape["kind"] == "q8" else None
                for p, shape in zip(self.live.params, self.live.shapes)]

    def check_load(self, saved, entry, where, spec):
        """Checks a state_dict's state for this group, changing nothing: ``saved[k]`` tensor k's entry (None: none
        saved), ``entry`` the group's export() (None for a torch.optim.Adam/AdamW warm start, whose "step" then
        gives the counters), ``spec`` the hyperparameters it loads with (the state's reach depends on the betas).
        Returns what load() takes."""
        spec = dict(spec, params=self.spec["params"])
        checker = self.host if spec == self.spec else _cgad.CpuStepper(spec, self.sizes, self.host_pool)
        if entry is None:
            steps = {_state.integral_step(state.get("step", 0), f"{where} parameter {k}")
                     for k, state in enumerate(saved) if isinstance(state, dict)}
            if len(steps) > 1:
                _state.refuse(where, f"the state's parameters have different step counts {sorted(steps)}; cgad "
                                     "steps a param group's tensors together, with one count")
            t = steps.pop() if steps else 0
            fragments = len(self.fragments)
            counters = {"t": [t] * fragments, "last_sync": [-1] * fragments, "round": 0, "steps": t}
        else:
            counters = {k: entry.get(k) for k in ("t", "last_sync", "round", "steps")}
        before = checker.raw_counters()
        try:
            checker.set_raw_counters(counters)  # its checks; put back below
        except _cgad.InputError as e:
            raise _cgad.InputError(f"{where}: the state_dict's '{_state.COUNTERS}': {e}") from None
        finally:
            checker.set_raw_counters(before)
        counted = counters["steps"] != 0 or any(counters["t"])
        # The sharding q8 state was made under (absent: unsplit; a warm start from torch.optim is fp32 state).
        layouts = (entry or {}).get(_Q8_SHARDS) or [None] * len(saved)
        if not isinstance(layouts, list) or len(layouts) != len(saved):
            _state.refuse(where, f"the state_dict's '{_Q8_SHARDS}' must be a list of {len(saved)} entries, got "
                                 f"{layouts!r}")
        moments = []
        for k, state in enumerate(saved):
            if state is None:
                if counted:
                    _state.refuse(where, f"the state_dict has no state for parameter {k} while its group's counters "
                                         f"say {counters['steps']} steps were applied (a state_dict of other "
                                         "parameters, keyed otherwise, or cut short); nothing was loaded")
                moments.append(None)
                continue
            state = self.live.local(k, state)  # a DTensor parameter's saved state by its local tensors
            for name in self.live.own[k]:
                if not _dtensor.is_dtensor(state.get(name)):
                    continue
                if self.mesh is None:
                    _state.refuse(f"{where} parameter {k}", f"the state's {name} is a DTensor with placements "
                                  f"{list(state[name].placements)} and the parameter a plain tensor; load it into "
                                  "DTensor parameters of that mesh and placements, or give plain state (the "
                                  "DTensor's full_tensor())")
                _state.refuse(f"{where} parameter {k}", f"the state's {name} is a DTensor with placements "
                              f"{list(state[name].placements)}, the parameter's state has placements "
                              f"{list(self.live.params[k].placements)} (redistribute it first)")
            if self.live.shapes[k]["kind"] == "q8":
                _dtensor.check_block_layout(layouts[k], self.live.params[k], f"{where} parameter {k}")
            dtypes = {n: self.live.dtype(k, n) for n in self.live.own[k]}
            shapes = {n: self.live.shape(k, n) for n in self.live.own[k]}
            moments.append(_state.saved_entry(self.live.own[k], dtypes, shapes, state, f"{where} parameter {k}"))
        # The state file's checks of what a run can reach (finite, in range, m bounded by v: fastpath/src/
        # state_contents.cpp), on the saved tensors where they lie: a hand-made state must not send theta to -Inf.
        _live.check_saved(checker, self.live, moments, where)
        users = [_state.user_keys(state) if isinstance(state, dict) else {} for state in saved]
        return counters, moments, users

    def load(self, checked, state):
        """Takes what check_load() accepted: the moments copied into opt.state's tensors where they fit (so that
        references taken before stay live), new ones where an entry lost them."""
        counters, moments, users = checked
        self.set_raw_counters(counters)
        for k, p in enumerate(self.live.params):
            entry = state.get(p) if isinstance(state.get(p), dict) else {}
            fresh = self.live.local(k, self.live.fresh(k))
            taken = self.live.local(k, entry)  # a DTensor parameter's state by its local tensors
            for name in self.live.own[k]:
                target = taken.get(name)
                if not self._fits(k, name, target):
                    target = fresh[name]
                if tuple(target.shape) != self.live.shape(k, name):
                    target = target.view(self.live.shape(k, name))
                if moments[k] is None:
                    target.copy_(fresh[name])
                else:
                    target.copy_(moments[k][name])
                if target is not taken.get(name):
                    entry[name] = _dtensor.wrap(target, p)
            if not (isinstance(entry.get("step"), torch.Tensor) and entry["step"].dim() == 0 and
                    entry["step"].dtype.is_floating_point):
                entry["step"] = torch.tensor(0.0)
            entry.update(users[k])
            state[p] = entry
            self.live.record(k, entry)
        entries = [state[p] for p in self.live.params]
        _state.refresh_steps(entries, self.first_fragments, counters, self.adam_family)
        self.live.record_steps(entries)

    def _fits(self, k, name, t):
        return type(t) is torch.Tensor and t.dtype == self.live.dtype(k, name) and \
            t.numel() == self.live.size(k, name) and t.device == self.live.shards[k].device and t.is_contiguous()

    def read_state(self, k, name, state):
        """Tensor k's state buffer ``name`` ("m", "v", "b") dequantized to float32 (a NumPy array)."""
        entries = self.current(state, self.live.params, "state_buffer")
        return self.live.read(entries[k], k, name)

    def read_states(self, name, state):
        entries = self.current(state, self.live.params, "trap_stats")
        return [self.live.read(entries[k], k, name) for k in range(len(entries))]

    def invalid_state(self):
        """After a step that reported elements with invalid state: (k, why) for each parameter k whose state
        (opt.state's entries the step read) holds it (_live.LiveState.invalid)."""
        return self.live.invalid(self.entries)

    def form(self, params, starts):
        """p.grad = θ_start − θ (the gradients ready, _formed.gradient_buffers); a CPU group of float32 parameters
        forms them in the pass that looks at Δ for its next step, which then needs no scan (_formed.py)."""
        if self.cuda or self.mesh is not None or self.spec["params"] != "fp32":
            _formed.by_torch(params, starts)
            self.formed = None
        else:
            self.formed = _formed.by_engine(self.engine, params, starts)

    def formed_unchanged(self, params):
        """Whether this step's Δ is the one form() wrote and looked at, unchanged since (then taken, once)."""
        record, self.formed = self.formed, None
        return _formed.unchanged(record, params)

    def preview(self, prepared, tau, fragment):
        """A CPU group's look at the event, changing nothing (CUDA groups preview on the device: step_cuda_event)."""
        return self.engine.preview(prepared[1], tau, fragment)

    def step(self, params, prepared, tau, fragment, reuse_preview=False):
        """The group's step on its own, its report read at once (a CUDA group's waits for it). A parameter without a
        gradient is left out (null pointers): its values and state stay as they are, as torch.optim leaves them.
        The group's step count still advances (one count per group)."""
        if self.cuda:
            ticket = self.engine.step(prepared[0], prepared[1], prepared[5], tau, fragment, self.stream())
            report = self.engine.report(ticket, self.stream())[0]
        else:
            report = self.engine.step(prepared[0], prepared[1], prepared[5], tau, fragment, reuse_preview)
        if report["applied"]:
            _state.refresh_steps(prepared[6], self.first_fragments, self.raw_counters(), self.adam_family)
            self.live.record_steps(prepared[6])
        return report


# One veto word per CUDA device, shared by every cgad.torch optimizer's events on it: an event clears it before its
# previews and marks its end after its steps, and the veto orders each event after the previous one's end, on
# whatever streams they ran (cuda_table_stepper.hpp's CudaEventVeto).
_VETOES = {}
# The key of a group's counters entry (export) that records, per tensor, the sharding its q8 state's absmax blocks
# were made under (_dtensor.block_layout); present only where some tensor's is not None.
_Q8_SHARDS = "q8_shards"


def _veto(device, stream):
    key = device.index if device.index is not None else torch.cuda.current_device()
    if key not in _VETOES:
        with torch.cuda.device(key):
            _VETOES[key] = _cgad.CudaEventVeto(stream)
    return _VETOES[key]


def step_cuda_event(groups, tau, fragment, first_param, loss):
    """One event over CUDA param groups, ``groups`` a list of (Group, prepared or None), enqueued on torch's current
    stream with no host sync: one group steps alone; several preview the event against one shared veto first and
    then step it, the update and the commit doing nothing anywhere when any group refused it (a NaN/Inf or
    overflowing pseudo-gradient changes no group, as on the CPU). The report is a LazyStepReport, each group's read
    on first access exactly as the CPU path builds it (a refused group's report, the others refused with it)."""
    stepped = [(fast, prepared) for fast, prepared in groups if prepared is not None]
    tickets, stream = {}, None
    if len(stepped) == 1:
        fast, prepared = stepped[0]
        stream = fast.stream()
        tickets[id(fast)] = fast.engine.step(prepared[0], prepared[1], prepared[5], tau, fragment, stream)
    elif stepped:
        stream = stepped[0][0].stream()
        veto = stepped[0][0].veto
        veto.reset(stream)
        for fast, prepared in stepped:
            fast.engine.preview(prepared[1], tau, fragment, veto, stream)
        for fast, prepared in stepped:
            tickets[id(fast)] = fast.engine.step_previewed(prepared[0], prepared[1], prepared[5], veto, stream)
        veto.finish(stream)
    # The report needs each group and its ticket, not the operands: their memory (parameters, gradients and the
    # state tensors) is torch's caching allocator's, freed in the order of the stream the steps were enqueued on, so
    # it is not reused before they end.
    pending = [(fast, tickets.get(id(fast))) for fast, _ in groups]
    several = len(stepped) > 1

    def resolve():
        own = [no_gradient(tau) if ticket is None else
               group_report(fast.engine.report(ticket, stream)[0], fast, fragment) for fast, ticket in pending]
        refused = next((r for r in own if r.reason in REFUSED), None)
        if refused is not None and several:
            others = GroupReport(False, refused.reason, 0.0, tau, None, None)
            own = [r if r is refused else others for r in own]
        return combine(own, first_param, loss)

    return LazyStepReport(resolve, loss)


class SplitGroup:
    """A param group mixing float32 and bfloat16 parameters (a bf16 model with fp32 LayerNorms): one fast-path
    optimizer stores one parameter format, so the group is one Group per dtype, stepped as one event -- an
    event refused in either changes neither, as across param groups. Its counters() are its first dtype's. Not
    for PA-CGAD, whose fragments cut the group's tensors concatenated."""

    @property
    def spec(self):
        """The group's configuration as its first dtype's part has it (the parts differ only in params)."""
        return self.parts[0].spec

    @property
    def schedule(self):
        return self.parts[0].schedule

    def __init__(self, spec, params, pool, where):
        check_no_aliasing(named(params), where)
        members = {}
        for i, p in enumerate(params):
            members.setdefault(p.dtype, []).append(i)
        self.members = list(members.values())
        self.parts = [Group(spec, [params[i] for i in m], pool, where) for m in self.members]
        self.cuda = False
        self.empty = False
        self.mesh = self.parts[0].mesh
        self.adam_family = self.parts[0].adam_family
        self.states = [None] * len(params)
        self.offsets = [0]  # each part's first element in the parts' tensors one after the other
        for m, part in zip(self.members, self.parts):
            for i, state in zip(m, part.states):
                self.states[i] = state
            self.offsets.append(self.offsets[-1] + sum(part.sizes))

    def counters(self):
        return self.parts[0].counters()

    def _each(self, params, prepared=None):
        for s, (m, part) in enumerate(zip(self.members, self.parts)):
            if prepared is None or prepared[s] is not None:
                yield s, part, [params[i] for i in m], None if prepared is None else prepared[s]

    def prepare(self, params, fragment, where, state):
        check_count(params, len(self.states), where)  # the parts index the group's parameters
        check_no_aliasing(named(params), where)
        self.current(state, params, where)
        prepared = [part.prepare(ps, fragment, where, state) for _, part, ps, _ in self._each(params)]
        return None if all(p is None for p in prepared) else prepared

    def _located(self, s, raw):
        """A part's report, its refused element counted in the parts' tensors one after the other."""
        raw = dict(raw)
        if raw["reason"] in REFUSED:
            raw["nonfinite_index"] += self.offsets[s]
        return raw

    def form(self, params, starts):
        """Δ formed by torch (its steps preview every part, which scans Δ)."""
        _formed.by_torch(params, starts)

    def formed_unchanged(self, params):
        return False

    def preview(self, prepared, tau, fragment):
        reports = [self._located(s, part.preview(prep, tau, fragment)) for s, part, _, prep in
                   self._each([None] * len(self.states), prepared)]
        return next((r for r in reports if r["reason"] in REFUSED), reports[0])

    def current(self, state, params, where):
        """As Group.current over the whole group: its every parameter losing its state restarts every part,
        some losing it is refused (the parts alone would see only their own)."""
        check_count(params, len(self.states), where)
        kept = [isinstance(state.get(p), dict) and any(n in state[p] for n in _state.STATE_NAMES)
                for p in params] if isinstance(state, dict) else [False] * len(params)
        if any(kept) and not all(kept):
            lost = [k for k, has in enumerate(kept) if not has]
            _state.refuse(where, f"the state of parameter(s) {lost} was removed from opt.state while the others of "
                                 "the param group keep theirs; cgad steps a group's tensors with one step count, so "
                                 "it cannot restart some of them -- nothing was stepped (opt.state.clear() restarts "
                                 "every group)")
        out = [None] * len(params)
        for m, part in zip(self.members, self.parts):
            for i, entry in zip(m, part.current(state, [params[i] for i in m], where)):
                out[i] = entry
        return out

    def step(self, params, prepared, tau, fragment, reuse_preview=False):
        # Its parts are previewed before any steps (here, or by the optimizer when reuse_preview: every group was,
        # and none refused), and each part's step takes its preview's outcome.
        if not reuse_preview:
            first = self.preview(prepared, tau, fragment)
            if first["reason"] in REFUSED:
                return first
        reports = [part.step(ps, prep, tau, fragment, True) for _, part, ps, prep in self._each(params, prepared)]
        out = dict(reports[0])
        out["applied"] = all(r["applied"] for r in reports)
        out["invalid_state"] = sum(r["invalid_state"] for r in reports)
        out["reason"] = next((r["reason"] for r in reports if r["reason"] != "none"), "none")
        return out

    def invalid_state(self):
        return [(m[k], why) for m, part in zip(self.members, self.parts) for k, why in part.invalid_state()]

    def locate(self, fragment, index):
        s = max(s for s in range(len(self.parts)) if self.offsets[s] <= index)
        k, flat = self.parts[s].locate(fragment, index - self.offsets[s])
        return self.members[s][k], flat

    def configure(self, spec, where):
        for part in self.parts:
            part.configure(spec, where)

    def read_state(self, k, name, state):
        s = next(s for s, m in enumerate(self.members) if k in m)
        return self.parts[s].read_state(self.members[s].index(k), name, state)

    def read_states(self, name, state):
        out = [None] * len(self.states)
        for m, part in zip(self.members, self.parts):
            for i, values in zip(m, part.read_states(name, state)):
                out[i] = values
        return out

    def export(self):
        """The first part's counters, as an unsplit group's, and every part's under "parts"."""
        return dict(self.parts[0].export(), parts=[part.export() for part in self.parts])

    def check_load(self, saved, entry, where, spec):
        parts = entry.get("parts") if isinstance(entry, dict) else None
        if entry is not None and (not isinstance(parts, list) or len(parts) != len(self.parts)):
            parts = [entry] * len(self.parts)  # saved by a group of one dtype: its counters are every part's
        return [part.check_load([saved[i] for i in m], None if entry is None else parts[s], where, spec)
                for s, (m, part) in enumerate(zip(self.members, self.parts))]

    def load(self, checked, state):
        for part, each in zip(self.parts, checked):
            part.load(each, state)


def make_group(spec, params, pool, where):
    """The Group for a param group's tensors on their device's backend (a SplitGroup for a CPU group of mixed
    float32 and bfloat16 parameters, outside PA-CGAD)."""
    if spec["optimizer"] != "pa-cgad" and len({getattr(p, "dtype", None) for p in params}) > 1 and \
            all(isinstance(p, torch.Tensor) and p.dtype in PARAM_FORMATS and p.device.type == "cpu" for p in params):
        return SplitGroup(spec, params, pool, where)
    return Group(spec, params, pool, where)
