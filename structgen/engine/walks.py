"""Trie walks behind every mask, cached so that grammars and schemas share them.

A mask is the tokens that stay inside the current lexeme (an *inside* walk
from the lexer state) plus the tokens that cross lexeme boundaries (a
*continuation* walk from the boundary nodes with the parser's next lexer).
Both depend on automata, not on the parser, so their results live in
process-wide caches keyed by the automaton objects:

* a state of a single terminal is walked in that terminal's own DFA, so every
  lexer of every grammar holding the terminal shares the walk;
* a terminal that is a shared automaton with a few strings carved out (an
  object's "any other key": every string but the defined keys, see
  :func:`structgen.automata.fsa.difference_literals`) is walked as the shared
  automaton, and only the root subtrees where the carve-outs or the other live
  terminals matter are walked again -- so the key lexer of a new schema costs
  a few small subtrees instead of the whole vocabulary;
* continuation results are keyed by the boundary-node group they start from
  and the next lexer, and keep their own boundary groups, so following a
  chain of lexemes through a token is a few dictionary lookups.
"""
from __future__ import annotations

import itertools
import threading
from collections import OrderedDict

import numpy as np

from ..byte_lru import ByteLRU
from .counted import boundary_counts, class_counted, counted_strings
from .trie import TokenTrie, plain_loops
from ..automata.kernel_cache import kernel

#: Bytes of cached inside walks and of continuation walks (process-wide, shared by every grammar).
INSIDE_CACHE_BYTES = 16 << 20
CONT_CACHE_BYTES = 16 << 20
#: DFAs with this many states are walked once per depth class of states (see DFA.depth_classes).
CANON_MIN_STATES = 400
#: Walks with at most this many lexeme ends group them in Python (numpy's per-call cost dominates).
SMALL_GROUPING = 64
#: Strings of one character class with this many states are masked from the class's counted walk.
COUNTED_CLASS_MIN_STATES = 12

_group_ids = itertools.count(1)
_gid_lock = threading.Lock()
_gid_by_nodes: OrderedDict = OrderedDict()  # boundary node set (bytes) -> group id
GROUP_ID_ENTRIES = 50000


def group_id(nodes: np.ndarray) -> int:
    """One id per set of boundary nodes, whichever walk found it: continuation walks only
    depend on the nodes and the next lexer, so e.g. every character position of a string
    that ends lexemes at the same nodes shares them."""
    key = nodes.tobytes()
    with _gid_lock:
        gid = _gid_by_nodes.get(key)
        if gid is None:
            gid = _gid_by_nodes[key] = next(_group_ids)
            if len(_gid_by_nodes) > GROUP_ID_ENTRIES:
                _gid_by_nodes.popitem(last=False)
        else:
            _gid_by_nodes.move_to_end(key)
        return gid
_sig_lock = threading.Lock()
_sig_codes: dict[tuple, int] = {}
_sig_list: list[tuple] = []


def signature(dfa_ids: tuple) -> int:
    """A process-wide code for "a lexeme of these terminal automata ended here" (sorted DFA ids).

    Boundary events carry these instead of lexer states, so one walk serves every
    lexer core that holds the same live automata."""
    with _sig_lock:
        code = _sig_codes.get(dfa_ids)
        if code is None:
            code = _sig_codes[dfa_ids] = len(_sig_list)
            _sig_list.append(dfa_ids)
        return code


def signature_ids(code: int) -> tuple:
    """The DFA ids behind a :func:`signature` code."""
    return _sig_list[code]


#: A walk's result is a plain tuple, indexed by these: the garbage collector stops tracking a
#: tuple of arrays and ints the first time it sees one, so tens of thousands of cached walks
#: cost nothing in a full collection (a class instance would be rescanned in every one).
MASK, WORDS, VALS, EV_NODES, EV_STATES, GROUPS, OWN = range(7)
Walk = tuple


