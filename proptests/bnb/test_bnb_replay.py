"""cgad replay --q8-semantics bnb against the independent NumPy emulation in bnb_adam8bit.py, bit for bit.

Run: /usr/bin/python3 -m pytest -q proptests/bnb   (CGAD_BINARY names the cgad binary; tests that need it skip,
with the reason, only when that file does not exist; a cgad that refuses the flags fails them.)
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bnb_adam8bit as bnb  # noqa: E402

F32 = np.float32
DEFAULT_CGAD = HERE.parents[1] / "build" / "apps" / "cgad" / "cgad"
CGAD = os.environ.get("CGAD_BINARY", str(DEFAULT_CGAD))
MIN_Q8 = 4096


def need_cgad():
    if not os.path.isfile(CGAD):
        pytest.skip(f"cgad binary not found at {CGAD} (set CGAD_BINARY to run the bnb replay comparison)")


def fmt(x) -> str:
    """Exact decimal of a float32 value (the shortest repr of the same double; reads back exactly)."""
    return repr(float(x))


def hexf(x) -> str:
    return float(x).hex()


# ----------------------------------------------------------------------------------------------------------
# streams
# ----------------------------------------------------------------------------------------------------------

def wide(rng, n, lo=1e-5, hi=1.0, zero_frac=0.05):
    """Log-uniform magnitudes over [lo, hi], zero_frac exact zeros, random signs (so both +0 and -0)."""
    mag = np.exp(rng.uniform(math.log(lo), math.log(hi), n))
    mag[rng.random(n) < zero_frac] = 0.0
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (sign * mag).astype(np.float32)


MAIN_SIZES = [5000, 300, 4096, 4095, 257, 1, 4097]
MAIN_TAUS = [0, 1, 2, 4, 8, 16]


def main_stream(dtype, seed=20240611, events=25):
    rng = np.random.default_rng(seed)
    n = sum(MAIN_SIZES)
    p0 = wide(rng, n, 1e-3, 2.0, 0.02)
    p0 = bnb.to_param_dtype(p0, dtype)
    evs = [(wide(rng, n), int(rng.choice(MAIN_TAUS))) for _ in range(events)]
    return p0, list(MAIN_SIZES), evs


def write_stream(path, p0, sizes, events):
    with open(path, "w") as f:
        f.write(json.dumps({"params": [fmt(x) for x in p0], "tensors": sizes}) + "\n")
        for delta, tau in events:
            f.write(json.dumps({"grad": [fmt(x) for x in delta], "tau": tau}) + "\n")


def run_cgad(tmp_path, name, p0, sizes, events, dtype, wd):
    need_cgad()
    sin, sout = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.out.jsonl"
    write_stream(sin, p0, sizes, events)
    cmd = [CGAD, "replay", "--backend", "fastpath", "--state", "q8", "--q8-semantics", "bnb",
           "--min-q8-size", str(MIN_Q8), "--params", dtype]
    if wd:
        cmd += ["--weight-decay", str(wd)]
    cmd += ["--input", str(sin), "--output", str(sout)]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - t0
    assert r.returncode == 0, (f"cgad refused or failed (rc {r.returncode}): {' '.join(cmd)}\n"
                               f"stderr:\n{r.stderr[-4000:]}")
    recs = [json.loads(line) for line in sout.read_text().splitlines() if line.strip()]
    assert len(recs) == len(events), f"cgad wrote {len(recs)} records for {len(events)} events"
    return recs, took


def floats(strings):
    return np.array([F32(float(s)) for s in strings], dtype=np.float32)


def decimal_to_bf16(text):
    """The bf16 nearest the exact decimal (ties to even), as float32: cgad prints a bf16 parameter as the
    shortest decimal that parses back to it at bf16 precision, which float32 parsing would not recover."""
    text = text.strip()
    if text.lower().lstrip("+-") in ("inf", "infinity", "nan"):
        return bnb.round_to_bf16(np.array([float(text)], np.float32))[0]
    q = Fraction(text)
    if q == 0:
        return F32(-0.0) if text.startswith("-") else F32(0.0)
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    quantum = Fraction(2) ** (max(e, -126) - 7)   # 8 significant bits; bf16 subnormals below 2^-126
    m = a / quantum
    k = math.floor(m)
    rem = m - k
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and k % 2 == 1):
        k += 1
    v = float(k * quantum)
    if v > float(bnb.round_to_bf16(np.array([3.3895313892515355e38], np.float32))[0]):
        v = math.inf
    out = F32(-v if q < 0 else v)
    assert bnb.round_to_bf16(np.array([out], np.float32))[0] == out or not np.isfinite(out)
    return out


def decimals_to_bf16(strings):
    """decimal_to_bf16 for many strings, fast: the double nearest the decimal, rounded to bf16, is the bf16
    nearest the decimal unless that double is exactly a bf16 midpoint (double rounding is monotone and a bf16
    midpoint is a double), or outside bf16's normal range; those go through the exact path."""
    d = np.array([float(x) for x in strings], dtype=np.float64)
    bits = d.view(np.uint64)
    low = bits & np.uint64((1 << 45) - 1)
    lsb = (bits >> np.uint64(45)) & np.uint64(1)
    up = (low > np.uint64(1 << 44)) | ((low == np.uint64(1 << 44)) & (lsb == np.uint64(1)))
    r = ((bits & ~np.uint64((1 << 45) - 1)) + np.where(up, np.uint64(1 << 45), np.uint64(0))).view(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        out = r.astype(np.float32)
        exact = (low == np.uint64(1 << 44)) | ~np.isfinite(d) | ((np.abs(d) < 2.0 ** -126) & (d != 0)) | \
            (np.abs(r) > 3.3895313892515355e38)
    for i in np.nonzero(exact)[0]:
        out[i] = decimal_to_bf16(strings[i])
    return out


def param_floats(strings, dtype):
    if dtype == "bf16":
        return decimals_to_bf16(strings)
    return floats(strings)


def ulp_distance(a, b):
    """Distance in float32 ulps between two finite float32 of the same sign."""
    return abs(int(np.asarray(a, np.float32).view(np.int32)) - int(np.asarray(b, np.float32).view(np.int32)))


def check_records(recs, events, n):
    """Checks the record fields; returns cgad's sigmas (float32) and the ulp distances to our own sigma."""
    sigmas, dists = [], []
    for k, (rec, (_, tau)) in enumerate(zip(recs, events)):
        assert rec["event"] == k and rec["tau"] == tau and rec["fragment"] == 0, rec.keys()
        assert rec["tau_effective"] == tau and rec["skipped"] is False
        assert rec["state"]["t"] == [k + 1], (k, rec["state"]["t"])
        assert len(rec["params"]) == n and len(rec["state"]["m"]) == n and len(rec["state"]["v"]) == n
        s = F32(float(rec["sigma"]))
        sigmas.append(s)
        dists.append(ulp_distance(s, bnb.gate_sigma(tau)))
    return sigmas, dists


def compare(recs, emu, sizes, label, dtype):
    """Bit-for-bit comparison of params, m, v; fails with the first mismatches as hexfloats."""
    offs = np.concatenate([[0], np.cumsum(sizes)])
    bad, counts = [], {"params": 0, "m": 0, "v": 0}
    for k, (rec, e) in enumerate(zip(recs, emu)):
        got = {"params": param_floats(rec["params"], dtype), "m": floats(rec["state"]["m"]), "v": floats(rec["state"]["v"])}
        for field in ("params", "m", "v"):
            g, w = got[field], e[field]
            idx = np.nonzero(g.view(np.uint32) != w.view(np.uint32))[0]
            counts[field] += idx.size
            for i in idx[: max(0, 12 - len(bad))]:
                tnr = int(np.searchsorted(offs, i, side="right") - 1)
                bad.append(f"  event {k} tensor {tnr} (size {sizes[tnr]}{', q8' if sizes[tnr] >= MIN_Q8 else ''})"
                           f" index {i - offs[tnr]} {field}: cgad {hexf(g[i])} emulator {hexf(w[i])}")
    if bad:
        pytest.fail(f"{label}: mismatching bits: {counts}\n" + "\n".join(bad))


def compare_with_cgad(tmp_path, name, p0, sizes, events, dtype, label, wd=0.0):
    """Runs cgad on the stream, checks its records, reruns the emulator with cgad's sigmas, compares bits."""
    recs, _ = run_cgad(tmp_path, name, p0, sizes, events, dtype, wd)
    sigmas, dists = check_records(recs, events, len(p0))
    assert max(dists) == 0, f"cgad's sigma is {max(dists)} float32 ulps from the correctly rounded gate"
    emu = bnb.run_stream(p0, sizes, events, min_8bit_size=MIN_Q8, dtype=dtype, weight_decay=wd, sigmas=sigmas)
    compare(recs, emu, sizes, label, dtype)


# ----------------------------------------------------------------------------------------------------------
# the map and quantize_2D, without cgad
# ----------------------------------------------------------------------------------------------------------

def brute_force_violations(x, code, got):
    """Violations of the rule quantize_2D must obey, checked by an independent search.

    lo = the last code <= x, hi = lo + 1 (clamped to the map). The result must be lo or hi; with the float
    midpoint fm = (code[lo] + code[hi]) * 0.5f it must be hi when x > fm and lo when x < fm (either at x == fm);
    and, unless x lies within one float32 rounding of fm, it must be the nearer code in exact arithmetic.
    Outside the map's range the end code. NaN -> 0.
    """
    x = np.asarray(x, np.float32)
    got = np.asarray(got).astype(np.int64)
    bad = np.zeros(x.shape, bool)
    nan = np.isnan(x)
    bad |= nan & (got != 0)
    xf = np.where(nan, F32(0), x)
    lo = np.clip(np.searchsorted(code, xf, side="right") - 1, 0, 255)
    hi = np.clip(lo + 1, 0, 255)
    below = xf < code[0]
    lo = np.where(below, 0, lo)
    hi = np.where(below, 0, hi)
    fm = (code[lo] + code[hi]) * F32(0.5)
    ok_set = (got == lo) | (got == hi)
    bad |= ~nan & ~ok_set
    bad |= ~nan & (xf > fm) & (hi != lo) & (got != hi)
    bad |= ~nan & (xf < fm) & (hi != lo) & (got != lo)
    d_lo = np.abs(xf.astype(np.float64) - code[lo].astype(np.float64))
    d_hi = np.abs(xf.astype(np.float64) - code[hi].astype(np.float64))
    near_mid = np.abs(xf.astype(np.float64) - fm.astype(np.float64)) <= np.spacing(np.abs(fm)).astype(np.float64)
    nearer = np.where(d_hi < d_lo, hi, lo)
    bad |= ~nan & ~near_mid & (d_hi != d_lo) & (got != nearer)
    return int(bad.sum())


def quantize_sample(signed, rng):
    code = bnb.SIGNED_MAP if signed else bnb.UNSIGNED_MAP
    lo = -1.0 if signed else 0.0
    parts = [code, rng.uniform(lo, 1.0, 400_000).astype(np.float32)]
    mag = np.exp(rng.uniform(math.log(1e-12), 0.0, 400_000)).astype(np.float32)
    parts.append(mag * (np.where(rng.random(mag.size) < 0.5, -1, 1).astype(np.float32) if signed else F32(1)))
    mids = (code[:-1] + code[1:]) * F32(0.5)
    # every float32 within 40 ulps of every float midpoint and of every code: where decisions are made
    for centre in (mids, code):
        bits = centre.view(np.int32).astype(np.int64)
        for d in range(-40, 41):
            parts.append((bits + d).astype(np.int32).view(np.float32))
    parts.append(np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 2.0, -2.0], np.float32))
    x = np.concatenate(parts).astype(np.float32)
    if not signed:
        x = x[~(x < 0)]
    return x, code


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_quantize_2d_against_brute_force(signed):
    rng = np.random.default_rng(7 if signed else 8)
    x, code = quantize_sample(signed, rng)
    got = bnb.quantize_2d(x, code, signed)
    assert brute_force_violations(x, code, got) == 0
    # the checker has teeth: an off-by-one result fails it
    assert brute_force_violations(x, code, np.minimum(got.astype(np.int64) + 1, 255)) > 1000
    # every code maps to itself, and the decisions of quantize_2D at signed/unsigned zero, +-inf, NaN
    assert np.array_equal(bnb.quantize_2d(code, code, signed), np.arange(256))
    special = bnb.quantize_2d(np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32), code, signed)
    assert special.tolist() == ([127, 127, 255, 0, 0] if signed else [0, 0, 255, 0, 0])


