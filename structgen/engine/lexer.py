"""Combined lexer DFAs: one per set of terminals the parser allows.

Lexing is maximal munch (as Lark's lexers do): a lexeme ends only when the
next byte cannot extend it, so lexing is deterministic given the parser
configuration.  The combined DFA runs all allowed terminals at once; each
state knows which terminals accept there.  Its start state is never
re-entered, so "at a lexeme start" is simply ``state == 0``.

The product is explored only while two or more terminals are alive; once a
single terminal remains, the lexer jumps into a copy of that terminal's own
table, so a 4,000-state ``maxLength`` string costs a table copy, not a search.
Cores are shared between grammars (keyed by the terminal DFAs themselves), and
the trie walks behind their masks are cached by the automata they depend on
(``structgen.engine.walks``), so schemas that reuse a string or number shape
reuse its walks too.
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from ..errors import GrammarError
from ..automata.fsa import DFA, intersect, kernel_args
from ..uids import new_uid
from ..byte_lru import ByteLRU, nbytes_of
from .lexer_kernels import build_core, pack_dfa, split_core
from .trie import PLAIN_BYTES
from .walks import signature, signature_ids

MAX_LEXER_STATES = 200_000
#: Bytes of lexer cores kept for reuse across grammars (process-wide).
CORE_CACHE_BYTES = 32 << 20


def _kernel_parts(d: DFA) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A DFA's table, classmap and accepting flags in the kernel's flat dtypes (cached on the DFA)."""
    parts = getattr(d, "_kernel_parts", None)  # (getattr: no instance dict is made for the GC to scan)
    if parts is None:
        trans, accept = kernel_args(d)
        parts = (trans.reshape(-1), np.ascontiguousarray(d.classmap, dtype=np.int32), accept)
        d.keep("_kernel_parts", parts)
    return parts


#: Bytes of packed DFA blobs kept for building lexer cores (a copy of each table: not kept on the
#: DFA, where it doubled the memory of every cached automaton).
PACKED_CACHE_BYTES = 32 << 20
_packs = ByteLRU(PACKED_CACHE_BYTES, name="lexer.packed_automata")


def _packed(d: DFA) -> np.ndarray:
    """A DFA as one int32 blob for :func:`build_core` (cached by uid, bounded by bytes): a new
    lexer concatenates its terminals' blobs once instead of three arrays and a header table."""
    blob = _packs.get(d.uid)
    if blob is None:
        trans, cm, acc = _kernel_parts(d)
        blob = pack_dfa(d.n_states, d.n_classes, d.start, cm, acc, trans)
        _packs.put(d.uid, blob)
    return blob


def _start_never_reentered(d: DFA) -> bool:
    """State 0 is the start and no transition leads back to it (cached on the DFA)."""
    ok = getattr(d, "_start_free", None)
    if ok is None:
        ok = d.keep("_start_free", d.start == 0 and not bool((d.trans == 0).any()))
    return ok


