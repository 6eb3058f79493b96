"""numba kernels for the graph searches inside automaton construction.

Trimming and shortest-suffix distances run on every intermediate automaton
of a schema compile (hundreds per schema); in numpy each BFS layer costs a
dozen array calls, so a 20-byte property name meant ~1 ms per trim.  These
loops are linear in the transition table and take microseconds.
"""
from __future__ import annotations

import numba
import numpy as np

__all__ = ["backward_depth", "depth_canonical", "live_reachable", "warm_up_fsa_kernels"]


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


def warm_up_fsa_kernels() -> None:
    """Load (or compile, once per installation) the kernels ahead of the first schema."""
    t = np.full((1, 1), -1, dtype=np.int32)
    a = np.ones(1, dtype=np.bool_)
    live_reachable(t, a, 0)
    depth_canonical(t, a, 1)