def make_walk(ev_nodes: np.ndarray, ev_states: np.ndarray, groups: tuple, *, own: bool = False,
              mask: np.ndarray | None = None, words: np.ndarray | None = None,
              vals: np.ndarray | None = None) -> Walk:
    """One walk's result: the tokens it allows (``mask``, or sparse ``words``/``vals``) and where
    lexemes end in it.

    ``ev_states`` are in the numbering of the table walked.  ``groups`` splits the
    boundary nodes by the kind of lexeme that ended there, each with a process-wide
    group id (continuation keys).  Walks shared between lexer cores (inside walks)
    label their groups by :func:`signature` (which automata accepted); a continuation
    walk belongs to one core (``own`` True) and labels them by that core's accept sets
    directly.  A walk holds no reference to what it was walked in: its cache key says that
    (``structgen.uids``), so caching a walk keeps no lexer core alive."""
    return (mask, words, vals, ev_nodes, ev_states, groups, own)


@kernel(nogil=True)
def split_by_state_label(ev_nodes, ev_states, label_of):
    """Boundary events grouped by ``label_of[state]``: ``(labels, ptr, nodes)`` with the nodes of
    ``labels[i]`` at ``nodes[ptr[i]:ptr[i + 1]]``, in preorder (one call instead of a numpy
    pass per label: a new walk is made inside a mask)."""
    n = len(ev_nodes)
    lab = np.empty(n, dtype=np.int64)
    for i in range(n):
        lab[i] = label_of[ev_states[i]]
    order = np.argsort(lab, kind="mergesort")  # stable: nodes stay in preorder
    nodes = np.empty(n, dtype=np.int32)
    labels = np.empty(n, dtype=np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    k = 0
    for i in range(n):
        v = lab[order[i]]
        if i == 0 or v != labels[k - 1]:
            labels[k] = v
            ptr[k] = i
            k += 1
        nodes[i] = ev_nodes[order[i]]
    ptr[k] = n
    return labels[:k], ptr[:k + 1], nodes


def _one_group(label: int, ev_nodes: np.ndarray) -> tuple:
    """Every event of one kind (a tuple: untracked by the garbage collector once seen)."""
    return ((label, group_id(ev_nodes), ev_nodes),) if len(ev_nodes) else ()


def _groups_by_state(ev_nodes: np.ndarray, ev_states: np.ndarray, acc_id: np.ndarray, relabel=None) -> tuple:
    """Events grouped by the accept set (``acc_id``) of their state, labelled by that accept set
    or by ``relabel(accept set)``."""
    if not len(ev_nodes):
        return ()
    labels, ptr, nodes = split_by_state_label(ev_nodes, ev_states, acc_id)
    if len(labels) == 1:
        nodes = [nodes]
    else:
        nodes = [nodes[a:b] for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist())]
    labels = labels.tolist() if relabel is None else [relabel(a) for a in labels.tolist()]
    return tuple((lab, group_id(v), v) for lab, v in zip(labels, nodes))


def _dfa_walk_result(dfa, ev_nodes, ev_states, **arrays) -> Walk:
    """A walk of one DFA's own table: every boundary is that terminal's."""
    return make_walk(ev_nodes, ev_states, _one_group(signature((id(dfa),)), ev_nodes), **arrays)


def _core_walk_result(core, ev_nodes, ev_states, **arrays) -> Walk:
    """A walk in a lexer core's table: boundaries by the automata accepting at each state."""
    return make_walk(ev_nodes, ev_states, _groups_by_state(ev_nodes, ev_states, core.acc_id, core.accept_signature),
                     **arrays)


# walks keyed by uids (``structgen.uids``), so a key alone names its automata; bounded by bytes
inside_cache = ByteLRU(INSIDE_CACHE_BYTES, name="walks.inside")
cont_cache = ByteLRU(CONT_CACHE_BYTES, name="walks.continuation")


def _plain_loop(owner, trans, classmap) -> np.ndarray:
    """Per state of ``owner``'s table: does it loop on every plain byte (cached on the owner)."""
    pl = getattr(owner, "_plain_loop", None)
    if pl is None:
        pl = plain_loops(trans, classmap)
        owner._plain_loop = pl
    return pl


def _dfa_boundary(dfa) -> np.ndarray:
    """Boundary marks for walking one terminal's own DFA: accepting states end a lexeme."""
    b = getattr(dfa, "_boundary", None)
    if b is None:
        b = dfa.keep("_boundary", np.where(dfa.accept, 0, -1).astype(np.int32))
    return b