class LexerCore:
    """The product automaton of a tuple of DFAs (terminal-independent).

    A core is built in the middle of a mask (the first time the parser allows a new set of
    terminals), so only what every use needs is made at once; the Python-side views (the
    stepping table, member tuples, block list) are made on first use.  Slots, not a
    ``__dict__``: thousands of cached cores are each one object fewer for the garbage
    collector to rescan."""

    __slots__ = ("dfas", "uid", "n_states", "classmap", "trans", "acc_id", "boundary", "_ptr", "_ent_j", "_ent_s",
                 "_kind_ptr", "_kind_mem", "_block_off", "_n_prod", "n_kinds", "_plain_loop",
                 # made on first use
                 "_flat_trans", "_classmap_list", "_acc_kinds", "_blocks", "_block_start", "_live_keys",
                 "_acc_sig", "_sig_kind", "_kind_index", "_dead_end", "__weakref__")

    def __init__(self, dfas: tuple[DFA, ...]):
        self.dfas = dfas
        self.uid = new_uid()  # walk cache key (see structgen.uids)
        self._plain_loop = None  # what trie walks read (see walks._plain_loop)
        self._flat_trans = self._classmap_list = self._acc_kinds = self._blocks = self._block_start = None
        self._live_keys, self._acc_sig, self._sig_kind = {}, {}, {}
        self._kind_index = self._dead_end = None
        k = len(dfas)
        if k == 0:
            self._empty()
        elif k == 1 and _start_never_reentered(dfas[0]):
            self._view_of(dfas[0])
        else:
            packed = _packed(dfas[0]) if k == 1 else np.concatenate([_packed(d) for d in dfas])
            total, n_cls, n_prod, n_kinds, n_kmem, n_ent, out, plain_loop = build_core(
                packed, k, PLAIN_BYTES, MAX_LEXER_STATES)
            if total < 0:
                raise GrammarError(f"lexer too large (over {MAX_LEXER_STATES} states)")
            (self.classmap, self.trans, self.acc_id, self.boundary, self._ptr, self._ent_j, self._ent_s,
             self._kind_ptr, self._kind_mem, self._block_off) = split_core(out, k, total, n_cls, n_prod, n_kinds,
                                                                           n_kmem, n_ent)
            self._n_prod = n_prod
            self.n_kinds = n_kinds
            self._plain_loop = plain_loop
        self.n_states = self.trans.shape[0]

    def nbytes(self) -> int:
        """Bytes of the core's arrays (what the core cache counts)."""
        return sum(nbytes_of(getattr(self, a, None)) for a in self.__slots__ if a not in ("dfas", "__weakref__"))

    def _empty(self) -> None:
        """No terminal allowed: one state, accepting nothing."""
        self.trans = np.full((1, 1), -1, dtype=np.int32)
        self.classmap = np.zeros(256, dtype=np.int32)
        self._n_prod = 1
        self._ptr = np.zeros(2, dtype=np.int32)
        self._ent_j = self._ent_s = np.zeros(0, dtype=np.int32)
        self._block_off = np.zeros(0, dtype=np.int32)
        self.acc_id = self.boundary = np.full(1, -1, dtype=np.int32)
        self._kind_ptr, self._kind_mem = np.zeros(2, dtype=np.int32), np.zeros(0, dtype=np.int32)
        self.n_kinds = 1

    def _view_of(self, d: DFA) -> None:
        """A lone terminal whose start state is never re-entered is its own lexer: its table is
        used as it is (no product, no copy), the start row doubling as the core's state 0."""
        trans, self.classmap, acc = _kernel_parts(d)
        self.trans = trans.reshape(d.trans.shape)
        self._n_prod = 1
        self._ptr = np.array([0, 1], dtype=np.int32)
        self._ent_j = np.zeros(1, dtype=np.int32)
        self._ent_s = np.zeros(1, dtype=np.int32)
        self._block_off = np.zeros(1, dtype=np.int32)
        self.acc_id = acc.astype(np.int32) - 1  # accept set 0 (kind 1): the terminal accepts
        self.boundary = self.acc_id.copy()
        self.boundary[0] = -1
        self._kind_ptr, self._kind_mem = np.array([0, 0, 1], dtype=np.int32), np.zeros(1, dtype=np.int32)
        self.n_kinds = 2

    # -- views made on first use --------------------------------------------------------------
    @property
    def flat_trans(self) -> memoryview:
        """Byte-by-byte stepping in Python: ``flat_trans[state * n_classes + class]`` indexes the
        table itself (a memoryview yields ints), so no per-state Python lists exist for the
        garbage collector to scan, however large the lexer."""
        ft = self._flat_trans
        if ft is None:
            ft = self._flat_trans = memoryview(self.trans.reshape(-1))
        return ft

    @property
    def classmap_list(self) -> bytes:
        """Byte -> class for stepping in Python (bytes: indexing yields ints, and it is untracked)."""
        cm = self._classmap_list
        if cm is None:
            cm = self._classmap_list = self.classmap.astype(np.uint8).tobytes()
        return cm

    def members(self, kind: int) -> tuple[int, ...]:
        """The accepting members (indices into ``dfas``) of a kind; kind 0 is the empty set and
        kind ``k >= 1`` is accept set ``k - 1`` (``acc_id``)."""
        return tuple(self._kind_mem[self._kind_ptr[kind]:self._kind_ptr[kind + 1]].tolist())

    @property
    def acc_kinds(self) -> tuple[tuple[int, ...], ...]:
        """Every kind's members (see :meth:`members`; tuples of ints, untracked by the GC)."""
        ks = self._acc_kinds
        if ks is None:
            ks = self._acc_kinds = tuple(self.members(k) for k in range(self.n_kinds))
        return ks

    @property
    def blocks(self) -> tuple[tuple[int, int], ...]:
        """(first state, DFA index) of each lone terminal's copied table, in state order."""
        bs = self._blocks
        if bs is None:
            bs = self._blocks = tuple(sorted((off, j) for j, off in enumerate(self._block_off.tolist()) if off >= 0))
        return bs

    @property
    def block_start(self) -> dict[int, int]:
        """DFA index -> first state of its copied table."""
        bs = self._block_start
        if bs is None:
            bs = self._block_start = {j: off for off, j in self.blocks}
        return bs

    # -- what trie walks need to share results between cores ----------------------------------------
    def live_key(self, state: int, depth: int, canon_min_states: int) -> tuple:
        """A hashable key of a product state's (live DFA uid, sub-state) pairs (ints only: the
        garbage collector stops tracking it).

        Sub-states of large DFAs are replaced by their depth class (see
        ``DFA.depth_classes``): a walk only looks ``depth`` bytes ahead, so e.g. every
        character position inside two overlapping length-bounded strings shares one walk."""
        cache = self._live_keys
        hit = cache.get(state)
        if hit is None:
            a, b = int(self._ptr[state]), int(self._ptr[state + 1])
            js, ss = self._ent_j[a:b].tolist(), self._ent_s[a:b].tolist()
            live = [self.dfas[j] for j in js]
            ss = [int(d.depth_classes(depth)[s]) if d.n_states >= canon_min_states else s for d, s in zip(live, ss)]
            hit = cache[state] = (state == 0, tuple(d.uid for d in live), tuple(ss))
        return hit

    def accept_signature(self, a: int) -> int:
        """The :func:`~structgen.engine.walks.signature` of accept set ``a`` (the automata accepting
        there), made on first need: a new core with hundreds of accept sets is usually asked about
        two or three of them."""
        sigs = self._acc_sig
        sig = sigs.get(a)
        if sig is None:
            sig = sigs[a] = signature(tuple(sorted(id(self.dfas[j]) for j in self.members(a + 1))))
        return sig

    def kind_of_signature(self, code: int) -> int:
        """This core's accepting kind for a signature (-1 when none of its states has it)."""
        cache = self._sig_kind
        kind = cache.get(code)
        if kind is None:
            by_members = self._kind_index
            if by_members is None:
                by_members = self._kind_index = {m: k for k, m in enumerate(self.acc_kinds)}
            ids = set(signature_ids(code))
            members = tuple(j for j, d in enumerate(self.dfas) if id(d) in ids)
            kind = cache[code] = by_members.get(members, -1)
        return kind

    def is_dead_end(self, state: int) -> bool:
        """No byte continues a lexeme from ``state`` (it is complete as soon as it gets there)."""
        return bool(self._dead_end_flags()[state])

    def _dead_end_flags(self) -> bytes:
        """:meth:`is_dead_end` for every state, one byte each (made on first need)."""
        dead = self._dead_end
        if dead is None:
            dead = self._dead_end = (self.trans < 0).all(axis=1).tobytes()
        return dead

    def block_of(self, state: int):
        """(terminal DFA, offset) when ``state`` lies in a single terminal's copied table."""
        if state < self._n_prod:
            return None
        for start, j in reversed(self.blocks):
            if state >= start:
                return self.dfas[j], start
        return None

    def single_live(self, state: int) -> tuple[int, int] | None:
        """(DFA index, sub-state) when exactly one automaton is alive in ``state``, else None."""
        if state < self._n_prod:
            a, b = int(self._ptr[state]), int(self._ptr[state + 1])
            return (int(self._ent_j[a]), int(self._ent_s[a])) if b - a == 1 else None
        for start, j in reversed(self.blocks):
            if state >= start:
                return j, state - start
        return None

    def live_entries(self, state: int) -> list[tuple[int, int]]:
        """(DFA index, sub-state) of each automaton alive in product state ``state``."""
        a, b = int(self._ptr[state]), int(self._ptr[state + 1])
        return list(zip(self._ent_j[a:b].tolist(), self._ent_s[a:b].tolist()))

    def substates(self, state: int) -> tuple:
        """Per-DFA sub-state of a combined state (-1 where that DFA is dead)."""
        if state < self._n_prod:
            sub = [-1] * len(self.dfas)
            for j, s in self.live_entries(state):
                sub[j] = s
            return tuple(sub)
        for start, j in reversed(self.blocks):
            if state >= start:
                sub = [-1] * len(self.dfas)
                sub[j] = state - start
                return tuple(sub)
        raise IndexError(state)


