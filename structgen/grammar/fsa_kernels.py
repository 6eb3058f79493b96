"""numba kernels for the graph searches inside automaton construction.

Trimming and shortest-suffix distances run on every intermediate automaton
of a schema compile (hundreds per schema); in numpy each BFS layer costs a
dozen array calls, so a 20-byte property name meant ~1 ms per trim.  These
loops are linear in the transition table and take microseconds.
"""
from __future__ import annotations

import numba
import numpy as np

__all__ = ["backward_depth", "depth_canonical", "live_reachable", "pair_product", "warm_up_fsa_kernels"]


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
    that died is carried as -1.  Returns ``(n, trans, accept)``, ``n = -1``
    past ``max_states``."""
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
    while i < n:
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
                    return -1, trans[:0], np.zeros(0, dtype=np.bool_)
                if n >= cap:
                    cap *= 2
                    t2 = np.empty((cap, C), dtype=np.int32)
                    t2[:n] = trans[:n]
                    trans = t2
                    px2 = np.empty(cap, dtype=np.int64)
                    px2[:n] = px[:n]
                    px = px2
                    py2 = np.empty(cap, dtype=np.int64)
                    py2[:n] = py[:n]
                    py = py2
                    k2 = np.empty(cap, dtype=np.int64)
                    k2[:n] = keys[:n]
                    keys = k2
                px[n] = nx
                py[n] = ny
                keys[n] = key
                slots[slot] = n
                found = n
                n += 1
                if 2 * n > tsize:
                    tsize *= 2
                    slots = np.full(tsize, -1, dtype=np.int64)
                    for r in range(n):
                        s2 = (keys[r] * np.int64(0x9E3779B1)) & (tsize - 1)
                        while slots[s2] >= 0:
                            s2 = (s2 + 1) & (tsize - 1)
                        slots[s2] = r
            trans[i, c] = found
        i += 1
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
    return n, trans[:n], accept


def warm_up_fsa_kernels() -> None:
    """Load (or compile, once per installation) the kernels ahead of the first schema."""
    t = np.full((1, 1), -1, dtype=np.int32)
    a = np.ones(1, dtype=np.bool_)
    live_reachable(t, a, 0)
    depth_canonical(t, a, 1)
    pair_product(t, t, a, a, 0, 0, 0, 4)
