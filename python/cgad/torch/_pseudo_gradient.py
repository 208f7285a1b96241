"""The gated pseudo-gradient Gated hands to the optimizer it wraps: g = fl(σ·Δ) in the gradient's own dtype,
rounded once (docs/python.md, "CGAD over the optimizer you already run"), and the overflow rule's and NaN/Inf
scans that decide, before anything changes, whether an event is refused (docs/design.md §3)."""
import torch

from .. import _cgad

# The gradient dtypes a step takes. σ is a float32 value (the fast path's) and σ <= 1, so σ·Δ never overflows Δ's
# dtype and is exact in float64 for Δ of at most 29 significant bits (bfloat16: 8, float16: 11).
SUPPORTED = (torch.float32, torch.float64, torch.bfloat16, torch.float16)

# The overflow rule's threshold on |σ·Δ| (core/overflow_rule.hpp), as the fast path applies it to its g.
REFUSED_MAGNITUDE = 2.0 ** 63

# Elements a narrow gradient is scaled in at a time: its float64 and float32 temporaries stay under 64 MiB.
_CHUNK = 1 << 22


def check(grad, where):
    """Refuses (InputError) a pseudo-gradient this step cannot scale exactly or scan whole on this process."""
    if type(grad) is not torch.Tensor:
        raise _cgad.InputError(f"{where}: the pseudo-gradient is a {type(grad).__name__}, not a plain tensor (a "
                               "DTensor's NaN/Inf refusal would be decided shard by shard, on each rank alone)")
    if grad.layout != torch.strided:
        raise _cgad.InputError(f"{where}: the pseudo-gradient is {grad.layout}, not a dense tensor")
    if grad.dtype not in SUPPORTED:
        raise _cgad.InputError(f"{where}: the pseudo-gradient is {grad.dtype}; float32, float64, bfloat16 and "
                               "float16 are taken")


def scaled(delta, sigma):
    """g = fl(σ·Δ) in Δ's dtype, one rounding to nearest even of the exact product, in a new tensor (Δ is kept).

    float32 and float64: one IEEE product (σ is exact in either, and torch forms a tensor-by-scalar product in the
    tensor's own dtype). bfloat16 and float16: torch would form the product in float32 and round it again to the
    narrow dtype, and those two roundings can differ from one (a product rounded to a float32 that lies exactly
    half-way between two bfloat16 values then rounds to even). So the product is formed exactly in float64,
    rounded to float32 *to odd* (towards zero, with the last bit set where that was inexact), and then to the
    narrow dtype to nearest even: float32 keeps at least 2 more bits than either narrow format at every exponent,
    which makes the two steps one correct rounding (Boldo & Melquiond, "Emulation of FMA and correctly rounded
    sums: proved algorithms using rounding to odd", IEEE TC 2008)."""
    if delta.dtype in (torch.float32, torch.float64):
        return torch.mul(delta, sigma)
    out = torch.empty(delta.shape, dtype=delta.dtype, device=delta.device)
    source, target = delta.reshape(-1), out.view(-1)
    for start in range(0, source.numel(), _CHUNK):
        exact = source[start:start + _CHUNK].double() * sigma
        nearest = exact.float()
        widened = nearest.double()
        bits = nearest.view(torch.int32)
        # Round to odd: step a result rounded away from zero back towards it (for either sign that lowers the
        # magnitude bits of the pattern by one; a zero is never rounded away), then set the sticky last bit.
        bits = bits - (widened.abs() > exact.abs()).to(torch.int32)
        bits = bits | (widened != exact).to(torch.int32)
        target[start:start + _CHUNK] = bits.view(torch.float32).to(delta.dtype)
    return out


def any_per_tensor(tensors, predicate):
    """[predicate(t).any() for t in tensors] as Python bools, read back once per device (not once per tensor)."""
    flags = [None] * len(tensors)
    by_device = {}
    for i, t in enumerate(tensors):
        by_device.setdefault(t.device, []).append(i)
    for indices in by_device.values():
        found = torch.stack([predicate(tensors[i]).any() for i in indices]).tolist()
        for i, f in zip(indices, found):
            flags[i] = bool(f)
    return flags


def nonfinite(t):
    return ~torch.isfinite(t)


def overflowing(t):
    return t.abs() >= REFUSED_MAGNITUDE


def first_index(t, predicate):
    """The first flat (row-major) index of t where predicate holds (the caller knows there is one)."""
    return int(torch.nonzero(predicate(t).reshape(-1))[0, 0])
