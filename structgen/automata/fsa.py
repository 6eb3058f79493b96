"""Byte-level finite automata: the one representation every terminal compiles to.

An ``NFA`` is built by the front ends (regex, JSON Schema strings, numeric
ranges); ``determinize`` turns it into a dense ``DFA`` over *byte classes*
(bytes that no transition distinguishes share a class), which keeps tables
small and lets numba walk them.  DFAs are always trimmed: every state can reach
an accepting state, and a missing transition is ``-1`` (dead).

One concern, the automata and their closed constructions over the same dense tables (subset
construction, minimization, products, differences, concatenation, the tables of ``nfa_tables``),
needs the ~640 lines; the numba kernels they run are already modules of their own
(``*_kernels.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..byte_lru import ByteLRU, byte_lru_cache, nbytes_of
from ..errors import GrammarError
from ..uids import new_uid
from .minimize_kernels import depth_canonical as _depth_canonical, hopcroft_blocks as _hopcroft_blocks
from .product_kernels import difference_trie as _difference_trie, pair_product as _pair_product
from .search_kernels import backward_depth as _backward_depth, column_classes as _column_classes, \
    counted_chain as _counted_chain, live_reachable as _live_reachable, renumber_rows as _renumber_rows
from .subset_kernels import nfa_successors as _nfa_successors, subset_construction as _subset_construction

#: Hard caps that keep compiles bounded; exceeding one raises GrammarError.
MAX_NFA_STATES = 400_000
MAX_DFA_STATES = 60_000
#: Sum of NFA-subset sizes the subset construction may visit (about a second of the kernel).
MAX_DETERMINIZE_WORK = 20_000_000


class NFA:
    """Thompson-style NFA over bytes; edges carry inclusive byte ranges, kept in four flat
    lists (source, lo, hi, target) that the subset-construction kernel takes as arrays."""

    __slots__ = ("eps", "e_src", "e_lo", "e_hi", "e_dst", "start", "final", "universal")

    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.e_src: list[int] = []
        self.e_lo: list[int] = []
        self.e_hi: list[int] = []
        self.e_dst: list[int] = []
        #: states accepting every string of whole characters (see :func:`determinize`)
        self.universal: list[int] = []
        self.start = self.new_state()
        self.final = self.new_state()

    def new_state(self) -> int:
        if len(self.eps) >= MAX_NFA_STATES:
            raise GrammarError(
                f"automaton too large (over {MAX_NFA_STATES} states); reduce repetition bounds or pattern size"
            )
        self.eps.append([])
        return len(self.eps) - 1

    def add_eps(self, a: int, b: int) -> None:
        self.eps[a].append(b)

    def add_range(self, a: int, lo: int, hi: int, b: int) -> None:
        self.e_src.append(a)
        self.e_lo.append(lo)
        self.e_hi.append(hi)
        self.e_dst.append(b)

    def add_bytes(self, a: int, data: bytes, b: int) -> None:
        """Add a path a -data-> b."""
        cur = a
        for i, byte in enumerate(data):
            nxt = b if i == len(data) - 1 else self.new_state()
            self.add_range(cur, byte, byte, nxt)
            cur = nxt
        if not data:
            self.add_eps(a, b)

    def add_dfa(self, dfa: "DFA", a: int, b: int) -> None:
        """Embed a DFA between states a and b (its accepting states eps-link to b)."""
        n = dfa.n_states
        if len(self.eps) + n > MAX_NFA_STATES:
            raise GrammarError(
                f"automaton too large (over {MAX_NFA_STATES} states); reduce repetition bounds or pattern size"
            )
        base = len(self.eps)
        self.eps.extend([] for _ in range(n))
        self.add_eps(a, base + dfa.start)
        src, lo, hi, dst = dfa.range_edges()
        self.e_src.extend([base + x for x in src])
        self.e_lo.extend(lo)
        self.e_hi.extend(hi)
        self.e_dst.extend([base + x for x in dst])
        for s in dfa.accepting_states():
            self.add_eps(base + s, b)


@dataclass
class DFA:
    """Dense DFA: ``trans[state, classmap[byte]]`` is the next state or -1."""

    trans: np.ndarray  # int32 [n_states, n_classes]
    accept: np.ndarray  # bool [n_states]
    classmap: np.ndarray  # int32 [256]
    start: int = 0
    _dist: np.ndarray | None = field(default=None, repr=False)
    #: cache key of this automaton (see ``structgen.uids``)
    uid: int = field(default_factory=new_uid, init=False, repr=False, compare=False)
    #: how many tables were attached by :meth:`keep` (caches weigh an automaton again when it changes)
    version: int = field(default=0, init=False, repr=False, compare=False)

    #: tables built on first use and kept on the automaton (by this module and the engine)
    KEPT = ("_dist", "_range_edges", "_depth_cache", "_kernel_parts", "_start_free", "_boundary",
            "_class_counted", "_boundary_counts", "_char_counts")

    def keep(self, name: str, value):
        """Attach a table built from this automaton (one of :attr:`KEPT`) and return it; byte-bounded
        caches holding the automaton see it grew (``version``)."""
        setattr(self, name, value)
        self.version += 1
        return value

    @property
    def n_states(self) -> int:
        return int(self.trans.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the tables, and of those built later and kept on the automaton (distances,
        depth classes, transition ranges, kernel layouts): what byte-bounded caches count.
        (Read by name: touching ``__dict__`` would make Python build a dict per automaton, which
        the garbage collector then scans -- that cost ~0.2 ms per MaskBench compile.)"""
        return 160 + self.table_nbytes + sum(nbytes_of(getattr(self, a, None), True) for a in self.KEPT)

    @property
    def table_nbytes(self) -> int:
        """Bytes of the transition table, classes and accepting flags alone (cheap to read)."""
        return int(self.trans.nbytes + self.accept.nbytes + self.classmap.nbytes)

    @property
    def n_classes(self) -> int:
        return int(self.trans.shape[1])

    def class_ranges(self) -> list[list[tuple[int, int]]]:
        """For each class, its byte values as inclusive ranges."""
        out: list[list[tuple[int, int]]] = [[] for _ in range(self.n_classes)]
        cm = self.classmap
        lo = 0
        for b in range(1, 257):
            if b == 256 or cm[b] != cm[lo]:
                out[int(cm[lo])].append((lo, b - 1))
                lo = b
        return out

    def range_edges(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """Every transition as byte ranges: (states, lows, highs, targets) (cached: a regex embeds
        the same character automaton once per repetition; tuples of ints, which the garbage
        collector stops tracking)."""
        out = getattr(self, "_range_edges", None)
        if out is None:
            inv = self.class_ranges()
            src: list[int] = []
            lo: list[int] = []
            hi: list[int] = []
            dst: list[int] = []
            for s, row in enumerate(self.trans.tolist()):
                for c, t in enumerate(row):
                    if t >= 0:
                        for a, b in inv[c]:
                            src.append(s)
                            lo.append(a)
                            hi.append(b)
                            dst.append(t)
            out = self.keep("_range_edges", (tuple(src), tuple(lo), tuple(hi), tuple(dst)))
        return out

    def accepting_states(self) -> list[int]:
        return np.nonzero(self.accept)[0].tolist()

    def step(self, state: int, byte: int) -> int:
        return int(self.trans[state, self.classmap[byte]])

    def matches(self, data: bytes) -> bool:
        s = self.start
        for b in data:
            s = self.step(s, b)
            if s < 0:
                return False
        return bool(self.accept[s])

    def is_empty(self) -> bool:
        return not bool(self.accept.any())

    def accepts_empty(self) -> bool:
        return bool(self.accept[self.start])

    def dist_to_accept(self) -> np.ndarray:
        """Length of the shortest accepted suffix from each state (-1: none; BFS backwards)."""
        if self._dist is None:
            self.keep("_dist", _backward_depth(*kernel_args(self)))
        return self._dist

    def shortest_string(self, state: int | None = None) -> bytes:
        """One shortest accepted suffix from ``state`` (default: start)."""
        dist = self.dist_to_accept()
        s = self.start if state is None else state
        out = bytearray()
        inv = self.class_ranges()
        while not self.accept[s]:
            best = None
            for c in range(self.n_classes):
                t = int(self.trans[s, c])
                if t >= 0 and dist[t] == dist[s] - 1 and inv[c]:
                    lo = inv[c][0][0]
                    # prefer printable ASCII for readability
                    for a, b in inv[c]:
                        if a <= 0x7E and b >= 0x20:
                            lo = max(a, 0x20)
                            break
                    if best is None or (0x20 <= lo <= 0x7E and not (0x20 <= best[0] <= 0x7E)):
                        best = (lo, t)
            assert best is not None
            out.append(best[0])
            s = best[1]
        return bytes(out)

    def depth_classes(self, depth: int) -> np.ndarray:
        """Representative state per class of states that no string of at most
        ``depth`` bytes tells apart (same liveness and acceptance along it).

        A token mask from a state only looks ``depth`` bytes ahead, so equal
        representatives give equal masks: a ``maxLength: 255`` string needs one
        walk per character position near its bounds, not one per position."""
        cache = getattr(self, "_depth_cache", None)
        if cache is not None and cache[0] == depth:
            return cache[1]
        if self.n_states * self.n_classes * depth > DEPTH_CLASS_BUDGET:
            # refinement would cost more than the walks it saves (a 20k-state "\S+@\S+" of 5-255
            # characters: 0.5 s in one mask call): every state is its own class
            canon = np.arange(self.n_states, dtype=np.int32)
        else:
            canon = _depth_canonical(*kernel_args(self), depth)
        self.keep("_depth_cache", (depth, canon))
        return canon

    def min_length(self) -> int:
        return int(self.dist_to_accept()[self.start])


#: Largest states x classes x depth refined into depth classes (about 50 ms of refinement here).
DEPTH_CLASS_BUDGET = 16_000_000


def _refine_classes(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Byte classes: bytes not separated by any range boundary share a class."""
    cuts = np.zeros(257, dtype=bool)
    cuts[0] = True
    cuts[lo] = True
    cuts[hi + 1] = True
    return (np.cumsum(cuts[:256]) - 1).astype(np.int32)


def determinize(nfa: NFA) -> DFA:
    """Subset construction over byte classes (one numba kernel), then trimming and
    minimisation; bounded by :data:`MAX_DETERMINIZE_WORK` and :data:`MAX_DFA_STATES`."""
    e_src, e_dst = nfa.e_src, nfa.e_dst
    lo, hi = np.array(nfa.e_lo, dtype=np.int64), np.array(nfa.e_hi, dtype=np.int64)
    classmap = _refine_classes(lo, hi)
    n_classes = int(classmap[-1]) + 1
    # one edge per (range edge, class inside the range)
    c_lo = classmap[lo].astype(np.int64)
    count = classmap[hi].astype(np.int64) - c_lo + 1
    first = np.cumsum(count) - count
    sym = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(first - c_lo, count)
    eps_src = [s for s, ts in enumerate(nfa.eps) for _ in ts]
    eps_dst = [t for ts in nfa.eps for t in ts]
    i32 = np.int32
    universal = np.zeros(len(nfa.eps) if nfa.universal else 0, dtype=np.bool_)
    universal[nfa.universal] = True
    ok, dfa_ptr, is_final, o_src, o_sym, o_dst = _subset_construction(
        len(nfa.eps), np.array(eps_src, dtype=i32), np.array(eps_dst, dtype=i32),
        np.repeat(np.array(e_src, dtype=i32), count), sym.astype(i32), np.repeat(np.array(e_dst, dtype=i32), count),
        n_classes, np.array([nfa.start], dtype=i32), np.array([nfa.final], dtype=i32), MAX_DETERMINIZE_WORK,
        MAX_DFA_STATES, universal)
    if not ok:
        raise GrammarError(f"automaton too large (over {MAX_DFA_STATES} DFA states or over the subset construction's "
                           "work limit); reduce repetition bounds or pattern size")
    n = int(dfa_ptr[1])
    trans = np.full((n, n_classes), -1, dtype=np.int32)
    trans[o_src, o_sym] = o_dst
    return minimize(trim(DFA(trans, is_final.copy(), classmap, 0)))


MINIMIZE_MAX_STATES = 20_000


def minimize(dfa: DFA) -> DFA:
    """Hopcroft's partition refinement (a numba kernel, O(states x classes x log states));
    skipped for very large DFAs."""
    n = dfa.n_states
    if n <= 2 or n > MINIMIZE_MAX_STATES:
        return dfa
    trans, accept = kernel_args(dfa)
    _, block = np.unique(_hopcroft_blocks(trans, accept), return_inverse=True)
    first = np.full(int(block.max()) + 1, n, dtype=np.int64)
    np.minimum.at(first, block, np.arange(n))
    canon = first[block]  # the smallest state of each Myhill-Nerode class
    reps = np.unique(canon)
    if len(reps) == n:
        return dfa
    # block ids: the start state's block first, then by first occurrence
    order = np.concatenate([[canon[dfa.start]], reps[reps != canon[dfa.start]]])
    block = np.full(n, -1, dtype=np.int64)
    block[order] = np.arange(len(order))
    new_trans = _renumber_rows(trans, order.astype(np.int64), block[canon].astype(np.int32))
    return compact_classes(DFA(new_trans, dfa.accept[order].copy(), dfa.classmap, 0))


def kernel_args(dfa: DFA) -> tuple[np.ndarray, np.ndarray]:
    """One array layout for the numba kernels, so each compiles once."""
    return np.ascontiguousarray(dfa.trans, dtype=np.int32), np.ascontiguousarray(dfa.accept, dtype=np.bool_)


def trim(dfa: DFA) -> DFA:
    """Remove states that cannot reach acceptance (and unreachable ones)."""
    return trim_order(dfa)[0]


def trim_order(dfa: DFA) -> tuple[DFA, np.ndarray | None]:
    """:func:`trim`, plus the old state of each new one (None for the empty result)."""
    n = dfa.n_states
    trans, accept = kernel_args(dfa)
    keep = _live_reachable(trans, accept, dfa.start)
    if not keep[dfa.start]:
        return empty_dfa(), None
    if keep.all():
        return dfa, np.arange(n)
    kept = np.nonzero(keep)[0]
    order = np.concatenate([[dfa.start], kept[kept != dfa.start]])
    remap = np.full(n, -1, dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    new_trans = _renumber_rows(trans, order.astype(np.int64), remap)
    return compact_classes(DFA(new_trans, dfa.accept[order].copy(), dfa.classmap, 0)), order


def counted_repeat(unit: DFA, lo: int, hi: int | None) -> DFA:
    """``lo``..``hi`` (no upper bound: None) repetitions of ``unit``, built directly: a unit whose
    accepting states have no moves (one character, in any of its encodings) repeats as a chain of
    copies, so ``maxLength: 1024`` or ``[a-z]{1,255}`` costs one linear pass instead of a subset
    construction over hundreds of NFA copies."""
    trans, accept = kernel_args(unit)
    if accept[unit.start] or (trans[accept] >= 0).any():
        raise ValueError("counted_repeat needs a non-empty unit whose accepting states have no moves")
    copies = hi + 1 if hi is not None else lo + 1
    if copies * (unit.n_states - int(accept.sum())) > MAX_DFA_STATES:
        raise GrammarError(f"automaton too large (over {MAX_DFA_STATES} DFA states); reduce repetition bounds")
    chain, acc, start = _counted_chain(trans, accept, unit.start, copies, lo, hi is None)
    return trim(DFA(chain, acc, unit.classmap.copy(), int(start)))


def compact_classes(dfa: DFA) -> DFA:
    """Merge byte classes whose columns are identical (first-seen order)."""
    trans = kernel_args(dfa)[0]
    cls, keep = _column_classes(trans)
    if len(keep) == dfa.n_classes:
        return dfa
    return DFA(np.ascontiguousarray(trans[:, keep]), dfa.accept, cls[dfa.classmap].astype(np.int32), dfa.start)


def empty_dfa() -> DFA:
    """The DFA of the empty language (one dead, non-accepting start state)."""
    return DFA(np.full((1, 1), -1, dtype=np.int32), np.zeros(1, dtype=bool), np.zeros(256, dtype=np.int32), 0)


def literal_dfa(data: bytes) -> DFA:
    return literal_set_dfa([data])


def literal_set_dfa(strings) -> DFA:
    """Exactly the given byte strings: the trie itself is the DFA (built directly).

    One shared DFA per set of strings: equal literals in different grammars are then the
    same terminal automaton, so lexer cores and trie walks built for one serve the others."""
    return _literal_set_dfa(tuple(sorted(set(strings))))


def dfa_cache(max_bytes: int):
    """``byte_lru_cache`` for functions returning automata: an automaton that gained tables since it
    was cached (depth classes, transition ranges) is weighed again when it is next looked up."""
    return byte_lru_cache(max_bytes, version_of=_version_of)


def _version_of(value) -> int:
    return getattr(value, "version", 0)


@dfa_cache(64 << 20)
def _literal_set_dfa(strings: tuple[bytes, ...]) -> DFA:
    if not strings:
        return empty_dfa()
    used = sorted({b for x in strings for b in x})
    classmap = np.zeros(256, dtype=np.int32)
    for i, b in enumerate(used):
        classmap[b] = i + 1
    edges: list[dict[int, int]] = [{}]
    accept = [False]
    for x in strings:
        cur = 0
        for b in x:
            nxt = edges[cur].get(b)
            if nxt is None:
                nxt = len(edges)
                edges[cur][b] = nxt
                edges.append({})
                accept.append(False)
            cur = nxt
        accept[cur] = True
    trans = np.full((len(edges), len(used) + 1), -1, dtype=np.int32)
    for sid, row in enumerate(edges):
        for b, t in row.items():
            trans[sid, classmap[b]] = t
    return DFA(trans, np.array(accept, dtype=bool), classmap, 0)


def _joint_classes(a: DFA, b: DFA) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pairs = a.classmap.astype(np.int64) * (b.n_classes + 1) + b.classmap
    uniq, classmap = np.unique(pairs, return_inverse=True)
    ca = (uniq // (b.n_classes + 1)).astype(np.int64)
    cb = (uniq % (b.n_classes + 1)).astype(np.int64)
    return classmap.astype(np.int32), ca, cb


def product(a: DFA, b: DFA, mode: str = "and") -> DFA:
    """Intersection (``and``), union (``or``) or difference (``diff``: a minus b),
    breadth-first over the reachable state pairs (a numba kernel)."""
    classmap, ca, cb = _joint_classes(a, b)
    ta = np.ascontiguousarray(a.trans[:, ca], dtype=np.int32)
    tb = np.ascontiguousarray(b.trans[:, cb], dtype=np.int32)
    n, trans, acc, pa, pb = _pair_product(ta, tb, np.ascontiguousarray(a.accept, dtype=np.bool_),
                                          np.ascontiguousarray(b.accept, dtype=np.bool_), int(a.start),
                                          int(b.start), _PRODUCT_MODES[mode], MAX_DFA_STATES + 1)
    if n < 0:
        raise GrammarError(f"automaton too large (over {MAX_DFA_STATES} DFA states) in product")
    out, order = trim_order(DFA(trans, acc, classmap, 0))
    if mode == "diff" and order is not None and getattr(a, "shadow", None) is not None:
        _inherit_shadow(out, a.shadow, pa[order], pb[order])
    return out


def _inherit_shadow(out: DFA, shadow, pa: np.ndarray, pb: np.ndarray) -> None:
    """``out`` = ``a`` minus ``b``: where ``b`` has died, a state behaves exactly as its ``a``
    state, so the pure states of ``a``'s shadow stay pure (an "any other key" with a
    patternProperties region carved out keeps sharing the plain string's walks)."""
    shared, base_a, pure_a, _ = shadow
    alive = pa >= 0
    pure = (pb < 0) & alive & pure_a[np.maximum(pa, 0)]
    if not pure.any() or out is shared:
        return
    base = np.where(alive, base_a[np.maximum(pa, 0)], -1)
    pure_of = np.full(shared.n_states, -1, dtype=np.int64)
    pure_of[base[pure]] = np.nonzero(pure)[0]
    out.shadow = (shared, base, np.ascontiguousarray(pure, dtype=np.bool_), pure_of)


_PRODUCT_MODES = {"and": 0, "or": 1, "diff": 2}


#: "any other key" automata by (automaton uid, excluded keys); bounded by bytes
_DIFF_CACHE = ByteLRU(32 << 20, version_of=_version_of, name="grammar.fsa.difference_literals")


def difference_literals(a: DFA, strings) -> DFA:
    """``a`` minus a finite set of byte strings (memoised: objects with the same defined keys,
    in one schema or across schemas, share one "any other key" automaton and its walks)."""
    key = (a.uid, tuple(sorted(set(strings))))  # ints and bytes only: untracked by the GC
    hit = _DIFF_CACHE.get(key)
    if hit is None:
        hit = _difference_literals(a, key[1])
        _DIFF_CACHE.put(key, hit)
    return hit


def _difference_literals(a: DFA, ordered: tuple[bytes, ...]) -> DFA:
    """``a`` minus a finite set of byte strings (``ordered``: sorted, no repeats), without a
    general product.

    The product with a trie only ever pairs a trie node with the one state of
    ``a`` its prefix leads to, so the result is the trie (each node carrying
    that state's row, children overriding) on top of ``a``'s own states."""
    data = np.frombuffer(b"".join(ordered), dtype=np.uint8)
    offs = np.zeros(len(ordered) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in ordered], out=offs[1:])
    a_trans, a_acc = kernel_args(a)
    trans, acc, classmap, a_of_arr, T, any_removed = _difference_trie(
        a_trans, np.ascontiguousarray(a.classmap, dtype=np.int32), a_acc, int(a.start), data, offs)
    if not any_removed:
        return a
    out, order = trim_order(DFA(trans, acc, classmap, 0))
    if order is not None:
        # the bottom copy behaves exactly as ``a``: the engine walks ``a`` (cached across grammars)
        # for it and only re-walks where the trie part is still alive (structgen.engine.walks)
        base = np.concatenate([a_of_arr, np.arange(a.n_states)])[order]
        pure = np.ascontiguousarray(order >= T, dtype=np.bool_)
        pure_of = np.full(a.n_states, -1, dtype=np.int64)
        pure_of[base[pure]] = np.nonzero(pure)[0]
        out.shadow = (a, base, pure, pure_of)
    return out


def intersect(a: DFA, b: DFA) -> DFA:
    return product(a, b, "and")


def union(a: DFA, b: DFA) -> DFA:
    return product(a, b, "or")


def difference(a: DFA, b: DFA) -> DFA:
    return product(a, b, "diff")


def after_ignored(ignored: list[DFA], dfa: DFA) -> DFA:
    """Any run of lexemes of the ``ignored`` automata, then ``dfa`` (minimized), where each ignored
    lexeme of the run is as long as it can be: it ends only before a byte that cannot extend it
    (longest-match lexing, so ``// a /b/`` is one comment, never a comment and a regex)."""
    nfa = NFA()
    loop = nfa.new_state()
    nfa.add_eps(nfa.start, loop)
    parts = list(ignored) + [dfa]
    bases = []
    for p in parts:
        base = len(nfa.eps)
        nfa.eps.extend([] for _ in range(p.n_states))
        src, lo, hi, dst = p.range_edges()
        nfa.e_src.extend([base + x for x in src])
        nfa.e_lo.extend(lo)
        nfa.e_hi.extend(hi)
        nfa.e_dst.extend([base + x for x in dst])
        nfa.add_eps(loop, base + p.start)
        bases.append(base)
    for s in dfa.accepting_states():
        nfa.add_eps(bases[-1] + s, nfa.final)
    # an ignored lexeme ends at an accepting state, and only before a byte that cannot extend it:
    # the next lexeme's first step, restricted to those bytes
    first_steps = []
    for p, base in zip(parts, bases):
        src, lo, hi, dst = p.range_edges()
        first_steps.extend((l, h, base + d) for x, l, h, d in zip(src, lo, hi, dst) if x == p.start)
    for p, base in zip(ignored, bases):
        for s in p.accepting_states():
            ends = np.nonzero(p.trans[s][p.classmap] < 0)[0]  # bytes that cannot extend the lexeme
            if not len(ends):
                continue
            free = np.zeros(256, dtype=bool)
            free[ends] = True
            for l, h, d in first_steps:
                b = l
                while b <= h:
                    if free[b]:
                        e = b
                        while e + 1 <= h and free[e + 1]:
                            e += 1
                        nfa.add_range(base + s, b, e, d)
                        b = e + 1
                    else:
                        b += 1
    return minimize(determinize(nfa))


def concat_dfas(parts: list[DFA]) -> DFA:
    nfa = NFA()
    cur = nfa.start
    for p in parts:
        nxt = nfa.new_state()
        nfa.add_dfa(p, cur, nxt)
        cur = nxt
    nfa.add_eps(cur, nfa.final)
    return determinize(nfa)


@dataclass
class NFATables:
    """An NFA as arrays for on-demand subset construction (``structgen.engine.lazy_dfa``).

    Only the *important* states are kept -- those that read a byte, and the final state -- and
    only those from which the final state can be reached, so a subset is live exactly when it is
    not empty.  ``succ[succ_ptr[s * n_classes + c]:succ_ptr[s * n_classes + c + 1]]`` are the
    important states one byte of class ``c`` leads to from important state ``s`` (epsilon closure
    included); ``dist[s]`` is the fewest bytes from ``s`` to the final state."""

    classmap: np.ndarray  # int32 [256]
    n_classes: int
    start: np.ndarray  # int32: the start subset
    accept: np.ndarray  # uint8 [n_states]
    succ_ptr: np.ndarray  # int64 [n_states * n_classes + 1]
    succ: np.ndarray  # int32
    dist: np.ndarray  # int32 [n_states]

    @property
    def n_states(self) -> int:
        return len(self.accept)

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.classmap, self.start, self.accept, self.succ_ptr, self.succ, self.dist)))


