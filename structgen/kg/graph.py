"""``KnowledgeGraph``: a graph to run SPARQL on and to constrain decoding by.

The triples live in an embedded pyoxigraph store (loaded from Turtle, N-Triples or an rdflib graph),
or behind a SPARQL 1.1 endpoint given by URL (:class:`RemoteGraph`, on the client and index of
``structgen.kg.endpoint``, which sits below this module) for graphs that do not fit in memory.
The constraint does not query the store while decoding: it reads a
:class:`~structgen.kg.index.GraphIndex` built once per graph and cached on disk (keyed by the graph's
content), or, for an endpoint, asks bounded, counted index queries."""
from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from .._cache import atomic_pickle_dump, cache_root, code_fingerprint, pickle_load_or_none
from .endpoint import EndpointClient, RemoteIndex
from .errors import KnowledgeGraphError
from .index import GraphIndex, build_index
from .terms import Term, XSD_STRING

__all__ = ["KnowledgeGraph", "RemoteGraph", "KnowledgeGraphError", "DEFAULT_LABEL_PREDICATES", "term_of"]

RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SKOS_PREF = "http://www.w3.org/2004/02/skos/core#prefLabel"
SCHEMA_NAME = "http://schema.org/name"
DEFAULT_LABEL_PREDICATES = (RDFS_LABEL, SKOS_PREF, SCHEMA_NAME)
_INDEX_VERSION = 1


def term_of(node: Any) -> Term:
    """A pyoxigraph (or rdflib) node as a :class:`Term`."""
    cls = type(node).__name__
    if cls in ("NamedNode", "URIRef"):
        return Term("iri", str(node.value if hasattr(node, "value") else node))
    if cls == "Literal":
        dt = getattr(node, "datatype", None)
        lang = getattr(node, "language", None)
        dt_iri = None if dt is None else str(getattr(dt, "value", dt))
        if lang:
            dt_iri = None
        elif dt_iri is None:
            dt_iri = XSD_STRING
        return Term("literal", str(node.value if hasattr(node, "value") else node), dt_iri, lang or None)
    if cls in ("BlankNode", "BNode"):
        return Term("iri", "_:" + str(getattr(node, "value", node)))
    raise KnowledgeGraphError(f"unsupported RDF node {node!r}")


