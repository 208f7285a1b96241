"""The recipe that makes cgad the outer optimizer of torchtitan 0.3's semi-sync DiLoCo, one per model fragment as
torchtitan builds them: Gated(SGD Nesterov), CGAD or PA-CGAD in place of torchtitan's SGD(lr=0.7, momentum=0.9,
nesterov=True) (docs/python.md, "torchtitan"; examples/torchtitan_diloco.py runs it).

torchtitan 0.3 (torchtitan/experiments/torchft/manager.py, maybe_semi_sync_training) splits the model with the
model spec's fragment_fn, builds one torch.optim.SGD(lr=0.7, momentum=0.9, nesterov=True) per fragment and hands
the list to torchft's DiLoCo; its FaultTolerance config has no outer-optimizer field. The recipe:

  * CGADTrainer, a FaultTolerantTrainer whose Config adds the outer optimizer's fields. A torchtitan Config builds
    the class it is nested in, so a config function returning CGADTrainer.Config(...) runs this trainer from
    torchtitan's own launcher (torchtitan/train.py), every torchtitan option as before;
  * semi_sync_training(): maybe_semi_sync_training's arguments and its DiLoCo, with cgad's outer optimizers and a
    step pre-hook that gives torchft's bare outer_optimizer.step() its staleness (and PA-CGAD its fragment);
  * one rebinding, because torchtitan offers no hook for it: FaultTolerantTrainer.train() calls
    maybe_semi_sync_training by the name trainer.py imported. CGADTrainer.train() rebinds that name to
    semi_sync_training() for the duration of its own call only, after checking that it is torchtitan's function
    with the parameters this recipe takes, and restores it after, however train() ends.

torchtitan needs torch 2.x and torchft: importing this module elsewhere raises torchtitan's ImportError."""
import contextlib
import dataclasses
import inspect

import torch
import torchtitan.experiments.torchft.manager as titan_manager
import torchtitan.experiments.torchft.trainer as titan_trainer
from torchft.local_sgd import DiLoCo

import cgad
import cgad.torch

OUTER = ("gated-nesterov", "cgad", "pa-cgad")
WHERE = "torchtitan_cgad"
# The parameters of torchtitan 0.3's maybe_semi_sync_training, which semi_sync_training() takes and passes on.
SEMI_SYNC_PARAMETERS = ("ft_config", "ft_manager", "model", "n_layers", "optimizer", "fragment_fn")


@dataclasses.dataclass(frozen=True)
class Outer:
    """The outer optimizer torchtitan's FaultTolerance config has no field for. kind: "gated-nesterov"
    (cgad.torch.Gated(method="cgad") over torchtitan's own SGD(lr=0.7, momentum=0.9, nesterov=True) per fragment),
    "cgad" (cgad.torch.CGAD per fragment) or "pa-cgad" (one cgad.torch.PACGAD, one param group per fragment).
    lr: CGAD's and PACGAD's (Gated keeps torchtitan's SGD's). state: CGAD's and PACGAD's state format."""
    kind: str = "pa-cgad"
    lr: float = 1e-3
    alpha: float = 0.2
    tau_cut: int = 32
    state: str = "fp32"


def outer_optimizers(outer, fragments):
    """What torchft's DiLoCo gets as outer_optimizer: a list of one optimizer per fragment over the fragment's
    parameters that require a gradient, as torchtitan builds its SGDs, or for PA-CGAD one PACGAD with one param
    group per fragment: the fragments' ages count on one clock of outer rounds, which per-fragment optimizers
    would not share (docs/design.md §3, PA-CGAD)."""
    if outer.kind not in OUTER:
        raise cgad.InputError(f"{WHERE}: the outer optimizer must be one of {', '.join(OUTER)}, got {outer.kind!r}")
    params = [[p for p in f.parameters() if p.requires_grad] for f in fragments]
    if outer.kind == "pa-cgad":
        return cgad.torch.PACGAD([{"params": ps} for ps in params], fragments="groups", lr=outer.lr,
                                 alpha=outer.alpha, tau_cut=outer.tau_cut, state=outer.state)
    if outer.kind == "cgad":
        return [cgad.torch.CGAD(ps, lr=outer.lr, alpha=outer.alpha, tau_cut=outer.tau_cut, state=outer.state)
                for ps in params]
    return [cgad.torch.Gated(torch.optim.SGD(ps, lr=0.7, momentum=0.9, nesterov=True), method="cgad",
                             alpha=outer.alpha, tau_cut=outer.tau_cut) for ps in params]


