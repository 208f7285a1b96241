"""Asynchronous DiLoCo's outer loop on torchft's parameter server (torchft 0.2's torchft/parameter_server.py: an
HTTP endpoint that opens a session per client, each a two-rank reconfigurable gloo process group served by a
thread of its own). docs/python.md, "Asynchronous DiLoCo on torchft's ParameterServer".

    server = OuterServer(model.parameters(), cgad.torch.CGAD(model.parameters(), lr=3e-3), "outer.ckpt")
    # a worker, anywhere on the network:
    with Session(server.address()) as s:
        version, theta = s.pull()          # the global parameters (one flat float32 vector) and their version
        ...                                # H inner steps from theta
        version_now, tau = s.push(version, theta - theta_local)

The server's version counts the pseudo-gradients that changed θ. Each push carries the version its worker started
from, and the server steps its outer optimizer (CGAD, PACGAD, AdamDecay, Nesterov, Gated(...): anything of
cgad.torch's whose step takes ``staleness=``) with the real staleness τ = version now − version started from, then
answers with the new version and τ. A worker may be slow, die, and come back with a new session: the server serves
each session in its own thread and steps one pseudo-gradient at a time.

Durability: after every stepped push, and before answering it, the server replaces its checkpoint atomically
(cgad/_atomic.py) with θ, the version, the count of stepped events and the optimizer's state_dict (which resumes
bit for bit, docs/python.md); a pull is served under the same lock, so no worker ever sees a version the
checkpoint does not hold. A server started on an existing checkpoint resumes from it: the resumed server steps
the next pseudo-gradient exactly as the one that was killed would have. With ``events=`` (a folder) each stepped
push is also written there, Δ and τ, before the checkpoint: the ground truth a replay through a fresh optimizer
must reproduce (an event file past the checkpoint's count, from a kill between the two writes, is removed on
resume: that push was never answered).

torchft's ParameterServer binds its HTTP endpoint and its TCPStore on every interface and names itself by the
host's name; the client side (Session) talks to the address it is given, and gloo runs over the interface
GLOO_SOCKET_IFNAME names (the examples and the test set "lo"). This module needs torch 2.x and torchft."""
from __future__ import annotations

import os
import sys
import threading
from datetime import timedelta
from typing import Any, Iterable, List, Optional, Set, Tuple, Union

import torch
from torchft.parameter_server import ParameterServer
from torchft.process_group import ProcessGroupGloo

from .. import _atomic, _cgad
from ._report import resolved
from ._torchft import Outer

PULL, PUSH, DONE = 0, 1, 2
WHERE = "cgad.torch.parameter_server"


