"""numba kernel for the product exploration behind combined lexers.

A combined lexer runs every allowed terminal DFA at once; its states are the
tuples of live sub-states, explored breadth-first while two or more terminals
are alive.  Product states are stored sparsely (only live (terminal, state)
pairs): an object's key lexer may hold dozens of key literals but only two or
three of them are alive after the first bytes, so a state costs its live
entries rather than the number of terminals.
"""
from __future__ import annotations

import numpy as np

from ..automata.search_kernels import plain_loop_states
from ..automata.table_kernels import grow1, grow2, pair_list_hash, probe, rehash_from
from ..automata.kernel_cache import kernel

__all__ = ["build_core", "explore_product", "pack_dfa", "split_core", "warm_up_lexer_kernels"]



@kernel(nogil=True)
def explore_product(table, row_off, starts, max_states):
    """Breadth-first product of DFAs that share byte classes.

    ``table`` stacks every DFA's transitions (rows ``row_off[j]`` onward for
    DFA ``j``; -1 is dead).  Returns ``(n, ptr, ent_j, ent_s, trans, single_j,
    single_s)``: product state ``i`` has live entries ``ent_*[ptr[i]:ptr[i+1]]``;
    ``trans[i, c]`` is the next product state, or -1 with ``single_j[i, c] >= 0``
    when exactly one DFA (``single_j``, in state ``single_s``) survives the
    byte.  ``n`` is -1 when more than ``max_states`` states would be needed.

    The search itself runs in :func:`_explore_from`, which never reallocates: an array
    variable reassigned inside a numba loop (growing it in place) stops LLVM from keeping
    the arrays' pointers in registers, and made this loop ~10x slower.  When the arrays may
    not hold what one more state can add, it returns and the arrays grow here."""
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
    hashes[0] = pair_list_hash(ent_j, ent_s, m)
    slots[np.int64(hashes[0] & np.uint64(tsize - 1))] = 0
    nj = np.empty(k, dtype=np.int32)
    ns = np.empty(k, dtype=np.int32)
    i = 0
    n = 1
    while True:
        i, n, status = _explore_from(table, row_off, i, n, ptr, ent_j, ent_s, hashes, trans, single_j, single_s,
                                     slots, nj, ns, max_states)
        if status == 0:
            break
        if status < 0:
            return -1, ptr, ent_j, ent_s, trans, single_j, single_s
        # room for everything one more state can add: C new states of k entries each, load <= 1/2
        if n + C > cap:
            while n + C > cap:
                cap *= 2
            ptr = grow1(ptr, cap + 1)
            hashes = grow1(hashes, cap)
            trans = grow2(trans, cap)
            single_j = grow2(single_j, cap)
            single_s = grow2(single_s, cap)
        if ptr[n] + C * k > ecap:
            while ptr[n] + C * k > ecap:
                ecap *= 2
            ent_j = grow1(ent_j, ecap)
            ent_s = grow1(ent_s, ecap)
        if 2 * (n + C) > tsize:
            while 2 * (n + C) > tsize:
                tsize *= 2
            slots = rehash_from(hashes, 0, n, tsize)
    return n, ptr[:n + 1], ent_j[:ptr[n]], ent_s[:ptr[n]], trans[:n], single_j[:n], single_s[:n]


@kernel(nogil=True)
def _explore_from(table, row_off, i, n, ptr, ent_j, ent_s, hashes, trans, single_j, single_s, slots, nj, ns,
                  max_states):
    """Expand product states ``i``.. of :func:`explore_product` (finding new ones) while the
    arrays have room for what one state can add.  Returns ``(i, n, status)``: status 0 when
    done, 1 when the arrays must grow before state ``i``, -1 past ``max_states``."""
    k = len(row_off)
    C = table.shape[1]
    cap = len(hashes)
    ecap = len(ent_j)
    tsize = len(slots)
    while i < n:
        if n + C > cap or ptr[n] + C * k > ecap or 2 * (n + C) > tsize:
            return i, n, 1
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
            h = pair_list_hash(nj, ns, a)
            found, slot = probe(slots, hashes, ptr, ent_j, ent_s, nj, ns, a, h)
            if found < 0:
                if n >= max_states:
                    return i, n, -1
                base = ptr[n]
                for q in range(a):
                    ent_j[base + q] = nj[q]
                    ent_s[base + q] = ns[q]
                ptr[n + 1] = base + a
                hashes[n] = h
                slots[slot] = n
                found = n
                n += 1
            trans[i, c] = found
        i += 1
    return i, n, 0


def warm_up_lexer_kernels() -> None:
    """Load (or compile, once per installation) the kernels ahead of the first lexer."""
    packed = pack_dfa(1, 1, 0, np.zeros(256, dtype=np.int32), np.zeros(1, dtype=np.bool_), np.full(1, -1))
    build_core(packed, 1, np.zeros(256, dtype=np.bool_), 8)


