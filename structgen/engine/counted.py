"""Masks for length-bounded strings from one counted walk of the vocabulary.

A ``maxLength: 64`` string is a chain of 64 copies of the character automaton,
and every position is a different state: walking the token trie from each one
(milliseconds per walk) made the first visit of every character position of
every bounded string slow.  But such a state's mask only depends on how many
characters may still come (``hi``) and how many must (``lo``): a token is
allowed when the characters it starts fit in ``hi`` and, if it closes the
string, at least ``lo`` came before the quote.

So the trie is walked once per tokenizer from inside an unbounded string,
recording for each token the characters it starts (and whether it closes the
string), and for each lexeme boundary the characters before the quote.  The
mask of any bounded position is then a prefix table lookup plus a small
filter, shared by every schema and every bound.
"""
from __future__ import annotations

import threading

import numba
import numpy as np

from ..grammar.fsa import DFA

__all__ = ["CountedStrings", "counted_strings", "boundary_counts"]

#: Tokens start at most this many characters (a token is at most 128 bytes in practice); larger
#: budgets behave alike.
MAX_COUNT = 256


@numba.njit(cache=True, nogil=True)
def _counted_walk(node_byte, node_depth, node_end, tok_ptr, tok_ids, trans, classmap, b_state, closed_state,
                  max_depth, tok_out, cnt_out, closed_out, ev_nodes, ev_cnt):
    """Walk the whole trie from content state ``b_state`` counting started characters."""
    state_at = np.empty(max_depth + 2, dtype=np.int32)
    count_at = np.zeros(max_depth + 2, dtype=np.int32)
    state_at[0] = b_state
    n_tok = 0
    n_ev = 0
    j = 1
    end = node_end[0]
    while j < end:
        d = node_depth[j]
        ps = state_at[d - 1]
        pc = count_at[d - 1]
        ns = trans[ps, classmap[node_byte[j]]]
        if ns < 0:
            if ps == closed_state:
                ev_nodes[n_ev] = j
                ev_cnt[n_ev] = pc
                n_ev += 1
            j = node_end[j]
            continue
        nc = pc + 1 if (ps == b_state and ns != closed_state) else pc
        state_at[d] = ns
        count_at[d] = nc
        for p in range(tok_ptr[j], tok_ptr[j + 1]):
            tok_out[n_tok] = tok_ids[p]
            cnt_out[n_tok] = nc
            closed_out[n_tok] = ns == closed_state
            n_tok += 1
        j += 1
    return n_tok, n_ev