def test_quantize_2d_ties_go_to_the_pivot():
    """At x exactly on a float midpoint quantize_2D returns the search's last pivot. The pivot after the seven
    steps is 127 +- 64 +- ... +- 2 +- 1, always even, and it is lo or lo + 1 of the bracketing pair, so the
    tie goes to the even index of the pair (an exact-nearest or ties-to-lower encoder would differ)."""
    code = bnb.SIGNED_MAP
    mids = (code[:-1] + code[1:]) * F32(0.5)
    got = bnb.quantize_2d(mids, code, True).astype(int)
    lo = np.arange(255)
    pivot = np.where(lo % 2 == 0, lo, lo + 1)
    exact_tie = (mids != code[lo]) & (mids != code[lo + 1])
    assert np.array_equal(got[exact_tie], pivot[exact_tie])


def test_pow_convention_is_correctly_rounded():
    """beta^t through double pow rounded to float32 equals the correctly rounded float32 for these betas."""
    for beta in (0.9, 0.999):
        for t in range(1, 2001):
            assert bnb.pow_f32(beta, t) == bnb.pow_f32_correct(beta, t), (beta, t)


def test_gate_sigma_is_the_float_nearest_the_exact_sigma():
    """The emulator's sigma is the float32 nearest its 256-bit value, which no tau puts within 2^-60 (relative) of a
    float32 midpoint, so the rounding is that of the true sigma; and a float32 alpha (0.2f = 0.2000000030) moves it
    (by tau*3e-9 relative, up to 1.6 ulps) at 17 of the 31 delays, among them 16, 24 and 31, which the multi-tensor
    test below replays."""
    moved = []
    for tau in range(0, 33):
        q = bnb.gate_sigma_exact(tau)
        s = bnb.gate_sigma(tau)
        if q in (0, 1):
            assert Fraction(float(s)) == q
            continue
        lo, hi = np.nextafter(s, F32(0)), np.nextafter(s, F32(np.inf))
        below, above = (Fraction(float(lo)) + Fraction(float(s))) / 2, (Fraction(float(s)) + Fraction(float(hi))) / 2
        assert below < q * (1 - Fraction(1, 2**60)) and q * (1 + Fraction(1, 2**60)) < above, (tau, hexf(s))
        if bnb.gate_sigma(tau, alpha=repr(float(F32(0.2)))) != s:
            moved.append(tau)
    assert {16, 24, 31} <= set(moved) and len(moved) == 17, moved


