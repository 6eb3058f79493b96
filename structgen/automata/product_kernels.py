"""numba product constructions: the pair product of two DFAs (and, or, minus), and a DFA minus a
set of literal strings (walked as a trie)."""
from __future__ import annotations

import numpy as np
from .kernel_cache import kernel


from .table_kernels import grow1, grow2

__all__ = ["pair_product", "difference_trie"]


@kernel(nogil=True)
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


@kernel(nogil=True)
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


@kernel(nogil=True)
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