class KnowledgeGraph:
    """A knowledge graph: ``query`` (SPARQL), ``contains`` (one triple), and the ``index`` the
    decoding constraint reads.

    ``prefixes`` name the namespaces a model writes terms in (``{"c": "http://.../countries/"}``);
    ``label_predicates``: the predicates whose literal names a term in a reasoning chain (the first
    one a term has wins; else its IRI's local name)."""

    def __init__(self, store: Any = None, *, prefixes: dict[str, str] | None = None, name: str = "graph",
                 label_predicates: tuple[str, ...] = DEFAULT_LABEL_PREDICATES, cache: bool = True):
        import pyoxigraph

        self.store = store if store is not None else pyoxigraph.Store()
        self.prefixes = dict(prefixes or {})
        self.name = name
        self.label_predicates = tuple(label_predicates)
        self._cache = cache
        self._index: GraphIndex | None = None
        self.remote = False

    # -- loading --------------------------------------------------------------------------------
    @classmethod
    def from_text(cls, text: str | bytes, *, format: str = "turtle", **kw: Any) -> "KnowledgeGraph":
        """A graph from Turtle or N-Triples text (``format="turtle" | "ntriples"``)."""
        import pyoxigraph

        fmt = {"turtle": pyoxigraph.RdfFormat.TURTLE, "ttl": pyoxigraph.RdfFormat.TURTLE,
               "ntriples": pyoxigraph.RdfFormat.N_TRIPLES, "nt": pyoxigraph.RdfFormat.N_TRIPLES}.get(format)
        if fmt is None:
            raise KnowledgeGraphError(f"unknown RDF format {format!r}: use 'turtle' or 'ntriples'")
        store = pyoxigraph.Store()
        data = text.encode("utf-8") if isinstance(text, str) else text
        try:
            store.bulk_load(input=data, format=fmt)
        except (SyntaxError, ValueError, OSError) as e:
            raise KnowledgeGraphError(f"cannot parse the {format} graph: {e}") from None
        if "prefixes" not in kw and fmt == pyoxigraph.RdfFormat.TURTLE:
            kw["prefixes"] = _turtle_prefixes(data)
        return cls(store, **kw)

    @classmethod
    def from_file(cls, path: str | Path, **kw: Any) -> "KnowledgeGraph":
        """A graph from a ``.ttl`` / ``.nt`` file."""
        p = Path(path)
        if not p.is_file():
            raise KnowledgeGraphError(f"no graph file at {p}")
        fmt = "ntriples" if p.suffix in (".nt", ".ntriples") else "turtle"
        kw.setdefault("name", p.stem)
        return cls.from_text(p.read_bytes(), format=kw.pop("format", fmt), **kw)

    @classmethod
    def from_rdflib(cls, graph: Any, **kw: Any) -> "KnowledgeGraph":
        """A graph from an ``rdflib.Graph`` (its namespace bindings become the prefixes)."""
        kw.setdefault("prefixes", {p: str(ns) for p, ns in graph.namespaces() if p})
        return cls.from_text(graph.serialize(format="nt"), format="ntriples", **kw)

    @classmethod
    def from_endpoint(cls, url: str, **kw: Any) -> "KnowledgeGraph":
        """A graph behind a SPARQL 1.1 endpoint (:class:`RemoteGraph`): nothing is copied; the
        constraint asks small, counted queries as it meets each slot."""
        return RemoteGraph(url, **kw)

    # -- querying ---------------------------------------------------------------------------------
    def prologue(self) -> str:
        """The PREFIX lines of this graph's namespaces (prepended to every generated query)."""
        return "".join(f"PREFIX {p}: <{ns}>\n" for p, ns in self.prefixes.items())

    def with_prologue(self, sparql: str) -> str:
        """``sparql`` with the graph's PREFIX lines in front, unless it declares its own."""
        return sparql if "PREFIX" in sparql.upper().split("SELECT")[0] else self.prologue() + sparql

    def query(self, sparql: str) -> list[dict[str, Term | None]] | bool:
        """Run a SELECT (its rows, each variable to a :class:`Term` or None when unbound) or an ASK
        (a bool); the graph's prefixes are declared when the query does not declare them."""
        try:
            res = self.store.query(self.with_prologue(sparql))
        except (SyntaxError, ValueError, OSError) as e:
            raise KnowledgeGraphError(f"the graph refused the query: {e}") from None
        if type(res).__name__ == "QueryBoolean":
            return bool(res)
        names = [v.value for v in res.variables]
        return [{n: (None if sol[n] is None else term_of(sol[n])) for n in names} for sol in res]

    def contains(self, subject: Any, relation: Any, obj: Any) -> bool:
        """True when (subject, relation, object) is a triple (terms as :class:`Term`, SPARQL text
        such as ``c:France``, or an IRI string)."""
        ix = self.index
        ids = [self.term_id(x) for x in (subject, relation, obj)]
        return None not in ids and ix.contains(*ids)

    def term_id(self, x: Any) -> int | None:
        """The index id of a term given as :class:`Term`, its SPARQL text, its label, or an IRI."""
        ix = self.index
        if isinstance(x, Term):
            return self._term_ids().get(x)
        if isinstance(x, str):
            if x in ix.by_sparql:
                return ix.by_sparql[x]
            hit = self._term_ids().get(Term("iri", x))
            return hit if hit is not None else ix.by_label.get(x)
        raise KnowledgeGraphError(f"not a term: {x!r}")

    def _term_ids(self) -> dict[Term, int]:
        ids = getattr(self, "_ids", None)
        if ids is None:
            ids = self._ids = {t: i for i, t in enumerate(self.index.terms)}
        return ids

    def triples(self) -> Iterable[tuple[Term, Term, Term]]:
        for q in self.store:
            yield term_of(q.subject), term_of(q.predicate), term_of(q.object)

    def __len__(self) -> int:
        return self.index.n_triples

    # -- the index ----------------------------------------------------------------------------------
    @property
    def index(self) -> GraphIndex:
        if self._index is None:
            self._index = self._load_or_build_index()
        return self._index

    def _content_key(self) -> str:
        import pyoxigraph

        buf = io.BytesIO()
        self.store.dump(output=buf, format=pyoxigraph.RdfFormat.N_QUADS)
        h = hashlib.sha256(buf.getvalue())
        h.update(repr((sorted(self.prefixes.items()), self.label_predicates, _INDEX_VERSION)).encode())
        h.update(code_fingerprint("structgen.kg.index", "structgen.kg.terms").encode())
        return h.hexdigest()[:32]

    def _load_or_build_index(self) -> GraphIndex:
        path = cache_root() / "kg" / f"{self._content_key()}.pkl" if self._cache else None
        if path is not None:
            hit = pickle_load_or_none(path)
            if isinstance(hit, GraphIndex):
                return hit
        ids: dict[Term, int] = {}
        terms: list[Term] = []
        rows: list[int] = []
        for q in self.store:
            for node in (q.subject, q.predicate, q.object):
                t = term_of(node)
                i = ids.get(t)
                if i is None:
                    i = ids[t] = len(terms)
                    terms.append(t)
                rows.append(i)
        triples = np.array(rows, dtype=np.int32).reshape(-1, 3)
        ix = build_index(triples, terms, self.prefixes, self.label_predicates)
        if path is not None:
            atomic_pickle_dump(ix, path)
        self._ids = ids
        return ix


class RemoteGraph(KnowledgeGraph):
    """A :class:`KnowledgeGraph` whose triples stay behind a SPARQL endpoint."""

    def __init__(self, url: str, *, prefixes: dict[str, str] | None = None, name: str | None = None,
                 label_predicates: tuple[str, ...] = (), timeout: float = 30.0):
        self.store = None
        self.prefixes = dict(prefixes or {})
        self.name = name or url
        self.label_predicates = tuple(label_predicates)
        self._cache = False
        self.client = EndpointClient(url, timeout)
        self._index = RemoteIndex(self.client, self.prefixes, self.label_predicates)
        self.remote = True

    def query(self, sparql: str) -> list[dict[str, Term | None]] | bool:
        return self.client.select(self.with_prologue(sparql))

    def term_id(self, x: Any) -> int | None:
        ix = self._index
        if isinstance(x, Term):
            return ix._id(x)
        if isinstance(x, str):
            if x in ix.by_sparql:
                return ix.by_sparql[x]
            if ":" in x and not x.startswith("<"):
                p, local = x.split(":", 1)
                if p in self.prefixes:
                    return ix._id(Term("iri", self.prefixes[p] + local))
            return ix.by_label.get(x)
        raise KnowledgeGraphError(f"not a term: {x!r}")

    def triples(self):
        raise KnowledgeGraphError("a remote graph is not listed whole; query it")

    def __len__(self) -> int:
        return self._index.n_triples


def _turtle_prefixes(data: bytes) -> dict[str, str]:
    """``@prefix`` / ``PREFIX`` declarations of a Turtle text."""
    import re

    out = {}
    for m in re.finditer(rb"(?im)^\s*@?prefix\s+([A-Za-z][\w-]*)?:\s*<([^>]*)>", data):
        if m.group(1):
            out[m.group(1).decode()] = m.group(2).decode()
    return out
