"""The graphs: loading, SPARQL, membership, and the surfaces a model writes terms with."""
from __future__ import annotations

import pytest

from structgen.errors import StructgenError
from structgen.kg import KnowledgeGraph, KnowledgeGraphError, load_kg
from structgen.kg.terms import PLAIN_LOCAL


def test_countries_graph_is_a_multi_hop_graph(countries):
    ix = countries.index
    assert ix.n_triples > 4000
    assert len(countries.query("SELECT ?c WHERE { ?c rdf:type c:Country . }")) >= 250
    rows = countries.query("SELECT ?cap WHERE { c:France c:neighbour ?n . ?n c:capital ?cap . }")
    caps = {r["cap"].value.rsplit("/", 1)[1] for r in rows}
    assert {"Berlin", "Madrid", "Rome"} <= caps
    assert countries.query("ASK { c:Japan c:continent c:Asia . }") is True
    assert countries.contains("c:France", "c:neighbour", "c:Germany")
    assert not countries.contains("c:France", "c:neighbour", "c:Japan")
    assert countries.contains("France", "capital", "Paris")  # labels work too


def test_every_term_has_one_label_and_one_sparql_surface(countries):
    ix = countries.index
    assert len(set(ix.labels)) == len(ix.labels)
    surfaces = [s for s in ix.sparql if s is not None]
    assert len(set(surfaces)) == len(surfaces)
    assert all(s is not None for s in ix.sparql)  # the countries graph is writable whole
    for s in surfaces:
        if ":" in s and not s.startswith(("<", '"')):
            assert PLAIN_LOCAL.match(s.split(":", 1)[1]), s


def test_umls_comes_from_pykeen_files():
    kg = load_kg("umls")
    ix = kg.index
    assert ix.n_triples == 6529
    assert len(ix.relations()) == 46
    assert kg.contains("u:alga", "u:isa", "u:entity")


def test_graph_from_text_rdflib_and_errors():
    kg = KnowledgeGraph.from_text("@prefix e: <http://e.org/> . e:a e:knows e:b . e:b e:age 7 .")
    assert kg.prefixes == {"e": "http://e.org/"}
    assert kg.query("SELECT ?x WHERE { e:a e:knows ?x . }")[0]["x"].value == "http://e.org/b"
    assert kg.index.sparql[kg.term_id("e:b")] == "e:b"
    with pytest.raises(KnowledgeGraphError):
        KnowledgeGraph.from_text("this is not turtle")
    with pytest.raises(KnowledgeGraphError, match="unknown graph"):
        load_kg("atlantis")
    with pytest.raises(StructgenError):
        kg.query("SELECT WHERE {")
    rdflib = pytest.importorskip("rdflib")
    g = rdflib.Graph()
    g.bind("e", "http://e.org/")
    g.add((rdflib.URIRef("http://e.org/a"), rdflib.URIRef("http://e.org/p"), rdflib.Literal("x", lang="en")))
    kg2 = KnowledgeGraph.from_rdflib(g)
    assert '"x"@en' in kg2.index.sparql
