"""fp32-state CGAD against torch.optim.Adam fed sigma(tau) * grad, over a stream with tau up to 40 (past tau_cut
= 32, where sigma = 0 and both run a step on a zero gradient) and an lr change by a scheduler.

Both optimizers are given the same hyperparameters (torch gets the float32 values of lr and eps as Python floats, and
the betas as the user's decimals: its beta*m rounds beta to float as the fast path's does, and its 1 - beta, formed in
double and rounded once, is the fast path's, which is formed from the decimal; docs/design.md, "Derived constants and
how each is rounded") and the same
float32 gradient sigma * delta (sigma the fast path's float sigma, as it reports it). What is left is the
rounding of two orders of the same operations, and the tolerance is derived from it, per element, by running
the bound along the stream in float64 (u = 2^-24, the float32 unit roundoff), for each of the two sides:
  - m = beta1*m + (1 - beta1)*g rounds 3 times (two products, one sum): its error e_m grows by
    3u(beta1*|m| + (1 - beta1)*|g|) a step and the older error decays by beta1 (torch's add_ with alpha rounds
    at most as often);
  - v = beta2*v + (1 - beta2)*g^2 rounds 4 times: e_v grows by 4u(beta2*v + (1 - beta2)*g^2) and decays by beta2;
  - the update U = lr * m_hat / (sqrt(v_hat) + eps) then carries lr*(e_m/bc1)/D + |m_hat|*(e_v/bc2)/(2*r*D^2)
    (r = sqrt(v_hat), D = r + eps; the first-order propagation of e_m and e_v) plus 9u|U| of its own roundings
    (the bias-corrected moments and their corrections, the square root, + eps, the quotient, lr and its float
    rounding -- torch applies lr/bc1 as one double rounded to float --, the product);
  - theta = theta - U rounds once: u(|theta| + |U|).
|theta_cgad - theta_torch| <= e_theta(cgad) + e_theta(torch) = 2 * e_theta, the bound asserted element by element,
beside the issue's 1e-5 relative agreement of the parameters (max norm).
"""
import numpy as np
import torch

from cgad.torch import CGAD

U = 2.0 ** -24


def f32(x):
    return float(np.float32(x))


