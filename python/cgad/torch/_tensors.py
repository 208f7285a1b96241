"""What cgad.torch checks about torch tensors before their memory reaches the fast path, which sees only data
pointers and sizes (the module never links libtorch): dtype, device, layout, contiguity, aliasing, and each
parameter's pseudo-gradient (``p.grad``)."""
import torch

from .. import _cgad
from ._dtensor import local

# The parameter dtypes the fast path stores, by its format names.
PARAM_FORMATS = {torch.float32: "fp32", torch.bfloat16: "bf16"}


def refuse(where, why):
    raise _cgad.InputError(f"{where}: {why}")


def backend(device, where):
    """"cpu" or "cuda": which fast-path backend steps tensors on ``device``; InputError for any other device, and
    for CUDA where this build has no CUDA backend or the process sees no device."""
    if device.type == "cpu":
        return "cpu"
    if device.type == "cuda":
        if not _cgad.cuda_available():
            refuse(where, f"parameters on {device} need cgad's CUDA backend and a CUDA device: "
                          f"{_cgad.cuda_unavailable_reason()}")
        return "cuda"
    refuse(where, f"parameters on {device}: cgad.torch steps CPU tensors, and CUDA tensors where its CUDA "
                  "backend is built and a device exists")


def check_param(p, i, where):
    if not isinstance(p, torch.Tensor):
        refuse(where, f"parameter {i} is a {type(p).__name__}, not a tensor")
    if type(p.data) is not torch.Tensor:
        # A tensor subclass whose data pointer is not its values: the fast path would step memory that is not the
        # parameter. DTensors reach this check as their local shards (_dtensor.py).
        refuse(where, f"parameter {i} is a {type(p.data).__name__}, not a plain tensor; cgad.torch steps plain CPU "
                      "(and CUDA) tensors and, under torch >= 2.4, DTensors' local shards, not other tensor "
                      "subclasses")
    if p.dtype not in PARAM_FORMATS:
        refuse(where, f"parameter {i} has dtype {p.dtype}; cgad.torch steps float32 and bfloat16 parameters")
    if p.layout != torch.strided:
        refuse(where, f"parameter {i} has layout {p.layout}; cgad.torch steps dense tensors")
    if not p.is_contiguous():
        refuse(where, f"parameter {i} (shape {tuple(p.shape)}, strides {p.stride()}) is not contiguous; cgad.torch "
                      "updates each parameter in place and needs contiguous memory")


def group_layout(params, where):
    """(parameter format, device, tensor sizes) of a param group, refusing what the fast path cannot step. An empty
    group (torch takes one: the no-decay side of a decay/no-decay split may hold nothing) steps nothing; it is
    given float32 on the CPU, a fast-path optimizer of no tensors, which its optimizer's other groups need not
    match (_optimizers.py, _check_backend)."""
    if not params:
        return PARAM_FORMATS[torch.float32], torch.device("cpu"), []
    for i, p in enumerate(params):
        check_param(p, i, where)
    dtypes = {p.dtype for p in params}
    if len(dtypes) > 1:
        refuse(where, "the param group mixes float32 and bfloat16 parameters; put each dtype in its own param "
                      "group (one fast-path optimizer stores one parameter format)")
    devices = {p.device for p in params}
    if len(devices) > 1:
        refuse(where, f"the param group's parameters lie on several devices ({', '.join(map(str, devices))})")
    check_no_aliasing(named(params), where)
    return PARAM_FORMATS[params[0].dtype], params[0].device, [p.numel() for p in params]


def check_no_aliasing(labelled, where):
    """Two parameters sharing memory would be updated twice, each time from the other's half-updated values.
    ``labelled``: (name for the message, tensor) pairs -- one group's parameters, or every group's."""
    shards = [(name, local(p)) for name, p in labelled]  # a DTensor's memory is its local shard's
    spans = sorted((p.data_ptr(), p.data_ptr() + p.numel() * p.element_size(), k)
                   for k, (_, p) in enumerate(shards) if p.numel() > 0)
    for (_, end, i), (begin, _, j) in zip(spans, spans[1:]):
        if begin < end:
            first, second = sorted((i, j))
            refuse(where, f"{labelled[first][0]} and {labelled[second][0]} share memory; cgad.torch updates each "
                          "parameter in place and cannot step tensors that alias each other")


