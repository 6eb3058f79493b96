"""A supervised worker process: run requests with a timeout, survive hangs and crashes.

The parent sends one request at a time through a pipe and waits at most
``timeout`` seconds.  A worker that does not answer in time is killed
(``timeout``); one that dies -- ``os._exit``, a segfault, an abort in native
code, the kernel's OOM killer -- is reported as ``crash``.  Either way the
next :meth:`Worker.call` starts a fresh worker, so one bad schema never
stops a benchmark.  Healthy workers are reused across requests, so the
expensive set-up (tokenizer, engine) is paid once per worker; each start's
set-up report is kept in :attr:`Worker.setups`.

The worker is built in the child by a picklable ``factory()`` that returns
``(handler, info)``: ``handler(request) -> result`` answers requests, and
``info`` (a dict, e.g. set-up timings) is sent back once the worker is ready.
This module imports nothing heavy, so the child sets its environment (threads,
memory limit) before the factory imports any engine.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = [
    "SINGLE_THREAD_ENV",
    "CallResult",
    "Worker",
    "WorkerSetupError",
]

#: Environment for benchmark workers: every native thread pool single-threaded.
SINGLE_THREAD_ENV: dict[str, str] = {
    "RAYON_NUM_THREADS": "1",  # llguidance, outlines-core, tokenizers
    "OMP_NUM_THREADS": "1",  # torch, xgrammar's OpenMP bits
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",  # structgen
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
}


class WorkerSetupError(RuntimeError):
    """The worker could not start (the factory raised, died or timed out)."""


@dataclass
class CallResult:
    """Outcome of one request: ``status`` is ``ok``, ``timeout``, ``crash`` or ``error``
    (the handler raised; ``error`` holds the traceback).  ``rss_mb`` is the worker's
    peak resident set size so far (``ok``/``error`` only)."""

    status: str
    value: Any = None
    error: str | None = None
    wall_s: float = 0.0
    rss_mb: float | None = None
    exitcode: int | None = None


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _child_main(conn, factory: Callable[[], tuple[Callable[[Any], Any], dict]], env: dict,
                mem_limit_bytes: int | None, log_path: str | None = None) -> None:
    os.environ.update(env)
    if log_path:  # native libraries print warnings on fd 1/2: keep them off the terminal
        try:
            fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
        except OSError:
            pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    if mem_limit_bytes:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (mem_limit_bytes, mem_limit_bytes))
        except (ValueError, OSError):
            pass
    try:
        t0 = time.perf_counter()
        handler, info = factory()
        info = dict(info or {})
        info.setdefault("ready_s", time.perf_counter() - t0)
        info["pid"] = os.getpid()
        info["rss_mb"] = _peak_rss_mb()
        conn.send(("ready", info))
    except BaseException:  # noqa: BLE001 - report anything, then leave
        try:
            conn.send(("setup_error", traceback.format_exc()))
        finally:
            os._exit(3)
    while True:
        try:
            req = conn.recv()
        except (EOFError, OSError):
            break
        if req is None:
            break
        try:
            out = handler(req)
            conn.send(("ok", out, _peak_rss_mb()))
        except BaseException:  # noqa: BLE001
            conn.send(("error", traceback.format_exc(), _peak_rss_mb()))
    conn.close()


@contextmanager
def _env(extra: dict[str, str]):
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def describe_exit(code: int | None) -> str:
    """'exit code 3' / 'killed by SIGSEGV' / 'still running'."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


