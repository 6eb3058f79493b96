"""numba kernels for the graph searches inside automaton construction.

Trimming and shortest-suffix distances run on every intermediate automaton
of a schema compile (hundreds per schema); in numpy each BFS layer costs a
dozen array calls, so a 20-byte property name meant ~1 ms per trim.  These
loops are linear in the transition table and take microseconds.
"""
from __future__ import annotations

import numba
import numpy as np

__all__ = ["backward_depth", "live_reachable", "warm_up_fsa_kernels"]


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


def warm_up_fsa_kernels() -> None:
    """Load (or compile, once per installation) the kernels ahead of the first schema."""
    t = np.full((1, 1), -1, dtype=np.int32)
    a = np.ones(1, dtype=np.bool_)
    live_reachable(t, a, 0)