def semi_sync_training(outer, staleness, on_outer=None):
    """torchtitan's maybe_semi_sync_training with cgad's outer optimizers: the same parameters, the same DiLoCo
    from the same FaultTolerance fields, the outer optimizers from ``outer`` (an Outer), each given a step
    pre-hook that supplies ``staleness(step)`` for the outer step completing manager step ``step`` (the same in
    every replica group: a function of what they share). on_outer(optimizers, manager), if given, sees them and
    torchft's Manager before training starts. Anything but semi_sync_method "diloco" goes to torchtitan's own."""
    def maybe_semi_sync_training(ft_config, ft_manager, model, n_layers, optimizer, fragment_fn=None):
        method = ft_config.semi_sync_method
        if not (ft_config.enable and method is not None and method.lower() == "diloco"):
            return titan_manager.maybe_semi_sync_training(ft_config, ft_manager, model, n_layers, optimizer,
                                                          fragment_fn)
        fragments = fragment_fn(model, ft_config, n_layers) if fragment_fn else [model]
        optimizers = outer_optimizers(outer, fragments)
        cgad.torch.wire_torchft(optimizers, ft_manager.manager, staleness)
        if on_outer is not None:
            on_outer(optimizers, ft_manager.manager)
        return DiLoCo(manager=ft_manager.manager, model_fragments=fragments, inner_optimizer=optimizer,
                      outer_optimizer=optimizers, sync_every=ft_config.sync_steps,
                      should_quantize=ft_config.should_quantize, fragment_sync_delay=ft_config.fragment_sync_delay,
                      fragment_update_alpha=ft_config.fragment_update_alpha)
    return maybe_semi_sync_training


@contextlib.contextmanager
def rebound(replacement):
    """FaultTolerantTrainer.train()'s maybe_semi_sync_training is ``replacement`` inside the block: the name
    torchtitan's trainer.py imported, checked first to be torchtitan's own function with the parameters
    semi_sync_training() takes (a torchtitan that changed them is refused, not half-used), restored after."""
    original = titan_manager.maybe_semi_sync_training
    if getattr(titan_trainer, "maybe_semi_sync_training", None) is not original:
        raise cgad.InputError(f"{WHERE}: torchtitan's trainer does not call torchtitan's maybe_semi_sync_training "
                              "(another torchtitan, or it is rebound already)")
    if tuple(inspect.signature(original).parameters) != SEMI_SYNC_PARAMETERS:
        raise cgad.InputError(f"{WHERE}: torchtitan's maybe_semi_sync_training takes "
                              f"{tuple(inspect.signature(original).parameters)}, this recipe knows "
                              f"{SEMI_SYNC_PARAMETERS} (torchtitan 0.3)")
    titan_trainer.maybe_semi_sync_training = replacement
    try:
        yield
    finally:
        titan_trainer.maybe_semi_sync_training = original


class CGADTrainer(titan_trainer.FaultTolerantTrainer):
    """torchtitan's FaultTolerantTrainer with cgad as the semi-sync DiLoCo's outer optimizer."""

    @dataclasses.dataclass(kw_only=True, slots=True)
    class Config(titan_trainer.FaultTolerantTrainer.Config):
        cgad_outer: str = "pa-cgad"
        """cgad's outer optimizer: gated-nesterov, cgad or pa-cgad (see Outer)."""
        cgad_outer_lr: float = 1e-3
        cgad_alpha: float = 0.2
        cgad_tau_cut: int = 32
        cgad_state: str = "fp32"

    def staleness(self, step):
        """The staleness of the outer step completing manager step ``step``. torchtitan's semi-sync DiLoCo is
        synchronous, so 0; PA-CGAD still gates each fragment by its age. Override with a real source of τ,
        the same in every replica group."""
        return 0

    def train(self):
        c = self.config
        outer = Outer(c.cgad_outer, c.cgad_outer_lr, c.cgad_alpha, c.cgad_tau_cut, c.cgad_state)
        with rebound(semi_sync_training(outer, self.staleness)):
            return super().train()


def llama3_cgad_debugmodel():
    """torchtitan's llama3_torchft_debugmodel config, its trainer a CGADTrainer: a config function torchtitan's
    launcher finds by its module's path (`--module torchtitan_cgad --config llama3_cgad_debugmodel`, this folder on
    the PYTHONPATH), every field overridable on its command line as torchtitan's own (`--cgad_outer cgad`)."""
    from torchtitan.experiments.torchft.llama3.config_registry import llama3_torchft_debugmodel
    base = llama3_torchft_debugmodel()
    return CGADTrainer.Config(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base) if f.init})
