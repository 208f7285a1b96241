"""cgad as the outer optimizer of torchft's DiLoCo (docs/python.md, "torchft"), run by examples/torchft_diloco.py:
two replica groups in threads of this process, torchft's in-process Lighthouse, a Manager per group over gloo on
the loopback, replica group 1 stopped and restarted mid-run. Each test checks that the held-out loss falls, that
the two groups take every outer step they both run with the same staleness, the same report and the same bits of
outer-optimizer state and global parameters, and that the restarted group received cgad's state through torchft's
state_dict transfer (it starts its first step after healing from the survivor's state, not from a fresh one).
torchft needs torch 2.x: on Debian's torch 1.13 these skip (fail where CGAD_REQUIRE_PEERS=1), except the refusals
of bad arguments, which the example makes before it needs torchft."""
import os
import subprocess
import sys

import pytest
import torch

import cgad
import cgad.torch

from conftest import SOURCE_DIR, load_example, peer

EXAMPLE = SOURCE_DIR / "examples" / "torchft_diloco.py"


@pytest.fixture(scope="module")
def example():
    peer("torchft")
    return load_example("torchft_diloco")


@pytest.fixture
def loopback(monkeypatch):
    """gloo on the loopback only; torchft's Rust side quiet; one torch thread per replica group."""
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    monkeypatch.setenv("RUST_LOG", "warn")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run_both(example, *argv):
    args = example.parse_args(list(argv) + ["--timeout", "60"])
    results = example.run(args, log=lambda line: None)
    return args, results[0], results[1]


def float32(x):
    """x rounded once to float32, as the fast path rounds its double σ (docs/design.md §5)."""
    return torch.tensor(x, dtype=torch.float64).to(torch.float32).item()


def same_step(a, b):
    """Whether two records of one outer step have the same bits: staleness, fragment, report, the state before
    and after, the stepped parameters."""
    keys = ("step", "staleness", "fragment", "tau_effective", "sigma", "reason", "applied", "state_before",
            "state_after")
    return all(a[k] == b[k] for k in keys) and all(same_bits(a[k], b[k]) for k in ("params_before", "params"))


def same_bits(a, b):
    """Whether two {name: float32 tensor} hold the same names and bits."""
    return a.keys() == b.keys() and all(torch.equal(a[n].view(torch.int32), b[n].view(torch.int32)) for n in a)


def check_run(example, args, survivor, restarted, fresh_state):
    """What every configuration must show; returns the two groups' records."""
    records0, _ = survivor
    records1, _ = restarted
    steps = list(range(1, args.outer_steps + 1))
    # The survivor committed every step; the restarted group every step before it stopped, then, after healing,
    # every step from the next on (torchft heals it in the quorum of that step, and it takes part in it).
    assert [r["step"] for r in records0] == steps
    assert [r["step"] for r in records1] == steps
    assert [r["incarnation"] for r in records1] == [0] * args.restart_at + [1] * (args.outer_steps - args.restart_at)
    for a, b in zip(records0, records1):
        assert same_step(a, b), f"the groups differ at outer step {a['step']} (incarnation {b['incarnation']})"
    # The restarted group's first step after healing started from the survivor's state after the step before,
    # which is not a fresh optimizer's: cgad's state arrived through torchft's transfer.
    healed = records1[args.restart_at]
    assert healed["state_before"] == records0[args.restart_at - 1]["state_after"]
    assert healed["state_before"] != fresh_state
    # Each step started from torchft's backup of the global parameters of the fragment it synced: the initial
    # weights, then what the fragment's last outer step left -- in the restarted group, the survivor's, healed.
    # (A step of another fragment than the one torchft synced would start from that one's local weights.)
    for records in (records0, records1):
        last = {n: p.detach() for n, p in example.make_model(args).named_parameters()}
        for r in records:
            assert same_bits(r["params_before"], {n: last[n] for n in r["params_before"]}), r["step"]
            last.update(r["params"])
    # Each step got the staleness the pre-hook injects for its manager step.
    for r in records0:
        assert r["staleness"] == example.staleness_of(args.seed, args.tau, r["step"])
        assert r["applied"] is True
    before = example.held_out_loss(example.make_model(args), args)
    after = example.held_out_loss(example.global_model(args, records0), args)
    assert after < 0.5 * before, (before, after)
    return records0, records1


