"""Masks for a batch: one bitmask row per sequence, filled in a thread pool.

A serving engine fills every running sequence's row while the forward pass runs.  A cached mask
is a dictionary hit and a row copy; a mask the cache lacks is a trie walk in numba kernels that
release the GIL (``nogil=True``), so rows of different grammars are computed on several cores at
once.  Measured on MaskBench states (``structgen bench batch-masks``, 2 cores): a row costs ~60 µs
cold and ~3.4 µs warm; the ``nogil`` walks are 23% of a cold fill and the rest is Python under the
GIL, so two threads were *slower* than one (0.41x cold, 0.34x warm at 64 rows), while one thread
already fills faster than llguidance's parallel fill on two.  The pool therefore runs only when
asked (``threads=`` or ``STRUCTGEN_MASK_THREADS``); it pays where rows are long uncached walks (large vocabularies, hard
states) on many cores.  Below ``MIN_ROWS_PER_THREAD`` rows a thread, rows are filled in the
calling thread.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

__all__ = ["fill_next_token_bitmasks", "default_threads"]

#: Rows a pool thread should get at least (a cached row costs ~5 µs; a task ~20 µs to hand over).
MIN_ROWS_PER_THREAD = 8

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def default_threads() -> int:
    """Threads for batch masks: ``STRUCTGEN_MASK_THREADS`` (``"cores"``: the cores this process may
    use), else 1 -- the measured best on the 2-core development machine (see the module docstring)."""
    env = os.environ.get("STRUCTGEN_MASK_THREADS", "1")
    if env == "cores":
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # pragma: no cover - not Linux
            return max(1, os.cpu_count() or 1)
    return max(1, int(env))


def _executor(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < n:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool, _pool_size = ThreadPoolExecutor(n, thread_name_prefix="structgen-mask"), n
        return _pool


def fill_next_token_bitmasks(matchers: Sequence[Any], bitmask: Any, indices: Sequence[int] | None = None,
                             *, threads: int | None = None) -> None:
    """Fill row ``indices[i]`` (default ``i``) of the int32 ``bitmask`` [rows, ceil(V/32)] with
    ``matchers[i]``'s next-token mask, for every i, using up to ``threads`` threads (default
    :func:`default_threads`).  A matcher appearing twice is filled by one thread (matchers are not
    thread-safe; grammars are)."""
    rows = list(range(len(matchers))) if indices is None else list(indices)
    if len(rows) != len(matchers):
        raise ValueError(f"{len(matchers)} matchers but {len(rows)} row indices")
    n = threads if threads is not None else default_threads()
    n = min(n, len(matchers) // MIN_ROWS_PER_THREAD)
    if n <= 1:
        for m, r in zip(matchers, rows):
            m.fill_next_token_bitmask(bitmask, r)
        return
    # one chunk per thread; a matcher met twice stays in one chunk
    chunks: list[list[tuple[Any, int]]] = [[] for _ in range(n)]
    home: dict[int, int] = {}
    for k, (m, r) in enumerate(zip(matchers, rows)):
        c = home.setdefault(id(m), k % n)
        chunks[c].append((m, r))

    def fill(chunk: list[tuple[Any, int]]) -> None:
        for m, r in chunk:
            m.fill_next_token_bitmask(bitmask, r)

    for f in [_executor(n).submit(fill, c) for c in chunks if c]:
        f.result()
