"""The gated pseudo-gradient Gated hands to the optimizer it wraps: g = fl(σ·Δ) in the gradient's own dtype,
rounded once (docs/python.md, "CGAD over the optimizer you already run"), and the overflow rule's and NaN/Inf
scans that decide, before anything changes, whether an event is refused (docs/design.md §3). Gated scales each
pseudo-gradient in place once the event is taken (scale_all_), so a step costs one read-only scan and one in-place
pass over Δ besides the wrapped optimizer's own."""
import torch

from .. import _cgad

# The gradient dtypes a step takes. σ is a float32 value (the fast path's) and σ <= 1, so σ·Δ never overflows Δ's
# dtype and is exact in float64 for Δ of at most 29 significant bits (bfloat16: 8, float16: 11).
SUPPORTED = (torch.float32, torch.float64, torch.bfloat16, torch.float16)

# The overflow rule's threshold on |σ·Δ|, 2^63, as the fast path applies it to its g: the library's constant
# (core/overflow_rule.hpp), read from the bound schedule rather than restated.
REFUSED_MAGNITUDE = _cgad.Schedule.refused_magnitude

# Elements a narrow gradient is scaled in at a time: its float64 and float32 temporaries stay under 64 MiB.
_CHUNK = 1 << 22


def check(grad, where):
    """Refuses (InputError) a pseudo-gradient this step cannot scale exactly in place (a DTensor's reaches here as
    its local shard, _dtensor.gradient_sources)."""
    if type(grad) is not torch.Tensor:
        raise _cgad.InputError(f"{where}: the pseudo-gradient is a {type(grad).__name__}, not a plain tensor (a "
                               "DTensor is taken as the gradient of a DTensor parameter of its mesh)")
    if grad.layout != torch.strided:
        raise _cgad.InputError(f"{where}: the pseudo-gradient is {grad.layout}, not a dense tensor")
    if grad.dtype not in SUPPORTED:
        raise _cgad.InputError(f"{where}: the pseudo-gradient is {grad.dtype}; float32, float64, bfloat16 and "
                               "float16 are taken")
    if torch._debug_has_internal_overlap(grad) == 1:  # 1: certainly overlapping (torch's in-place ops refuse it)
        raise _cgad.InputError(f"{where}: the pseudo-gradient's elements share memory (an expanded tensor), and it is "
                               "scaled in place; give it memory of its own (.contiguous())")


def scaled(delta, sigma):
    """g = fl(σ·Δ) in Δ's dtype in a new tensor (Δ is kept): scale_ on a copy."""
    return scale_(delta.clone(), sigma)


def scale_(delta, sigma):
    """Δ := fl(σ·Δ) in place, in Δ's dtype, one rounding to nearest even of the exact product; returns Δ.

    float32 and float64: one IEEE product (σ is exact in either, and torch forms a tensor-by-scalar product in the
    tensor's own dtype). bfloat16 and float16: torch would form the product in float32 and round it again to the
    narrow dtype, and those two roundings can differ from one (a product rounded to a float32 that lies exactly
    half-way between two bfloat16 values then rounds to even). So the product is formed exactly in float64,
    rounded to float32 *to odd* (towards zero, with the last bit set where that was inexact), and then to the
    narrow dtype to nearest even: float32 keeps at least 2 more bits than either narrow format at every exponent,
    which makes the two steps one correct rounding (Boldo & Melquiond, "Emulation of FMA and correctly rounded
    sums: proved algorithms using rounding to odd", IEEE TC 2008). Each chunk is read whole before it is
    written, so the narrow path needs only a chunk's temporaries, not a second pseudo-gradient."""
    if delta.dtype in (torch.float32, torch.float64):
        return delta.mul_(sigma)
    work = delta if delta.is_contiguous() else delta.contiguous()
    flat = work.view(-1)
    for start in range(0, flat.numel(), _CHUNK):
        chunk = flat[start:start + _CHUNK]
        exact = chunk.double() * sigma
        nearest = exact.float()
        widened = nearest.double()
        bits = nearest.view(torch.int32)
        # Round to odd: step a result rounded away from zero back towards it (for either sign that lowers the
        # magnitude bits of the pattern by one; a zero is never rounded away), then set the sticky last bit.
        bits = bits - (widened.abs() > exact.abs()).to(torch.int32)
        bits = bits | (widened != exact).to(torch.int32)
        chunk.copy_(bits.view(torch.float32))
    if work is not delta:
        delta.copy_(work)
    return delta


