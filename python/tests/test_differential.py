"""cgad.replay and cgad.noise are `cgad replay` and `cgad noise`: the same records, string for string, from a file
or from Python data, through either backend; the same noise samples, number for number; bad input refused."""
import json
import subprocess

import numpy as np
import pytest

import cgad
from conftest import cgad_binary

STREAM = {
    "params": [0.5, -1.25, 2.0, 0.0078125, -3.5],
    "tensors": [3, 2],
    "events": [{"grad": [0.1, -0.2, 0.3, 1e-4, -5.0], "tau": 0},
               {"grad": [0.1, float("nan"), 0.3, 1e-4, -5.0], "tau": 1},
               {"grad": [-0.7, 0.2, 1e-3, 2.0, 0.5], "tau": 40},
               {"grad": [0.25, 0.5, -0.125, 3.0, 1.0], "tau": 3}],
}


def cli_replay(tmp_path, *options):
    path = tmp_path / "stream.jsonl"
    path.write_text(cgad.differential._stream_text(STREAM))
    out = tmp_path / "out.jsonl"
    run = subprocess.run([cgad_binary(), "replay", "--input", str(path), "--output", str(out), *options],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return path, [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("backend,options,kwargs", [
    ("reference", ["--precision", "128"], dict(precision=128)),
    ("reference", ["--optimizer", "nesterov", "--lr", "0.5"], dict(optimizer="nesterov", lr=0.5)),
    ("fastpath", ["--state", "q8", "--q8-semantics", "bnb", "--min-q8-size", "0"],
     dict(state="q8", q8_semantics="bnb", min_q8_size=0)),
    ("fastpath", ["--optimizer", "pa-cgad", "--fragments", "1", "--params", "fp32", "--state", "bf16",
                  "--rounding", "stochastic", "--seed", "4"],
     dict(optimizer="pa-cgad", fragments=1, params="fp32", state="bf16", rounding="stochastic", seed=4)),
    ("fastpath", ["--state", "q8", "--v-map", "zero-free", "--min-q8-size", "0"],
     dict(state="q8", v_map="zero-free", min_q8_size=0)),
], ids=["reference", "reference-nesterov", "fastpath-q8-bnb", "fastpath-pa-cgad-bf16", "fastpath-q8-zero-free"])
def test_replay_is_cgad_replay(tmp_path, backend, options, kwargs):
    path, expected = cli_replay(tmp_path, "--backend", backend, *options)
    from_file = cgad.replay(path, backend=backend, **kwargs)
    from_data = cgad.replay(STREAM, backend=backend, **kwargs)
    assert from_file.records == expected
    assert from_data.records == expected
    assert from_data.counts == {"events": 4, "nonfinite": 1, "zero_gate": 0, "overflowing": 0}
    assert "non-finite" in from_data.notes
    assert from_data.params.shape == (4, 5) and from_data.skipped.tolist() == [False, True, False, False]
    assert np.isnan(from_data.sigma[1]) and from_data.tau_effective.tolist() == [0, 1, 40, 3]
    assert from_data.params[-1].tolist() == [float(x) for x in expected[-1]["params"]]


def test_replay_refuses_what_the_command_refuses():
    with pytest.raises(cgad.InputError, match="state applies to backend='fastpath' only"):
        cgad.replay(STREAM, state="q8")
    with pytest.raises(cgad.InputError, match="v_map applies to backend='fastpath' only"):
        cgad.replay(STREAM, v_map="zero-free")
    with pytest.raises(cgad.InputError, match="backend must be"):
        cgad.replay(STREAM, backend="gpu")
    with pytest.raises(cgad.InputError, match="tau-cut must be an integer"):
        cgad.replay(STREAM, tau_cut=0)
    with pytest.raises(cgad.InputError, match="parameter vector has 4 elements|4"):
        cgad.replay({"params": [1.0, 2.0, 3.0, 4.0], "tensors": [3], "events": []})
    with pytest.raises(cgad.InputError, match="cannot open|No such file"):
        cgad.replay("/nonexistent/stream.jsonl")


def test_noise_is_cgad_noise():
    run = subprocess.run([cgad_binary(), "noise", "--optimizers", "cgad", "--state", "q8", "--size", "300",
                          "--steps", "60", "--log-every", "20", "--seeds", "3", "--json"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    cli = json.loads(run.stdout)
    ours = cgad.noise("cgad", state="q8", size=300, steps=60, log_every=20, seed=3)
    assert ours["precision_bits"] == cli["precision_bits"]
    (expected,) = cli["runs"]
    assert ours["scenario"] == expected["scenario"]
    samples = ours["samples"]
    assert samples["step"].tolist() == [s["step"] for s in expected["samples"]]
    for k, s in enumerate(expected["samples"]):
        for part in ("v", "m", "theta"):
            for stat in ("mean_abs", "rms", "max_abs", "bias"):
                assert samples[f"{part}_{stat}"][k] == s[part][stat], (k, part, stat)
        for key, value in s["trap"].items():
            assert samples[key][k] == value, (k, key)
        assert samples["gated_to_zero"][k] == s["gated_to_zero"]
    assert ours["final"]["theta_fast"].shape == (300,)
    with pytest.raises(cgad.InputError):
        cgad.noise("sgd")


def test_noise_on_a_stream_with_the_zero_free_map_is_cgad_noise_per_tensor(tmp_path):
    # Two tensors, q8 state with bitsandbytes' semantics and the zero-free v map: cgad.noise's per-tensor figures
    # (its "tensors") are the command's, number for number, and v_map reaches the engine (the scenario says so).
    rng = np.random.default_rng(5)
    sizes = (300, 40)
    scale = 1e5 ** -rng.uniform(size=sum(sizes))
    stream = tmp_path / "s.jsonl"
    with open(stream, "w") as f:
        f.write(json.dumps({"params": rng.standard_normal(sum(sizes)).tolist(), "tensors": list(sizes)}) + "\n")
        for tau in (0, 3, 40, 1, 7, 0, 2):
            f.write(json.dumps({"grad": (scale * rng.standard_normal(sum(sizes))).tolist(), "tau": tau}) + "\n")
    run = subprocess.run([cgad_binary(), "noise", "--optimizers", "cgad", "--state", "q8", "--q8-semantics", "bnb",
                          "--v-map", "zero-free", "--min-q8-size", "0", "--stream", str(stream), "--log-every",
                          "1000", "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    (expected,) = json.loads(run.stdout)["runs"]
    ours = cgad.noise("cgad", state="q8", q8_semantics="bnb", v_map="zero-free", min_q8_size=0, stream=stream,
                      log_every=1000)
    assert ours["scenario"] == expected["scenario"] and ":zero-free" in ours["scenario"]
    cli = expected["samples"][-1]["tensors"]
    assert [t["size"] for t in ours["tensors"]] == [t["size"] for t in cli] == list(sizes)
    for k, (mine, theirs) in enumerate(zip(ours["tensors"], cli)):
        for part in ("v", "m", "theta"):
            for stat in ("mean_abs", "rms", "max_abs", "bias"):
                assert mine[f"{part}_{stat}"] == theirs[part][stat], (k, part, stat)
        for key, value in theirs["trap"].items():
            assert mine[key] == value, (k, key)
    with pytest.raises(cgad.InputError):
        cgad.noise("cgad", state="q8", v_map="no-zero", size=10, steps=1)