@pytest.mark.parametrize("state", ["fp32", "q8"])
def test_diloco_with_cgad_heals_a_restarted_group_and_both_groups_step_alike(example, loopback, state):
    args, survivor, restarted = run_both(example, "--outer", "cgad", "--state", state, "--outer-steps", "8",
                                         "--restart-at", "3", "--tau", "40", "--tau-cut", "32")
    fresh = example.state_bytes(example.make_outer(args, list(example.make_model(args))))
    records0, _ = check_run(example, args, survivor, restarted, fresh)
    for r in records0:
        # One fragment: the gate sees the injected staleness itself, with the library's σ (0 from τ_cut on).
        assert r["tau_effective"] == r["staleness"]
        assert r["sigma"] == float32(cgad.sigma(r["staleness"], alpha=0.2, tau_cut=32))
        assert r["reason"] == ("zero-gate" if r["staleness"] >= 32 else "none")
    assert any(r["reason"] == "zero-gate" for r in records0) and any(r["reason"] == "none" for r in records0)
    # DiLoCo (one fragment) ends each sync with the model at the new global parameters: the two models match.
    model0, model1 = survivor[1], restarted[1]
    for (name, p0), p1 in zip(model0.named_parameters(), model1.parameters()):
        assert torch.equal(p0.detach().view(torch.int32), p1.detach().view(torch.int32)), name


def require_gated(outer):
    if outer == "gated" and not hasattr(cgad.torch, "Gated"):
        pytest.skip("this cgad has no cgad.torch.Gated (the wrapper over an existing optimizer)")


@pytest.mark.parametrize("outer, state", [("pa-cgad", "fp32"), ("pa-cgad", "q8"), ("gated", "fp32")])
def test_streaming_diloco_with_pa_cgad_gates_each_fragment_by_its_torchft_age(example, loopback, outer, state):
    # pa-cgad: cgad.torch.PACGAD(fragments="groups"); gated: cgad.torch.Gated(AdamW, fragments="groups"), PA-CGAD
    # over torch's AdamW.
    require_gated(outer)
    fragments = 3
    args, survivor, restarted = run_both(example, "--outer", outer, "--state", state, "--fragments", str(fragments),
                                         "--sync-every", "6", "--fragment-sync-delay", "1", "--outer-steps", "10",
                                         "--restart-at", "4", "--tau", "3")
    fresh = example.state_bytes(example.make_outer(args, list(example.make_model(args))))
    records0, records1 = check_run(example, args, survivor, restarted, fresh)
    for r in records0 + records1:
        s = r["step"]
        # torchft syncs fragment (s - 1) mod P at manager step s; PACGAD's age is the rounds the fragment missed:
        # s - 1 before its first sync, P - 1 after (docs/design.md §3), also across the restart (its rounds travel
        # in cgad's state_dict).
        assert r["fragment"] == (s - 1) % fragments
        assert r["tau_effective"] == max(r["staleness"], min(s - 1, fragments - 1)), r["step"]
        # The step moved exactly the synced fragment's parameters.
        assert set(r["params"]) == {n for n, _ in example.make_model(args)[r["fragment"]].named_parameters(
            prefix=str(r["fragment"]))}
    assert any(r["staleness"] < r["tau_effective"] for r in records0)  # the age, not τ, gated some steps


