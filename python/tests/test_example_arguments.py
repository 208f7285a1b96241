"""Every example script in examples/ refuses bad arguments as the `cgad` command does: one line on stderr naming
the option and what was written, exit status 2 -- NaN and Inf included (they pass a `<` check), and values only
the run would have tripped over (a --context longer than the text's parts, a missing --text, a timeout that
overflows torch's milliseconds)."""
import concurrent.futures
import os
import signal
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR

EXAMPLES = SOURCE_DIR / "examples"
LIMIT = 120
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py") if p.read_text().startswith("#!"))

# (script, arguments, words the one line must hold)
CASES = [
    ("async_diloco.py", ["--timeout", "nan"], ["--timeout", "nan"]),
    ("async_diloco.py", ["--timeout", "inf"], ["--timeout", "inf"]),
    ("async_diloco.py", ["--timeout", "1e300"], ["--timeout", "1e300"]),
    ("async_diloco.py", ["--slow", "nan"], ["--slow", "nan"]),
    ("async_diloco.py", ["--outer-lr", "nan"], ["--outer-lr", "nan"]),
    ("async_diloco.py", ["--inner-lr", "-1"], ["--inner-lr", "-1"]),
    ("async_diloco.py", ["--workers", "0"], ["--workers", "0"]),
    ("async_diloco.py", ["--workers", "257"], ["--workers", "<= 256", "257"]),
    ("async_diloco.py", ["--width", "10000000"], ["--width 10000000", "GiB", "available"]),
    ("async_diloco.py", ["--rounds", "x"], ["--rounds", "'x'"]),
    ("async_diloco.py", ["--outer-lr", "1e12"], ["lr", "1e+12"]),
    ("async_diloco_torchft.py", ["--dir", "/nonexistent/ps"], ["--dir", "/nonexistent/ps", "not a folder"]),
    ("async_diloco_torchft.py", ["--dir", "/tmp", "--timeout", "nan"], ["--timeout", "nan"]),
    ("async_diloco_torchft.py", ["--dir", "/tmp", "--slow", "inf"], ["--slow", "inf"]),
    ("async_diloco_torchft.py", ["--dir", "/tmp", "--model", "gpt", "--width", "30"],
     ["--width", "multiple of 4", "30"]),
    ("async_diloco_torchft.py", ["--dir", "/tmp", "--rounds", "4", "--kill-server-at", "4"],
     ["--kill-server-at", "below --rounds 4", "got 4"]),
    ("trap_in_training.py", ["--context", "10000"], ["--context", "10000"]),
    ("trap_in_training.py", ["--text", "/nonexistent/text"], ["--text", "/nonexistent/text"]),
    ("trap_in_training.py", ["--text", "/usr/share"], ["--text", "/usr/share", "not a regular file"]),
    ("trap_in_training.py", ["--inner-lr", "-1"], ["--inner-lr", "-1"]),
    ("trap_in_training.py", ["--outer-lr", "nan"], ["--outer-lr", "nan"]),
    ("trap_in_training.py", ["--outlier-scale", "inf"], ["--outlier-scale", "inf"]),
    ("trap_in_training.py", ["--seed", "-1"], ["--seed", "-1"]),
    ("trap_in_training.py", ["--stream", "/nonexistent/s.jsonl"], ["--stream", "/nonexistent"]),
    ("trap_in_training.py", ["--width", "100000000"], ["--width 100000000", "GiB", "available"]),
    ("diloco_torch.py", ["--context", "10000"], ["--context", "10000"]),
    ("diloco_torch.py", ["--outer-lr", "nan"], ["--outer-lr", "nan"]),
    ("diloco_torch.py", ["--inner-lr", "-1"], ["--inner-lr", "-1"]),
    ("diloco_torch.py", ["--seed", str(2 ** 64)], ["--seed", str(2 ** 64)]),
    ("diloco_torch.py", ["--outer-lr", "1e12"], ["lr", "1e+12"]),
    ("diloco_torch.py", ["--width", "100000000"], ["--width 100000000", "GiB", "available"]),
    ("torchft_diloco.py", ["--timeout", "nan"], ["--timeout", "nan"]),
    ("torchft_diloco.py", ["--timeout", "1e300"], ["--timeout", "1e300"]),
    ("torchft_diloco.py", ["--alpha", "nan"], ["--alpha", "nan"]),
    ("torchft_diloco.py", ["--outer-lr", "inf"], ["--outer-lr", "inf"]),
    ("torchft_diloco.py", ["--outer-lr", "1e12"], ["lr", "1e+12"]),
    ("torchft_diloco.py", ["--tau-cut", "16777217"], ["tau-cut", "16777217"]),
    ("torchft_diloco.py", ["--alpha", "1e300"], ["alpha", "1e+300"]),
    ("torchft_diloco.py", ["--width", "100000000"], ["--width 100000000", "GiB", "available"]),
    ("torchtitan_diloco.py", ["--timeout", "nan"], ["--timeout", "nan"]),
    ("torchtitan_diloco.py", ["--outer-lr", "inf"], ["--outer-lr", "inf"]),
    ("torchtitan_diloco.py", ["--seq-len", "1"], ["--seq-len", "1"]),
    ("peers_table.py", ["--scale-range", "nan"], ["--scale-range", "nan"]),
    ("peers_table.py", ["--steps", "0"], ["--steps", "0"]),
    ("peers_table.py", ["--size", "4096", "100000000", "--steps", "100000"], ["--size 4096 100000000", "GiB"]),
    ("peers_table.py", ["--delays", "uniform"], ["--delays", "uniform"]),
    ("peers_table.py", ["--stream", "/nonexistent/s.jsonl"], ["--stream", "/nonexistent/s.jsonl"]),
]


