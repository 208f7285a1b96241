"""Independent NumPy emulation of bitsandbytes' Adam kernels, as cgad's "bnb" q8 semantics define them.

What this follows (bitsandbytes release 0.50.1; the arithmetic is transcribed by hand, no code copied):
  csrc/kernels.cu
    quantize_2D<SIGNED>                       binary search over the 256-entry map, float midpoints
    kOptimizerStatic8bit2StateBlockwise<ADAM> 8-bit blockwise Adam (BLOCK_SIZE 256, one element per thread,
                                              csrc/ops.cu BLOCKSIZE_2STATE / NUM_2STATE)
    kOptimizer32bit2State<ADAM>               32-bit Adam for tensors under min_8bit_size
  bitsandbytes/functional.py  create_dynamic_map(signed, max_exponent_bits=7, total_bits=8)
  bitsandbytes/optim/optimizer.py  Optimizer2State.init_state / update_step: state codes start as uint8 zeros,
                                   absmax as fp32 zeros, block size 256, p.numel() < min_8bit_size -> fp32 state
                                   (zeros); every tensor keeps its own step count, +1 before each update.

bitsandbytes' own behaviour reproduced literally (not cgad choices):
  * order of operations of both kernels, e.g. s2 = s2*beta2 + ((1-beta2)*g)*g in the 8-bit kernel but
    s2 = s2*beta2 + (1-beta2)*(g*g) in the 32-bit one; step_size = (-lr*correction2)/correction1;
    p + step_size*(s1/(sqrt(s2) + correction2*eps)); post-step decay p*(1 - lr*wd) only if wd > 0, each
    result stored to the parameter dtype (two roundings for bf16 when wd > 0);
  * the parameter update uses the unquantized new moments; the codes are written afterwards;
  * partial last block padded as cub's BlockLoad pads it: g = +0, m code 128, v code 0, p = 0; padded lanes go
    through the same update and take part in the block's new absmax (fmaxf from -FLT_MAX); only valid lanes are
    stored;
  * quantize_2D's decisions exactly (pivot 127, steps 64..1, quadrants = codes 63/127/191, midpoints
    (upper+val)*0.5f, a tie goes to the pivot), NaN -> code 0, +-0 -> the zero code;
  * m's sign fix: if signbit(code1[c1]) != signbit(s1): c1 += 1 if s1 > 0 else c1 -= 1, in uint8 (wraps);
  * the non-finite-gradient branch of the 8-bit kernel (s1 = s2 = 0, parameter untouched) is transcribed in
    the block step, though cgad never reaches it (see below).

cgad's conventions (where bnb's GPU build does something else, cgad does the IEEE thing):
  * every operation in binary32 with one rounding, no contraction into fma. bitsandbytes 0.50.1 is built
    with nvcc --use_fast_math (CMakeLists.txt line 190), i.e. --fmad=true, --ftz=true, --prec-div=false,
    --prec-sqrt=false: the real kernels may fuse a*b+c, flush subnormals and use approximate '/' and sqrtf.
    cgad (and this emulator) use IEEE '/', IEEE sqrt, no fma, subnormals kept;
  * __fdividef (8-bit kernel) is IEEE division here: x/0 = +-inf, 0/0 = NaN (then quantize_2D's NaN rule);
  * beta^t: pow of the float32 beta widened to double, rounded to float32 once (bnb: __powf in the 8-bit
    kernel, powf in the 32-bit one); 1 - x and sqrt in float32;
  * the gradient is g = sigma*delta in float32 even for bf16 parameters (bnb holds g in the parameter dtype);
  * sigma(tau) = gamma(tau)*exp(-alpha*tau), gamma = sin^2(pi*(tau_cut - tau)/(2*tau_cut)) for
    tau <= tau_cut, 0 beyond (CGAD's gate; bnb has none), the float32 nearest its exact value for the decimal
    alpha (gate_sigma); one step count t for all tensors (one fragment);
  * an event whose gradient is non-finite, or whose g*g overflows, is skipped whole (cgad's contract),
    so bnb's per-element non-finite branch is never reached from run_stream;
  * hyperparameters are the float32 nearest the decimal (bnb passes ctypes c_float, the same);
  * bf16 stores are round-to-nearest-even from float32;
  * the maps are create_dynamic_map with torch.linspace evaluated ELEMENT BY ELEMENT in float32
    (step = (end-start)/(n-1); idx < n//2: start + step*idx, else end - step*(n-1-idx)), the means
    (a+b)/2 in float32, times float32(10**(i-6)). A real torch does not do that for n >= 16: its CPU kernel
    writes 2*W lanes at a time from one base (W = 8 for the default and AVX2 kernels, 16 for AVX512) and the
    AVX2/AVX512 builds contract the base into an fma, so the map a bitsandbytes install builds depends on the
    torch build and the CPU. `create_dynamic_map(..., linspace="torch-avx2")` etc. model those (checked
    against torch 1.13.1 on x86-64 for all three kernels); cgad's codebook is the element-by-element one.
  * the dequantized moments reported (m, v) are code*absmax in float32.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np

F32 = np.float32
FLT_MAX = F32(np.finfo(np.float32).max)
BLOCK = 256
_ONE = F32(1.0)
_HALF = F32(0.5)


def _check32(*xs):
    for x in xs:
        assert np.asarray(x).dtype == np.float32, f"float64 leaked into a float32 computation: {np.asarray(x).dtype}"


# ----------------------------------------------------------------------------------------------------------
# torch.linspace(start, end, n, dtype=float32) and create_dynamic_map
# ----------------------------------------------------------------------------------------------------------

def _fma32(a, b, c):
    """Single-rounded a*b + c for float32 a, c and an integer-valued b (exact in double for these sizes)."""
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    return round_fraction_to_f32(exact)


def linspace_f32(start, end, n, mode="elementwise"):
    """torch.linspace in float32.

    mode "elementwise": every element by the scalar rule (cgad's convention).
    mode "torch-default" / "torch-avx2" / "torch-avx512": torch's vectorized CPU kernel (blocks of 2*W lanes,
    W = 8, 8, 16; a lane is base + k*step with the product and the sum rounded apart; the base and the scalar
    tail rounded once, as an fma, in the AVX2/AVX512 builds).
    """
    s, e = F32(start), F32(end)
    step = (e - s) / F32(n - 1)
    half = n // 2
    fused = mode in ("torch-avx2", "torch-avx512")

    def scalar(i):
        if i < half:
            return _fma32(step, i, s) if fused else s + step * F32(i)
        return _fma32(-step, n - 1 - i, e) if fused else e - step * F32(n - 1 - i)

    out = np.empty(n, dtype=np.float32)
    i = 0
    if mode != "elementwise":
        w = {"torch-default": 8, "torch-avx2": 8, "torch-avx512": 16}[mode]
        while i <= n - 2 * w:
            for _ in range(2):
                base = scalar(i)
                for k in range(w):
                    out[i + k] = base + F32(k) * step
                i += w
    while i < n:
        out[i] = scalar(i)
        i += 1
    _check32(out)
    return out


def create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8, linspace="elementwise"):
    non_sign_bits = total_bits - 1
    additional_items = 2 ** (non_sign_bits - max_exponent_bits) - 1
    assert additional_items == 0, "only the default (7, 8) map is emulated"
    data = []
    for i in range(max_exponent_bits):
        if signed:
            items = 2 ** (i + non_sign_bits - max_exponent_bits) + 1
        else:
            items = 2 ** (i + non_sign_bits - max_exponent_bits + 1) + 1
        b = linspace_f32(0.1, 1.0, items, linspace)
        means = (b[:-1] + b[1:]) / F32(2.0)
        scale = F32(10.0 ** (-(max_exponent_bits - 1) + i))
        _check32(means, scale * means)
        data += [float(x) for x in scale * means]
        if signed:
            data += [float(x) for x in (-scale) * means]
    data.append(0.0)
    data.append(1.0)
    assert len(data) == 2 ** total_bits
    data.sort()
    return np.array(data, dtype=np.float32)


SIGNED_MAP = create_dynamic_map(True)
UNSIGNED_MAP = create_dynamic_map(False)


# ----------------------------------------------------------------------------------------------------------
# quantize_2D<SIGNED>
# ----------------------------------------------------------------------------------------------------------

def quantize_2d(x, code, signed):
    """Element-wise quantize_2D<signed>(quadrants, code, x); x a float32 array; returns uint8 codes."""
    x = np.asarray(x, dtype=np.float32)
    code = np.asarray(code, dtype=np.float32)
    quadrants = code[[63, 127, 191]]
    shape = x.shape
    pivot = np.full(shape, 127, dtype=np.int32)
    upper_pivot = np.full(shape, 255, dtype=np.int32)
    lower_pivot = np.zeros(shape, dtype=np.int32)
    lower = np.full(shape, F32(-1.0) if signed else F32(0.0), dtype=np.float32)
    upper = np.full(shape, F32(1.0), dtype=np.float32)
    val = np.full(shape, quadrants[1], dtype=np.float32)
    local_pivot = np.ones(shape, dtype=np.int32)
    offset = 1
    i = 64
    while i > 0:
        gt = x > val  # False for NaN: NaN walks down every time
        lower_pivot = np.where(gt, pivot, lower_pivot)
        lower = np.where(gt, val, lower)
        upper_pivot = np.where(gt, upper_pivot, pivot)
        upper = np.where(gt, upper, val)
        pivot = np.where(gt, pivot + i, pivot - i)
        local_pivot = np.where(gt, local_pivot + offset, local_pivot - offset)
        if i >= 64:
            val = quadrants[local_pivot]
        else:
            val = code[pivot]
        offset -= 1
        i >>= 1
    gt = x > val
    mid_up = (upper + val) * _HALF
    mid_lo = (lower + val) * _HALF
    _check32(mid_up, mid_lo)
    res = np.where(gt,
                   np.where(x > mid_up, upper_pivot, pivot),
                   np.where(x < mid_lo, lower_pivot, pivot))
    return res.astype(np.uint8)


# ----------------------------------------------------------------------------------------------------------
# dtype helpers, scalars
# ----------------------------------------------------------------------------------------------------------

def round_to_bf16(x):
    """float32 -> bf16 (round to nearest, ties to even), returned as float32 holding the bf16 value."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    nan = np.isnan(x)
    lsb = (bits >> np.uint64(16)) & np.uint64(1)
    rounded = ((bits + np.uint64(0x7FFF) + lsb) & np.uint64(0xFFFF0000)).astype(np.uint32)
    quiet = ((bits | np.uint64(0x00400000)) & np.uint64(0xFFFF0000)).astype(np.uint32)
    return np.where(nan, quiet, rounded).view(np.float32)


