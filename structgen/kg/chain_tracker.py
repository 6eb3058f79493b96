"""Decoding on Graphs (DoG) on structgen: free-text reasoning whose stated facts are graph triples
forming a chain from the question's entities.

The output format (``chain_grammar``): free text, facts written ``[subject; relation; object]`` with
the terms' labels, and a last line ``Answer: <entity>``.  This tracker holds the set of entities
*reached* so far (the start entities, then every term a fact names) and constrains each fact to
the triples adjacent to it, as ``docs/algorithms.md`` section 4 describes:

* the subject is a reached entity, or an entity with a triple into the reached set;
* the relation leaves the subject (towards a reached entity when the subject is not reached);
* the object is one the subject and relation reach (a reached one when the subject is not reached);

after the fact its subject and object join the reached set.  The answer must be a reached entity.
Free text is not constrained here (the grammar keeps brackets and line breaks out of it)."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ..uids import new_uid
from .index import GraphIndex
from .surfaces import SurfaceCache, SurfaceSet, surface_pairs

__all__ = ["ChainTracker", "chain_grammar", "ANSWER_PREFIX"]

FREE, FACT, ANSWER_LEAD, ANSWER = range(4)
NONE = -2
ANSWER_PREFIX = b"\nAnswer: "


def _table(keep) -> bytes:
    return bytes(1 if b in keep else 0 for b in range(256))


_FREE_TABLE = _table(set(range(256)) - set(b"[\n"))


def chain_grammar(max_hops: int) -> str:
    """The Lark grammar of a chain with 1..``max_hops`` facts (the tracker holds the graph part)."""
    if max_hops < 1:
        raise ValueError(f"max_hops must be >= 1, got {max_hops}")
    return (
        f"start: step~1..{max_hops} TEXT? \"\\nAnswer: \" ITEM\n"
        "step: TEXT? fact\n"
        "fact: \"[\" ITEM \"; \" ITEM \"; \" ITEM \"]\"\n"
        "TEXT: /[^\\[\\]\\n]+/\n"
        "ITEM: /[^\\[\\];\\n ]([^\\[\\];\\n]*[^\\[\\];\\n ])?/\n"
    )


class ChainTracker:
    """Graph checks for a reasoning chain (see the module docstring).

    States are ``(mode, pos, subject, relation, partial, reached, facts)``; ``reached`` is a frozenset
    of term ids (entities, and literal values a fact reached: an answer may be one), ``facts`` counts
    the facts written; in ``ANSWER_LEAD`` mode ``pos`` counts the bytes of ``"\\nAnswer: "`` read."""

    def __init__(self, index: GraphIndex, start: Iterable[int]):
        self.index = index
        self.uid = new_uid()
        reached = frozenset(int(s) for s in start)
        if not reached:
            raise ValueError("a chain needs at least one start entity")
        self.initial = (FREE, 0, NONE, NONE, b"", reached, 0)
        self.slots = SurfaceCache(self._build_slot)
        self._hidden = np.array(sorted(index.label_relations), dtype=np.int32)

    # -- slots ----------------------------------------------------------------------------------------
    def _edges_into(self, reached: frozenset) -> np.ndarray:
        rows = [self.index.in_edges(o) for o in reached]
        e = np.concatenate(rows) if rows else np.zeros((0, 2), dtype=np.int32)
        return e[~np.isin(e[:, 1], self._hidden)]

    def _build_slot(self, key) -> SurfaceSet:
        ix, labels = self.index, self.index.labels
        kind, reached = key[0], key[1]
        if kind == "subject":
            own = [s for s in reached if len(self._out(s))]
            ids = np.union1d(np.array(own, dtype=np.int64), self._edges_into(reached)[:, 0])
        elif kind == "relation":
            s = key[2]
            if s in reached:
                ids = np.unique(self._out(s)[:, 0])
            else:
                e = self._out(s)
                ids = np.unique(e[np.isin(e[:, 1], list(reached))][:, 0])
        elif kind == "object":
            s, p = key[2], key[3]
            ids = ix.objects_of(s, p)
            if s not in reached:
                ids = ids[np.isin(ids, list(reached))]
        else:  # answer
            ids = np.array(sorted(reached), dtype=np.int64)
        return SurfaceSet(surface_pairs(np.asarray(ids, dtype=np.int64), labels))

    def _out(self, s: int) -> np.ndarray:
        e = self.index.out_edges(s)
        return e[~np.isin(e[:, 0], self._hidden)] if len(self._hidden) else e

    def slot(self, state: tuple) -> SurfaceSet:
        mode, pos, subj, rel, _, reached, _ = state
        if mode == ANSWER:
            return self.slots.get(("answer", reached))
        if pos == 0:
            return self.slots.get(("subject", reached))
        if pos == 1:
            return self.slots.get(("relation", reached, subj))
        return self.slots.get(("object", reached, subj, rel))

    # -- the byte step ----------------------------------------------------------------------------------
    def step(self, state: tuple, b: int) -> tuple | None:
        mode, pos, subj, rel, partial, reached, facts = state
        if mode == FREE:
            if b == 0x5B:  # [
                return (FACT, 0, NONE, NONE, b"", reached, facts)
            if b == 0x0A:
                return (ANSWER_LEAD, 1, NONE, NONE, b"", reached, facts)
            return state
        if mode == ANSWER_LEAD:
            if b != ANSWER_PREFIX[pos]:
                return None
            if pos + 1 == len(ANSWER_PREFIX):
                return (ANSWER, 0, NONE, NONE, b"", reached, facts)
            return (ANSWER_LEAD, pos + 1, NONE, NONE, b"", reached, facts)
        if mode == FACT and partial == b"" and pos > 0 and b == 0x20:
            return state  # the space after "; "
        ends = (mode == FACT) and ((b == 0x3B and pos < 2) or (b == 0x5D and pos == 2))
        slot = self.slot(state)
        if ends:
            tid = slot.id_of(partial)
            if tid is None:
                return None
            if pos == 0:
                return (FACT, 1, tid, NONE, b"", reached, facts)
            if pos == 1:
                return (FACT, 2, subj, tid, b"", reached, facts)
            return (FREE, 0, NONE, NONE, b"", reached | {subj, tid}, facts + 1)
        ext = partial + bytes((b,))
        if slot.has_prefix(ext):
            return (mode, pos, subj, rel, ext, reached, facts)
        return None

    def invariant(self, state: tuple) -> bytes | None:
        return _FREE_TABLE if state[0] == FREE else None

    def can_end(self, state: tuple) -> bool:
        return state[0] == ANSWER and self.slot(state).id_of(state[4]) is not None

    def finish_term(self, state: tuple) -> bytes:
        """The fewest bytes that complete the label being written (b"" outside one)."""
        if state[0] not in (FACT, ANSWER):
            return b""
        return self.slot(state).shortest_rest(state[4]) or b""

    def min_extra(self, state: tuple) -> int:
        """A lower bound of the bytes still to write: the term being written, what a fact needs
        after it, and the answer line (a fact first when none was written)."""
        mode, pos = state[0], state[1]
        answer = len(ANSWER_PREFIX) + 1
        if mode == FACT:
            return self.slot(state).min_rest(state[4]) + (6 if pos < 2 else 1) + answer
        if mode == ANSWER_LEAD:  # no fact can follow: the answer is a label reached now
            return len(ANSWER_PREFIX) - pos + self.slots.get(("answer", state[5])).min_rest(b"")
        if mode == ANSWER:
            return self.slot(state).min_rest(state[4])
        first = (FACT, 0, NONE, NONE, b"", state[5], 0)
        another_fact = 1 + self.slot(first).min_rest(b"") + 7 + answer
        if state[6] == 0:  # FREE before the first fact
            return another_fact
        # the answer now (a reached label), or one more fact first
        return min(len(ANSWER_PREFIX) + self.slots.get(("answer", state[5])).min_rest(b""), another_fact)
