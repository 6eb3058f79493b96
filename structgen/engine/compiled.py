"""A grammar compiled against one tokenizer: parser, lexers and token masks.

Masks are computed in two parts (XGrammar's adaptive cache, llguidance's
lexer-first walk): the tokens that stay inside the current lexeme depend only
on the lexer state and are cached per lexer state; tokens that cross a lexeme
boundary are continued from the recorded boundary nodes with the parser's next
lexer, usually a few small subtrees.  Full masks are cached per
(configuration, lexer state), so recurring states cost a dictionary hit; where a
lexer state keeps meeting configurations that differ only deep in their stacks,
the mask is computed once from the stack cut as deep as its tokens pop and
shared (:meth:`CompiledGrammar._cut_mask`, :meth:`Parser.cut`).
"""
from __future__ import annotations

import threading
from array import array

import numpy as np

from ..automata.fsa import after_ignored
from ..grammar.ir import GrammarIR
from ..uids import new_uid
from ..byte_lru import ByteLRU
from .lexer import Lexer, LexerCache
from .parser import BelowCut, IndentIds, Parser
from .rules import build_rule_automata, compute_costs
from .trie import TokenTrie, clear_tokens_where, or_words
from .checks import CheckRun, GrammarChecks
from .walks import EV_NODES, GROUPS, MASK, OWN, VALS, WORDS, TrieWalker

#: Bytes of token masks kept for reuse, over every grammar of the process (32 MB: 2,000 masks over
#: DeepSeek-V4's 129k tokens, 5,000 over a 50k vocabulary).
MASK_CACHE_BYTES = 32 << 20
MASKS = ByteLRU(MASK_CACHE_BYTES, name="masks")
_NOTHING: frozenset[int] = frozenset()
_UNSEEN = array("i", [-1])
#: How deep (in stack positions) a first mask's configuration is cut at first, and the deepest cut
#: before the whole configuration is used (see CompiledGrammar._cut_mask)
CUT_DEPTH = 2
MAX_CUT_DEPTH = 32
#: A lexer state tries cut configurations after this many first masks, for at least CUT_TRIAL of
#: them, and keeps trying while one in CUT_MIN_SHARE is shared (see CompiledGrammar._cut_mask)
CUT_AFTER = 16
CUT_TRIAL = 32
CUT_MIN_SHARE = 4
#: How deep (in stack positions) the configurations past a token's first lexeme are cut in a
#: Lark grammar's first mask (see CompiledGrammar.follow_boundaries); 0: never
FOLLOW_CUT_DEPTH = 3
#: Items a Lark grammar's configuration may carry (the parser's graph-structured stack packs nested
#: readings, so python.lark stays near 50 at any bracket depth); a lexeme that would need more is
#: refused, by the mask and by accept_token alike
LARK_MAX_STACKS = 4096


def cached_mask_count(serial: int) -> int:
    """How many masks of the grammar numbered ``serial`` (keys ``serial << 128 | state``) MASKS holds."""
    return sum(1 for k in MASKS.data if k >> 128 == serial)


def forget_masks(serial: int) -> None:
    """Drop the masks of the grammar numbered ``serial`` from MASKS."""
    MASKS.discard_where(lambda k: k >> 128 == serial)


def _lexed_dfas(ir: GrammarIR, names: list[str], dfas: list) -> list:
    """The automata the lexers run.  Where ignored lexemes may follow each other (Lark), each
    terminal is lexed with any run of ignored lexemes before it: the parser never sees those, so
    "blanks, then X" is one lexeme of X, and a lexeme that only *might* become an ignored one
    (``lark.lark``'s ``COMMENT: /\\s*/ "//" ...`` after a blank) no longer hides the split where a
    blank ends and ``/regex/`` begins -- the longest-match lexing lark's own lexers do."""
    if not ir.ignore_repeats:
        return dfas
    ignored = [d for n, d in zip(names, dfas) if ir.terminals[n].ignore and ir.terminals[n].lexable]
    if not ignored:
        return dfas
    return [after_ignored(ignored, d) if ir.terminals[n].lexable else d for n, d in zip(names, dfas)]


