"""Append-only tables the garbage collector does not walk.

A parser's tables grow by a hundred thousand entries on a large grammar (python.lark), and a dict
or list that receives new tuples is tracked again at each insertion: every full collection then
walks all of it, which grew to hundreds of milliseconds in the middle of a mask.  Here values live
in frozen chunks (tuples, which the collector untracks once their items are untracked) and keys
are found through a dict of ints (hash -> id), which is never tracked; only the open chunk (at
most ``CHUNK`` entries) and the rare hash collisions stay in tracked containers.

What is left for a full collection to walk is the process's own long-lived objects: numba's
dispatchers and type registries, the imported modules. ~120,000 objects that took a full pass
110-150 ms, however small the parser's tables, and a pass can fall inside a mask.
:func:`freeze_long_lived` moves them out of the collector's reach once, when the first compiler
has loaded every kernel.
"""
from __future__ import annotations

import gc
import os
import threading

CHUNK = 4096

_frozen = False
_freeze_lock = threading.Lock()


def freeze_long_lived() -> bool:
    """Once per process: collect, then ``gc.freeze()`` what survives, so later full collections
    walk only what was made since (~0.01 ms instead of 110-150 ms). Frozen objects are still freed
    when their reference count drops to zero; only a cycle among them that becomes garbage later is
    kept (they are modules, kernels and registries that live as long as the process). Off with
    ``STRUCTGEN_GC_FREEZE=0``; returns whether this call froze."""
    global _frozen
    if os.environ.get("STRUCTGEN_GC_FREEZE", "1") == "0":
        return False
    with _freeze_lock:
        if _frozen:
            return False
        _frozen = True
    gc.collect()
    gc.freeze()
    return True


class ChunkedList:
    """A list that only grows, its items kept in tuples of ``CHUNK``."""

    __slots__ = ("_chunks", "_open", "_closed")

    def __init__(self) -> None:
        self._chunks: list[tuple] = []
        self._open: list = []
        self._closed = 0

    def append(self, value) -> int:
        """Adds ``value``; returns its index."""
        i = self._closed + len(self._open)
        self._open.append(value)
        if len(self._open) == CHUNK:
            self._chunks.append(tuple(self._open))
            self._open = []
            self._closed += CHUNK
        return i

    def __getitem__(self, i: int):
        if i >= self._closed:
            return self._open[i - self._closed]
        if i < 0:
            raise IndexError(i)
        return self._chunks[i // CHUNK][i % CHUNK]

    def __len__(self) -> int:
        return self._closed + len(self._open)

    def __iter__(self):
        for chunk in self._chunks:
            yield from chunk
        yield from self._open


class InternTable:
    """Distinct keys (hashable, compared by value) numbered 0, 1, 2, ... as they are added."""

    __slots__ = ("keys", "_by_hash", "_collided")

    def __init__(self) -> None:
        self.keys = ChunkedList()
        self._by_hash: dict[int, int] = {}
        self._collided: dict = {}  # keys whose hash an earlier key has (rare)

    def get(self, key) -> int | None:
        """The key's number, or None."""
        i = self._by_hash.get(hash(key))
        if i is None:
            return None
        if self.keys[i] == key:
            return i
        return self._collided.get(key)

    def add(self, key) -> int:
        """Numbers a key :meth:`get` does not know."""
        i = len(self.keys)
        self.keys.append(key)
        h = hash(key)
        if h in self._by_hash:
            self._collided[key] = i
        else:
            self._by_hash[h] = i
        return i

    def __len__(self) -> int:
        return len(self.keys)
