"""A regex constraint over a lazy DFA: what ``compile_regex`` gives when the whole DFA is large.

It is read by :class:`~structgen.engine.matcher.Matcher` through the same methods as a
:class:`~structgen.engine.compiled.CompiledGrammar` (``advance``, ``mask``, ``can_end``,
``min_completion``, ``lexer_for`` ...), as a grammar of one configuration and one lexer whose
lexer states are the lazy DFA's states: the whole output is one lexeme of one terminal, so there
is no parser to run.  Masks are cached in the process-wide mask cache like every grammar's.
"""
from __future__ import annotations

import numpy as np

from ..automata.fsa import NFATables
from ..uids import new_uid
from .compiled import MASKS, cached_mask_count, forget_masks
from ..automata.lazy_dfa import LazyDFA
from .trie import TokenTrie

__all__ = ["LazyRegexGrammar"]


class _OneLexer:
    """The grammar's one lexer (the Matcher keeps ``(configuration, lexer, lexer state)``)."""

    __slots__ = ("id",)

    def __init__(self) -> None:
        self.id = 0


class _NoParser:
    """One configuration (0), which always allows the terminal: the lexer state decides."""

    initial = 0
    allowed = (True,)


class LazyRegexGrammar:
    """The whole output matches one regular expression, tracked by a :class:`LazyDFA`."""

    lazy = True
    checks = ()  # no checks at value boundaries
    char_bounds: dict = {}  # nor counted string bounds
    lazy_patterns: dict = {}  # nor lazy string patterns
    parser = _NoParser()

    def __init__(self, tables: NFATables, tokenizer, trie: TokenTrie, *, source: str):
        self.source = source
        self.kind = "regex"
        self.tokenizer = tokenizer
        self.trie = trie
        self.validator = None
        self.dfa = LazyDFA(tables, source=source)
        self._lexer = _OneLexer()
        self.lexers = _Lexers(self._lexer)
        self.vocab_size = tokenizer.vocab_size
        self.n_words = (self.vocab_size + 31) // 32
        self.eos_ids = tuple(t for t in tokenizer.eos_ids if t < self.vocab_size)
        self._serial = new_uid()
        self._uid = self._serial << 128

    # -- the grammar interface the Matcher reads -------------------------------------
    def lexer_for(self, cid: int, first=None) -> _OneLexer:
        return self._lexer

    def advance(self, cid: int, lx: _OneLexer, ls: int, data: bytes, run=None):
        """The state after ``data``, or None when a byte is refused."""
        if ls < 0:
            return None
        s = self.dfa.run(ls, data)
        return None if s < 0 else (cid, lx, s)

    def can_end(self, cid: int, lx: _OneLexer, ls: int) -> bool:
        return ls >= 0 and bool(self.dfa.accept[ls])

    def min_completion(self, cid: int, lx: _OneLexer, ls: int) -> float:
        """Fewest bytes that complete a match from this state (the NFA's shortest path)."""
        return float(self.dfa.dist[ls]) if ls >= 0 else float("inf")

    def mask(self, cid: int, lx: _OneLexer, ls: int) -> np.ndarray:
        """uint32 words, bit t set when token t is allowed (EOS included when the match can end)."""
        key = self._uid | ls
        m = MASKS.get(key)
        if m is not None:
            return m
        if ls < 0:
            m = np.zeros(self.n_words, dtype=np.uint32)
        else:
            m = self.dfa.mask(ls, self.trie, self.n_words)
            if self.dfa.accept[ls]:
                for e in self.eos_ids:
                    m[e >> 5] |= np.uint32(1 << (e & 31))
        MASKS.put(key, m)
        return m

    def token_end_states(self, ls: int, ids: np.ndarray, padded: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The state each token leads to (-1: refused): the budget guard's costs of a whole mask."""
        return self.dfa.end_states(ls, ids, padded, lengths)

    # -- introspection ------------------------------------------------------------------
    def nbytes(self) -> int:
        """Bytes of the lazy DFA's tables (they grow as walks make states)."""
        return self.dfa.nbytes

    def cached_masks(self) -> int:
        return cached_mask_count(self._serial)

    def clear_masks(self) -> None:
        forget_masks(self._serial)

    def stats(self) -> dict:
        return {"terminals": 1, "rules": 0, "configs": 1, "lexers": 1, "lazy_states": self.dfa.n_states,
                "cached_masks": self.cached_masks()}


class _Lexers:
    """``lexers.lexers[id]`` as the Matcher's rollback reads it."""

    __slots__ = ("lexers",)

    def __init__(self, lexer: _OneLexer):
        self.lexers = (lexer,)
