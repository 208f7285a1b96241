"""What the Gated tests share: the pseudo-gradients a wrapped optimizer's step really reads, and every bit of an
optimizer's state, whatever the optimizer (torch's plain tensors, bitsandbytes' ints and codes, torchao's
quantized tensor subclasses)."""
from fractions import Fraction

import numpy as np
import torch


def capture_grads(optimizer, into):
    """Makes ``optimizer.step`` first record a clone of every parameter's .grad (None where absent) in ``into``:
    what the step is given, whatever the torch release (torch 1.13 has no step hooks)."""
    step = optimizer.step
    params = [p for group in optimizer.param_groups for p in group["params"]]

    def capturing(*args, **kwargs):
        into.append([None if p.grad is None else p.grad.detach().clone() for p in params])
        return step(*args, **kwargs)

    optimizer.step = capturing


def tensor_bytes(t):
    """A tensor's dtype, shape and bytes; a tensor subclass (torchao's OptimState8bit/4bit) by its inner tensors."""
    if type(t) is not torch.Tensor and hasattr(t, "__tensor_flatten__"):
        names, context = t.__tensor_flatten__()
        return (type(t).__name__, repr(context), tuple(tensor_bytes(getattr(t, n)) for n in names))
    t = t.detach().contiguous().cpu()
    return (str(t.dtype), tuple(t.shape), t.reshape(-1).view(torch.uint8).numpy().tobytes())


def state_bits(optimizer):
    """Every entry of optimizer.state, by parameter position and key: tensors by their bytes, the rest by repr."""
    out = []
    for i, p in enumerate(q for group in optimizer.param_groups for q in group["params"]):
        for key, value in sorted(optimizer.state.get(p, {}).items()):
            out.append((i, key, tensor_bytes(value) if isinstance(value, torch.Tensor) else repr(value)))
    return out


def param_bits(optimizer):
    return [tensor_bytes(p) for group in optimizer.param_groups for p in group["params"]]


def same_bits(a, b):
    """Two tensors of one dtype hold the same bit patterns (NaNs and signed zeros included)."""
    return a.dtype == b.dtype and a.shape == b.shape and tensor_bytes(a) == tensor_bytes(b)


def nearest_float32(text):
    """The float32 nearest the decimal ``text`` (ties to even), decided in exact rational arithmetic."""
    x = Fraction(text)
    f = np.float32(float(x))
    candidates = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - x), int(np.array(c).view(np.int32)) & 1))


def sigma_times(delta, sigma):
    """fl32(sigma * delta) computed apart from cgad: numpy's IEEE float32 product of two float32s, one rounding."""
    return torch.from_numpy(delta.detach().cpu().numpy() * np.float32(sigma))
