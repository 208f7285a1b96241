"""examples/async_diloco.py, bounded: a real parameter server over torch.distributed (gloo on 127.0.0.1, one server
and three worker processes) applies every worker's pseudo-gradient through cgad.torch.CGAD with its true staleness
(the server's version when it arrived minus the version the worker started from), and the held-out loss falls."""
import collections
import os
import re
import subprocess
import sys

import cgad

from conftest import SOURCE_DIR

EVENT = re.compile(r"^event\s+(\d+) worker (\d+) started at version (\d+) applied at version (\d+) staleness (\d+) "
                   r"reported tau (\d+) sigma (\S+) applied (\w+)$", re.M)


def test_server_applies_every_event_with_its_true_staleness():
    workers, rounds = 3, 4
    run = subprocess.run([sys.executable, str(SOURCE_DIR / "examples" / "async_diloco.py"), "--workers",
                          str(workers), "--rounds", str(rounds), "--inner-steps", "5", "--slow", "0.004",
                          "--timeout", "60"], capture_output=True, text=True, env=dict(os.environ), timeout=240)
    assert run.returncode == 0, run.stderr
    events = [tuple(m.groups()) for m in EVENT.finditer(run.stdout)]
    assert len(events) == workers * rounds, run.stdout
    per_worker = collections.Counter()
    histogram = collections.Counter()
    for k, (index, worker, start, at, tau, reported, sigma, applied) in enumerate(events):
        assert int(index) == k and applied == "True"
        # Every earlier event was applied, so event k meets version k: its true staleness is k - start.
        assert int(at) == k and int(tau) == k - int(start) and int(reported) == int(tau)
        assert float(sigma) == float(f"{cgad.sigma(int(tau)):.6f}")
        per_worker[int(worker)] += 1
        histogram[int(tau)] += 1
    assert per_worker == {w: rounds for w in range(1, workers + 1)}
    shown = re.search(r"^staleness histogram: (.*)$", run.stdout, re.M).group(1)
    assert shown == " ".join(f"{tau}:{histogram[tau]}" for tau in sorted(histogram))
    assert max(histogram) > 0  # the slower workers' deltas really arrive stale
    summary = re.search(r"^summary: (\d+) events .* held-out loss (\S+) -> (\S+)$", run.stdout, re.M)
    assert int(summary.group(1)) == workers * rounds
    assert float(summary.group(3)) < float(summary.group(2))
