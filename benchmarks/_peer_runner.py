"""Peers in a process of their own: finds a Python with TensorFlow, starts the peer worker
(`benchmarks/_peer_worker.py`) in it, and times its jobs there, interleaved with ours.

Why: TensorFlow loaded into minigraph's process slows minigraph's own kernels (issue 23), and
TensorFlow is not in the project's virtual environment anyway. So TensorFlow's figures come
from a worker process that imports only numpy and TensorFlow; it times each sample itself
(`time.perf_counter_ns` around the job, no pipe in the figure) and answers in JSON.

Which Python: the environment variable `MINIGRAPH_BENCH_TF_PYTHON` (a path to an interpreter
that imports tensorflow, e.g. `/work/tfvenv/bin/python`), else the current interpreter when
it has tensorflow (checked without importing it). Without either, `tf_worker()` says how to
get one (`TF_HINT`).

`PeerProcess(python)` is the worker; `peer.build(job, **args)` returns a `Remote` per kind of
run the job offers. A `Remote` is a `benchmarks._timing.SelfTimed`: `interleaved` and
`interleaved_loops` ask it for its own timings, so a peer's samples are taken in the same
rounds, rotating order, as the local functions'.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._timing import SelfTimed

__all__ = [
    "TF_PYTHON_ENV",
    "TF_HINT",
    "WORKER",
    "PeerError",
    "PeerProcess",
    "Remote",
    "find_tf_python",
    "tf_worker",
]

#: The environment variable naming a Python that has TensorFlow.
TF_PYTHON_ENV = "MINIGRAPH_BENCH_TF_PYTHON"
#: The worker script (standalone: standard library and numpy only).
WORKER = Path(__file__).with_name("_peer_worker.py")

TF_HINT = (
    f"TensorFlow runs in its own process: set {TF_PYTHON_ENV} to a Python that imports "
    "tensorflow (a separate virtual environment: python3 -m venv tfvenv && "
    "tfvenv/bin/pip install tensorflow-cpu==2.21 numpy; then "
    f"{TF_PYTHON_ENV}=$PWD/tfvenv/bin/python python -m benchmarks)"
)


class PeerError(RuntimeError):
    """The worker failed: it could not start, a job raised there, or it died."""


def find_tf_python() -> tuple[str | None, str]:
    """(path of a Python with TensorFlow, how it was found), or (None, why there is none)."""
    named = os.environ.get(TF_PYTHON_ENV)
    if named:
        path = shutil.which(named) or named
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            return None, f"{TF_PYTHON_ENV}={named} is not an executable file"
        return path, f"{TF_PYTHON_ENV}={named}"
    if importlib.util.find_spec("tensorflow") is not None:
        return sys.executable, "the current interpreter (it has tensorflow)"
    return None, f"{TF_PYTHON_ENV} is not set and this interpreter has no tensorflow"


class Remote(SelfTimed):
    """One kind of run of a job built in a worker: timed there, sample by sample."""

    def __init__(self, peer: PeerProcess, handle: int, name: str):
        self.peer = peer
        self.handle = handle
        self.name = name

    def calibrate(self, target_s: float) -> int:
        return int(self.peer.request("calibrate", handle=self.handle, target_s=target_s))

    def measure(self, n: int = 1, collect: bool = False) -> float:
        return float(self.peer.request("measure", handle=self.handle, n=n, collect=collect))

    def result(self) -> np.ndarray:
        """What one call returns, as a numpy array (through a temporary .npy file)."""
        with tempfile.TemporaryDirectory(prefix="minigraph-peer-") as tmp:
            path = os.path.join(tmp, "result.npy")
            self.peer.request("result", handle=self.handle, path=path)
            return np.load(path)

    def __repr__(self) -> str:
        return f"<Remote {self.name} in {self.peer!r}>"


class PeerProcess:
    """A worker process running `benchmarks/_peer_worker.py` under `python`.

    `load="tensorflow"` imports TensorFlow at start (so that a broken install fails here, with
    its message) and puts its version in `info`. Close it (or use `with`) when done.

    Raises:
        PeerError: the worker did not start or could not load what `load` names.
    """

    def __init__(self, python: str, load: str | None = None, timeout_s: float = 600.0):
        self.python = python
        self.timeout_s = timeout_s
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
        # The worker's stderr (the peer's warnings and logs) goes to a file: a pipe nobody
        # reads would fill and block it; its tail goes into errors.
        self._stderr = tempfile.TemporaryFile("w+", prefix="minigraph-peer-")
        try:
            self._proc = subprocess.Popen(
                [python, str(WORKER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                text=True,
                env=env,
            )
        except OSError as e:
            self._stderr.close()
            raise PeerError(f"cannot start {python}: {e}") from None
        try:
            self.info: dict[str, Any] = self.request("hello", load=load)
        except PeerError:
            self.close()
            raise

    def request(self, op: str, **fields: Any) -> Any:
        """Sends one request and returns the worker's result (PeerError on its error)."""
        proc = self._proc
        if proc.poll() is not None:
            raise PeerError(f"the peer worker has exited ({self._stderr_tail()})")
        try:
            proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except (BrokenPipeError, OSError) as e:
            raise PeerError(f"the peer worker has gone ({e}; {self._stderr_tail()})") from None
        if not line:
            proc.wait(timeout=10)
            raise PeerError(f"the peer worker has exited ({self._stderr_tail()})")
        reply = json.loads(line)
        if not reply["ok"]:
            raise PeerError(f"peer {op} failed: {reply['error']}")
        return reply["result"]

    def build(self, job: str, **args: Any) -> dict[str, Remote]:
        """Builds a job in the worker; returns a Remote per kind of run it offers."""
        handles = self.request("build", job=job, args=args)["handles"]
        return {kind: Remote(self, h, f"{job}/{kind}") for kind, h in handles.items()}

    def drop(self, remotes: Any) -> None:
        """Frees the jobs behind these Remotes (an iterable, or a dict of them) in the worker."""
        items = remotes.values() if isinstance(remotes, dict) else remotes
        self.request("drop", handles=[r.handle for r in items])

    def footprint(self, job: str, runs: int = 5, **args: Any) -> float:
        """The memory a job takes in this worker (MiB): ask it of a fresh worker, first."""
        return float(self.request("footprint", job=job, args=args, runs=runs))

    def _stderr_tail(self) -> str:
        try:
            self._stderr.seek(0)
            text = self._stderr.read().strip()
        except (OSError, ValueError):
            return "no message"
        return "stderr: " + (text[-600:] if text else "(empty)")

    def close(self) -> None:
        """Ends the worker (politely, then by force). Idempotent."""
        proc = self._proc
        if proc.poll() is None:
            try:
                proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdin, proc.stdout, self._stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> PeerProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<PeerProcess {self.python} pid {self._proc.pid}>"


def tf_worker() -> tuple[PeerProcess | None, str]:
    """(a started worker with TensorFlow loaded, a line saying where it runs), or (None, why
    not, with how to get one)."""
    python, how = find_tf_python()
    if python is None:
        return None, f"TF: {how}. {TF_HINT}"
    try:
        peer = PeerProcess(python, load="tensorflow")
    except PeerError as e:
        return None, f"TF: {python} ({how}) cannot run TensorFlow: {e}. {TF_HINT}"
    info = peer.info
    where = (
        f"TensorFlow {info['tensorflow']} in its own process ({how}; Python {info['python']}, "
        f"numpy {info['numpy']})"
    )
    return peer, where
