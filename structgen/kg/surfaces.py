"""Sorted sets of surface forms: the terms one slot of a graph constraint may hold.

A slot's set depends on the graph state (the subject written, the relation chosen, the entities a
chain has reached); it is built when the slot is first met and kept in a bounded cache.  Prefix and
membership tests are binary searches in the sorted byte strings, so a slot of 10^5 entities costs
one sorted list, not a trie of Python objects."""
from __future__ import annotations

from bisect import bisect_left
from typing import Callable, Hashable, Iterable

import numpy as np

from ..byte_lru import ByteLRU

__all__ = ["SurfaceSet", "SurfaceCache"]


class SurfaceSet:
    """Byte strings (sorted, distinct) and the term id each names."""

    __slots__ = ("keys", "ids", "nbytes")

    def __init__(self, pairs: Iterable[tuple[bytes, int]]):
        d = dict(pairs)
        self.keys = sorted(d)
        self.ids = [d[k] for k in self.keys]
        self.nbytes = sum(len(k) + 90 for k in self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def has_prefix(self, p: bytes) -> bool:
        """Some member starts with ``p``."""
        i = bisect_left(self.keys, p)
        return i < len(self.keys) and self.keys[i].startswith(p)

    def id_of(self, p: bytes) -> int | None:
        """The term ``p`` names exactly, or None."""
        i = bisect_left(self.keys, p)
        return self.ids[i] if i < len(self.keys) and self.keys[i] == p else None

    def min_rest(self, p: bytes) -> int:
        """Fewest bytes that complete ``p`` to a member (0 when it is one; large when none)."""
        rest = self.shortest_rest(p)
        return 1 << 30 if rest is None else len(rest)

    def shortest_rest(self, p: bytes) -> bytes | None:
        """The bytes that complete ``p`` to its shortest member (None when none starts with it);
        members sharing ``p`` are a contiguous run of the sorted keys."""
        lo = bisect_left(self.keys, p)
        hi = bisect_left(self.keys, p + b"\xff" * 8, lo)  # past every key starting with p (keys are UTF-8)
        best = None
        for k in self.keys[lo:hi]:
            if k.startswith(p) and (best is None or len(k) < len(best)):
                best = k
                if len(k) == len(p):
                    break
        return None if best is None else best[len(p):]


class SurfaceCache:
    """Surface sets per slot key, built by ``build(key)`` on first use, bounded in bytes."""

    def __init__(self, build: Callable[[Hashable], SurfaceSet], max_bytes: int = 64 << 20):
        self.build = build
        self.lru = ByteLRU(max_bytes, size_of=lambda s: s.nbytes)
        self.built = 0

    def get(self, key: Hashable) -> SurfaceSet:
        hit = self.lru.get(key)
        if hit is None:
            hit = self.build(key)
            self.built += 1
            self.lru.put(key, hit)
        return hit


def surface_pairs(ids: np.ndarray, surfaces: list) -> list[tuple[bytes, int]]:
    """(utf-8 surface, id) for the ids whose surface exists."""
    out = []
    for i in ids.tolist():
        s = surfaces[i]
        if s is not None:
            out.append((s.encode("utf-8"), i))
    return out
