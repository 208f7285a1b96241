"""``opt.metrics()``: the last step and the steps so far as plain Python numbers, ready for a logger
(TensorBoard's add_scalar, a CSV row, wandb.log), read from what the optimizers keep already -- the last
StepReport (σ and the effective staleness as the fast path computed them), the step counters, and the trap
statistics where ``watch_traps()`` was called (docs/python.md, "Metrics"). Nothing here recomputes the gate.

The one figure a report does not hold, ‖Δ‖ (the L2 norm of the pseudo-gradient the last step was given, over the
tensors it stepped; a DTensor's over this rank's shard), costs a read of every Δ, so it is opt-in, as the trap
figures are: after ``opt.watch_delta_norm()`` each step takes it when called, as a device scalar read only when
metrics() is: torch.linalg.vector_norm per tensor accumulated in float32 (a float64 reduction would make a float64
copy of each tensor, twice a float32 model's memory), the squares summed in float64."""
import math

import torch

from ._dtensor import local
from ._report import resolved

# counters' reasons and their names here (a logger's tag cannot hold "-" in every backend's path syntax alike).
_COUNTS = {"applied": "applied", "zero-gate": "zero_gate", "nonfinite-gradient": "nonfinite_gradient",
           "overflowing-gradient": "overflowing_gradient", "no-gradient": "no_gradient"}


def watch(opt):
    """From the next step on, each step takes ‖Δ‖ (metrics()'s delta_norm)."""
    opt._watch_delta_norm = True


def record(opt, tau, grads):
    """Keeps what a step is given that its report does not hold: the staleness τ and, while watch() is on, the
    squared norms of the pseudo-gradients ``grads`` (tensors; a DTensor's local shard is taken), summed on each
    device, read later."""
    squares = None
    if opt.__dict__.get("_watch_delta_norm"):
        squares = {}
        for grad in grads:
            grad = local(grad)
            square = torch.linalg.vector_norm(grad, dtype=torch.float32).double() ** 2
            squares[grad.device] = squares[grad.device] + square if grad.device in squares else square
        squares = list(squares.values())
    opt._metrics_given = (tau, squares)


def metrics(opt, counters, trap_stats=None):
    """The metrics dict of ``opt`` (see the module's docstring and docs/python.md for each key); ``counters``: its
    Counters, ``trap_stats``: its trap_stats() when watched, else None."""
    out = {"steps": sum(counters.values())}
    out.update({name: counters[reason] for reason, name in _COUNTS.items()})
    report = resolved(opt.last_report) if opt.last_report is not None else None
    given = opt.__dict__.get("_metrics_given")
    if report is not None and given is not None:
        tau, squares = given
        out.update(tau=int(tau), tau_effective=int(report.tau_effective), sigma=float(report.sigma),
                   last_applied=int(report.applied))
        if squares is not None:
            out["delta_norm"] = math.sqrt(sum(float(s.item()) for s in squares))
    if trap_stats is not None:
        out.update(_trap_figures(opt, trap_stats))
    return out


def _trap_figures(opt, stats):
    """The trap statistics over every parameter: the element-weighted shares of stored v and m decoding to 0 and of
    element-steps moving more than 5·lr (last watched step), and the largest |Δθ|/lr since watch_traps()."""
    sizes = [local(p).numel() for group in opt.param_groups for p in group["params"]]
    total = sum(sizes) or 1

    def weighted(which, key):
        return sum(stats[i][which][key] * n for i, n in enumerate(sizes)) / total

    return {"trap_v_zero_fraction": weighted("last", "v_zero_fraction"),
            "trap_m_zero_fraction": weighted("last", "m_zero_fraction"),
            "trap_step_over_5lr_fraction": weighted("last", "step_over_5lr_fraction"),
            "trap_max_step_over_lr": max((float(s["since_start"]["max_step_over_lr"]) for s in stats.values()),
                                         default=0.0)}