_cores = ByteLRU(CORE_CACHE_BYTES, size_of=lambda core: core.nbytes(), name="lexer.cores")


def lexer_core(dfas: tuple[DFA, ...]) -> LexerCore:
    key = tuple(d.uid for d in dfas)
    core = _cores.get(key)
    if core is None:
        core = LexerCore(dfas)
        _cores.put(key, core)
    return core


class Lexer:
    """A core bound to one grammar's terminal ids.

    ``widened`` are key literals held beside an object's "any other key" terminal whether or not
    the parser still allows them (``CompiledGrammar.lexer_for``): every set of keys left in an
    any-order object then shares one lexer, with its walks.  That is exact but for the states
    where such a literal's closing quote ends a lexeme nothing else can extend (``end_terms``):
    a token ending there is allowed only when the parser allows one of the state's terminals."""

    def __init__(self, lexer_id: int, term_ids: tuple[int, ...], dfas: list[DFA],
                 widened: frozenset[int] = frozenset(), follow: dict | None = None):
        self.id = lexer_id
        self.term_ids = term_ids
        # terminal id -> FollowCondition for the terminals with a lookahead at their end (None
        # when this lexer has none: the usual case costs one test)
        self.follow = follow
        self.core = lexer_core(tuple(dfas))
        core = self.core
        self.widened = widened
        self.hits: dict[tuple, tuple] = {}  # (kind, state or group id) -> (end states, tokens)
        self.trans = core.trans
        self.classmap = core.classmap
        self.n_classes = core.trans.shape[1]
        # kind k >= 1 (a set of accepting members; kind 0 is "none") is accept set k-1: members are
        # distinct DFAs and terminal ids are distinct, so kinds and accept sets correspond one to one,
        # and the state -> accept-set tables are the core's own (shared by every grammar using it).
        # An accept set's terminal ids (sorted, as Parser.scan takes them) are made on first use: a
        # key lexer's core has a kind per key literal, and a mask needs two or three of them.
        self._acc_sets: dict[int, tuple[int, ...]] = {}
        self._follow_classes: dict[int, tuple] = {}  # accept set -> follow_classes(a)
        self.acc_id = core.acc_id
        self.boundary = core.boundary
        self._dfas = core.dfas

    @cached_property
    def end_terms(self) -> dict[int, tuple[int, ...]]:
        """The states where a widened literal's lexeme is complete and cannot grow -> their
        terminals (made when a configuration first refuses one of them)."""
        core = self.core
        dead = np.frombuffer(core._dead_end_flags(), dtype=np.bool_)
        out = {}
        for s in np.nonzero(dead & (core.acc_id >= 0))[0].tolist():
            terms = self.acc_set(int(core.acc_id[s]))
            if not self.widened.isdisjoint(terms):
                out[s] = terms
        return out

    @cached_property
    def end_target(self) -> np.ndarray:
        """``end_terms`` as flags per state (what the trie kernel reads)."""
        target = np.zeros(self.core.n_states, dtype=np.uint8)
        target[list(self.end_terms)] = 1
        return target

    def acc_set(self, a: int) -> tuple[int, ...]:
        """The terminal ids of accept set ``a`` (a state's ``acc_id`` / ``boundary``)."""
        ts = self._acc_sets.get(a)
        if ts is None:
            ts = self._acc_sets[a] = tuple(sorted(self.term_ids[j] for j in self.core.members(a + 1)))
        return ts

    def terms_before(self, a: int, byte: int | None) -> tuple[int, ...]:
        """The terminals of accept set ``a`` whose lexeme may be followed by ``byte`` (None: by
        the end of the output)."""
        follow = self.follow
        out = []
        for t in self.acc_set(a):
            c = follow.get(t)
            if c is None or (c.at_end if byte is None else byte in c.next_bytes):
                out.append(t)
        return tuple(out)

    def follow_classes(self, a: int) -> tuple[tuple[tuple[int, ...], frozenset | None], ...]:
        """Accept set ``a`` split by what may follow its lexemes: (terminals, first bytes allowed
        next, None for any), made once per accept set: every boundary of every first mask asks."""
        hit = self._follow_classes.get(a)
        if hit is None:
            follow = self.follow
            groups: dict = {}
            for t in self.acc_set(a):
                c = follow.get(t)
                key = None if c is None else c.next_bytes
                groups.setdefault(key, []).append(t)
            hit = self._follow_classes[a] = tuple((tuple(ts), key) for key, ts in groups.items())
        return hit

    def completions(self, state: int) -> list[tuple[int, int]]:
        """(terminal id, min bytes to finish that terminal) for each live terminal."""
        out = []
        for j, s in enumerate(self.core.substates(state)):
            if s >= 0:
                d = int(self._dfas[j].dist_to_accept()[s])
                if d >= 0:
                    out.append((self.term_ids[j], d))
        return out


