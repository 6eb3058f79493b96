"""A DFA built on demand: subsets of an NFA made into states when a walk first reaches them.

Some regular languages have no small DFA: ``[ab]*a[ab]{22}`` ("an ``a`` 23rd from the end") needs
2**23 states, so building the whole table first is refused or takes seconds.  But a generation
reaches few of them: each step's mask walks the token trie from one state, and only the subsets
that walk meets are made (on-demand subset construction, as RE2's and llguidance's lazy DFAs do).
A state is a set of the NFA's important states (``structgen.grammar.fsa.NFATables``) as a row of
64-bit words; transitions are made the first time a walk asks for them and kept in a table (-2:
not made yet, -1: dead).  Everything runs in numba kernels that release the GIL; the tables grow
by doubling and are bounded by :data:`MAX_LAZY_BYTES` (past it, a ``GrammarError`` names the
pattern: a regex whose walks keep meeting new subsets is too large for a bounded machine).

State ids are never renumbered, so a matcher's history stays valid as the table grows.
"""
from __future__ import annotations

import threading

import numpy as np

from ..errors import GrammarError
from ..uids import new_uid
from .fsa import NFA, NFATables, nfa_tables
from .kernel_cache import kernel

__all__ = ["LazyDFA", "MAX_LAZY_BYTES", "UNKNOWN", "FULL", "warm_up_lazy_dfa"]

#: Bytes the tables of one lazy DFA may grow to (subsets, transitions, hash table).
MAX_LAZY_BYTES = 256 << 20
#: A transition not made yet; a kernel that needed a new state with the table full.
UNKNOWN = -2
FULL = -3
_FNV = np.uint64(0x100000001B3)


@kernel(nogil=True, inline="always")
def _hash_row(row):
    h = np.uint64(0xCBF29CE484222325)
    for w in range(len(row)):
        h = (h ^ row[w]) * _FNV
        h ^= h >> np.uint64(29)
    return h


@kernel(nogil=True)
def _rehash(sets, n, htab):
    """Put states ``0..n-1`` into the (empty) hash table under their ids."""
    mask = np.uint64(len(htab) - 1)
    for k in range(n):
        slot = np.int64(_hash_row(sets[k]) & mask)
        while htab[slot] >= 0:
            slot = np.int64((np.uint64(slot) + np.uint64(1)) & mask)
        htab[slot] = k


@kernel(nogil=True)
def _intern(row, sets, htab, count, accept, dist, nfa_accept, nfa_dist):
    """The id of subset ``row`` (made when new), or FULL when the table has no room."""
    mask = np.uint64(len(htab) - 1)
    slot = np.int64(_hash_row(row) & mask)
    n_w = len(row)
    while True:
        k = htab[slot]
        if k < 0:
            break
        same = True
        for w in range(n_w):
            if sets[k, w] != row[w]:
                same = False
                break
        if same:
            return k
        slot = np.int64((np.uint64(slot) + np.uint64(1)) & mask)
    n = count[0]
    if n >= sets.shape[0]:
        return FULL
    acc = 0
    best = np.int64(1 << 62)
    for w in range(n_w):
        sets[n, w] = row[w]
        bits = row[w]
        i = 0
        while bits:
            if bits & np.uint64(1):
                s = w * 64 + i
                if nfa_accept[s]:
                    acc = 1
                if nfa_dist[s] < best:
                    best = nfa_dist[s]
            bits >>= np.uint64(1)
            i += 1
    accept[n] = acc
    dist[n] = best
    htab[slot] = n
    count[0] = n + 1
    return n


@kernel(nogil=True)
def _make(state, c, sets, trans, htab, count, accept, dist, succ_ptr, succ, nfa_accept, nfa_dist, row):
    """The state class ``c`` leads to from ``state``, made now (-1 dead; FULL).  Callers look
    the transition up first and call this only when it is UNKNOWN: a call passing the tables
    costs more than the lookup, so it stays off the walks' hot path."""
    n_cls = trans.shape[1]
    n_w = sets.shape[1]
    for w in range(n_w):
        row[w] = 0
    empty = True
    for w in range(n_w):
        bits = sets[state, w]
        i = 0
        while bits:
            if bits & np.uint64(1):
                s = w * 64 + i
                k = s * n_cls + c
                for p in range(succ_ptr[k], succ_ptr[k + 1]):
                    q = succ[p]
                    row[q >> 6] |= np.uint64(1) << np.uint64(q & 63)
                    empty = False
            bits >>= np.uint64(1)
            i += 1
    if empty:
        trans[state, c] = -1
        return -1
    t = _intern(row, sets, htab, count, accept, dist, nfa_accept, nfa_dist)
    if t >= 0:
        trans[state, c] = t
    return t


