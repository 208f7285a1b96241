"""cgad.torch's state_dict leaves the process as torch's does (docs/python.md, "torch 2.x protocol"): torch.save of
it loads under torch.load(weights_only=True) -- nothing in it needs a custom class unpickled (torch 2.6 made
weights_only the default) -- and resumes bit for bit; and loading never casts the moments to the parameters' dtype
as torch.optim's load_state_dict casts floating state: fp32 moments of bf16 parameters stay fp32, bit for bit."""
import io

import pytest
import torch

from conftest import bits, require_torch, state_bits
from optimizer_cases import CASES, feed, params


def stepped(cls, kwargs, dtype=torch.float32):
    ps = params(dtype)
    opt = cls(ps, **kwargs)
    for e in range(3):
        feed(ps, e)
        opt.step(staleness=e)
    return ps, opt


def continue_alike(a, pa, b, pb):
    with torch.no_grad():
        for p, q in zip(pa, pb):
            q.copy_(p)
    for e in range(3, 5):
        feed(pa, e)
        feed(pb, e)
        a.step(staleness=1)
        b.step(staleness=1)
    assert [bits(p).tobytes() for p in pa] == [bits(p).tobytes() for p in pb]
    assert state_bits(a) == state_bits(b)


@pytest.mark.parametrize("cls,kwargs", CASES)
def test_a_saved_state_dict_loads_with_weights_only_and_resumes_bit_for_bit(cls, kwargs):
    # torch 1.13's weights_only unpickler has no Python float (pickle's BINFLOAT), so not even torch.optim.Adam's
    # state_dict (its lr) loads there.
    require_torch((2, 0), "torch.load(weights_only=True) of any optimizer's state_dict")
    ps, opt = stepped(cls, kwargs)
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    resumed_params = params(seed=4)
    resumed = cls(resumed_params, **kwargs)
    resumed.load_state_dict(loaded)
    assert state_bits(resumed) == state_bits(opt)
    continue_alike(opt, ps, resumed, resumed_params)


@pytest.mark.parametrize("cls,kwargs", [c for c in CASES if c.values[1]["state"] == "fp32" or
                                        c.values[1].get("q8_semantics") == "bnb"])
def test_fp32_state_under_bf16_parameters_is_not_downcast_by_a_load(cls, kwargs):
    # fp32 state, and bitsandbytes' fp32 state1/state2 of tensors under min_q8_size (here the 17-element one).
    kwargs = dict(kwargs, min_q8_size=64) if kwargs["state"] == "q8" else kwargs
    ps, opt = stepped(cls, kwargs, torch.bfloat16)
    saved = opt.state_dict()
    floating = {(i, k) for i, e in saved["state"].items() for k, t in e.items()
                if k != "step" and t.dtype == torch.float32 and t.shape == ps[i].shape}
    assert (1, "state1" if kwargs["state"] == "q8" else
            ("exp_avg" if "exp_avg" in saved["state"][1] else "momentum_buffer")) in floating
    resumed_params = params(torch.bfloat16, seed=4)
    resumed = cls(resumed_params, **kwargs)
    resumed.load_state_dict(saved)
    for i, name in floating:
        assert resumed.state[resumed_params[i]][name].dtype == torch.float32
    assert state_bits(resumed) == state_bits(opt)
    continue_alike(opt, ps, resumed, resumed_params)
