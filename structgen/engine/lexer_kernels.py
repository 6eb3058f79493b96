"""numba kernel for the product exploration behind combined lexers.

A combined lexer runs every allowed terminal DFA at once; its states are the
tuples of live sub-states, explored breadth-first while two or more terminals
are alive.  Product states are stored sparsely (only live (terminal, state)
pairs): an object's key lexer may hold dozens of key literals but only two or
three of them are alive after the first bytes, so a state costs its live
entries rather than the number of terminals.
"""
from __future__ import annotations

import numba
import numpy as np

__all__ = ["explore_product", "warm_up_lexer_kernels"]

_MUL = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True)
def _grow2(a, n):
    b = np.empty((n, a.shape[1]), dtype=a.dtype)
    b[:a.shape[0]] = a
    return b


@numba.njit(cache=True, nogil=True)
def _grow1(a, n):
    b = np.empty(n, dtype=a.dtype)
    b[:a.shape[0]] = a
    return b


@numba.njit(cache=True, nogil=True)
def _hash(js, ss, m):
    h = np.uint64(1469598103934665603)
    for i in range(m):
        h = (h ^ np.uint64(js[i] * 1000003 + ss[i] + 1)) * _MUL
        h ^= h >> np.uint64(31)
    return h


@numba.njit(cache=True, nogil=True)
def explore_product(table, row_off, starts, max_states):
    """Breadth-first product of DFAs that share byte classes.

    ``table`` stacks every DFA's transitions (rows ``row_off[j]`` onward for
    DFA ``j``; -1 is dead).  Returns ``(n, ptr, ent_j, ent_s, trans, single_j,
    single_s)``: product state ``i`` has live entries ``ent_*[ptr[i]:ptr[i+1]]``;
    ``trans[i, c]`` is the next product state, or -1 with ``single_j[i, c] >= 0``
    when exactly one DFA (``single_j``, in state ``single_s``) survives the
    byte.  ``n`` is -1 when more than ``max_states`` states would be needed."""
    k = len(starts)
    C = table.shape[1]
    cap = 64
    ecap = max(256, 2 * k)
    ptr = np.zeros(cap + 1, dtype=np.int64)
    ent_j = np.empty(ecap, dtype=np.int32)
    ent_s = np.empty(ecap, dtype=np.int32)
    hashes = np.empty(cap, dtype=np.uint64)
    trans = np.empty((cap, C), dtype=np.int32)
    single_j = np.empty((cap, C), dtype=np.int32)
    single_s = np.empty((cap, C), dtype=np.int32)
    tsize = 256
    slots = np.full(tsize, -1, dtype=np.int64)
    m = 0
    for j in range(k):
        if starts[j] >= 0:
            ent_j[m] = j
            ent_s[m] = starts[j]
            m += 1
    ptr[1] = m
    hashes[0] = _hash(ent_j, ent_s, m)
    slots[np.int64(hashes[0] & np.uint64(tsize - 1))] = 0
    n = 1
    nj = np.empty(k, dtype=np.int32)
    ns = np.empty(k, dtype=np.int32)
    i = 0
    while i < n:
        for c in range(C):
            a = 0
            for e in range(ptr[i], ptr[i + 1]):
                j = ent_j[e]
                t = table[row_off[j] + ent_s[e], c]
                if t >= 0:
                    nj[a] = j
                    ns[a] = t
                    a += 1
            single_j[i, c] = -1
            if a == 0:
                trans[i, c] = -1
                continue
            if a == 1:
                trans[i, c] = -1
                single_j[i, c] = nj[0]
                single_s[i, c] = ns[0]
                continue
            h = _hash(nj, ns, a)
            slot = np.int64(h & np.uint64(tsize - 1))
            found = -1
            while True:
                r = slots[slot]
                if r < 0:
                    break
                if hashes[r] == h and ptr[r + 1] - ptr[r] == a:
                    same = True
                    base = ptr[r]
                    for q in range(a):
                        if ent_j[base + q] != nj[q] or ent_s[base + q] != ns[q]:
                            same = False
                            break
                    if same:
                        found = r
                        break
                slot = (slot + 1) & (tsize - 1)
            if found < 0:
                if n >= max_states:
                    return -1, ptr, ent_j, ent_s, trans, single_j, single_s
                if n >= cap:
                    cap *= 2
                    ptr = _grow1(ptr, cap + 1)
                    hashes = _grow1(hashes, cap)
                    trans = _grow2(trans, cap)
                    single_j = _grow2(single_j, cap)
                    single_s = _grow2(single_s, cap)
                if ptr[n] + a > ecap:
                    while ptr[n] + a > ecap:
                        ecap *= 2
                    ent_j = _grow1(ent_j, ecap)
                    ent_s = _grow1(ent_s, ecap)
                base = ptr[n]
                for q in range(a):
                    ent_j[base + q] = nj[q]
                    ent_s[base + q] = ns[q]
                ptr[n + 1] = base + a
                hashes[n] = h
                slots[slot] = n
                found = n
                n += 1
                if 2 * n > tsize:  # rehash at half load
                    tsize *= 2
                    slots = np.full(tsize, -1, dtype=np.int64)
                    for r in range(n):
                        s2 = np.int64(hashes[r] & np.uint64(tsize - 1))
                        while slots[s2] >= 0:
                            s2 = (s2 + 1) & (tsize - 1)
                        slots[s2] = r
            trans[i, c] = found
        i += 1
    return n, ptr[:n + 1], ent_j[:ptr[n]], ent_s[:ptr[n]], trans[:n], single_j[:n], single_s[:n]


def warm_up_lexer_kernels() -> None:
    """Load (or compile, once per installation) the kernel ahead of the first lexer."""
    explore_product(np.full((1, 1), -1, dtype=np.int32), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int32), 8)