def flat(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    """The tensors as one flat float32 vector (a copy)."""
    return torch.cat([t.detach().reshape(-1).to(torch.float32) for t in tensors])


def _header(*values: int) -> torch.Tensor:
    """A request or answer: three int64 (request, version, worker; version, τ)."""
    return torch.tensor(list(values) + [0] * (3 - len(values)), dtype=torch.int64)


class OuterServer(ParameterServer):
    """torchft's ParameterServer holding θ (``params``, stepped in place by ``optimizer``), its version and a
    checkpoint at ``checkpoint`` (resumed from when it exists). ``port``: the HTTP port (0: any free one; a server
    restarted for the same workers takes the one it had). ``events``: a folder where every stepped push is written
    (Δ, τ), or None. ``OuterServer.timeout``: how long a session waits for its peer, a class attribute (set it on a
    subclass) because torchft makes both ends' process groups in a classmethod, new_process_group."""

    timeout = timedelta(seconds=60)

    def __init__(self, params: Iterable[torch.Tensor], optimizer: Outer,
                 checkpoint: Union[str, os.PathLike[str]], *, port: int = 0,
                 events: Optional[Union[str, os.PathLike[str]]] = None) -> None:
        self.params = list(params)
        self.optimizer = optimizer
        self.checkpoint = checkpoint
        self.events = events
        self.version = 0      # pseudo-gradients that changed θ
        self.stepped = 0      # pushes stepped (applied or refused by the optimizer)
        # (worker, session, version started from, τ, the step's reason), in order
        self.log: List[Tuple[int, str, int, int, str]] = []
        self.finished: Set[int] = set()  # the workers that said they are done (a worker numbers itself)
        self._lock = threading.Lock()
        self.resumed = os.path.exists(checkpoint)
        if self.resumed:
            self._resume()
        if events is not None:
            os.makedirs(events, exist_ok=True)
        super().__init__(port)
        self._server.handle_error = _session_ended
        # http.server logs every request on stderr: a line per session opened, which says nothing here.
        self._server.RequestHandlerClass.log_message = lambda handler, *args: None

    @classmethod
    def new_process_group(cls) -> Any:
        return ProcessGroupGloo(timeout=cls.timeout)

    # --- the state --------------------------------------------------------------------------------------------

    def _resume(self) -> None:
        saved = torch.load(self.checkpoint, weights_only=False)
        with torch.no_grad():
            for p, value in zip(self.params, saved["params"], strict=True):
                p.copy_(value)
        self.optimizer.load_state_dict(saved["optimizer"])
        self.version, self.stepped, self.log = saved["version"], saved["stepped"], saved["log"]
        self.finished = saved["finished"]
        # A kill mid-write leaves the atomic writer's temporary file beside the one it was replacing: removed.
        _atomic.remove_leftovers(*os.path.split(os.path.realpath(self.checkpoint)))
        if self.events is not None and os.path.isdir(self.events):
            _atomic.remove_leftovers(self.events, "*.pt")
            for name in os.listdir(self.events):  # written, never answered: the push is as if never received
                if name.endswith(".pt") and int(name[:-3]) >= self.stepped:
                    os.unlink(os.path.join(self.events, name))

    def _save(self) -> None:
        state = {"version": self.version, "stepped": self.stepped, "log": self.log, "finished": self.finished,
                 "params": [p.detach().clone() for p in self.params], "optimizer": self.optimizer.state_dict()}
        with _atomic.replacing(self.checkpoint, "wb") as f:
            torch.save(state, f)

    def snapshot(self) -> Tuple[int, torch.Tensor]:
        """(version, θ as one flat float32 vector), consistent with each other and with the checkpoint."""
        with self._lock:
            return self.version, flat(self.params)

    def apply(self, worker: int, session: str, started: int, delta: torch.Tensor) -> Tuple[int, int]:
        """Steps the pseudo-gradient ``delta`` (flat) that worker ``worker`` (the number it gives itself) computed
        from version ``started``, with τ = version − started, checkpoints, and returns (version, τ)."""
        with self._lock:
            if not 0 <= started <= self.version:
                raise _cgad.InputError(f"{WHERE}: session {session} pushed a pseudo-gradient from version {started}, "
                                       f"but the server is at version {self.version}")
            tau = self.version - started
            offset = 0
            for p in self.params:
                p.grad = delta[offset:offset + p.numel()].view_as(p).to(p.dtype)
                offset += p.numel()
            report = resolved(self.optimizer.step(staleness=tau))
            if report.applied:
                self.version += 1
            if self.events is not None:
                with _atomic.replacing(os.path.join(self.events, f"{self.stepped}.pt"), "wb") as f:
                    torch.save({"delta": delta.clone(), "tau": tau, "worker": worker}, f)
            self.stepped += 1
            self.log.append((worker, session, started, tau, report.reason))
            self._save()
            return self.version, tau

    # --- a session ------------------------------------------------------------------------------------------

    def forward(self, session_id: str, pg: Any) -> None:
        """One client's session: pulls and pushes until it says it is done or its connection fails."""
        try:
            self._serve_session(session_id, pg)
        except Exception as error:  # its worker died or timed out: said in one line, the others go on
            print(f"{WHERE}: session {session_id} ended: {type(error).__name__}: "
                  f"{(str(error).splitlines() or [''])[0]}", file=sys.stderr)

    def _serve_session(self, session_id: str, pg: Any) -> None:
        size = sum(p.numel() for p in self.params)
        header = _header()
        while True:
            pg.broadcast_one(header, root=1).wait()
            op, value, worker = header.tolist()
            if op == PULL:
                version, theta = self.snapshot()
                pg.broadcast_one(_header(version), root=0).wait()
                pg.broadcast_one(theta, root=0).wait()
            elif op == PUSH:
                delta = torch.empty(size, dtype=torch.float32)
                pg.broadcast_one(delta, root=1).wait()
                pg.broadcast_one(_header(*self.apply(worker, session_id, value, delta)), root=0).wait()
            elif op == DONE:
                with self._lock:
                    self.finished.add(worker)
                    self._save()  # a resumed server knows who is done
                return
            else:
                raise _cgad.InputError(f"{WHERE}: session {session_id} sent an unknown request {op}")


def _session_ended(request: Any, address: Tuple[str, int]) -> None:
    """What torchft's HTTP server does once a request's thread ends with an error: one line, not a traceback. The
    thread of every session ends so -- torchft's handler closes the connection itself, and http.server then
    flushes it (ValueError: I/O operation on closed file) -- which is no error at all (a failed session is said by
    forward())."""
    error = sys.exc_info()[1]
    if isinstance(error, ValueError) and str(error) == "I/O operation on closed file.":
        return
    print(f"{WHERE}: a request from {address[0]} failed: {type(error).__name__}: "
          f"{(str(error).splitlines() or [''])[0]}", file=sys.stderr)


class Session:
    """Worker ``worker``'s session with an OuterServer at ``address`` (its address()): pull() and push(); close()
    (or the normal end of a with block) says the worker is done (the server records it in ``finished``). A block
    left by an exception only frees the session: its worker opens another. ``size``: θ's element count."""

    def __init__(self, address: str, size: int, worker: int = 0,
                 server_class: type[OuterServer] = OuterServer) -> None:
        self.size, self.worker = size, worker
        self.pg = server_class.new_session(address)

    def pull(self) -> Tuple[int, torch.Tensor]:
        """(version, θ as a flat float32 vector)."""
        self.pg.broadcast_one(_header(PULL), root=1).wait()
        reply = _header()
        self.pg.broadcast_one(reply, root=0).wait()
        theta = torch.empty(self.size, dtype=torch.float32)
        self.pg.broadcast_one(theta, root=0).wait()
        return int(reply[0]), theta

    def push(self, started: int, delta: torch.Tensor) -> Tuple[int, int]:
        """Sends the flat pseudo-gradient computed from version ``started``; returns (version now, its τ)."""
        self.pg.broadcast_one(_header(PUSH, started, self.worker), root=1).wait()
        self.pg.broadcast_one(delta.to(torch.float32).contiguous(), root=1).wait()
        reply = _header()
        self.pg.broadcast_one(reply, root=0).wait()
        return int(reply[0]), int(reply[1])

    def close(self) -> None:
        """Says the worker is done (the server's thread for it ends) and frees the process group."""
        try:
            self.pg.broadcast_one(_header(DONE, 0, self.worker), root=1).wait()
        finally:
            self.pg.shutdown()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: Optional[type[BaseException]], value: Optional[BaseException],
                 traceback: Any) -> None:
        if kind is None:
            self.close()
        else:  # the connection failed (the server died, a timeout): nothing more can be said on it
            try:
                self.pg.shutdown()
            except Exception:  # a failed group may refuse even its shutdown; the session is over either way
                pass
