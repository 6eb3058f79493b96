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
import os
import sys
import threading
from itertools import islice
from typing import Any, Callable, Hashable, Iterator

import numpy as np

__all__ = ["ByteLRU", "nbytes_of", "byte_lru_cache", "set_cache_budget", "cache_budget", "cache_stats",
           "reserve_budget", "budget_bytes"]


#: what a numpy array object costs besides its data, and a cache entry besides its value (the
#: key, its slots in two dicts): with tens of thousands of small automata cached, these count
ARRAY_OVERHEAD = 112
ENTRY_OVERHEAD = 160
#: longer tuples, lists and dicts are weighed from a sample of their items
SAMPLED_LENGTH = 16


# ----------------------------------------------------------------------------- the process's budget
#: every process-wide cache by name, with the bytes it may hold by default
_DEFAULTS: dict[str, int] = {}
_CACHES: dict[str, "ByteLRU"] = {}
_budget_lock = threading.RLock()
#: the bytes all caches together may hold (None: the sum of their defaults)
_target: int | None = None


def _scale() -> float:
    default = sum(_DEFAULTS.values())
    return 1.0 if _target is None or not default else _target / default


def reserve_budget(name: str, default_bytes: int) -> None:
    """Count a cache in the budget with its default bound (the compiler's grammars, which are not
    a :class:`ByteLRU`, call this themselves); the caches already counted are re-bounded."""
    with _budget_lock:
        _DEFAULTS[name] = int(default_bytes)
        if _target is not None:
            _rebound()


def budget_bytes(name: str) -> int:
    """The bytes cache ``name`` may hold now (its default scaled to the budget)."""
    with _budget_lock:
        return int(_DEFAULTS[name] * _scale())


def cache_budget() -> int:
    """Bytes all structgen's caches together may hold (the sum of their bounds)."""
    with _budget_lock:
        return int(sum(_DEFAULTS.values()) * _scale())


def set_cache_budget(total_bytes: int | None) -> None:
    """Bound all structgen's caches together to ``total_bytes`` (None: their defaults, about 690 MB),
    each keeping its share; caches over their new bound drop their least recent entries now.

    Also read at import from ``STRUCTGEN_CACHE_MB``.  A smaller budget trades compile and
    first-mask time on constraints seen before (their automata and masks are rebuilt) for memory."""
    global _target
    if total_bytes is not None and total_bytes <= 0:
        raise ValueError("the cache budget must be a positive number of bytes")
    with _budget_lock:
        _target = None if total_bytes is None else int(total_bytes)
        _rebound()


def _rebound() -> None:
    for name, c in list(_CACHES.items()):
        c.set_bound(int(_DEFAULTS[name] * _scale()))


def cache_stats() -> dict[str, dict[str, int]]:
    """Per process-wide cache: ``bytes`` held (as weighed), ``max_bytes`` and ``entries``."""
    with _budget_lock:
        caches = list(_CACHES.items())
    return {name: {"bytes": c.nbytes, "max_bytes": c.max_bytes, "entries": len(c)} for name, c in caches}


def _budget_from_environment() -> None:
    raw = os.environ.get("STRUCTGEN_CACHE_MB")
    if raw:
        try:
            mb = float(raw)
        except ValueError:
            raise ValueError(f"STRUCTGEN_CACHE_MB must be a number of megabytes, not {raw!r}") from None
        set_cache_budget(int(mb * 2**20))