def test_torch_linspace_variants_differ_from_cgads_map():
    """Documents a fact, not a cgad property: torch's CPU linspace is vectorized (and fma-contracted in its
    AVX2/AVX512 kernels), so the map a bitsandbytes install builds is not the element-by-element one. The
    counts are what torch 1.13.1 (Debian, x86-64) gave with ATEN_CPU_CAPABILITY=default/avx2/avx512, each
    reproduced exactly by bnb_adam8bit.linspace_f32's models."""
    expected = {"torch-default": (42, 47), "torch-avx2": (44, 46), "torch-avx512": (32, 35)}
    for mode, (n_signed, n_unsigned) in expected.items():
        for signed, count in ((True, n_signed), (False, n_unsigned)):
            ours = bnb.SIGNED_MAP if signed else bnb.UNSIGNED_MAP
            other = bnb.create_dynamic_map(signed, linspace=mode)
            assert int(np.sum(other.view(np.uint32) != ours.view(np.uint32))) == count, (mode, signed)


# ----------------------------------------------------------------------------------------------------------
# cgad
# ----------------------------------------------------------------------------------------------------------

def test_codebook_matches_cgad():
    need_cgad()
    r = subprocess.run([CGAD, "codebook", "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["block_size"] == 256
    for key, ours in (("signed", bnb.SIGNED_MAP), ("unsigned", bnb.UNSIGNED_MAP)):
        codes = floats(d[key]["codes"])
        assert np.array_equal(codes.view(np.uint32), ours.view(np.uint32)), key
        if "hex" in d[key]:
            hx = np.array([F32(float.fromhex(h)) for h in d[key]["hex"]], np.float32)
            assert np.array_equal(hx.view(np.uint32), ours.view(np.uint32)), key


_MAIN_CACHE = {}


def main_run(tmp_path_factory, dtype, wd):
    key = (dtype, wd)
    if key not in _MAIN_CACHE:
        p0, sizes, events = main_stream(dtype)
        tmp = tmp_path_factory.mktemp(f"bnb_{dtype}_{wd}")
        recs, took = run_cgad(tmp, "main", p0, sizes, events, dtype, wd)
        sigmas, dists = check_records(recs, events, len(p0))
        t0 = time.monotonic()
        emu = bnb.run_stream(p0, sizes, events, min_8bit_size=MIN_Q8, dtype=dtype, weight_decay=wd,
                             sigmas=sigmas)
        _MAIN_CACHE[key] = (p0, sizes, events, recs, emu, dists, took, time.monotonic() - t0)
    return _MAIN_CACHE[key]


SIGMA_TAUS = [16, 24, 31]


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_multi_tensor_stream_at_taus_16_24_31_equals_bnb_fed_the_correctly_rounded_sigma(tmp_path, dtype):
    """cgad replay --q8-semantics bnb on the main stream's tensors (q8 ones and ones under min_8bit_size) at
    tau in {16, 24, 31}, against the emulator fed its own correctly rounded sigma (gate_sigma: the decimal alpha 0.2
    at 256 bits, not cgad's reported sigma), bit for bit in params, m and v. A float32 alpha put cgad's sigma one
    ulp off at each of these delays, and thousands of elements apart."""
    rng = np.random.default_rng(20261202)
    sizes = list(MAIN_SIZES)
    n = sum(sizes)
    p0 = bnb.to_param_dtype(wide(rng, n, 1e-3, 2.0, 0.02), dtype)
    events = [(wide(rng, n), SIGMA_TAUS[k % len(SIGMA_TAUS)]) for k in range(12)]
    recs, _ = run_cgad(tmp_path, "sigma_taus", p0, sizes, events, dtype, 0.0)
    sigmas, dists = check_records(recs, events, n)
    emu = bnb.run_stream(p0, sizes, events, min_8bit_size=MIN_Q8, dtype=dtype)
    off = [f"tau {tau}: cgad {hexf(s)} correctly rounded {hexf(e['sigma'])}"
           for (_, tau), s, e in zip(events, sigmas, emu) if s.view(np.uint32) != e["sigma"].view(np.uint32)]
    compare(recs, emu, sizes, f"taus 16/24/31 {dtype}" + ("; sigma " + ", ".join(sorted(set(off))) if off else ""),
            dtype)
    assert not off, off
    assert max(dists) == 0


@pytest.mark.parametrize("wd", [0.0, 0.01], ids=["wd0", "wd0.01"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_main_stream_bit_for_bit(tmp_path_factory, dtype, wd):
    p0, sizes, events, recs, emu, dists, took, emu_took = main_run(tmp_path_factory, dtype, wd)
    exact = sum(d == 0 for d in dists)
    print(f"\n[{dtype} wd={wd}] {len(events)} events, {len(p0)} elements; cgad {took:.2f}s, emulator {emu_took:.2f}s;"
          f" sigma: {exact}/{len(dists)} records equal our float64 gate rounded once, max {max(dists)} ulp")
    assert max(dists) == 0, f"cgad's sigma is {max(dists)} float32 ulps from the correctly rounded gate"
    compare(recs, emu, sizes, f"main stream {dtype} wd={wd}", dtype)


def test_main_stream_reaches_v_zero_code(tmp_path_factory):
    """The wide-range stream drives many v codes to the unsigned map's zero (code 0), most under a nonzero m
    code; with no guard those elements then take steps far larger than lr (bnb's 8-bit pathology)."""
    p0, sizes, events, recs, emu, *_ = main_run(tmp_path_factory, "fp32", 0.0)
    frac, frac_m = [], []
    for e in emu:
        q8 = [st for st in e["tensors"] if st["q8"]]
        tot = sum(st["c2"].size for st in q8)
        frac.append(sum(int(np.sum(st["c2"] == 0)) for st in q8) / tot)
        frac_m.append(sum(int(np.sum((st["c2"] == 0) & (st["c1"] != 127))) for st in q8) / tot)
    jumps = [float(np.max(np.abs(emu[k]["params"] - emu[k - 1]["params"]))) for k in range(1, len(emu))]
    print("\nq8 elements with v code 0, per event: " + " ".join(f"{f:.2%}" for f in frac))
    print(f"  of them with m code != the zero code: first event {frac_m[0]:.2%}; largest |dp| in one step"
          f" {max(jumps):.3g} (lr = 1e-3)")
    assert frac[0] > 0.05 and frac_m[0] > 0.05
    assert max(jumps) > 0.1
    # cgad reports exactly zero v there (the bitwise test checks every value; this names the property)
    first = floats(recs[0]["state"]["v"])
    assert np.all(first[emu[0]["v"] == 0] == 0) and np.sum(emu[0]["v"] == 0) > 0


# ----------------------------------------------------------------------------------------------------------
# crafted streams: each reaches one corner of the kernel the random stream reaches rarely or never
# ----------------------------------------------------------------------------------------------------------

def vzero_stream(dtype):
    """Per block one element of g = 1 and 255 of |g| = 1e-4: their v (1e-11 against an absmax of 1e-3)
    quantizes to code 0 while their m keeps a nonzero code; the next event gives them g = 0."""
    rng = np.random.default_rng(11)
    n = 4096 + 100
    p0 = bnb.to_param_dtype(wide(rng, n, 1e-2, 1.0, 0.0), dtype)
    g0 = (F32(1e-4) * np.where(rng.random(n) < 0.5, -1, 1)).astype(np.float32)
    g0[::256] = 1.0
    g1 = np.zeros(n, np.float32)
    g1[::256] = -1.0
    return p0, [n], [(g0, 0), (g1, 0), (wide(rng, n), 1), (g1, 2)]


def _cancelling_gradient(target, beta1):
    """A float32 g with float32((1 - beta1) * g) == target exactly, if one exists near target / (1 - beta1)."""
    one_m = F32(1) - F32(beta1)
    bits = np.asarray(F32(target / one_m)).view(np.int32)
    for d in range(0, 200):
        for s in (d, -d):
            c = np.int32(bits + s).view(np.float32)
            if one_m * c == target:
                return F32(c)
    return None


PAD_E0, PAD_E1 = 4096, 4097


def padding_stream(dtype):
    """A partial last block with 2 valid lanes: at event 1 lane e0's m cancels to exactly 0 and lane e1's is
    tiny (1e-12), so the padded lanes (m code 128, the smallest positive code, times the old absmax, times
    beta1) are the block's new absmax."""
    rng = np.random.default_rng(12)
    n = 4096 + 2
    p0 = bnb.to_param_dtype(wide(rng, n, 1e-2, 1.0, 0.0), dtype)
    beta1 = F32(0.9)
    for g_e0 in (1.0, 0.75, 0.5, 1.25, 0.3, 2.0, 0.6, 0.9):
        d0 = wide(rng, n)
        d0[PAD_E0], d0[PAD_E1] = g_e0, 1e-9
        st = bnb.run_stream(p0, [n], [(d0, 0)], min_8bit_size=MIN_Q8, dtype=dtype)[0]["tensors"][0]
        a_old = st["a1"][-1]
        g_cancel = _cancelling_gradient(-((bnb.SIGNED_MAP[st["c1"][PAD_E0]] * a_old) * beta1), beta1)
        if g_cancel is not None and st["c1"][PAD_E1] == 127:
            break
    else:
        raise AssertionError("no exactly cancelling gradient found")
    d1 = wide(rng, n)
    d1[PAD_E0], d1[PAD_E1] = g_cancel, 1e-11
    pad_absmax = np.abs((bnb.SIGNED_MAP[128] * a_old) * beta1)
    return p0, [n], [(d0, 0), (d1, 0), (wide(rng, n), 1), (wide(rng, n), 0)], pad_absmax


def zero_absmax_stream(dtype):
    """Blocks whose gradients are all +-0 at a step where their absmax is 0, and -0 gradients in a block
    with a nonzero absmax."""
    rng = np.random.default_rng(13)
    n = 4096 + 300
    p0 = bnb.to_param_dtype(wide(rng, n, 1e-2, 1.0, 0.0), dtype)
    d0 = wide(rng, n)
    d0[:256] = 0.0
    d0[:256:2] = -0.0
    d0[300:310] = -0.0   # in a block with a nonzero absmax
    d0[4096:] = 0.0      # the partial last block (44 valid lanes) all +-0 as well
    d0[4096::3] = -0.0
    return p0, [n], [(d0, 0), (wide(rng, n), 2), (d0, 0), (wide(rng, n), 4)]


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_v_zero_code_no_guard(tmp_path, dtype):
    """bnb has no guard: a v that quantized to code 0 under a nonzero m, hit by a zero gradient, gives
    s2 = 0 and a step of step_size*s1/(correction2*eps) -- cgad's bnb semantics must reproduce it exactly."""
    p0, sizes, events = vzero_stream(dtype)
    n = sizes[0]
    emu = bnb.run_stream(p0, sizes, events, min_8bit_size=MIN_Q8, dtype=dtype)
    st = emu[0]["tensors"][0]
    small = np.ones(n, bool)
    small[::256] = False
    assert np.all(st["c2"][small] == 0) and np.all(st["c1"][small] != 127)
    jump = np.abs(emu[1]["params"] - emu[0]["params"])[small]
    assert np.min(jump) > 0.5, "the no-guard step should be huge (|dp| ~ lr * s1 / (c1 * eps))"
    compare_with_cgad(tmp_path, "vzero", p0, sizes, events, dtype, f"v-zero no-guard {dtype}")


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_padding_takes_part_in_absmax(tmp_path, dtype):
    """The padded lanes of a partial block take part in its absmax: ignoring them would change the stored m
    of the tiny lane (checked here against a deliberately wrong emulator variant)."""
    p0, sizes, events, pad_absmax = padding_stream(dtype)
    emu = bnb.run_stream(p0, sizes, events, min_8bit_size=MIN_Q8, dtype=dtype)
    wrong = bnb.run_stream(p0, sizes, events, min_8bit_size=MIN_Q8, dtype=dtype, _padding_in_absmax=False)
    assert emu[1]["tensors"][0]["a1"][-1] == pad_absmax, "the padded lanes should set this block's absmax"
    assert emu[1]["tensors"][0]["c1"][PAD_E0] == 127
    assert emu[1]["m"][PAD_E1] != wrong[1]["m"][PAD_E1], "the test must tell padding-in-absmax from ignored"
    compare_with_cgad(tmp_path, "padding", p0, sizes, events, dtype, f"padding {dtype}")


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_zero_absmax_nan_codes_and_sign_fix(tmp_path, dtype):
    """absmax 0: s/absmax = 0/0 = NaN -> code 0 (-0.99296874); m's sign fix then moves +0 moments to code 255
    (dequantized +0) and leaves -0 ones at code 0 (dequantized -0). A -0 gradient in a block with a nonzero
    absmax gives s1 = -0 -> the zero code 127 -> sign fix -> code 126: a nonzero (negative) m from g = -0."""
    p0, sizes, events = zero_absmax_stream(dtype)
    emu = bnb.run_stream(p0, sizes, events, min_8bit_size=MIN_Q8, dtype=dtype)
    st = emu[0]["tensors"][0]
    assert st["a1"][0] == 0 and st["c1"][1] == 255 and st["c1"][0] == 0
    assert np.signbit(emu[0]["m"][0]) and not np.signbit(emu[0]["m"][1])
    assert np.all(st["c1"][300:310] == 126) and np.all(emu[0]["m"][300:310] < 0)
    compare_with_cgad(tmp_path, "zeroabsmax", p0, sizes, events, dtype, f"zero absmax {dtype}")