def nfa_tables(nfa: NFA) -> NFATables:
    """The NFA's important states and their byte-class successors (see :class:`NFATables`)."""
    n = len(nfa.eps)
    lo, hi = np.array(nfa.e_lo, dtype=np.int64), np.array(nfa.e_hi, dtype=np.int64)
    classmap = _refine_classes(lo, hi)
    n_classes = int(classmap[-1]) + 1
    eps_src = np.array([s for s, ts in enumerate(nfa.eps) for _ in ts], dtype=np.int64)
    eps_dst = np.array([t for ts in nfa.eps for t in ts], dtype=np.int64)
    e_src = np.array(nfa.e_src, dtype=np.int64)
    e_dst = np.array(nfa.e_dst, dtype=np.int64)
    imp, dist, succ_ptr, succ, start = _nfa_successors(n, eps_src, eps_dst, e_src, classmap[lo].astype(np.int64),
                                                       classmap[hi].astype(np.int64), e_dst, n_classes, nfa.start,
                                                       nfa.final)
    accept = (imp == nfa.final).astype(np.uint8)
    return NFATables(classmap, n_classes, start, accept, succ_ptr, succ, dist[imp].astype(np.int32))


def warm_up_fsa_kernels() -> None:
    """Load (or compile, once per installation) the kernels ahead of the first schema."""
    t = np.full((1, 1), -1, dtype=np.int32)
    a = np.ones(1, dtype=np.bool_)
    _live_reachable(t, a, 0)
    _renumber_rows(t, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int32))
    _column_classes(t)
    _counted_chain(np.array([[1], [-1]], dtype=np.int32), np.array([False, True]), 0, 2, 1, False)
    _depth_canonical(t, a, 1)
    _hopcroft_blocks(t, a)
    one, none = np.zeros(1, dtype=np.int32), np.zeros(0, dtype=np.int32)
    _subset_construction(2, none, none, one, one, one + 1, 1, one, one + 1, 10, 10, np.zeros(2, dtype=np.bool_))
    _pair_product(t, t, a, a, 0, 0, 0, 4)
    _difference_trie(t, np.zeros(256, dtype=np.int32), a, 0, np.zeros(1, dtype=np.uint8), np.array([0, 1]))
