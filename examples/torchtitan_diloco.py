#!/usr/bin/python3
"""torchtitan 0.3's semi-sync DiLoCo with cgad as the outer optimizer, per model fragment as torchtitan builds them,
on the CPU: the pieces torchtitan's FaultTolerantTrainer.train() calls, with examples/torchtitan_cgad.py's recipe.

torchtitan's Trainer cannot start on a CPU-only torch: torchtitan.tools.utils takes "cuda" as its device type when
no accelerator is available and Trainer.__init__ calls torch.cuda.set_device, and its debug configs read the
tokenizer and the c4_test data set from a torchtitan checkout's tests/assets, which the wheel does not ship. So
this runs, on the CPU, what FaultTolerantTrainer.train() calls (docs/python.md, "torchtitan"): torchtitan's llama3
"debugmodel" (with torchtitan's SDPA attention: its FlexAttention has no backward on the CPU) split by its
fragment_fn (fragment_llm), sharded as its trainer shards it with --fsdp; torchtitan's TorchFTManager (an
in-process Lighthouse, one replica group over gloo on 127.0.0.1) and TorchFTOptimizersContainer (AdamW) as the
inner optimizer; and maybe_semi_sync_training called where FaultTolerantTrainer.train() calls it, rebound as the
recipe's CGADTrainer.train() rebinds it. The task is to predict the next token of a fixed random permutation of the
vocabulary. torchtitan's semi-sync DiLoCo is synchronous (every pseudo-gradient is fresh), so the staleness of
each outer step is injected as examples/torchft_diloco.py injects it: drawn from --seed and the step, 0..--tau.

    PYTHONPATH=build/python RUST_LOG=warn python examples/torchtitan_diloco.py --outer pa-cgad --fsdp
"""
import contextlib
import logging
import os
import sys
import warnings

import torch
import torch.nn.functional as F

import cgad
from example_args import SEED, TIMEOUT, Parser, integer, real
from torchft_diloco import staleness_of

OUTER = ("gated-nesterov", "cgad", "pa-cgad")  # torchtitan_cgad.OUTER, said here before torchtitan is imported
WHERE = "torchtitan_diloco"


def recipe():
    """examples/torchtitan_cgad.py, imported when needed: torchtitan's import is seconds long and prints its
    peers' warnings, after the arguments are checked."""
    import torchtitan_cgad
    return torchtitan_cgad


def parse_args(argv):
    p = Parser(description=__doc__.split("\n\n")[0])
    positive, nonnegative = integer(at_least=1), integer(at_least=0)
    p.add_argument("--outer", choices=OUTER, default="pa-cgad", help="cgad's outer optimizer (see Outer)")
    p.add_argument("--state", choices=["fp32", "bf16", "q8"], default="fp32", help="CGAD's and PACGAD's state")
    p.add_argument("--fragments", type=positive, default=2,
                   help="model fragments (torchtitan's fault_tolerance.num_fragments, split by fragment_llm)")
    p.add_argument("--sync-every", type=positive, default=4, help="torchtitan's fault_tolerance.sync_steps")
    p.add_argument("--fragment-sync-delay", type=nonnegative, default=0,
                   help="torchtitan's fault_tolerance.fragment_sync_delay")
    p.add_argument("--outer-steps", type=positive, default=6, help="committed outer steps (manager steps)")
    p.add_argument("--tau", type=nonnegative, default=6, help="largest injected staleness, in outer rounds")
    p.add_argument("--tau-cut", type=positive, default=32, help="CGAD's tau_cut")
    p.add_argument("--alpha", type=real(at_least=0), default=0.2, help="CGAD's alpha")
    p.add_argument("--outer-lr", type=real(above=0), default=1e-3, help="CGAD's and PACGAD's learning rate")
    p.add_argument("--inner-lr", type=real(above=0), default=8e-4,
                   help="the inner AdamW's (torchtitan's default_adamw, as its debug config)")
    p.add_argument("--batch", type=positive, default=2, help="sequences per inner step")
    p.add_argument("--seq-len", type=integer(at_least=2, at_most=4096), default=32, help="tokens per sequence")
    p.add_argument("--fsdp", action="store_true",
                   help="shard the model as torchtitan's trainer does (FSDP2, here over a one-rank gloo mesh): "
                        "the outer optimizers get DTensors")
    p.add_argument("--seed", type=SEED, default=0, help="0..2^32 - 1")
    p.add_argument("--timeout", type=TIMEOUT, default=30.0, help="seconds a quorum or collective may take")
    p.add_argument("--quiet", action="store_true", help="print the summary only")
    args = p.parse_args(argv)
    # torchft's DiLoCo conditions (torchft 0.2), said in one line instead of its assertion.
    if args.sync_every % args.fragments:
        p.error("--sync-every must be a multiple of --fragments")
    if args.fragment_sync_delay >= args.sync_every // args.fragments:
        p.error("--fragment-sync-delay must be below --sync-every / --fragments")
    if args.fragments > args.tau_cut:
        p.error("--fragments must be <= --tau-cut (a round-robin fragment is fragments - 1 rounds old)")
    if args.fragments > 8:  # fragment_llm splits the debug model's 6 layers, its embedding and its output
        p.error("--fragments must be <= 8 (the llama3 debug model has 6 layers)")
    return args


