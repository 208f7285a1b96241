"""cgad.replay with a dict reads the stream by `cgad replay`'s rules (docs/commands.md), through the same reader:
what the command refuses in a file -- tau 16.5, -0.5, True or "3", a missing tau, fragment 0.7, params [True, 2],
an unknown key such as "evnets" or "tua" -- the dict is refused for, with the command's message; before, each was
coerced (16.5 to 16, a typo to a zero-event replay)."""
import subprocess

import numpy as np
import pytest

import cgad
from conftest import cgad_binary

GOOD_EVENT = {"grad": [0.1, -0.2], "tau": 0}
BAD_STREAMS = {
    "tau 16.5": {"params": [1.0, 2.0], "events": [{"grad": [0.1, -0.2], "tau": 16.5}]},
    "tau -0.5": {"params": [1.0, 2.0], "events": [{"grad": [0.1, -0.2], "tau": -0.5}]},
    "tau True": {"params": [1.0, 2.0], "events": [{"grad": [0.1, -0.2], "tau": True}]},
    "tau '3'": {"params": [1.0, 2.0], "events": [{"grad": [0.1, -0.2], "tau": "3"}]},
    "no tau": {"params": [1.0, 2.0], "events": [{"grad": [0.1, -0.2]}]},
    "fragment 0.7": {"params": [1.0, 2.0], "events": [{"grad": [0.1, -0.2], "tau": 1, "fragment": 0.7}]},
    "params [True, 2]": {"params": [True, 2], "events": [GOOD_EVENT]},
    "key evnets": {"params": [1.0, 2.0], "evnets": [GOOD_EVENT]},
    "key tua": {"params": [1.0, 2.0], "events": [{"grad": [0.1, -0.2], "tua": 2}]},
}


def command_message(tmp_path, stream):
    """`cgad replay`'s one line for the same stream written as a file, without its "cgad: FILE:" prefix."""
    path = tmp_path / "s.jsonl"
    path.write_text(cgad.differential._stream_text(stream))
    run = subprocess.run([cgad_binary(), "replay", "--input", str(path), "--output", str(tmp_path / "o.jsonl")],
                         capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    return run.stderr.strip().split(str(path), 1)[1]


@pytest.mark.parametrize("name", list(BAD_STREAMS))
def test_a_dict_stream_is_refused_as_the_command_refuses_the_file(tmp_path, name):
    stream = BAD_STREAMS[name]
    with pytest.raises(cgad.InputError) as refused:
        cgad.replay(stream)
    message = str(refused.value)
    assert message.startswith("<stream>:"), message
    assert message.split("<stream>", 1)[1] == command_message(tmp_path, stream)


def test_numpy_data_and_non_finite_values_still_read():
    stream = {"params": np.array([[1.0, 2.0]], dtype=np.float32), "tensors": np.array([2]),
              "events": [{"grad": np.array([np.nan, 1.0]), "tau": np.int64(1)}, {"grad": [1e-3, -np.inf], "tau": 2},
                         {"grad": ["0.5", 2], "tau": 0, "fragment": 0}]}
    result = cgad.replay(stream, backend="fastpath")
    assert result.skipped.tolist() == [True, True, False]


def test_a_stream_value_that_is_no_json_is_an_input_error():
    with pytest.raises(cgad.InputError, match="holds a object, not JSON data"):
        cgad.replay({"params": [object()], "events": []})
    with pytest.raises(cgad.InputError, match="a stream is a path or a dict"):
        cgad.replay(42)
