"""The torch.optim.Optimizer classes of cgad.torch over the fast path (see the package docstring)."""
import contextlib
import numbers
import os
import threading
import weakref

import torch

from .. import _cgad
from . import _state
from .._arguments import INT64_MAX, UINT32_MAX, UINT64_MAX, integer
from ._groups import CudaGroup, make_group
from ._tensors import check_no_aliasing, mark_modified
from ._report import REFUSED, GroupReport, StepReport, combine, group_report, no_gradient


# torch.optim flags these optimizers do not have: refused when given at all, rather than ignored.
_UNSUPPORTED = {
    "fused": "its step is cgad's fast path, not torch's fused kernel",
    "foreach": "its step is cgad's fast path, not torch's foreach kernels",
    "capturable": "the fast path's step is not CUDA-graph capturable from torch",
    "differentiable": "the fast path's step is not differentiable",
    "amsgrad": "AMSGrad's max of past second moments is not part of CGAD",
    "maximize": "the outer step descends the pseudo-gradient",
}


def _number(value, name, where):
    """A hyperparameter as the shortest decimal of its float value (step_config.cpp rounds it once to float)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _cgad.InputError(f"{where}: {name} must be a real number, got {value!r}")
    if isinstance(value, numbers.Integral):
        return str(int(value))  # exact, however large: the library's range check then refuses it with the range
    try:
        return repr(float(value))
    except OverflowError:
        raise _cgad.InputError(f"{where}: {name} = {value} is beyond the range of a double") from None


def _integer(value, name, where, least, most=INT64_MAX):
    return integer(value, name, least, most, where)


# The optimizers alive in this process, for the fork handler below.
_LIVE = weakref.WeakSet()


def _after_fork_in_child():
    """A forked child has only the thread that forked. An optimizer that another thread was stepping (or loading)
    at that moment is half updated in the child, and its lock is held by a thread that does not exist here: it is
    marked so that it refuses to be used, rather than waiting forever. Every other one gets a fresh lock and works
    as it did (the fast path's thread pool starts new workers in the child: fastpath/detail/thread_pool.hpp)."""
    me = threading.get_ident()
    for optimizer in list(_LIVE):
        if optimizer._holder is not None and optimizer._holder != me:
            optimizer._forked_mid_call = True
        optimizer._lock = threading.RLock()
        optimizer._holder = None


os.register_at_fork(after_in_child=_after_fork_in_child)


class _FastpathOptimizer(torch.optim.Optimizer):
    """What the six optimizers share. Subclasses set _optimizer (the fast path's name) and _hyperparameters (the
    param-group keys they take), and pass their defaults."""

    _optimizer = None
    _hyperparameters = ()

    def __init__(self, params, defaults, *, state, rounding, seed, q8_semantics, min_q8_size, threads,
                 fragments=1, unsupported=None, v_map="dynamic"):
        name = type(self).__name__
        for flag in unsupported or {}:
            if flag in _UNSUPPORTED:
                raise _cgad.InputError(f"{name}: {flag}= is not supported ({_UNSUPPORTED[flag]})")
            raise TypeError(f"{name}() got an unexpected keyword argument '{flag}'")
        for key, value in (("state", state), ("rounding", rounding), ("q8_semantics", q8_semantics), ("v_map", v_map)):
            if not isinstance(value, str):
                raise _cgad.InputError(f"{name}: {key} must be a string, got {value!r}")
        if min_q8_size is not None:
            min_q8_size = _integer(min_q8_size, "min_q8_size", name, 0, UINT64_MAX)
        self._structure = {
            "optimizer": self._optimizer, "state": state, "rounding": rounding,
            "seed": _integer(seed, "seed", name, 0, UINT64_MAX), "q8_semantics": q8_semantics, "v_map": v_map,
            "min_q8_size": min_q8_size, "fragments": _integer(fragments, "fragments", name, 1, UINT64_MAX),
        }
        self._threads = _integer(threads, "threads", name, 0, UINT32_MAX)
        self._groups = []     # one _groups.Group per param group, in order
        self.staleness = 0    # what a bare step() uses (torchft calls step() with no arguments)
        # One call at a time changes the optimizer: the step releases the GIL while the fast path runs, and two
        # steps at once would share its state (and, before, its thread pool). Reentrant: PACGAD's step ends the
        # round through advance_round(), and a closure may read the optimizer.
        self._lock = threading.RLock()
        self._holder = None   # the thread inside _exclusive(), for the fork handler
        self._forked_mid_call = False
        _LIVE.add(self)
        super().__init__(params, defaults)

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
        """The fast-path configuration of a param group, its hyperparameters read from the group now."""
        spec = dict(self._structure)
        for key in self._hyperparameters:
            if key not in group:
                raise _cgad.InputError(f"{where}: the param group has no '{key}'")
            value = group[key]
            if key == "betas":
                if not isinstance(value, (tuple, list)) or len(value) != 2:
                    raise _cgad.InputError(f"{where}: betas must be a pair (beta1, beta2), got {value!r}")
                spec["beta1"], spec["beta2"] = (_number(b, f"beta{i + 1}", where) for i, b in enumerate(value))
            elif key == "tau_cut":
                spec["tau_cut"] = _integer(value, "tau_cut", where, 1)
            elif key == "on_zero_gate":
                spec["on_zero_gate"] = value if isinstance(value, str) else repr(value)
            else:
                spec[key] = _number(value, key, where)
        return spec

    def _where(self, index):
        return f"{type(self).__name__} param group {index}"

    def add_param_group(self, param_group):
        with self._exclusive():
            super().add_param_group(param_group)
            index = len(self.param_groups) - 1
            try:
                group = self.param_groups[index]
                where = self._where(index)
                made = make_group(self._spec(group, where), group["params"], self._threads, where)
                if (isinstance(made, CudaGroup) and index > 0) or (self._groups and isinstance(self._groups[0],
                                                                                               CudaGroup)):
                    raise _cgad.InputError(f"{where}: CUDA parameters take one param group (the CUDA backend cannot "
                                           "check an event before stepping it, so a NaN in one group could not "
                                           "leave the others untouched)")
                self._check_disjoint_groups(where)
            except Exception:
                self.param_groups.pop()
                raise
            self._groups.append(made)

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

    @torch.no_grad()
    def step(self, closure=None, *, staleness=None, fragment=None):
        """Applies the pseudo-gradients in the parameters' ``.grad`` as one event of staleness ``staleness``
        (outer rounds; default ``self.staleness``). Returns a StepReport. Steps from several threads take turns."""
        with self._exclusive():
            return self._step(closure, staleness, self._fragment(fragment))

    def _step(self, closure, staleness, fragment):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        name = type(self).__name__
        tau = _integer(self.staleness if staleness is None else staleness, "staleness", name, 0)
        if len(self._groups) != len(self.param_groups):
            raise _cgad.InputError(f"{name}: param_groups changed outside add_param_group")
        self._check_disjoint_groups(name)
        # Everything is checked, and every group's operands prepared, before anything changes.
        events = []
        for index, (group, fast) in enumerate(zip(self.param_groups, self._groups)):
            where = self._where(index)
            spec = self._spec(group, where)
            _cgad.check_spec(spec)
            events.append((group, fast, spec, fast.prepare(group["params"], fragment, where)))
        for group, fast, spec, prepared in events:
            fast.configure(spec)
        stepped = [e for e in events if e[3] is not None]
        if len(stepped) > 1:
            # A refused event in any group must leave every group untouched: look before stepping any.
            for group, fast, spec, prepared in stepped:
                preview = group_report(fast.preview(prepared, tau, fragment), fast, fragment)
                if preview.reason in REFUSED:
                    # The other groups were refused with it: not applied, for the same reason, located here.
                    others = GroupReport(False, preview.reason, 0.0, tau, None, None)
                    reports = [preview if e[1] is fast else others for e in events]
                    return combine(reports, self._first_params(), loss)
        reports = []
        for group, fast, spec, prepared in events:
            if prepared is None:
                reports.append(no_gradient(tau))
                continue
            report = fast.step(group["params"], prepared, tau, fragment)
            if report["applied"]:
                mark_modified(group["params"])
            reports.append(group_report(report, fast, fragment))
        return combine(reports, self._first_params(), loss)

    def _first_params(self):
        first, at = [], 0
        for group in self.param_groups:
            first.append(at)
            at += len(group["params"])
        return first

    # --- state --------------------------------------------------------------------------------------------------

    def state_dict(self):
        """torch's state_dict (param_groups; an empty per-parameter state) plus the entry "cgad": every group's
        fast-path state as its checksummed bytes (a uint8 tensor), for a bit-identical resume."""
        with self._exclusive():
            out = super().state_dict()
            out[_state.KEY] = _state.pack(self._optimizer, self._groups)
            return out

    def load_state_dict(self, state_dict):
        """Resumes from a state_dict() of an optimizer of the same class, formats and parameter layout, bit for
        bit; refuses (InputError) a corrupt or mismatched one, changing nothing: its param_groups' hyperparameters
        are checked as a step checks them, so a bad one is refused here, not at the next step."""
        with self._exclusive():
            self._load_state_dict(state_dict)

    def _load_state_dict(self, state_dict):
        name = type(self).__name__
        saved = _state.unpack(state_dict, self._optimizer, len(self.param_groups), name)
        for index, (group, loaded) in enumerate(zip(self.param_groups, state_dict["param_groups"])):
            where = self._where(index)
            params = loaded.get("params")
            if not isinstance(params, list) or len(params) != len(group["params"]):
                raise _cgad.InputError(f"{where}: the state_dict's param group must list {len(group['params'])} "
                                       f"parameters, as this one has, got {params!r}")
            _cgad.check_spec(self._spec(loaded, where))
        rebuilt = []
        for index, (group, (spec, sizes, state)) in enumerate(zip(self.param_groups, saved)):
            where = self._where(index)
            hyper = {k: v for k, v in spec.items() if k not in self._structure and k != "params"}
            fast = make_group(dict(self._structure, **hyper), group["params"], self._threads, where)
            if sizes != fast.sizes:
                raise _cgad.InputError(f"{where}: the state_dict's tensors have sizes {sizes}, this group's "
                                       f"{fast.sizes}")
            try:
                fast.engine.load_bytes(state)
            except _cgad.InputError as e:
                raise _cgad.InputError(f"{where}: {e}") from None
            rebuilt.append(fast)
        super().load_state_dict({k: v for k, v in state_dict.items() if k != _state.KEY})
        self._groups = rebuilt

    def state_buffer(self, param, name):
        """The fast-path state buffer ``name`` ("m", "v" for the Adam family, "b" for Nesterov and SDM) of one
        parameter, dequantized to a float32 tensor of its shape (a copy)."""
        if not isinstance(name, str):
            raise _cgad.InputError(f"{type(self).__name__}: a state buffer's name is a string, got {name!r}")
        with self._exclusive():
            for group, fast in zip(self.param_groups, self._groups):
                for k, p in enumerate(group["params"]):
                    if p is param:
                        values = fast.engine.read_buffer(name)[fast.begins[k]:fast.begins[k + 1]]
                        return torch.from_numpy(values.copy()).reshape(p.shape)
        raise _cgad.InputError(f"{type(self).__name__}: the tensor is not one of this optimizer's parameters")

    def counters(self, group=0):
        """The fast path's counters of a param group: "t" (Adam family: applied steps, per fragment), "age"
        (PACGAD: outer rounds since each fragment was last synchronized)."""
        with self._exclusive():
            index = _integer(group, "group", type(self).__name__, 0, len(self._groups) - 1)
            return self._groups[index].engine.counters()


class _AdamFamily(_FastpathOptimizer):
    _hyperparameters = ("lr", "betas", "eps", "weight_decay", "alpha", "tau_cut", "on_zero_gate")

    def __init__(self, params, lr, betas, eps, weight_decay, alpha, tau_cut, on_zero_gate, state, rounding, seed,
                 q8_semantics, min_q8_size, threads, fragments=1, unsupported=None, v_map="dynamic"):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, alpha=alpha, tau_cut=tau_cut,
                        on_zero_gate=on_zero_gate)
        super().__init__(params, defaults, state=state, rounding=rounding, seed=seed, q8_semantics=q8_semantics,
                         min_q8_size=min_q8_size, threads=threads, fragments=fragments, unsupported=unsupported,
                         v_map=v_map)


