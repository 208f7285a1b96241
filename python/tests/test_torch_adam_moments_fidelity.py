"""cgad.torch.Adam (state="fp32") against torch.optim.Adam and, with weight decay, torch.optim.AdamW, both given the
user's decimals: exp_avg and exp_avg_sq agree to the bound of their roundings, element by element.

Both sides multiply by the same float32 constants: beta as the float nearest the decimal, and 1 - beta as the float
nearest 1 - (the decimal) -- torch forms 1 - beta in double and its CPU kernels round the scalar to float once;
cgad forms it from the decimal's text (fastpath/detail/derived_constants.hpp). Before, cgad's was 1 - float(beta):
0.00099998712 for 0.999, a 1.29e-5 relative shift of every v, outside the bound below. The gradients are fixed
(not functions of theta), so the moments depend on nothing else. Per step and side, with u = 2^-24:
  - v = beta2*v + (1 - beta2)*g^2 rounds at most 4 times (cgad: g*g, the product, beta2*v, the sum; torch: mul_,
    then addcmul_'s value*g*g and its sum, which may fuse), each on a term of magnitude <= beta2*V + (1-beta2)*g^2
    (V the exact v, all terms >= 0): its error grows by 4u(beta2*V + (1 - beta2)*g^2) and the older one decays by
    beta2;
  - m: cgad's beta1*m + w*g (w = 1 - beta1) rounds 3 times on terms <= beta1*|m| + w*|g|; torch 2's lerp_
    (m + w*(g - m) for w < 0.5, g - (g - m)*(1 - w) otherwise) rounds 3 times, with errors <= u*(3w|g| + (1+w)|m|)
    and u*((2(1-w) + w)|g| + 3(1-w)|m|) respectively; torch 1.13's mul_/add_ as cgad's. All are <= 3u(|m| + w|g|),
    with |m| <= M = beta1*M + w|g| (the running absolute sum): the error grows by 3u(M + w|g|), decays by beta1.
    Beside the roundings, lerp_ multiplies m by 1 - w exactly where cgad multiplies it by float(beta1): the two
    differ by d1 = |float(beta1) - (1 - w)| (under 0.4u at 0.9; w itself, 1e-8, at beta1 = 0.99999999, whose float is
    1 -- test_torch_beta_near_one.py), adding d1*M per step.
|cgad - torch| <= 2 * (the rounding error) + the d1 terms, asserted per element with a 1 + 2^-20 factor for the
second-order terms; for 10 steps at beta2 = 0.999 the v bound is about 80u = 4.8e-6 relative.
"""
import numpy as np
import pytest
import torch

import cgad.torch

U = 2.0 ** -24
STEPS = 10


def f32(x):
    return float(np.float32(x))


def moments_bound(grads, beta1, beta2):
    b1, b2 = f32(beta1), f32(beta2)
    w1, w2 = 1 - beta1, 1 - beta2
    d1 = abs(b1 - (1 - f32(w1)))
    big_m = np.zeros_like(grads[0])
    v = np.zeros_like(grads[0])
    e_m = np.zeros_like(grads[0])
    e_v = np.zeros_like(grads[0])
    for g in grads:
        e_m = b1 * e_m + 3 * U * (big_m + w1 * np.abs(g)) + d1 * big_m / 2
        e_v = b2 * e_v + 4 * U * (b2 * v + w2 * g * g)
        big_m = b1 * big_m + w1 * np.abs(g)
        v = b2 * v + w2 * g * g
    slack = 1 + 2.0 ** -20
    return 2 * e_m * slack, 2 * e_v * slack


def run(torch_class, betas, weight_decay, n=4096, seed=5):
    gen = torch.Generator().manual_seed(seed)
    init = torch.randn(n, generator=gen)
    scales = torch.logspace(-6, 2, n).reshape(n)[torch.randperm(n, generator=gen)]
    grads = [torch.randn(n, generator=gen) * scales for _ in range(STEPS)]
    ours, theirs = torch.nn.Parameter(init.clone()), torch.nn.Parameter(init.clone())
    fast = cgad.torch.Adam([ours], lr=1e-3, betas=betas, weight_decay=weight_decay, state="fp32", threads=1)
    peer = torch_class([theirs], lr=1e-3, betas=betas, weight_decay=weight_decay)
    for g in grads:
        ours.grad, theirs.grad = g.clone(), g.clone()
        fast.step()
        peer.step()
    mine, other = fast.state[ours], peer.state[theirs]
    bound_m, bound_v = moments_bound([g.double().numpy() for g in grads], *betas)
    return ({k: mine[k].double().numpy() for k in ("exp_avg", "exp_avg_sq")},
            {k: other[k].double().numpy() for k in ("exp_avg", "exp_avg_sq")}, bound_m, bound_v)


CASES = [
    (torch.optim.Adam, (0.9, 0.999), 0.0),
    (torch.optim.Adam, (0.95, 0.9999), 0.0),
    (torch.optim.Adam, (0.5, 0.99), 0.0),
    (torch.optim.AdamW, (0.9, 0.999), 0.01),
    (torch.optim.AdamW, (0.8, 0.95), 0.1),
]


@pytest.mark.parametrize("torch_class, betas, weight_decay", CASES)
def test_moments_agree_with_torch_to_the_rounding_bound(torch_class, betas, weight_decay):
    mine, other, bound_m, bound_v = run(torch_class, betas, weight_decay)
    for name, bound in (("exp_avg", bound_m), ("exp_avg_sq", bound_v)):
        diff = np.abs(mine[name] - other[name])
        worst = int(np.argmax(diff / bound))
        assert np.all(diff <= bound), (f"{torch_class.__name__} betas {betas}: {name}[{worst}] differs by "
                                       f"{diff[worst]:.3e} > bound {bound[worst]:.3e} "
                                       f"({diff[worst] / abs(other[name][worst]):.3e} relative)")
    relative = float(np.max(np.abs(mine["exp_avg_sq"] - other["exp_avg_sq"]) / other["exp_avg_sq"]))
    print(f"{torch_class.__name__} betas {betas}: max relative |exp_avg_sq diff| after {STEPS} steps = "
          f"{relative:.3e}")