class _Buffers:
    """The kernels' output buffers for one trie: sized by the trie (2 MB over DeepSeek-V4's), filled
    by a walk and copied out before the next one, so one set per thread serves every grammar."""

    def __init__(self, trie: TokenTrie):
        n_words = (trie.vocab_size + 31) // 32
        self.trie = trie  # held, so the id() this set is filed under stays this trie's
        self.thread = threading.get_ident()
        self.ev_nodes = np.empty(trie.n_nodes + 1, dtype=np.int32)
        self.ev_states = np.empty(trie.n_nodes + 1, dtype=np.int32)
        self.scratch = np.zeros(n_words, dtype=np.uint32)
        self.words = np.empty(n_words, dtype=np.int32)
        self.vals = np.empty(n_words, dtype=np.uint32)
        n_hits = int(trie.tok_ptr[-1])
        self.hits = (np.empty(n_hits, dtype=np.int32), np.empty(n_hits, dtype=np.int32))  # (states, tokens)


_per_thread = threading.local()


def _buffers(trie: TokenTrie) -> _Buffers:
    sets = getattr(_per_thread, "sets", None)
    if sets is None:
        sets = _per_thread.sets = {}
    b = sets.get(id(trie))
    if b is None or b.trie is not trie:
        b = sets[id(trie)] = _Buffers(trie)
    return b


