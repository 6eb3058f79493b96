"""Least-recently-used caches bounded by the bytes they hold, not by a count of entries.

The engine's caches (token masks, trie walks, lexer cores) hold numpy arrays whose sizes differ
by orders of magnitude: a mask over DeepSeek-V4's 129k tokens is 16 KB, a walk's event arrays a
few bytes to megabytes, a lexer core up to tens of megabytes.  A count bound lets a long run over
many grammars grow the process by hundreds of megabytes (measured over MaskBench: +430 MB for
400 schemas); a byte bound keeps it where it was set.  Entries are kept in a plain dict (its
order is the recency: a hit moves its key to the end), so with int or int-tuple keys and array
values the garbage collector never tracks it.
"""
from __future__ import annotations

import functools
import threading
from itertools import islice
from typing import Any, Callable, Hashable, Iterator

import numpy as np

__all__ = ["ByteLRU", "nbytes_of", "byte_lru_cache"]


def nbytes_of(value: Any) -> int:
    """Bytes of the arrays in ``value`` (an array, or tuples/lists of them; other objects count 64)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (tuple, list)):
        return 64 + sum(nbytes_of(v) for v in value)
    nb = getattr(value, "nbytes", None)
    return int(nb) if isinstance(nb, (int, np.integer)) else 64


class ByteLRU:
    """A thread-safe LRU map holding at most ``max_bytes`` (as ``size_of`` counts each value).

    When an insertion goes over the bound, the least recently used entries are dropped until the
    cache holds at most three quarters of it (evicting in batches keeps inserts cheap)."""

    def __init__(self, max_bytes: int, size_of: Callable[[Any], int] = nbytes_of) -> None:
        self.max_bytes = int(max_bytes)
        self.size_of = size_of
        self.data: dict = {}
        self._sizes: dict = {}
        self.nbytes = 0
        self.lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self.lock:
            hit = self.data.pop(key, None)
            if hit is not None:
                self.data[key] = hit  # now the most recently used
            return hit

    def put(self, key: Hashable, value: Any) -> None:
        size = self.size_of(value)
        with self.lock:
            if key in self.data:
                del self.data[key]
                self.nbytes -= self._sizes.pop(key)
            self.data[key] = value
            self._sizes[key] = size
            self.nbytes += size
            if self.nbytes > self.max_bytes:
                self._shrink(self.max_bytes * 3 // 4)

    def _shrink(self, target: int) -> None:
        while self.nbytes > target and self.data:
            batch = list(islice(self.data, max(1, len(self.data) // 8)))
            for k in batch:
                del self.data[k]
                self.nbytes -= self._sizes.pop(k)
                if self.nbytes <= target:
                    break

    def discard_where(self, pred: Callable[[Hashable], bool]) -> None:
        """Drop the entries whose key satisfies ``pred``."""
        with self.lock:
            for k in [k for k in self.data if pred(k)]:
                del self.data[k]
                self.nbytes -= self._sizes.pop(k)

    def clear(self) -> None:
        with self.lock:
            self.data.clear()
            self._sizes.clear()
            self.nbytes = 0

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self) -> Iterator:
        return iter(list(self.data))

    def items(self) -> list:
        with self.lock:
            return list(self.data.items())


def byte_lru_cache(max_bytes: int, size_of: Callable[[Any], int] = nbytes_of) -> Callable:
    """``functools.lru_cache`` for functions of hashable positional arguments whose results are
    arrays or automata (anything ``size_of`` can weigh), bounded by bytes.  The wrapper has
    ``cache`` (the :class:`ByteLRU`) and ``cache_clear()``."""
    def decorate(fn: Callable) -> Callable:
        cache = ByteLRU(max_bytes, size_of)

        @functools.wraps(fn)
        def wrapper(*args: Any) -> Any:
            hit = cache.get(args)
            if hit is None:
                hit = fn(*args)
                cache.put(args, hit)
            return hit

        wrapper.cache = cache  # type: ignore[attr-defined]
        wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
        return wrapper
    return decorate
