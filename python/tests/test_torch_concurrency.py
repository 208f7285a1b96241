"""cgad.torch from several threads and across fork(): steps from two threads take turns (they shared the fast
path's thread pool and deadlocked or crashed); two threads making their first optimizers at once (they deadlocked
under NumPy 2); a step holds the memory it writes even if another thread gives the
parameter new memory meanwhile; a forked child's optimizer steps (its first step never returned), and one forked
while another thread was stepping it says so instead of hanging. Each case that crashed or hung runs in a child
process, so that a regression fails the test instead of taking pytest down."""
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

import cgad
from cgad.torch import CGAD
from conftest import bits


def run_python(code, timeout=120):
    """Runs ``code`` in a fresh interpreter with this one's module path; returns (returncode, stdout, stderr),
    returncode None when it had not ended after ``timeout`` seconds (then it is killed)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = child.communicate(timeout=timeout)
        return child.returncode, out, err
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        return None, out, err


def test_two_threads_stepping_one_optimizer_take_turns_and_match_one_thread():
    code = """
        import threading, torch
        from cgad.torch import CGAD
        def make():
            torch.manual_seed(0)
            ps = [torch.randn(1 << 18, requires_grad=True), torch.randn(1000, requires_grad=True)]
            for p in ps:
                p.grad = torch.randn_like(p)
            return ps, CGAD(ps, lr=1e-2, threads=4)
        ps, opt = make()
        def steps():
            for _ in range(25):
                assert opt.step(staleness=1).applied
        workers = [threading.Thread(target=steps) for _ in range(2)]
        for w in workers: w.start()
        for w in workers: w.join()
        alone, one = make()
        for _ in range(50):
            one.step(staleness=1)
        same = all(torch.equal(a.view(torch.int32), b.view(torch.int32)) for a, b in zip(ps, alone))
        print("t", opt.counters()["t"], "same", same)
    """
    returncode, out, err = run_python(code, timeout=120)
    assert returncode == 0, f"returncode {returncode} (None: hung): {err[-2000:]}"
    assert out.split() == ["t", "[50]", "same", "True"], out


def test_two_threads_making_their_first_optimizers_at_once_do_not_deadlock():
    # With pybind11 2.10's py::array, the first array looked NumPy's C API up in a function-local static whose
    # initializer imports numpy.core.multiarray; under NumPy 2 that import releases the GIL part-way, and two
    # threads making their first optimizers at once (torchft's replica groups run in threads) deadlocked, one
    # waiting for the static's guard holding the GIL, the other for the GIL inside it. The module's arrays now go
    # through numpy.frombuffer (python/src/arrays.hpp); this keeps it so. A fresh interpreter, as such a lookup
    # happens once per process; every state format, since each makes its own arrays.
    code = """
        import threading, torch
        from cgad.torch import CGAD, PACGAD
        start = threading.Barrier(4)
        made = []
        def make(kind, state):
            ps = [torch.zeros(300, requires_grad=True), torch.zeros(10, requires_grad=True)]
            start.wait()
            made.append(kind(ps, state=state, threads=1))
        workers = [threading.Thread(target=make, args=a) for a in
                   ((CGAD, "fp32"), (CGAD, "q8"), (PACGAD, "bf16"), (PACGAD, "q8"))]
        for w in workers: w.start()
        for w in workers: w.join()
        print("made", len(made))
    """
    returncode, out, err = run_python(code, timeout=60)
    assert returncode == 0, f"returncode {returncode} (None: hung): {err[-2000:]}"
    assert out.split() == ["made", "4"], out


def test_new_memory_given_to_a_parameter_during_a_step_is_not_written_and_the_old_is_not_freed_under_it():
    # 2^25 elements on one thread: the step runs for a good fraction of a second, and the main thread swaps the
    # parameter's memory while it runs; before, the step went on writing into the freed memory (SIGSEGV).
    code = """
        import threading, time, gc, torch
        from cgad.torch import CGAD
        n = 1 << 25
        p = torch.zeros(n, requires_grad=True)
        p.grad = torch.ones(n)
        opt = CGAD([p], threads=1)
        reports = []
        for round in range(3):
            fresh = torch.zeros(n)  # made before the step starts: zeroing it takes as long as a step
            t = threading.Thread(target=lambda: reports.append(opt.step()))
            t.start()
            time.sleep(0.02)
            p.data = fresh  # drops the last reference to p's memory (the previous round's `fresh`)
            gc.collect()
            t.join()
            assert int(torch.count_nonzero(fresh)) == 0, "the step wrote into the new memory"
        print("ok", all(r.applied for r in reports))
    """
    returncode, out, err = run_python(code, timeout=300)
    assert returncode == 0, f"returncode {returncode} (None: hung; negative: killed by a signal): {err[-2000:]}"
    assert out.split() == ["ok", "True"], out


def wait_for(pid, seconds):
    """The child's exit status, or None (after killing it) when it had not ended in ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


@pytest.mark.parametrize("threads", [1, 4])
def test_a_forked_child_steps_its_copy_of_the_optimizer(threads):
    torch.manual_seed(1)
    ps = [torch.randn(5000, requires_grad=True), torch.randn(300, requires_grad=True)]
    opt = CGAD(ps, threads=threads)
    for p in ps:
        p.grad = torch.randn_like(p)
    opt.step()
    expected = [p.detach().clone() for p in ps]
    twin = CGAD(expected, threads=1)
    twin.load_state_dict(opt.state_dict())
    for e, p in zip(expected, ps):
        e.grad = p.grad.clone()
    twin.step(staleness=2)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            report = opt.step(staleness=2)
            same = all((bits(a) == bits(b)).all() for a, b in zip(ps, expected))
            code = 0 if report.applied and same and opt.counters()["t"] == [2] else 3
        finally:
            os._exit(code)
    assert wait_for(pid, 60) == 0, "None: the child's step never returned; 3: it stepped differently"
    assert opt.step(staleness=2).applied and opt.counters()["t"] == [2]  # the parent's is untouched


def test_a_child_forked_while_another_thread_steps_refuses_its_half_updated_copy():
    n = 1 << 24
    p = torch.zeros(n, requires_grad=True)
    p.grad = torch.ones(n)
    opt = CGAD([p], threads=1)
    stepping = threading.Thread(target=lambda: [opt.step() for _ in range(20)])
    stepping.start()
    deadline = time.monotonic() + 30
    while opt._holder is None and time.monotonic() < deadline:
        time.sleep(0.001)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            opt.step()
        except cgad.InputError as e:
            code = 0 if "forked while another thread" in str(e) else 2
        finally:
            os._exit(code)
    status = wait_for(pid, 60)
    stepping.join()
    assert status == 0, "None: the child waited forever for the lock; 1: it stepped the half-updated copy"