@kernel(nogil=True)
def _intern_members(mem, m, kind_ptr, kind_mem, n_kinds, slots, hashes):
    """Kind id of the member list ``mem[:m]``, interned in ``kind_*`` (sized by the caller for
    every kind there can be: nothing is reallocated here).  Returns ``(kind, n_kinds)``."""
    h = pair_list_hash(mem, mem, m)
    found, slot = probe(slots, hashes, kind_ptr, kind_mem, kind_mem, mem, mem, m, h)
    if found >= 0:
        return found, n_kinds
    r = n_kinds
    base = kind_ptr[r]
    for q in range(m):
        kind_mem[base + q] = mem[q]
    kind_ptr[r + 1] = base + m
    hashes[r] = h
    slots[slot] = r
    return r, n_kinds + 1


@kernel(nogil=True, inline="always")
def _put(out, o, src, n):
    """``out[o:o + n] = src[:n]`` (any integer dtype into int32); returns ``o + n``."""
    for i in range(n):
        out[o + i] = src[i]
    return o + n


#: Per-DFA blob header: states, classes, start; then the 256-entry classmap, the accepting
#: flags and the flattened table (:func:`pack_dfa` writes it, :func:`build_core` reads it).
PACK_HEADER = 3


def pack_dfa(n_states: int, n_classes: int, start: int, classmap: np.ndarray, accept: np.ndarray,
             flat_trans: np.ndarray) -> np.ndarray:
    """One DFA as the int32 blob :func:`build_core` takes (blobs of several DFAs concatenate)."""
    blob = np.empty(PACK_HEADER + 256 + n_states + len(flat_trans), dtype=np.int32)
    blob[:PACK_HEADER] = (n_states, n_classes, start)
    blob[PACK_HEADER:PACK_HEADER + 256] = classmap
    blob[PACK_HEADER + 256:PACK_HEADER + 256 + n_states] = accept
    blob[PACK_HEADER + 256 + n_states:] = flat_trans
    return blob


def split_core(out: np.ndarray, k: int, total: int, n_cls: int, n_prod: int, n_kinds: int, n_kmem: int,
               n_ent: int) -> list[np.ndarray]:
    """Views of :func:`build_core`'s output array: ``[classmap, trans, acc_id, boundary, ptr, ent_j,
    ent_s, kind_ptr, kind_mem, block_off]`` (offsets in plain ints: this runs inside a mask)."""
    parts = []
    o = 0
    for n in (256, total * n_cls, total, total, n_prod + 1, n_ent, n_ent, n_kinds + 1, n_kmem, k):
        parts.append(out[o:o + n])
        o += n
    parts[1] = parts[1].reshape(total, n_cls)
    return parts


