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
from collections import OrderedDict
from typing import Callable

import numpy as np

from ..automata.fsa import DFA
from ..automata.kernel_cache import kernel

__all__ = ["CountedStrings", "counted_strings", "boundary_counts", "class_counted", "json_string_automaton",
           "lockstep"]

#: Tokens start at most this many characters (a token is at most 128 bytes in practice); larger
#: budgets behave alike.
MAX_COUNT = 256


@kernel(nogil=True)
def _counted_walk(node_byte, node_depth, node_end, tok_ptr, tok_ids, trans, classmap, b_state, closed_state,
                  max_depth, tok_out, cnt_out, closed_out, ev_nodes, ev_cnt, ob_nodes, ob_cnt):
    """Walk the whole trie from content state ``b_state`` counting started characters.

    Besides tokens and closing-quote boundaries it records every node whose parent sits at
    a character boundary (``ob_*``, with the count there): where a lexeme of exactly that
    many characters (a long string's chunk) ends and the node's byte starts the next."""
    state_at = np.empty(max_depth + 2, dtype=np.int32)
    count_at = np.zeros(max_depth + 2, dtype=np.int32)
    state_at[0] = b_state
    n_tok = 0
    n_ev = 0
    n_ob = 0
    j = 1
    end = node_end[0]
    while j < end:
        d = node_depth[j]
        ps = state_at[d - 1]
        pc = count_at[d - 1]
        if ps == b_state:
            ob_nodes[n_ob] = j
            ob_cnt[n_ob] = pc
            n_ob += 1
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
    return n_tok, n_ev, n_ob


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
        ob_n = np.empty(trie.n_nodes + 1, dtype=np.int32)
        ob_c = np.empty(trie.n_nodes + 1, dtype=np.int32)
        n_tok, n_ev, n_ob = _counted_walk(trie.node_byte, trie.node_depth, trie.node_end, trie.tok_ptr, trie.tok_ids,
                                          np.ascontiguousarray(base.trans, dtype=np.int32),
                                          base.classmap.astype(np.int32), self.b_state, self.closed_state,
                                          trie.max_depth, tok, cnt, closed, ev_n, ev_c, ob_n, ob_c)
        # chunk-end boundaries by count: nodes ob_nodes[ob_ptr[c]:ob_ptr[c + 1]] (preorder within a count)
        ob_c = ob_c[:n_ob]
        order = np.argsort(ob_c, kind="stable")
        self.ob_nodes = ob_n[:n_ob][order]
        self.ob_ptr = np.searchsorted(ob_c[order], np.arange(MAX_COUNT + 2))
        tok, cnt, closed = tok[:n_tok], np.minimum(cnt[:n_tok], MAX_COUNT), closed[:n_tok]
        # open_upto[h]: tokens that stay inside the string and start at most h characters (rows past
        # the longest token repeat the last one: a narrow character class keeps the table small)
        rows = int(cnt.max()) + 1 if len(cnt) else 1
        by_count = np.zeros((rows, n_words), dtype=np.uint32)
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
            m = self.open_upto[min(hi, len(self.open_upto) - 1)].copy()
            hit = self._cache[key] = (m, self._closing(m, lo, hi))
        return hit

    def _closing(self, m: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """Add to ``m`` the tokens that close the string after ``lo``..``hi`` characters; returns
        the boundary nodes after those closing quotes."""
        t = self.closed_tok[(self.closed_cnt >= lo) & (self.closed_cnt <= hi)]
        np.bitwise_or.at(m, t >> 5, np.left_shift(np.uint32(1), (t & 31).astype(np.uint32)))
        return self.ev_nodes[(self.ev_cnt >= lo) & (self.ev_cnt <= hi)]

    def chunk(self, r: int, lo: int | None, hi: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mask words, closing boundary nodes, chunk-end boundary nodes) inside a long string's
        chunk with exactly ``r`` characters left, while a tail of ``lo``..``hi`` more characters and
        the closing quote is also alive (``lo`` None: no tail).  Tokens that run past the chunk's
        end continue from the chunk-end nodes (the next lexeme starts there)."""
        r = min(r, MAX_COUNT)
        key = ("chunk", r, lo, hi)
        hit = self._cache.get(key)
        if hit is None:
            m = self.open_upto[min(r, len(self.open_upto) - 1)].copy()
            closed_ev = self._closing(m, max(lo, 0), min(hi, MAX_COUNT)) if lo is not None else self.ev_nodes[:0]
            open_ev = self.ob_nodes[self.ob_ptr[r]:self.ob_ptr[r + 1]]
            hit = self._cache[key] = (m, closed_ev, open_ev)
        return hit


_by_trie: "OrderedDict[tuple[int, int], CountedStrings]" = OrderedDict()  # keyed by uids (structgen.uids)
_lock = threading.Lock()
#: Counted walks kept per process: the JSON string's per tokenizer, plus one per character class.
COUNTED_WALK_ENTRIES = 64


#: The string automata counted walks run over, given by the one joint (``structgen.compiler``) so
#: that the engine imports no front end: ``json_string()`` -> the unbounded JSON string,
#: ``class_string(chars)`` -> a JSON string of any number of characters from ``chars``.
_string_automata: dict[str, Callable] = {}


def use_string_automata(json_string: Callable[[], DFA], class_string: Callable[[frozenset], DFA]) -> None:
    """Name the string automata of counted walks (without them, bounded strings are masked by
    ordinary walks: correct, only slower)."""
    _string_automata["json_string"] = json_string
    _string_automata["class_string"] = class_string


def json_string_automaton() -> DFA | None:
    """The unbounded JSON string automaton (None when none was named: :func:`use_string_automata`)."""
    make = _string_automata.get("json_string")
    return None if make is None else make()


def counted_strings(trie, base: DFA | None = None) -> CountedStrings | None:
    """The counted walk of ``base`` (default: the unbounded JSON string) for this trie
    (built on first use; the default one is kept for the process); None when no string
    automaton was named (:func:`use_string_automata`)."""
    if base is None:
        base = json_string_automaton()
        if base is None:
            return None
    key = (trie.uid, base.uid)
    with _lock:
        hit = _by_trie.get(key)
        if hit is not None:
            _by_trie.move_to_end(key)
            return hit
    cs = CountedStrings(trie, base)
    with _lock:
        _by_trie[key] = cs
        while len(_by_trie) > COUNTED_WALK_ENTRIES:
            _by_trie.popitem(last=False)  # never the first: the JSON string's walk is refreshed on use
    return cs


#: Printable ASCII but the quote and backslash: characters a counted class may hold.
CLASS_BYTES = tuple(sorted(frozenset(range(0x20, 0x7F)) - {0x22, 0x5C}))
_CLASS_ARRAY = np.array(CLASS_BYTES, dtype=np.int64)


def class_counted(dfa: DFA) -> tuple[DFA, int, int] | None:
    """``(base, lo, hi)`` when ``dfa`` is exactly a JSON string of ``lo``..``hi`` characters of
    one class of printable ASCII characters (a ``pattern`` like ``^[0-9a-f]{24}$``), proved
    state by state against the class string ``base``; None otherwise.  Such a string is masked
    from the counted walk of its class: every character position would otherwise be its own
    walk of the vocabulary."""
    cached = getattr(dfa, "_class_counted", False)  # (getattr: no instance dict is made for the GC to scan)
    if cached is not False:
        return cached
    result = dfa.keep("_class_counted", _class_counted(dfa))
    return result


def _high_classes(cm: np.ndarray) -> np.ndarray:
    """The classes of the bytes 0x80-0xFF (UTF-8 beyond ASCII)."""
    return np.unique(cm[0x80:])


def _class_counted(dfa: DFA):
    q = ord('"')
    cm = dfa.classmap
    s1 = int(dfa.trans[dfa.start, cm[q]])
    if s1 < 0 or dfa.n_states > 64 * MAX_COUNT or (dfa.trans[s1, cm[0x80:]] >= 0).any():
        return None  # (the first character may be non-ASCII: a cheap row test before the table's)
    # the class test on the first two positions, vectorised (most DFAs fail it: check it before the
    # table-wide non-ASCII test)
    cls = cm[_CLASS_ARRAY]
    row1 = dfa.trans[s1, cls]
    ok1 = row1 >= 0
    if not ok1.any() or (row1[ok1] != row1[ok1][0]).any():
        return None  # (every character of a class leads to the same next position; a literal set does not)
    s2 = int(row1[ok1][0])
    ok2 = dfa.trans[s2, cls] >= 0
    if ok2.any() and (ok2 != ok1).any():
        return None  # the second position allows other characters: not one class (cheap, before any base)
    if (dfa.trans[:, _high_classes(cm)] >= 0).any():
        return None  # (a string that may hold non-ASCII characters is no single-byte class)
    chars = frozenset(_CLASS_ARRAY[ok1].tolist())
    make = _string_automata.get("class_string")
    if make is None:
        return None
    base = make(chars)
    b_state = int(base.trans[base.start, base.classmap[q]])
    closed = int(base.trans[b_state, base.classmap[q]])
    if b_state < 0 or closed < 0 or any(base.trans[b_state, base.classmap[b]] != b_state for b in chars):
        return None  # not one character-boundary state: counts would not be positions
    pair_a, pair_c, ok, reps = lockstep(dfa, base, base.start, b_state, closed)
    if not ok:
        return None
    # every state must allow exactly what the class string allows from its partner state, but
    # for the bounds themselves: the quote only from lo characters on, a new character below hi
    S = np.nonzero(pair_a >= 0)[0]
    U = pair_a[S]
    D = dfa.trans[S][:, cm[reps]] >= 0
    B = base.trans[U][:, base.classmap[reps]] >= 0
    at = U == b_state
    c = pair_c[S]
    quote_col = reps == q
    if not at.any() or not D[at][:, quote_col].any():
        return None
    lo = int(c[at][D[at][:, quote_col][:, 0]].min())
    hi = int(c[at].max())
    if hi > MAX_COUNT:
        return None
    want = B.copy()
    want[at] &= np.where(quote_col[None, :], (c[at] >= lo)[:, None], (c[at] < hi)[:, None])
    if not (D == want).all():
        return None
    done = S[U == closed]
    if not dfa.accept[done].all() or (dfa.trans[done] >= 0).any() or dfa.accept[S[U != closed]].any():
        return None
    return base, lo, hi


@kernel(nogil=True)
def _lockstep_counts(dtrans, dcm, btrans, bcm, reps, start, b_start, b_state, closed_state, quote, counts):
    """Partners and counts (see :func:`lockstep`); with ``counts`` False a state met at two counts
    is still consistent (only its partner must be one)."""
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
            elif pair_a[t] != u or (counts and pair_c[t] != nc):
                return pair_a, pair_c, False
    return pair_a, pair_c, True


def lockstep(dfa: DFA, base: DFA, b_start: int, b_state: int, closed_state: int, counts: bool = True):
    """Run ``dfa`` from its start in lockstep with ``base`` from ``b_start``: ``(pair_a, pair_c,
    ok, reps)`` -- each state's partner in ``base`` and character count, whether the pairing is
    consistent (``counts=False``: partners only, counts taken at first sight), and the
    representative byte of every joint class (both tables are class-constant)."""
    dcm, bcm = dfa.classmap.tolist(), base.classmap.tolist()
    reps = np.array(sorted({(dcm[b], bcm[b]): b for b in range(256)}.values()), dtype=np.int64)
    pair_a, pair_c, ok = _lockstep_counts(np.ascontiguousarray(dfa.trans, dtype=np.int32),
                                          dfa.classmap.astype(np.int64),
                                          np.ascontiguousarray(base.trans, dtype=np.int32),
                                          base.classmap.astype(np.int64), reps, int(dfa.start), int(b_start),
                                          int(b_state), int(closed_state), ord('"'), counts)  # ints: one signature
    return pair_a, pair_c, ok, reps


def boundary_counts(dfa: DFA, base: DFA, b_state: int, closed_state: int) -> np.ndarray | None:
    """Characters read so far at each state of a length-bounded string DFA that sits at a
    character boundary (-1 elsewhere), by running it in lockstep with the unbounded
    string ``base``; None when the states do not map to (base state, count) consistently
    (the closing quote's state is shared by all counts and carries none).  Cached on the
    DFA for its base."""
    cached = getattr(dfa, "_boundary_counts", None)
    if cached is not None and cached[0] is base:
        return cached[1]
    pair_a, pair_c, ok, _ = lockstep(dfa, base, base.start, b_state, closed_state)
    if not ok:  # no opening quote (a long string's later chunk or tail): start inside the content
        pair_a, pair_c, ok, _ = lockstep(dfa, base, b_state, b_state, closed_state)
    result = np.where(pair_a == b_state, pair_c, -1) if ok else None
    dfa.keep("_boundary_counts", (base, result))
    return result
