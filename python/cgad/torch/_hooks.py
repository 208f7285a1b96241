"""torch 2.x's optimizer hooks where cgad.torch replaces the torch.optim.Optimizer method that would run them
(docs/python.md, "torch 2.x protocol"): state_dict() and load_state_dict() are cgad's own (the state is the fast
path's, and its counters go with the param groups), so they run torch's state_dict and load_state_dict pre/post
hooks themselves, in torch's order and with torch's contract. The step hooks need nothing here: torch wraps every
Optimizer subclass's step() in the function that runs them (Optimizer._patch_step_function).

torch 1.13 has none of these hooks (nor their attributes); there every function here does nothing more than the
method it stands in for."""
import collections

import torch

# The hook tables torch 2.x's Optimizer keeps per instance. A copy (deepcopy, pickle) starts without hooks, as a
# copy of a torch optimizer does (torch.optim.Optimizer.__getstate__ keeps only defaults, state and param_groups):
# hooks are often closures or lambdas, which pickle cannot take.
HOOK_TABLES = ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks", "_optimizer_state_dict_pre_hooks",
               "_optimizer_state_dict_post_hooks", "_optimizer_load_state_dict_pre_hooks",
               "_optimizer_load_state_dict_post_hooks")


def _hooks(optimizer, table):
    return list(getattr(optimizer, table, {}).values())


def state_dict(optimizer, pack):
    """torch's Optimizer.state_dict() around ``pack()`` (the state_dict without hooks): the pre-hooks, then the
    post-hooks on the finished state_dict (counters included), each of which may return a replacement."""
    for hook in _hooks(optimizer, "_optimizer_state_dict_pre_hooks"):
        hook(optimizer)
    out = pack()
    for hook in _hooks(optimizer, "_optimizer_state_dict_post_hooks"):
        result = hook(optimizer, out)
        if result is not None:
            out = result
    return out


def load_state_dict(optimizer, state_dict, load):
    """torch's Optimizer.load_state_dict() around ``load(state_dict)``: the pre-hooks get a shallow copy of the
    caller's state_dict (so the caller's top level is never changed) and may return a replacement; the post-hooks
    run once it has loaded. A refused load raises before the post-hooks, as torch's does."""
    if isinstance(state_dict, dict):
        state_dict = state_dict.copy()
    for hook in _hooks(optimizer, "_optimizer_load_state_dict_pre_hooks"):
        result = hook(optimizer, state_dict)
        if result is not None:
            state_dict = result
    load(state_dict)
    for hook in _hooks(optimizer, "_optimizer_load_state_dict_post_hooks"):
        hook(optimizer)


def restore_copy(optimizer, copied):
    """What torch.optim.Optimizer.__setstate__ does for a copy (torch 2.x: empty hook tables, step wrapped with the
    hook runner; torch 1.13: step wrapped for the profiler), with cgad's attributes in ``copied``. torch's also
    puts differentiable=False into the defaults, which a later add_param_group would copy into its group: taken
    out again where the original had none (a group holds the hyperparameters its class reads)."""
    had_flag = "differentiable" in copied.get("defaults", {})
    torch.optim.Optimizer.__setstate__(optimizer, copied)
    if not had_flag:
        optimizer.defaults.pop("differentiable", None)


def start_without_hooks(optimizer):
    """torch.optim.Optimizer's per-instance protocol for an optimizer that does not run its __init__ (cgad.torch.Gated,
    whose param groups are the wrapped optimizer's) or that is a copy: empty hook tables (torch 2.x), and the step
    wrapped with the hook runner (torch 2.x) or for the profiler (torch 1.13)."""
    for table in HOOK_TABLES:
        setattr(optimizer, table, collections.OrderedDict())
    if hasattr(optimizer, "_patch_step_function"):
        optimizer._patch_step_function()
    else:
        optimizer._hook_for_profile()
