"""cgad.peers (docs/results/peers.md): the real bitsandbytes and torchao 8-bit/4-bit optimizers stepped beside the
MPFR reference on a replay stream, with the rounding-noise study's figures. What is asserted is derived here,
apart from the driver:

- the driver's figures are the noise engine's: on cgad's own q8 step (bitsandbytes' semantics) they equal what
  `cgad noise --stream` computes in C++, the trap tallies bit for bit and the error summaries to float64's
  summation error, on a stream where the trap fires (so the equality is not one of zeros);
- one designed tensor, one step from zero state: each 128-element run holds one element of |g| = 1 (its block's
  absmax), one of 1e-4 (v/absmax = 1e-8, below half the unsigned dynamic map's smallest positive code
  3.25e-7), one exact 0, one of 0.1, one of −1e-8 (m/absmax = −1e-8), the rest 0.03. Where each v lands is derived from each peer's CPU rule
  (below) and checked code by code; θ must agree with the reference within the rounding count of the first
  step, which uses the unquantized new moments in every peer;
- a second step that shrinks the small gradients to 1e-6: under a rule that stores v/absmax = 1e-8 as 0
  (torchao 8-bit, exact nearest) that element's step is m/sqrt((1−β2)g²)-sized, derived here from the peer's
  own decoded m, past 5·lr; under bitsandbytes' CPU lookup table and torchao 4-bit's map without 0 it is not.
- min_8bit_size: a 4095-element tensor keeps fp32 state in bitsandbytes and in cgad's bnb semantics, a 4096 one
  is 8-bit in both.
Peers skip on Debian's torch 1.13 (conftest.peer); the first test runs on both interpreters."""
import numpy as np
import pytest
import torch

import cgad.peers as P
from conftest import peer

U = 2.0 ** -24  # float32's unit roundoff
PERIOD = 128    # torchao 4-bit's block; bitsandbytes' and torchao 8-bit's 256-blocks hold two periods
SIZE = 4096     # bitsandbytes' min_8bit_size, and >= torchao's 4096 with 128 and 256 dividing it


def _hex(x):
    return float(x).hex()


