"""numba kernels for the graph searches inside automaton construction.

Trimming and shortest-suffix distances run on every intermediate automaton
of a schema compile (hundreds per schema); in numpy each BFS layer costs a
dozen array calls, so a 20-byte property name meant ~1 ms per trim.  These
loops are linear in the transition table and take microseconds.
"""
from __future__ import annotations

import numba
import numpy as np

__all__ = ["UTF8_FORMS", "backward_depth", "column_classes", "depth_canonical", "difference_trie", "hopcroft_blocks",
           "live_reachable", "nfa_successors",
           "counted_chain", "pair_product", "plain_loop_states", "renumber_rows", "subset_construction",
           "warm_up_fsa_kernels"]

_MUL = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True)
def _predecessors(trans):
    n, c = trans.shape
    offsets = np.zeros(n + 1, dtype=np.int64)
    for s in range(n):
        for k in range(c):
            t = trans[s, k]
            if t >= 0:
                offsets[t + 1] += 1
    for i in range(n):
        offsets[i + 1] += offsets[i]
    fill = offsets[:-1].copy()
    preds = np.empty(offsets[n], dtype=np.int64)
    for s in range(n):
        for k in range(c):
            t = trans[s, k]
            if t >= 0:
                preds[fill[t]] = s
                fill[t] += 1
    return offsets, preds


@numba.njit(cache=True, nogil=True)
def backward_depth(trans, accept):
    """Fewest bytes from each state to an accepting one (-1: none)."""
    n = trans.shape[0]
    offsets, preds = _predecessors(trans)
    depth = np.full(n, -1, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)
    head = 0
    tail = 0
    for s in range(n):
        if accept[s]:
            depth[s] = 0
            queue[tail] = s
            tail += 1
    while head < tail:
        t = queue[head]
        head += 1
        for i in range(offsets[t], offsets[t + 1]):
            s = preds[i]
            if depth[s] < 0:
                depth[s] = depth[t] + 1
                queue[tail] = s
                tail += 1
    return depth


@numba.njit(cache=True, nogil=True)
def live_reachable(trans, accept, start):
    """States that can reach acceptance and are reachable from ``start`` through such states."""
    n, c = trans.shape
    alive = backward_depth(trans, accept) >= 0
    keep = np.zeros(n, dtype=np.bool_)
    if not alive[start]:
        return keep
    stack = np.empty(n, dtype=np.int64)
    top = 0
    keep[start] = True
    stack[top] = start
    top += 1
    while top > 0:
        top -= 1
        s = stack[top]
        for k in range(c):
            t = trans[s, k]
            if t >= 0 and alive[t] and not keep[t]:
                keep[t] = True
                stack[top] = t
                top += 1
    return keep