def scale_all_(deltas, sigma):
    """scale_ on every tensor of ``deltas`` (one scalar σ): the float32 and float64 ones by one fused in-place
    multiply per device and dtype (torch._foreach_mul_, the same single IEEE product as scale_'s), the narrow ones
    by scale_. σ = 1 leaves every tensor as it is (1·Δ = Δ exactly). A tensor listed twice is scaled once."""
    if sigma == 1.0:
        return
    wide = {}
    for t in {id(t): t for t in deltas}.values():
        if t.dtype in (torch.float32, torch.float64):
            wide.setdefault((t.device, t.dtype), []).append(t)
        else:
            scale_(t, sigma)
    for tensors in wide.values():
        torch._foreach_mul_(tensors, sigma)


def refusals(deltas, sigma):
    """Per tensor of ``deltas``: (whether it holds a NaN/Inf, whether some |fl(σ·Δ)| >= 2^63), as two lists of
    bools, decided before anything is written. One read-only pass finds each tensor's max|Δ| (_maxima; a NaN/Inf
    anywhere makes it non-finite), and since rounding is monotone the largest |fl(σ·Δ)| of a tensor is
    fl(σ·max|Δ|), which scale_ forms as it forms every element: the overflow rule needs only the maxima (σ = 0
    gives 0 for every finite maximum: a zero gate run by "apply" never overflows, element_update.hpp). The flags
    are read back once per device."""
    nonfinite, overflowing = [False] * len(deltas), [False] * len(deltas)
    by_device = {}
    for i, t in enumerate(deltas):
        if t.numel():  # an empty shard (FSDP2's uneven sharding) has neither, and no maximum
            by_device.setdefault(t.device, {}).setdefault(t.dtype, []).append(i)
    for by_dtype in by_device.values():
        indices, flags = [], []
        for members in by_dtype.values():
            maxima = _maxima([deltas[i] for i in members])
            bad = ~torch.isfinite(maxima)
            big = scale_(maxima, sigma) >= REFUSED_MAGNITUDE  # in place: the maxima are not needed after this
            flags.append(torch.stack([bad, big]))
            indices += members
        for i, (bad, big) in zip(indices, zip(*torch.cat(flags, dim=1).tolist())):
            nonfinite[i], overflowing[i] = bool(bad), bool(big)
    return nonfinite, overflowing


def _maxima(tensors):
    """max|t| of each (non-empty) tensor of one device and dtype, stacked: max(amax t, -amin t), NaN where t holds
    one (amax, amin and maximum propagate NaN on every device; an Inf of either sign is the maximum's). Two
    read-only reductions a tensor, vectorized on the CPU (about 0.2 ns a parameter each on one thread); one
    torch._foreach_norm(ord=inf) pass is not vectorized there, 20-40 times slower (docs/results/performance.md,
    "Gated beside the step it wraps")."""
    highest = torch.stack([t.amax() for t in tensors])
    lowest = torch.stack([t.amin() for t in tensors])
    return torch.maximum(highest, lowest.neg())


def nonfinite(t):
    return ~torch.isfinite(t)


def overflowing(t):
    return t.abs() >= REFUSED_MAGNITUDE


def first_index(t, predicate):
    """The first flat (row-major) index of t where predicate holds (the caller knows there is one)."""
    return int(torch.nonzero(predicate(t).reshape(-1))[0, 0])
