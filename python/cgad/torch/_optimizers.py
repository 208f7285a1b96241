"""The torch.optim.Optimizer classes of cgad.torch over the fast path (see the package docstring)."""
from __future__ import annotations  # the annotations name torch 2.x's types; torch 1.13 never evaluates them

import collections
import contextlib
import numbers
import os
import threading
import weakref
from typing import Any, Callable, Dict, Iterable, List, Literal, Optional, Tuple, Union, overload

import torch

from .. import _cgad
from . import _dtensor, _formed, _hooks, _hyperparameters, _lazy_init, _live, _metrics, _q8_maps, _staleness, _state
from . import _trap_stats
from .._arguments import INT64_MAX, UINT32_MAX, UINT64_MAX, integer
from ._groups import make_group, step_cuda_event
from ._tensors import check_no_aliasing, mark_modified
from ._protocol import Counters, check_flags, check_group_flags, check_policy, count, new_counts, report_refusal
from ._protocol import saved_counts
from ._protocol import staleness as as_staleness
from ._report import REFUSED, GroupReport, LazyStepReport, StepReport, combine, first_params, group_report, no_gradient
from ._report import resolved
from ._types import Betas, Loss, Params, Q8Maps, Real, Staleness, TauCut


def _integer(value, name, where, least, most=INT64_MAX):
    return integer(value, name, least, most, where)


def _plain_settings(group):
    """A param group's settings (all but its parameters and counters) as a comparable value, or None when one is
    not a plain value whose equality says it is unchanged."""
    out = []
    for key, value in group.items():
        if key in ("params", _state.COUNTERS):
            continue
        if isinstance(value, (list, tuple)):
            if not all(type(v) in (int, float, str, bool) for v in value):
                return None
            value = (type(value).__name__,) + tuple(value)
        elif value is not None and type(value) not in (int, float, str, bool):
            return None
        out.append((key, type(value).__name__, value))
    return tuple(out)


# A CUDA step's report waits on the device until read (LazyStepReport); the optimizer's counts of steps by outcome
# read them when asked, or once this many are pending, below the CUDA optimizer's kReportHistory (64) reports kept
# per param group (cuda_table_stepper.hpp): one host sync per 32 steps for a loop that never looks.
_PENDING_REPORTS = 32

# The optimizers alive in this process, for the fork handler below.
_LIVE: weakref.WeakSet[_FastpathOptimizer] = weakref.WeakSet()


def _after_fork_in_child():
    """A forked child has only the thread that forked. An optimizer that another thread was stepping (or loading)
    at that moment is half updated in the child, and its lock is held by a thread that does not exist here: it is
    marked so that it refuses to be used, rather than waiting forever. Every other one gets a fresh lock and works
    as it did (the fast path's thread pool starts new workers in the child: fastpath/thread_pool.hpp)."""
    me = threading.get_ident()
    for optimizer in list(_LIVE):
        if optimizer._holder is not None and optimizer._holder != me:
            optimizer._forked_mid_call = True
        optimizer._lock = threading.RLock()
        optimizer._holder = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def _check_indices(groups, sizes, name):
    """torch's rules for a state_dict's param groups (torch/optim/optimizer.py, load_state_dict: it pairs the saved
    groups' ids with this optimizer's parameters in order): a group lists as many ids as this one has parameters,
    and each id -- an index as state_dict() makes them, or a name as torch.distributed.checkpoint's
    set_optimizer_state_dict passes them -- once, since an id listed twice would give two parameters one state."""
    seen = set()
    for index, (loaded, size) in enumerate(zip(groups, sizes)):
        indices = loaded.get("params")
        if not isinstance(indices, list) or len(indices) != size:
            raise _cgad.InputError(f"{name} param group {index}: the state_dict's param group must list {size} "
                                   f"parameters, as this one has, got {indices!r}")
        for i in indices:
            if isinstance(i, bool) or not isinstance(i, (int, str)) or i in seen:
                raise _cgad.InputError(f"{name} param group {index}: the state_dict's param group lists {indices!r}; "
                                       "a state_dict lists each parameter once, by an integer index or a name (a "
                                       "state_dict edited by hand?)")
            seen.add(i)


def _mesh_words(mesh):
    return "plain tensors" if mesh is None else f"DTensors of device mesh {mesh}"


# The key of each param group's _state.COUNTERS entry that carries the optimizer's counts of steps by outcome.
_COUNTS = "counts"


