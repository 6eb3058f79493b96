"""SPARKLE's constraint on structgen: a SPARQL query whose triple patterns follow the graph.

The query's syntax is ``grammars/sparql.lark``'s business (the engine's Matcher); this tracker reads
the same bytes and watches the terms of the triple patterns in the WHERE block (and in OPTIONAL
blocks), as ``docs/algorithms.md`` section 4 describes:

* a concrete subject must have an outgoing relation;
* after a concrete subject, only its relations (or a variable); after a variable subject, any
  relation of the graph;
* after a concrete subject and relation, only the objects they reach; after a variable subject and a
  concrete relation, the relation's tails; always a variable too.

A term is checked byte by byte against its slot's sorted surface set (``surfaces.py``), so a token
that would leave every allowed term is masked out, and the term is looked up when a terminator byte
ends it.  Variables, FILTER expressions, the head (SELECT ... WHERE) and the solution modifiers are
free here: the grammar constrains them."""
from __future__ import annotations

from bisect import bisect_left
from typing import Any, Iterable

from ..uids import new_uid
from .index import GraphIndex
from .surfaces import SurfaceCache, SurfaceSet, surface_pairs

__all__ = ["SparqlTracker", "VAR", "NONE"]

VAR, NONE, KW_FILTER, KW_OPTIONAL = -1, -2, -3, -4
HEAD, GROUP, FILTER, FSTR, FESC, OPTW, AFTER, FIRI = range(8)
S, P, O, SEP = range(4)

#: the FILTER functions of grammars/sparql.lark (its FUNCTION terminal; a test keeps them equal)
FUNCTIONS = ("STR", "LCASE", "UCASE", "CONTAINS", "STRSTARTS", "STRENDS", "REGEX", "LANG", "BOUND", "ISIRI",
             "ISLITERAL", "STRLEN", "ABS")
_WS = frozenset(b" \t\r\n")
_TERMINATORS = frozenset(b" \t\r\n.;,})({")
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _table(keep) -> bytes:
    return bytes(1 if b in keep else 0 for b in range(256))


_ALL = _table(range(256))
_NOT_LBRACE = _table(set(range(256)) - {ord("{")})
_FILTER_FREE = _table(set(range(256)) - set(b'()":-') - _WORD)
_STRING_FREE = _table(set(range(256)) - set(b'"\\'))
_WS_TABLE = _table(_WS)
_NOT_GT = _table(set(range(256)) - {ord(">")})
_WORD_TABLE = _table(_WORD)


