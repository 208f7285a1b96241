"""The v map of q8 state beside param groups of other state: bitsandbytes' embedding idiom keeps the embeddings in
32-bit state and the rest in 8-bit, CGAD([{"params": emb, "state": "fp32"}, {"params": rest}], state="q8",
v_map="zero-free"). The zero-free map is a q8 second moment's, so the q8 groups read it and the others (fp32, bf16
state, given at construction or through add_param_group) ignore it: each group steps bit for bit as an optimizer of
its own format alone does, and a state_dict of such an optimizer loads. A zero-free map that no group reads stays
refused (test_torch_state_dict.py's test_v_map_is_checked_at_construction)."""
import pytest
import torch

import cgad
from cgad.torch import CGAD, Adam
from conftest import bits, state_bits


def tensors(seed, sizes=(300, 40, 520)):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(n, generator=g).to(torch.bfloat16)) for n in sizes]


def feed(params, event):
    """Each tensor's gradient keyed by its size (they differ), so a tensor gets the same one in any optimizer. Its
    first element is 10^4 times the others: their v lies below the dynamic map's smallest code of the block's absmax
    (~1.6e-7, v ~ g^2), which that map stores as 0 and the zero-free map does not."""
    for p in params:
        g = torch.Generator().manual_seed(100 + event + 1000 * p.numel())
        grad = torch.randn(p.shape, generator=g) * 0.1
        grad[0] = 1e3
        p.grad = grad.to(p.dtype)


def param_bits(params):
    return [bits(p).tolist() for p in params]


def moments(opt, params):
    """The bytes of every state tensor (opt.state) of ``params``."""
    return [(name, t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
            for p in params for name, t in sorted(opt.state[p].items()) if isinstance(t, torch.Tensor)]


def steps(opt, params, events=range(4)):
    for e in events:
        feed(params, e)
        report = opt.step(staleness=e % 2)
        assert report.applied and report.reason == "none"


# The other groups' state: given in the group at construction, or through add_param_group.
OTHERS = [("fp32", dict(state="fp32")), ("bf16", dict(state="bf16"))]


@pytest.mark.parametrize("cls", [CGAD, Adam])
@pytest.mark.parametrize("name,other", OTHERS, ids=[n for n, _ in OTHERS])
@pytest.mark.parametrize("how", ["constructor", "add_param_group"])
def test_a_zero_free_q8_optimizer_takes_groups_of_other_state_each_stepping_as_alone(cls, name, other, how):
    emb, rest = tensors(1, (300,)), tensors(2, (40, 520))
    if how == "constructor":
        opt = cls([{"params": emb, **other}, {"params": rest}], state="q8", v_map="zero-free")
    else:
        opt = cls(rest, state="q8", v_map="zero-free")
        opt.add_param_group({"params": emb, **other})
    alone_emb, alone_rest = tensors(1, (300,)), tensors(2, (40, 520))
    emb_opt = cls(alone_emb, **other)
    rest_opt = cls(alone_rest, state="q8", v_map="zero-free")
    steps(opt, emb + rest)
    steps(emb_opt, alone_emb)
    steps(rest_opt, alone_rest)
    assert param_bits(emb) == param_bits(alone_emb)
    assert param_bits(rest) == param_bits(alone_rest)
    assert moments(opt, emb) == moments(emb_opt, alone_emb)
    assert moments(opt, rest) == moments(rest_opt, alone_rest)
    # The q8 group decodes v through the zero-free map: the dynamic map's zero v steps the small elements otherwise.
    dynamic_rest = tensors(2, (40, 520))
    steps(cls(dynamic_rest, state="q8"), dynamic_rest)
    assert param_bits(dynamic_rest) != param_bits(rest)


def test_a_state_dict_of_mixed_state_under_the_zero_free_map_resumes_bit_for_bit():
    def make(seed):
        params = tensors(seed, (300, 40, 520))
        return params, CGAD([{"params": params[:1], "state": "fp32"}, {"params": params[1:2], "state": "bf16"},
                             {"params": params[2:]}], state="q8", v_map="zero-free")

    params, opt = make(3)
    steps(opt, params, range(2))
    saved = opt.state_dict()
    resumed_params, resumed = make(3)
    with torch.no_grad():
        for p, q in zip(resumed_params, params):
            p.copy_(q)
    resumed.load_state_dict(saved)
    assert state_bits(resumed) == state_bits(opt)
    steps(opt, params, range(2, 4))
    steps(resumed, resumed_params, range(2, 4))
    assert param_bits(resumed_params) == param_bits(params)
    assert state_bits(resumed) == state_bits(opt)
    assert [g["v_map"] for g in resumed.param_groups] == ["zero-free"] * 3  # the groups keep the key as given


def test_a_zero_free_map_no_group_reads_is_still_refused():
    with pytest.raises(cgad.InputError, match="v map zero-free is a map of q8 second moments"):
        CGAD([{"params": tensors(1, (10,)), "state": "bf16"}], state="fp32", v_map="zero-free")
    # ... and one a q8 group reads is taken, whatever the optimizer's own state.
    CGAD([{"params": tensors(1, (10,)), "state": "q8"}, {"params": tensors(2, (10,))}], state="fp32",
         v_map="zero-free")