class _FastpathOptimizer(torch.optim.Optimizer):
    """What the six optimizers share. Subclasses set _optimizer (the fast path's name) and _hyperparameters (the
    param-group keys they take), and pass their defaults (those keys' values)."""

    _optimizer: Optional[str] = None
    _hyperparameters: Tuple[str, ...] = ()
    # The keywords that are the whole optimizer's (its fast-path structure, the step's policy), never a param
    # group's: a group carrying one would have it ignored, so it is refused.
    _optimizer_wide: Tuple[str, ...] = ("seed", "threads", "on_nonfinite")
    # Keys of the torch optimizer a user ports from whose step differs from this one's unless they hold the value
    # given here: a group carrying another value would have it ignored, so it is refused (the neutral value is
    # taken, as frameworks pass it).
    _neutral_group_keys: Dict[str, Any] = {}
    # What a bare step() uses (torchft calls step() with no arguments): 0 until given (_staleness.py).
    staleness = _staleness.Staleness()

    def __init__(self, params: Params, defaults: Dict[str, Any], *, state: str, rounding: str, seed: int,
                 q8_semantics: str, min_q8_size: Optional[int], threads: int, fragments: Any = 1,
                 unsupported: Optional[Dict[str, Any]] = None, v_map: str = "dynamic",
                 q8_maps: Q8Maps = None) -> None:
        name = type(self).__name__
        unsupported = dict(unsupported or {})
        # Every optimizer's keyword on_nonfinite="skip" | "warn" | "raise": what a step refused for a NaN/Inf (or
        # overflowing) pseudo-gradient does beyond its report and counter.
        self.on_nonfinite = check_policy(unsupported.pop("on_nonfinite", "skip"), name)
        # capturable=True (torch's flag for a step that a CUDA graph can capture) is what CUDA param groups are: their
        # step waits for nothing. It is refused for parameters on the CPU, which no CUDA graph steps.
        capturable = unsupported.pop("capturable", None)
        if capturable is not None and not isinstance(capturable, bool):
            raise _cgad.InputError(f"{name}: capturable must be True, False or None, got {capturable!r}")
        self._capturable = bool(capturable)
        check_flags(unsupported, name)
        self._step_counts = new_counts()
        self._pending: List[LazyStepReport] = []  # CUDA steps' reports not yet counted (LazyStepReport)
        self._invalid_state = None  # the error of the step being recorded, raised after it is counted (_outcome)
        self.last_report = None  # the last step's StepReport
        # why opt.state cannot be trusted after a refused in-place load (load_state_dict)
        self._overwritten: Optional[str] = None
        for key, value in (("state", state), ("rounding", rounding), ("q8_semantics", q8_semantics), ("v_map", v_map)):
            if not isinstance(value, str):
                raise _cgad.InputError(f"{name}: {key} must be a string, got {value!r}")
        if min_q8_size is not None:
            min_q8_size = _integer(min_q8_size, "min_q8_size", name, 0, UINT64_MAX)
        self._structure = {
            "optimizer": self._optimizer, "state": state, "rounding": rounding,
            "seed": _integer(seed, "seed", name, 0, UINT64_MAX), "q8_semantics": q8_semantics, "v_map": v_map,
            "min_q8_size": min_q8_size, "fragments": _integer(fragments, "fragments", name, 1, UINT64_MAX),
            "q8_codes": _q8_maps.q8_codes(q8_maps, name),
        }
        self._threads = _integer(threads, "threads", name, 0, UINT32_MAX)
        # One thread pool for every CPU param group of the optimizer, made with its first one (_thread_pool): a
        # pool per group would start threads × groups workers for steps that run one group at a time.
        self._pool: Optional[_cgad.ThreadPool] = None
        # id(param group) -> (its hyperparameters as given, their spec): parsed on change
        self._spec_cache: Dict[int, Any] = {}
        # The state's format is a param-group key too (bitsandbytes users keep embeddings in 32-bit state).
        defaults = dict(defaults, **{key: self._structure[key] for key in _state.FORMAT_KEYS})
        self._groups: List[Any] = []  # one _groups.Group per param group, in order
        # One call at a time changes the optimizer: the step releases the GIL while the fast path runs, and two
        # steps at once would share its state (and, before, its thread pool). Reentrant: PACGAD's step ends the
        # round through advance_round(), and a closure may read the optimizer.
        self._lock = threading.RLock()
        self._holder: Optional[int] = None  # the thread inside _exclusive(), for the fork handler
        self._forked_mid_call = False
        _LIVE.add(self)
        # The hyperparameters are checked before torch.optim.Optimizer.__init__ reads the params, as torch's own
        # optimizers check theirs: a bad lr is refused as such whatever the params are (torch's test_optim gives
        # None), and an iterator of params is not used up by a refused construction.
        _cgad.check_spec(self._spec(defaults, name))
        super().__init__(params, defaults)
        # The v map is read by q8 groups only (_spec); one that no param group reads is refused, as
        # `cgad simulate --v-map zero-free` without q8 state is (a map asked for and never used is a mistake).
        structures = [self._group_structure(g, name) for g in self.param_groups]
        if v_map == "zero-free" and not any(self._reads_v_map(s) and s["v_map"] == v_map for s in structures):
            raise _cgad.InputError(f"{name}: v map {v_map} is a map of q8 second moments: it needs state q8 in some "
                                   f"param group and an Adam-family optimizer (got state {state}, {self._optimizer})")
        if self._structure["q8_codes"] is not None and not any(s["state"] == "q8" for s in structures):
            raise _cgad.InputError(f"{name}: q8_maps are the codes of q8 state: they need state q8 in some param "
                                   f"group (got state {state})")

    @contextlib.contextmanager
    def _exclusive(self):
        """Holds the optimizer for one call: a call from another thread waits for it to end."""
        with self._lock:
            if self._forked_mid_call:
                raise _cgad.InputError(f"{type(self).__name__}: this process was forked while another thread was "
                                       "inside a call on this optimizer, so this copy of its state may be half "
                                       "updated; make the optimizer (or load its state_dict) again in the child")
            outer = self._holder is None
            self._holder = threading.get_ident()
            try:
                yield
            finally:
                if outer:
                    self._holder = None

    # --- configuration ------------------------------------------------------------------------------------------

    def _spec(self, group, where):
        """The fast-path configuration of a param group, its hyperparameters read from the group now. Every path
        a group takes (construction, add_param_group, each step of it, load_state_dict and so copies) reads it
        here, so a setting the group carries and no step would honour is refused here."""
        check_group_flags(group, where)
        for key in self._optimizer_wide:
            if key in group:
                raise _cgad.InputError(f"{where}: {key} is the whole optimizer's ({type(self).__name__}(..., "
                                       f"{key}=...)), not a param group's; the group's {key}={group[key]!r} "
                                       "would be ignored")
        for key, neutral in self._neutral_group_keys.items():
            if key in group and not group[key] == neutral:
                raise _cgad.InputError(f"{where}: {key}={group[key]!r} is not supported ({type(self).__name__} "
                                       f"steps as torch.optim.SGD with {key}={neutral!r}); only {neutral!r} is taken")
        spec = self._group_structure(group, where)
        # A group of other state (bitsandbytes' fp32 embeddings beside q8 layers) or of the Nesterov family has no
        # v map and ignores the optimizer's, as `cgad simulate` runs such a grid point (simulate/src/sweep_grid.cpp).
        # The group keeps the key as given (its state_dict carries it, and loads where the same key was given).
        if spec["v_map"] == "zero-free" and not self._reads_v_map(spec):
            spec["v_map"] = "dynamic"
        spec["q8_codes"] = self._group_q8_codes(spec)
        spec.update(_hyperparameters.parse(group, self._hyperparameters, where))
        return spec

    def _checked_spec(self, group, where):
        """_spec() and the fast path's check of it, redone only when the group's settings changed (an lr
        schedule): a group whose every setting is a plain value (numbers, strings, tuples of them) is compared by
        value with what was parsed last; one holding anything else (a tensor lr, which may change in place) is
        parsed at every step."""
        key = _plain_settings(group)
        cached = self._spec_cache.get(id(group))
        if key is not None and cached is not None and cached[0] == key:
            return dict(cached[1])
        spec = self._spec(group, where)
        _cgad.check_spec(spec)
        self._spec_cache[id(group)] = (key, spec) if key is not None else (None, None)
        return dict(spec)

    def _group_structure(self, group, where):
        """The optimizer's structure with the param group's state format (_state.FORMAT_KEYS) in it."""
        spec = dict(self._structure)
        for key in _state.FORMAT_KEYS:
            value = group.get(key, spec[key])
            if key == "min_q8_size":
                spec[key] = None if value is None else _integer(value, key, where, 0, UINT64_MAX)
            elif not isinstance(value, str):
                raise _cgad.InputError(f"{where}: {key} must be a string, got {value!r}")
            else:
                spec[key] = value
        return spec

    @staticmethod
    def _group_q8_codes(structure):
        """The q8 codes a param group of this structure quantizes with: the optimizer's (None: the built-in maps)
        in a q8 group; a group of other state has none (as its state_dict entry records none)."""
        return structure["q8_codes"] if structure["state"] == "q8" else None

    def _reads_v_map(self, structure):
        """Whether a param group of this structure has a q8 second moment, the only state a v map is read by."""
        return structure["state"] == "q8" and self._optimizer not in ("nesterov", "sdm")

    def _where(self, index):
        return f"{type(self).__name__} param group {index}"

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        with self._exclusive():
            super().add_param_group(param_group)
            index = len(self.param_groups) - 1
            try:
                group = self.param_groups[index]
                where = self._where(index)
                made = make_group(self._spec(group, where), group["params"], self._thread_pool, where)
                self._check_backend(made, where)
                self._check_disjoint_groups(where)
            except Exception:
                self.param_groups.pop()
                raise
            self._groups.append(made)
            group[_state.COUNTERS] = None  # the key state_dict() fills (_state.COUNTERS' comment)
            self.state.update(zip(group["params"], made.states))

    def _thread_pool(self):
        if self._pool is None:
            self._pool = _cgad.ThreadPool(self._threads)
        return self._pool

    def _check_backend(self, made, where):
        """One backend and one CUDA device for all the param groups: an event refused in any group changes none,
        which CUDA groups decide on their device through one shared veto (_groups.step_cuda_event), CPU groups by
        previewing on the host."""
        if made.empty:  # steps nothing, on no backend and no mesh of its own (_tensors.group_layout)
            return
        if self._capturable and not made.cuda:
            raise _cgad.InputError(f"{where}: capturable=True is not supported (these parameters are on the CPU; a "
                                   "CUDA graph captures the step of CUDA parameters); None or False is taken")
        first = self._lead()
        if first is None:
            return
        lead = f"param group {self._groups.index(first)}"
        if made.mesh != first.mesh:
            raise _cgad.InputError(f"{where}: {lead}'s parameters are {_mesh_words(first.mesh)}, this one's "
                                   f"{_mesh_words(made.mesh)}; one optimizer's parameters are all plain or all "
                                   "DTensors of one device mesh (its refusal is all-reduced over that mesh)")
        if made.cuda != first.cuda:
            raise _cgad.InputError(f"{where}: parameters on the CPU and on CUDA go in separate optimizers (an event "
                                   "refused in one param group must change none, which each backend decides on its "
                                   "own side)")
        if made.cuda and made.device != first.device:
            raise _cgad.InputError(f"{where}: CUDA param groups of one optimizer share a device (their events are "
                                   f"refused together on it); {lead} is on {first.device}, this one on "
                                   f"{made.device}")

    def _lead(self):
        """The first param group holding parameters, whose backend and mesh are every such group's (None while
        every group is empty)."""
        return next((fast for fast in self._groups if not fast.empty), None)

    def _check_disjoint_groups(self, where):
        """No parameter may share memory with one of another group (torch refuses only the same tensor twice; a
        view of it in another group would be stepped twice, by two fast-path optimizers)."""
        if len(self.param_groups) > 1:
            check_no_aliasing([(f"param group {g} parameter {i}", p) for g, group in enumerate(self.param_groups)
                               for i, p in enumerate(group["params"])], where)

    # --- the step -----------------------------------------------------------------------------------------------

    def _fragment(self, fragment):
        if fragment is not None and not (isinstance(fragment, numbers.Integral) and not isinstance(fragment, bool)
                                         and fragment == 0):
            raise _cgad.InputError(f"{type(self).__name__} has one fragment (PACGAD takes fragment=), got {fragment!r}")
        return 0

    # torch.optim.Optimizer.step returns None without a closure; cgad's returns the step's report (docs/python.md),
    # hence the override's ignore. A CUDA step's report is a LazyStepReport, read from the device when first looked at.
    @overload  # type: ignore[override]
    def step(self, closure: None = None, *, staleness: Optional[Staleness] = None,
             fragment: Optional[int] = None) -> Union[StepReport, LazyStepReport]: ...

    @overload
    def step(self, closure: Callable[[], Loss], *, staleness: Optional[Staleness] = None,
             fragment: Optional[int] = None) -> Loss: ...

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None, *, staleness: Optional[Staleness] = None,
             fragment: Optional[int] = None) -> Any:
        """Applies the pseudo-gradients in the parameters' ``.grad`` as one event of staleness ``staleness``
        (outer rounds, any integral value; default ``self.staleness``). Returns the closure's loss when given a
        closure, as torch.optim does, and otherwise the StepReport; either way the report is ``self.last_report``
        and counted in ``self.counters``. Steps from several threads take turns."""
        with self._exclusive():
            if _lazy_init.requested(self, closure, staleness, fragment):
                return self._allocate_state()
            self._check_not_overwritten()
            return self._outcome(self._step(closure, staleness, self._fragment(fragment)), closure)

    @torch.no_grad()
    def form_pseudo_gradient(self, start_params: Iterable[torch.Tensor]) -> None:
        """Writes every parameter's ``.grad = θ_start − θ`` (``start_params``: one tensor per parameter, in
        param_groups order, as DiLoCo keeps θ_start), into its own ``.grad`` where that fits, else a new one. A CPU
        param group of float32 parameters looks at Δ in the same pass for what the next step would refuse, and that
        step then skips its scan of Δ if every ``.grad`` is still the tensor formed, its version counter unchanged
        (an all-reduce or edit in place in between advances it, and the step scans as for any Δ); the refusal rules
        are the same either way (docs/python.md, "A pseudo-gradient formed where it is checked")."""
        with self._exclusive():
            where = f"{type(self).__name__}.form_pseudo_gradient"
            params = [p for group in self.param_groups for p in group["params"]]
            starts = list(start_params)
            _formed.check_starts(params, starts, where)
            _formed.gradient_buffers(params, starts)
            at = 0
            for group, fast in zip(self.param_groups, self._groups):
                count = len(group["params"])
                fast.form(group["params"], starts[at:at + count])
                at += count

    def _check_not_overwritten(self):
        """Refuses to step or save state that a refused load left behind (load_state_dict); opt.state.clear(), the
        documented reset, or a load that is taken ends the refusal."""
        if self._overwritten is not None:
            if not self.state:
                self._overwritten = None
            else:
                raise _cgad.InputError(self._overwritten)

    def _allocate_state(self):
        """torch.distributed.checkpoint's lazy initialisation (_lazy_init.py): opt.state as the next step would take
        it (a group whose every entry was removed restarts from zero, as that step would restart it), and no step:
        no count, no report, no round ended. Returns None, as torch.optim's step() without a closure."""
        for index, (group, fast) in enumerate(zip(self.param_groups, self._groups)):
            if hasattr(fast, "current"):
                fast.current(self.state, group["params"], self._where(index))
        return None

    def _outcome(self, report, closure):
        """Records a step's report (last_report, counters, on_nonfinite) and returns what step() returns."""
        self.last_report = report
        policy = check_policy(self.on_nonfinite, type(self).__name__)
        if isinstance(report, LazyStepReport) and policy == "skip":
            # Counted when asked (counters): reading it here would wait for the step.
            self._pending.append(report)
            if len(self._pending) >= _PENDING_REPORTS and not torch.cuda.is_current_stream_capturing():
                self._count_pending()
        else:
            count(self._step_counts, resolved(report))
            if report.reason in REFUSED:
                report_refusal(report, policy, type(self).__name__)
        message, self._invalid_state = self._invalid_state, None
        if message is not None:  # an applied step that left elements with invalid state as they were (_live.py)
            raise _cgad.InputError(message)
        return report.loss if closure is not None else report

    def _count_pending(self):
        """Counts the CUDA steps' reports not yet counted (waits for those steps)."""
        pending, self._pending = self._pending, []
        for report in pending:
            count(self._step_counts, report.resolved())

    @property
    def counters(self) -> Counters:
        """Steps by what became of them: "applied", "nonfinite-gradient", "overflowing-gradient", "zero-gate" (an
        event at a zero gate, run by on_zero_gate="apply" or dropped by "skip"), "no-gradient". Called,
        ``counters(group)``, the fast path's counters of a param group (see _engine_counters)."""
        with self._exclusive():
            self._count_pending()
            return Counters(self._step_counts, self._engine_counters)

    def _step(self, closure, staleness_value, fragment):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        name = type(self).__name__
        gated = self._optimizer in _staleness.GATED_BY_STALENESS
        tau = _staleness.of_step(self, staleness_value, gated, name, as_staleness)
        if len(self._groups) != len(self.param_groups):
            raise _cgad.InputError(f"{name}: param_groups changed outside add_param_group")
        self._check_disjoint_groups(name)
        # Everything is checked, and every group's operands prepared, before anything changes.
        events = []
        targets = self._targets(fragment)
        fragment = self._engine_fragment(fragment)
        for index in targets:
            group, fast, where = self.param_groups[index], self._groups[index], self._where(index)
            spec = self._checked_spec(group, where)
            self._check_group_spec(spec, where)
            events.append((group, fast, spec, fast.prepare(group["params"], fragment, where, self.state)))
        for index, (group, fast, spec, prepared) in zip(targets, events):
            fast.configure(spec, self._where(index))
        _metrics.record(self, tau, [p.grad for group, fast, spec, prepared in events for p in group["params"]
                                    if p.grad is not None])
        lead = self._lead()
        if lead is not None and lead.cuda:
            stepped = [group for group, fast, spec, prepared in events if prepared is not None]
            report = _trap_stats.event(self, stepped, lambda: step_cuda_event(
                [(fast, prepared) for group, fast, spec, prepared in events], tau, fragment,
                first_params(self.param_groups, targets), loss))
            for group in stepped:  # whether it applied is read lazily: every stepped group may have changed
                mark_modified(group["params"])
            return report
        stepped = [e for e in events if e[3] is not None]
        mesh = lead.mesh if lead is not None else None
        previewed = len(stepped) > 1 or mesh is not None
        if previewed:
            # A refused event in any group must leave every group untouched: look before stepping any. DTensor
            # parameters' refusal is every rank's of the mesh (_dtensor.agree, on every step, whatever this rank's
            # groups hold: the ranks call it alike).
            refused, found = "none", None
            for group, fast, spec, prepared in stepped:
                preview = group_report(fast.preview(prepared, tau, fragment), fast, fragment)
                if preview.reason in REFUSED:
                    refused, found = preview.reason, (fast, preview)
                    break
            if mesh is not None:
                refused = _dtensor.agree(mesh, refused)
            if refused in REFUSED:
                # The other groups (and every group of the other ranks) were refused with it: not applied, for the
                # same reason, located in the group that found it.
                others = GroupReport(False, refused, 0.0, tau, None, None)
                reports = [found[1] if found is not None and e[1] is found[0] else others for e in events]
                return combine(reports, first_params(self.param_groups, targets), loss)
        reports, invalid = [], []
        for index, (group, fast, spec, prepared) in zip(targets, events):
            if prepared is None:
                reports.append(no_gradient(tau))
                continue
            # A previewed event's Δ was scanned, a formed one looked at as it was written (_formed.py): the step
            # takes that outcome and reads Δ once more, to apply it.
            formed = fast.formed_unchanged(group["params"])
            report = _trap_stats.step(self, fast, group, prepared, tau, fragment, previewed or formed)
            if report["applied"]:
                mark_modified(group["params"])
            if report["invalid_state"]:
                invalid.append((index, fast, report["invalid_state"]))
            reports.append(group_report(report, fast, fragment))
        if invalid:  # raised by _outcome, once the applied step is recorded and counted
            self._invalid_state = _live.invalid_state_message(
                type(self).__name__,
                [(self._where(index), fast.invalid_state(), count) for index, fast, count in invalid])
        return combine(reports, first_params(self.param_groups, targets), loss)

    def _targets(self, fragment):
        """The indices of the param groups an event for ``fragment`` steps: all of them."""
        return range(len(self.param_groups))

    def _engine_fragment(self, fragment):
        """The fragment index the stepped groups' fast-path optimizers take."""
        return fragment

    def _check_group_spec(self, spec, where):
        """What a subclass checks of a stepped group's configuration beyond the fast path's own check."""

    # --- state --------------------------------------------------------------------------------------------------

    def state_dict(self) -> Dict[str, Any]:
        """torch's state_dict: the per-parameter state (by parameter index) as references to the live state
        tensors of opt.state (no copy: _state.py), and param_groups, each with its counters under
        _state.COUNTERS. torch 2.x's state_dict pre- and post-hooks run around it, the post-hooks on the finished
        state_dict (counters included), as torch's run on its own (_hooks.py)."""
        with self._exclusive():
            self._check_not_overwritten()
            return _hooks.state_dict(self, self._state_dict)

    def _state_dict(self):
        """state_dict() without the hooks (a copy's own state is taken this way, as torch's copies run none)."""
        # opt.state as the next step would take it: a group whose every entry was removed is restarted, a removal
        # or edit the step would refuse is refused here, before a checkpoint records it.
        for index, (group, fast) in enumerate(zip(self.param_groups, self._groups)):
            if hasattr(fast, "current"):
                fast.current(self.state, group["params"], self._where(index))
        out = _state.pack(self.param_groups, self.state)
        # By identity: a group listed twice (param_groups extended by hand, which the next step refuses) is packed
        # twice with the same counters, as torch packs it twice alike. Each carries the optimizer's counts of steps
        # by outcome too (opt.counters), as Gated's entries carry its own: a resumed run counts on.
        self._count_pending()
        fast_of = {id(group): fast for group, fast in zip(self.param_groups, self._groups)}
        for entry, group in zip(out["param_groups"], self.param_groups):
            if id(group) in fast_of:
                entry[_state.COUNTERS] = dict(fast_of[id(group)].export(), **{_COUNTS: dict(self._step_counts)})
        self._handed_out = _state.handed_out(out)  # opt.state's own tensors: a refused load tells if they were written
        return out

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Resumes from a state_dict() of an optimizer of the same class and state format, bit for bit, also over
        new parameters of the same shapes; takes a torch.optim.Adam/AdamW state_dict as a warm start of fp32
        state. Refuses (InputError) a mismatched one, changing nothing: its param_groups' hyperparameters are
        checked as a step checks them, so a bad one is refused here, not at the next step. torch 2.x's
        load_state_dict pre-hooks (which may replace the state_dict) and post-hooks run around it (_hooks.py)."""
        with self._exclusive():
            try:
                _hooks.load_state_dict(self, state_dict, self._load_state_dict)
            except _cgad.InputError as e:
                # A refused load changes nothing -- unless the state_dict's tensors are opt.state's own, as
                # state_dict() hands them out (DCP's get_optimizer_state_dict), and were written since, as dcp.load
                # fills them in place: those bytes are in opt.state already, and the next step would take them as
                # an edit of the state. So nothing steps or saves that state until a load is taken or a reset.
                if _state.written_since(state_dict, self.__dict__.get("_handed_out", {})):
                    self._overwritten = (f"{type(self).__name__}: opt.state holds what was loaded into its "
                                         "tensors for a load_state_dict that was refused (that state_dict's tensors "
                                         "are opt.state's own, as get_optimizer_state_dict hands them out, and were "
                                         f"written since, as dcp.load fills them in place); the load was refused: "
                                         f"{e}. Load a state_dict this optimizer takes, or call opt.state.clear() "
                                         "to start its state afresh")
                raise
            self._overwritten = None

    def _load_state_dict(self, state_dict):
        name = type(self).__name__
        groups = state_dict.get("param_groups") if isinstance(state_dict, dict) else None
        states = state_dict.get("state") if isinstance(state_dict, dict) else None
        if not isinstance(states, dict) or not isinstance(groups, list) or \
                len(groups) != len(self.param_groups) or not all(isinstance(g, dict) for g in groups):
            raise _cgad.InputError(f"{name}: the state_dict must hold 'state' (a dict) and 'param_groups' (a list of "
                                   f"{len(self.param_groups)} dicts, one per param group of this optimizer), as "
                                   "torch.optim's state_dict() makes them")
        _check_indices(groups, [len(g["params"]) for g in self.param_groups], name)
        counts = saved_counts([g.get(_state.COUNTERS) for g in groups], _COUNTS, name)
        # Everything is checked for every group before anything changes; then each group's state is copied into
        # opt.state's tensors, so that references to them (a state_dict() taken before) stay the live state.
        param_groups, rebuilt, checked = [], [], []
        for index, (group, loaded) in enumerate(zip(self.param_groups, groups)):
            where = self._where(index)
            params = group["params"]
            indices = loaded["params"]
            entry = loaded.get(_state.COUNTERS)
            structure = self._group_structure(group, where)  # its format keys only: its seed is no group's
            ours = dict(group, **{key: structure[key] for key in _state.FORMAT_KEYS})
            if entry is None:
                merged = _state.warm_start_group(loaded, ours, where)
            else:
                _state.check_saved_group(loaded, ours, self._optimizer, self._structure["seed"], where,
                                         self._group_q8_codes(structure))
                merged = {k: v for k, v in loaded.items() if k != _state.COUNTERS}
            merged["params"] = params
            merged[_state.COUNTERS] = None
            if "param_names" in group and "param_names" not in merged:
                merged["param_names"] = group["param_names"]  # torch keeps its names where the saved group has none
            spec = self._spec(merged, where)
            _cgad.check_spec(spec)
            kept = self._groups[index] if index < len(self._groups) else None
            fast = kept if kept is not None else make_group(spec, params, self._thread_pool, where)
            if entry is None and not fast.adam_family:
                raise _cgad.InputError(f"{where}: a state_dict of torch.optim (no '{_state.COUNTERS}') is a warm "
                                       "start for the Adam family only")
            saved = [states.get(i) for i in indices]
            checked.append(fast.check_load(saved, entry, where, spec))
            param_groups.append((merged, spec, where))
            rebuilt.append(fast)
        state = self.state if isinstance(self.state, dict) else collections.defaultdict(dict)
        for (merged, spec, where), fast, each in zip(param_groups, rebuilt, checked):
            fast.configure(spec, where)
            fast.load(each, state)
        self.param_groups = [merged for merged, _, _ in param_groups]
        self._groups = rebuilt
        self.state = state
        if counts is not None:  # else a state_dict without them (torch's, or older): the counts go on from ours
            self._pending, self._step_counts = [], counts
        # What torch keeps as it is: state under a key that is no parameter's index (torch's hook tests put
        # opt.state["test"] = 1 there).
        indices = {i for loaded in groups for i in loaded["params"]}
        self.state.update((k, v) for k, v in states.items() if k not in indices)

    # --- copies: copy.deepcopy and pickle -----------------------------------------------------------------------

    # What a copy does not take: the fast-path engines (rebuilt from the state_dict), the lock and its holder,
    # torch 2.x's hooks (a copy of a torch optimizer has none: _hooks.py) and, like them, what watches the steps:
    # watch_traps()'s tallies (the copy watches nothing until its own watch_traps(); docs/python.md, "Copies").
    _NOT_COPIED = ("_groups", "_lock", "_holder", "_forked_mid_call", "state", "_pool", "_spec_cache",
                   "_trap_watch", "_handed_out") + _hooks.HOOK_TABLES

    def __getstate__(self):
        with self._exclusive():
            self._count_pending()
            self.last_report = resolved(self.last_report)  # a LazyStepReport reads the device: not copied
            out = {k: v for k, v in self.__dict__.items() if k not in self._NOT_COPIED}
            out["_state_dict"] = self._state_dict()
            return out

    def __setstate__(self, copied):
        copied = dict(copied)
        saved = copied.pop("_state_dict")
        _hooks.restore_copy(self, copied)  # torch.optim.Optimizer.__setstate__: hook tables, the wrapped step
        self._lock, self._holder, self._forked_mid_call = threading.RLock(), None, False
        self._pool, self._spec_cache = None, {}
        _LIVE.add(self)
        self._groups, self.state = [], collections.defaultdict(dict)
        self._load_state_dict(saved)  # its parameter indices are those of the copy's param_groups

    def state_buffer(self, param: torch.Tensor, name: str) -> torch.Tensor:
        """The fast-path state buffer ``name`` ("m", "v" for the Adam family, "b" for Nesterov and SDM) of one
        parameter, dequantized to a float32 tensor of its shape (a copy)."""
        if not isinstance(name, str):
            raise _cgad.InputError(f"{type(self).__name__}: a state buffer's name is a string, got {name!r}")
        with self._exclusive():
            for group, fast in zip(self.param_groups, self._groups):
                for k, p in enumerate(group["params"]):
                    if p is param:
                        values = torch.from_numpy(fast.read_state(k, name, self.state))
                        return values.reshape(_dtensor.local(p).shape)  # a DTensor's: its local shard's
        raise _cgad.InputError(f"{type(self).__name__}: the tensor is not one of this optimizer's parameters")

    def watch_traps(self) -> None:
        """Starts watching the v-zero trap of the steps to come (from zero); see trap_stats(). Opt-in: a watched
        step copies the parameters to float64 before it and compares after it."""
        with self._exclusive():
            _trap_stats.start(self)

    def trap_stats(self) -> Dict[int, Dict[str, Dict[str, float]]]:
        """Per parameter (state_dict's index): {"last": ..., "since_start": ...}, each a dict of v_zero_fraction
        and m_zero_fraction (the stored moments that decode to exactly 0, now), step_over_5lr_fraction and
        max_step_over_lr (|Δθ|/lr over the last watched step, or every step since watch_traps()): what
        `cgad noise --stream` reports per tensor for the same events."""
        with self._exclusive():
            return _trap_stats.stats(self, self.param_groups, self._groups)

    def watch_delta_norm(self) -> None:
        """From the next step on, metrics() also gives delta_norm, ‖Δ‖ of the last step (opt-in: it reads every Δ
        once more)."""
        _metrics.watch(self)

    def metrics(self) -> Dict[str, float]:
        """The last step and the steps so far as plain numbers for a logger (_metrics.py, docs/python.md
        "Metrics"): steps and each counter, and after a step tau, tau_effective, sigma, last_applied (and
        delta_norm after watch_delta_norm()); the trap figures while watch_traps() watches."""
        with self._exclusive():
            watched = self.__dict__.get("_trap_watch") is not None
            return _metrics.metrics(self, self.counters, self.trap_stats() if watched else None)

    def _engine_counters(self, group: int = 0) -> Dict[str, List[int]]:
        """The fast path's counters of a param group: "t" (Adam family: applied steps, per fragment), "age"
        (PACGAD: outer rounds since each fragment was last synchronized)."""
        with self._exclusive():
            index = _integer(group, "group", type(self).__name__, 0, len(self._groups) - 1)
            return self._groups[index].counters()


class _AdamFamily(_FastpathOptimizer):
    _hyperparameters: Tuple[str, ...] = ("lr", "betas", "eps", "weight_decay", "alpha", "tau_cut", "on_zero_gate")

    def __init__(self, params: Params, defaults: Dict[str, Any], state: str, rounding: str, seed: int,
                 q8_semantics: str, min_q8_size: Optional[int], threads: int, fragments: Any = 1,
                 unsupported: Optional[Dict[str, Any]] = None, v_map: str = "dynamic", q8_maps: Q8Maps = None) -> None:
        super().__init__(params, defaults, state=state, rounding=rounding, seed=seed, q8_semantics=q8_semantics,
                         min_q8_size=min_q8_size, threads=threads, fragments=fragments, unsupported=unsupported,
                         v_map=v_map, q8_maps=q8_maps)


class CGAD(_AdamFamily):
    """Cosine-Gated Adam-Decay: Adam fed sigma(tau) * pseudo-gradient, sigma(tau) = gamma(tau) * exp(-alpha * tau)
    with the cosine gate gamma cutting off at tau_cut; decoupled weight decay (AdamW form). on_zero_gate: "apply"
    runs a step on a zero gradient where gamma(tau) = 0 (tau >= tau_cut), "skip" drops such an event.
    state: "fp32", "bf16" or "q8" (blockwise 8-bit, 256-element blocks); rounding: "nearest" or "stochastic"
    (keyed by seed, step and element); q8_semantics: "cgad" (exact nearest code, v = 0 guard) or "bnb"
    (bitsandbytes' 8-bit Adam formula by formula); min_q8_size: tensors under it keep fp32 state (default 4096
    with bnb semantics, 0 with cgad's); threads: 0 for every core; v_map (q8 state): "dynamic" (bitsandbytes'
    map, which stores a v below ~1.6e-7 of its block's absmax as 0) or "zero-free" (no code at 0, Li, Chen & Zhu's
    DE-0); q8_maps (q8 state): None (bitsandbytes' maps as cgad builds them, the same on every machine),
    "bitsandbytes" (the maps the installed bitsandbytes builds, whose last bits depend on its torch) or a pair
    (signed map, unsigned map) of 256-element float32 tensors or arrays."""
    _optimizer = "cgad"

    def __init__(self, params: Params, lr: Real = 1e-3, betas: Betas = (0.9, 0.999), eps: Real = 1e-8,
                 weight_decay: Real = 0.0, alpha: Real = 0.2, tau_cut: TauCut = 32, on_zero_gate: str = "apply",
                 state: str = "fp32", rounding: str = "nearest", seed: int = 0, q8_semantics: str = "cgad",
                 min_q8_size: Optional[int] = None, threads: int = 0, v_map: str = "dynamic", q8_maps: Q8Maps = None,
                 **unsupported: Any) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, alpha=alpha,
                                      tau_cut=tau_cut, on_zero_gate=on_zero_gate),
                         state, rounding, seed, q8_semantics, min_q8_size, threads, unsupported=unsupported,
                         v_map=v_map, q8_maps=q8_maps)


class PACGAD(_AdamFamily):
    """Partial-sync CGAD: the parameters in ``fragments`` fragments, each with its own step count and age (outer
    rounds since it was last synchronized); an event for fragment f is gated by sigma(max(tau, age_f)) and reads
    only f's part of the pseudo-gradients. step(staleness=, fragment=) ends the outer round after the event, as
    `cgad replay` does (end_round=False leaves it open; advance_round() ends one). fragments <= tau_cut.

    fragments=P (an int): one param group, its tensors concatenated and cut into P contiguous element ranges (a
    tensor may be split between two); fragments=1 is exactly CGAD. fragments="groups": each param group is one
    fragment, as torchft's streaming DiLoCo syncs module lists -- each group its own fast-path PA-CGAD of one
    fragment, all of them aged together, so fragment f steps exactly as the range split steps a range that holds
    the same whole tensors (docs/python.md)."""
    _optimizer = "pa-cgad"
    _optimizer_wide = _AdamFamily._optimizer_wide + ("fragments",)

    def __init__(self, params: Params, lr: Real = 1e-3, betas: Betas = (0.9, 0.999), eps: Real = 1e-8,
                 weight_decay: Real = 0.0, alpha: Real = 0.2, tau_cut: TauCut = 32, on_zero_gate: str = "apply",
                 fragments: Union[int, Literal["groups"]] = 1, state: str = "fp32", rounding: str = "nearest",
                 seed: int = 0, q8_semantics: str = "cgad", min_q8_size: Optional[int] = None, threads: int = 0,
                 v_map: str = "dynamic", q8_maps: Q8Maps = None, **unsupported: Any) -> None:
        self.fragment = 0  # what a bare step() uses
        self._by_groups = isinstance(fragments, str) and fragments == "groups"
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, alpha=alpha,
                                      tau_cut=tau_cut, on_zero_gate=on_zero_gate),
                         state, rounding, seed, q8_semantics, min_q8_size, threads,
                         fragments=1 if self._by_groups else fragments, unsupported=unsupported, v_map=v_map,
                         q8_maps=q8_maps)

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        if self.param_groups and not self._by_groups:
            raise _cgad.InputError("PACGAD takes one param group (its fragments partition all its parameters); "
                                   "fragments='groups' makes each param group a fragment")
        if self._by_groups:
            self._check_fragment_count([*self.param_groups, param_group], "PACGAD")
        super().add_param_group(param_group)

    def _check_fragment_count(self, groups, where):
        """The rule P <= tau_cut of each group's (a round-robin fragment misses P - 1 rounds), checked where the
        groups are given as well as at each step (_check_group_spec), since a group's tau_cut may change between.
        A tau_cut that is not an integer is left to the fast path's check, which names it."""
        for group in groups:
            cut = group.get("tau_cut", self.defaults["tau_cut"]) if isinstance(group, dict) else self.defaults["tau_cut"]
            try:
                cut = _hyperparameters.tau_cut(cut, where)
            except _cgad.InputError:
                continue
            if len(groups) > cut:
                raise _cgad.InputError(f"{where}: fragments='groups' with {len(groups)} param groups needs tau_cut >= "
                                       f"{len(groups)}, got {cut} (a round-robin fragment misses P - 1 rounds)")

    def _fragment(self, fragment):
        return _integer(self.fragment if fragment is None else fragment, "fragment", "PACGAD", 0, UINT64_MAX)

    def _targets(self, fragment):
        if not self._by_groups:
            return super()._targets(fragment)
        if fragment >= len(self.param_groups):
            raise _cgad.InputError(f"PACGAD: fragment {fragment} does not exist (fragments='groups': there are "
                                   f"{len(self.param_groups)} param groups)")
        return [fragment]

    def _engine_fragment(self, fragment):
        return 0 if self._by_groups else fragment

    def _check_group_spec(self, spec, where):
        # The range split's rule P <= tau_cut (a round-robin fragment's age is P - 1), which each group's
        # one-fragment fast-path optimizer cannot see.
        if self._by_groups:
            self._check_fragment_count(self.param_groups, where)

    @overload  # type: ignore[override]
    def step(self, closure: None = None, *, staleness: Optional[Staleness] = None, fragment: Optional[int] = None,
             end_round: bool = True) -> Union[StepReport, LazyStepReport]: ...

    @overload
    def step(self, closure: Callable[[], Loss], *, staleness: Optional[Staleness] = None,
             fragment: Optional[int] = None, end_round: bool = True) -> Loss: ...

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None, *, staleness: Optional[Staleness] = None,
             fragment: Optional[int] = None, end_round: bool = True) -> Any:
        """As cgad.torch's step(), for fragment ``fragment`` (default ``self.fragment``); ``end_round=False``
        leaves the outer round open (advance_round() ends it)."""
        with self._exclusive():
            if _lazy_init.requested(self, closure, staleness, fragment):
                return self._allocate_state()
            report = self._step(closure, staleness, self._fragment(fragment))
            if end_round:
                self.advance_round()
            return self._outcome(report, closure)

    def advance_round(self) -> None:
        """Ends an outer round: every fragment not synchronized in it ages by one."""
        with self._exclusive():
            for fast in self._groups:
                fast.advance_round()


class AdamDecay(_AdamFamily):
    """Adam-Decay: CGAD without the cosine gate, sigma(tau) = exp(-alpha * tau). Options as CGAD's."""
    _optimizer = "adam-decay"
    _hyperparameters = ("lr", "betas", "eps", "weight_decay", "alpha")

    def __init__(self, params: Params, lr: Real = 1e-3, betas: Betas = (0.9, 0.999), eps: Real = 1e-8,
                 weight_decay: Real = 0.0, alpha: Real = 0.2, state: str = "fp32", rounding: str = "nearest",
                 seed: int = 0, q8_semantics: str = "cgad", min_q8_size: Optional[int] = None, threads: int = 0,
                 v_map: str = "dynamic", q8_maps: Q8Maps = None, **unsupported: Any) -> None:
        # No gate: no tau_cut or on_zero_gate in its param groups, where no step would read them.
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, alpha=alpha), state,
                         rounding, seed, q8_semantics, min_q8_size, threads, unsupported=unsupported, v_map=v_map,
                         q8_maps=q8_maps)


