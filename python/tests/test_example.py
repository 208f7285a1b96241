"""examples/diloco_torch.py's short configuration: asynchronous DiLoCo on the GPL-3 text runs to its summary with
each kind of outer optimizer and state, printing a finite held-out loss per outer round."""
import os
import re
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR

SHORT = ["--rounds", "4", "--workers", "2", "--inner-steps", "2", "--tau", "2"]


@pytest.mark.parametrize("extra", [
    ["--outer", "cgad", "--state", "q8"],
    ["--outer", "cgad", "--state", "q8", "--q8-semantics", "bnb", "--params", "bf16"],
    ["--outer", "pa-cgad", "--fragments", "2", "--state", "bf16"],
    ["--outer", "nesterov", "--state", "q8", "--delay", "constant"],
    ["--outer", "adam-decay"], ["--outer", "adam"], ["--outer", "sdm"],
], ids=["cgad-q8", "cgad-q8-bnb-bf16", "pa-cgad", "nesterov", "adam-decay", "adam", "sdm"])
def test_short_run(extra):
    run = subprocess.run([sys.executable, str(SOURCE_DIR / "examples" / "diloco_torch.py"), *SHORT, *extra],
                         capture_output=True, text=True, env=dict(os.environ), timeout=120)
    assert run.returncode == 0, run.stderr
    rounds = re.findall(r"^round\s+(\d+)\s+held-out loss (\S+)", run.stdout, re.M)
    assert [int(r) for r, _ in rounds] == list(range(5))
    assert all(float(loss) < 10 for _, loss in rounds)
    summary = re.search(r"^summary: outer (\S+) .*held-out loss (\S+) -> (\S+)", run.stdout, re.M)
    assert summary and summary.group(1) == extra[1]
    assert float(summary.group(3)) < float(summary.group(2))  # four rounds already learn something
