"""Calls that cgad refuses at run time, each of which mypy must report (test_typing.py): the line's ``# error:``
comment names the error code expected there, and no other line may have one. Never run."""
from __future__ import annotations

from typing import Any, List

import torch

import cgad.torch
from cgad.torch import CGAD, PACGAD, Gated


def wrong(params: List[torch.Tensor], manager: Any) -> None:
    opt = CGAD(params, lr=[1e-3])  # error: arg-type
    CGAD(params, state=8)  # error: arg-type
    CGAD(params, tau_cut=32.5)  # error: arg-type
    opt.step(staleness="3")  # error: call-overload
    opt.step(staleness=2.5)  # error: call-overload
    opt.step(lambda: 1.0, 3)  # error: call-overload
    opt.staleness = "3"  # error: assignment
    opt.load_state_dict([1, 2])  # error: arg-type
    PACGAD(params, fragments="layers")  # error: arg-type
    report = Gated(torch.optim.AdamW(params)).step(staleness=1)
    report.aplied  # error: attr-defined
    Gated(torch.optim.AdamW(params), fragments=2)  # error: arg-type
    cgad.torch.wire_torchft(opt, manager, 3)  # error: arg-type
    cgad.sigma(3, gate=0)  # error: arg-type