def tokens(args, permutation, generator):
    """A batch of sequences, each following the fixed permutation of the vocabulary from a random first token."""
    start = torch.randint(0, permutation.numel(), (args.batch, 1), generator=generator)
    seq = [start]
    for _ in range(args.seq_len):
        seq.append(permutation[seq[-1]])
    return torch.cat(seq, dim=1)


def loss_of(model, batch):
    logits = model(batch[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1).float(), batch[:, 1:].flatten())


@contextlib.contextmanager
def environment(values):
    """os.environ with ``values`` inside the block (torchtitan's TorchFTManager reads torchft's Manager's
    addresses from there), as it was after."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def build(args):
    """torchtitan's llama3 debug model (its torchft model spec: fragment_fn = fragment_llm), initialised from
    --seed, and the number of layers FaultTolerantTrainer.train() passes as n_layers."""
    from torchtitan.experiments.torchft.llama3 import model_registry
    from torchtitan.models.common.attention import ScaledDotProductAttention
    spec = model_registry("debugmodel")
    # torchtitan 0.3 gives its language models FlexAttention, whose backward torch does not run on the CPU
    # ("FlexAttention does not support backward on CPU"), and refuses "sdpa" for them; its own
    # ScaledDotProductAttention (causal: flex's mask for one document per sequence) takes its place here. Every
    # parameter is the debug model's.
    for layer in spec.model.layers:
        layer.attention.inner_attention = ScaledDotProductAttention.Config()
    torch.manual_seed(args.seed)
    model = spec.model.build()
    model.init_states(buffer_device=torch.device("cpu"))
    return spec, model, len(spec.model.layers)


@contextlib.contextmanager
def sharded(model, shard):
    """With ``shard``, the model sharded as torchtitan's llama3 parallelize_fn shards it whatever the shard degree
    (apply_fsdp_to_decoder: FSDP2 per layer and at the root, parameters DTensors), over a one-rank gloo mesh of a
    default process group made for the block; without, nothing."""
    if not shard:
        yield
        return
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torchtitan.distributed.fsdp import apply_fsdp_to_decoder
    made = not dist.is_initialized()
    if made:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        apply_fsdp_to_decoder(model, init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",)),
                              param_dtype=torch.float32, reduce_dtype=torch.float32, pp_enabled=False,
                              cpu_offload=False, reshard_after_forward_policy="default")
        yield
    finally:
        if made:
            dist.destroy_process_group()


def run(args, on_outer=None, log=print):
    """One replica group of torchtitan's semi-sync DiLoCo with cgad's outer optimizers on the CPU, for
    --outer-steps committed manager steps. Returns (model, losses): the inner steps' training losses."""
    spec, model, n_layers = build(args)
    with sharded(model, args.fsdp):
        return train(args, spec, model, n_layers, on_outer, log)