@kernel(nogil=True)
def build_core(packed, k, plain, max_states):
    """The whole combined-lexer table for ``k`` DFAs packed one after another in ``packed``
    (int32 blobs: ``states, classes, start``, classmap[256], accepting[states], table).

    Merges the byte classes, gathers each DFA's columns, explores the product
    (:func:`explore_product`), appends a copy of each DFA that ends up alone,
    labels every state with its accepting members (interned member lists) and
    flags the states that loop on every ``plain`` byte (what trie walks skip).

    Returns ``(total, n_cls, n_prod, n_kinds, n_kmem, n_ent, out, plain_loop)``: ``total`` is -1
    past ``max_states``; ``out`` (int32) holds, in order, the classmap[256], the table
    [total, n_cls], each state's accept set (its kind - 1: -1 accepts nothing) [total], the same with
    the start state -1 (where a lexeme may end) [total], the product's entry pointers [n_prod + 1],
    entry DFAs and sub-states [n_ent each], the member-list pointers [n_kinds + 1] and members
    [n_kmem], and each DFA's block offset [k] (:func:`split_core` takes it apart).  One array out instead of a dozen: numba boxes
    every returned array (~1 µs each), and a new lexer is built in the middle of a mask."""
    n_st = np.empty(k, dtype=np.int64)
    widths = np.empty(k, dtype=np.int64)
    starts = np.empty(k, dtype=np.int32)
    st_off = np.zeros(k, dtype=np.int64)
    cm_off = np.empty(k, dtype=np.int64)
    acc_off = np.empty(k, dtype=np.int64)
    raw_off = np.empty(k, dtype=np.int64)
    pos = 0
    for j in range(k):
        n_st[j] = packed[pos]
        widths[j] = packed[pos + 1]
        starts[j] = packed[pos + 2]
        cm_off[j] = pos + PACK_HEADER
        acc_off[j] = cm_off[j] + 256
        raw_off[j] = acc_off[j] + n_st[j]
        pos = raw_off[j] + n_st[j] * widths[j]
        if j + 1 < k:
            st_off[j + 1] = st_off[j] + n_st[j]
    # 1. merged byte classes: bytes with the same class in every DFA, refined one DFA at a time
    # (a pair table per DFA, numbered by first appearance: a few hundred array reads, no hashing)
    classmap = np.zeros(256, dtype=np.int32)
    nxt = np.empty(256, dtype=np.int32)
    n_cls = 1
    for j in range(k):
        w = widths[j]
        pair = np.full(n_cls * w, -1, dtype=np.int32)
        n_new = 0
        for b in range(256):
            key = classmap[b] * w + packed[cm_off[j] + b]
            c = pair[key]
            if c < 0:
                c = n_new
                pair[key] = c
                n_new += 1
            nxt[b] = c
        classmap[:] = nxt
        n_cls = n_new
    rep = np.full(n_cls, -1, dtype=np.int64)
    for b in range(256):
        if rep[classmap[b]] < 0:
            rep[classmap[b]] = b
    # 2. every DFA's table over the merged classes, stacked
    rows = 0
    for j in range(k):
        rows += n_st[j]
    table = np.empty((rows, n_cls), dtype=np.int32)
    for j in range(k):
        w = widths[j]
        for s in range(n_st[j]):
            src = raw_off[j] + s * w
            for c in range(n_cls):
                table[st_off[j] + s, c] = packed[src + packed[cm_off[j] + rep[c]]]
    # 3. the product while two or more DFAs are alive
    n_prod, ptr, ent_j, ent_s, prod_trans, single_j, single_s = explore_product(table, st_off, starts, max_states)
    block_off = np.full(k, -1, dtype=np.int64)
    if n_prod < 0:
        return -1, n_cls, n_prod, 0, 0, 0, classmap, np.zeros(0, dtype=np.uint8)
    for i in range(n_prod):
        for c in range(n_cls):
            if single_j[i, c] >= 0:
                block_off[single_j[i, c]] = 0
    total = n_prod
    for j in range(k):
        if block_off[j] >= 0:
            block_off[j] = total
            total += n_st[j]
    if total > max_states:
        return -1, n_cls, n_prod, 0, 0, 0, classmap, np.zeros(0, dtype=np.uint8)
    n_ent = ptr[n_prod]
    # 4. accepting members of every state, interned (kind 0: none); at most one new kind per
    # product state and per block (plus "none"), of at most the state's live entries: sized once,
    # so the labelling loop never reallocates (see explore_product)
    acc_key = np.zeros(total, dtype=np.int32)
    max_kinds = n_prod + k + 1
    kind_ptr = np.zeros(max_kinds + 1, dtype=np.int64)
    kind_mem = np.empty(n_ent + k, dtype=np.int32)
    hashes = np.empty(max_kinds, dtype=np.uint64)
    tsize = 64
    while tsize < 2 * max_kinds:
        tsize *= 2
    slots = np.full(tsize, -1, dtype=np.int64)
    mem = np.empty(max(k, 1), dtype=np.int32)
    kid, n_kinds = _intern_members(mem, 0, kind_ptr, kind_mem, 0, slots, hashes)
    for i in range(n_prod):
        m = 0
        for e in range(ptr[i], ptr[i + 1]):
            j = ent_j[e]
            if packed[acc_off[j] + ent_s[e]]:
                mem[m] = j
                m += 1
        if m:
            kid, n_kinds = _intern_members(mem, m, kind_ptr, kind_mem, n_kinds, slots, hashes)
            acc_key[i] = kid
    for j in range(k):
        off = block_off[j]
        if off < 0:
            continue
        mem[0] = j
        kid, n_kinds = _intern_members(mem, 1, kind_ptr, kind_mem, n_kinds, slots, hashes)
        for s in range(n_st[j]):
            if packed[acc_off[j] + s]:
                acc_key[off + s] = kid
    n_kmem = kind_ptr[n_kinds]
    # 5. everything into one array
    out = np.empty(256 + total * n_cls + 2 * total + (n_prod + 1) + 2 * n_ent + (n_kinds + 1) + n_kmem + k,
                   dtype=np.int32)
    out[:256] = classmap
    o = 256
    for i in range(n_prod):
        for c in range(n_cls):
            sj = single_j[i, c]
            out[o + i * n_cls + c] = block_off[sj] + single_s[i, c] if sj >= 0 else prod_trans[i, c]
    for j in range(k):
        off = block_off[j]
        if off < 0:
            continue
        for s in range(n_st[j]):
            for c in range(n_cls):
                t = table[st_off[j] + s, c]
                out[o + (off + s) * n_cls + c] = t + off if t >= 0 else -1
    trans = out[o:o + total * n_cls].reshape((total, n_cls))
    o += total * n_cls
    for i in range(total):
        out[o + i] = acc_key[i] - 1
        out[o + total + i] = acc_key[i] - 1 if i > 0 else -1
    o += 2 * total
    o = _put(out, o, ptr, n_prod + 1)
    o = _put(out, o, ent_j, n_ent)
    o = _put(out, o, ent_s, n_ent)
    o = _put(out, o, kind_ptr, n_kinds + 1)
    o = _put(out, o, kind_mem, n_kmem)
    _put(out, o, block_off, k)
    # 6. states that loop on every plain byte
    plain_loop = plain_loop_states(trans, classmap, plain)
    return total, n_cls, n_prod, n_kinds, n_kmem, n_ent, out, plain_loop