def _run(script, args):
    """(status, stderr); a script that takes the argument runs with it, and is ended (all its processes) after
    LIMIT seconds, where refusing takes a second or two past torch's import."""
    run = subprocess.Popen([sys.executable, str(EXAMPLES / script), *args], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, env=dict(os.environ), start_new_session=True)
    try:
        stderr = run.communicate(timeout=LIMIT)[1]
        return run.returncode, stderr
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.communicate()
        return None, f"still running after {LIMIT} s: the argument was taken"


@pytest.fixture(scope="module")
def runs():
    """Every case's run, started a few at a time (each imports torch before it parses, seconds apiece)."""
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = {(s, tuple(a)): pool.submit(_run, s, a) for s, a, _ in CASES}
        return {k: f.result() for k, f in futures.items()}


def test_every_example_script_has_cases():
    assert SCRIPTS == sorted({s for s, _, _ in CASES})


@pytest.mark.parametrize("script,args,words", CASES, ids=[f"{s[:-3]} {' '.join(a)}" for s, a, _ in CASES])
def test_a_bad_argument_is_one_line_and_exit_status_2(runs, script, args, words):
    status, stderr = runs[(script, tuple(args))]
    assert status == 2, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{script[:-3]}: "), stderr
    for word in words:
        assert word in lines[0], stderr


@pytest.mark.parametrize("text,words", [
    ('{"params": [1, 2]}\n{"grad": [1, "x"], "tau": 0}\n', [":2:", "'x' is not a number"]),
    ('{"params": [1, 2]}\n{"grad": [1, 2], "tau": 0}\n{"grad": [1, 2', [":3:", "JSON"]),
], ids=["a string for a number", "a truncated last line"])
def test_a_malformed_recorded_stream_is_one_line_and_exit_status_2(tmp_path, text, words):
    """peers_table --stream: the stream's reader names the line and what is wrong; before, that refusal surfaced as
    a traceback (and exit status 1)."""
    stream = tmp_path / "s.jsonl"
    stream.write_text(text)
    status, stderr = _run("peers_table.py", ["--stream", str(stream)])
    assert status == 2, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"peers_table: {stream}"), stderr
    for word in words:
        assert word in lines[0], stderr
