"""q8 maps given as data (cgad.torch's q8_maps=, docs/python.md): the codes a q8 state decodes with are the maps
given, bit for bit -- a PyTorch build's (fastpath/tools/data), or the installed bitsandbytes' with
q8_maps="bitsandbytes" --; one step lands where bitsandbytes' own quantize_blockwise puts it with those maps; the
state_dict records the maps and refuses a state of other ones; bad maps are refused with an InputError."""
import pathlib
import re

import numpy as np
import pytest
import torch

import cgad
import cgad.torch as ct

from conftest import peer

COUNTERS = "cgad_counters"  # cgad.torch's param-group key for its counters (_state.py)
DATA = pathlib.Path(__file__).resolve().parents[2] / "fastpath" / "tools" / "data"


def torch_build_maps(name="bnb_maps_torch1.13_avx2.txt"):
    """A PyTorch build's bitsandbytes maps (fastpath/tools/bnb_dynamic_map.py): signed, unsigned, float32."""
    values = [float.fromhex(line) for line in (DATA / name).read_text().splitlines() if line and line[0] != "#"]
    codes = np.array(values, dtype=np.float32)
    assert codes.size == 512
    return codes[:256], codes[256:]


def bits(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def decoded_maps(**options):
    """The codes a q8 state of these options decodes with: state1/state2 set to codes 0..255, absmax 1."""
    p = torch.nn.Parameter(torch.zeros(256))
    opt = ct.Adam([p], state="q8", min_q8_size=0, **options)
    p.grad = torch.ones(256)
    opt.step()
    with torch.no_grad():
        for name in ("state1", "state2"):
            opt.state[p][name].copy_(torch.arange(256, dtype=torch.uint8))
        for name in ("absmax1", "absmax2"):
            opt.state[p][name].fill_(1.0)
    return opt.state_buffer(p, "m").numpy(), opt.state_buffer(p, "v").numpy()


@pytest.mark.parametrize("semantics", ["cgad", "bnb"])
def test_given_maps_are_the_codes_the_state_decodes_with(semantics):
    signed, unsigned = torch_build_maps()
    m, v = decoded_maps(q8_semantics=semantics, q8_maps=(torch.from_numpy(signed), unsigned))
    np.testing.assert_array_equal(bits(m), bits(signed))
    np.testing.assert_array_equal(bits(v), bits(unsigned))
    built_in_m, built_in_v = decoded_maps(q8_semantics=semantics)
    assert (bits(built_in_m) != bits(signed)).sum() > 0 and (bits(built_in_v) != bits(unsigned)).sum() > 0


def test_bitsandbytes_maps_are_the_installed_ones():
    functional = peer("bitsandbytes.functional")
    m, v = decoded_maps(q8_semantics="bnb", q8_maps="bitsandbytes")
    np.testing.assert_array_equal(bits(m), bits(functional.create_dynamic_map(signed=True).numpy()))
    np.testing.assert_array_equal(bits(v), bits(functional.create_dynamic_map(signed=False).numpy()))


def test_a_step_lands_where_bitsandbytes_quantize_puts_it_with_the_installed_maps():
    """One Adam step from zero with beta1 = beta2 = 0.5 and max |g| = 1: m = g/2 and v = fl(g*g)/2 exactly, in
    cgad's bnb semantics and in torch alike, with absmax 1/2 for both. g holds the installed signed codes where they
    differ from cgad's built-in ones (so m/absmax is such a code) and the float square roots of the installed
    unsigned codes where those differ (so v/absmax is within 2 ulps of one), all of magnitude >= 0.01, where the
    codes lie far more than bitsandbytes' CPU lookup-table bin (2/65535, docs/results/peers.md) apart, so its
    quantize_blockwise picks the nearest code there, as the CUDA rule does. The codes and absmax cgad stores are
    quantize_blockwise's of those m and v with the installed maps; decoded, they are its dequantize_blockwise's,
    and not what the built-in maps decode."""
    functional = peer("bitsandbytes.functional")
    signed = functional.create_dynamic_map(signed=True)
    unsigned = functional.create_dynamic_map(signed=False)
    built_in_m, built_in_v = decoded_maps(q8_semantics="bnb")
    m_codes = [k for k in range(256) if bits(built_in_m[k]) != bits(signed[k].item()) and abs(signed[k]) >= 0.01]
    v_codes = [k for k in range(256) if bits(built_in_v[k]) != bits(unsigned[k].item()) and unsigned[k] >= 0.01]
    assert m_codes and v_codes, "the installed maps differ from cgad's nowhere above 0.01 on this machine"
    g = torch.zeros(256)
    g[0] = 1.0
    g[1:1 + len(m_codes)] = signed[m_codes]
    g[1 + len(m_codes):1 + len(m_codes) + len(v_codes)] = unsigned[v_codes].sqrt()
    p = torch.nn.Parameter(torch.zeros(256))
    opt = ct.Adam([p], betas=(0.5, 0.5), state="q8", q8_semantics="bnb", min_q8_size=0, q8_maps="bitsandbytes")
    p.grad = g.clone()
    opt.step()
    state = opt.state[p]
    for moment, code, (ours, absmax), designed in (
            (g * 0.5, signed, ("state1", "absmax1"), range(0, 1 + len(m_codes))),
            ((g * g) * 0.5, unsigned, ("state2", "absmax2"), [0, *range(1 + len(m_codes), 1 + len(m_codes) +
                                                                         len(v_codes))])):
        quantized, quant_state = functional.quantize_blockwise(moment, code=code, blocksize=256)
        assert bits(state[absmax].numpy()).tolist() == bits(quant_state.absmax.numpy()).tolist()
        designed = list(designed)
        assert state[ours][designed].tolist() == quantized[designed].tolist()
        decoded = functional.dequantize_blockwise(state[ours], absmax=state[absmax], code=code, blocksize=256)
        name = "m" if ours == "state1" else "v"
        np.testing.assert_array_equal(bits(opt.state_buffer(p, name).numpy()), bits(decoded.numpy()))
    assert (bits(opt.state_buffer(p, "m").numpy()[1:1 + len(m_codes)]) !=
            bits(built_in_m[state["state1"][1:1 + len(m_codes)].long().numpy()] * 0.5)).all()


def test_the_state_dict_records_the_maps_and_refuses_other_ones():
    signed, unsigned = torch_build_maps()
    other_signed, other_unsigned = torch_build_maps("bnb_maps_torch1.13_avx512.txt")

    def made(maps):
        p = torch.nn.Parameter(torch.linspace(-1, 1, 300))
        opt = ct.CGAD([p], state="q8", min_q8_size=0, q8_maps=maps)
        p.grad = torch.linspace(-0.5, 1, 300)
        opt.step()
        return p, opt

    p, opt = made((signed, unsigned))
    saved = opt.state_dict()
    assert [bits(m).tolist() for m in saved["param_groups"][0][COUNTERS]["q8_maps"]] == \
        [bits(signed).tolist(), bits(unsigned).tolist()]
    q, again = made((signed, unsigned))
    again.load_state_dict(saved)
    assert torch.equal(again.state[q]["state1"], opt.state[p]["state1"])
    for maps, why in ((None, "was quantized with q8 maps of its own (q8_maps=), this optimizer has the built-in"),
                      ((other_signed, other_unsigned), "was quantized with other q8 maps than this optimizer's")):
        _, target = made(maps)
        with pytest.raises(cgad.InputError, match=re.escape(why)):
            target.load_state_dict(saved)
    _, plain = made(None)
    assert "q8_maps" not in plain.state_dict()["param_groups"][0][COUNTERS]
    with pytest.raises(cgad.InputError, match="was quantized with the built-in q8 maps, this optimizer has q8 maps "):
        made((signed, unsigned))[1].load_state_dict(plain.state_dict())


@pytest.mark.parametrize("maps, message", [
    ("bnb", "q8_maps must be None, 'bitsandbytes' or a pair"),
    ((np.zeros(256, np.float32),), "q8_maps must be None, 'bitsandbytes' or a pair"),
    ((np.zeros(256, np.float64), np.zeros(256, np.float32)), "signed map must be a float32 tensor or array of 256"),
    ((np.zeros(256, np.float32), np.zeros(255, np.float32)), "unsigned map must be a float32 tensor or array of 256"),
    ((np.zeros(256, np.float32), np.zeros(256, np.float32)), "q8 maps: the signed map is not strictly increasing"),
])
def test_bad_maps_are_refused(maps, message):
    with pytest.raises(cgad.InputError, match=message):
        ct.Adam([torch.nn.Parameter(torch.zeros(4))], state="q8", q8_maps=maps)


def test_maps_without_q8_state_are_refused():
    with pytest.raises(cgad.InputError, match="q8_maps are the codes of q8 state"):
        ct.Adam([torch.nn.Parameter(torch.zeros(4))], state="fp32", q8_maps=torch_build_maps())