@kernel(nogil=True)
def run_bytes(state, data, classmap, sets, trans, htab, count, accept, dist, succ_ptr, succ, nfa_accept, nfa_dist,
              row):
    """The state after ``data`` from ``state``: -1 when a byte is refused, FULL when out of room."""
    for i in range(len(data)):
        c = classmap[data[i]]
        nxt = trans[state, c]
        if nxt == UNKNOWN:
            nxt = _make(state, c, sets, trans, htab, count, accept, dist, succ_ptr, succ, nfa_accept, nfa_dist, row)
        state = nxt
        if state < 0:
            return state
    return state


@kernel(nogil=True)
def explore(done, limit, classmap, sets, trans, htab, count, accept, dist, succ_ptr, succ, nfa_accept, nfa_dist, row):
    """Make the successors of states ``done``.. in id order (breadth first from the start) until
    every reachable state is made or more than ``limit`` are.  Returns the first state whose
    successors are not all made yet (== the state count when finished), or FULL."""
    n_cls = trans.shape[1]
    while done < count[0] and count[0] <= limit:
        for c in range(n_cls):
            if trans[done, c] == UNKNOWN and _make(done, c, sets, trans, htab, count, accept, dist, succ_ptr, succ,
                                                   nfa_accept, nfa_dist, row) == FULL:
                return FULL
        done += 1
    return done


