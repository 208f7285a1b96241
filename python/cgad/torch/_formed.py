"""Δ checked where it is formed (docs/design.md §5; docs/python.md, "A pseudo-gradient formed where it is checked"):
``opt.form_pseudo_gradient(start)`` writes each ``p.grad = θ_start − θ`` and, for a CPU param group of float32
parameters, decides in that same pass whether the event could be refused (NaN/Inf, the largest |Δ| against the
overflow rule). The next step trusts that look, and skips its own scan, only for the very gradient tensors formed,
their version counters unchanged; anything else (an all-reduce or edit in between, another ``.grad``) is scanned as a
raw Δ is. Every other group forms Δ with torch and steps it as a raw Δ."""
import torch

from .. import _cgad
from . import _dtensor
from ._tensors import mark_modified


def _span(t):
    """The bytes a tensor's elements lie in, as [first, end)."""
    first = t.data_ptr()
    return first, first + t.numel() * t.element_size()


def _overlap(a, b):
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1


def check_starts(params, starts, where):
    """Refuses (InputError, changing nothing) starts that are not one tensor per parameter of its shape, dtype,
    device and kind, contiguous."""
    if len(starts) != len(params):
        raise _cgad.InputError(f"{where}: {len(starts)} start tensors for {len(params)} parameters (one per "
                               "parameter, in param_groups order)")
    for i, (s, p) in enumerate(zip(starts, params)):
        if not isinstance(s, torch.Tensor) or _dtensor.is_dtensor(s) != _dtensor.is_dtensor(p):
            raise _cgad.InputError(f"{where}: start {i} is a {type(s).__name__}, parameter {i} a "
                                   f"{type(p).__name__}")
        if s.shape != p.shape or s.dtype != p.dtype or s.device != p.device:
            raise _cgad.InputError(f"{where}: start {i} is {s.dtype} {tuple(s.shape)} on {s.device}, parameter {i} "
                                   f"{p.dtype} {tuple(p.shape)} on {p.device}")
        if not _dtensor.local(s).is_contiguous():
            raise _cgad.InputError(f"{where}: start {i} is not contiguous")


def gradient_buffers(params, starts):
    """Gives each parameter a ``.grad`` Δ can be written into: its own where that is a contiguous tensor of the
    parameter's kind, dtype and shape sharing memory with neither the parameter nor its start, else a new one."""
    for p, s in zip(params, starts):
        g = p.grad
        fits = isinstance(g, torch.Tensor) and _dtensor.is_dtensor(g) == _dtensor.is_dtensor(p) and \
            g.dtype == p.dtype and g.shape == p.shape and \
            g.device == p.device and _dtensor.local(g).is_contiguous() and \
            not _overlap(_dtensor.local(g), _dtensor.local(p)) and not _overlap(_dtensor.local(g), _dtensor.local(s))
        if not fits:
            p.grad = torch.empty_like(p, memory_format=torch.contiguous_format)


def by_torch(params, starts):
    """p.grad = θ_start − θ by torch's subtraction (one IEEE rounding, the fast path's too); nothing recorded."""
    for p, s in zip(params, starts):
        p.grad.copy_(s).sub_(p)


def by_engine(engine, params, starts):
    """p.grad = θ_start − θ by the CPU group's stepper, which records in the same pass what its next step needs to
    know of Δ; returns the gradients as formed, with their version counters after the write."""
    grads = [p.grad for p in params]
    engine.form_pseudo_gradient([s.data_ptr() for s in starts], [p.data_ptr() for p in params],
                                [g.data_ptr() for g in grads])
    mark_modified(grads)  # written in place: a graph that saved a gradient sees it changed, as torch's ops say
    return [(g, g._version) for g in grads]


def unchanged(record, params):
    """Whether every parameter's ``.grad`` is the tensor formed, its version counter where the formation left it."""
    return record is not None and len(record) == len(params) and \
        all(p.grad is g and g._version == version for p, (g, version) in zip(params, record))
