"""CUDA param groups (docs/python.md): any number of them, stepped on the device as one event with no host sync
(a NaN/Inf or overflow in any group changes none, decided on the device through one shared veto), reports read
lazily, new hyperparameters (an lr schedule), the state torch tensors on the device that opt.state[p] and
state_dict() hold as for CPU groups (the same keys, dtypes and shapes), a parameter without a gradient left out, and
capturable=True. Each against the same optimizer over CPU copies of the parameters, bit for bit. Skips, saying why,
where this process has no CUDA device (or this build no CUDA backend); the same paths are checked without a device by
the host emulation of the kernels (proptests/fastpath/fastpath_tensor_table_test.cpp's
ThreeCudaGroupsWithAnLrScheduleEmulatedOnTheHostMatchThreeCpuGroups)."""
import pytest
import torch

import cgad
from cgad.torch import CGAD, PACGAD
from cgad.torch._report import LazyStepReport, StepReport
from conftest import bits

needs_cuda = pytest.mark.skipif(not (torch.cuda.is_available() and cgad.cuda_available()),
                                reason="no CUDA device for cgad.torch's CUDA groups: " +
                                (cgad.cuda_unavailable_reason() or "torch sees no CUDA device"))

SIZES = ((300, 17), (1024,), (5, 700))
FORMATS = ({"state": "fp32"}, {"state": "q8"}, {"state": "bf16"})


def model(device):
    g = torch.Generator().manual_seed(0)
    groups = []
    for sizes, fmt in zip(SIZES, FORMATS):
        params = [torch.nn.Parameter(torch.randn(n, generator=g).to(torch.bfloat16).to(device)) for n in sizes]
        groups.append(dict(params=params, **fmt))
    return groups


def feed(groups, event, nan_in=None):
    g = torch.Generator().manual_seed(50 + event)
    for index, group in enumerate(groups):
        for p in group["params"]:
            grad = torch.randn(p.shape, generator=g) * 0.1
            if index == nan_in:
                grad[-1] = float("nan")
            p.grad = grad.to(p.dtype).to(p.device)


def everything(opt, groups):
    """Every parameter's bits and every state buffer, as host values."""
    out = []
    for group in groups:
        for p in group["params"]:
            out.append(bits(p.detach().cpu()).tolist())
            for name in ("m", "v"):
                out.append(opt.state_buffer(p, name).cpu().numpy().tobytes())
    return out


@needs_cuda
@pytest.mark.parametrize("cls,kwargs", [(CGAD, {}), (PACGAD, dict(fragments="groups", tau_cut=8))],
                         ids=["cgad", "pacgad-groups"])
def test_three_cuda_groups_under_an_lr_schedule_step_bit_for_bit_like_the_cpu(cls, kwargs):
    cpu_groups, cuda_groups = model("cpu"), model("cuda")
    cpu, gpu = cls(cpu_groups, lr=1e-2, **kwargs), cls(cuda_groups, lr=1e-2, **kwargs)
    schedules = [torch.optim.lr_scheduler.LambdaLR(o, lambda e: 1.0 / (1 + e)) for o in (cpu, gpu)]
    for e in range(8):
        nan_in = 1 if e == 4 else None
        feed(cpu_groups, e, nan_in)
        feed(cuda_groups, e, nan_in)
        fragment = {} if cls is CGAD else {"fragment": e % 3}
        want = cpu.step(staleness=e % 3, **fragment)
        got = gpu.step(staleness=e % 3, **fragment)
        assert isinstance(got, LazyStepReport)
        for s in schedules:
            s.step()
        assert got.resolved() == want
        assert (got.applied, got.reason) == ((False, "nonfinite-gradient") if e == 4 and cls is CGAD else
                                             (want.applied, want.reason))
    assert everything(gpu, cuda_groups) == everything(cpu, cpu_groups)
    assert gpu.counters == cpu.counters
    for k in range(3):
        assert gpu.counters(k) == cpu.counters(k)


@needs_cuda
def test_a_cuda_state_dict_of_three_groups_resumes_bit_for_bit_and_moves_to_the_cpu():
    groups = model("cuda")
    opt = CGAD(groups)
    for e in range(3):
        feed(groups, e)
        opt.step(staleness=e)
    saved = opt.state_dict()
    resumed_groups = model("cuda")
    with torch.no_grad():
        for a, b in zip(resumed_groups, groups):
            for p, q in zip(a["params"], b["params"]):
                p.copy_(q)
    resumed = CGAD(resumed_groups)
    resumed.load_state_dict(saved)
    for e in range(3, 5):
        feed(groups, e)
        feed(resumed_groups, e)
        opt.step(staleness=1)
        resumed.step(staleness=1)
    assert everything(resumed, resumed_groups) == everything(opt, groups)