class CountedStrings:
    """The counted walk of one tokenizer's trie through the unbounded JSON string."""

    def __init__(self, trie, base: DFA):
        self.base = base
        quote = base.classmap[ord('"')]
        self.b_state = int(base.trans[base.start, quote])
        self.closed_state = int(base.trans[self.b_state, quote])
        n_words = (trie.vocab_size + 31) // 32
        tok = np.empty(len(trie.tok_ids), dtype=np.int32)
        cnt = np.empty(len(trie.tok_ids), dtype=np.int32)
        closed = np.empty(len(trie.tok_ids), dtype=np.bool_)
        ev_n = np.empty(trie.n_nodes + 1, dtype=np.int32)
        ev_c = np.empty(trie.n_nodes + 1, dtype=np.int32)
        n_tok, n_ev = _counted_walk(trie.node_byte, trie.node_depth, trie.node_end, trie.tok_ptr, trie.tok_ids,
                                    np.ascontiguousarray(base.trans, dtype=np.int32), base.classmap.astype(np.int32),
                                    self.b_state, self.closed_state, trie.max_depth, tok, cnt, closed, ev_n, ev_c)
        tok, cnt, closed = tok[:n_tok], np.minimum(cnt[:n_tok], MAX_COUNT), closed[:n_tok]
        # open_upto[h]: tokens that stay inside the string and start at most h characters
        by_count = np.zeros((MAX_COUNT + 1, n_words), dtype=np.uint32)
        op = ~closed
        np.bitwise_or.at(by_count, (cnt[op], tok[op] >> 5), np.left_shift(np.uint32(1), (tok[op] & 31).astype(np.uint32)))
        self.open_upto = np.bitwise_or.accumulate(by_count, axis=0)
        self.closed_tok, self.closed_cnt = tok[closed], cnt[closed]
        self.ev_nodes, self.ev_cnt = ev_n[:n_ev].copy(), np.minimum(ev_c[:n_ev], MAX_COUNT)
        self._cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def inside(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(mask words, boundary nodes) with ``lo``..``hi`` characters still to come."""
        lo, hi = min(max(lo, 0), MAX_COUNT + 1), min(hi, MAX_COUNT)
        key = (lo, hi)
        hit = self._cache.get(key)
        if hit is None:
            m = self.open_upto[hi].copy()
            sel = (self.closed_cnt >= lo) & (self.closed_cnt <= hi)
            t = self.closed_tok[sel]
            np.bitwise_or.at(m, t >> 5, np.left_shift(np.uint32(1), (t & 31).astype(np.uint32)))
            ev = self.ev_nodes[(self.ev_cnt >= lo) & (self.ev_cnt <= hi)]
            hit = self._cache[key] = (m, ev)
        return hit


_by_trie: dict[int, tuple[object, CountedStrings]] = {}
_lock = threading.Lock()


def counted_strings(trie) -> CountedStrings:
    """The counted walk for this trie (built on first use, kept for the process)."""
    from ..grammar.json_strings import string_dfa

    with _lock:
        hit = _by_trie.get(id(trie))
        if hit is not None and hit[0] is trie:
            return hit[1]
    cs = CountedStrings(trie, string_dfa())
    with _lock:
        _by_trie[id(trie)] = (trie, cs)
    return cs


@numba.njit(cache=True, nogil=True)
def _lockstep_counts(dtrans, dcm, btrans, bcm, reps, start, b_start, b_state, closed_state, quote):
    n = dtrans.shape[0]
    pair_a = np.full(n, -1, dtype=np.int64)
    pair_c = np.full(n, -1, dtype=np.int64)
    pair_a[start] = b_start
    pair_c[start] = 0
    stack = np.empty(n, dtype=np.int64)
    top = 1
    stack[0] = start
    while top > 0:
        top -= 1
        s = stack[top]
        a = pair_a[s]
        c = pair_c[s]
        for k in range(len(reps)):
            b = reps[k]
            t = dtrans[s, dcm[b]]
            if t < 0:
                continue
            u = btrans[a, bcm[b]]
            if u < 0:
                return pair_a, pair_c, False
            nc = c + 1 if (a == b_state and b != quote) else c
            if u == closed_state:
                nc = -1  # after the closing quote the count no longer matters (one shared state)
            if pair_a[t] < 0:
                pair_a[t] = u
                pair_c[t] = nc
                stack[top] = t
                top += 1
            elif pair_a[t] != u or pair_c[t] != nc:
                return pair_a, pair_c, False
    return pair_a, pair_c, True


def boundary_counts(dfa: DFA, base: DFA, b_state: int, closed_state: int) -> np.ndarray | None:
    """Characters read so far at each state of a length-bounded string DFA that sits at a
    character boundary (-1 elsewhere), by running it in lockstep with the unbounded
    string ``base``; None when the states do not map to (base state, count) consistently
    (the closing quote's state is shared by all counts and carries none)."""
    cached = getattr(dfa, "_boundary_counts", False)
    if cached is not False:
        return cached
    # one representative byte per joint class is enough: both tables are class-constant
    dcm, bcm = dfa.classmap.tolist(), base.classmap.tolist()
    reps = np.array(sorted({(dcm[b], bcm[b]): b for b in range(256)}.values()), dtype=np.int64)
    pair_a, pair_c, ok = _lockstep_counts(np.ascontiguousarray(dfa.trans, dtype=np.int32),
                                          dfa.classmap.astype(np.int64),
                                          np.ascontiguousarray(base.trans, dtype=np.int32),
                                          base.classmap.astype(np.int64), reps, dfa.start, base.start,
                                          b_state, closed_state, ord('"'))
    result = np.where(pair_a == b_state, pair_c, -1) if ok else None
    dfa._boundary_counts = result
    return result
