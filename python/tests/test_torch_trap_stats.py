"""opt.trap_stats() against `cgad noise --stream` on one recorded stream: a bf16 model of two tensors with 8-bit
bnb state, the first tensor's pseudo-gradient spanning five decades (so bitsandbytes' map stores some of its v as
0) and the second spanning none. Per tensor, the four trap metrics must be the
CLI's to the last bit; watching is opt-in and refused where there is no second moment."""
import json
import math
import subprocess

import pytest
import torch

import cgad
import cgad.torch

from conftest import cgad_binary

SIZE, EVENTS = 256, 40


def recorded_stream():
    """(initial parameters, per-event pseudo-gradients, staleness): every value bf16-representable, since torch
    keeps a bf16 parameter's .grad in bf16."""
    i = torch.arange(2 * SIZE, dtype=torch.float64)
    params = (0.01 * (i % 7)).to(torch.bfloat16).float()
    events = []
    for e in range(EVENTS):
        wobble = 1.0 + 0.5 * torch.sin(7.0 * i + 3.0 * e)
        scale = torch.where(i < SIZE, 10.0 ** (-5.0 * i / (SIZE - 1)), torch.ones_like(i))
        sign = 1.0 - 2.0 * ((i + e) % 2)
        events.append(((sign * scale * wobble).to(torch.bfloat16).float(), e % 3))
    return params, events


def cli_trap(tmp_path, params, events):
    stream = tmp_path / "two.jsonl"
    with open(stream, "w") as f:
        # json writes a float32's double as its shortest decimal, which parses back to that float32 exactly.
        f.write(json.dumps({"params": params.tolist(), "tensors": [SIZE, SIZE]}) + "\n")
        for grad, tau in events:
            f.write(json.dumps({"grad": grad.tolist(), "tau": tau}) + "\n")
    run = subprocess.run([cgad_binary(), "noise", "--stream", str(stream), "--optimizers", "adam-decay", "--state",
                          "q8", "--q8-semantics", "bnb", "--min-q8-size", "0", "--log-every", str(EVENTS), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return [t["trap"] for t in json.loads(run.stdout)["runs"][0]["samples"][-1]["tensors"]]


def torch_trap(params, events):
    model = [torch.nn.Parameter(params[:SIZE].to(torch.bfloat16)), torch.nn.Parameter(params[SIZE:].to(torch.bfloat16))]
    opt = cgad.torch.AdamDecay(model, state="q8", q8_semantics="bnb", min_q8_size=0)
    opt.watch_traps()
    for grad, tau in events:
        for p, g in zip(model, (grad[:SIZE], grad[SIZE:])):
            p.grad = g.to(torch.bfloat16)
        opt.step(staleness=tau)
    return opt.trap_stats()


def test_trap_stats_agree_with_cgad_noise_per_tensor(tmp_path):
    params, events = recorded_stream()
    cli = cli_trap(tmp_path, params, events)
    ours = torch_trap(params, events)
    assert sorted(ours) == [0, 1]
    for k in (0, 1):
        for name in ("v_zero_fraction", "m_zero_fraction", "step_over_5lr_fraction", "max_step_over_lr"):
            got, want = ours[k]["since_start"][name], cli[k][name]
            assert got == want, f"tensor {k} {name}: {got.hex()} != {float(want).hex()}"
    # v is stored as 0 in the wide tensor only; both tensors moved (the 5·lr share is 0 in both here: bf16
    # parameters near 0.01 move by whole bf16 ulps, at most about 4·lr in this stream).
    assert ours[0]["since_start"]["v_zero_fraction"] > 0 and ours[1]["since_start"]["v_zero_fraction"] == 0
    assert min(ours[k]["since_start"]["max_step_over_lr"] for k in (0, 1)) > 0


def test_a_group_mixing_float32_and_bfloat16_has_the_stats_of_one_group_per_dtype():
    """A mixed group is one fast-path optimizer per dtype (docs/python.md): its trap statistics per parameter are
    those of the same parameters in one param group per dtype, to the bit, on the wide stream that stores v as 0."""
    params, events = recorded_stream()

    def model():
        return [torch.nn.Parameter(params[:SIZE].to(torch.bfloat16)), torch.nn.Parameter(params[SIZE:].clone())]

    mixed, split = model(), model()
    opts = [cgad.torch.AdamDecay(mixed, state="q8", q8_semantics="bnb", min_q8_size=0),
            cgad.torch.AdamDecay([{"params": [split[0]]}, {"params": [split[1]]}], state="q8", q8_semantics="bnb",
                                 min_q8_size=0)]
    for opt in opts:
        opt.watch_traps()
    for grad, tau in events:
        for ps in (mixed, split):
            ps[0].grad, ps[1].grad = grad[:SIZE].to(torch.bfloat16), grad[SIZE:].clone()
        for opt in opts:
            opt.step(staleness=tau)
    got, want = (opt.trap_stats() for opt in opts)
    assert got == want
    assert got[0]["since_start"]["v_zero_fraction"] > 0  # the trap fired in the bf16 tensor's stats


def test_last_step_is_one_step_and_watching_is_opt_in():
    p = torch.nn.Parameter(torch.ones(300))
    opt = cgad.torch.CGAD([p], lr=0.5, state="q8")
    p.grad = torch.full((300,), 1e-3)
    opt.step()
    with pytest.raises(cgad.InputError, match="watch_traps"):
        opt.trap_stats()
    opt.watch_traps()
    before = p.detach().clone()
    opt.step()
    moved = ((p.detach().double() - before.double()).abs() / float(torch.tensor(0.5))).max().item()
    first = opt.trap_stats()[0]
    assert first["last"] == first["since_start"]
    assert first["last"]["max_step_over_lr"] == moved and math.isfinite(moved) and moved > 0
    p.grad = torch.full((300,), 1e-9)
    opt.step()
    second = opt.trap_stats()[0]
    assert second["last"]["max_step_over_lr"] < second["since_start"]["max_step_over_lr"] == moved


def test_optimizers_without_a_second_moment_refuse_to_watch():
    opt = cgad.torch.Nesterov([torch.nn.Parameter(torch.ones(3))])
    with pytest.raises(cgad.InputError, match="second moment"):
        opt.watch_traps()


def test_a_step_at_zero_lr_is_the_last_step_and_counts_nothing():
    # A step at lr = 0 has no |Δθ|/lr to tally; "last" must then be that step's (empty), not the step before's.
    p = torch.nn.Parameter(torch.ones(300))
    opt = cgad.torch.CGAD([p], lr=0.5, state="q8")
    opt.watch_traps()
    p.grad = torch.full((300,), 1e-3)
    opt.step()
    first = opt.trap_stats()[0]
    assert first["last"]["max_step_over_lr"] > 0
    opt.param_groups[0]["lr"] = 0.0
    opt.step()
    after = opt.trap_stats()[0]
    assert after["last"]["max_step_over_lr"] == 0 and after["last"]["step_over_5lr_fraction"] == 0
    assert after["since_start"] == first["since_start"]  # the lr = 0 step added nothing since the start either
