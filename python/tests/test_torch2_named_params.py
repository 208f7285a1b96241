"""Parameters given as (name, tensor) pairs -- model.named_parameters() -- as torch 2.x's Optimizer takes them
(docs/python.md, "torch 2.x protocol"): the names go to each group's "param_names" and into state_dict(); the
optimizer steps as over the bare tensors; a load between a named and an unnamed optimizer, either way, resumes bit
for bit, keeping this optimizer's names where the saved groups have none, as torch keeps them."""
import pytest
import torch

from cgad.torch import PACGAD
from conftest import bits, require_torch, state_bits
from optimizer_cases import CASES, feed, params

NAMES = ["embed.weight", "norm.bias", "head.weight"]


@pytest.fixture(autouse=True)
def _torch26():
    require_torch((2, 6), "named parameters in torch.optim (param_names)")


def make(cls, kwargs, named, seed=0):
    ps = params(seed=seed)
    return ps, cls(list(zip(NAMES, ps)) if named else ps, **kwargs)


@pytest.mark.parametrize("cls,kwargs", CASES)
def test_named_parameters_step_as_the_tensors_and_keep_their_names(cls, kwargs):
    named_params, named = make(cls, kwargs, True)
    plain_params, plain = make(cls, kwargs, False)
    assert named.param_groups[0]["param_names"] == NAMES and "param_names" not in plain.param_groups[0]
    assert named.param_groups[0]["params"] == named_params
    for e in range(2):
        feed(named_params, e)
        feed(plain_params, e)
        named.step(staleness=e)
        plain.step(staleness=e)
    assert [bits(p).tobytes() for p in named_params] == [bits(p).tobytes() for p in plain_params]
    assert state_bits(named) == state_bits(plain)
    assert named.state_dict()["param_groups"][0]["param_names"] == NAMES


@pytest.mark.parametrize("saved_named,loading_named", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("cls,kwargs", CASES)
def test_named_and_unnamed_state_dicts_load_into_each_other(cls, kwargs, saved_named, loading_named):
    ps, source = make(cls, kwargs, saved_named)
    feed(ps, 0)
    source.step(staleness=2)
    _, target = make(cls, kwargs, loading_named, seed=1)
    target.load_state_dict(source.state_dict())
    assert state_bits(target) == state_bits(source)
    assert target.state_dict()["param_groups"][0].get("param_names") == \
        (NAMES if saved_named or loading_named else None)
    if cls is PACGAD:
        return  # it takes one param group (docs/python.md, "PACGAD")
    # A group added later must match the others' naming, as torch requires; a named one is taken.
    extra = torch.nn.Parameter(torch.randn(5))
    target.add_param_group({"params": [("extra", extra)] if (saved_named or loading_named) else [extra]})
    assert target.param_groups[1].get("param_names") == (["extra"] if (saved_named or loading_named) else None)