#: Every well-formed multi-byte UTF-8 character as byte ranges (RFC 3629; -1: unused position).
UTF8_FORMS = np.array([
    [[0xC2, 0xDF], [0x80, 0xBF], [-1, -1], [-1, -1]],
    [[0xE0, 0xE0], [0xA0, 0xBF], [0x80, 0xBF], [-1, -1]],
    [[0xE1, 0xEC], [0x80, 0xBF], [0x80, 0xBF], [-1, -1]],
    [[0xED, 0xED], [0x80, 0x9F], [0x80, 0xBF], [-1, -1]],
    [[0xEE, 0xEF], [0x80, 0xBF], [0x80, 0xBF], [-1, -1]],
    [[0xF0, 0xF0], [0x90, 0xBF], [0x80, 0xBF], [0x80, 0xBF]],
    [[0xF1, 0xF3], [0x80, 0xBF], [0x80, 0xBF], [0x80, 0xBF]],
    [[0xF4, 0xF4], [0x80, 0x8F], [0x80, 0xBF], [0x80, 0xBF]],
], dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _utf8_loops(trans, classmap, s, cur, nxt):
    """Every multi-byte character read from state ``s`` keeps the automaton alive and brings
    it back to ``s`` (checked by the set of states each byte position can reach)."""
    for f in range(UTF8_FORMS.shape[0]):
        cur[0] = s
        n_cur = 1
        for p in range(4):
            lo = UTF8_FORMS[f, p, 0]
            if lo < 0:
                break
            hi = UTF8_FORMS[f, p, 1]
            n_nxt = 0
            for i in range(n_cur):
                x = cur[i]
                for b in range(lo, hi + 1):
                    t = trans[x, classmap[b]]
                    if t < 0:
                        return False
                    seen = False
                    for q in range(n_nxt):
                        if nxt[q] == t:
                            seen = True
                            break
                    if not seen:
                        if n_nxt == len(nxt):
                            return False  # more intermediate states than any UTF-8 decoder needs
                        nxt[n_nxt] = t
                        n_nxt += 1
            for q in range(n_nxt):
                cur[q] = nxt[q]
            n_cur = n_nxt
        if n_cur != 1 or cur[0] != s:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def plain_loop_states(trans, classmap, plain):
    """uint8 per state: 1 where every byte flagged in ``plain`` leads back to the same state,
    2 where moreover every well-formed multi-byte UTF-8 character does (free text: a trie
    walk takes whole subtrees of such text unvisited, see ``TokenTrie``)."""
    n, c = trans.shape
    plain_cls = np.zeros(c, dtype=np.bool_)
    for b in range(256):
        if plain[b]:
            plain_cls[classmap[b]] = True
    out = np.zeros(n, dtype=np.uint8)
    cur = np.empty(8, dtype=np.int64)
    nxt = np.empty(8, dtype=np.int64)
    for i in range(n):
        loops = True
        for k in range(c):
            if plain_cls[k] and trans[i, k] != i:
                loops = False
                break
        if loops:
            out[i] = 2 if _utf8_loops(trans, classmap, i, cur, nxt) else 1
    return out


@numba.njit(cache=True, nogil=True)
def renumber_rows(trans, order, new_id):
    """Rows ``order`` of ``trans`` with every target ``t`` renamed ``new_id[t]`` (-1 stays -1):
    the table of a trimmed or minimised automaton in one pass."""
    m = order.shape[0]
    c = trans.shape[1]
    out = np.empty((m, c), dtype=np.int32)
    for i in range(m):
        s = order[i]
        for k in range(c):
            t = trans[s, k]
            out[i, k] = new_id[t] if t >= 0 else -1
    return out


@numba.njit(cache=True, nogil=True)
def counted_chain(trans, accept, start, copies, lo, saturate):
    """``copies`` copies of a prefix-free unit automaton in a row (``lo`` or more units accepted):
    the table of "between lo and copies-1 characters" without a subset construction.

    The unit has one accepting state and it has no moves; finishing a unit in copy ``j`` enters
    copy ``j+1`` at the unit's start (the last copy starts itself again when ``saturate``, i.e.
    no upper bound).  States are (copy, non-accepting unit state), copy-major."""
    n, c = trans.shape
    idx = np.full(n, -1, dtype=np.int64)
    k = 0
    for s in range(n):
        if not accept[s]:
            idx[s] = k
            k += 1
    out = np.full((copies * k, c), -1, dtype=np.int32)
    acc = np.zeros(copies * k, dtype=np.bool_)
    s0 = idx[start]
    for j in range(copies):
        base = j * k
        if j >= lo:
            acc[base + s0] = True
        nxt = (j + 1) * k + s0 if j + 1 < copies else (base + s0 if saturate else -1)
        for s in range(n):
            if accept[s]:
                continue
            row = base + idx[s]
            for q in range(c):
                t = trans[s, q]
                if t < 0:
                    continue
                out[row, q] = nxt if accept[t] else base + idx[t]
    return out, acc, s0


@numba.njit(cache=True, nogil=True)
def column_classes(trans):
    """Byte classes with identical columns merged: (new class of each column, in first-seen
    order; the first column of each new class).  Columns are hashed, then compared on equal hash."""
    n, c = trans.shape
    h = np.empty(c, dtype=np.uint64)
    for k in range(c):
        x = np.uint64(0xCBF29CE484222325)  # the same start for every column
        for s in range(n):
            x = (x ^ np.uint64(trans[s, k] + 2)) * _MUL
            x ^= x >> np.uint64(29)
        h[k] = x
    cls = np.empty(c, dtype=np.int64)
    reps = np.empty(c, dtype=np.int64)
    n_reps = 0
    for k in range(c):
        found = -1
        for r in range(n_reps):
            j = reps[r]
            if h[j] != h[k]:
                continue
            same = True
            for s in range(n):
                if trans[s, j] != trans[s, k]:
                    same = False
                    break
            if same:
                found = r
                break
        if found < 0:
            reps[n_reps] = k
            found = n_reps
            n_reps += 1
        cls[k] = found
    return cls, reps[:n_reps]


@numba.njit(cache=True, nogil=True)
def _same_signature(trans, part, r, s):
    if part[r] != part[s]:
        return False
    for c in range(trans.shape[1]):
        a = trans[r, c]
        b = trans[s, c]
        pa = part[a] if a >= 0 else -1
        pb = part[b] if b >= 0 else -1
        if pa != pb:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def depth_canonical(trans, accept, depth):
    """Smallest state of each class of states no string of at most ``depth``
    bytes tells apart (Moore refinement, ``depth`` rounds at most).

    Each round hashes (own class, successors' classes) into an open-addressing
    table and confirms equal hashes by comparing the signatures, so the
    result is exact; a round costs O(states x classes)."""
    n, c = trans.shape
    part = np.zeros(n, dtype=np.int64)
    k = 0
    acc_id = -1
    rej_id = -1
    for s in range(n):  # class ids numbered by first occurrence: always below n
        if accept[s]:
            if acc_id < 0:
                acc_id = k
                k += 1
            part[s] = acc_id
        else:
            if rej_id < 0:
                rej_id = k
                k += 1
            part[s] = rej_id
    size = 1
    while size < 2 * n + 2:
        size *= 2
    slots = np.empty(size, dtype=np.int64)
    h = np.empty(n, dtype=np.uint64)
    new = np.empty(n, dtype=np.int64)
    for _ in range(depth):
        for s in range(n):
            x = np.uint64(part[s]) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(1)
            for j in range(c):
                t = trans[s, j]
                v = np.uint64(part[t] + 2) if t >= 0 else np.uint64(1)
                x = (x ^ v) * np.uint64(0x100000001B3)
                x ^= x >> np.uint64(29)
            h[s] = x
        slots[:] = -1
        cnt = 0
        for s in range(n):
            i = np.int64(h[s] & np.uint64(size - 1))
            while True:
                r = slots[i]
                if r < 0:
                    slots[i] = s
                    new[s] = cnt
                    cnt += 1
                    break
                if h[r] == h[s] and _same_signature(trans, part, r, s):
                    new[s] = new[r]
                    break
                i = (i + 1) & (size - 1)
        if cnt == k:  # refinement only splits classes: same count, same partition
            break
        part[:] = new
        k = cnt
    rep = np.full(n, -1, dtype=np.int64)
    canon = np.empty(n, dtype=np.int32)
    for s in range(n):
        if rep[part[s]] < 0:
            rep[part[s]] = s
        canon[s] = rep[part[s]]
    return canon


@numba.njit(cache=True, nogil=True)
def pair_product(ta, tb, acc_a, acc_b, start_a, start_b, mode, max_states):
    """Breadth-first product of two DFAs over shared classes (columns already aligned).

    ``mode`` 0 = intersection, 1 = union, 2 = difference (a minus b); a side
    that died is carried as -1.  Returns ``(n, trans, accept, a_state, b_state)``
    (the pair behind each product state), ``n = -1`` past ``max_states``."""
    C = ta.shape[1]
    NB = np.int64(tb.shape[0] + 1)
    cap = 64
    trans = np.empty((cap, C), dtype=np.int32)
    px = np.empty(cap, dtype=np.int64)
    py = np.empty(cap, dtype=np.int64)
    tsize = 256
    slots = np.full(tsize, -1, dtype=np.int64)
    keys = np.empty(cap, dtype=np.int64)
    px[0] = start_a
    py[0] = start_b
    keys[0] = (np.int64(start_a) + 1) * NB + (np.int64(start_b) + 1)
    slots[(keys[0] * np.int64(0x9E3779B1)) & (tsize - 1)] = 0
    n = 1
    i = 0
    # the search runs in _pair_run, which never reallocates (see subset_construction); it
    # stops before a state that could overflow the arrays, which then grow here
    while True:
        i, n, status = _pair_run(ta, tb, NB, mode, max_states, i, n, trans, px, py, keys, slots)
        if status == 0:
            break
        if status < 0:
            return -1, trans[:0], np.zeros(0, dtype=np.bool_), px[:0], py[:0]
        if n + C > cap:
            while n + C > cap:
                cap *= 2
            trans = grow2(trans, cap)
            px = grow1(px, cap)
            py = grow1(py, cap)
            keys = grow1(keys, cap)
        if 2 * (n + C) > tsize:
            while 2 * (n + C) > tsize:
                tsize *= 2
            slots = np.full(tsize, -1, dtype=np.int64)
            for r in range(n):
                s2 = (keys[r] * np.int64(0x9E3779B1)) & (tsize - 1)
                while slots[s2] >= 0:
                    s2 = (s2 + 1) & (tsize - 1)
                slots[s2] = r
    accept = np.empty(n, dtype=np.bool_)
    for r in range(n):
        xa = px[r] >= 0 and acc_a[px[r]]
        xb = py[r] >= 0 and acc_b[py[r]]
        if mode == 0:
            accept[r] = xa and xb
        elif mode == 1:
            accept[r] = xa or xb
        else:
            accept[r] = xa and not xb
    return n, trans[:n], accept, px[:n], py[:n]


@numba.njit(cache=True, nogil=True)
def _pair_run(ta, tb, NB, mode, max_states, i, n, trans, px, py, keys, slots):
    """Expand product states ``i``.. of :func:`pair_product` while the arrays have room for
    what one state can add: ``(i, n, status)``, status 0 done, 1 grow, -1 past ``max_states``."""
    C = ta.shape[1]
    cap = len(keys)
    tsize = len(slots)
    while i < n:
        if n + C > cap or 2 * (n + C) > tsize:
            return i, n, 1
        x = px[i]
        y = py[i]
        for c in range(C):
            nx = ta[x, c] if x >= 0 else -1
            ny = tb[y, c] if y >= 0 else -1
            if mode == 0:
                ok = nx >= 0 and ny >= 0
            elif mode == 1:
                ok = nx >= 0 or ny >= 0
            else:
                ok = nx >= 0
            if not ok:
                trans[i, c] = -1
                continue
            key = (np.int64(nx) + 1) * NB + (np.int64(ny) + 1)
            slot = (key * np.int64(0x9E3779B1)) & (tsize - 1)
            found = -1
            while slots[slot] >= 0:
                if keys[slots[slot]] == key:
                    found = slots[slot]
                    break
                slot = (slot + 1) & (tsize - 1)
            if found < 0:
                if n >= max_states:
                    return i, n, -1
                px[n] = nx
                py[n] = ny
                keys[n] = key
                slots[slot] = n
                found = n
                n += 1
            trans[i, c] = found
        i += 1
    return i, n, 0


# -- open-addressing tables of int runs (shared with the lexer kernels) ---------------------------

@numba.njit(cache=True, nogil=True)
def grow2(a, n):
    b = np.empty((n, a.shape[1]), dtype=a.dtype)
    b[:a.shape[0]] = a
    return b


@numba.njit(cache=True, nogil=True)
def grow1(a, n):
    b = np.empty(n, dtype=a.dtype)
    b[:a.shape[0]] = a
    return b


@numba.njit(cache=True, nogil=True)
def pair_list_hash(js, ss, m):
    h = np.uint64(1469598103934665603)
    for i in range(m):
        h = (h ^ np.uint64(js[i] * 1000003 + ss[i] + 1)) * _MUL
        h ^= h >> np.uint64(31)
    return h


@numba.njit(cache=True, nogil=True, inline="always")
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


@numba.njit(cache=True, nogil=True)
def rehash_from(hashes, lo, hi, tsize):
    """A fresh slot table of ``tsize`` for rows ``lo..hi`` (one rule's subsets, or all rows)."""
    slots = np.full(tsize, -1, dtype=np.int64)
    for r in range(lo, hi):
        s2 = np.int64(hashes[r] & np.uint64(tsize - 1))
        while slots[s2] >= 0:
            s2 = (s2 + 1) & (tsize - 1)
        slots[s2] = r
    return slots


def warm_up_fsa_kernels() -> None:
    """Load (or compile, once per installation) the kernels ahead of the first schema."""
    t = np.full((1, 1), -1, dtype=np.int32)
    a = np.ones(1, dtype=np.bool_)
    live_reachable(t, a, 0)
    renumber_rows(t, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int32))
    column_classes(t)
    counted_chain(np.array([[1], [-1]], dtype=np.int32), np.array([False, True]), 0, 2, 1, False)
    depth_canonical(t, a, 1)
    hopcroft_blocks(t, a)
    one, none = np.zeros(1, dtype=np.int32), np.zeros(0, dtype=np.int32)
    subset_construction(2, none, none, one, one, one + 1, 1, one, one + 1, 10, 10, np.zeros(2, dtype=np.bool_))
    pair_product(t, t, a, a, 0, 0, 0, 4)
    difference_trie(t, np.zeros(256, dtype=np.int32), a, 0, np.zeros(1, dtype=np.uint8), np.array([0, 1]))


