"""numba kernel for the subset construction behind rule automata.

Every rule body of a grammar becomes a symbol NFA (``structgen.engine.rules``);
determinising them one Python set at a time was a third of a median JSON
Schema compile.  Here all rules of a grammar are determinised in one call over
flat edge arrays: NFA state sets are sorted int runs interned in an
open-addressing table (the probe shared with the lexer kernels).
"""
from __future__ import annotations

import numba
import numpy as np

from .lexer_kernels import _grow1, _hash, _probe

__all__ = ["determinize_rules"]


@numba.njit(cache=True, nogil=True)
def _csr(n, src, dst):
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


@numba.njit(cache=True, nogil=True)
def _closure(stack, top, mark, stamp, eps_ptr, eps_order, eps_dst, cur):
    """Epsilon closure of the ``top`` states on ``stack``, sorted into ``cur``; returns its size."""
    m = 0
    while top > 0:
        top -= 1
        s = stack[top]
        if mark[s] == stamp:
            continue
        mark[s] = stamp
        cur[m] = s
        m += 1
        for k in range(eps_ptr[s], eps_ptr[s + 1]):
            t = eps_dst[eps_order[k]]
            if mark[t] != stamp:
                stack[top] = t
                top += 1
    cur[:m].sort()
    return m


@numba.njit(cache=True, nogil=True)
def determinize_rules(n, eps_src, eps_dst, e_src, e_sym, e_dst, n_syms, starts, finals, max_work):
    """Subset construction of every rule's symbol NFA (states ``0..n``; rule ``r`` from
    ``starts[r]`` to ``finals[r]``; symbols ``0..n_syms``).

    Returns ``(ok, dfa_ptr, is_final, o_src, o_sym, o_dst)``: rule ``r`` owns DFA states
    ``dfa_ptr[r]..dfa_ptr[r+1]`` (its start first), edges ``o_*`` use global state ids.
    ``ok`` is False when the summed size of the expanded subsets passes ``max_work``."""
    eps_ptr, eps_order = _csr(n, eps_src, eps_dst)
    e_ptr, e_order = _csr(n, e_src, e_dst)
    mark = np.zeros(n, dtype=np.int64)
    stamp = 0
    # a state can be pushed once per incoming edge before it is marked
    stack = np.empty(len(eps_src) + len(e_src) + 2, dtype=np.int32)
    cur = np.empty(max(n, 1), dtype=np.int32)
    # interned subsets: sorted runs pool[set_ptr[i]:set_ptr[i+1]] (global ids; one slot table per rule)
    pool = np.empty(256, dtype=np.int32)
    set_ptr = np.zeros(65, dtype=np.int64)
    hashes = np.empty(64, dtype=np.uint64)
    is_final = np.empty(64, dtype=np.bool_)
    n_sets = 0
    # the targets of the subset being expanded, chained per symbol
    sym_head = np.full(n_syms + 1, -1, dtype=np.int64)
    sym_tail = np.full(n_syms + 1, -1, dtype=np.int64)
    touched = np.empty(n_syms + 1, dtype=np.int64)
    t_dst = np.empty(max(len(e_src), 1), dtype=np.int32)
    t_next = np.empty(max(len(e_src), 1), dtype=np.int64)
    n_rules = len(starts)
    dfa_ptr = np.zeros(n_rules + 1, dtype=np.int64)
    o_src = np.empty(256, dtype=np.int32)
    o_sym = np.empty(256, dtype=np.int32)
    o_dst = np.empty(256, dtype=np.int32)
    n_out = 0
    work = 0
    for r in range(n_rules):
        base = n_sets
        tsize = 64
        slots = np.full(tsize, -1, dtype=np.int64)
        i = base - 1  # -1 before the start subset exists
        while i < n_sets:
            n_touched = 1
            if i >= base:
                n_touched = 0
                for q in range(set_ptr[i], set_ptr[i + 1]):
                    s = pool[q]
                    for k in range(e_ptr[s], e_ptr[s + 1]):
                        e = e_order[k]
                        sym = np.int64(e_sym[e])
                        t_dst[k] = e_dst[e]
                        t_next[k] = -1
                        if sym_head[sym] < 0:
                            sym_head[sym] = k
                            touched[n_touched] = sym
                            n_touched += 1
                        else:
                            t_next[sym_tail[sym]] = k
                        sym_tail[sym] = k
                work += set_ptr[i + 1] - set_ptr[i]
                if work > max_work:
                    return False, dfa_ptr, is_final[:0], o_src[:0], o_sym[:0], o_dst[:0]
            for tq in range(n_touched):
                stamp += 1
                top = 0
                if i < base:
                    stack[0] = starts[r]
                    top = 1
                else:
                    sym = touched[tq]
                    k = sym_head[sym]
                    while k >= 0:
                        stack[top] = t_dst[k]
                        top += 1
                        k = t_next[k]
                    sym_head[sym] = -1
                m = _closure(stack, top, mark, stamp, eps_ptr, eps_order, eps_dst, cur)
                h = _hash(cur, cur, m)
                found, slot = _probe(slots, hashes, set_ptr, pool, pool, cur, cur, m, h)
                if found < 0:
                    found = n_sets
                    if n_sets >= len(hashes):
                        cap = 2 * len(hashes)
                        set_ptr = _grow1(set_ptr, cap + 1)
                        hashes = _grow1(hashes, cap)
                        is_final = _grow1(is_final, cap)
                    b0 = set_ptr[n_sets]
                    if b0 + m > len(pool):
                        pool = _grow1(pool, 2 * (b0 + m))
                    fin = False
                    for q in range(m):
                        pool[b0 + q] = cur[q]
                        if cur[q] == finals[r]:
                            fin = True
                    set_ptr[n_sets + 1] = b0 + m
                    hashes[n_sets] = h
                    is_final[n_sets] = fin
                    slots[slot] = n_sets
                    n_sets += 1
                    if 2 * (n_sets - base) > tsize:
                        tsize *= 2
                        slots = _rehash_from(hashes, base, n_sets, tsize)
                if i >= base:
                    if n_out >= len(o_src):
                        o_src = _grow1(o_src, 2 * len(o_src))
                        o_sym = _grow1(o_sym, 2 * len(o_sym))
                        o_dst = _grow1(o_dst, 2 * len(o_dst))
                    o_src[n_out] = i
                    o_sym[n_out] = touched[tq]
                    o_dst[n_out] = found
                    n_out += 1
            i += 1
        dfa_ptr[r + 1] = n_sets
    return True, dfa_ptr, is_final[:n_sets], o_src[:n_out], o_sym[:n_out], o_dst[:n_out]


