"""cgad as the outer optimizer of torchtitan 0.3's semi-sync DiLoCo (docs/python.md, "torchtitan"), run by
examples/torchtitan_diloco.py on the CPU: torchtitan's llama3 debug model split by its fragment_fn, its
TorchFTManager and TorchFTOptimizersContainer, torchft's DiLoCo, and maybe_semi_sync_training called where
torchtitan's FaultTolerantTrainer.train() calls it, rebound to the recipe's. For Gated(SGD Nesterov), CGAD and
PA-CGAD, each committed manager step runs one outer step, of the fragment torchft syncs, with the staleness the
recipe supplies; and the parameters it leaves are, bit for bit, what the same cgad optimizer built afresh makes of
the same pseudo-gradients from the same starting weights. torchtitan needs torch 2.x: on Debian's torch 1.13
these skip (fail where CGAD_REQUIRE_PEERS=1), except the example's refusals of bad arguments."""
import argparse
import contextlib
import math
import os
import subprocess
import sys

import pytest
import torch

import cgad
import cgad.torch

from conftest import SOURCE_DIR, peer

sys.path.insert(0, str(SOURCE_DIR / "examples"))
import torchtitan_diloco as example  # noqa: E402

FAST = ["--fragments", "2", "--sync-every", "2", "--outer-steps", "3", "--tau", "6", "--quiet"]


@pytest.fixture(scope="module")
def recipe():
    """examples/torchtitan_cgad.py, the recipe (torchtitan and torchft imported)."""
    peer("torchft")
    peer("torchtitan")
    threads = torch.get_num_threads()
    torch.set_num_threads(min(threads, 2))
    yield example.recipe()
    torch.set_num_threads(threads)


def local(t):
    """A DTensor's local shard (the whole tensor on the one-rank mesh), a plain tensor itself; detached, copied."""
    return (t.to_local() if hasattr(t, "to_local") else t).detach().clone()


def bits(t):
    return t.detach().reshape(-1).view(torch.int32)


def same_bits(a, b):
    return len(a) == len(b) and all(x.dtype == y.dtype and torch.equal(bits(x), bits(y)) for x, y in zip(a, b))


class Recorder:
    """Step hooks on each outer optimizer, registered after the recipe's (so they see the keywords it supplies):
    per outer step, the optimizer's index, the manager step, the keywords, the pseudo-gradients in .grad, and the
    stepped parameters before and after, in the order of the optimizer's param groups."""

    def __init__(self):
        self.steps, self.optimizers = [], None

    def attach(self, optimizers, manager):
        self.optimizers = optimizers if isinstance(optimizers, list) else [optimizers]
        for i, opt in enumerate(self.optimizers):
            opt.register_step_pre_hook(lambda o, a, k, i=i: self._pre(i, o, k, manager.current_step()))
            opt.register_step_post_hook(lambda o, a, k: self._post(o))

    @staticmethod
    def stepped(opt, kwargs):
        fragment = kwargs.get("fragment")
        return [p for g, group in enumerate(opt.param_groups) if fragment is None or g == fragment
                for p in group["params"]]

    def _pre(self, i, opt, kwargs, step):
        params = self.stepped(opt, kwargs)
        self.steps.append({"optimizer": i, "kwargs": dict(kwargs), "step": step,
                           "dtensor": hasattr(params[0], "to_local"), "delta": [local(p.grad) for p in params],
                           "before": [local(p) for p in params]})

    def _post(self, opt):
        record = self.steps[-1]
        record["after"] = [local(p) for p in self.stepped(opt, record["kwargs"])]
        record["report"] = opt.last_report


def run(outer, fsdp):
    args = example.parse_args(["--outer", outer] + FAST + (["--fsdp"] if fsdp else []) + ["--timeout", "60"])
    recorder = Recorder()
    model, losses = example.run(args, on_outer=recorder.attach, log=lambda line: None)
    return args, model, losses, recorder


