"""cgad.torch.Gated: CGAD, Adam-Decay, SDM or PA-CGAD over an optimizer the user already runs (docs/python.md,
"CGAD over the optimizer you already run"). Every pseudo-gradient in ``.grad`` is scaled by cgad's σ(τ) -- the
float the fast path's own step uses -- and handed to the wrapped optimizer's step, which does the rest: torch's
fused AdamW on a GPU, bitsandbytes' AdamW8bit, torchao's low-bit AdamW, cgad.torch.Adam. docs/design.md §3 is
the gate, the zero-gate policy, PA-CGAD's ages and the refusal of NaN/Inf and overflowing pseudo-gradients."""
from __future__ import annotations  # the annotations name torch 2.x's types; torch 1.13 never evaluates them

import numbers
from typing import Any, Callable, Dict, List, Literal, Optional, Union, overload

import torch

from .. import _cgad
from . import _dtensor, _gated_state, _hooks, _lazy_init, _metrics, _pseudo_gradient, _staleness
from ._gated_config import WHERE, GateConfig
from ._optimizers import PACGAD, SDM, AdamDecay, CGAD
from ._protocol import Counters, check_policy, count, new_counts, report_refusal
from ._protocol import staleness as as_staleness
from ._report import REFUSED, GroupReport, StepReport, combine, first_params, no_gradient
from ._types import Loss, Real, Staleness, TauCut


