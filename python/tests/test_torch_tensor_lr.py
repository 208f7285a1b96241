"""A tensor lr (lr=torch.tensor(1e-3), as torch 2.x's optimizers take it, with schedulers that fill_ it in place)
steps every cgad.torch optimizer to the bits of the float lr (docs/python.md, "torch 2.x protocol"): the step rounds
the lr once to float32 either way (docs/python.md, "Hyperparameters are read from param_groups"), and a float32
tensor holds that rounding of the double the scheduler computed."""
import pytest
import torch

from conftest import bits, state_bits
from optimizer_cases import CASES, feed, params


def run(cls, kwargs, lr, schedule):
    ps = params(torch.bfloat16)
    opt = cls(ps, **dict(kwargs, lr=lr))
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.3 ** epoch) if schedule else None
    for e in range(4):
        feed(ps, e)
        opt.step(staleness=e % 3)
        if scheduler is not None:
            scheduler.step()
        elif e == 1:  # what a scheduler does to a tensor lr in torch 2.x: fill_, in place
            group = opt.param_groups[0]
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(group["lr"].item() * 0.3)
            else:
                group["lr"] = float(torch.tensor(group["lr"] * 0.3))
    return [bits(p).tobytes() for p in ps], state_bits(opt)


@pytest.mark.parametrize("schedule", [False, True], ids=["fill_", "LambdaLR"])
@pytest.mark.parametrize("cls,kwargs", CASES)
def test_a_tensor_lr_steps_to_the_bits_of_the_float_lr(cls, kwargs, schedule):
    lr = kwargs.get("lr", 1e-3)
    as_float = run(cls, kwargs, lr, schedule)
    assert as_float == run(cls, kwargs, torch.tensor(lr), schedule)
    assert as_float == run(cls, kwargs, torch.tensor(lr, dtype=torch.float64), schedule)
