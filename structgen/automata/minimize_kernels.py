"""numba kernels that merge DFA states: Hopcroft's partition refinement, and the classes of
states no string of a bounded length tells apart."""
from __future__ import annotations

import numpy as np
from .kernel_cache import kernel

__all__ = ["depth_canonical", "hopcroft_blocks"]


@kernel(nogil=True)
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


@kernel(nogil=True)
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


@kernel(nogil=True)
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
