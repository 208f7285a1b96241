"""torch.optim outer optimizers over cgad's fast path (docs/design.md §3, §5): CGAD, PACGAD, AdamDecay, Adam,
Nesterov and SDM, for the outer loop of DiLoCo-family training.

    from cgad.torch import CGAD
    opt = CGAD(model.parameters(), lr=1e-3, state="q8")
    for p, delta in zip(model.parameters(), pseudo_gradients):
        p.grad = delta                       # the pseudo-gradient theta_start - theta_local
    report = opt.step(staleness=tau)         # or: opt.staleness = tau; opt.step() (torchft calls step() bare)
    report.applied, report.reason, report.sigma, report.tau_effective

Each param group is one fast-path optimizer over the group's tensors (each its own tensor of the q8 layout:
8-bit blocks restart at every tensor, tensors under min_q8_size keep fp32 state); the hyperparameters are read
from ``param_groups`` at every step, so torch.optim.lr_scheduler works. CPU tensors are updated in place, where
they lie; a NaN/Inf pseudo-gradient anywhere skips the whole step, changes nothing and says so in the report.
opt.state[p] holds the live state in torch's names (exp_avg, exp_avg_sq, step; bitsandbytes' state1/absmax1 ...
for q8), state_dict() returns references to it in torch's layout, and load_state_dict() resumes bit for bit
(_state.py); copy.deepcopy and pickle give a working optimizer.

Gated(optimizer, method="cgad") puts the gate in front of an optimizer the user already runs (torch's fused AdamW,
bitsandbytes' AdamW8bit, torchao's low-bit AdamW): its step gets fl(sigma(tau) * pseudo-gradient) (_gated.py).
See docs/python.md.
"""
from ._gated import Gated
from ._optimizers import CGAD, PACGAD, SDM, Adam, AdamDecay, Nesterov
from ._report import GroupReport, StepReport
from ._torchft import wire_torchft

__all__ = ["CGAD", "PACGAD", "AdamDecay", "Adam", "Nesterov", "SDM", "Gated", "StepReport", "GroupReport",
           "wire_torchft"]