def to_param_dtype(x, dtype):
    x = np.asarray(x, dtype=np.float32)
    if dtype == "fp32":
        return x
    if dtype == "bf16":
        return round_to_bf16(x)
    raise ValueError(dtype)


def round_fraction_to_f32(q):
    """Correctly rounded (ties to even) binary32 of an exact rational (normal range)."""
    q = Fraction(q)
    if q == 0:
        return F32(0.0)
    guess = np.float32(float(q))  # within an ulp or so
    cands = [np.nextafter(guess, F32(-np.inf)), guess, np.nextafter(guess, F32(np.inf))]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(np.asarray(c).view(np.uint32)) & 1))
    return F32(best)


def pow_f32(beta, t):
    """beta^t: the float32 beta widened to double, pow in double, rounded to float32 once (cgad)."""
    return F32(math.pow(float(F32(beta)), float(t)))


def pow_f32_correct(beta, t):
    """Correctly rounded float32 of the exact beta^t (to cross-check pow_f32)."""
    return round_fraction_to_f32(Fraction(float(F32(beta))) ** int(t))


def corrections(beta1, beta2, lr, t):
    beta1, beta2, lr = F32(beta1), F32(beta2), F32(lr)
    c1 = _ONE - pow_f32(beta1, t)
    c2 = np.sqrt(_ONE - pow_f32(beta2, t))
    step_size = (-lr * c2) / c1
    _check32(c1, c2, step_size)
    return c1, c2, step_size


