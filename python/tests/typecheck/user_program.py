"""A typed program as a user writes one against cgad's public API: cgad.torch's optimizers built, stepped (with a
staleness, bare, with a closure), saved, loaded, and their reports, counters and metrics read. test_typing.py
type-checks it with mypy (a hint that is wrong or missing makes a line here an error) and runs it, so that what the
hints promise is what the code returns."""
from __future__ import annotations

import io
from typing import Any, Dict, List, Sequence

import numpy as np
import torch

import cgad
import cgad.numerics
from cgad.torch import CGAD, PACGAD, SDM, Adam, AdamDecay, Gated, GroupReport, Nesterov, StepReport


def give(params: Sequence[torch.Tensor], value: float) -> None:
    """Each parameter's pseudo-gradient, as a DiLoCo outer loop puts it in .grad."""
    for p in params:
        p.grad = torch.full_like(p, value)


def saved(state: Dict[str, object]) -> Dict[str, object]:
    """A state_dict through torch.save and torch.load, as a checkpoint takes it."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded: Dict[str, object] = torch.load(buffer)
    return loaded


def cgad_outer_loop() -> Dict[str, float]:
    params = list(torch.nn.Linear(4, 2).parameters())
    opt = CGAD(params, lr=1e-2, betas=(0.9, 0.99), alpha="0.2", tau_cut=8, state="q8", threads=1)
    give(params, 0.5)
    report = opt.step(staleness=3)
    applied: bool = report.applied
    sigma: float = report.sigma
    assert applied and abs(sigma - cgad.numerics.sigma(3, alpha=0.2, tau_cut=8)) < 1e-6
    give(params, 0.25)
    opt.staleness = np.int64(2)  # what a bare step() uses (torchft calls step() with no arguments)
    assert opt.step().tau_effective == 2
    loss: float = opt.step(lambda: 1.5, staleness=torch.tensor(1))  # a closure's value is what step() returns
    assert loss == 1.5
    opt.watch_traps()
    give(params, 0.125)
    opt.step(staleness=0)
    traps: Dict[int, Dict[str, Dict[str, float]]] = opt.trap_stats()
    assert set(traps) == {0, 1} and 0.0 <= traps[0]["last"]["v_zero_fraction"] <= 1.0
    moment: torch.Tensor = opt.state_buffer(params[0], "m")
    assert moment.shape == params[0].shape

    resumed = CGAD([p.detach().clone() for p in params], lr=1e-2, betas=(0.9, 0.99), alpha="0.2", tau_cut=8,
                   state="q8", threads=1)
    resumed.load_state_dict(saved(opt.state_dict()))
    assert torch.equal(resumed.state_buffer(resumed.param_groups[0]["params"][0], "m"), moment)
    counts: int = opt.counters["applied"]
    steps: List[int] = opt.counters(0)["t"]
    assert counts == 4 and steps == [4]
    start = [p.detach() + 0.0625 for p in params]  # DiLoCo's θ_start: Δ = start − θ formed and checked in one pass
    opt.form_pseudo_gradient(start)
    assert opt.step(staleness=0).applied
    metrics: Dict[str, float] = opt.metrics()
    return metrics


def fragments_and_wrappers() -> None:
    model = torch.nn.Linear(4, 2)
    weight, bias = model.weight, model.bias
    fragments: List[Dict[str, Any]] = [{"params": [weight]}, {"params": [bias]}]
    pa = PACGAD(fragments, fragments="groups", lr=1e-2, tau_cut=4)
    give([weight, bias], 0.5)
    group: GroupReport = pa.step(staleness=0, fragment=1, end_round=False).groups[0]  # the stepped fragment's
    assert group.applied and pa.counters(1)["age"] == [0]
    pa.advance_round()

    gated = Gated(torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0), method="cgad", tau_cut=16)
    give([weight, bias], 0.5)
    report: StepReport = gated.step(staleness=2)
    assert report.applied and report.tau_effective == 2
    gated.load_state_dict(saved(gated.state_dict()))
    gated.zero_grad()
    assert gated.metrics()["applied"] == 1

    for opt in (Adam(model.parameters()), AdamDecay(model.parameters(), alpha=0.1),
                Nesterov(model.parameters(), lr=0.7, momentum=0.9), SDM(model.parameters())):
        give([weight, bias], 0.5)
        assert opt.step(staleness=1).applied


if __name__ == "__main__":
    fragments_and_wrappers()
    print(cgad_outer_loop())
