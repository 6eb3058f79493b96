"""Give memory that C code freed back to the operating system (glibc's ``malloc_trim``).

Compiles run on their own thread (``structgen.compiler``), so glibc serves them from a separate
malloc arena; when a large compile's temporaries are freed, that arena keeps the pages, and when
the caches later evict what it built, the pages stay too.  Measured over MaskBench's dev split
(7,928 schemas): the process ended at 1.6 GB resident without trimming and at 1.28 GB with it,
the ``allany`` schemas alone leaving +260 MB behind.  A trim costs ~0.75 ms, so it is done only
after compiles big enough to have left pages behind (see :func:`trim_after`).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

__all__ = ["trim", "trim_after", "TRIM_AFTER_S", "TRIM_AFTER_BYTES"]

#: a compile that ran this long, or grew the process by this much, is followed by a trim
TRIM_AFTER_S = 0.05
TRIM_AFTER_BYTES = 16 << 20


def _load_trim():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.malloc_trim
    except (OSError, AttributeError):  # musl and others: no malloc_trim
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


_malloc_trim = _load_trim()


def trim() -> bool:
    """Release the free pages of every malloc arena; False where the C library cannot."""
    if _malloc_trim is None:
        return False
    _malloc_trim(0)
    return True


def trim_after(seconds: float, grown_bytes: int | None) -> bool:
    """Trim if a job that took ``seconds`` and grew the resident set by ``grown_bytes`` (None:
    unknown) was big enough to leave freed pages behind."""
    if seconds >= TRIM_AFTER_S or (grown_bytes is not None and grown_bytes >= TRIM_AFTER_BYTES):
        return trim()
    return False
