"""What cgad.torch's step() returns: whether the event was applied, and if not why."""
from dataclasses import dataclass
from typing import Any, Optional, Tuple

# Why an event was not applied (reference/outer_optimizer.hpp's SkipReason, plus no-gradient for a param group
# whose parameters have no .grad, which torch.optim skips too).
REFUSED = ("nonfinite-gradient", "overflowing-gradient")


@dataclass(frozen=True)
class GroupReport:
    """One param group's part of a step."""
    applied: bool
    reason: str                     # "none", "nonfinite-gradient", "zero-gate", "overflowing-gradient", "no-gradient"
    sigma: float                    # the factor the pseudo-gradient was scaled by (0 where it was refused)
    tau_effective: int              # the staleness the gate saw: max(tau, the fragment's age) for PA-CGAD
    nonfinite_param: Optional[int]  # the first offending parameter's index in the group (refused events)
    nonfinite_index: Optional[int]  # the offending element's flat index in that parameter


@dataclass(frozen=True)
class StepReport:
    """A step of the whole optimizer. ``applied`` is True when every param group with a pseudo-gradient applied
    the event; a NaN/Inf (or overflowing) pseudo-gradient in any group is refused in all of them, changing
    nothing, and ``reason`` says why. sigma and tau_effective are the first stepped group's."""
    applied: bool
    reason: str
    sigma: float
    tau_effective: int
    nonfinite_param: Optional[int]  # index among all the optimizer's parameters (state_dict order)
    nonfinite_index: Optional[int]  # flat element index in that parameter
    groups: Tuple[GroupReport, ...]
    loss: Optional[object] = None   # what the closure returned, if step() was given one (step() returns it)


def group_report(raw, group, fragment):
    """A GroupReport from the fast path's report (a dict, bindings.hpp) of group ``group`` (a _groups.Group, whose
    bound schedule says whether the gate was zero).
    The fast path names a zero gate only where on_zero_gate="skip" dropped the event; an event that "apply" ran
    on a zero gate (Delta discarded, theta moved by momentum alone) is reported here as "zero-gate" too, with
    applied=True, so that reason says whether the pseudo-gradient was used and applied whether a step ran."""
    param = index = None
    reason = raw["reason"]
    if reason in REFUSED:
        param, index = group.locate(fragment, raw["nonfinite_index"])
    elif raw["applied"] and group.schedule.zero_gate(raw["tau_effective"]):
        reason = "zero-gate"
    return GroupReport(bool(raw["applied"]), reason, float(raw["sigma"]), int(raw["tau_effective"]), param, index)


def no_gradient(tau):
    return GroupReport(False, "no-gradient", 0.0, tau, None, None)


def first_params(param_groups, targets):
    """Each target group's first parameter's index among all the optimizer's parameters (state_dict order), the
    ``first_param`` combine() locates a refused element with."""
    first, at = [], 0
    for index, group in enumerate(param_groups):
        if index in targets:
            first.append(at)
        at += len(group["params"])
    return first


def combine(groups, first_param, loss=None):
    """The optimizer's report from its groups' (``first_param[g]``: group g's first parameter's global index)."""
    # The group that found the offending element (the others of a refused event carry its reason, no location).
    refused = [(g, r) for g, r in enumerate(groups) if r.reason in REFUSED and r.nonfinite_param is not None]
    stepped = [r for r in groups if r.reason != "no-gradient"]
    if refused:
        g, r = refused[0]
        return StepReport(False, r.reason, r.sigma, r.tau_effective, first_param[g] + r.nonfinite_param,
                          r.nonfinite_index, tuple(groups), loss)
    if not stepped:
        r = groups[0]
        return StepReport(False, "no-gradient", r.sigma, r.tau_effective, None, None, tuple(groups), loss)
    reason = next((r.reason for r in stepped if r.reason != "none"), "none")
    return StepReport(all(r.applied for r in stepped), reason, stepped[0].sigma, stepped[0].tau_effective, None,
                      None, tuple(groups), loss)


class LazyStepReport:
    """A StepReport that a CUDA step returns before its report exists on the host: its fields are read from the
    device on the first access of any of them (which waits for the step), so that a step waits for nothing and a
    step without a look at its report keeps the GPU busy (docs/python.md, CUDA groups). ``loss`` is known at once."""
    __slots__ = ("_resolve", "_report", "loss")

    def __init__(self, resolve, loss=None):
        self._resolve, self._report, self.loss = resolve, None, loss

    def resolved(self):
        """The StepReport (read once)."""
        if self._report is None:
            self._report = self._resolve()
            self._resolve = None
        return self._report

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # a slot not yet set, or a protocol probe (copy's __setstate__): not a field
            raise AttributeError(name)
        return getattr(self.resolved(), name)

    def __reduce__(self):
        """A copy or a pickle is of the StepReport (the device is not copied)."""
        return resolved, (self.resolved(),)

    def __eq__(self, other):
        return self.resolved() == (other.resolved() if isinstance(other, LazyStepReport) else other)

    __hash__ = None  # type: ignore[assignment]  # unhashable, as the frozen StepReport it stands for is not

    def __repr__(self):
        return repr(self.resolved())


def resolved(report):
    """A StepReport from what a step returned (a LazyStepReport is read here)."""
    return report.resolved() if isinstance(report, LazyStepReport) else report