@numba.njit(cache=True, nogil=True)
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


@numba.njit(cache=True, nogil=True)
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


@numba.njit(cache=True, nogil=True)
def hopcroft_blocks(trans, accept):
    """Myhill-Nerode classes of a (partial) DFA by Hopcroft's partition refinement,
    O(states x classes x log states): the block id of every state.

    A missing transition goes to an implicit dead state (index ``n``).  The partition is
    kept as one array of states with a range per block; splitting a block moves its marked
    states to the front of its range."""
    n, C = trans.shape
    N = n + 1  # with the dead state
    # inverse transitions per class: preds of t under c = inv[ptr[c*N+t] : ptr[c*N+t+1]]
    ptr = np.zeros(C * N + 1, dtype=np.int64)
    for s in range(N):
        for c in range(C):
            t = trans[s, c] if s < n else -1
            t = t if t >= 0 else n
            ptr[c * N + t + 1] += 1
    for i in range(C * N):
        ptr[i + 1] += ptr[i]
    fill = ptr[:-1].copy()
    inv = np.empty(C * N, dtype=np.int64)
    for s in range(N):
        for c in range(C):
            t = trans[s, c] if s < n else -1
            t = t if t >= 0 else n
            inv[fill[c * N + t]] = s
            fill[c * N + t] += 1
    # refinable partition
    elems = np.empty(N, dtype=np.int64)
    pos = np.empty(N, dtype=np.int64)
    block = np.empty(N, dtype=np.int64)
    b_start = np.empty(N + 1, dtype=np.int64)
    b_end = np.empty(N + 1, dtype=np.int64)
    b_mark = np.zeros(N + 1, dtype=np.int64)  # marked states are elems[b_start : b_start + b_mark]
    k = 0
    for s in range(n):
        if accept[s]:
            elems[k] = s
            pos[s] = k
            block[s] = 0
            k += 1
    n_acc = k
    for s in range(N):
        if s == n or not accept[s]:
            elems[k] = s
            pos[s] = k
            block[s] = 1 if n_acc > 0 else 0
            k += 1
    n_blocks = 0
    if n_acc > 0:
        b_start[0] = 0
        b_end[0] = n_acc
        n_blocks = 1
    b_start[n_blocks] = n_acc
    b_end[n_blocks] = N
    n_blocks += 1
    # work list of (block, class) splitters
    in_work = np.zeros((N + 1) * C, dtype=np.bool_)
    work = np.empty((N + 1) * C, dtype=np.int64)
    top = 0
    first = 0 if n_blocks == 1 or n_acc <= N - n_acc else 1
    for c in range(C):
        work[top] = first * C + c
        in_work[first * C + c] = True
        top += 1
    touched = np.empty(N + 1, dtype=np.int64)
    splitter = np.empty(N, dtype=np.int64)
    while top > 0:
        top -= 1
        item = work[top]
        in_work[item] = False
        a, c = item // C, item % C
        # the splitter's states (copied: splits below may reorder them)
        m = 0
        for i in range(b_start[a], b_end[a]):
            splitter[m] = elems[i]
            m += 1
        n_touched = 0
        for i in range(m):
            t = splitter[i]
            for q in range(ptr[c * N + t], ptr[c * N + t + 1]):
                s = inv[q]
                y = block[s]
                p = pos[s]
                mk = b_start[y] + b_mark[y]
                if p >= mk:  # not marked yet: swap into the marked prefix
                    other = elems[mk]
                    elems[mk] = s
                    pos[s] = mk
                    elems[p] = other
                    pos[other] = p
                    if b_mark[y] == 0:
                        touched[n_touched] = y
                        n_touched += 1
                    b_mark[y] += 1
        for i in range(n_touched):
            y = touched[i]
            mcount = b_mark[y]
            b_mark[y] = 0
            size = b_end[y] - b_start[y]
            if mcount == size:
                continue
            # split: marked part becomes a new block z
            z = n_blocks
            n_blocks += 1
            b_start[z] = b_start[y]
            b_end[z] = b_start[y] + mcount
            b_start[y] = b_end[z]
            for j in range(b_start[z], b_end[z]):
                block[elems[j]] = z
            small = z if mcount <= size - mcount else y
            for d in range(C):
                if in_work[y * C + d]:
                    if not in_work[z * C + d]:
                        work[top] = z * C + d
                        in_work[z * C + d] = True
                        top += 1
                else:
                    w = small * C + d
                    if not in_work[w]:
                        work[top] = w
                        in_work[w] = True
                        top += 1
    return block[:n]


