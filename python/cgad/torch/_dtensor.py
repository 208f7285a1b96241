"""DTensor parameters (FSDP2's, tensor parallelism's) stepped through their local shards, as torchao steps them
(torchao 0.18.0, torchao/optim/adam.py: the state is made from ``p.to_local()`` and wrapped back with
``DTensor.from_local`` in the parameter's mesh and placements, so that state_dict() and
torch.distributed.checkpoint see DTensors). The fast path steps each rank's local tensors as it steps plain ones;
what makes a step one decision across ranks is the refusal: every rank previews the event on its own shards, the
refusal is all-reduced (MAX) over the mesh, and every rank then steps or refuses alike (docs/python.md, "torchft";
docs/design.md, "cgad.torch"). torch 1.13 has no DTensor: there, nothing is one and every function is the identity."""
import types

import torch

from ._state import refuse

try:
    from torch.distributed.tensor import DTensor, Replicate, Shard
except ImportError:  # torch 1.13 (no torch.distributed.tensor), or a torch built without distributed
    DTensor = None

# The refusal reasons a rank shares with the others, by code (0: not refused); where ranks refused for
# different reasons, MAX reports the later listed.
_REASONS = ("nonfinite-gradient", "overflowing-gradient")


def is_dtensor(t):
    return DTensor is not None and isinstance(t, DTensor)


def local(t):
    """A DTensor's local tensor (the same memory and version counter: an in-place op on either is seen on both), a
    plain tensor itself."""
    if not is_dtensor(t):
        return t
    with torch.no_grad():  # to_local() is then the local tensor itself, not an autograd view of it
        return t.to_local()


def spec(t):
    """(mesh, placements) of a DTensor, None for a plain tensor."""
    return (t.device_mesh, tuple(t.placements)) if is_dtensor(t) else None


def mesh_of(params, where):
    """The device mesh of DTensor ``params``, None for plain ones (and for none: an empty param group, which torch
    takes, has no mesh of its own, which the optimizer's other groups do not have to match). One optimizer's
    parameters are all DTensors of one mesh or all plain: its refusal is all-reduced over that one mesh (agree)."""
    kinds = {is_dtensor(p) for p in params}
    if len(kinds) > 1:
        refuse(where, "the param group mixes DTensor and plain parameters; put them in separate optimizers (a "
                      "DTensor optimizer's refusal is decided by every rank of its mesh together)")
    if not kinds or not kinds.pop():
        return None
    meshes = {p.device_mesh for p in params}
    if len(meshes) > 1:
        refuse(where, f"the param group's DTensor parameters lie on {len(meshes)} device meshes; one optimizer's "
                      "refusal is all-reduced over one mesh")
    return meshes.pop()


def group_mesh(params, where):
    """mesh_of a cgad.torch param group, whose DTensor parameters the fast path steps on the CPU."""
    mesh = mesh_of(params, where)
    for i, p in enumerate(params if mesh is not None else ()):
        if local(p).device.type != "cpu":
            refuse(where, f"parameter {i} is a DTensor on {local(p).device}; cgad.torch steps DTensor parameters on "
                          "the CPU (a CUDA group's refusal is decided on the device, not yet shared across ranks)")
    return mesh


def check_even(params, where):
    """q8 state of DTensor parameters needs every rank's shard of a parameter to have as many elements: the
    absmax DTensors (wrap) take the global shape DTensor.from_local infers from the local one (local length times
    the shard count), which is the true one only then, and min_q8_size must give every rank's shard the same state
    format (names), or a checkpoint would mix them."""
    for i, p in enumerate(params):
        split = [1] * p.dim()
        for size, placement in zip(p.device_mesh.shape, p.placements):
            if isinstance(placement, Shard):
                split[placement.dim] *= size
        uneven = [(d, p.shape[d], n) for d, n in enumerate(split) if p.shape[d] % n]
        if uneven:
            d, length, n = uneven[0]
            refuse(where, f"parameter {i} is a DTensor sharded unevenly (dimension {d} of length {length} over {n} "
                          "shards); its q8 state's absmax blocks and state format are each shard's own, which a "
                          "checkpoint places only for shards of one size -- use fp32 or bf16 state, or an even "
                          "sharding")


def block_layout(param):
    """What decides which elements a rank's q8 absmax blocks cover (each block is 256 elements of the rank's local
    shard, check_even): [mesh size, sharded dimension] per mesh dimension that splits the parameter, None where
    none does (a plain parameter, a replicated one, a one-rank mesh), whose shard is the whole tensor. Plain lists
    of ints: the form a state_dict carries through torch.distributed.checkpoint."""
    if not is_dtensor(param):
        return None
    split = [[int(n), int(pl.dim)] for n, pl in zip(param.device_mesh.shape, param.placements)
             if isinstance(pl, Shard) and n > 1]
    return split or None


