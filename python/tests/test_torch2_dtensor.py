"""DTensor parameters (FSDP2's, tensor parallelism's) are refused where the parameters are given, saying why: the
fast path sees a tensor's data pointer, which for a DTensor is not the parameter's values, and a NaN/Inf refusal
would be one shard's decision (docs/python.md, "torchft"). Checked on a one-rank gloo mesh, sharded and
replicated."""
import pytest
import torch

import cgad
from cgad.torch import CGAD, PACGAD, Adam, Nesterov
from conftest import require_torch


@pytest.fixture
def mesh():
    require_torch((2, 4), "torch.distributed.tensor (DTensor)")
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield init_device_mesh("cpu", (1,))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("placement", ["Shard(0)", "Replicate()"])
@pytest.mark.parametrize("cls", [CGAD, PACGAD, Adam, Nesterov], ids=lambda c: c.__name__)
def test_dtensor_parameters_are_refused_at_construction_and_in_add_param_group(mesh, placement, cls):
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor  # noqa: F401 (eval below)
    dtensor = torch.nn.Parameter(distribute_tensor(torch.randn(8), mesh, [eval(placement)]))
    plain = torch.nn.Parameter(torch.randn(8))
    kwargs = dict(fragments="groups") if cls is PACGAD else {}
    with pytest.raises(cgad.InputError, match="parameter 0 is a DTensor, not a plain tensor"):
        cls([dtensor], **kwargs)
    opt = cls([plain], **kwargs)
    with pytest.raises(cgad.InputError, match="parameter 0 is a DTensor"):
        opt.add_param_group({"params": [dtensor]})
    assert len(opt.param_groups) == 1
    plain.grad = torch.ones(8)
    before = plain.detach().clone()
    assert opt.step(staleness=0).applied and not torch.equal(plain.detach(), before)