class LexerCache:
    """One Lexer per distinct allowed-terminal set, built on first use.

    ``follow``: terminal id -> FollowCondition, for terminals with a lookahead at their end.  The
    lexeme after one of those may only start with the bytes its condition allows: a lexer whose
    terminals are cut to those first bytes (``get(..., first=...)``) continues the trie walks, so
    masks stay exact without trying tokens one by one."""

    def __init__(self, term_dfas: list[DFA], follow: dict | None = None):
        self.term_dfas = term_dfas
        self.follow = follow or None
        self.lexers: list[Lexer] = []
        self._by_set: dict[tuple, int] = {}  # -> index in ``lexers`` (an int dict: untracked by the GC)

    def get(self, allowed: tuple, widened: frozenset[int] = frozenset(), first: frozenset | None = None) -> Lexer:
        """The lexer for a sorted tuple of terminal ids (``widened``: see :class:`Lexer`; the same
        for every request of one tuple; ``first``: lexemes must start with one of these bytes)."""
        key = allowed if first is None else (allowed, first)
        i = self._by_set.get(key)
        if i is not None:
            return self.lexers[i]
        dfas = [self.term_dfas[t] for t in allowed]
        if first is not None:
            cut = [(t, starting_with(d, first)) for t, d in zip(allowed, dfas)]
            cut = [(t, d) for t, d in cut if not d.is_empty()]
            allowed, dfas = tuple(t for t, _ in cut), [d for _, d in cut]
        follow = self.follow
        if follow is not None:
            follow = {t: follow[t] for t in allowed if t in follow} or None
        lx = Lexer(len(self.lexers), allowed, dfas, widened, follow)
        self._by_set[key] = lx.id
        self.lexers.append(lx)
        return lx