@numba.njit(cache=True, nogil=True)
def difference_trie(a_trans, a_cm, a_accept, a_start, data, offs):
    """The table of ``a`` minus a set of byte strings (``fsa._difference_literals``): the trie of
    the strings on top, each node carrying the row of the one state of ``a`` its prefix leads to
    (children overriding, a completed string not accepting), then ``a``'s own states.

    ``data``/``offs``: the strings, sorted and distinct, concatenated.  Byte classes are ``a``'s
    split so every trie byte has a class of its own.  Returns ``(trans, accept, classmap, a_of,
    n_trie, any_removed)``: ``a_of`` is the state of ``a`` behind each trie node; a string ``a``
    cannot read stops where ``a`` dies (nothing to remove there)."""
    n_str = len(offs) - 1
    cap = offs[n_str] + 1
    a_of = np.empty(cap, dtype=np.int64)
    removed = np.zeros(cap, dtype=np.bool_)
    e_src = np.empty(cap, dtype=np.int64)
    e_byte = np.empty(cap, dtype=np.int64)
    e_dst = np.empty(cap, dtype=np.int64)
    max_len = 0
    for k in range(n_str):
        max_len = max(max_len, offs[k + 1] - offs[k])
    path = np.zeros(max_len + 1, dtype=np.int64)  # trie node at each depth of the last string
    a_of[0] = a_start
    n_t = 1
    n_e = 0
    valid = 0  # depths of the last string that have nodes
    any_removed = False
    for k in range(n_str):
        s0 = offs[k]
        length = offs[k + 1] - s0
        d = 0
        if k > 0:  # sorted: the nodes shared with earlier strings are the last string's
            p0 = offs[k - 1]
            m = min(length, offs[k] - p0, valid)
            while d < m and data[s0 + d] == data[p0 + d]:
                d += 1
        cur = path[d]
        ok = True
        while d < length:
            st = a_trans[a_of[cur], a_cm[data[s0 + d]]]
            if st < 0:
                ok = False
                break
            a_of[n_t] = st
            e_src[n_e] = cur
            e_byte[n_e] = data[s0 + d]
            e_dst[n_e] = n_t
            n_e += 1
            cur = n_t
            n_t += 1
            d += 1
            path[d] = cur
        valid = d
        if ok:
            removed[cur] = True
            any_removed = True
    # classes: a's, split so every trie byte is alone (numbered in key order)
    used = np.zeros(256, dtype=np.bool_)
    for e in range(n_e):
        used[e_byte[e]] = True
    key = np.empty(256, dtype=np.int64)
    for b in range(256):
        key[b] = np.int64(a_cm[b]) * 257 + (b if used[b] else 256)
    order = np.argsort(key)
    classmap = np.empty(256, dtype=np.int32)
    ca = np.empty(256, dtype=np.int64)
    n_cls = 0
    for i in range(256):
        b = order[i]
        if i == 0 or key[b] != key[order[i - 1]]:
            ca[n_cls] = key[b] // 257
            n_cls += 1
        classmap[b] = n_cls - 1
    n_a = a_trans.shape[0]
    trans = np.empty((n_t + n_a, n_cls), dtype=np.int32)
    accept = np.empty(n_t + n_a, dtype=np.bool_)
    for s in range(n_a):  # a's own states below the trie
        for c in range(n_cls):
            v = a_trans[s, ca[c]]
            trans[n_t + s, c] = v + n_t if v >= 0 else -1
        accept[n_t + s] = a_accept[s]
    for t in range(n_t):  # each trie node: its state's row, then its children
        trans[t, :] = trans[n_t + a_of[t], :]
        accept[t] = a_accept[a_of[t]] and not removed[t]
    for e in range(n_e):
        trans[e_src[e], classmap[e_byte[e]]] = e_dst[e]
    return trans, accept, classmap, a_of[:n_t].copy(), n_t, any_removed


@numba.njit(cache=True, nogil=True, inline="always")
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


@numba.njit(cache=True, nogil=True)
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