class TrieWalker:
    """Walks one tokenizer's trie for one grammar.  The event buffers are the calling thread's
    (``_buffers``): a grammar costs no buffer memory of its own, and the grammar's lock
    serialises one grammar's walks."""

    def __init__(self, trie: TokenTrie):
        self.trie = trie
        self.n_words = (trie.vocab_size + 31) // 32

        self._last: _Buffers | None = None

    def _bufs(self) -> _Buffers:
        """The calling thread's buffers (the last ones used, when it is the same thread)."""
        b = self._last
        if b is None or b.thread != threading.get_ident():
            b = self._last = _buffers(self.trie)
        return b

    # -- the kernel call ------------------------------------------------------------------
    def _walk(self, owner, trans, classmap, boundary, roots, states, mask) -> tuple[np.ndarray, np.ndarray]:
        b = self._bufs()
        n = self.trie.walk(trans, classmap, boundary, roots, states, mask, b.ev_nodes, b.ev_states,
                           _plain_loop(owner, trans, classmap))
        return b.ev_nodes[:n].copy(), b.ev_states[:n].copy()

    def _root_events(self, owner, trans, classmap, boundary, state: int):
        m = np.zeros(self.n_words, dtype=np.uint32)
        ev_n, ev_s = self._walk(owner, trans, classmap, boundary, np.zeros(1, dtype=np.int32),
                                np.array([state], dtype=np.int32), m)
        return m, ev_n, ev_s

    # -- inside walks -------------------------------------------------------------------------
    def inside(self, lx, ls: int) -> Walk:
        """The inside walk of lexer state ``ls`` of ``lx``.

        A product state's walk only depends on its live automata and their states, so it is
        cached under those: lexers of other grammars reach the same state from other cores."""
        core = lx.core
        block = core.block_of(ls)
        if block is not None:
            dfa, offset = block
            return self.dfa_walk(dfa, ls - offset)
        counted = self._counted_chunk(core, ls)
        if counted is not None:
            return counted
        key = (core.live_key(ls, self.trie.max_depth + 1, CANON_MIN_STATES), self.trie.uid)
        hit = inside_cache.get(key)
        if hit is None:
            res = self._anchored_product(lx, ls)
            if res is None:
                res = self._root_events(core, lx.trans, lx.classmap, lx.boundary, ls)
            m, ev_n, ev_s = res
            hit = _core_walk_result(core, ev_n, ev_s, mask=m)
            inside_cache.put(key, hit)
        return hit

    def dfa_walk(self, dfa, sub: int) -> Walk:
        """The walk of one terminal's own DFA from state ``sub`` (shared by every lexer holding it)."""
        counted = self._counted(dfa, sub)
        if counted is not None:
            return counted
        if dfa.n_states >= CANON_MIN_STATES:
            sub = int(dfa.depth_classes(self.trie.max_depth + 1)[sub])
        key = (dfa.uid, self.trie.uid, sub)
        hit = inside_cache.get(key)
        if hit is None:
            res = None
            if getattr(dfa, "shadow", None) is not None:
                res = self._anchored(dfa, dfa.trans, dfa.classmap, _dfa_boundary(dfa), sub, dfa, 0, sub)
            if res is None:
                res = self._root_events(dfa, dfa.trans, dfa.classmap, _dfa_boundary(dfa), sub)
            m, ev_n, ev_s = res
            hit = _dfa_walk_result(dfa, ev_n, ev_s, mask=m)
            inside_cache.put(key, hit)
        return hit

    def _counted(self, dfa, sub: int) -> Walk | None:
        """A length-bounded string at a character boundary -- any string of ``lo``..``hi``
        characters, or of one single-byte class (``^[0-9a-f]{24}$``) -- from a counted walk."""
        if getattr(dfa, "chunk_chars", None) is not None:
            return self._chunk_walk(dfa, sub, None, 0)
        bounds = getattr(dfa, "length_bounds", None)
        if bounds is not None:
            cs = counted_strings(self.trie)
            if cs is None:
                return None
        else:
            # a few positions are cheaper to walk than to classify
            found = class_counted(dfa) if dfa.n_states >= COUNTED_CLASS_MIN_STATES else None
            if found is None:
                return None
            base, lo, hi = found
            cs = counted_strings(self.trie, base)
            bounds = (lo, hi)
        counts = boundary_counts(dfa, cs.base, cs.b_state, cs.closed_state)
        if counts is None or counts[sub] < 0:
            return None
        i = int(counts[sub])
        key = (dfa.uid, self.trie.uid, ("counted", bounds[0] - i, bounds[1] - i))
        hit = inside_cache.get(key)
        if hit is None:
            m, ev_nodes = cs.inside(bounds[0] - i, bounds[1] - i)
            # every event is this terminal's lexeme end: the signature says so, states are not needed
            hit = _dfa_walk_result(dfa, ev_nodes, np.full(len(ev_nodes), -1, dtype=np.int32), mask=m)
            inside_cache.put(key, hit)
        return hit

    def _counted_chunk(self, core, ls: int) -> Walk | None:
        """A long string's chunk and tail both alive (see ``json_schema`` ``chunked_string``):
        every character position would be its own product walk, but the pair is masked from the
        counted walk like a single bounded string."""
        if ls >= core._n_prod or len(core.dfas) != 2:
            return None
        a, b = core.dfas
        if getattr(a, "chunk_chars", None) is None:
            a, b = b, a
        if getattr(a, "chunk_chars", None) is None or getattr(b, "length_bounds", None) is None:
            return None
        sub = core.substates(ls)
        if a is not core.dfas[0]:
            sub = sub[::-1]
        if sub[0] < 0 or sub[1] < 0:
            return None
        return self._chunk_walk(a, sub[0], b, sub[1])

    def _chunk_walk(self, chunk, sub: int, tail, tail_sub: int) -> Walk | None:
        """Masks of a chunk of exactly ``chunk.chunk_chars`` characters (state ``sub``), with a
        length-bounded ``tail`` (state ``tail_sub``) alive beside it or not (``tail`` None)."""
        cs = counted_strings(self.trie)
        if cs is None:
            return None
        counts = boundary_counts(chunk, cs.base, cs.b_state, cs.closed_state)
        if counts is None or counts[sub] < 0:
            return None
        i = int(counts[sub])
        lo = hi = None
        if tail is not None:
            t_counts = boundary_counts(tail, cs.base, cs.b_state, cs.closed_state)
            if t_counts is None or t_counts[tail_sub] != i:
                return None
            lo, hi = tail.length_bounds[0] - i, tail.length_bounds[1] - i
        r = chunk.chunk_chars - i
        key = (chunk.uid, tail.uid if tail is not None else 0, self.trie.uid, ("chunk", r, lo, hi))
        hit = inside_cache.get(key)
        if hit is None:
            m, closed_ev, open_ev = cs.chunk(r, lo, hi)
            groups = _one_group(signature((id(chunk),)), open_ev)
            if tail is not None:
                groups += _one_group(signature((id(tail),)), closed_ev)
            ev_nodes = np.concatenate([open_ev, closed_ev]) if tail is not None else open_ev
            # groups carry their accepting automaton as a signature; states are not needed
            hit = make_walk(ev_nodes, np.full(len(ev_nodes), -1, dtype=np.int32), groups, mask=m)
            inside_cache.put(key, hit)
        return hit

    # -- anchored walks: a shared automaton with carve-outs ----------------------------------------
    def _anchored_product(self, lx, ls: int):
        """A product state one of whose terminals has a shadow (see :meth:`_anchored`)."""
        core = lx.core
        best = None
        for j, s in core.live_entries(ls):  # a product state (inside() took the blocks)
            d = core.dfas[j]
            if getattr(d, "shadow", None) is not None and j in core.block_start:
                if best is None or d.n_states > best[0].n_states:
                    best = (d, s, core.block_start[j])
        if best is None:
            return None
        d, s, lo = best
        return self._anchored(core, lx.trans, lx.classmap, lx.boundary, ls, d, lo, s)

    def _anchored(self, owner, trans, classmap, boundary, x: int, d, lo: int, q: int):
        """Walk from state ``x`` of a table where DFA ``d`` (rows ``lo``.. of the table) is alive in
        state ``q``, and ``d.shadow = (a, base, pure, pure_of)`` says which of ``d``'s states behave
        exactly as state ``base`` of the shared DFA ``a`` (``pure``).

        Every root child whose next state is a pure state of ``d`` is taken from ``a``'s cached walk
        from ``base[q]`` (its tokens and lexeme ends, renumbered); the other root children -- where
        a carve-out or another terminal is still alive -- are walked directly."""
        a, base, pure, pure_of = d.shadow  # -> (mask, event nodes, event states) or None
        ref = self.dfa_walk(a, int(base[q]))
        m = np.empty(self.n_words, dtype=np.uint32)
        b = self._bufs()
        n = self.trie.anchored_walk(trans, classmap, boundary, _plain_loop(owner, trans, classmap), int(x), int(lo),
                                    int(d.n_states), pure, pure_of, ref[MASK], ref[EV_NODES], ref[EV_STATES], m,
                                    b.ev_nodes, b.ev_states)
        if n < 0:
            return None
        return m, b.ev_nodes[:n].copy(), b.ev_states[:n].copy()

    # -- where a widened key lexer's literals end (see Lexer) ----------------------------------------
    def end_hits(self, lx, ls: int = 0, gid: int = 0, nodes: np.ndarray | None = None) -> tuple:
        """The tokens ending in one of ``lx``'s end-checked states, as ``(states, tokens)`` arrays:
        from state ``ls`` (an inside walk) or, with ``nodes``, from the boundary nodes of group
        ``gid`` (a continuation into ``lx``).  Cached on the lexer."""
        key = ("cont", gid) if nodes is not None else ("inside", ls)
        hit = lx.hits.get(key)
        if hit is None:
            if nodes is None:
                roots, states = np.zeros(1, dtype=np.int32), np.array([ls], dtype=np.int32)
            else:
                roots, states = nodes, nodes  # (states unread: each node's own byte is read from state 0)
            hit = lx.hits[key] = self.trie.end_hits(lx.trans, lx.classmap, lx.core._n_prod, lx.end_target, roots,
                                                    states, nodes is not None, *self._bufs().hits)
        return hit

    # -- continuation walks -------------------------------------------------------------------------
    def cont(self, gid: int, nodes: np.ndarray, lx2) -> Walk:
        """Tokens crossing into the next lexeme at ``nodes`` (group ``gid``) lexed by ``lx2``."""
        core = lx2.core
        key = (gid, core.uid)
        hit = cont_cache.get(key)
        if hit is None:
            b = self._bufs()
            n, nw = self.trie.walk_from_boundaries(lx2.trans, lx2.classmap, lx2.boundary, nodes, b.scratch,
                                                   b.words, b.vals, b.ev_nodes, b.ev_states,
                                                   _plain_loop(core, lx2.trans, lx2.classmap))
            # events in this core's own numbering: labelled by its accept sets (no signatures)
            ev_nodes, ev_states = b.ev_nodes[:n].copy(), b.ev_states[:n].copy()
            hit = make_walk(ev_nodes, ev_states, _groups_by_state(ev_nodes, ev_states, core.acc_id), own=True,
                            words=b.words[:nw].copy(), vals=b.vals[:nw].copy())
            cont_cache.put(key, hit)
        return hit


def warm_up_walk_kernels() -> None:
    """Load (or compile, once per installation) this module's kernel ahead of the first mask."""
    split_by_state_label(np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int32))


def clear_caches() -> None:
    """Forget every cached walk (benchmarks measuring cold starts)."""
    inside_cache.clear()
    cont_cache.clear()
