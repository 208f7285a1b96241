"""cgad.replay is `cgad replay` from Python: every option of the command is a parameter of the function under the
same name (dashes as underscores) and every parameter an option -- both ways, read from `cgad replay --help` and
the function's signature, so an option added to one alone fails here (--q8-maps had no q8_maps=) -- and q8_maps=
reads the file --q8-maps reads, with the same result and the same refusals."""
import inspect
import json
import re
import subprocess

import numpy as np
import pytest

import cgad
from conftest import cgad_binary

# The command's options that are no parameter, and why: the stream is the first argument; what --output writes
# is the Replay returned; --help is the command's own.
COMMAND_ONLY = {"input": "stream", "output": "the returned Replay", "help": None}
FUNCTION_ONLY = {"stream": "--input"}

STREAM = {"params": [0.5, -0.25, 1.0, 2.0], "events": [{"grad": [0.1, -0.2, 0.3, -0.4], "tau": t} for t in (0, 1, 3)]}


def command_options():
    out = subprocess.run([cgad_binary(), "replay", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return {m.group(1).replace("-", "_") for m in re.finditer(r"^\s+(?:-\w,)?--([a-z0-9-]+)", out.stdout, re.M)}


def test_every_option_is_a_parameter_and_every_parameter_an_option():
    options = command_options()
    parameters = set(inspect.signature(cgad.replay).parameters)
    assert {"q8_maps", "backend", "precision", "input", "output"} <= options  # the parse saw the help's options
    assert sorted(options - parameters - set(COMMAND_ONLY)) == []
    assert sorted(parameters - options - set(FUNCTION_ONLY)) == []


def write_stream(path):
    lines = [{"params": STREAM["params"]}] + STREAM["events"]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def moved_maps(tmp_path):
    """The codebook's maps with signed codes 200..254 one float lower (docs/commands.md, --q8-maps)."""
    book = json.loads(subprocess.run([cgad_binary(), "codebook", "--json"], capture_output=True, text=True,
                                     timeout=60, check=True).stdout)
    for k in range(200, 255):
        code = float.fromhex(book["signed"]["hex"][k])
        book["signed"]["hex"][k] = float.hex(np.nextafter(np.float32(code), np.float32(0)).item())
    path = tmp_path / "maps.json"
    path.write_text(json.dumps(book))
    return path


FAST = dict(backend="fastpath", optimizer="adam", params="fp32", state="q8", q8_semantics="bnb", min_q8_size=0)


def test_q8_maps_replays_as_the_command_does(tmp_path):
    stream, maps = write_stream(tmp_path / "s.jsonl"), moved_maps(tmp_path)
    out = tmp_path / "out.jsonl"
    args = [cgad_binary(), "replay", "--input", str(stream), "--output", str(out), "--q8-maps", str(maps)]
    for key, value in FAST.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    run = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    command = [json.loads(line) for line in out.read_text().splitlines()]
    given = cgad.replay(stream, q8_maps=maps, **FAST)
    assert given.records == command
    assert cgad.replay(STREAM, q8_maps=str(maps), **FAST).records == command
    assert cgad.replay(stream, **FAST).records != command  # the maps matter: the built-in ones replay otherwise


@pytest.mark.parametrize("maps,words", [
    (None, "arrays and objects nested more than 64 deep"),
    (3, "q8_maps must be the path of a JSON file"),
], ids=["nested deep", "not a path"])
def test_bad_q8_maps_are_refused_as_the_command_refuses_them(tmp_path, maps, words):
    if maps is None:
        maps = tmp_path / "deep.json"
        maps.write_text('{"signed": ' + "[" * 100000 + "]" * 100000 + ', "unsigned": []}')
    with pytest.raises(cgad.InputError, match=words):
        cgad.replay(STREAM, q8_maps=maps, **FAST)


def test_q8_maps_applies_to_the_fast_path_only(tmp_path):
    with pytest.raises(cgad.InputError, match="q8_maps applies to backend='fastpath' only"):
        cgad.replay(STREAM, q8_maps=moved_maps(tmp_path))