def stream(n, events, seed):
    g = torch.Generator().manual_seed(seed)
    taus = [0, 3, 40, 1, 12, 0, 33, 5, 31, 2, 8, 0, 17, 26, 4, 0, 39, 1, 6, 0] * ((events + 19) // 20)
    deltas = [torch.randn(n, generator=g) * (0.1 + 0.9 * (k % 3)) for k in range(events)]
    return deltas, taus[:events]


def error_bound(sg, lrs, betas, eps, theta):
    """2 * e_theta per element (module docstring), along the float64 stream of gradients sg[t] = sigma*delta."""
    b1, b2 = betas
    m = np.zeros_like(theta)
    v = np.zeros_like(theta)
    e_m = np.zeros_like(theta)
    e_v = np.zeros_like(theta)
    e_theta = np.zeros_like(theta)
    th = theta.copy()
    for t, (g, lr) in enumerate(zip(sg, lrs), start=1):
        e_m = b1 * e_m + 3 * U * (b1 * np.abs(m) + (1 - b1) * np.abs(g))
        e_v = b2 * e_v + 4 * U * (b2 * v + (1 - b2) * g * g)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        r = np.sqrt(v / bc2)
        d = r + eps
        upd = lr * (m / bc1) / d
        with np.errstate(divide="ignore", invalid="ignore"):
            from_v = np.where(r > 0, np.abs(m / bc1) * (e_v / bc2) / (2 * r * d * d), 0.0)
        e_upd = lr * (e_m / bc1 / d + from_v) + 9 * U * np.abs(upd)
        th = th - upd
        e_theta = e_theta + e_upd + U * (np.abs(th) + np.abs(upd))
    return 2 * e_theta


def test_fp32_cgad_equals_torch_adam_on_sigma_times_grad():
    n, events = 1000, 60
    lr, betas, eps = 1e-2, (0.9, 0.999), 1e-8
    deltas, taus = stream(n, events, seed=7)
    init = torch.randn(n, generator=torch.Generator().manual_seed(3))
    ours = torch.nn.Parameter(init.clone())
    theirs = torch.nn.Parameter(init.clone())
    cgad = CGAD([ours], lr=lr, betas=betas, eps=eps, state="fp32", threads=2)
    adam = torch.optim.Adam([theirs], lr=f32(lr), betas=betas, eps=f32(eps))
    # The lr change: one scheduler each, lr x 0.3 after 25 events (then float32 like the first).
    sched_cgad = torch.optim.lr_scheduler.MultiStepLR(cgad, milestones=[25], gamma=0.3)
    sched_adam = torch.optim.lr_scheduler.MultiStepLR(adam, milestones=[25], gamma=0.3)
    sg, lrs = [], []
    for delta, tau in zip(deltas, taus):
        ours.grad = delta.clone()
        lrs.append(cgad.param_groups[0]["lr"])
        report = cgad.step(staleness=tau)
        assert report.applied and report.tau_effective == tau
        sigma = torch.tensor(report.sigma, dtype=torch.float32)
        assert (sigma == 0) == (tau >= 32)
        theirs.grad = sigma * delta  # the fast path's own g = fl(sigma * delta)
        sg.append(theirs.grad.double().numpy())
        adam.step()
        sched_cgad.step()
        sched_adam.step()
        adam.param_groups[0]["lr"] = f32(adam.param_groups[0]["lr"])
    assert cgad.param_groups[0]["lr"] == lr * 0.3

    a, b = ours.detach().double().numpy(), theirs.detach().double().numpy()
    bound = error_bound(sg, lrs, (f32(betas[0]), f32(betas[1])), f32(eps), init.double().numpy())
    diff = np.abs(a - b)
    worst = int(np.argmax(diff / bound))
    assert np.all(diff <= bound), f"element {worst}: |diff| = {diff[worst]:.3e} > bound {bound[worst]:.3e}"
    relative = float(np.max(diff) / np.max(np.abs(b)))
    print(f"max |theta_cgad - theta_adam| / max |theta_adam| = {relative:.3e}; "
          f"largest diff/bound = {float(np.max(diff / bound)):.3e}; largest bound/|theta| = "
          f"{float(np.max(bound / np.abs(b))):.3e}")
    assert relative <= 1e-5
    moved = float(np.linalg.norm(b - init.double().numpy()))
    assert float(np.linalg.norm(a - b)) <= 1e-5 * moved  # also relative to how far the parameters moved


def test_stock_torch_adam_agrees_to_1e_5_relative():
    """The issue's check with torch.optim.Adam as users construct it (double lr and eps, which the derived bound
    above does not model): inside 1e-5 relative."""
    n = 1000
    g = torch.Generator().manual_seed(11)
    init = torch.randn(n, generator=g)
    ours, theirs = torch.nn.Parameter(init.clone()), torch.nn.Parameter(init.clone())
    cgad, adam = CGAD([ours], lr=1e-3), torch.optim.Adam([theirs], lr=1e-3)
    scheds = [torch.optim.lr_scheduler.StepLR(o, step_size=30, gamma=0.1) for o in (cgad, adam)]
    for tau in torch.randint(0, 41, (60,), generator=g).tolist():
        delta = torch.randn(n, generator=g)
        ours.grad = delta.clone()
        report = cgad.step(staleness=tau)
        theirs.grad = torch.tensor(report.sigma, dtype=torch.float32) * delta
        adam.step()
        for s in scheds:
            s.step()
    diff = (ours - theirs).detach().abs()
    relative = float(diff.max() / theirs.detach().abs().max())
    moved = float((theirs.detach() - init).norm())
    print(f"stock Adam: max |diff| / max |theta| = {relative:.3e}, |diff| / |theta - theta0| = "
          f"{float(diff.norm()) / moved:.3e}")
    assert relative <= 1e-5
    assert float(diff.norm()) <= 1e-5 * moved
