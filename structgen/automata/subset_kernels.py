"""numba subset constructions: an NFA's eager determinisation, and the successor tables of its
important states that the lazy DFA (:mod:`structgen.automata.lazy_dfa`) builds its states from."""
from __future__ import annotations

import numpy as np

from .table_kernels import csr, grow1, pair_list_hash, probe, rehash_from
from .kernel_cache import kernel

__all__ = ["subset_construction", "nfa_successors"]


@kernel(nogil=True)
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


@kernel(nogil=True)
def subset_construction(n, eps_src, eps_dst, e_src, e_sym, e_dst, n_syms, starts, finals, max_work, max_states,
                        universal):
    """Subset construction of several NFAs sharing one state space (states ``0..n``; NFA
    ``r`` from ``starts[r]`` to ``finals[r]``; edge symbols ``0..n_syms``): a grammar's rule
    bodies, or one byte NFA whose symbols are byte classes.

    Returns ``(ok, dfa_ptr, is_final, o_src, o_sym, o_dst)``: NFA ``r`` owns DFA states
    ``dfa_ptr[r]..dfa_ptr[r+1]`` (its start first), edges ``o_*`` use global state ids.
    ``ok`` is False when the summed size of the expanded subsets passes ``max_work`` or
    more than ``max_states`` subsets are needed (huge automata fail in a bounded time).  Subsets are sorted int runs interned in an
    open-addressing table.

    ``universal`` (one flag per NFA state, or empty) marks states that accept every string the
    automaton's alphabet can spell (a search pattern's "matched, anything may follow"): a subset
    holding one is that state's closure alone, so the partial matches still tracked beside it do
    not multiply the subsets (an unanchored ``alpha|beta|rc`` in JSON strings: 3,475 -> ~130)."""
    eps_ptr, eps_order = csr(n, eps_src)
    e_ptr, e_order = csr(n, e_src)
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
        tq = -1
        n_touched = 0
        # the search runs in _subset_run, which never reallocates (an array reassigned inside a
        # numba loop keeps LLVM from holding the arrays' pointers in registers: ~10x slower);
        # it stops where an array is full, the array grows here, and it resumes where it stopped
        while True:
            status, i, tq, n_touched, n_sets, n_out, work, stamp, need = _subset_run(
                r, base, i, tq, n_touched, n_sets, n_out, work, stamp, starts, finals, universal, eps_ptr,
                eps_order, eps_dst, e_ptr, e_order, e_sym, e_dst, mark, stack, cur, pool, set_ptr, hashes, is_final,
                slots, sym_head, sym_tail, touched, t_dst, t_next, o_src, o_sym, o_dst, max_work, max_states)
            if status == 0:
                break
            if status < 0:
                return False, dfa_ptr, is_final[:0], o_src[:0], o_sym[:0], o_dst[:0]
            if status == 1:
                cap = 2 * len(hashes)
                set_ptr = grow1(set_ptr, cap + 1)
                hashes = grow1(hashes, cap)
                is_final = grow1(is_final, cap)
            elif status == 2:
                pool = grow1(pool, 2 * need)
            elif status == 3:
                tsize *= 2
                slots = rehash_from(hashes, base, n_sets, tsize)
            else:
                cap = 2 * max(need, len(o_src))
                o_src = grow1(o_src, cap)
                o_sym = grow1(o_sym, cap)
                o_dst = grow1(o_dst, cap)
        dfa_ptr[r + 1] = n_sets
    return True, dfa_ptr, is_final[:n_sets], o_src[:n_out], o_sym[:n_out], o_dst[:n_out]