class Gated(torch.optim.Optimizer):
    """CGAD over ``optimizer`` (any torch.optim.Optimizer): ``step(staleness=tau)`` scales every ``p.grad`` (the
    pseudo-gradient Δ) by σ(τ) and runs ``optimizer.step()`` on g = fl(σ·Δ), rounded once in the gradient's
    dtype. method: "cgad" (σ = γ(τ)e^{-ατ}, the cosine gate cutting off at tau_cut), "adam-decay" (σ = e^{-ατ})
    or "sdm" (σ = 1/(1 + τ), for an SGD-Nesterov optimizer). alpha and tau_cut: numbers or decimal text.
    on_zero_gate: "apply" runs the wrapped step on g = 0·Δ where γ(τ) = 0; "skip" drops such an event (the
    wrapped optimizer is not called). fragments="groups": PA-CGAD, each param group a fragment with its own age
    (as cgad.torch.PACGAD's); ``step(staleness=, fragment=f)`` steps group f alone, gated by σ(max(τ, age_f)).
    on_nonfinite: what a refused step does beyond its report ("skip", "warn", "raise"), as cgad.torch's.

    Δ is scaled in place, as GradScaler.unscale_ unscales: after a step that ran the wrapped optimizer, ``.grad``
    holds g = fl(σ·Δ) (no second pseudo-gradient's worth of memory); a refused or dropped event leaves it Δ, bit
    for bit (the refusal is decided before anything is written). DTensor parameters (FSDP2's ``fully_shard``, on
    any device) with DTensor gradients of their mesh and placements: each rank scales its local shards, and the
    NaN/Inf and overflow refusal is decided once for the whole mesh (one all_reduce per step), so every rank steps
    or refuses alike. param_groups, state and defaults are the wrapped optimizer's own objects, so LR schedulers
    and code that reads ``opt.state[p]`` work on the wrapper."""

    # What a bare step() uses (torchft calls step() with no arguments): 0 until given (_staleness.py).
    staleness = _staleness.Staleness()

    def __init__(self, optimizer: torch.optim.Optimizer, method: str = "cgad", alpha: Real = 0.2,
                 tau_cut: TauCut = 32, on_zero_gate: str = "apply", fragments: Optional[Literal["groups"]] = None,
                 on_nonfinite: str = "skip") -> None:
        if isinstance(optimizer, Gated):
            raise _cgad.InputError(f"{WHERE}: the optimizer is already a Gated one (its pseudo-gradients would be "
                                   "scaled twice)")
        if isinstance(optimizer, (CGAD, PACGAD, AdamDecay, SDM)):
            raise _cgad.InputError(f"{WHERE}: {type(optimizer).__name__} gates by its own staleness; use it "
                                   "directly, or wrap cgad.torch.Adam or Nesterov")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise _cgad.InputError(f"{WHERE}: the optimizer must be a torch.optim.Optimizer, got "
                                   f"{type(optimizer).__name__}")
        self._config = GateConfig.make(method, alpha, tau_cut, on_zero_gate, fragments)
        self.on_nonfinite = check_policy(on_nonfinite, WHERE)
        self.optimizer = optimizer
        self.fragment = 0    # fragments="groups": the fragment a bare step() synchronizes
        self.last_report = None
        self._step_counts = new_counts()
        self._round = 0
        self._last_sync = [-1] * len(optimizer.param_groups)
        self._check_fragment_count(WHERE)
        _gated_state.hold_keys(optimizer.param_groups)
        # torch.optim.Optimizer's protocol without its __init__, which would build param groups of its own: the
        # hook tables, and the step wrapped so that step pre/post hooks (torch >= 2.0) and the profiler see it.
        _hooks.start_without_hooks(self)
        self._warned_capturable_if_run_uncaptured = True

    # --- the wrapped optimizer's objects, shared ----------------------------------------------------------------

    @property
    def param_groups(self) -> List[Dict[str, Any]]:
        return self.optimizer.param_groups

    @param_groups.setter
    def param_groups(self, value: List[Dict[str, Any]]) -> None:
        self.optimizer.param_groups = value

    @property
    def state(self) -> Any:
        return self.optimizer.state

    @state.setter
    def state(self, value: Any) -> None:
        self.optimizer.state = value

    @property
    def defaults(self) -> Dict[str, Any]:  # type: ignore[override]  # the wrapped optimizer's, not settable
        return self.optimizer.defaults

    @property
    def method(self) -> str:
        return self._config.method

    @property
    def alpha(self) -> str:
        return self._config.alpha

    @property
    def tau_cut(self) -> int:
        return self._config.tau_cut

    @property
    def on_zero_gate(self) -> str:
        return self._config.on_zero_gate

    @property
    def fragments(self) -> Optional[str]:
        return self._config.fragments

    def zero_grad(self, *args: Any, **kwargs: Any) -> None:
        return self.optimizer.zero_grad(*args, **kwargs)

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        """Adds the group to the wrapped optimizer. With fragments="groups" it is a new fragment, of age 0 now."""
        self.optimizer.add_param_group(param_group)
        _gated_state.hold_keys(self.optimizer.param_groups)
        self._last_sync.append(self._round - 1)
        try:
            self._check_fragment_count(WHERE)
        except _cgad.InputError:
            self.optimizer.param_groups.pop()
            self._last_sync.pop()
            raise

    def __repr__(self):
        return (f"Gated(method={self.method!r}, alpha={self.alpha}, tau_cut={self.tau_cut}, "
                f"on_zero_gate={self.on_zero_gate!r}, fragments={self.fragments!r}) over {self.optimizer!r}")

    # --- fragments (PA-CGAD) ------------------------------------------------------------------------------------

    def _check_fragment_count(self, where):
        # A round-robin fragment misses P - 1 rounds, so P <= tau_cut keeps every gate above 0 (docs/design.md §3).
        if self.fragments and len(self.param_groups) > self.tau_cut:
            raise _cgad.InputError(f"{where}: fragments='groups' with {len(self.param_groups)} param groups needs "
                                   f"tau_cut >= {len(self.param_groups)}, got {self.tau_cut} (a round-robin "
                                   "fragment misses P - 1 rounds)")

    def _age(self, group):
        return max(0, self._round - self._last_sync[group] - 1)

    def _synchronized(self, groups):
        """PA-CGAD: the event synchronized these fragments, applied or dropped by the zero gate."""
        if self.fragments:
            for g in groups:
                self._last_sync[g] = self._round

    def advance_round(self) -> None:
        """Ends an outer round (fragments="groups"): every fragment not synchronized in it ages by one."""
        if not self.fragments:
            raise _cgad.InputError(f"{WHERE}: rounds and ages are PA-CGAD's (fragments='groups')")
        self._round += 1

    def _targets(self, fragment, end_round):
        """The param groups an event steps: all of them, or fragment ``fragment``'s group alone."""
        if not self.fragments:
            if fragment is not None and not (isinstance(fragment, numbers.Integral) and
                                             not isinstance(fragment, bool) and fragment == 0):
                raise _cgad.InputError(f"{WHERE}: there is one fragment (fragments='groups' takes fragment=), got "
                                       f"{fragment!r}")
            if end_round is not True:
                raise _cgad.InputError(f"{WHERE}: end_round is PA-CGAD's (fragments='groups')")
            return list(range(len(self.param_groups)))
        if len(self._last_sync) != len(self.param_groups):
            raise _cgad.InputError(f"{WHERE}: the wrapped optimizer's param_groups changed outside "
                                   "Gated.add_param_group (each group is a fragment with an age)")
        self._check_fragment_count(WHERE)
        fragment = self.fragment if fragment is None else fragment
        if isinstance(fragment, bool) or not isinstance(fragment, numbers.Integral) or \
                not 0 <= int(fragment) < len(self.param_groups):
            raise _cgad.InputError(f"{WHERE}: fragment must be a param group's index in [0, "
                                   f"{len(self.param_groups) - 1}], got {fragment!r}")
        return [int(fragment)]

    # --- the step -----------------------------------------------------------------------------------------------

    # torch.optim.Optimizer.step returns None without a closure; Gated's returns the step's report (docs/python.md).
    @overload  # type: ignore[override]
    def step(self, closure: None = None, *, staleness: Optional[Staleness] = None, fragment: Optional[int] = None,
             end_round: bool = True) -> StepReport: ...

    @overload
    def step(self, closure: Callable[[], Loss], *, staleness: Optional[Staleness] = None,
             fragment: Optional[int] = None, end_round: bool = True) -> Loss: ...

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None, *, staleness: Optional[Staleness] = None,
             fragment: Optional[int] = None, end_round: bool = True) -> Any:
        """Applies the pseudo-gradients in ``.grad`` as one event of staleness ``staleness`` (default
        ``self.staleness``) through the wrapped optimizer's step, and returns the StepReport (the closure's loss
        when given a closure, as torch.optim; the report is then ``self.last_report``). A NaN/Inf pseudo-gradient
        anywhere, or |σ·Δ| >= 2^63, refuses the whole event before anything changes."""
        if _lazy_init.requested(self, closure, staleness, fragment):
            return self._allocate_state()
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        tau = _staleness.of_step(self, staleness, True, WHERE, as_staleness)
        targets = self._targets(fragment, end_round)
        report = self._event(targets, tau, loss)
        if self.fragments and end_round:
            self._round += 1  # the round ends whatever became of its event, as PACGAD's (docs/python.md)
        self.last_report = report
        count(self._step_counts, report)
        if report.reason in ("nonfinite-gradient", "overflowing-gradient"):
            report_refusal(report, check_policy(self.on_nonfinite, WHERE), WHERE)
        return loss if closure is not None else report

    def _allocate_state(self):
        """torch.distributed.checkpoint's lazy initialisation (_lazy_init.py): the wrapped optimizer's step on DCP's
        zero gradients at lr 0, every param group at once (each fragment's state allocated, so that a checkpoint
        of fragments="groups" loads into every one), then each state entry's "step" count put back to 0 (a tensor
        in place, a number as a number): torch's Adam family then holds the state of a never-stepped optimizer, bit
        for bit. The gate is not stepped: no count, no report, no round ended, no fragment synchronized. Returns
        None, as torch.optim's step() without a closure."""
        self.optimizer.step()
        for entry in self.optimizer.state.values():
            step = entry.get("step") if isinstance(entry, dict) else None
            if isinstance(step, torch.Tensor):
                step.zero_()
            elif isinstance(step, numbers.Number) and not isinstance(step, bool):
                entry["step"] = type(step)(0)  # type: ignore[call-arg]  # an int or a float: its own 0
        return None

    def _event(self, targets, tau, loss):
        first_param = first_params(self.param_groups, targets)
        # DTensor parameters (FSDP2's): each rank scales its local shards, and the refusal is the mesh's (below).
        mesh = _dtensor.mesh_of([p for group in self.param_groups for p in group["params"]], WHERE)
        stepped = {}  # group index -> [(parameter index in the group, Δ: the local shard of a DTensor's)]
        for g in targets:
            params = self.param_groups[g]["params"]
            sources = params if mesh is None else _dtensor.gradient_sources(params, f"{WHERE} param group {g}")
            pairs = [(k, s.grad) for k, s in enumerate(sources) if s.grad is not None]
            for k, grad in pairs:
                _pseudo_gradient.check(grad, f"{WHERE} param group {g} parameter {k}")
            if pairs:
                stepped[g] = pairs
        _metrics.record(self, tau, [grad for pairs in stepped.values() for _, grad in pairs])
        tau_effective = {g: max(tau, self._age(g)) if self.fragments else tau for g in stepped}
        sigma = {g: self._config.sigma(t) for g, t in tau_effective.items()}
        # One σ per event: every group is at τ, or (fragments) one fragment is stepped.
        event_sigma = next(iter(sigma.values()), 0.0)
        order = [(g, i) for g in stepped for i in range(len(stepped[g]))]
        deltas = [stepped[g][i][1] for g, i in order]

        # Decided before anything is written, in the fast path's order (the schedule's outcome, step_schedule.hpp):
        # a NaN/Inf, even where the gate would drop the event; else the zero gate's drop; else the overflow rule on
        # g = fl(σΔ). The event has one τ_effective (every group at τ, or one fragment).
        nonfinite, overflowing = _pseudo_gradient.refusals(deltas, event_sigma)
        outcome = self._config.schedule.outcome(next(iter(tau_effective.values())), any(nonfinite),
                                                any(overflowing)) if stepped else "none"
        skipped = outcome == "zero-gate"
        local = outcome if outcome in REFUSED else "none"
        # DTensors: every rank of the mesh steps or refuses alike, by one all_reduce per step on every rank
        # whatever its shards hold (docs/design.md, "cgad.torch").
        reason = local if mesh is None else _dtensor.agree(mesh, local)
        if reason != "none":
            others = GroupReport(False, reason, 0.0, tau, None, None)
            if reason != local:  # refused by another rank: no group of this one is located
                return combine([others for _ in targets], first_param, loss)
            found = nonfinite if reason == "nonfinite-gradient" else overflowing
            n = found.index(True)
            g, i = order[n]
            scan = (deltas[n], _pseudo_gradient.nonfinite) if found is nonfinite else \
                (_pseudo_gradient.scaled(deltas[n], sigma[g]), _pseudo_gradient.overflowing)
            located = GroupReport(False, reason, sigma[g], tau_effective[g], stepped[g][i][0],
                                  _pseudo_gradient.first_index(*scan))
            return combine([located if t == g else others for t in targets], first_param, loss)
        if not stepped:
            return combine([no_gradient(tau) for _ in targets], first_param, loss)
        if skipped:
            # Dropped: the wrapped optimizer is not called; a fragment is synchronized all the same.
            self._synchronized(stepped)
            return combine([GroupReport(False, "zero-gate", sigma[g], tau_effective[g], None, None) if g in stepped
                            else no_gradient(tau) for g in targets], first_param, loss)

        _pseudo_gradient.scale_all_(deltas, event_sigma)  # .grad now holds g, as the wrapped step reads it
        self._run_wrapped(set(stepped))
        self._synchronized(stepped)
        reports = []
        for g in targets:
            if g not in stepped:
                reports.append(no_gradient(tau))
                continue
            zero = self._config.gate_is_zero(tau_effective[g])
            reports.append(GroupReport(True, "zero-gate" if zero else "none", sigma[g], tau_effective[g], None, None))
        return combine(reports, first_param, loss)

    def _run_wrapped(self, stepped_groups):
        """The wrapped optimizer's step, during which every parameter of a group not stepped has no .grad (PA-CGAD
        steps one fragment); those are put back after it."""
        saved = []
        try:
            if self.fragments:
                for g, group in enumerate(self.param_groups):
                    if g not in stepped_groups:
                        for p in group["params"]:
                            if p.grad is not None:
                                saved.append((p, p.grad))
                                p.grad = None
            self.optimizer.step()
        finally:
            for p, grad in reversed(saved):
                p.grad = grad

    @property
    def counters(self) -> Counters:
        """Steps by what became of them, as cgad.torch's ``counters`` ("applied", "nonfinite-gradient",
        "overflowing-gradient", "zero-gate", "no-gradient"); called, ``counters(group)``: PA-CGAD's age of
        fragment ``group`` ({"age": [a]}), {} without fragments."""
        return Counters(self._step_counts, self._fragment_counters)

    def watch_delta_norm(self) -> None:
        """As cgad.torch's: from the next step on, metrics() also gives delta_norm (opt-in: one more read of Δ)."""
        _metrics.watch(self)

    def metrics(self) -> Dict[str, float]:
        """The last step and the steps so far as plain numbers for a logger, as cgad.torch's metrics() (_metrics.py;
        no trap figures: the wrapped optimizer's state is its own)."""
        return _metrics.metrics(self, self.counters)

    def _fragment_counters(self, group=0):
        if isinstance(group, bool) or not isinstance(group, numbers.Integral) or \
                not 0 <= int(group) < len(self.param_groups):
            raise _cgad.InputError(f"{WHERE}: group must be in [0, {len(self.param_groups) - 1}], got {group!r}")
        return {"age": [self._age(group)]} if self.fragments else {}

    # --- state --------------------------------------------------------------------------------------------------

    def state_dict(self) -> Dict[str, Any]:
        """The wrapped optimizer's state_dict, each param group's entry also carrying ``cgad_gated`` (the gate's
        settings, the step counts, PA-CGAD's round and the group's last synchronized round); torch's state_dict
        hooks run around it (_hooks.py)."""
        return _hooks.state_dict(self, self._pack)

    def _pack(self):
        _gated_state.hold_keys(self.param_groups)  # a group the user loaded or replaced in the wrapped optimizer
        out = dict(self.optimizer.state_dict())
        entries = _gated_state.entries(self._config, self._round, self._last_sync, self._step_counts)
        out["param_groups"] = [dict(g, **{_gated_state.KEY: e}) for g, e in zip(out["param_groups"], entries)]
        return out

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Loads a Gated state_dict (the wrapped optimizer's state, then the gate's settings and counts, bit for
        bit), or the wrapped optimizer's own state_dict (the wrapper keeps its settings and counts). Refuses,
        changing nothing of the wrapper, one of another method or fragments setting or with impossible counts.
        torch's load_state_dict hooks run around it (_hooks.py)."""
        _hooks.load_state_dict(self, state_dict, self._load)

    def _load(self, state_dict):
        parsed = _gated_state.parse(state_dict, self._config, len(self.param_groups), WHERE)
        self.optimizer.load_state_dict(_gated_state.without_entries(state_dict) if parsed else state_dict)
        _gated_state.hold_keys(self.param_groups)  # torch's load put the saved groups in place, without the key
        if parsed:
            self._config, self._round, self._last_sync, counts = parsed
            self._step_counts = dict(counts)

    # --- copies: copy.deepcopy and pickle -----------------------------------------------------------------------

    def __getstate__(self):
        # torch.optim.Optimizer's would keep only defaults, state and param_groups (here the wrapped optimizer's).
        # An LR scheduler's instance-level wrapper of step (torch.optim.lr_scheduler) points at this object, not
        # at the copy, and cannot be pickled: a scheduler made for the copy wraps it again. The hook tables are not
        # copied either, as a copy of torch's optimizers (and of cgad's) starts without hooks: a hook is often a
        # lambda or a closure over the original (the torchft recipe's staleness pre-hook), which pickle cannot take.
        return {k: v for k, v in self.__dict__.items() if k != "step" and k not in _hooks.HOOK_TABLES}

    def __setstate__(self, state):
        self.__dict__.update(state)
        _hooks.start_without_hooks(self)