@dataclass
class Worker:
    """One supervised worker process (started lazily, restarted after a timeout/crash).

    ``factory``: picklable callable run in the child, returning ``(handler, info)``.
    ``env``: variables set for the child (default :data:`SINGLE_THREAD_ENV`).
    ``mem_limit_gb``: address-space limit (``RLIMIT_AS``) for the child; an engine
    exceeding it fails to allocate and is reported as a crash.
    ``start_timeout``: seconds allowed for the factory.
    ``context``: multiprocessing start method (``spawn``: a clean interpreter,
    safe with threaded native libraries).
    ``log_path``: file that receives the child's stdout/stderr (native warnings).
    """

    factory: Callable[[], tuple[Callable[[Any], Any], dict]]
    env: dict[str, str] = field(default_factory=lambda: dict(SINGLE_THREAD_ENV))
    mem_limit_gb: float | None = None
    start_timeout: float = 600.0
    context: str = "spawn"
    log_path: str | None = None
    setups: list[dict] = field(default_factory=list)
    restarts: int = 0

    def __post_init__(self) -> None:
        self._proc: Any = None
        self._conn: Any = None

    # -- process management ---------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> dict:
        """Start a worker and wait until it is ready; returns its set-up ``info``.

        Raises :class:`WorkerSetupError` when the factory fails, dies or times out.
        """
        self.stop()
        ctx = mp.get_context(self.context)
        parent, child = ctx.Pipe(duplex=True)
        limit = int(self.mem_limit_gb * 2**30) if self.mem_limit_gb else None
        t0 = time.perf_counter()
        with _env(self.env):
            proc = ctx.Process(target=_child_main, args=(child, self.factory, self.env, limit, self.log_path), daemon=True)
            proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        kind, msg = self._wait(self.start_timeout)
        if kind != "msg" or msg is None or msg[0] != "ready":
            if kind == "timeout":
                why = f"no answer within {self.start_timeout:g}s"
            elif kind == "dead":
                why = f"worker died during set-up ({describe_exit(self._exitcode())})"
            else:
                why = str(msg[1]) if msg else "no answer"
            self._kill()
            raise WorkerSetupError(why)
        info = dict(msg[1])
        info["start_s"] = time.perf_counter() - t0
        if self.setups:
            self.restarts += 1
        self.setups.append(info)
        return info

    def _wait(self, timeout: float) -> tuple[str, tuple | None]:
        """(``"msg"``, message) | (``"timeout"``, None) | (``"dead"``, None); the process is left as is."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout", None
            try:
                if self._conn.poll(min(left, 0.25)):
                    return "msg", self._conn.recv()
            except (EOFError, OSError):
                return "dead", None
            if not self._proc.is_alive():
                try:  # it may have answered just before exiting
                    if self._conn.poll(0):
                        return "msg", self._conn.recv()
                except (EOFError, OSError):
                    pass
                return "dead", None

    def _exitcode(self) -> int | None:
        """Exit code of a worker that is dying (waits for it a little)."""
        if self._proc is None:
            return None
        self._proc.join(5)
        return self._proc.exitcode

    def _kill(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(5)

    def stop(self) -> None:
        """Ask the worker to leave, then make sure it is gone."""
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(2)
            except (OSError, BrokenPipeError):
                pass
        self._kill()

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- requests -------------------------------------------------------------------
    def call(self, request: Any, timeout: float) -> CallResult:
        """Run ``handler(request)`` in the worker within ``timeout`` seconds.

        Starts the worker first when needed (set-up time is not counted in the
        timeout).  After ``timeout`` or ``crash`` the worker is discarded.
        """
        if not self.alive:
            self.start()
        t0 = time.perf_counter()
        try:
            self._conn.send(request)
        except (OSError, BrokenPipeError):
            code = self._exitcode()
            self._kill()
            return CallResult("crash", error=f"worker died ({describe_exit(code)})", exitcode=code)
        kind, msg = self._wait(timeout)
        wall = time.perf_counter() - t0
        if kind == "timeout":
            self._kill()
            return CallResult("timeout", error=f"no result within {timeout:g}s", wall_s=wall)
        if kind == "dead" or msg is None:
            code = self._exitcode()
            self._kill()
            return CallResult("crash", error=f"worker died ({describe_exit(code)})", wall_s=wall, exitcode=code)
        kind = msg[0]
        if kind == "ok":
            return CallResult("ok", value=msg[1], wall_s=wall, rss_mb=msg[2])
        return CallResult("error", error=str(msg[1]), wall_s=wall, rss_mb=msg[2])