_starting: dict[tuple, DFA] = {}


_outside: dict[frozenset, tuple[int, ...]] = {}  # a first-byte set -> the bytes not in it


def _starts_only_with(d: DFA, first: frozenset) -> bool:
    """True when every lexeme of ``d`` is non-empty and starts with a byte of ``first``."""
    if d.accept[d.start]:
        return False
    outside = _outside.get(first)
    if outside is None:
        if len(_outside) > 64:
            _outside.clear()
        outside = _outside[first] = tuple(b for b in range(256) if b not in first)
    row, classmap = d.trans[d.start], d.classmap
    return all(row[classmap[b]] < 0 for b in outside)


def starting_with(d: DFA, first: frozenset) -> DFA:
    """``d``'s lexemes whose first byte is in ``first`` (cached per automaton and byte set)."""
    key = (d.uid, first)
    hit = _starting.get(key)
    if hit is None:
        if _starts_only_with(d, first):
            # no lexeme is empty or starts outside ``first`` (a string, a number, ``{`` after an
            # opener's blanks): the automaton itself, so the cut lexer shares the plain one's core
            return d
        classmap = np.array([0 if b in first else 1 for b in range(256)], dtype=np.int32)
        gate = DFA(np.array([[1, -1], [1, 1]], dtype=np.int32), np.array([False, True]), classmap, 0)
        hit = intersect(d, gate)
        if len(_starting) > 4096:
            _starting.clear()
        _starting[key] = hit
    return hit