def nbytes_of(value: Any, nested: bool = False) -> int:
    """Bytes ``value`` holds, estimated: arrays by their data, tuples and lists by their items,
    numbers and strings by their objects; an object with an integer ``nbytes`` (an automaton) by
    that at the top level, and as a reference (8 bytes) inside another value, whose owner counts it."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes) + ARRAY_OVERHEAD
    if value is None or isinstance(value, bool):
        return 8
    if isinstance(value, (int, float)):
        return 32
    if isinstance(value, (str, bytes)):
        return sys.getsizeof(value)
    if isinstance(value, (tuple, list)):
        n = len(value)
        if n > SAMPLED_LENGTH:  # weighed from its ends, not item by item: weighing must stay cheap
            return 56 + 8 * n + n * (nbytes_of(value[0], True) + nbytes_of(value[-1], True)) // 2
        return 56 + 8 * n + sum(nbytes_of(v, True) for v in value)
    if isinstance(value, dict):
        n = len(value)
        if n > SAMPLED_LENGTH:
            k, v = next(iter(value.items()))
            return sys.getsizeof(value) + n * (nbytes_of(k, True) + nbytes_of(v, True))
        return sys.getsizeof(value) + sum(nbytes_of(k, True) + nbytes_of(v, True) for k, v in value.items())
    if nested:
        return 8
    nb = getattr(value, "nbytes", None)
    return int(nb) if isinstance(nb, (int, np.integer)) else 64


class ByteLRU:
    """A thread-safe LRU map holding at most ``max_bytes`` (as ``size_of`` counts each value, plus
    :data:`ENTRY_OVERHEAD` per entry).

    When an insertion goes over the bound, the least recently used entries are dropped until the
    cache holds at most three quarters of it (evicting in batches keeps inserts cheap).  Values
    that grow after they are cached (automata gain tables as they are used) name a cheap
    ``version_of`` (an automaton's ``version``): a hit whose version changed is weighed again."""

    def __init__(self, max_bytes: int, size_of: Callable[[Any], int] = nbytes_of,
                 version_of: Callable[[Any], Hashable] | None = None, name: str | None = None) -> None:
        """A ``name``d cache is part of the process's budget (:func:`set_cache_budget`): ``max_bytes``
        is its default share."""
        self.max_bytes = int(max_bytes)
        self.size_of = size_of
        self.version_of = version_of
        self.data: dict = {}
        self._sizes: dict = {}
        self._versions: dict = {}
        self.nbytes = 0
        self.lock = threading.Lock()
        if name is not None:
            with _budget_lock:
                _CACHES[name] = self
                reserve_budget(name, max_bytes)
                self.max_bytes = budget_bytes(name)

    def set_bound(self, max_bytes: int) -> None:
        """Hold at most ``max_bytes`` from now on (dropping the least recent entries if over)."""
        with self.lock:
            self.max_bytes = int(max_bytes)
            if self.nbytes > self.max_bytes:
                self._shrink(self.max_bytes)

    def get(self, key: Hashable) -> Any:
        with self.lock:
            hit = self.data.pop(key, None)
            if hit is not None:
                self.data[key] = hit  # now the most recently used
                if self.version_of is not None:
                    v = self.version_of(hit)
                    if v != self._versions.get(key):
                        self._versions[key] = v
                        size = self.size_of(hit) + ENTRY_OVERHEAD
                        self.nbytes += size - self._sizes[key]
                        self._sizes[key] = size
                        if self.nbytes > self.max_bytes:
                            self._shrink(self.max_bytes * 3 // 4)
            return hit

    def put(self, key: Hashable, value: Any) -> None:
        size = self.size_of(value) + ENTRY_OVERHEAD
        version = self.version_of(value) if self.version_of is not None else None
        with self.lock:
            if key in self.data:
                del self.data[key]
                self.nbytes -= self._sizes.pop(key)
            self.data[key] = value
            self._sizes[key] = size
            if version is not None:
                self._versions[key] = version
            self.nbytes += size
            if self.nbytes > self.max_bytes:
                self._shrink(self.max_bytes * 3 // 4)

    def _shrink(self, target: int) -> None:
        while self.nbytes > target and self.data:
            batch = list(islice(self.data, max(1, len(self.data) // 8)))
            for k in batch:
                del self.data[k]
                self.nbytes -= self._sizes.pop(k)
                self._versions.pop(k, None)
                if self.nbytes <= target:
                    break

    def discard_where(self, pred: Callable[[Hashable], bool]) -> None:
        """Drop the entries whose key satisfies ``pred``."""
        with self.lock:
            for k in [k for k in self.data if pred(k)]:
                del self.data[k]
                self.nbytes -= self._sizes.pop(k)
                self._versions.pop(k, None)

    def clear(self) -> None:
        with self.lock:
            self.data.clear()
            self._sizes.clear()
            self._versions.clear()
            self.nbytes = 0

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self) -> Iterator:
        return iter(list(self.data))

    def items(self) -> list:
        with self.lock:
            return list(self.data.items())


def byte_lru_cache(max_bytes: int, size_of: Callable[[Any], int] = nbytes_of,
                   version_of: Callable[[Any], Hashable] | None = None) -> Callable:
    """``functools.lru_cache`` for functions of hashable positional arguments whose results are
    arrays or automata (anything ``size_of`` can weigh), bounded by bytes.  The wrapper has
    ``cache`` (the :class:`ByteLRU`) and ``cache_clear()``."""
    def decorate(fn: Callable) -> Callable:
        name = f"{fn.__module__.removeprefix('structgen.')}.{fn.__qualname__}"
        cache = ByteLRU(max_bytes, size_of, version_of, name=name)

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


_budget_from_environment()
