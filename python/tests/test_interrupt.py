"""Ctrl-C reaches long numerics called from Python: cgad.noise and cgad.replay look for a pending signal after
every step or event (through the engines' per-step callbacks) and end with KeyboardInterrupt within a second; they
ran to the end before. Each runs in a child interpreter that is sent SIGINT once it is inside the call."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

# Each prints "calling" just before its call, which runs for minutes (a replay event of 256 parameters at 512 bits
# takes about 12 ms, a noise step of 4096 about 15 ms): the signal comes well inside it.
CALLS = {
    "noise": """
print("calling", flush=True)
cgad.noise(size=4096, steps=10 ** 7, log_every=10 ** 7, precision=128)""",
    "replay": """
with open(path, "w") as f:
    f.write(json.dumps({"params": [0.5] * 256}) + "\\n")
    for k in range(2000):
        f.write(json.dumps({"grad": [0.001 * (k % 7)] * 256, "tau": k % 5}) + "\\n")
print("calling", flush=True)
cgad.replay(path, precision=512)""",
}
SETUP = """
import json, sys, cgad
path = sys.argv[1]
"""


def guarded(call):
    """``call`` with what the child prints the moment KeyboardInterrupt reaches Python."""
    body = "".join("    " + line + "\n" for line in call.strip().splitlines())
    return f"try:\n{body}except KeyboardInterrupt:\n    print('interrupted', flush=True)\n    raise\n"


@pytest.mark.parametrize("name", list(CALLS))
def test_sigint_ends_a_long_call_within_a_second(tmp_path, name):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    child = subprocess.Popen([sys.executable, "-c", SETUP + guarded(CALLS[name]), str(tmp_path / "s.jsonl")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    killer = threading.Timer(30, child.kill)  # a call that ignores the signal would otherwise run for minutes
    try:
        assert child.stdout.readline().strip() == "calling"
        time.sleep(1.0)  # well inside the call
        assert child.poll() is None, "the call ended before the signal"
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        killer.start()
        line = child.stdout.readline().strip()
        waited = time.monotonic() - sent
        _, err = child.communicate(timeout=60)  # the traceback, as the child ends
    finally:
        killer.cancel()
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert line == "interrupted", f"no KeyboardInterrupt within 30 s: {err[-2000:]}"
    assert "KeyboardInterrupt" in err, err[-2000:]
    print(f"{name}: {waited:.3f} s from SIGINT to KeyboardInterrupt")
    assert waited < 1.0, f"{waited:.3f} s from SIGINT to KeyboardInterrupt"