def named(params):
    return [(f"parameter {i}", p) for i, p in enumerate(params)]


def check_count(params, count, where):
    """The param group still has the ``count`` parameters its optimizer state was made for."""
    if len(params) != count:
        refuse(where, f"the param group now has {len(params)} parameters, its optimizer state was made for "
                      f"{count} (add parameters with add_param_group, not by changing param_groups)")


def param_pointers(params, layout, where):
    """The parameters' data pointers, after checking they still have the format, device and sizes the group's
    state was made for (a model moved or cast since would otherwise be stepped as what it was)."""
    fmt, device, sizes = layout
    check_count(params, len(sizes), where)
    for i, p in enumerate(params):
        check_param(p, i, where)
        if PARAM_FORMATS[p.dtype] != fmt or p.device != device or p.numel() != sizes[i]:
            refuse(where, f"parameter {i} is now {p.dtype} with {p.numel()} elements on {p.device}; its optimizer "
                          f"state was made for {fmt} with {sizes[i]} elements on {device}")
    check_no_aliasing(named(params), where)
    return [p.data_ptr() for p in params]


def held(params):
    """Tensors of their own on the parameters' memory, for a step to hold while it runs: another thread may give
    a parameter new memory meanwhile (``p.data = ...``), which would free the old memory under the step. These
    share the parameters' version counters, and the old memory stays alive as long as they do."""
    return [p.detach() for p in params]


def mark_modified(params):
    """Advances each parameter's version counter, as torch's in-place operations do, so that backward() through a
    graph that saved a parameter before the step raises torch's "modified by an inplace operation" instead of
    using the new values. torch 1.13 has no call for it; ``p.set_(p)`` is the cheapest in-place operation that
    changes nothing and touches no memory (p.add_(0) reads and writes every element, an in-place op on an empty
    view costs two operations). A DTensor has no set_ (no sharding strategy): its local shard's counter and its
    own (which autograd checks for a graph that saved the DTensor) are advanced apart (torch 2.x has
    increment_version, and every torch with DTensors is 2.x)."""
    for p in params:
        shard = local(p)
        shard.set_(shard)
        if shard is not p:
            torch.autograd.graph.increment_version(p)


def grad_as_float32(p, i, where):
    """``p.grad`` as a contiguous float32 tensor: itself for float32 parameters (no copy), widened (exactly) for
    bfloat16 ones, whose .grad torch keeps in bfloat16."""
    g = p.grad
    if g.layout != torch.strided:
        refuse(where, f"parameter {i}'s gradient has layout {g.layout}; cgad.torch takes dense pseudo-gradients")
    if g.device != p.device:
        refuse(where, f"parameter {i}'s gradient lies on {g.device}, the parameter on {p.device}")
    if g.shape != p.shape:
        refuse(where, f"parameter {i}'s gradient has shape {tuple(g.shape)}, the parameter {tuple(p.shape)}")
    if not g.is_contiguous():
        refuse(where, f"parameter {i}'s gradient is not contiguous")
    if g.dtype == torch.float32:
        return g.detach()  # a tensor of its own on the same memory: it keeps that memory alive (held())
    if g.dtype == torch.bfloat16:
        return g.float()
    refuse(where, f"parameter {i}'s gradient has dtype {g.dtype}")


def gradients(params, needed, where):
    """The float32 pseudo-gradients of the parameters whose index is in ``needed`` (the tensors a step reads),
    None for the others and for the needed ones without a gradient, and the needed ones that have none; None
    altogether when none of the needed ones has one (the group is skipped, as torch.optim skips parameters without
    one). A CPU group leaves a parameter without a gradient out of its step (a null table entry: the fast path
    reads and writes nothing of it), so it stays untouched as torch.optim leaves it."""
    needed = set(needed)
    missing = sorted(i for i in needed if params[i].grad is None)
    if len(missing) == len(needed):
        return None
    grads = [None] * len(params)
    for i in needed:
        if i not in missing:
            grads[i] = grad_as_float32(params[i], i, where)
    return grads, missing