def _pattern(small):
    g = np.full(PERIOD, 0.03, dtype=np.float32)
    g[0], g[1], g[2], g[3], g[4] = 1.0, small, 0.0 if small == 1e-4 else small, 0.1, -1e-8
    return np.tile(g, SIZE // PERIOD)


def _stream(events, tensors=(SIZE,)):
    rng = np.random.Generator(np.random.Philox(7))
    n = sum(tensors)
    theta0 = rng.standard_normal(n).astype(np.float32)
    out = []
    for small in events:
        g = np.concatenate([_pattern(small)[:s] if s <= SIZE else np.resize(_pattern(small), s) for s in tensors])
        out.append({"grad": g, "tau": 0})
    return {"params": theta0, "tensors": list(tensors), "events": out}


def test_driver_figures_are_the_noise_engines_on_cgads_own_step(tmp_path):
    # Two tensors: 4096 elements in 8-bit state, 2048 under bnb's min_q8_size in fp32 state, so the trap fires in
    # the first only and the per-tensor split is exercised.
    path = P.write_stream(P.synthetic_stream([SIZE, 2048], 8, seed=3, scale_range=1e5), str(tmp_path / "s.jsonl"))
    ref = P.reference(path)
    mine = P.run("cgad.torch", path, reference_state=ref, state="q8", q8_semantics="bnb")["tensors"]
    engine = [t["engine"] for t in P.cgad_row(path, "cgad-q8-bnb")]
    assert engine[0]["v_zero_fraction"] > 0.1 and engine[0]["step_over_5lr_fraction"] > 0.01  # the trap fires
    assert engine[1]["v_zero_fraction"] == 0 and engine[1]["step_over_5lr_fraction"] == 0  # fp32 state: it cannot
    # The same sums in another order: each mean of n terms in float64 differs by at most n·2^-53 of the sum of
    # the terms' magnitudes, and the RMS's square root halves that.
    for k, (a_row, e_row) in enumerate(zip(mine, engine)):
        assert a_row["size"] == e_row["size"]
        for key in ("v_zero_fraction", "m_zero_fraction", "step_over_5lr_fraction", "max_step_over_lr",
                    "reference_max_step_over_lr"):
            assert a_row[key] == e_row[key], f"tensor {k} {key}: driver {_hex(a_row[key])}, cgad noise {_hex(e_row[key])}"
        bound = a_row["size"] * 2.0 ** -53
        for q in ("v", "m", "theta"):
            for key in ("mean_abs", "rms", "max_abs", "bias"):
                a, b = a_row[q][key], e_row[f"{q}_{key}"]
                scale = a_row[q]["mean_abs"] if key == "bias" else abs(b)
                assert abs(a - b) <= bound * max(scale, abs(b)), \
                    f"tensor {k} {q} {key}: driver {_hex(a)}, cgad noise {_hex(b)}"


def _lut_code(x, qmap):
    """bitsandbytes 0.50.2's CPU requantization (backends/cpu/ops.py quantize_blockwise → the library's
    cquantize_blockwise_cpu_fp32): x = value/absmax is mapped to one of 65536 bins, index
    ⌊fl32(fl32(fl32(fl32(x + 1)·0.5)·65535) + 0.5)⌋ in float32, and each bin holds the code nearest to its centre
    2·index/65535 − 1 -- not the code nearest to x. So |x| < 1/65535 lands on a nonzero code, and a negative x
    with x + 1 rounding to 1 in float32 lands on the positive code beside 0."""
    x = np.asarray(x, dtype=np.float32)
    t = np.float32(x + np.float32(1))
    t = np.float32(np.float32(np.float32(t * np.float32(0.5)) * np.float32(65535)) + np.float32(0.5))
    index = np.floor(t).astype(np.float64)
    centre = 2.0 * index / 65535.0 - 1.0
    q = qmap.double().numpy()
    return np.abs(centre[:, None] - q[None, :]).argmin(axis=1)


def _ratios(v_ref, block):
    v = v_ref.reshape(-1, block)
    return (v / v.max(axis=1, keepdims=True)).reshape(-1)


def _f32(x):
    return float(np.float32(x))


# Each peer's constants of the first step, as its CPU code forms them from lr = 1e-3, betas (0.9, 0.999) given as
# Python floats: bitsandbytes (backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu) weights m and v by
# 1 - beta cast to float32 and corrects in double (1 - beta**step, sqrt of it, -lr/correction1); torchao
# (optim/adam.py single_param_adam) lerps with 1 - beta cast to float32 and corrects with float32 powers of the
# float32 betas (step is a float32 tensor), lr a float32 tensor. The reference forms all of them from the float32
# betas and lr exactly, so at t = 1 its update is fl32(lr)·g/(|g| + eps).
CONSTANTS = {
    "bnb": dict(lr=1e-3, w1=_f32(1 - 0.9), c1=1 - 0.9, w2=_f32(1 - 0.999), c2=1 - 0.999),
    "torchao": dict(lr=_f32(1e-3), w1=_f32(1 - 0.9), c1=_f32(1 - np.float32(0.9)), w2=_f32(1 - 0.999),
                    c2=_f32(1 - np.float32(0.999))),
}


def _check_first_step(name, theta, theta0, g):
    """Adam's first step from zero state is lr·(w1·g/c1)/(sqrt(w2·g²/c2) + eps), computed here in float64 from
    the peer's own constants (CONSTANTS); every peer's first step uses the unquantized new moments, so θ may
    differ from it by rounding only: at most 14 float32 roundings of the update U (m: 2, v: 3, sqrt, the
    correction and + eps: 3, the step's constant from double to float: 1, the quotient, the product and the
    fused addcdiv: 3, σ·Δ's product: 1, the corrections' own: 1) and one of θ − U. Returns the largest relative
    difference between the peer's step and the reference's, which is the constants' term."""
    c = CONSTANTS["bnb" if name.startswith("bnb") else "torchao"]
    g = g.astype(np.float64)
    update = c["lr"] * (c["w1"] * g / c["c1"]) / (np.sqrt(c["w2"] * g * g / c["c2"]) + 1e-8)
    expected = theta0.astype(np.float64) - update
    bound = 14 * U * np.abs(update) + U * np.abs(expected)
    err = np.abs(theta.astype(np.float64) - expected)
    worst = int(np.argmax(err - bound))
    assert (err <= bound).all(), (f"{name}: θ element {worst}: peer {_hex(theta[worst])}, derived "
                                  f"{_hex(expected[worst])}, bound {_hex(bound[worst])}")


def _against_reference(theta, theta_ref, theta0):
    step_ref = theta_ref - theta0
    live = step_ref != 0
    rel = np.abs((theta.astype(np.float64) - theta0) - step_ref)[live] / np.abs(step_ref[live])
    return float(rel.max()), float(np.sqrt((rel ** 2).mean()))


@pytest.mark.parametrize("name", ["bnb-adam8bit", "bnb-adamw8bit"])
def test_bitsandbytes_cpu_stores_a_tiny_v_at_its_lookup_tables_code_never_at_zero(name):
    peer("bitsandbytes")
    s = _stream([1e-4])
    out = P.run(name, s)
    row = out["tensors"][0]
    ref = P.reference_for(s)
    params, opt = out["params"], out["optimizer"]
    st = opt.state[params[0]]
    assert st["state2"].dtype == torch.uint8 and row["kind"] == "8-bit"
    x = _ratios(ref["v_ref"], 256)
    expected = _lut_code(x, st["qmap2"])
    got = st["state2"].reshape(-1).numpy().astype(int)
    bad = np.nonzero(got != expected)[0]
    assert bad.size == 0, (f"v codes: element {bad[0]} x = {_hex(x[bad[0]])}: stored {got[bad[0]]}, "
                           f"lookup table {expected[bad[0]]}")
    # v/absmax = 1e-8 and an exact 0 both land on code 7 (1.5625e-5), not on code 0: no v is stored as 0.
    assert got[1] == got[2] == 7 and float(st["qmap2"][7]) > 0
    assert row["v_zero_fraction"] == 0 and row["v_lowest_code_fraction"] == 0
    # m: every code is the table's; an exact 0 (element 2) and m/absmax = -1e-8 (element 4: -1e-8 + 1 rounds
    # to 1 in float32) are both stored at the signed map's code nearest 1/65535, a positive value: the second is
    # a sign flip.
    m_ref = ref["m_ref"]
    mx = _ratios(np.abs(m_ref), 256) * np.sign(m_ref)
    m_codes = st["state1"].reshape(-1).numpy().astype(int)
    m_expected = _lut_code(mx, st["qmap1"])
    bad = np.nonzero(m_codes != m_expected)[0]
    assert bad.size == 0, (f"m codes: element {bad[0]} x = {_hex(mx[bad[0]])}: stored {m_codes[bad[0]]}, "
                           f"lookup table {m_expected[bad[0]]}")
    assert m_codes[2] == m_codes[4] and float(st["qmap1"][m_codes[4]]) > 0 > m_ref[4]
    assert row["m_sign_flip_fraction"] >= (SIZE // PERIOD) / SIZE
    _check_first_step(name, out["theta"], s["params"], s["events"][0]["grad"])
    print(name, "first step against the reference, relative: max %.3g, RMS %.3g" %
          _against_reference(out["theta"], ref["theta_ref"], s["params"]))


def test_torchao_8bit_stores_a_tiny_v_as_zero_and_its_next_step_explodes():
    peer("torchao.optim")
    one = P.run("torchao-adamw8bit", _stream([1e-4]))
    row = one["tensors"][0]
    ref = P.reference_for(_stream([1e-4]))
    # quantize_8bit_with_qmap: the nearest code, a midpoint going up; v/absmax = 1e-8, 0 and 1e-16 lie below
    # half of 3.25e-7, so three elements per 128 are stored as 0.
    assert row["kind"] == "8-bit" and row["v_zero_fraction"] == 3 / PERIOD
    _check_first_step("torchao-adamw8bit", one["theta"], _stream([1e-4])["params"], _stream([1e-4])["events"][0]["grad"])
    m1 = P.peer_state(one["optimizer"], one["params"][0])["m"].astype(np.float64)

    s = _stream([1e-4, 1e-6])
    two = P.run("torchao-adamw8bit", s)
    c, g, eps = CONSTANTS["torchao"], 1e-6, 1e-8
    # Element 1's second step from its decoded m and a v stored as 0 (torchao/optim/adam.py single_param_adam,
    # its float32 corrections at step 2).
    m2 = (1 - c["w1"]) * m1[1] + c["w1"] * g
    v2 = c["w2"] * g * g
    bc1, bc2 = _f32(1 - np.float32(0.9) ** 2), _f32(1 - np.float32(0.999) ** 2)
    derived = c["lr"] * (m2 / bc1) / (np.sqrt(v2) / np.sqrt(bc2) + eps) / c["lr"]
    row2 = two["tensors"][0]
    moved = abs(float(two["theta"][1]) - float(one["theta"][1])) / c["lr"]
    assert derived > 5 and abs(moved - derived) <= 32 * U * derived + U * abs(float(one["theta"][1])) / c["lr"], \
        f"step of element 1: {_hex(moved)} lr, derived {_hex(derived)} lr"
    # Exactly the element of each period whose v was stored as 0 under a nonzero m steps past 5·lr.
    assert row2["step_over_5lr_fraction"] == (SIZE // PERIOD) / (2 * SIZE)
    assert row2["max_step_over_lr"] >= derived * (1 - 32 * U)


@pytest.mark.parametrize("name", ["bnb-adam8bit", "torchao-adamw4bit"])
def test_maps_without_a_zero_for_a_tiny_v_keep_its_next_step_small(name):
    peer("bitsandbytes" if name.startswith("bnb") else "torchao.optim")
    out = P.run(name, _stream([1e-4, 1e-6]))
    row = out["tensors"][0]
    assert row["v_zero_fraction"] == 0 and row["step_over_5lr_fraction"] == 0 and row["max_step_over_lr"] < 5
    if name == "torchao-adamw4bit":
        # linspace(0, 1, 17)[1:] with its midpoint rule: v/absmax below 3/32 lands on 1/16, the lowest code;
        # per 128: 1e-6 (twice), 0.1, 1e-8 and 0.03 all lie below 3/32 of the block's absmax, the 1 does not.
        assert row["kind"] == "4-bit" and row["v_lowest_code_fraction"] == (PERIOD - 1) / PERIOD


def test_min_8bit_size_and_block_boundaries_are_the_same_in_bitsandbytes_and_in_cgads_bnb_semantics():
    bnb = peer("bitsandbytes")
    from cgad.torch import Adam
    for size, kind in ((SIZE - 1, torch.float32), (SIZE, torch.uint8), (SIZE + 4, torch.uint8)):
        # Each 256-block's largest |g| is its index + 1 (the tail block of 4100 holds 4 elements), so each
        # block's absmax of v, (1 − β2)·(index + 1)², tells which elements the block holds.
        g = torch.zeros(size)
        g[::256] = torch.arange(1, (size + 255) // 256 + 1, dtype=torch.float32)[: g[::256].numel()]
        p, q = torch.nn.Parameter(torch.zeros(size)), torch.nn.Parameter(torch.zeros(size))
        a = bnb.optim.Adam8bit([p], lr=1e-3)
        b = Adam([q], lr=1e-3, state="q8", q8_semantics="bnb")
        p.grad, q.grad = g.clone(), g.clone()
        a.step()
        b.step()
        assert a.state[p]["state2"].dtype == kind and b.state[q]["state2"].dtype == kind, size
        if kind == torch.uint8:
            x, y = a.state[p]["absmax2"].double(), b.state[q]["absmax2"].double()
            assert x.numel() == y.numel() == (size + 255) // 256
            expected = (1 - 0.999) * torch.arange(1, x.numel() + 1, dtype=torch.float64) ** 2
            # Against (1 − β2)·(index + 1)² in double: each side's weight, 1 − fl32(0.999) (cgad) or fl32(1 − 0.999)
            # (bitsandbytes), differs from 0.001 by this much relative, plus the 3 roundings.
            weights = abs(1 - _f32(0.999) - 0.001) / 0.001, abs(_f32(1 - 0.999) - 0.001) / 0.001
            for got, w, who in ((x, weights[1], "bitsandbytes"), (y, weights[0], "cgad")):
                rel = ((got - expected).abs() / expected)
                worst = int(rel.argmax())
                assert rel.max().item() <= 3 * U + w, (f"{size}, {who}: block {worst} absmax {_hex(got[worst])}, "
                                                       f"expected {_hex(expected[worst])}")