def train(args, spec, model, n_layers, on_outer, log):
    """run()'s training, on the model ``build`` made (sharded or not)."""
    import torch.distributed as dist
    from torchft.coordination import LighthouseServer
    from torchtitan.components.optimizer import default_adamw
    from torchtitan.experiments.torchft.config.job_config import FaultTolerance
    from torchtitan.experiments.torchft.optimizer import TorchFTOptimizersContainer
    r = recipe()
    ft_config = FaultTolerance(enable=True, process_group="gloo",
                               process_group_timeout_ms=int(args.timeout * 1000), replica_id=0, group_size=1,
                               min_replica_size=1, semi_sync_method="diloco", sync_steps=args.sync_every,
                               fragment_sync_delay=args.fragment_sync_delay, num_fragments=args.fragments)
    outer = r.Outer(args.outer, args.outer_lr, args.alpha, args.tau_cut, args.state)
    permutation = torch.randperm(spec.model.vocab_size, generator=torch.Generator().manual_seed(args.seed))
    batches = torch.Generator().manual_seed(args.seed + 1)
    lighthouse = LighthouseServer(bind="127.0.0.1:0", min_replicas=1, join_timeout_ms=100)
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    env = {"TORCHFT_LIGHTHOUSE": lighthouse.address(), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(store.port),
           "RANK": "0", "WORLD_SIZE": "1", "GLOO_SOCKET_IFNAME": "lo"}
    losses, ft_manager = [], None
    try:
        with environment(env):
            ft_manager = r.titan_manager.TorchFTManager(ft_config)
        inner = TorchFTOptimizersContainer(
            TorchFTOptimizersContainer.Config(param_groups=default_adamw(lr=args.inner_lr).param_groups),
            model_parts=[model], ft_manager=ft_manager)
        staleness = lambda step: staleness_of(args.seed, args.tau, step)
        # As FaultTolerantTrainer.train() calls it: by the name its module imported, rebound as CGADTrainer does.
        with r.rebound(r.semi_sync_training(outer, staleness, on_outer)):
            semi_sync = r.titan_trainer.maybe_semi_sync_training(ft_config, ft_manager=ft_manager, model=model,
                                                                 n_layers=n_layers, optimizer=inner,
                                                                 fragment_fn=spec.fragment_fn)
        with semi_sync:
            while ft_manager.manager.current_step() < args.outer_steps:
                loss = loss_of(model, tokens(args, permutation, batches))
                loss.backward()
                inner.step()  # DiLoCo's post-hook on the inner optimizer runs the fragment syncs
                inner.zero_grad()
                losses.append(loss.item())
                if not args.quiet:
                    log(f"manager step {ft_manager.manager.current_step()} loss {losses[-1]:.4f}")
    finally:
        if ft_manager is not None:
            ft_manager.manager.shutdown(wait=False)
        lighthouse.shutdown()
    return model, losses


def main(argv):
    args = parse_args(argv)
    try:
        recipe()
    except Exception as e:  # torchtitan 0.3 needs torch 2.x and torchft; Debian's torch 1.13 cannot import them
        sys.exit(f"{WHERE}: torchtitan cannot be imported here ({type(e).__name__}: {e}); it needs torch 2.x")
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    logging.getLogger("torchft").setLevel(logging.ERROR)
    logging.getLogger("torchtitan").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="The given buffer is not writable")
    try:
        _, losses = run(args)
    except cgad.InputError as e:  # a refusal of the recipe's or cgad's (Gated given --fsdp's DTensors): one line
        print(f"{WHERE}: error: {e}", file=sys.stderr)
        return 2
    print(f"summary: {args.outer} outer over {args.fragments} torchtitan fragment(s), {args.outer_steps} outer "
          f"steps, {len(losses)} inner steps, training loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
