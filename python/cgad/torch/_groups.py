"""One fast-path optimizer per torch param group, over the group's tensors, which both backends step where they
lie (the fast path's tensor-table step: a pointer per parameter and per pseudo-gradient); the CUDA backend runs
on torch's current stream."""
import torch

from .. import _cgad
from ._tensors import backend, gradients, group_layout, held, param_pointers


class Group:
    """The fast-path optimizer of one param group. ``spec`` is its configuration as text (step_config.cpp)."""

    def __init__(self, spec, params, threads, where):
        self.layout = group_layout(params, where)
        fmt, device, sizes = self.layout
        self.spec = dict(spec, params=fmt)
        self.sizes = sizes
        self.fragments = _cgad.fragment_bounds(self.spec, sizes)  # [(offset, size)], as the fast path cuts
        self.begins = [0]
        for size in sizes:
            self.begins.append(self.begins[-1] + size)

    def tensors_in(self, fragment, where):
        """Indices of the non-empty tensors with elements in ``fragment``."""
        if not 0 <= fragment < len(self.fragments):
            raise _cgad.InputError(f"{where}: fragment {fragment} does not exist (there are {len(self.fragments)})")
        offset, size = self.fragments[fragment]
        return [k for k in range(len(self.sizes))
                if self.sizes[k] > 0 and self.begins[k] < offset + size and self.begins[k + 1] > offset]

    def locate(self, fragment, index):
        """(tensor, flat index in it) of element ``index`` of ``fragment`` (a report's nonfinite_index)."""
        at = self.fragments[fragment][0] + index
        for k in range(len(self.sizes)):
            if self.begins[k] <= at < self.begins[k + 1]:
                return k, at - self.begins[k]
        raise AssertionError("element outside the parameter vector")

    def prepare(self, params, fragment, where):
        """The event's operands (parameter and gradient pointers, with tensors that keep the memory they point to
        alive until the step has ended), or None when the group has no pseudo-gradient to apply."""
        views = held(params)
        ptrs = param_pointers(views, self.layout, where)
        grads = gradients(params, self.tensors_in(fragment, where), where)
        if grads is None:
            return None
        return ptrs, [0 if g is None else g.data_ptr() for g in grads], grads, views

    def configure(self, spec):
        """Takes the group's hyperparameters for the next step (an lr schedule): a no-op when unchanged."""
        spec = dict(spec, params=self.spec["params"])
        if spec != self.spec:
            self.engine.set_hyperparameters(spec)
            self.spec = spec


class CpuGroup(Group):
    def __init__(self, spec, params, threads, where):
        super().__init__(spec, params, threads, where)
        self.engine = _cgad.CpuOptimizer(self.spec, self.sizes, threads)

    def preview(self, prepared, tau, fragment):
        return self.engine.preview(prepared[1], tau, fragment)

    def step(self, params, prepared, tau, fragment):
        return self.engine.step(prepared[0], prepared[1], tau, fragment)


class CudaGroup(Group):
    def __init__(self, spec, params, threads, where):
        super().__init__(spec, params, threads, where)
        self.engine = _cgad.CudaOptimizer(self.spec, self.sizes)

    def step(self, params, prepared, tau, fragment):
        device = params[0].device
        with torch.cuda.device(device):
            stream = torch.cuda.current_stream(device).cuda_stream
            return self.engine.step(prepared[0], prepared[1], tau, fragment, stream)


def make_group(spec, params, threads, where):
    """The Group for a param group's tensors on their device's backend."""
    _, device, _ = group_layout(params, where)
    return (CudaGroup if backend(device, where) == "cuda" else CpuGroup)(spec, params, threads, where)