def layout(opt):
    """opt.state and state_dict()'s state as keys, dtypes and shapes (devices aside)."""
    saved = opt.state_dict()
    return ([sorted((name, t.dtype, tuple(t.shape)) for name, t in opt.state[p].items())
             for group in opt.param_groups for p in group["params"]],
            {i: sorted((name, t.dtype, tuple(t.shape)) for name, t in entry.items())
             for i, entry in saved["state"].items()})


@needs_cuda
def test_cuda_state_is_torch_tensors_on_the_device_as_the_cpu_groups_state():
    cpu_groups, cuda_groups = model("cpu"), model("cuda")
    cpu, gpu = CGAD(cpu_groups), CGAD(cuda_groups)
    feed(cpu_groups, 0)
    feed(cuda_groups, 0)
    cpu.step(staleness=1)
    gpu.step(staleness=1).resolved()
    assert layout(gpu) == layout(cpu)
    for group in cuda_groups:
        for p in group["params"]:
            assert {t.device for name, t in gpu.state[p].items() if name != "step"} == {p.device}
    # The live state: an edit of opt.state's tensor is what the next step reads, as on the CPU.
    for opt, groups in ((cpu, cpu_groups), (gpu, cuda_groups)):
        with torch.no_grad():
            opt.state[groups[0]["params"][0]]["exp_avg"].zero_()
        feed(groups, 1)
        opt.step(staleness=0)
    assert everything(gpu, cuda_groups) == everything(cpu, cpu_groups)


@needs_cuda
def test_a_cuda_parameter_without_a_gradient_is_left_out_as_on_the_cpu():
    cpu_groups, cuda_groups = model("cpu"), model("cuda")
    cpu, gpu = CGAD(cpu_groups), CGAD(cuda_groups)
    for e in range(3):
        feed(cpu_groups, e)
        feed(cuda_groups, e)
        if e == 1:
            cpu_groups[0]["params"][1].grad = None
            cuda_groups[0]["params"][1].grad = None
        assert gpu.step(staleness=e).resolved() == cpu.step(staleness=e)
    assert everything(gpu, cuda_groups) == everything(cpu, cpu_groups)
    assert gpu.counters == cpu.counters


@needs_cuda
def test_a_cuda_state_dict_loads_into_cpu_groups_and_back_bit_for_bit():
    cpu_groups, cuda_groups = model("cpu"), model("cuda")
    cpu, gpu = CGAD(cpu_groups), CGAD(cuda_groups)
    for e in range(2):
        feed(cpu_groups, e)
        feed(cuda_groups, e)
        cpu.step(staleness=e)
        gpu.step(staleness=e)
    cpu.load_state_dict(gpu.state_dict())
    gpu.load_state_dict(cpu.state_dict())
    feed(cpu_groups, 5)
    feed(cuda_groups, 5)
    assert gpu.step(staleness=2).resolved() == cpu.step(staleness=2)
    assert everything(gpu, cuda_groups) == everything(cpu, cpu_groups)


@needs_cuda
def test_capturable_is_taken_for_cuda_groups_and_cpu_and_cuda_groups_are_not_mixed():
    groups = model("cuda")
    CGAD(groups, capturable=True)
    with pytest.raises(cgad.InputError, match="capturable=True is not supported"):
        CGAD(model("cpu"), capturable=True)
    opt = CGAD(model("cuda")[:1])
    with pytest.raises(cgad.InputError, match="parameters on the CPU and on CUDA go in separate optimizers"):
        opt.add_param_group(model("cpu")[0])
    assert len(opt.param_groups) == 1


def test_a_lazy_report_is_read_once_on_first_access_and_copies_as_the_step_report():
    """What a CUDA step returns, without a device: nothing is read until a field is, then once; the loss is there at
    once; a copy or a pickle is the StepReport itself (the device's record is not copied)."""
    import copy
    import pickle
    reads = []

    def read():
        reads.append(1)
        return StepReport(False, "nonfinite-gradient", 0.0, 2, 1, 7, (), 0.5)

    report = LazyStepReport(read, loss=0.5)
    assert report.loss == 0.5 and reads == []
    assert (report.applied, report.reason, report.nonfinite_param, report.nonfinite_index) == \
        (False, "nonfinite-gradient", 1, 7)
    assert report == report.resolved() and reads == [1]
    assert copy.deepcopy(report) == report.resolved() and pickle.loads(pickle.dumps(report)) == report.resolved()
    assert isinstance(copy.copy(report), StepReport) and reads == [1]
