"""numba graph searches over DFA tables: trimming, shortest-suffix distances, renumbering, the
states that loop on plain text, counted chains and column classes.

Trimming and shortest-suffix distances run on every intermediate automaton of a schema compile
(hundreds per schema); in numpy each BFS layer costs a dozen array calls, so a 20-byte property
name meant ~1 ms per trim.  These loops are linear in the transition table and take microseconds.
"""
from __future__ import annotations

import numpy as np

from .table_kernels import HASH_MUL
from .kernel_cache import kernel

__all__ = ["predecessors", "backward_depth", "live_reachable", "UTF8_FORMS", "plain_loop_states", "renumber_rows", "counted_chain", "column_classes"]


@kernel(nogil=True)
def predecessors(trans):
    """Reverse edges in compressed rows: ``preds[offsets[t]:offsets[t + 1]]`` step into ``t`` (a
    state once per transition)."""
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


@kernel(nogil=True)
def backward_depth(trans, accept):
    """Fewest bytes from each state to an accepting one (-1: none)."""
    n = trans.shape[0]
    offsets, preds = predecessors(trans)
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


@kernel(nogil=True)
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


@kernel(nogil=True)
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


@kernel(nogil=True)
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


@kernel(nogil=True)
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


@kernel(nogil=True)
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


@kernel(nogil=True)
def column_classes(trans):
    """Byte classes with identical columns merged: (new class of each column, in first-seen
    order; the first column of each new class).  Columns are hashed, then compared on equal hash."""
    n, c = trans.shape
    h = np.empty(c, dtype=np.uint64)
    for k in range(c):
        x = np.uint64(0xCBF29CE484222325)  # the same start for every column
        for s in range(n):
            x = (x ^ np.uint64(trans[s, k] + 2)) * HASH_MUL
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