class Adam(_AdamFamily):
    """Adam (AdamW-form decoupled weight decay) on the fast path: sigma = 1, staleness ignored. Options as CGAD's."""
    _optimizer = "adam"
    _hyperparameters = ("lr", "betas", "eps", "weight_decay")

    def __init__(self, params: Params, lr: Real = 1e-3, betas: Betas = (0.9, 0.999), eps: Real = 1e-8,
                 weight_decay: Real = 0.0, state: str = "fp32", rounding: str = "nearest", seed: int = 0,
                 q8_semantics: str = "cgad", min_q8_size: Optional[int] = None, threads: int = 0,
                 v_map: str = "dynamic", q8_maps: Q8Maps = None, **unsupported: Any) -> None:
        # sigma = 1: no alpha, tau_cut or on_zero_gate in its param groups, where no step would read them.
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay), state, rounding,
                         seed, q8_semantics, min_q8_size, threads, unsupported=unsupported, v_map=v_map,
                         q8_maps=q8_maps)


class _NesterovFamily(_FastpathOptimizer):
    _hyperparameters = ("lr", "momentum")
    # torch.optim.SGD's (torch 2.x, torch/optim/sgd.py): this step is SGD's with nesterov=True, dampening 0 and no
    # weight decay, so a group ported from SGD that sets one otherwise would step differently there.
    _neutral_group_keys = {"nesterov": True, "dampening": 0, "weight_decay": 0}

    def __init__(self, params: Params, lr: Real, momentum: Real, state: str, rounding: str, seed: int,
                 min_q8_size: Optional[int], threads: int, unsupported: Dict[str, Any]) -> None:
        super().__init__(params, dict(lr=lr, momentum=momentum), state=state, rounding=rounding, seed=seed,
                         q8_semantics="cgad", min_q8_size=min_q8_size, threads=threads, unsupported=unsupported)