@kernel(nogil=True)
def walk_mask(state, node_byte, node_depth, node_end, tok_ptr, tok_ids, classmap, sets, trans, htab, count, accept,
              dist, succ_ptr, succ, nfa_accept, nfa_dist, row, state_at, closer, mask):
    """Set in ``mask`` every token whose bytes keep the automaton alive from ``state`` (a preorder
    scan of the token trie that skips dead subtrees).  ``closer`` (a byte, or -1): the automaton
    reads what lies between two delimiters (a JSON string's content, ``closer`` its quote), so a
    token that meets ``closer`` where the automaton refuses it and accepts is kept whatever follows
    the delimiter (that is not this automaton's to judge).  Returns 0, or FULL when out of room."""
    state_at[0] = state
    j = np.int64(1)
    end = np.int64(node_end[0])
    while j < end:
        d = np.int64(node_depth[j])
        ps = state_at[d - 1]
        y = node_byte[j]
        c = classmap[y]
        ns = trans[ps, c]
        if ns == UNKNOWN:
            ns = _make(ps, c, sets, trans, htab, count, accept, dist, succ_ptr, succ, nfa_accept, nfa_dist, row)
        if ns == FULL:
            return FULL
        if ns < 0:
            if y == closer and accept[ps]:
                for p in range(tok_ptr[j], tok_ptr[node_end[j]]):
                    t = tok_ids[p]
                    mask[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            j = np.int64(node_end[j])
            continue
        state_at[d] = ns
        for p in range(tok_ptr[j], tok_ptr[j + 1]):
            t = tok_ids[p]
            mask[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        j += 1
    return 0


@kernel(nogil=True)
def token_end_states(state, ids, padded, lengths, classmap, sets, trans, htab, count, accept, dist, succ_ptr, succ,
                     nfa_accept, nfa_dist, row, out):
    """``out[i]``: the state token ``ids[i]`` (bytes ``padded[ids[i], :lengths[ids[i]]]``) leads to
    from ``state`` (-1: refused).  Returns 0, or FULL when out of room."""
    for i in range(len(ids)):
        s = state
        t = ids[i]
        for j in range(lengths[t]):
            c = classmap[padded[t, j]]
            nxt = trans[s, c]
            if nxt == UNKNOWN:
                nxt = _make(s, c, sets, trans, htab, count, accept, dist, succ_ptr, succ, nfa_accept, nfa_dist, row)
            s = nxt
            if s < 0:
                break
        if s == FULL:
            return FULL
        out[i] = s
    return 0


class LazyDFA:
    """The on-demand DFA of one NFA (thread-safe: kernels that make states run under a lock)."""

    def __init__(self, tables: NFATables, *, source: str = "", max_bytes: int = MAX_LAZY_BYTES,
                 capacity: int = 1024):
        self.tables = tables
        self.source = source
        self.uid = new_uid()  # cache key of what is derived from its states (never reused, unlike id())
        self.max_bytes = max_bytes
        self.classmap = tables.classmap
        self.n_words = max(1, (tables.n_states + 63) // 64)
        self._lock = threading.RLock()
        self._row = np.zeros(self.n_words, dtype=np.uint64)
        self.count = np.zeros(1, dtype=np.int64)
        self._alloc(capacity)
        row = np.zeros(self.n_words, dtype=np.uint64)
        for q in tables.start.tolist():
            row[q >> 6] |= np.uint64(1) << np.uint64(q & 63)
        #: the start state (-1 when the pattern matches nothing)
        self.start = -1 if not len(tables.start) else self._intern(row)

    def _alloc(self, capacity: int) -> None:
        self.sets = np.zeros((capacity, self.n_words), dtype=np.uint64)
        self.trans = np.full((capacity, self.tables.n_classes), UNKNOWN, dtype=np.int32)
        self.accept = np.zeros(capacity, dtype=np.uint8)
        self.dist = np.zeros(capacity, dtype=np.int64)
        self.htab = np.full(2 * capacity, -1, dtype=np.int64)

    @property
    def nbytes(self) -> int:
        return int(self.sets.nbytes + self.trans.nbytes + self.accept.nbytes + self.dist.nbytes + self.htab.nbytes
                   + self.tables.nbytes)

    @property
    def n_states(self) -> int:
        """States made so far."""
        return int(self.count[0])

    def _grow(self) -> None:
        capacity = 2 * self.sets.shape[0]
        per_state = 8 * self.n_words + 4 * self.tables.n_classes + 1 + 8 + 16
        if capacity * per_state > self.max_bytes:
            raise GrammarError(
                f"regular expression {self.source!r} keeps reaching new automaton states: over "
                f"{self.sets.shape[0]:,} made ({self.max_bytes >> 20} MiB); a pattern whose matches are tracked by "
                "this many states is too large to enforce", source=self.source or None)
        n = self.n_states
        old = (self.sets, self.trans, self.accept, self.dist)
        self._alloc(capacity)
        for table, prev in zip((self.sets, self.trans, self.accept, self.dist), old):
            table[:n] = prev[:n]
        _rehash(self.sets, n, self.htab)  # the same ids in the larger hash table

    def _intern(self, row: np.ndarray) -> int:
        while True:
            s = _intern(row, self.sets, self.htab, self.count, self.accept, self.dist, self.tables.accept,
                        self.tables.dist)
            if s != FULL:
                return int(s)
            self._grow()

    def _args(self) -> tuple:
        t = self.tables
        return (self.classmap, self.sets, self.trans, self.htab, self.count, self.accept, self.dist, t.succ_ptr,
                t.succ, t.accept, t.dist, self._row)

    def run(self, state: int, data: bytes) -> int:
        """The state after ``data`` (-1: refused)."""
        buf = np.frombuffer(data, dtype=np.uint8)
        with self._lock:
            while True:
                s = run_bytes(state, buf, *self._args())
                if s != FULL:
                    return int(s)
                self._grow()

    def mask(self, state: int, trie, n_words: int, closer: int = -1) -> np.ndarray:
        """uint32 words: the tokens of ``trie`` whose bytes keep the automaton alive from ``state``
        (and, with a ``closer`` byte, those that meet it where the automaton accepts: :func:`walk_mask`)."""
        state_at = np.empty(trie.max_depth + 2, dtype=np.int64)
        with self._lock:
            while True:
                m = np.zeros(n_words, dtype=np.uint32)
                if walk_mask(state, trie.node_byte, trie.node_depth, trie.node_end, trie.tok_ptr, trie.tok_ids,
                             *self._args(), state_at, closer, m) != FULL:
                    return m
                self._grow()

    def end_states(self, state: int, ids: np.ndarray, padded: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The state each token of ``ids`` leads to from ``state`` (-1: refused)."""
        out = np.empty(len(ids), dtype=np.int64)
        with self._lock:
            while True:
                if token_end_states(state, np.ascontiguousarray(ids, dtype=np.int64), padded, lengths, *self._args(),
                                    out) != FULL:
                    return out
                self._grow()

    def explore(self, limit: int) -> bool:
        """Make every state reachable from the start, up to ``limit`` states; True when there are
        at most ``limit`` (the whole DFA is small: an eager table is as good)."""
        if self.start < 0:
            return True
        done = 0
        with self._lock:
            while True:
                r = explore(done, limit, *self._args())
                if r == FULL:
                    self._grow()
                    continue
                done = int(r)
                if done >= self.n_states or self.n_states > limit:
                    return self.n_states <= limit and done >= self.n_states


def warm_up_lazy_dfa(trie) -> None:
    """Load (or compile, once per installation) the kernels ahead of the first large regex."""
    nfa = NFA()
    nfa.add_range(nfa.start, 0x61, 0x62, nfa.final)
    d = LazyDFA(nfa_tables(nfa), capacity=2)
    d.explore(8)
    d.run(d.start, b"a")
    d.mask(d.start, trie, (trie.vocab_size + 31) // 32)
    d.mask(d.start, trie, (trie.vocab_size + 31) // 32, 0x22)
    d.end_states(d.start, np.zeros(1, dtype=np.int64), np.zeros((1, 1), dtype=np.uint8), np.ones(1, dtype=np.int64))