@numba.njit(cache=True, nogil=True)
def _rehash_from(hashes, lo, hi, tsize):
    """A slot table for rows ``lo..hi`` (one rule's subsets)."""
    slots = np.full(tsize, -1, dtype=np.int64)
    for r in range(lo, hi):
        s2 = np.int64(hashes[r] & np.uint64(tsize - 1))
        while slots[s2] >= 0:
            s2 = (s2 + 1) & (tsize - 1)
        slots[s2] = r
    return slots


@numba.njit(cache=True, nogil=True)
def trim_rules(dfa_ptr, is_final, o_src, o_sym, o_dst):
    """Which edges survive trimming: nonterminal edges into rules that derive no string are
    dropped (productive rules by fixpoint), then edges into states that can no longer reach a
    final state of their rule.  Returns ``(productive per rule, keep per edge)``."""
    n_rules = len(dfa_ptr) - 1
    n = len(is_final)
    ptr, order = _csr(n, o_src, o_dst)
    productive = np.zeros(n_rules, dtype=np.bool_)
    seen = np.zeros(n, dtype=np.int64)
    stamp = 0
    stack = np.empty(max(n, 1), dtype=np.int64)
    changed = True
    while changed:
        changed = False
        for r in range(n_rules):
            if productive[r]:
                continue
            stamp += 1
            top = 1
            stack[0] = dfa_ptr[r]
            seen[dfa_ptr[r]] = stamp
            while top > 0:
                top -= 1
                s = stack[top]
                if is_final[s]:
                    productive[r] = True
                    changed = True
                    break
                for k in range(ptr[s], ptr[s + 1]):
                    e = order[k]
                    sym = o_sym[e]
                    if sym & 1 and not productive[sym >> 1]:
                        continue
                    t = o_dst[e]
                    if seen[t] != stamp:
                        seen[t] = stamp
                        stack[top] = t
                        top += 1
    keep = np.ones(len(o_src), dtype=np.bool_)
    for e in range(len(o_src)):
        if o_sym[e] & 1 and not productive[o_sym[e] >> 1]:
            keep[e] = False
    # co-reachability of final states over the kept edges (backwards)
    rptr, rorder = _csr(n, o_dst, o_src)
    live = is_final.copy()
    top = 0
    for s in range(n):
        if live[s]:
            stack[top] = s
            top += 1
    while top > 0:
        top -= 1
        t = stack[top]
        for k in range(rptr[t], rptr[t + 1]):
            e = rorder[k]
            if keep[e] and not live[o_src[e]]:
                live[o_src[e]] = True
                stack[top] = o_src[e]
                top += 1
    for e in range(len(o_src)):
        if not live[o_dst[e]]:
            keep[e] = False
    return productive, keep
