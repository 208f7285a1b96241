"""Asynchronous DiLoCo on torchft's ParameterServer (cgad.torch.parameter_server, examples/async_diloco_torchft.py;
docs/python.md): three worker processes of different speeds, worker 0 killed (SIGKILL) and restarted with a new
session, the server killed and restarted from its checkpoint -- one run, its processes spawned once. Checked: the
staleness of every event is the real version difference, the faults happened and the run went on past them, and
the server that resumed from its checkpoint ended where a fresh optimizer replaying the server's own event log
(Δ, τ) ends, bit for bit (θ and the optimizer's state). torchft needs torch 2.x: skips on Debian's torch 1.13."""
import json
import os

import pytest
import torch

from conftest import bits, load_example, peer, state_bits

ARGS = ["--outer", "cgad", "--workers", "3", "--rounds", "5", "--kill-worker-at", "2", "--kill-server-at", "4",
        "--inner-steps", "2", "--batch", "8", "--context", "4", "--width", "8", "--layers", "1", "--slow", "0.02",
        "--timeout", "120"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    peer("torchft")
    example = load_example("async_diloco_torchft")
    folder = tmp_path_factory.mktemp("ps")
    argv = ARGS + ["--dir", str(folder), "--json", str(folder / "summary.json")]
    args = example.parse_args(argv)  # before the run: then --dir holds a checkpoint, which a new run refuses
    assert example.main(argv) == 0
    with open(folder / "summary.json") as f:
        return example, args, folder, json.load(f)


def applied(reason):
    return reason in ("none", "zero-gate")  # a zero gate run by on_zero_gate="apply" still moves θ


def test_the_faults_happened_and_the_run_went_on(run):
    example, args, folder, out = run
    assert sorted(f["killed"] for f in out["faults"]) == ["server", "worker"]  # in either order: timing decides
    assert out["stepped"] == len(out["log"]) == sum(applied(e["reason"]) for e in out["log"]) == out["events"]
    for k in range(3):  # each worker's last process pushed its --rounds; worker 0's first one pushed before its kill
        with open(folder / f"worker{k}.jsonl") as f:
            pids = [json.loads(line)["pid"] for line in f]
        counts = [pids.count(p) for p in dict.fromkeys(pids)]
        # (the launcher kills worker 0 once the server holds 2 of its pushes: the second may be answered and the
        # process killed before it logs it, so its log holds 1 or 2)
        assert counts[-1] == args.rounds and len(counts) == (2 if k == 0 else 1) and counts[0] >= 1
    assert out["events"] >= 3 * args.rounds + 2
    assert out["held_out_after"] < out["held_out_before"]


def test_tau_is_the_real_version_difference(run):
    _, _, folder, out = run
    version = 0
    for event in out["log"]:  # the server's own log, across its restart
        assert event["tau"] == version - event["started"]
        version += applied(event["reason"])
    assert max(int(t) for t in out["tau_histogram"]) >= 1  # workers of different speeds make stale pushes
    for k in range(3):  # what each worker was answered: τ = the version before its Δ - the version it pulled
        with open(folder / f"worker{k}.jsonl") as f:
            for line in f:
                r = json.loads(line)
                assert r["tau"] == r["version"] - 1 - r["pulled"]


def test_the_resumed_server_is_a_replay_of_its_events_bit_for_bit(run):
    example, args, folder, out = run
    checkpoint, events = example.paths(args)
    saved = torch.load(checkpoint, weights_only=False)
    vocab, _, _ = example.task(args)
    params = list(example.initial_model(args, vocab).parameters())
    fresh = example.outer_optimizer(args, params)
    names = [f"{i}.pt" for i in range(saved["stepped"])]
    # every stepped event, and nothing else: no event past the checkpoint, no temporary file of a killed write
    assert sorted(os.listdir(events)) == sorted(names)
    for name, logged in zip(names, saved["log"]):
        event = torch.load(os.path.join(events, name), weights_only=False)
        offset = 0
        for p in params:
            p.grad = event["delta"][offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        assert fresh.step(staleness=event["tau"]).reason == logged[4]
    assert [bits(p).tobytes() for p in params] == [bits(p).tobytes() for p in saved["params"]]
    resumed = example.outer_optimizer(args, list(example.initial_model(args, vocab).parameters()))
    resumed.load_state_dict(saved["optimizer"])  # the server's last checkpointed state (load resumes bit for bit)
    assert state_bits(resumed) == state_bits(fresh)