class CGAD(_AdamFamily):
    """Cosine-Gated Adam-Decay: Adam fed sigma(tau) * pseudo-gradient, sigma(tau) = gamma(tau) * exp(-alpha * tau)
    with the cosine gate gamma cutting off at tau_cut; decoupled weight decay (AdamW form). on_zero_gate: "apply"
    runs a step on a zero gradient where gamma(tau) = 0 (tau >= tau_cut), "skip" drops such an event.
    state: "fp32", "bf16" or "q8" (blockwise 8-bit, 256-element blocks); rounding: "nearest" or "stochastic"
    (keyed by seed, step and element); q8_semantics: "cgad" (exact nearest code, v = 0 guard) or "bnb"
    (bitsandbytes' 8-bit Adam formula by formula); min_q8_size: tensors under it keep fp32 state (default 4096
    with bnb semantics, 0 with cgad's); threads: 0 for every core; v_map (q8 state): "dynamic" (bitsandbytes'
    map, which stores a v below ~1.6e-7 of its block's absmax as 0) or "zero-free" (no code at 0, Li, Chen & Zhu's
    DE-0)."""
    _optimizer = "cgad"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, alpha=0.2, tau_cut=32,
                 on_zero_gate="apply", state="fp32", rounding="nearest", seed=0, q8_semantics="cgad",
                 min_q8_size=None, threads=0, v_map="dynamic", **unsupported):
        super().__init__(params, lr, betas, eps, weight_decay, alpha, tau_cut, on_zero_gate, state, rounding, seed,
                         q8_semantics, min_q8_size, threads, unsupported=unsupported, v_map=v_map)


