"""The graph as the constraint reads it: integer term ids and sorted triple arrays.

Every question the constraint asks while a model writes -- which relations leave this subject,
which objects does (subject, relation) reach, which terms are objects of this relation, which
triples touch these entities -- is a binary search in one of three sorted copies of the triples
(``spo``, ``pos``-ordered by relation then object, ``osp``-ordered by object), so a graph of a
million triples costs three int32 arrays (36 MB) and no per-entity Python objects."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .terms import Term, label_text, sparql_surface

__all__ = ["GraphIndex", "build_index"]


def _ranges(keys: np.ndarray, n: int) -> np.ndarray:
    """Start offsets of each key 0..n-1 in a sorted key column (length n + 1)."""
    return np.searchsorted(keys, np.arange(n + 1), side="left").astype(np.int64)


@dataclass
class GraphIndex:
    """Terms and the triples sorted three ways (see the module docstring)."""

    terms: list[Term]
    spo: np.ndarray  # int32 [N, 3], sorted by (s, p, o)
    pos: np.ndarray  # int32 [N, 3] columns (s, p, o), sorted by (p, o, s)
    osp: np.ndarray  # int32 [N, 3] columns (s, p, o), sorted by (o, s, p)
    sparql: list[str | None]
    labels: list[str]
    label_relations: frozenset[int] = frozenset()
    _s_start: np.ndarray = field(init=False, repr=False)
    _p_start: np.ndarray = field(init=False, repr=False)
    _o_start: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.terms)
        self._s_start = _ranges(self.spo[:, 0], n)
        self._p_start = _ranges(self.pos[:, 1], n)
        self._o_start = _ranges(self.osp[:, 2], n)
        self.by_sparql = {s: i for i, s in enumerate(self.sparql) if s is not None}
        self.by_label = {s: i for i, s in enumerate(self.labels)}
        self._subjects = np.flatnonzero(np.diff(self._s_start) > 0).astype(np.int32)
        self._relations = np.flatnonzero(np.diff(self._p_start) > 0).astype(np.int32)
        self._objects = np.flatnonzero(np.diff(self._o_start) > 0).astype(np.int32)

    # -- sizes ----------------------------------------------------------------------------------
    @property
    def n_triples(self) -> int:
        return int(self.spo.shape[0])

    @property
    def nbytes(self) -> int:
        arrays = (self.spo, self.pos, self.osp, self._s_start, self._p_start, self._o_start)
        return int(sum(a.nbytes for a in arrays))

    # -- the questions the constraint asks --------------------------------------------------------
    def subjects(self) -> np.ndarray:
        """Terms with at least one outgoing triple."""
        return self._subjects

    def relations(self) -> np.ndarray:
        """Every relation of the graph (each has at least one tail)."""
        return self._relations

    def objects(self) -> np.ndarray:
        """Every term that is the object of some triple."""
        return self._objects

    def out_edges(self, s: int) -> np.ndarray:
        """(p, o) rows of the triples leaving ``s``."""
        a, b = self._s_start[s], self._s_start[s + 1]
        return self.spo[a:b, 1:]

    def in_edges(self, o: int) -> np.ndarray:
        """(s, p) rows of the triples reaching ``o``."""
        a, b = self._o_start[o], self._o_start[o + 1]
        return self.osp[a:b, :2]

    def relations_of(self, s: int) -> np.ndarray:
        return np.unique(self.out_edges(s)[:, 0])

    def objects_of(self, s: int, p: int) -> np.ndarray:
        e = self.out_edges(s)
        a, b = np.searchsorted(e[:, 0], [p, p + 1])
        return e[a:b, 1]

    def objects_of_subject(self, s: int) -> np.ndarray:
        return np.unique(self.out_edges(s)[:, 1])

    def tails_of(self, p: int) -> np.ndarray:
        """Objects of relation ``p`` (sorted, distinct)."""
        a, b = self._p_start[p], self._p_start[p + 1]
        return np.unique(self.pos[a:b, 2])

    def heads_of(self, p: int) -> np.ndarray:
        a, b = self._p_start[p], self._p_start[p + 1]
        return np.unique(self.pos[a:b, 0])

    def contains(self, s: int, p: int, o: int) -> bool:
        objs = self.objects_of(s, p)
        i = int(np.searchsorted(objs, o))
        return i < len(objs) and int(objs[i]) == o


def build_index(triples: np.ndarray, terms: list[Term], prefixes: dict[str, str],
                label_predicates: tuple[str, ...]) -> GraphIndex:
    """Sort ``triples`` (int [N, 3] over ``terms``) three ways and give every term its surfaces.

    A term's label is its first ``label_predicates`` literal, else its IRI's local name with ``_``
    as a space; labels shared by several terms get `` (local name)`` (or `` #n``) appended, so each
    label names one term."""
    t = np.unique(np.asarray(triples, dtype=np.int32).reshape(-1, 3), axis=0)  # sorted by (s, p, o)
    pos = t[np.lexsort((t[:, 0], t[:, 2], t[:, 1]))]
    osp = t[np.lexsort((t[:, 1], t[:, 0], t[:, 2]))]
    label_ids = {i for i, term in enumerate(terms) if term.kind == "iri" and term.value in label_predicates}
    labels: list[str | None] = [None] * len(terms)
    for pred in label_predicates:  # first listed predicate wins
        pid = next((i for i in label_ids if terms[i].value == pred), None)
        if pid is None:
            continue
        for s, o in t[t[:, 1] == pid][:, [0, 2]].tolist():
            if labels[s] is None and terms[o].kind == "literal":
                labels[s] = label_text(terms[o].value)
    for i, term in enumerate(terms):
        if not labels[i]:
            labels[i] = label_text(_local_name(term.value) if term.kind == "iri" else term.value) or f"term {i}"
    labels = _unique_labels(labels, terms)
    sparql = [sparql_surface(term, prefixes) for term in terms]
    return GraphIndex(terms, t, pos, osp, sparql, labels, frozenset(label_ids))


def _local_name(iri: str) -> str:
    cut = max(iri.rfind("/"), iri.rfind("#"), iri.rfind(":"))
    return iri[cut + 1:].replace("_", " ") or iri


def _unique_labels(labels: list, terms: list[Term]) -> list[str]:
    seen: dict[str, list[int]] = {}
    for i, lab in enumerate(labels):
        seen.setdefault(lab, []).append(i)
    out = list(labels)
    taken = set(labels)
    for lab, ids in seen.items():
        if len(ids) < 2:
            continue
        ids.sort(key=lambda i: terms[i].kind != "iri")  # an entity keeps the plain label before a literal
        for n, i in enumerate(ids[1:], 2):
            term = terms[i]
            cand = f"{lab} ({label_text(_local_name(term.value))})" if term.kind == "iri" else f"{lab} #{n}"
            k = n
            while cand in taken:
                k += 1
                cand = f"{lab} #{k}"
            taken.add(cand)
            out[i] = cand
    return out