def check_block_layout(saved, param, where):
    """Refuses q8 state whose absmax blocks were made under another sharding than ``param``'s: DCP reshards the
    codes as the parameter's DTensor, but each rank's absmax DTensor holds the blocks of the shard it was saved
    from (wrap), so under another sharding every code would decode against another region's scale."""
    ours = block_layout(param)
    if saved != ours:
        def said(layout):
            if layout is None:
                return "unsplit (a plain, replicated or one-rank parameter)"
            return ", ".join(f"dimension {d} over {n} ranks" for n, d in layout)
        refuse(where, f"its q8 state was saved sharded as {said(saved)}, the parameter is sharded as {said(ours)}; "
                      "q8's absmax blocks are each shard's own, so the codes cannot be resharded -- load it with the "
                      "sharding it was saved with, or reshard a checkpoint of fp32 or bf16 state")


def wrap(t, param):
    """State tensor ``t`` of the local shard of ``param`` as a DTensor in ``param``'s mesh (plain ``t`` for a plain
    ``param``). Tensors of the parameter's local shape take its placements and global shape and stride, as
    torchao's state; q8's absmax (one per 256-element block of the local shard) are each rank's own blocks, sharded
    along dimension 0 where the parameter is sharded and replicated where it is replicated (check_even)."""
    if not is_dtensor(param):
        return t
    if t.shape == local(param).shape:
        return DTensor.from_local(t, param.device_mesh, param.placements, run_check=False, shape=param.shape,
                                  stride=param.stride())
    placements = [Shard(0) if isinstance(pl, Shard) else Replicate() for pl in param.placements]
    return DTensor.from_local(t, param.device_mesh, placements, run_check=False)


def wrapped_spec(t, param):
    """The (mesh, placements) wrap() gives a state tensor like ``t`` of ``param``."""
    if t.shape == local(param).shape:
        return spec(param)
    return (param.device_mesh, tuple(Shard(0) if isinstance(pl, Shard) else Replicate() for pl in param.placements))


def local_state(entry, param, names):
    """Tensor ``param``'s opt.state entry as the fast path reads it: its state tensors ``names`` by their local
    tensors (a fresh dict sharing every tensor: "step" is the same plain tensor, as torchao keeps it). A state
    tensor that is not a DTensor of the parameter's mesh and placements is left as it is, for the check of the
    state (_live.py) to refuse by its type."""
    if not is_dtensor(param) or not isinstance(entry, dict):
        return entry
    out = dict(entry)
    for name in names:
        t = entry.get(name)
        if is_dtensor(t) and spec(t) == wrapped_spec(local(t), param):
            out[name] = local(t)
    return out


def versions(entry, names):
    """What an in-place op on a state DTensor changes, which its local tensor does not show: a DTensor's own
    version counter advances, its local tensor's does not (torch 2.13). Per name, the DTensor's identity and
    version."""
    if not isinstance(entry, dict):
        return None
    return tuple((id(t), t._version) if is_dtensor(t) else None for t in map(entry.get, names))


def gradient_sources(params, where):
    """What _tensors.gradients reads of each parameter (.grad, .device, .shape), for DTensor parameters their
    local shards' -- after checking each DTensor's .grad is a DTensor of its mesh and placements."""
    out = []
    for i, p in enumerate(params):
        g = p.grad
        if g is not None:
            if not is_dtensor(g) or spec(g) != spec(p):
                got = f"a DTensor with placements {list(g.placements)}" if is_dtensor(g) else f"a {type(g).__name__}"
                refuse(where, f"parameter {i} is a DTensor with placements {list(p.placements)}, its gradient "
                              f"{got}; cgad.torch steps a DTensor's local shard with its gradient's, which must be "
                              "a DTensor of the same mesh and placements")
            g = local(g)
        shard = local(p)
        out.append(types.SimpleNamespace(grad=g, device=shard.device, shape=shard.shape))
    return out


def agree(mesh, reason):
    """The refusal reason of the event over every rank of ``mesh`` ("none" where no rank refused), each rank
    giving its own (``reason``: a refusal reason or "none"): one all_reduce of one integer (MAX), over each of the
    mesh's dimensions in turn (the maximum over every rank of the mesh)."""
    # On the mesh's device type: a CUDA mesh's process groups (NCCL) reduce CUDA tensors only.
    code = torch.tensor([_REASONS.index(reason) + 1 if reason in _REASONS else 0], dtype=torch.int64,
                        device=mesh.device_type)
    for dim in range(mesh.ndim):
        torch.distributed.all_reduce(code, op=torch.distributed.ReduceOp.MAX, group=mesh.get_group(dim))
    return _REASONS[int(code) - 1] if int(code) else "none"