class PACGAD(_AdamFamily):
    """Partial-sync CGAD: the parameters (the group's tensors concatenated) in ``fragments`` contiguous fragments,
    each with its own step count and age (outer rounds since it was last synchronized); an event for fragment f
    is gated by sigma(max(tau, age_f)) and reads only f's part of the pseudo-gradients. step(staleness=,
    fragment=) ends the outer round after the event, as `cgad replay` does (end_round=False leaves it open;
    advance_round() ends one). One param group; fragments must be <= tau_cut; fragments=1 is exactly CGAD."""
    _optimizer = "pa-cgad"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, alpha=0.2, tau_cut=32,
                 on_zero_gate="apply", fragments=1, state="fp32", rounding="nearest", seed=0, q8_semantics="cgad",
                 min_q8_size=None, threads=0, v_map="dynamic", **unsupported):
        self.fragment = 0  # what a bare step() uses
        super().__init__(params, lr, betas, eps, weight_decay, alpha, tau_cut, on_zero_gate, state, rounding, seed,
                         q8_semantics, min_q8_size, threads, fragments=fragments, unsupported=unsupported,
                         v_map=v_map)

    def add_param_group(self, param_group):
        if self.param_groups:
            raise _cgad.InputError("PACGAD takes one param group (its fragments partition all its parameters)")
        super().add_param_group(param_group)

    def _fragment(self, fragment):
        return _integer(self.fragment if fragment is None else fragment, "fragment", "PACGAD", 0, UINT64_MAX)

    @torch.no_grad()
    def step(self, closure=None, *, staleness=None, fragment=None, end_round=True):
        with self._exclusive():
            report = self._step(closure, staleness, self._fragment(fragment))
            if end_round:
                self.advance_round()
            return report

    def advance_round(self):
        """Ends an outer round: every fragment not synchronized in it ages by one."""
        with self._exclusive():
            for fast in self._groups:
                fast.engine.advance_round()