class Nesterov(_NesterovFamily):
    """The DiLoCo outer recipe (Douillard et al. 2023): b = mu*b + delta; theta -= lr*(delta + mu*b); lr 0.7,
    momentum 0.9. Staleness-blind. state: "fp32", "bf16" or "q8" (cgad's 8-bit semantics)."""
    _optimizer = "nesterov"

    def __init__(self, params: Params, lr: Real = 0.7, momentum: Real = 0.9, state: str = "fp32",
                 rounding: str = "nearest", seed: int = 0, min_q8_size: Optional[int] = None, threads: int = 0,
                 **unsupported: Any) -> None:
        super().__init__(params, lr, momentum, state, rounding, seed, min_q8_size, threads, unsupported)


class SDM(_NesterovFamily):
    """Staleness-dampened momentum: Nesterov with the pseudo-gradient scaled by 1/(1 + tau) (Zhang et al. 2016,
    cgad's definition). Options as Nesterov's."""
    _optimizer = "sdm"

    def __init__(self, params: Params, lr: Real = 0.7, momentum: Real = 0.9, state: str = "fp32",
                 rounding: str = "nearest", seed: int = 0, min_q8_size: Optional[int] = None, threads: int = 0,
                 **unsupported: Any) -> None:
        super().__init__(params, lr, momentum, state, rounding, seed, min_q8_size, threads, unsupported)