def reference(recipe, args):
    """The same outer optimizers built afresh over a fresh debug model (not sharded) split by torchtitan's
    fragment_fn."""
    from torchtitan.experiments.torchft.config.job_config import FaultTolerance
    spec, model, n_layers = example.build(args)
    fragments = spec.fragment_fn(model, FaultTolerance(num_fragments=args.fragments), n_layers)
    outer = recipe.Outer(args.outer, args.outer_lr, args.alpha, args.tau_cut, args.state)
    optimizers = recipe.outer_optimizers(outer, fragments)
    return model, fragments, optimizers if isinstance(optimizers, list) else [optimizers]


# torchtitan's trainer shards the model (FSDP2), so its outer optimizers get DTensors: every kind runs so, and
# steps as on the plain tensors (the reference below is plain).
@pytest.mark.parametrize("outer, fsdp", [
    ("gated-nesterov", False), ("cgad", True), ("pa-cgad", True), ("gated-nesterov", True),
])
def test_torchtitan_semi_sync_diloco_steps_each_fragment_as_cgad_does_on_the_same_pseudo_gradients(recipe, outer,
                                                                                                   fsdp):
    args, model, losses, recorder = run(outer, fsdp)
    steps = recorder.steps
    assert all(r["dtensor"] == fsdp for r in steps)
    per_fragment = outer != "pa-cgad"
    # One outer step per committed manager step, of the fragment torchft syncs: (step - 1) mod P.
    assert [r["step"] for r in steps] == list(range(1, args.outer_steps + 1))
    for r in steps:
        fragment = (r["step"] - 1) % args.fragments
        assert r["kwargs"]["staleness"] == example.staleness_of(args.seed, args.tau, r["step"])
        if per_fragment:
            assert r["optimizer"] == fragment and "fragment" not in r["kwargs"]
        else:
            assert r["optimizer"] == 0 and r["kwargs"]["fragment"] == fragment
    # The optimizers cover torchtitan's fragments: every trainable parameter of the model once.
    params = [p for opt in recorder.optimizers for g in opt.param_groups for p in g["params"]]
    assert len({id(p) for p in params}) == len(params) == len(list(model.parameters()))
    if outer == "gated-nesterov":
        for opt in recorder.optimizers:
            assert isinstance(opt, cgad.torch.Gated) and isinstance(opt.optimizer, torch.optim.SGD)
            assert (opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"], opt.param_groups[0]["nesterov"]) \
                == (0.7, 0.9, True)

    # The reference: the same optimizers built afresh, given the recorded pseudo-gradients and keywords, from the
    # debug model's initial weights (each step starts where the fragment's previous outer step left it: torchft
    # restores a synced fragment to its global parameters before the outer step).
    ref_model, _, ref_optimizers = reference(recipe, args)
    ref_params = {id(p): p for p in ref_model.parameters()}
    for r in steps:
        opt = ref_optimizers[r["optimizer"]]
        stepped = Recorder.stepped(opt, r["kwargs"])
        assert all(id(p) in ref_params for p in stepped)
        assert same_bits(r["before"], stepped), f"step {r['step']} did not start from the global parameters"
        assert any(d.abs().max() > 0 for d in r["delta"])
        for p, d in zip(stepped, r["delta"]):
            p.grad = d.clone()
        report = opt.step(**r["kwargs"])
        assert same_bits(r["after"], stepped), f"step {r['step']} moved the parameters otherwise"
        assert not same_bits(r["before"], r["after"])
        assert (report.applied, report.sigma, report.tau_effective) == \
            (r["report"].applied, r["report"].sigma, r["report"].tau_effective)
        if outer == "pa-cgad":  # a fragment synced every P rounds is P - 1 rounds old from its second sync on
            age = min(r["step"] - 1, args.fragments - 1)
            assert report.tau_effective == max(r["kwargs"]["staleness"], age)
        for p in stepped:
            p.grad = None
    assert losses and all(math.isfinite(x) for x in losses)


def test_torchtitans_launcher_takes_the_recipes_config_function_and_its_outer_optimizer_fields(recipe):
    from torchtitan.config import ConfigManager
    config = ConfigManager().parse_args(["--module", "torchtitan_cgad", "--config", "llama3_cgad_debugmodel",
                                         "--cgad_outer", "cgad", "--cgad_outer_lr", "0.002"])
    assert type(config) is recipe.CGADTrainer.Config  # torchtitan/train.py's config.build() makes a CGADTrainer
    assert (config.cgad_outer, config.cgad_outer_lr, config.cgad_tau_cut) == ("cgad", 0.002, 32)
    assert config.fault_tolerance.semi_sync_method == "diloco" and config.fault_tolerance.num_fragments == 2


def test_cgad_trainer_is_what_its_config_builds_and_rebinds_torchtitans_call_only_inside_train(recipe, monkeypatch):
    trainer_module, manager_module = recipe.titan_trainer, recipe.titan_manager
    original = manager_module.maybe_semi_sync_training
    assert recipe.CGADTrainer.Config._owner is recipe.CGADTrainer  # config.build() makes a CGADTrainer
    seen = []

    def torchtitans_train(self):  # FaultTolerantTrainer.train(), up to where it calls the name
        seen.append(trainer_module.maybe_semi_sync_training)
        raise RuntimeError("stopped")

    monkeypatch.setattr(trainer_module.FaultTolerantTrainer, "train", torchtitans_train)
    trainer = object.__new__(recipe.CGADTrainer)
    trainer.config = argparse.Namespace(cgad_outer="cgad", cgad_outer_lr=1e-3, cgad_alpha=0.2, cgad_tau_cut=32,
                                        cgad_state="fp32")
    with pytest.raises(RuntimeError, match="stopped"):
        trainer.train()
    assert seen[0].__qualname__ == "semi_sync_training.<locals>.maybe_semi_sync_training"  # the recipe's
    assert trainer_module.maybe_semi_sync_training is original  # restored, though train() raised
    # Without semi-sync DiLoCo, the recipe's function is torchtitan's: no context of its own.
    from torchtitan.experiments.torchft.config.job_config import FaultTolerance
    assert isinstance(seen[0](FaultTolerance(enable=False), None, None, 0, None), contextlib.nullcontext)

    # Rebinding twice, or over a torchtitan whose function takes other parameters, is refused and changes nothing.
    with recipe.rebound(seen[0]):
        with pytest.raises(cgad.InputError, match="rebound already"):
            with recipe.rebound(seen[0]):
                pass
    assert trainer_module.maybe_semi_sync_training is original

    def other(ft_config, ft_manager, model, optimizer, fragment_fn=None):
        pass

    monkeypatch.setattr(manager_module, "maybe_semi_sync_training", other)
    monkeypatch.setattr(trainer_module, "maybe_semi_sync_training", other)
    with pytest.raises(cgad.InputError, match="this recipe knows"):
        with recipe.rebound(seen[0]):
            pass
    assert trainer_module.maybe_semi_sync_training is other


def test_an_unknown_outer_optimizer_is_refused_in_one_line(recipe):
    assert recipe.OUTER == example.OUTER  # the example's --outer choices, checked before torchtitan is imported
    with pytest.raises(cgad.InputError, match="must be one of gated-nesterov, cgad, pa-cgad") as e:
        recipe.outer_optimizers(recipe.Outer(kind="sgd"), [torch.nn.Linear(2, 2)])
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("argv, says", [
    (["--sync-every", "3"], "--sync-every must be a multiple of --fragments"),
    (["--fragment-sync-delay", "2"], "--fragment-sync-delay must be below"),
    (["--fragments", "9", "--sync-every", "18"], "--fragments must be <= 8"),
    (["--outer", "sgd"], "invalid choice"),
    (["--outer-lr", "0"], "--outer-lr"),
])
def test_the_example_refuses_bad_arguments_in_one_line_with_status_2(argv, says, capsys):
    # Checked before torchtitan is needed, so on every interpreter; in-process (the program itself: below).
    with pytest.raises(SystemExit) as exit:
        example.parse_args(argv)
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert exit.value.code == 2 and len(errors) == 1 and says in errors[0], errors


def test_the_example_program_exits_2_with_one_error_line_and_no_traceback():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), RUST_LOG="warn")
    run = subprocess.run([sys.executable, str(SOURCE_DIR / "examples" / "torchtitan_diloco.py"), "--fragments", "0"],
                         capture_output=True, text=True, env=env, timeout=180)
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    assert run.returncode == 2 and len(errors) == 1 and "--fragments" in errors[0], run.stderr
    assert "Traceback" not in run.stderr