class SparqlTracker:
    """Byte-level graph checks for the triple patterns of a SPARQL query (see the module docstring).

    States are tuples ``(mode, depth, pos, subject, relation, partial, parens)``; ``partial`` is the
    term being written (``b"?"`` for a variable, whose name is not kept)."""

    def __init__(self, index: GraphIndex, prefixes: Iterable[str] = ()):
        self.index = index
        #: what a word inside FILTER may start: a declared ``prefix:`` (another would not run) or a
        #: function's ``NAME(`` -- a word that can be neither would be a dead end of the grammar
        self.filter_heads = sorted({p.encode() + b":" for p in prefixes} | {f.encode() + b"(" for f in FUNCTIONS})
        self.uid = new_uid()
        self.initial = (HEAD, 0, S, NONE, NONE, None, 0)
        self.slots = SurfaceCache(self._build_slot)

    # -- slots -------------------------------------------------------------------------------------
    def _build_slot(self, key) -> SurfaceSet:
        ix = self.index
        kind = key[0]
        if kind == "S":
            return SurfaceSet(surface_pairs(ix.subjects(), ix.sparql) + [(b"FILTER", KW_FILTER),
                                                                         (b"OPTIONAL", KW_OPTIONAL)])
        if kind == "P":
            s = key[1]
            return SurfaceSet(surface_pairs(ix.relations_of(s) if s >= 0 else ix.relations(), ix.sparql))
        s, p = key[1], key[2]
        if s >= 0 and p >= 0:
            ids = ix.objects_of(s, p)
        elif p >= 0:
            ids = ix.tails_of(p)
        elif s >= 0:
            ids = ix.objects_of_subject(s)
        else:
            ids = ix.objects()
        return SurfaceSet(surface_pairs(ids, ix.sparql))

    def slot(self, pos: int, subj: int, pred: int) -> SurfaceSet:
        if pos == S:
            return self.slots.get(("S",))
        if pos == P:
            return self.slots.get(("P", subj if subj >= 0 else VAR))
        return self.slots.get(("O", subj if subj >= 0 else VAR, pred if pred >= 0 else VAR))

    # -- the byte step -------------------------------------------------------------------------------
    def step(self, state: tuple, b: int) -> tuple | None:
        mode = state[0]
        if mode == GROUP:
            partial = state[5]
            if partial is None:
                return self._between(state, b)
            _, depth, pos, subj, pred, _, _ = state
            if partial == b"?":
                if b in _WORD:
                    return state
                return self._between(self._complete(state, VAR), b)
            ext = partial + bytes((b,))
            slot = self.slot(pos, subj, pred)
            if slot.has_prefix(ext):
                return (GROUP, depth, pos, subj, pred, ext, 0)
            if b not in _TERMINATORS:
                return None
            tid = slot.id_of(partial)
            if tid is None:
                return None
            if tid == KW_FILTER:
                return self.step((FILTER, depth, S, NONE, NONE, None, 0), b)
            if tid == KW_OPTIONAL:
                return self.step((OPTW, depth, S, NONE, NONE, None, 0), b)
            return self._between(self._complete(state, tid), b)
        if mode == HEAD:
            return (GROUP, 1, S, NONE, NONE, None, 0) if b == 0x7B else state
        if mode == AFTER:
            return state
        if mode == FILTER:
            if state[5] == b"<":  # '<' then a space or '=' is a comparison, else an <iri>
                if b not in (0x20, 0x3D):
                    return (FIRI,) + state[1:5] + (None, state[6])
                state = state[:5] + (None, state[6])
            if b in _WORD or b == 0x2D or b == 0x3A:
                return self._filter_word(state, b)
            if b == 0x3F or b == 0x40:  # a variable's name, a language tag: free
                return state[:5] + (b"!", state[6])
            if b == 0x3C:
                return state[:5] + (b"<", state[6])
            partial = state[5]
            if partial is not None:
                if partial not in (b":", b"!", b"<"):  # a word must become a prefix or a function call
                    if b != 0x28 or partial + b"(" not in self.filter_heads:
                        return None
                state = state[:5] + (None, state[6])
            if b == 0x28:
                return state[:6] + (state[6] + 1,)
            if b == 0x29:
                if state[6] <= 1:
                    return (GROUP, state[1], S, NONE, NONE, None, 0)
                return state[:6] + (state[6] - 1,)
            if b == 0x22:
                return (FSTR,) + state[1:]
            return state
        if mode == FSTR:
            if b == 0x22:
                return (FILTER,) + state[1:]
            return (FESC,) + state[1:] if b == 0x5C else state
        if mode == FESC:
            return (FSTR,) + state[1:]
        if mode == FIRI:
            return (FILTER,) + state[1:] if b == 0x3E else state
        # OPTW: OPTIONAL written, its block not open yet
        return (GROUP, state[1] + 1, S, NONE, NONE, None, 0) if b == 0x7B else state

    def _filter_word(self, state: tuple, b: int) -> tuple | None:
        """A word inside FILTER: a number, or the start of a declared ``prefix:`` or a function's
        ``NAME(`` (see ``filter_heads``); after ``prefix:`` the local name is free."""
        partial = state[5]
        if partial == b":" or partial == b"!":  # a local name, or a number
            return None if b == 0x3A else state
        if partial is None and not (0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A):
            return None if b == 0x3A else state[:5] + (b"!", state[6])  # digits, '-': a number
        ext = (partial or b"") + bytes((b,))
        heads = self.filter_heads
        i = bisect_left(heads, ext)
        if i < len(heads) and heads[i].startswith(ext):
            return state[:5] + ((b":" if b == 0x3A else ext), state[6])
        return None

    def _complete(self, state: tuple, tid: int) -> tuple:
        _, depth, pos, subj, pred, _, _ = state
        if pos == S:
            return (GROUP, depth, P, tid, NONE, None, 0)
        if pos == P:
            return (GROUP, depth, O, subj, tid, None, 0)
        return (GROUP, depth, SEP, subj, pred, None, 0)

    def _between(self, state: tuple, b: int) -> tuple | None:
        if b in _WS:
            return state
        _, depth, pos, subj, pred, _, _ = state
        if b == 0x7D and pos in (S, SEP):  # }
            return (AFTER, 0, S, NONE, NONE, None, 0) if depth <= 1 else (GROUP, depth - 1, S, NONE, NONE, None, 0)
        if pos == SEP:
            if b == 0x2E:  # .
                return (GROUP, depth, S, NONE, NONE, None, 0)
            if b == 0x3B:  # ;
                return (GROUP, depth, P, subj, NONE, None, 0)
            if b == 0x2C:  # ,
                return (GROUP, depth, O, subj, pred, None, 0)
            return state  # not SPARQL: the grammar refuses it
        if b == 0x3F:  # ?
            return (GROUP, depth, pos, subj, pred, b"?", 0)
        first = bytes((b,))
        if self.slot(pos, subj, pred).has_prefix(first):
            return (GROUP, depth, pos, subj, pred, first, 0)
        return None

    # -- what the mask walk needs --------------------------------------------------------------------
    def invariant(self, state: tuple) -> bytes | None:
        mode = state[0]
        if mode == GROUP:
            partial = state[5]
            if partial is None:
                return _WS_TABLE
            return _WORD_TABLE if partial == b"?" else None
        if mode == HEAD or mode == OPTW:
            return _NOT_LBRACE
        if mode == AFTER:
            return _ALL
        if mode == FILTER:
            return _FILTER_FREE if state[5] is None else (_WORD_TABLE if state[5] in (b"!", b":") else None)
        if mode == FSTR:
            return _STRING_FREE
        if mode == FIRI:
            return _NOT_GT
        return None

    def can_end(self, state: tuple) -> bool:
        return state[0] == AFTER

    def min_extra(self, state: tuple) -> int:
        """Fewest bytes that finish the term being written (0 outside one)."""
        if state[0] != GROUP or state[5] is None or state[5] == b"?":
            return 0
        return self.slot(state[2], state[3], state[4]).min_rest(state[5])

    def base_gap(self, state: tuple) -> int:
        """Bytes the grammar's shortest completion is short by: inside a triple pattern it ends the
        object with a one-digit number, which the graph may not hold there (a variable, two bytes,
        always fits); the object slot is read as known so far (the subject's objects, or all)."""
        if state[0] != GROUP:
            return 0
        pos, partial = state[2], state[5]
        if pos == SEP or (pos == S and partial is None) or (pos == O and partial is not None):
            return 0
        if pos == S or state[3] < 0 and pos == P:
            slot = self.slot(O, VAR, VAR)
        elif pos == P or partial is not None:
            slot = self.slot(O, state[3], VAR)
        else:
            slot = self.slot(O, state[3], state[4])
        return 1 if slot.min_rest(b"") >= 2 else 0

    def finish_term(self, state: tuple) -> bytes:
        """The fewest bytes that complete the term being written (b"" outside a checked term)."""
        if state[0] != GROUP or state[5] is None or state[5] == b"?":
            return b""
        return self.slot(state[2], state[3], state[4]).shortest_rest(state[5]) or b""

    def describe(self, state: tuple) -> dict[str, Any]:
        """The graph state in words (debugging, errors)."""
        ix = self.index
        name = lambda t: {VAR: "?var", NONE: None}.get(t, ix.sparql[t] if t >= 0 else t)  # noqa: E731
        return {"mode": ("head", "group", "filter", "string", "escape", "optional", "after", "iri")[state[0]],
                "slot": ("subject", "relation", "object", "separator")[state[2]],
                "subject": name(state[3]), "relation": name(state[4]), "partial": state[5]}
