"""torch.distributed.checkpoint's lazy initialisation of an optimizer's state, recognised (docs/python.md, "torch 2.x
protocol"; docs/design.md §7). get_optimizer_state_dict and set_optimizer_state_dict call
_init_optim_state (torch/distributed/checkpoint/state_dict.py, torch 2.13) on an optimizer whose ``state`` is empty:
it gives every parameter that requires a gradient a zero one, sets every group's lr to 0, calls ``step(closure=None)``
and then takes the gradients away again. torch's own optimizers come out of it with their state allocated and
nothing else changed but the step count; a CGAD step on a zero pseudo-gradient advances t (and PA-CGAD's round),
which changes every later step. So that call is taken for what it means -- allocate the state -- and never
stepped: taking or loading a checkpoint never changes what the next step computes."""
import torch

from . import _dtensor


def requested(optimizer, closure, staleness, fragment):
    """Whether this step() call is DCP's lazy initialisation: no closure, no staleness or fragment given, an empty
    ``optimizer.state``, every group's lr 0 (a number or a tensor), and a zero gradient on every parameter that
    requires one (its local shard for a DTensor: every rank sees its own zeros, and DCP calls every rank alike).
    A real step that looks so -- a zero pseudo-gradient at lr 0 right after opt.state.clear() -- moves no parameter
    and starts from zero moments, so taking it as the allocation loses only its count."""
    if closure is not None or staleness is not None or fragment is not None or optimizer.state:
        return False
    params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
    if not params:
        return False
    for group in optimizer.param_groups:
        lr = group.get("lr", 0.0)
        if isinstance(lr, torch.Tensor) and lr.numel() != 1:
            return False
        if float(lr) != 0.0:
            return False
    with torch.no_grad():
        return all(p.grad is not None and not bool(_dtensor.local(p.grad).any()) for p in params)