def _indent_ids(ir: GrammarIR, term_index: dict[str, int]) -> IndentIds | None:
    """The IR's indenter in terminal ids (None without one)."""
    cfg = ir.indenter
    if cfg is None:
        return None
    columns = {term_index[n]: t.column for n, t in ir.terminals.items() if t.lexeme_of == cfg.newline}
    return IndentIds(term_index[cfg.newline], columns, {c: t for t, c in columns.items()},
                     frozenset(term_index[n] for n in cfg.open_paren if n in term_index),
                     frozenset(term_index[n] for n in cfg.close_paren if n in term_index),
                     term_index[cfg.indent], term_index[cfg.dedent], cfg.max_column)


class CompiledGrammar:
    """Immutable grammar tables plus thread-safe lazily filled caches."""

    def __init__(self, ir: GrammarIR, tokenizer, trie: TokenTrie, *, kind: str = "grammar", validator=None):
        # the IR itself is not kept: a cached grammar holds its tables, not the expression trees
        # (and schema) it came from, which only lengthened the garbage collector's full passes
        self.source = ir.source
        self.kind = kind
        self.tokenizer = tokenizer
        self.trie = trie
        self.validator = validator  # final-output check for lenient compiles
        #: what a source grounded (JSON Schema with source=): {"grounded": [pointers], "fell_back": [(pointer, why)]}
        self.grounding = getattr(ir, "grounding", None)
        names = list(ir.terminals)
        self.term_names = tuple(names)  # strings only: untracked by the GC
        term_index = {n: i for i, n in enumerate(names)}
        self.term_dfas = [ir.terminals[n].dfa for n in names]
        ignore = frozenset(term_index[n] for n in names if ir.terminals[n].ignore)
        autos, rule_index = build_rule_automata(ir, term_index)
        self.rule_names = tuple(rule_index)
        self._autos = autos
        self._costs_ready = False  # shortest completions: only the budget guard needs them
        self._lexeme_lengths: list[int] | None = None
        # symbols lexed as parts (follow conditions, newline columns) and %declare'd ones
        lexed_as: dict[int, tuple[int, ...]] = {}
        symbol_of: dict[int, int] = {}
        for n in names:
            t = ir.terminals[n]
            if t.lexeme_of is not None:
                symbol_of[term_index[n]] = term_index[t.lexeme_of]
                lexed_as.setdefault(term_index[t.lexeme_of], ())
                lexed_as[term_index[t.lexeme_of]] += (term_index[n],)
            elif not t.lexable:
                lexed_as.setdefault(term_index[n], ())
        #: part id -> the condition on the byte after its lexemes (lookaheads at a terminal's end)
        self.follow = {term_index[n]: ir.terminals[n].follow for n in names if ir.terminals[n].follow is not None}
        self.parser = Parser(autos, rule_index[ir.start], ignore, ignore_repeats=ir.ignore_repeats,
                             lexed_as=lexed_as, symbol_of=symbol_of, indenter=_indent_ids(ir, term_index),
                             **({"max_stacks": LARK_MAX_STACKS, "refuse_ambiguous": True} if kind == "lark" else {}))
        # constraints the automata over-approximate, tested as values complete (structgen.engine.checks)
        self.checks = GrammarChecks(ir.checks, autos, rule_index)
        self.lexers = LexerCache(_lexed_dfas(ir, names, self.term_dfas), self.follow)
        # an any-order object's "any other key" terminal -> its key literals: lexers holding it hold
        # them all (see Lexer), so the sets of keys left share one lexer and its walks
        self.key_families = {term_index[d]: frozenset(term_index[k] for k in keys)
                             for d, keys in ir.key_families.items()}
        # JSON string terminals whose length bounds their automata do not hold: counted by the mask
        # (structgen.engine.char_bounds)
        self.char_bounds = {term_index[n]: t.char_bounds for n, t in ir.terminals.items() if t.char_bounds is not None}
        # JSON string terminals whose patterns their automata hold relaxed: followed by lazy DFAs in the
        # mask (structgen.engine.lazy_patterns)
        self.lazy_patterns = {term_index[n]: t.lazy_patterns for n, t in ir.terminals.items() if t.lazy_patterns}
        # configuration -> lexer id, allowed terminals -> lexer id (ints: the dicts stay untracked
        # by the garbage collector, which a cached grammar's thousands of entries would cost)
        self._lexer_of = array("i")  # -1: not looked up yet (4 bytes a configuration, not a dict entry)
        self._lexer_by_allowed: dict[tuple, int] = {}
        self._excluded_of: dict[int, frozenset] = {}
        self._refused_ends: dict[int, np.ndarray | None] = {}  # per configuration: end states it refuses
        self.vocab_size = tokenizer.vocab_size
        self.n_words = (self.vocab_size + 31) // 32
        self.eos_ids = tuple(t for t in tokenizer.eos_ids if t < self.vocab_size)
        self._lock = threading.RLock()
        # masks live in the process-wide MASKS, keyed by this grammar's uid and (cid, lexer id,
        # lexer state) packed in one int (see mask): int keys and arrays, never tracked by the GC
        self._serial = new_uid()
        self._uid = self._serial << 128  # above any (cid, lexer, state) key
        self._walker = TrieWalker(trie)
        # masks computed from a cut configuration (see _cut_mask): the whole configuration's key ->
        # the cut's; per lexer state: how deep its cuts have had to be, its first masks, the cuts it
        # tried and how many of those it found made already
        self._mask_alias: dict[int, int] = {}
        self._cut_depth: dict[int, int] = {}
        self._cold_seen: dict[int, int] = {}
        self._cut_tries: dict[int, int] = {}
        self._cut_shared: dict[int, int] = {}
        # how deep a first mask cuts what follows a token's first boundary (see follow_boundaries):
        # Lark grammars without value checks (a check's trials read the stack they run on)
        self._follow_cut = FOLLOW_CUT_DEPTH if kind == "lark" and not ir.checks else 0

    # -- state helpers ---------------------------------------------------------
    def lexer_for(self, cid: int, first: frozenset | None = None) -> Lexer:
        """The lexer of configuration ``cid`` (``first``: only lexemes starting with one of these
        bytes, what a lookahead at the previous lexeme's end leaves)."""
        if first is not None:
            return self.lexers.get(self.lexer_for(cid).term_ids, first=first)
        lexer_of = self._lexer_of
        i = lexer_of[cid] if cid < len(lexer_of) else -1
        if i < 0:
            allowed = self.parser.allowed[cid]
            i = self._lexer_by_allowed.get(allowed)
            if i is None:
                fams = self.key_families
                others = fams.keys() & allowed  # the "any other key" terminals allowed
                widened = frozenset().union(*(fams[t] for t in others)) if others else _NOTHING
                i = self._lexer_by_allowed[allowed] = self.lexers.get(
                    tuple(sorted(widened.union(allowed))) if widened else allowed, widened).id
            if cid >= len(lexer_of):
                lexer_of.extend(_UNSEEN * (cid + 1024 - len(lexer_of)))
            lexer_of[cid] = i
        return self.lexers.lexers[i]

    def excluded(self, cid: int, lx: Lexer) -> frozenset:
        """The widened literals of ``lx`` (see :class:`Lexer`) the parser does not allow in ``cid``."""
        ex = self._excluded_of.get(cid)
        if ex is None:
            # the one shared empty set where nothing is excluded: a set per parser configuration
            # would be thousands of objects for the garbage collector to rescan (sets stay tracked)
            ex = self._excluded_of[cid] = lx.widened.difference(self.parser.allowed[cid]) or _NOTHING
        return ex

    def advance(self, cid: int, lx: Lexer, ls: int, data: bytes, run: CheckRun | None = None):
        """Feed bytes from a state; returns the new (cid, lexer, lexer state) or None.

        ``run`` (grammars with checks, see :mod:`structgen.engine.checks`) is told every lexeme
        boundary and byte: it drops the parser stacks whose values fail a check, and None is
        returned when a byte completes a value that fails on every stack."""
        tl, nc, cm = lx.core.flat_trans, lx.n_classes, lx.core.classmap_list
        for b in data:
            ns = tl[ls * nc + cm[b]]
            if ns >= 0 and run is None:  # inside a lexeme: the hot path, inline
                ls = ns
                continue
            st = self.step(cid, lx, ls, b, run)
            if st is None:
                return None
            cid, lx, ls = st
            tl, nc, cm = lx.core.flat_trans, lx.n_classes, lx.core.classmap_list
        return self.finish(cid, lx, ls)

    def step(self, cid: int, lx: Lexer, ls: int, b: int, run: CheckRun | None = None):
        """One byte of :meth:`advance` (without its end-of-token rule, :meth:`finish`): the new
        (cid, lexer, lexer state) or None.  Trials of many tokens after one output step through
        their shared prefixes once (:mod:`structgen.engine.exact_masks`)."""
        ns = lx.core.flat_trans[ls * lx.n_classes + lx.core.classmap_list[b]]
        if ns >= 0:
            ls = ns
        else:
            a = int(lx.boundary[ls])
            if a < 0:
                return None
            terms = lx.acc_set(a) if lx.follow is None else lx.terms_before(a, b)
            if not terms:
                return None  # a lookahead at the lexeme's end refuses this byte
            if run is not None:
                cid = run.before_scan(cid, terms)
                if cid < 0:
                    return None
            cid = self.parser.scan(cid, terms)
            if cid < 0:
                return None
            if run is not None:
                cid = run.after_scan(cid, terms)
                if cid < 0:
                    return None
            lx = self.lexer_for(cid)
            ls = lx.core.flat_trans[lx.core.classmap_list[b]]
            if ls < 0:
                return None
        if run is not None:
            run.byte(b)
            a = int(lx.acc_id[ls])
            if a >= 0 and lx.core.is_dead_end(ls) and not run.lexeme_complete(cid, lx.acc_set(a)):
                return None  # the lexeme cannot grow, and every reading completes a failing value
        return cid, lx, ls

    def finish(self, cid: int, lx: Lexer, ls: int):
        """The state a token leaves, or None where it ends on a complete key the object already
        has (or may not have): nothing can follow it."""
        if lx.widened:
            a = int(lx.acc_id[ls])
            if a >= 0 and self.excluded(cid, lx).issuperset(lx.acc_set(a)) and lx.core.is_dead_end(ls):
                return None
        return cid, lx, ls

    def can_end(self, cid: int, lx: Lexer, ls: int) -> bool:
        if ls == 0:
            return bool(self.parser.can_end[cid])
        a = int(lx.acc_id[ls])
        if a < 0:
            return False
        terms = lx.acc_set(a) if lx.follow is None else lx.terms_before(a, None)
        if not terms:
            return False
        c2 = self.parser.scan(cid, terms)
        return c2 >= 0 and bool(self.parser.can_end[c2])

    def _min_lexeme(self, i: int, d) -> int:
        """Fewest bytes of terminal ``i``'s lexeme: its automaton's, or its lazily followed patterns'
        (quotes included) where the automaton holds them relaxed."""
        lazy = self.lazy_patterns.get(i, ())
        return max([d.min_length()] + [int(ld.dist[ld.start]) + 2 for ld in lazy])

    def min_completion(self, cid: int, lx: Lexer, ls: int) -> float:
        """Fewest bytes that finish the output from this state (budget guard)."""
        if not self._costs_ready:
            with self._lock:
                if not self._costs_ready:
                    compute_costs(self._autos, [0 if self.parser.lexed_as.get(i) == () else self._min_lexeme(i, d)
                                                for i, d in enumerate(self.term_dfas)])
                    self._costs_ready = True
        parser = self.parser
        cost = parser.cost
        if parser.indenter is not None:  # the indentation stack decides what a newline costs
            lengths = self._lexeme_lengths
            if lengths is None:
                lengths = self._lexeme_lengths = [d.min_length() for d in self.lexers.term_dfas]
            cost = lambda c: parser.searched_cost(c, lengths)  # noqa: E731
        if ls == 0:
            return cost(cid)
        best = float("inf")
        for t, d in lx.completions(ls):
            c2 = parser.scan(cid, (t,))
            if c2 >= 0:
                best = min(best, d + cost(c2))
        return best

    # -- masks -------------------------------------------------------------------------
    def mask(self, cid: int, lx: Lexer, ls: int) -> np.ndarray:
        """uint32 words, bit t set when token t is allowed (EOS included when the output can end)."""
        state = (lx.id << 28) | ls  # ls < 2**28 (MAX_LEXER_STATES), lexer ids < 2**20
        key = self._uid | (cid << 48) | state
        m = MASKS.get(key)
        if m is not None:
            return m
        alias = self._mask_alias.get(key)
        if alias is not None:
            m = MASKS.get(alias)
            if m is not None:
                return m
        with self._lock:
            m, key = self._cut_mask(cid, lx, ls, state, key)
        MASKS.put(key, m)
        return m

    def _cut_mask(self, cid: int, lx: Lexer, ls: int, state: int, key: int):
        """A first mask and the key to keep it under.  A mask reads the stack only as deep as its
        tokens pop, so where one lexer state keeps meeting new configurations it is computed from
        the configuration cut that deep (:meth:`Parser.cut`) and shared by every configuration
        that differs only below: the depth this state's tokens have needed so far, doubled when
        one pops below the cut, the whole configuration past ``MAX_CUT_DEPTH``.  A state tries
        cuts only after ``CUT_AFTER`` first masks, and stops when fewer than one in
        ``CUT_MIN_SHARE`` of its cuts is shared (one document per schema; python.lark's varied
        statements), where they would only cost."""
        seen = self._cold_seen[state] = self._cold_seen.get(state, 0) + 1
        tries = self._cut_tries.get(state, 0)
        if seen <= CUT_AFTER or (tries >= CUT_TRIAL and self._cut_shared.get(state, 0) * CUT_MIN_SHARE < tries):
            return self._compute_mask(cid, lx, ls), key
        self._cut_tries[state] = tries + 1
        depth = self._cut_depth.get(state, CUT_DEPTH)
        while depth <= MAX_CUT_DEPTH:
            c = self.parser.cut(cid, depth)
            if c == cid:
                break
            ck = self._uid | (c << 48) | state
            m = MASKS.get(ck)
            if m is not None:
                self._cut_shared[state] = self._cut_shared.get(state, 0) + 1
            else:
                try:
                    m = self._compute_mask(c, lx, ls)
                except BelowCut:
                    depth *= 2
                    self._cut_depth[state] = depth
                    continue
            if len(self._mask_alias) > 200_000:
                self._mask_alias.clear()
            self._mask_alias[key] = ck
            return m, ck
        return self._compute_mask(cid, lx, ls), key

    def _compute_mask(self, cid: int, lx: Lexer, ls: int) -> np.ndarray:
        """The mask from configuration ``cid`` (raises BelowCut where a cut one is not enough)."""
        inside = self._walker.inside(lx, ls)
        m = inside[MASK].copy()
        if lx.widened and ls < lx.core._n_prod:
            self._clear_ends(cid, lx, m, ls)
        if len(inside[EV_NODES]):
            self.follow_boundaries(cid, lx, inside, self._adder(m), self._follow_cut)
        if self.can_end(cid, lx, ls):
            for e in self.eos_ids:
                m[e >> 5] |= np.uint32(1 << (e & 31))
        return m

    def _adder(self, m: np.ndarray):
        """The visitor that adds a continuation walk's tokens to ``m`` (see follow_boundaries)."""
        def add(cid, terms, c2, lx2, gid, nodes, w2, carry):
            if len(w2[WORDS]):
                or_words(m, w2[WORDS], w2[VALS])
                if lx2.widened:
                    self._clear_ends(c2, lx2, m, 0, gid, nodes)
        return add

    def follow_boundaries(self, cid: int, lx: Lexer, walk, visit, cut: int = 0) -> None:
        """Follow a walk across every lexeme boundary its tokens cross, at any depth: for each
        group of boundary nodes and each reading of the lexeme ending there, ``visit(cid, terms,
        c2, lx2, gid, nodes, w2, carry)`` gets the configuration and terminals scanned, the
        configuration and lexer after them and the continuation walk ``w2``; what it returns is
        the ``carry`` of the groups deeper in the same tokens (None at the first boundary).

        With ``cut`` > 0, what lies past a token's first boundary is followed from the configuration
        cut that many positions deep (:meth:`Parser.cut`): tokens that cross several lexemes
        (DeepSeek's ``"-----"``, ``"(((("``, ``"):\n"``) read only the top of the stack, and every
        configuration with the same top then shares those scans instead of making its own
        (python.lark: 80% of the configurations a first mask made were three or more lexemes deep).
        A scan that pops below the cut is redone from the whole configuration, made then
        (``whole``: how to get it, the parent's entry and the terminals scanned)."""
        parser = self.parser
        scan, lexer_for, cont = parser.scan, self.lexer_for, self._walker.cont
        todo = [(cid, lx, walk, None, None)]
        while todo:
            cid, lx, walk, carry, whole = todo.pop()
            core, acc_set = lx.core, lx.acc_set
            own = walk[OWN]  # a continuation walk of this very core: labels are accept sets
            for label, gid, nodes in walk[GROUPS]:
                # else a signature: kind k >= 1 of this core is accept set k - 1 (see Lexer)
                a = label if own else core.kind_of_signature(label) - 1
                if a < 0:
                    continue
                readings = ((acc_set(a), None),) if lx.follow is None else lx.follow_classes(a)
                for terms, first in readings:
                    try:
                        c2 = scan(cid, terms)
                    except BelowCut:
                        if whole is None:
                            raise  # the caller's own configuration is a cut (see _cut_mask)
                        cid, whole = self._whole(whole), None
                        if cid < 0:
                            break
                        c2 = scan(cid, terms)
                    if c2 < 0:
                        continue
                    lx2 = lexer_for(c2, first)
                    w2 = cont(gid, nodes, lx2)
                    deeper = visit(cid, terms, c2, lx2, gid, nodes, w2, carry)
                    if len(w2[EV_NODES]):
                        below = None if whole is None else (cid, whole, terms)
                        if cut:
                            c2c = parser.cut(c2, cut)
                            if c2c != c2:
                                c2, below = c2c, (cid, whole, terms)
                        todo.append((c2, lx2, w2, deeper, below))
                if cid < 0:
                    break

    def _whole(self, whole: tuple) -> int:
        """The whole configuration a cut one stands for in :meth:`follow_boundaries`: the parent's
        (itself made the same way where it was a cut) scanned by the same terminals."""
        parent, above, terms = whole
        if above is not None:
            parent = self._whole(above)
            if parent < 0:
                return -1
        return self.parser.scan(parent, terms)

    def _clear_ends(self, cid: int, lx: Lexer, m: np.ndarray, ls: int, gid: int = 0, nodes=None) -> None:
        """Drop the tokens that complete a widened literal the parser does not allow (see
        :class:`Lexer`) from a walk from state ``ls`` or from group ``gid``'s boundary nodes."""
        refused = self._refused_ends.get(cid, False)
        if refused is False:
            bad, refused = self.excluded(cid, lx), None
            if bad:
                refused = np.zeros(lx.core.n_states, dtype=np.uint8)
                for s, terms in lx.end_terms.items():
                    refused[s] = bad.issuperset(terms)
            self._refused_ends[cid] = refused
        if refused is not None:
            states, toks = self._walker.end_hits(lx, ls, gid, nodes)
            clear_tokens_where(m, states, toks, refused)

    # -- introspection --------------------------------------------------------------
    def nbytes(self) -> int:
        """Bytes of the grammar's automata and of the lexer cores it has built so far (cores and
        automata other grammars share are counted in each).  An automaton counts its tables only:
        what it builds as it is used is counted by the automata caches that share it, and weighing
        every attribute of hundreds of terminals cost ~0.4 ms of each compile."""
        return sum(d.table_nbytes for d in self.term_dfas) + sum(lx.core.nbytes() for lx in self.lexers.lexers)

    def cached_masks(self) -> int:
        """How many of this grammar's masks the process-wide cache holds."""
        return cached_mask_count(self._serial)

    def clear_masks(self) -> None:
        """Forget this grammar's cached masks (tests and cold-start measurements)."""
        forget_masks(self._serial)

    def stats(self) -> dict:
        return {
            "terminals": len(self.term_dfas),
            "rules": len(self.rule_names),
            "configs": self.parser.n_configs,
            "lexers": len(self.lexers.lexers),
            "cached_masks": self.cached_masks(),
        }