# cgad's gate takes the user's alpha (a decimal, never rounded to float32 first) and hands the step the float32
# nearest the true sigma (fastpath/include/cgad/fastpath/detail/staleness.hpp). bnb has no gate, so the emulator is fed that
# float: sigma evaluated with mpmath at SIGMA_BITS bits from the decimal alpha and rounded once, exactly, to float32.
SIGMA_BITS = 256


def gate_sigma_exact(tau, alpha="0.2", tau_cut=32):
    """sigma(tau) = gamma(tau)*exp(-alpha*tau), gamma = sin^2(pi*(tau_cut - tau)/(2*tau_cut)) (0 from tau_cut on),
    as the exact Fraction of a SIGMA_BITS-bit evaluation; alpha as decimal text or a Python float (its repr)."""
    if tau >= tau_cut:
        return Fraction(0)
    if tau == 0:
        return Fraction(1)
    with mpmath.workprec(SIGMA_BITS):
        a = mpmath.mpf(alpha if isinstance(alpha, str) else repr(float(alpha)))
        s = mpmath.sin(mpmath.pi * (tau_cut - tau) / (2 * tau_cut)) ** 2 * mpmath.exp(-a * tau)
        sign, man, exp, _ = s._mpf_
    value = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -value if sign else value


def gate_sigma(tau, alpha="0.2", tau_cut=32):
    """The float32 nearest sigma(tau) (normal range: every tau < tau_cut at the alphas used here)."""
    return round_fraction_to_f32(gate_sigma_exact(tau, alpha, tau_cut))


