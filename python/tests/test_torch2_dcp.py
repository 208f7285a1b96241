"""torch.distributed.checkpoint's optimizer state_dict API round-trips cgad.torch's optimizers bit for bit, for every
optimizer and state format (docs/python.md, "torch 2.x protocol"): get_optimizer_state_dict keys the state by the
parameters' names, set_optimizer_state_dict loads it into another model's optimizer, and both then step alike --
nested or flattened, in memory or through dcp.save and dcp.load.

DCP's lazy initialisation (_init_optim_state in torch/distributed/checkpoint/state_dict.py) calls step() with zero
gradients at lr 0 on an optimizer whose ``state`` is empty. A cgad.torch optimizer's state exists from
construction (docs/python.md, "State"), so DCP never steps it: a never-stepped optimizer stays never-stepped (t = 0,
no count, no report, no parameter moved). torch.optim.Adam is stepped there: its step count becomes 1."""
import pytest
import torch

from conftest import bits, require_torch, state_bits
from optimizer_cases import CASES, feed


@pytest.fixture(autouse=True)
def _torch22():
    require_torch((2, 2), "torch.distributed.checkpoint.state_dict")


def model(seed, dtype=torch.float32):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(12, 25), torch.nn.Tanh(), torch.nn.Linear(25, 3)).to(dtype)


def param_bits(m):
    return [bits(p).tobytes() for p in m.parameters()]


def through_disk(path, saved, target_model, target, options):
    """dcp.save of the saved optimizer state_dict, and dcp.load into the target's own (DCP loads in place)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
    dcp.save({"optim": saved}, checkpoint_id=str(path))
    loaded = {"optim": get_optimizer_state_dict(target_model, target, options=options)}
    dcp.load(loaded, checkpoint_id=str(path))
    return loaded["optim"]


# flatten: the flattened layout torchtitan checkpoints with (StateDictOptions(flatten_optimizer_state_dict=True)),
# which rebuilds each param group from the keys of the live group it loads into (_state.COUNTERS' comment).
# bf16 parameters: DCP must not cast fp32 state to them either (torch.optim's load_state_dict would).
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32-params", "bf16-params"])
@pytest.mark.parametrize("disk", [False, True], ids=["in-memory", "dcp.save-load"])
@pytest.mark.parametrize("flatten", [False, True], ids=["nested", "flattened"])
@pytest.mark.parametrize("cls,kwargs", CASES)
def test_get_and_set_optimizer_state_dict_round_trip_bit_for_bit(tmp_path, cls, kwargs, flatten, disk, dtype):
    import warnings
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_optimizer_state_dict,
                                                         set_optimizer_state_dict)
    options = StateDictOptions(flatten_optimizer_state_dict=flatten)
    source_model, target_model = model(0, dtype), model(2, dtype)
    source, target = cls(source_model.parameters(), **kwargs), cls(target_model.parameters(), **kwargs)
    for e in range(3):
        feed(list(source_model.parameters()), e)
        source.step(staleness=e)
    saved = get_optimizer_state_dict(source_model, source, options=options)
    names = sorted(name for name, _ in source_model.named_parameters())
    if not flatten:
        assert sorted(saved["state"]) == names
    if disk:
        with warnings.catch_warnings():  # DCP warns that it runs without a process group, as meant here
            warnings.simplefilter("ignore", UserWarning)
            saved = through_disk(tmp_path, saved, target_model, target, options)
    set_optimizer_state_dict(target_model, target, saved, options=options)
    assert state_bits(target) == state_bits(source)
    target_model.load_state_dict(source_model.state_dict())
    for e in range(3, 5):
        feed(list(source_model.parameters()), e)
        feed(list(target_model.parameters()), e)
        source.step(staleness=1)
        target.step(staleness=1)
    assert param_bits(target_model) == param_bits(source_model)
    assert state_bits(target) == state_bits(source)


@pytest.mark.parametrize("cls,kwargs", CASES)
def test_dcp_leaves_a_never_stepped_optimizer_never_stepped(cls, kwargs):
    from torch.distributed.checkpoint.state_dict import _init_optim_state, get_optimizer_state_dict
    m = model(1, torch.bfloat16)
    opt = cls(m.parameters(), **kwargs)
    fresh = cls(model(1, torch.bfloat16).parameters(), **kwargs)
    before, steps = param_bits(m), []
    opt.register_step_pre_hook(lambda o, a, k: steps.append(k))
    assert opt.state  # the state exists from construction, so DCP's lazy initialisation has nothing to do
    _init_optim_state(opt)
    saved = get_optimizer_state_dict(m, opt)
    assert steps == [] and opt.last_report is None and not any(opt.counters.values())
    assert opt.counters() == fresh.counters() and state_bits(opt) == state_bits(fresh)
    assert param_bits(m) == before and all(p.grad is None for p in m.parameters())
    assert all(int(entry["step"]) == 0 for entry in saved["state"].values())


def test_dcp_steps_torch_adam_at_lr_0_where_it_has_no_state():
    # What the docstring says of torch's Adam, so that the difference it states stays true.
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
    m = model(0)
    before = param_bits(m)
    saved = get_optimizer_state_dict(m, torch.optim.Adam(m.parameters()))
    assert all(int(entry["step"]) == 1 for entry in saved["state"].values())
    assert param_bits(m) == before