@kernel(nogil=True)
def _subset_run(r, base, i, tq0, n_touched, n_sets, n_out, work, stamp, starts, finals, universal, eps_ptr, eps_order,
                eps_dst, e_ptr, e_order, e_sym, e_dst, mark, stack, cur, pool, set_ptr, hashes, is_final, slots,
                sym_head, sym_tail, touched, t_dst, t_next, o_src, o_sym, o_dst, max_work, max_states):
    """Expand rule ``r``'s subsets from subset ``i`` (target symbol ``tq0``; -1: its targets are
    not gathered yet) until done or an array is full.  Returns ``(status, i, tq, n_touched,
    n_sets, n_out, work, stamp, need)``: status 0 done, -1 over a limit, 1 subset table full,
    2 pool too small (``need`` entries), 3 slot table half full, 4 edge arrays too small
    (``need`` edges).  Nothing of the step that stopped was done, so resuming repeats it."""
    tsize = len(slots)
    while i < n_sets:
        if tq0 < 0:
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
                    return -1, i, tq0, n_touched, n_sets, n_out, work, stamp, 0
            tq0 = 0
        if i >= base and n_out + n_touched - tq0 > len(o_src):
            return 4, i, tq0, n_touched, n_sets, n_out, work, stamp, n_out + n_touched - tq0
        for tq in range(tq0, n_touched):
            stamp += 1
            top = 0
            if i < base:
                stack[0] = starts[r]
                top = 1
            else:
                k = sym_head[touched[tq]]
                while k >= 0:
                    stack[top] = t_dst[k]
                    top += 1
                    k = t_next[k]
            m = _closure(stack, top, mark, stamp, eps_ptr, eps_order, eps_dst, cur)
            if len(universal):
                for q in range(m):
                    if universal[cur[q]]:
                        stamp += 1
                        stack[0] = cur[q]
                        m = _closure(stack, 1, mark, stamp, eps_ptr, eps_order, eps_dst, cur)
                        break
            h = pair_list_hash(cur, cur, m)
            found, slot = probe(slots, hashes, set_ptr, pool, pool, cur, cur, m, h)
            if found < 0:
                if n_sets >= max_states:
                    return -1, i, tq, n_touched, n_sets, n_out, work, stamp, 0
                if n_sets >= len(hashes):
                    return 1, i, tq, n_touched, n_sets, n_out, work, stamp, 0
                b0 = set_ptr[n_sets]
                if b0 + m > len(pool):
                    return 2, i, tq, n_touched, n_sets, n_out, work, stamp, b0 + m
                if 2 * (n_sets + 1 - base) > tsize:
                    return 3, i, tq, n_touched, n_sets, n_out, work, stamp, 0
                found = n_sets
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
            if i >= base:
                sym_head[touched[tq]] = -1
                o_src[n_out] = i
                o_sym[n_out] = touched[tq]
                o_dst[n_out] = found
                n_out += 1
        tq0 = -1
        i += 1
    return 0, i, tq0, n_touched, n_sets, n_out, work, stamp, 0


@kernel(nogil=True, inline="always")
def _closure_into(u0, stamp, mark, seen, stack, eps_ptr, eps_order, eps_dst, dist, index, out, n_out):
    """Append to ``out`` the important states (``index`` >= 0) of the epsilon closure of ``u0``
    that can reach the final state and are not yet ``seen`` in this ``stamp``; returns the count."""
    top = 0
    stack[top] = u0
    top += 1
    while top > 0:
        top -= 1
        u = stack[top]
        if mark[u] == stamp:
            continue
        mark[u] = stamp
        if index[u] >= 0 and seen[index[u]] != stamp:
            seen[index[u]] = stamp
            out[n_out] = index[u]
            n_out += 1
        for q in range(eps_ptr[u], eps_ptr[u + 1]):
            v = eps_dst[eps_order[q]]
            if mark[v] != stamp and dist[v] >= 0:
                stack[top] = v
                top += 1
    return n_out


