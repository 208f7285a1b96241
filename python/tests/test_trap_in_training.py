"""examples/trap_in_training.py: the recorded stream is what the server received (one event per round, a nonzero
pseudo-gradient per event, the layout of the model's tensors), the model learns, and the per-tensor study reports
every tensor kind."""
import json
import os
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR, cgad_binary

sys.path.insert(0, str(SOURCE_DIR / "examples"))
import trap_in_training as example  # noqa: E402

TINY = ["--width", "8", "--heads", "2", "--layers", "1", "--context", "8", "--batch", "4", "--workers", "2",
        "--inner-steps", "2", "--rounds", "6", "--min-q8-size", "0"]


def test_tensor_kinds_follow_parameter_names():
    args = example.parse_args(TINY)
    names = [n for n, _ in example.GPT(5, args).named_parameters()]
    kinds = {n: example.kind_of(n) for n in names}
    assert kinds["embed.token.weight"] == kinds["embed.position.weight"] == "embedding"
    assert kinds["blocks.0.attn.qkv.weight"] == kinds["blocks.0.attn.proj.bias"] == "attention"
    assert kinds["blocks.0.mlp.fc1.weight"] == kinds["blocks.0.mlp.fc2.bias"] == "MLP"
    assert kinds["head.weight"] == "readout"
    assert kinds["blocks.0.ln1.weight"] == kinds["ln_f.bias"] == "norm"


@pytest.mark.parametrize("inner", ["adamw", "sgd"])
def test_recorded_stream_is_what_the_server_received(tmp_path, inner):
    stream = tmp_path / "s.jsonl"
    run = subprocess.run([sys.executable, str(SOURCE_DIR / "examples" / "trap_in_training.py"), *TINY,
                          "--inner", inner, "--stream", str(stream)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = stream.read_text().splitlines()
    header = json.loads(lines[0])
    assert sum(header["tensors"]) == len(header["params"])
    events = [json.loads(line) for line in lines[1:]]
    assert len(events) == 6
    for e in events:  # a worker that trained sends a nonzero pseudo-gradient (a shared snapshot would send 0)
        assert len(e["grad"]) == len(header["params"])
        assert any(g != 0.0 for g in e["grad"])
        assert 0 <= e["tau"]


def test_study_reports_every_tensor_kind(tmp_path):
    run = subprocess.run([sys.executable, str(SOURCE_DIR / "examples" / "trap_in_training.py"), *TINY,
                          "--inner", "sgd", "--outlier-dims", "2", "--outlier-scale", "100", "--cgad", cgad_binary()],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    rows = [line.split(" | ") for line in run.stdout.splitlines()
            if line.count(" | ") == 6 and not line.startswith("scenario |")]
    scenarios = {r[0] for r in rows}
    assert len(scenarios) == 6  # Adam-Decay, CGAD, CGAD skip x dynamic, zero-free
    for s in scenarios:
        assert {r[1] for r in rows if r[0] == s} == {"embedding", "attention", "MLP", "readout", "norm"}
    for r in rows:
        assert 0.0 <= float(r[3]) <= 1.0 and float(r[5].split()[0]) >= 0.0


def test_bad_arguments_are_refused():
    for bad in (["--width", "6", "--heads", "4"], ["--outlier-scale", "0"], ["--outlier-dims", "99"]):
        run = subprocess.run([sys.executable, str(SOURCE_DIR / "examples" / "trap_in_training.py"), *bad],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 2, run.stderr
        assert len(run.stderr.splitlines()) == 1 and run.stderr.startswith("trap_in_training: error: "), run.stderr


def test_a_diverged_inner_run_is_reported_and_not_studied(tmp_path):
    stream = tmp_path / "s.jsonl"
    run = subprocess.run([sys.executable, str(SOURCE_DIR / "examples" / "trap_in_training.py"), *TINY,
                          "--inner", "sgd", "--inner-lr", "1e30", "--stream", str(stream)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    assert "not finite" in run.stderr and "lower --inner-lr" in run.stderr
    assert "Traceback" not in run.stderr and not stream.exists()
