"""numba building blocks the automaton constructions share: growable arrays, hashed slots of
state tuples, and edges grouped by source (CSR)."""
from __future__ import annotations

import numpy as np
from .kernel_cache import kernel

__all__ = ["HASH_MUL", "grow2", "grow1", "pair_list_hash", "probe", "rehash_from", "csr"]


HASH_MUL = np.uint64(0x9E3779B97F4A7C15)


@kernel(nogil=True)
def grow2(a, n):
    b = np.empty((n, a.shape[1]), dtype=a.dtype)
    b[:a.shape[0]] = a
    return b


@kernel(nogil=True)
def grow1(a, n):
    b = np.empty(n, dtype=a.dtype)
    b[:a.shape[0]] = a
    return b


@kernel(nogil=True)
def pair_list_hash(js, ss, m):
    h = np.uint64(1469598103934665603)
    for i in range(m):
        h = (h ^ np.uint64(js[i] * 1000003 + ss[i] + 1)) * HASH_MUL
        h ^= h >> np.uint64(31)
    return h


@kernel(nogil=True, inline="always")
def probe(slots, hashes, ptr, have_a, have_b, want_a, want_b, m, h):
    """Open-addressing lookup of the entry list ``want_*[:m]`` (hash ``h``) among rows
    ``have_*[ptr[r]:ptr[r+1]]``: ``(row or -1, free slot)``."""
    tsize = len(slots)
    slot = np.int64(h & np.uint64(tsize - 1))
    while True:
        r = slots[slot]
        if r < 0:
            return -1, slot
        if hashes[r] == h and ptr[r + 1] - ptr[r] == m:
            same = True
            base = ptr[r]
            for q in range(m):
                if have_a[base + q] != want_a[q] or have_b[base + q] != want_b[q]:
                    same = False
                    break
            if same:
                return r, slot
        slot = (slot + 1) & (tsize - 1)


@kernel(nogil=True)
def rehash_from(hashes, lo, hi, tsize):
    """A fresh slot table of ``tsize`` for rows ``lo..hi`` (one rule's subsets, or all rows)."""
    slots = np.full(tsize, -1, dtype=np.int64)
    for r in range(lo, hi):
        s2 = np.int64(hashes[r] & np.uint64(tsize - 1))
        while slots[s2] >= 0:
            s2 = (s2 + 1) & (tsize - 1)
        slots[s2] = r
    return slots


@kernel(nogil=True)
def csr(n, src):
    """Targets of each state as ``dst[ptr[s]:ptr[s+1]]`` (counting sort by source)."""
    ptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(len(src)):
        ptr[src[i] + 1] += 1
    for s in range(n):
        ptr[s + 1] += ptr[s]
    fill = ptr[:-1].copy()
    order = np.empty(len(src), dtype=np.int64)
    for i in range(len(src)):
        order[fill[src[i]]] = i
        fill[src[i]] += 1
    return ptr, order