class AdamDecay(_AdamFamily):
    """Adam-Decay: CGAD without the cosine gate, sigma(tau) = exp(-alpha * tau). Options as CGAD's."""
    _optimizer = "adam-decay"
    _hyperparameters = ("lr", "betas", "eps", "weight_decay", "alpha")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, alpha=0.2, state="fp32",
                 rounding="nearest", seed=0, q8_semantics="cgad", min_q8_size=None, threads=0, v_map="dynamic",
                 **unsupported):
        super().__init__(params, lr, betas, eps, weight_decay, alpha, 32, "apply", state, rounding, seed,
                         q8_semantics, min_q8_size, threads, unsupported=unsupported, v_map=v_map)


class Adam(_AdamFamily):
    """Adam (AdamW-form decoupled weight decay) on the fast path: sigma = 1, staleness ignored. Options as CGAD's."""
    _optimizer = "adam"
    _hyperparameters = ("lr", "betas", "eps", "weight_decay")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, state="fp32",
                 rounding="nearest", seed=0, q8_semantics="cgad", min_q8_size=None, threads=0, v_map="dynamic",
                 **unsupported):
        super().__init__(params, lr, betas, eps, weight_decay, 0.2, 32, "apply", state, rounding, seed,
                         q8_semantics, min_q8_size, threads, unsupported=unsupported, v_map=v_map)


class _NesterovFamily(_FastpathOptimizer):
    _hyperparameters = ("lr", "momentum")

    def __init__(self, params, lr, momentum, state, rounding, seed, min_q8_size, threads, unsupported):
        super().__init__(params, dict(lr=lr, momentum=momentum), state=state, rounding=rounding, seed=seed,
                         q8_semantics="cgad", min_q8_size=min_q8_size, threads=threads, unsupported=unsupported)


class Nesterov(_NesterovFamily):
    """The DiLoCo outer recipe (Douillard et al. 2023): b = mu*b + delta; theta -= lr*(delta + mu*b); lr 0.7,
    momentum 0.9. Staleness-blind. state: "fp32", "bf16" or "q8" (cgad's 8-bit semantics)."""
    _optimizer = "nesterov"

    def __init__(self, params, lr=0.7, momentum=0.9, state="fp32", rounding="nearest", seed=0, min_q8_size=None,
                 threads=0, **unsupported):
        super().__init__(params, lr, momentum, state, rounding, seed, min_q8_size, threads, unsupported)


class SDM(_NesterovFamily):
    """Staleness-dampened momentum: Nesterov with the pseudo-gradient scaled by 1/(1 + tau) (Zhang et al. 2016,
    cgad's definition). Options as Nesterov's."""
    _optimizer = "sdm"

    def __init__(self, params, lr=0.7, momentum=0.9, state="fp32", rounding="nearest", seed=0, min_q8_size=None,
                 threads=0, **unsupported):
        super().__init__(params, lr, momentum, state, rounding, seed, min_q8_size, threads, unsupported)