# ----------------------------------------------------------------------------------------------------------
# the two kernels
# ----------------------------------------------------------------------------------------------------------

class Hyper:
    def __init__(self, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
        self.lr, self.beta1, self.beta2, self.eps = F32(lr), F32(beta1), F32(beta2), F32(eps)
        self.weight_decay = F32(weight_decay)


def step_8bit_blockwise(p, g, c1, c2, absmax1, absmax2, t, hp, dtype, code1=SIGNED_MAP, code2=UNSIGNED_MAP,
                        _padding_in_absmax=True):
    """One kOptimizerStatic8bit2StateBlockwise<ADAM> launch on ONE tensor.

    p, g: float32 arrays of length n (p holds values of the parameter dtype); c1, c2: uint8 codes (n);
    absmax1, absmax2: float32 (ceil(n/256)). Returns (p, c1, c2, absmax1, absmax2), all new arrays.
    _padding_in_absmax=False is a deliberately wrong variant, used only to show a test can see the difference.
    """
    n = p.shape[0]
    nb = (n + BLOCK - 1) // BLOCK
    padn = nb * BLOCK
    valid = np.zeros(padn, dtype=bool)
    valid[:n] = True

    def pad(a, fill, dt):
        out = np.full(padn, fill, dtype=dt)
        out[:n] = a
        return out.reshape(nb, BLOCK)

    gp = pad(g, F32(0.0), np.float32)
    pp = pad(p, F32(0.0), np.float32)
    c1p = pad(c1, 128, np.uint8)
    c2p = pad(c2, 0, np.uint8)
    valid = valid.reshape(nb, BLOCK)
    a1 = np.asarray(absmax1, dtype=np.float32)[:, None]
    a2 = np.asarray(absmax2, dtype=np.float32)[:, None]

    b1, b2, eps, lr, wd = hp.beta1, hp.beta2, hp.eps, hp.lr, hp.weight_decay
    corr1, corr2, step_size = corrections(b1, b2, lr, t)

    finite = np.isfinite(gp)
    gz = np.where(finite, gp, F32(0.0))
    s2 = code2[c2p] * a2
    s2 = (s2 * b2) + (((_ONE - b2) * gz) * gz)
    s1 = code1[c1p] * a1
    s1 = (s1 * b1) + ((_ONE - b1) * gz)
    s1 = np.where(finite, s1, F32(0.0))
    s2 = np.where(finite, s2, F32(0.0))
    _check32(s1, s2)

    abs1, abs2 = np.abs(s1), np.abs(s2)
    if not _padding_in_absmax:
        abs1 = np.where(valid, abs1, F32(0.0))
        abs2 = np.where(valid, abs2, F32(0.0))
    new_a1 = np.fmax.reduce(abs1, axis=1, initial=-FLT_MAX).astype(np.float32)
    new_a2 = np.fmax.reduce(abs2, axis=1, initial=-FLT_MAX).astype(np.float32)

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        upd = step_size * (s1 / (np.sqrt(s2) + (corr2 * eps)))
        pn = to_param_dtype(pp + upd, dtype)
        if wd > F32(0.0):
            pn = to_param_dtype(pn * (_ONE - (lr * wd)), dtype)
        pn = np.where(finite, pn, pp)
        _check32(upd, pn)

        x1 = s1 / new_a1[:, None]
        x2 = s2 / new_a2[:, None]
        _check32(x1, x2)
    q1 = quantize_2d(x1, code1, True)
    q2 = quantize_2d(x2, code2, False)
    fix = np.signbit(code1[q1]) != np.signbit(s1)
    bumped = np.where(s1 > F32(0.0), q1.astype(np.int32) + 1, q1.astype(np.int32) - 1) & 0xFF
    q1 = np.where(fix, bumped, q1).astype(np.uint8)

    return (pn.reshape(-1)[:n].copy(), q1.reshape(-1)[:n].copy(), q2.reshape(-1)[:n].copy(),
            new_a1, new_a2)


def step_32bit(p, g, s1, s2, t, hp, dtype):
    """One kOptimizer32bit2State<ADAM> launch (max_unorm 0 -> update_scale 1, skip_zeros False)."""
    b1, b2, eps, lr, wd = hp.beta1, hp.beta2, hp.eps, hp.lr, hp.weight_decay
    corr1, corr2, step_size = corrections(b1, b2, lr, t)
    update_scale = _ONE
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s1 = s1 * b1 + ((_ONE - b1) * g)
        s2 = s2 * b2 + ((_ONE - b2) * (g * g))
        pn = to_param_dtype(p + ((update_scale * step_size) * (s1 / (np.sqrt(s2) + (eps * corr2)))), dtype)
        if wd > F32(0.0):
            pn = to_param_dtype(pn * (_ONE - (lr * wd)), dtype)
    _check32(s1, s2, pn)
    return pn, s1, s2


# ----------------------------------------------------------------------------------------------------------
# a whole stream
# ----------------------------------------------------------------------------------------------------------

class TensorState:
    def __init__(self, n, q8):
        self.n, self.q8 = n, q8
        if q8:
            nb = (n + BLOCK - 1) // BLOCK
            self.c1 = np.zeros(n, dtype=np.uint8)
            self.c2 = np.zeros(n, dtype=np.uint8)
            self.a1 = np.zeros(nb, dtype=np.float32)
            self.a2 = np.zeros(nb, dtype=np.float32)
        else:
            self.s1 = np.zeros(n, dtype=np.float32)
            self.s2 = np.zeros(n, dtype=np.float32)

    def moments(self, code1=SIGNED_MAP, code2=UNSIGNED_MAP):
        if not self.q8:
            return self.s1.copy(), self.s2.copy()
        blk = np.arange(self.n) // BLOCK
        return code1[self.c1] * self.a1[blk], code2[self.c2] * self.a2[blk]


def run_stream(params, tensors, events, min_8bit_size=4096, dtype="fp32", weight_decay=0.0, lr=1e-3,
               beta1=0.9, beta2=0.999, eps=1e-8, alpha="0.2", tau_cut=32, sigmas=None, on_zero_gate="apply",
               code1=SIGNED_MAP, code2=UNSIGNED_MAP, _padding_in_absmax=True):
    """Run events [(delta float32 array, tau), ...] through bnb-semantics Adam (one fragment).

    params: float32 array (values of the parameter dtype); tensors: list of sizes (sum = len(params)).
    sigmas: optional list of float32 sigma per event (e.g. cgad's own); default: gate_sigma(tau).
    Returns one dict per event: params, m, v (float32 arrays over all tensors), sigma, t, skipped, and the raw
    per-tensor states (codes for q8 tensors) under "tensors".
    """
    params = to_param_dtype(np.asarray(params, dtype=np.float32), dtype)
    assert sum(tensors) == params.shape[0]
    hp = Hyper(lr, beta1, beta2, eps, weight_decay)
    offs = np.concatenate([[0], np.cumsum(tensors)]).astype(int)
    states = [TensorState(n, n >= min_8bit_size) for n in tensors]
    t = 0
    out = []
    for k, (delta, tau) in enumerate(events):
        delta = np.asarray(delta, dtype=np.float32)
        sigma = F32(sigmas[k]) if sigmas is not None else gate_sigma(tau, alpha, tau_cut)
        gamma_zero = tau >= tau_cut  # gamma(tau_cut) = sin^2(0) = 0 too
        with np.errstate(over="ignore", invalid="ignore"):
            g = sigma * delta
            sq = g * g
        _check32(g)
        skipped = (not np.all(np.isfinite(g))) or (not np.all(np.isfinite(sq))) or \
                  (gamma_zero and on_zero_gate == "skip")
        if not skipped:
            t += 1
            newp = params.copy()
            for st, a, b in zip(states, offs[:-1], offs[1:]):
                if st.q8:
                    newp[a:b], st.c1, st.c2, st.a1, st.a2 = step_8bit_blockwise(
                        params[a:b], g[a:b], st.c1, st.c2, st.a1, st.a2, t, hp, dtype, code1, code2,
                        _padding_in_absmax)
                else:
                    newp[a:b], st.s1, st.s2 = step_32bit(params[a:b], g[a:b], st.s1, st.s2, t, hp, dtype)
            params = newp
        ms, vs = zip(*[st.moments(code1, code2) for st in states])
        out.append({
            "params": params.copy(),
            "m": np.concatenate(ms).astype(np.float32),
            "v": np.concatenate(vs).astype(np.float32),
            "sigma": sigma,
            "t": t,
            "skipped": skipped,
            "tensors": [
                {"q8": st.q8, "c1": st.c1.copy(), "c2": st.c2.copy(), "a1": st.a1.copy(), "a2": st.a2.copy()}
                if st.q8 else {"q8": False} for st in states],
        })
    return out
