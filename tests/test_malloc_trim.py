"""Freed C memory is given back after big compiles (glibc keeps a thread arena's pages otherwise)."""
import sys

import numpy as np
import pytest

from structgen import malloc_trim
from structgen.compiler import _resident_bytes, run_deep


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_pages_freed_on_the_compile_thread_go_back_to_the_system():
    def churn():
        # many mid-sized blocks (under glibc's mmap threshold: they come from the thread's arena)
        blocks = [np.ones(20_000, dtype=np.uint8) for _ in range(10_000)]
        keep = blocks[-1].copy()  # the arena's top stays in use: only a trim returns the rest
        del blocks
        return keep

    base = _resident_bytes()
    kept = run_deep(churn, timeout=60, max_memory=1 << 30)  # a compile-sized job: trimmed after
    assert kept.sum() == 20_000
    assert _resident_bytes() - base < 100 << 20  # 200 MB were allocated on that thread


def test_only_big_jobs_are_trimmed(monkeypatch):
    calls = []
    monkeypatch.setattr(malloc_trim, "trim", lambda: calls.append(1) or True)
    assert not malloc_trim.trim_after(0.001, 1 << 20)
    assert malloc_trim.trim_after(malloc_trim.TRIM_AFTER_S, None)
    assert malloc_trim.trim_after(0.001, malloc_trim.TRIM_AFTER_BYTES)
    assert len(calls) == 2
