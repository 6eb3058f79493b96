"""The SPARQL 1.1 protocol (HTTP) under a knowledge graph that does not fit in memory
(``kg.graph.RemoteGraph``, made by ``KnowledgeGraph.from_endpoint``): the client and the index
questions answered by the endpoint.  This module does not import ``graph.py`` (it sits below it).

Nothing is copied up front: the constraint's questions (which relations leave this subject, which
objects does this pair reach, ...) become small SPARQL queries, sent when a slot is first met and
remembered (bounded); ``RemoteIndex.queries`` counts them.  Term ids are given as terms are met.
A term's label (for reasoning chains) is its IRI's local name, as fetching every label up front
would read the whole graph; a local name shared by two terms keeps the first."""
from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from functools import lru_cache

import numpy as np

from .errors import KnowledgeGraphError
from .index import _local_name
from .terms import Term, XSD_STRING, label_text, sparql_surface

__all__ = ["EndpointClient", "RemoteIndex"]


class EndpointClient:
    """The SPARQL 1.1 protocol: a query POSTed as a form, results read as SPARQL JSON."""

    def __init__(self, url: str, timeout: float = 30.0):
        self.url = url
        self.timeout = timeout
        self.requests = 0

    def run(self, query: str) -> dict:
        data = urllib.parse.urlencode({"query": query}).encode()
        req = urllib.request.Request(self.url, data=data, headers={
            "Accept": "application/sparql-results+json", "Content-Type": "application/x-www-form-urlencoded"})
        self.requests += 1
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            body = e.read().decode("utf-8", "replace")[:300]
            raise KnowledgeGraphError(f"the endpoint {self.url} refused the query ({e.code}): {body}") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise KnowledgeGraphError(f"the endpoint {self.url} cannot be read: {e}") from None

    def select(self, query: str) -> list[dict[str, Term | None]] | bool:
        """Run a SELECT (its rows, each variable to a :class:`Term` or None when unbound) or an ASK (a bool)."""
        res = self.run(query)
        if "boolean" in res:
            return bool(res["boolean"])
        names = res.get("head", {}).get("vars", [])
        return [{n: (_term(row[n]) if n in row else None) for n in names} for row in res["results"]["bindings"]]


def _term(b: dict) -> Term:
    kind = b.get("type")
    if kind == "uri":
        return Term("iri", b["value"])
    if kind in ("literal", "typed-literal"):
        lang = b.get("xml:lang")
        return Term("literal", b["value"], None if lang else b.get("datatype", XSD_STRING), lang)
    return Term("iri", "_:" + b["value"])


def _sparql(t: Term) -> str:
    return f"<{t.value}>" if t.kind == "iri" else str(t)


class RemoteIndex:
    """The :class:`~structgen.kg.index.GraphIndex` questions, answered by the endpoint."""

    def __init__(self, client: EndpointClient, prefixes: dict[str, str], label_predicates: tuple[str, ...]):
        self.client = client
        self.prefixes = prefixes
        self.terms: list[Term] = []
        self.sparql: list[str | None] = []
        self.labels: list[str] = []
        self.by_sparql: dict[str, int] = {}
        self.by_label: dict[str, int] = {}
        self._ids: dict[Term, int] = {}
        self._lock = threading.Lock()
        self.label_relations = frozenset(self._id(Term("iri", p)) for p in label_predicates)
        self.queries = 0
        self._ask = lru_cache(maxsize=65536)(self._ask_uncached)

    # -- terms --------------------------------------------------------------------------------------
    def _id(self, t: Term) -> int:
        with self._lock:
            i = self._ids.get(t)
            if i is None:
                i = self._ids[t] = len(self.terms)
                self.terms.append(t)
                s = sparql_surface(t, self.prefixes)
                self.sparql.append(s)
                if s is not None:
                    self.by_sparql.setdefault(s, i)
                lab = label_text(_local_name(t.value) if t.kind == "iri" else t.value) or f"term {i}"
                self.labels.append(lab)
                self.by_label.setdefault(lab, i)
            return i

    def _ask_uncached(self, query: str) -> tuple[tuple[int, ...], ...]:
        self.queries += 1
        res = self.client.run(query)
        names = res.get("head", {}).get("vars", [])
        return tuple(tuple(self._id(_term(row[n])) for n in names) for row in res.get("results", {}).get("bindings", [])
                     if all(n in row for n in names))

    def _column(self, query: str) -> np.ndarray:
        return np.array(sorted({r[0] for r in self._ask(query)}), dtype=np.int64)

    def _rows(self, query: str) -> np.ndarray:
        rows = sorted(set(self._ask(query)))
        return np.array(rows, dtype=np.int64).reshape(-1, 2)

    # -- the questions ---------------------------------------------------------------------------------
    def subjects(self) -> np.ndarray:
        return self._column("SELECT DISTINCT ?s WHERE { ?s ?p ?o . FILTER(!isBlank(?s)) }")

    def relations(self) -> np.ndarray:
        return self._column("SELECT DISTINCT ?p WHERE { ?s ?p ?o . }")

    def objects(self) -> np.ndarray:
        return self._column("SELECT DISTINCT ?o WHERE { ?s ?p ?o . }")

    def relations_of(self, s: int) -> np.ndarray:
        return self._column(f"SELECT DISTINCT ?p WHERE {{ {_sparql(self.terms[s])} ?p ?o . }}")

    def objects_of(self, s: int, p: int) -> np.ndarray:
        return self._column(f"SELECT ?o WHERE {{ {_sparql(self.terms[s])} {_sparql(self.terms[p])} ?o . }}")

    def objects_of_subject(self, s: int) -> np.ndarray:
        return self._column(f"SELECT DISTINCT ?o WHERE {{ {_sparql(self.terms[s])} ?p ?o . }}")

    def tails_of(self, p: int) -> np.ndarray:
        return self._column(f"SELECT DISTINCT ?o WHERE {{ ?s {_sparql(self.terms[p])} ?o . }}")

    def heads_of(self, p: int) -> np.ndarray:
        return self._column(f"SELECT DISTINCT ?s WHERE {{ ?s {_sparql(self.terms[p])} ?o . }}")

    def out_edges(self, s: int) -> np.ndarray:
        return self._rows(f"SELECT ?p ?o WHERE {{ {_sparql(self.terms[s])} ?p ?o . }}")

    def in_edges(self, o: int) -> np.ndarray:
        return self._rows(f"SELECT ?s ?p WHERE {{ ?s ?p {_sparql(self.terms[o])} . }}")

    def contains(self, s: int, p: int, o: int) -> bool:
        return o in set(self.objects_of(s, p).tolist())

    @property
    def n_triples(self) -> int:
        rows = self._ask("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o . }")
        return int(self.terms[rows[0][0]].value) if rows else 0