@kernel(nogil=True)
def nfa_successors(n, eps_src, eps_dst, e_src, e_clo, e_chi, e_dst, n_classes, start, final):
    """Tables of :func:`structgen.grammar.fsa.nfa_tables`: for each *important* state (one that
    reads a byte, or the final state) from which ``final`` is reachable, and each byte class, the
    sorted important states the class leads to (epsilon closures taken).  Returns ``(imp, dist,
    succ_ptr, succ, start_set)``: the important states' NFA ids, every NFA state's fewest bytes to
    ``final`` (-1: unreachable), the successor table (CSR over ``state * n_classes + class``) and
    the start's closure."""
    eps_ptr, eps_order = csr(n, eps_src)
    # fewest bytes to the final state: 0-1 BFS backwards (epsilon edges cost 0)
    n_rev = len(eps_src) + len(e_src)
    rev_src = np.empty(n_rev, dtype=np.int64)
    rev_dst = np.empty(n_rev, dtype=np.int64)
    rev_w = np.zeros(n_rev, dtype=np.int64)
    rev_src[:len(eps_src)] = eps_dst
    rev_dst[:len(eps_src)] = eps_src
    rev_src[len(eps_src):] = e_dst
    rev_dst[len(eps_src):] = e_src
    rev_w[len(eps_src):] = 1
    rptr, rorder = csr(n, rev_src)
    dist = np.full(n, -1, dtype=np.int64)
    deque = np.empty(2 * (n_rev + n) + 2, dtype=np.int64)
    head = n_rev + n + 1
    tail = head
    dist[final] = 0
    deque[tail] = final
    tail += 1
    while head < tail:
        t = deque[head]
        head += 1
        for k in range(rptr[t], rptr[t + 1]):
            e = rorder[k]
            s = rev_dst[e]
            d = dist[t] + rev_w[e]
            if dist[s] < 0 or d < dist[s]:
                dist[s] = d
                if rev_w[e] == 0:  # to the front: the deque stays sorted by distance
                    head -= 1
                    deque[head] = s
                else:
                    deque[tail] = s
                    tail += 1
    reads = np.zeros(n, dtype=np.uint8)
    for i in range(len(e_src)):
        reads[e_src[i]] = 1
    index = np.full(n, -1, dtype=np.int64)
    n_imp = 0
    for s in range(n):
        if dist[s] >= 0 and (reads[s] or s == final):
            index[s] = n_imp
            n_imp += 1
    imp = np.empty(n_imp, dtype=np.int64)
    for s in range(n):
        if index[s] >= 0:
            imp[index[s]] = s
    bptr, border = csr(n, e_src)  # byte edges grouped by source
    succ_ptr = np.zeros(n_imp * n_classes + 1, dtype=np.int64)
    succ = np.empty(max(16, 4 * n_imp), dtype=np.int32)
    m = 0
    mark = np.zeros(n, dtype=np.int64)
    seen = np.zeros(n_imp, dtype=np.int64)
    stack = np.empty(n + len(eps_src) + 1, dtype=np.int64)
    out = np.empty(n_imp, dtype=np.int32)
    stamp = 1
    n_out = _closure_into(start, stamp, mark, seen, stack, eps_ptr, eps_order, eps_dst, dist, index, out, 0) \
        if dist[start] >= 0 else 0
    start_set = out[:n_out].copy()
    start_set.sort()
    for i in range(n_imp):
        s = imp[i]
        for c in range(n_classes):
            stamp += 1
            n_out = 0
            for k in range(bptr[s], bptr[s + 1]):
                e = border[k]
                if e_clo[e] <= c <= e_chi[e] and dist[e_dst[e]] >= 0:
                    n_out = _closure_into(e_dst[e], stamp, mark, seen, stack, eps_ptr, eps_order, eps_dst, dist,
                                          index, out, n_out)
            if m + n_out > len(succ):
                bigger = np.empty(2 * (m + n_out), dtype=np.int32)
                bigger[:m] = succ[:m]
                succ = bigger
            out[:n_out].sort()
            succ[m:m + n_out] = out[:n_out]
            m += n_out
            succ_ptr[i * n_classes + c + 1] = m
    return imp, dist, succ_ptr, succ[:m].copy(), start_set
