"""The remote path: a real SPARQL endpoint (rdflib-endpoint under uvicorn) on 127.0.0.1, queried by
the constraint with counted index queries; its outputs are the in-memory path's."""
from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from structgen.kg import KnowledgeGraph, KnowledgeGraphError
from structgen.kg.generate import sparql_matcher
from structgen.kg.soundness import random_output


@pytest.fixture(scope="module")
def endpoint(countries):
    rdflib = pytest.importorskip("rdflib")
    uvicorn = pytest.importorskip("uvicorn")
    from rdflib_endpoint import SparqlEndpoint

    g = rdflib.Graph()
    from structgen.kg.datasets import countries_turtle

    g.parse(data=countries_turtle(), format="turtle")
    app = SparqlEndpoint(graph=g)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(100):
        if server.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/"
    server.should_exit = True
    thread.join(5)


@pytest.fixture(scope="module")
def remote(endpoint, countries):
    return KnowledgeGraph.from_endpoint(endpoint, prefixes=countries.prefixes, name="countries@endpoint")


def test_remote_queries(remote):
    rows = remote.query("SELECT ?cap WHERE { c:France c:capital ?cap . }")
    assert rows[0]["cap"].value.endswith("/Paris")
    assert remote.query("ASK { c:Japan c:continent c:Asia . }") is True
    assert remote.contains("c:France", "c:neighbour", "c:Germany")
    with pytest.raises(KnowledgeGraphError):
        remote.query("SELECT WHERE {")
    with pytest.raises(KnowledgeGraphError, match="cannot be read"):
        KnowledgeGraph.from_endpoint("http://127.0.0.1:9/").query("ASK { ?s ?p ?o }")


def test_remote_constraint_matches_the_in_memory_one(remote, countries, smol_info):
    local = sparql_matcher(smol_info, countries)
    far = sparql_matcher(smol_info, remote)
    rng = np.random.default_rng(3)
    before = remote.index.queries
    for _ in range(8):
        ids = random_output(local, rng, soft_tokens=25)
        far.reset()
        local.reset()
        for t in ids:  # the same masks, token by token
            a, b = local.next_token_mask(), far.next_token_mask()
            assert np.array_equal(a, b), far.tracker.describe(far.state)
            assert far.accept_token(t) and local.accept_token(t)
    assert remote.index.queries > before  # the index was asked, query by query
    for text in ["SELECT ?x WHERE { c:France c:capital ?x . }", "SELECT ?x WHERE { c:France c:capital c:Berlin . }"]:
        far.reset()
        local.reset()
        assert far.accept_string(text) == local.accept_string(text)


def test_structgen_serves_a_graph_as_an_endpoint(countries, smol_info):
    from structgen.kg.serve import serve_graph

    with serve_graph(countries) as server:
        remote = KnowledgeGraph.from_endpoint(server.url, prefixes=countries.prefixes)
        assert remote.query("ASK { c:France c:capital c:Paris . }") is True
        assert [r["n"].value.rsplit("/", 1)[1] for r in remote.query(
            "SELECT ?n WHERE { c:Portugal c:neighbour ?n . }")] == ["Spain"]
        m = sparql_matcher(smol_info, remote)
        assert m.accept_string("SELECT ?x WHERE { c:Portugal c:neighbour c:Spain . }") and m.is_accepting()
        m.reset()
        assert not m.accept_string("SELECT ?x WHERE { c:Portugal c:neighbour c:France . }")
        assert server.served == remote.index.queries + 2
        with pytest.raises(KnowledgeGraphError, match="400"):
            remote.query("SELECT WHERE {")
