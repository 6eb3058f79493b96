"""A grammar compiled against one tokenizer: parser, lexers and token masks.

Masks are computed in two parts (XGrammar's adaptive cache, llguidance's
lexer-first walk): the tokens that stay inside the current lexeme depend only
on the lexer state and are cached per lexer state; tokens that cross a lexeme
boundary are continued from the recorded boundary nodes with the parser's next
lexer, usually a few small subtrees.  Full masks are cached per
(configuration, lexer state), so recurring states cost a dictionary hit.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ..grammar.ir import GrammarIR
from .counted import boundary_counts, counted_strings
from .lexer import Lexer, LexerCache
from .parser import Parser
from .rules import build_rule_automata, compute_costs
from .trie import TokenTrie, plain_loops

MASK_CACHE_ENTRIES = 4096
INSIDE_CACHE_ENTRIES = 8192
CANON_MIN_STATES = 400
_inside_cache: OrderedDict = OrderedDict()
CONT_CACHE_ENTRIES = 20000
_cont_cache: OrderedDict = OrderedDict()
_inside_lock = threading.Lock()


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
        b = np.where(dfa.accept, 0, -1).astype(np.int32)
        dfa._boundary = b
    return b


class CompiledGrammar:
    """Immutable grammar tables plus thread-safe lazily filled caches."""

    def __init__(self, ir: GrammarIR, tokenizer, trie: TokenTrie, *, kind: str = "grammar", validator=None):
        self.ir = ir
        self.kind = kind
        self.tokenizer = tokenizer
        self.trie = trie
        self.validator = validator  # final-output check for lenient compiles
        names = list(ir.terminals)
        self.term_names = names
        term_index = {n: i for i, n in enumerate(names)}
        self.term_dfas = [ir.terminals[n].dfa for n in names]
        ignore = frozenset(term_index[n] for n in names if ir.terminals[n].ignore)
        autos, rule_index = build_rule_automata(ir, term_index)
        self.rule_names = list(rule_index)
        self._autos = autos
        self._costs_ready = False  # shortest completions: only the budget guard needs them
        self.parser = Parser(autos, rule_index[ir.start], ignore)
        self.lexers = LexerCache(self.term_dfas)
        self.vocab_size = tokenizer.vocab_size
        self.n_words = (self.vocab_size + 31) // 32
        self.eos_ids = tuple(t for t in tokenizer.eos_ids if t < self.vocab_size)
        self._lock = threading.RLock()
        self._masks: OrderedDict[tuple[int, int, int], np.ndarray] = OrderedDict()
        self._ev_nodes = np.empty(trie.n_nodes + 1, dtype=np.int32)
        self._ev_states = np.empty(trie.n_nodes + 1, dtype=np.int32)

    # -- state helpers ---------------------------------------------------------
    def lexer_for(self, cid: int) -> Lexer:
        return self.lexers.get(self.parser.configs[cid].allowed)

    def advance(self, cid: int, lx: Lexer, ls: int, data: bytes):
        """Feed bytes from a state; returns the new (cid, lexer, lexer state) or None."""
        parser = self.parser
        tl = lx.trans_list
        cm = lx.classmap_list
        for b in data:
            ns = tl[ls][cm[b]]
            if ns >= 0:
                ls = ns
                continue
            a = int(lx.boundary[ls])
            if a < 0:
                return None
            cid = parser.scan(cid, lx.acc_sets[a])
            if cid < 0:
                return None
            lx = self.lexer_for(cid)
            tl = lx.trans_list
            cm = lx.classmap_list
            ls = tl[0][cm[b]]
            if ls < 0:
                return None
        return cid, lx, ls

    def can_end(self, cid: int, lx: Lexer, ls: int) -> bool:
        if ls == 0:
            return self.parser.configs[cid].can_end
        a = int(lx.acc_id[ls])
        if a < 0:
            return False
        c2 = self.parser.scan(cid, lx.acc_sets[a])
        return c2 >= 0 and self.parser.configs[c2].can_end

    def min_completion(self, cid: int, lx: Lexer, ls: int) -> float:
        """Fewest bytes that finish the output from this state (budget guard)."""
        if not self._costs_ready:
            with self._lock:
                if not self._costs_ready:
                    compute_costs(self._autos, [d.min_length() for d in self.term_dfas])
                    self._costs_ready = True
        parser = self.parser
        if ls == 0:
            return parser.cost(cid)
        best = float("inf")
        for t, d in lx.completions(ls):
            c2 = parser.scan(cid, frozenset((t,)))
            if c2 >= 0:
                best = min(best, d + parser.cost(c2))
        return best

    # -- masks -------------------------------------------------------------------
    def mask(self, cid: int, lx: Lexer, ls: int) -> np.ndarray:
        """uint32 words, bit t set when token t is allowed (EOS included when the output can end)."""
        key = (cid, lx.id, ls)
        with self._lock:
            m = self._masks.get(key)
            if m is not None:
                self._masks.move_to_end(key)
                return m
            inside, ev_nodes, ev_states, owner, sub = self._inside_walk(lx, ls)
            m = inside.copy()
            if len(ev_nodes):
                self._continue(cid, lx, ev_nodes, ev_states, m, (id(owner), id(self.trie), sub))
            if self.can_end(cid, lx, ls):
                for e in self.eos_ids:
                    m[e >> 5] |= np.uint32(1 << (e & 31))
            self._masks[key] = m
            if len(self._masks) > MASK_CACHE_ENTRIES:
                self._masks.popitem(last=False)
            return m

    def _inside_walk(self, lx: Lexer, ls: int):
        """Tokens that stay inside the current lexeme, plus where lexemes end.

        Depends only on the lexer core and state, so it is shared by every
        grammar (and schema) that uses the same terminals."""
        block = lx.core.block_of(ls)
        if block is not None:
            # inside a single terminal: the walk only depends on that terminal's DFA,
            # so every lexer (of any grammar) that contains it shares the result
            dfa, offset = block
            counted = self._counted_inside(dfa, ls - offset)
            if counted is not None:
                m, ev_nodes, ev_state, owner, sub = counted
                return m, ev_nodes, np.full(len(ev_nodes), ev_state + offset, dtype=np.int32), owner, sub
            owner, sub = dfa, ls - offset
            if dfa.n_states >= CANON_MIN_STATES:
                sub = int(dfa.depth_classes(self.trie.max_depth + 1)[sub])
            trans, classmap, boundary = dfa.trans, dfa.classmap, _dfa_boundary(dfa)
        else:
            owner, sub, offset = lx.core, ls, 0
            trans, classmap, boundary = lx.trans, lx.classmap, lx.boundary
        key = (id(owner), id(self.trie), sub)
        with _inside_lock:
            hit = _inside_cache.get(key)
            if hit is not None and hit[3] is owner:
                _inside_cache.move_to_end(key)
            else:
                hit = None
        if hit is None:
            t = self.trie
            m = np.zeros(self.n_words, dtype=np.uint32)
            n = t.walk(trans, classmap, boundary, np.zeros(1, dtype=np.int32), np.array([sub], dtype=np.int32), m,
                       self._ev_nodes, self._ev_states, _plain_loop(owner, trans, classmap))
            hit = (m, self._ev_nodes[:n].copy(), self._ev_states[:n].copy(), owner)
            with _inside_lock:
                _inside_cache[key] = hit
                if len(_inside_cache) > INSIDE_CACHE_ENTRIES:
                    _inside_cache.popitem(last=False)
        if offset:
            return hit[0], hit[1], hit[2] + offset, owner, sub
        return hit[0], hit[1], hit[2], owner, sub

    def _counted_inside(self, dfa, sub: int):
        """A length-bounded string at a character boundary: its mask from the counted walk."""
        bounds = getattr(dfa, "length_bounds", None)
        if bounds is None:
            return None
        cs = counted_strings(self.trie)
        counts = boundary_counts(dfa, cs.base, cs.b_state, cs.closed_state)
        if counts is None or counts[sub] < 0:
            return None
        acc = np.nonzero(dfa.accept)[0]
        if len(acc) != 1:
            return None
        i = int(counts[sub])
        key = (bounds[0] - i, bounds[1] - i)
        m, ev_nodes = cs.inside(*key)
        return m, ev_nodes, int(acc[0]), cs, key

    def _continue(self, cid: int, lx: Lexer, nodes: np.ndarray, states: np.ndarray, m: np.ndarray,
                  ckey: tuple) -> None:
        """Continue the walk past lexeme boundaries with the parser's next lexer.

        The walk from a set of boundary nodes with a given next lexer does not
        depend on the parser state, so its result (mask words and further
        boundaries) is cached under the chain of lexers that led to it."""
        t = self.trie
        acc = lx.boundary[states]
        kinds, kind_of = lx.core.acc_kinds, lx.core.acc_key
        for a in np.unique(acc):
            grp = acc == a
            sel = nodes[grp]
            c2 = self.parser.scan(cid, lx.acc_sets[int(a)])
            if c2 < 0:
                continue
            lx2 = self.lexer_for(c2)
            key = (ckey, kinds[int(kind_of[int(states[grp][0])])], id(lx2.core))
            with _inside_lock:
                hit = _cont_cache.get(key)
                if hit is not None and hit[4] is lx2.core:
                    _cont_cache.move_to_end(key)
                else:
                    hit = None
            if hit is None:
                st = lx2.trans[0, lx2.classmap[t.node_byte[sel]]]
                ok = st >= 0
                sub = np.zeros(self.n_words, dtype=np.uint32)
                n = 0
                # the shared event buffers are free again: every walk's events are copied out at once
                ev_n, ev_s = self._ev_nodes, self._ev_states
                if ok.any():
                    n = t.walk(lx2.trans, lx2.classmap, lx2.boundary, np.ascontiguousarray(sel[ok]),
                               np.ascontiguousarray(st[ok]).astype(np.int32), sub, ev_n, ev_s,
                               _plain_loop(lx2.core, lx2.trans, lx2.classmap))
                words = np.nonzero(sub)[0].astype(np.int32)
                hit = (words, sub[words], ev_n[:n].copy(), ev_s[:n].copy(), lx2.core)
                with _inside_lock:
                    _cont_cache[key] = hit
                    if len(_cont_cache) > CONT_CACHE_ENTRIES:
                        _cont_cache.popitem(last=False)
            words, vals, ev_n2, ev_s2, _ = hit
            m[words] |= vals
            if len(ev_n2):
                self._continue(c2, lx2, ev_n2, ev_s2, m, key)

    # -- introspection --------------------------------------------------------------
    def stats(self) -> dict:
        return {
            "terminals": len(self.term_dfas),
            "rules": len(self.rule_names),
            "configs": len(self.parser.configs),
            "lexers": len(self.lexers.lexers),
            "cached_masks": len(self._masks),
        }