def test_diloco_with_gated_adamw_heals_a_restarted_group_and_both_groups_step_alike(example, loopback):
    require_gated("gated")
    args, survivor, restarted = run_both(example, "--outer", "gated", "--outer-steps", "8", "--restart-at", "3",
                                         "--tau", "40", "--tau-cut", "32")
    fresh = example.state_bytes(example.make_outer(args, list(example.make_model(args))))
    records0, _ = check_run(example, args, survivor, restarted, fresh)
    for r in records0:
        assert r["tau_effective"] == r["staleness"]
        assert r["sigma"] == float32(cgad.sigma(r["staleness"], alpha=0.2, tau_cut=32))


def test_a_restarted_group_that_does_not_receive_cgads_state_is_caught(example, loopback, monkeypatch):
    """The checks above can fail: with cgad's load_state_dict made to load nothing, the restarted group keeps a
    fresh optimizer after healing, and its first step after healing differs from the survivor's."""
    monkeypatch.setattr(cgad.torch.CGAD, "load_state_dict", lambda self, state_dict: None)
    args, survivor, restarted = run_both(example, "--outer", "cgad", "--outer-steps", "5", "--restart-at", "3")
    records0, records1 = survivor[0], restarted[0]
    assert all(same_step(a, b) for a, b in zip(records0[:3], records1[:3]))
    assert not same_step(records0[3], records1[3])


def run_example(*argv):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), RUST_LOG="warn")
    return subprocess.run([sys.executable, str(EXAMPLE), *argv], capture_output=True, text=True, env=env,
                          timeout=180)


def test_the_example_runs_streaming_diloco_and_reports_the_groups_agree(example):
    run = run_example("--outer", "pa-cgad", "--fragments", "2", "--fragment-sync-delay", "1", "--outer-steps", "6",
                      "--restart-at", "2", "--state", "q8", "--timeout", "60")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "group 1 restarted and healed: it took outer steps 3..6 after healing" in run.stdout
    assert "groups agree bit for bit on 6 common outer steps" in run.stdout
    summary = [line for line in run.stdout.splitlines() if line.startswith("summary:")]
    assert len(summary) == 1
    before, after = (float(x) for x in summary[0].split("held-out loss ")[1].split(" -> "))
    assert after < before


@pytest.mark.parametrize("argv, says", [
    (["--fragments", "2"], "--fragments > 1 (Streaming DiLoCo) takes --outer pa-cgad or gated"),
    (["--outer", "pa-cgad", "--fragments", "2", "--sync-every", "7"], "--sync-every must be a multiple"),
    (["--outer", "pa-cgad", "--fragments", "2", "--sync-every", "8", "--fragment-sync-delay", "4"],
     "--fragment-sync-delay must be below"),
    (["--outer", "pa-cgad", "--fragments", "4", "--tau-cut", "3"], "--fragments must be <= --tau-cut"),
    (["--outer", "gated", "--fragments", "4", "--tau-cut", "3"], "--fragments must be <= --tau-cut"),
    (["--restart-at", "0"], "--restart-at must be -1 or in 1..--outer-steps - 1"),
    (["--outer-steps", "4", "--restart-at", "4"], "--restart-at must be -1 or in 1..--outer-steps - 1"),
    (["--tau", "-1"], "argument --tau: must be an integer >= 0, got -1"),
    (["--timeout", "0"], "argument --timeout: must be a finite number > 0"),
    (["--outer", "sgd"], "invalid choice"),
])
def test_the_example_refuses_bad_arguments_in_one_line_with_status_2(argv, says, capsys):
    # Checked before torchft is needed, so on every interpreter; in-process (the program itself: below).
    with pytest.raises(SystemExit) as exit:
        load_example("torchft_diloco").parse_args(argv)
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert exit.value.code == 2 and len(errors) == 1 and says in errors[0], errors


def test_the_example_program_exits_2_with_one_error_line_and_no_traceback():
    run = run_example("--outer", "cgad", "--fragments", "2")
    assert run.returncode == 2
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "takes --outer pa-cgad" in errors[0], run.stderr
    assert "Traceback" not in run.stderr
