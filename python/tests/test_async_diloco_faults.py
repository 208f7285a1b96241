"""examples/async_diloco.py when a worker stalls (SIGSTOP) or dies (SIGKILL) mid-run: the server's timeout holds,
it names the worker and the events it had applied, finishes with the survivors, keeps every applied event in its
output and histogram, and exits 3 (degraded)."""
import collections
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import SOURCE_DIR

EVENT = re.compile(r"^event\s+\d+ worker (\d+) ", re.M)
TIMEOUT = 5


def children(pid):
    """The processes `pid` forked, in fork order: the example forks the server (rank 0) and then worker 1..N."""
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return sorted(int(c) for c in f.read().split())


def run_and_signal(workers, rounds, victim, sig):
    """Starts the example, sends `sig` to worker `victim` right after its first event is printed; returns (the
    seconds from the start to that event, the seconds from the signal to the run's end, the run's status, stdout,
    stderr, the processes of the run still there after it ended)."""
    began = time.monotonic()
    run = subprocess.Popen([sys.executable, str(SOURCE_DIR / "examples" / "async_diloco.py"), "--workers",
                            str(workers), "--rounds", str(rounds), "--inner-steps", "5", "--slow", "0.02",
                            "--timeout", str(TIMEOUT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ), start_new_session=True)
    # Both pipes are read by threads from the start: lines read ahead of the victim's event stay in the queue
    # (communicate() after iterating run.stdout would lose what the iterator had buffered).
    lines, errors = queue.Queue(), queue.Queue()
    pumps = [threading.Thread(target=_pump, args=(run.stdout, lines), daemon=True),
             threading.Thread(target=_pump, args=(run.stderr, errors), daemon=True)]
    for pump in pumps:
        pump.start()
    try:
        seen = []
        while not seen or not _is_event_of(seen[-1], victim):
            line = lines.get(timeout=600)
            assert line is not None, f"the run ended before worker {victim}'s first event"
            seen.append(line)
        started = time.monotonic() - began
        os.kill(children(run.pid)[victim], sig)
        signalled = time.monotonic()
        # The server's clock for the victim started at its last message, before the signal: it gives up at most
        # TIMEOUT after the signal. What it does then (evaluate once, print, close its connections, exit) is less
        # than what it did before the first event (import torch, connect every process, evaluate once, a
        # round): the start-up time measured above bounds it.
        try:
            run.wait(timeout=TIMEOUT + started + 60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the run did not end {TIMEOUT + started + 60:.0f} s after worker {victim} got {sig!r}")
        ended_after = time.monotonic() - signalled
        leftovers = _leftovers(run.pid)
        for pid in leftovers:  # they hold the pipes open
            os.kill(pid, signal.SIGKILL)
        for pump in pumps:
            pump.join()
        seen.extend(iter(lines.get_nowait, None))
        return (started, ended_after, run.returncode, "".join(seen), "".join(iter(errors.get_nowait, None)),
                leftovers)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        for pid in _leftovers(run.pid):
            os.kill(pid, signal.SIGKILL)


def _pump(stream, into):
    """Puts each line of `stream` into the queue `into`, then None at its end."""
    for line in stream:
        into.put(line)
    into.put(None)


def _is_event_of(line, worker):
    m = EVENT.match(line)
    return m is not None and int(m.group(1)) == worker


def _leftovers(session):
    """Processes still in the run's session (a stopped worker the example left behind)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == session and int(entry) != session:  # field 6 of stat: the session id
                out.append(int(entry))
    return out


@pytest.mark.parametrize("workers,rounds,victim", [(1, 100000, 1), (3, 8, 3)], ids=["alone", "one-of-three"])
@pytest.mark.parametrize("sig,what", [(signal.SIGSTOP, "stalled"), (signal.SIGKILL, "lost")],
                         ids=["stopped", "killed"])
def test_a_stalled_or_dead_worker_is_reported_and_the_run_ends_with_the_survivors(workers, rounds, victim, sig,
                                                                                   what):
    started, ended_after, status, out, err, leftovers = run_and_signal(workers, rounds, victim, sig)
    bound = TIMEOUT + started
    assert ended_after < bound, f"ended {ended_after:.1f} s after the signal, bound {bound:.1f} s"
    assert status == 3, err
    assert "Traceback" not in err
    report = re.search(rf"^async_diloco: worker {victim} {what}: .*its (\d+) applied events are kept", err, re.M)
    assert report, err
    per_worker = collections.Counter(int(w) for w in EVENT.findall(out))
    assert per_worker[victim] == int(report.group(1)) >= 1
    for w in range(1, workers + 1):  # the survivors ran to the end
        if w != victim:
            assert per_worker[w] == rounds
    # Every applied event is in the histogram and the summary, the victim's included.
    shown = re.search(r"^staleness histogram: (.*)$", out, re.M).group(1)
    assert sum(int(c.split(":")[1]) for c in shown.split()) == sum(per_worker.values())
    summary = re.search(r"^summary: (\d+) events from \d+ workers, (.*), version", out, re.M)
    assert int(summary.group(1)) == sum(per_worker.values())
    assert summary.group(2) == f"worker {victim} {what} after {per_worker[victim]} events"
    assert not leftovers  # the stopped worker is not left behind
