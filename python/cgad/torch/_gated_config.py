"""Gated's own settings (method, α, τ_cut, on_zero_gate, fragments) checked as cgad checks them, and the schedule
they bind (_cgad.Schedule, built once): σ of an event, the float the fast path's planner computes (docs/design.md
§3, §5), so that the optimizer Gated wraps receives the bits cgad's own step would feed its moments, and the
zero-gate decision, the planner's too."""
from dataclasses import dataclass
from typing import Optional

from .. import _cgad
from ._hyperparameters import number, tau_cut as parse_tau_cut

# method -> the fast path's optimizer whose σ it is: CGAD's γ(τ)e^{-ατ}, Adam-Decay's e^{-ατ}, SDM's 1/(1 + τ).
METHODS = ("cgad", "adam-decay", "sdm")
ZERO_GATE_POLICIES = ("apply", "skip")
WHERE = "Gated"


def _refuse(message):
    raise _cgad.InputError(f"{WHERE}: {message}")


@dataclass(frozen=True)
class GateConfig:
    method: str
    alpha: str              # the user's α as decimal text, rounded once to double by the library (as cgad.torch)
    tau_cut: int
    on_zero_gate: str
    fragments: Optional[str]  # None, or "groups" (PA-CGAD: each param group a fragment with its own age)

    def __post_init__(self):
        # Not a field: derived from the fields, so equality and the saved state are the settings'.
        object.__setattr__(self, "schedule", _cgad.Schedule(self.spec()))

    @staticmethod
    def make(method, alpha, tau_cut, on_zero_gate, fragments):
        if not isinstance(method, str) or method not in METHODS:
            _refuse(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        # α and τ_cut by the parser of every cgad.torch class's hyperparameters (np.int64(32) and "32" alike).
        alpha = number(alpha, "alpha", WHERE)
        if not isinstance(on_zero_gate, str) or on_zero_gate not in ZERO_GATE_POLICIES:
            _refuse(f"on_zero_gate must be one of {', '.join(ZERO_GATE_POLICIES)}, got {on_zero_gate!r}")
        if fragments is not None and not (isinstance(fragments, str) and fragments == "groups"):
            _refuse(f"fragments must be None or 'groups' (each param group a fragment), got {fragments!r}")
        if fragments is not None and method != "cgad":
            _refuse(f"fragments='groups' is PA-CGAD, CGAD's per-fragment gate; method={method!r} has no ages")
        tau_cut = parse_tau_cut(tau_cut, WHERE)
        # α and τ_cut are the gate's whatever the method (SDM reads neither): checked by the library's own rule,
        # the one `cgad replay --alpha` and cgad.torch go through (core/hyperparams.hpp validate), then by the
        # schedule the configuration binds.
        try:
            _cgad.check_spec({"optimizer": "cgad", "alpha": alpha, "tau_cut": tau_cut})
            return GateConfig(method, alpha, tau_cut, on_zero_gate, fragments)
        except _cgad.InputError as e:
            _refuse(str(e))

    def spec(self):
        """The fast-path configuration whose σ this is (step_config.cpp takes absent keys at their defaults)."""
        return {"optimizer": self.method, "alpha": self.alpha, "tau_cut": self.tau_cut,
                "on_zero_gate": self.on_zero_gate}

    def sigma(self, tau_effective):
        """The float σ the fast path's step scales an event of staleness tau_effective by (a Python float holding
        that float32 value exactly)."""
        return self.schedule.sigma(tau_effective)

    def gate_is_zero(self, tau_effective):
        """γ(tau_effective) = 0: the cosine gate past τ_cut (never Adam-Decay's underflowing σ, nor SDM's)."""
        return self.schedule.zero_gate(tau_effective)
