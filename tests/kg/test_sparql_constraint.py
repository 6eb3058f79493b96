"""SPARQL under the graph: accepted exactly when the triple patterns follow the graph; masks equal
the brute-force check; random constrained queries always parse, run and match the graph."""
from __future__ import annotations

import re

import numpy as np
import pytest

from structgen.kg.generate import SPARQL_GRAMMAR, sparql_matcher
from structgen.kg.soundness import check_query, random_output
from structgen.kg.sparql_tracker import FUNCTIONS


@pytest.fixture(scope="module")
def matcher(smol_info, countries):
    return sparql_matcher(smol_info, countries)


@pytest.fixture(scope="module")
def encode(smol_hf_tokenizer):
    return lambda text: smol_hf_tokenizer.encode(text, add_special_tokens=False)


def _accepts_tokens(m, encode, text: str) -> bool:
    """The text, tokenized as the model's tokenizer spells it, passes token by token."""
    m.reset()
    return all(m.accept_token(t) for t in encode(text)) and m.is_accepting()


@pytest.mark.parametrize("text,ok", [
    ("SELECT ?x WHERE { c:France c:capital ?x . }", True),
    ("SELECT ?x WHERE { c:France c:capital c:Paris . }", True),
    ("SELECT ?x WHERE { c:France c:capital c:Berlin . }", False),
    ("SELECT ?x WHERE { c:France c:flag ?x . }", False),
    ("ASK { c:Atlantis c:capital ?x . }", False),
    ("SELECT ?c WHERE { ?c c:continent c:Europe ; c:population ?p . FILTER(?p > 1000000) } ORDER BY DESC(?p) LIMIT 5", True),
    ("SELECT ?c WHERE { ?c c:continent c:Paris . }", False),  # Paris is no continent
    ("SELECT (COUNT(?n) AS ?k) WHERE { c:France c:neighbour ?n . }", True),
    ("SELECT ?cap WHERE { c:France c:neighbour ?n . ?n c:capital ?cap . OPTIONAL { ?n c:population ?p . } }", True),
    ("SELECT ?x WHERE { ?x c:name ?n . FILTER(CONTAINS(?n, \"a\") && ?x != c:France) }", False),  # no c:name
    ("SELECT ?x WHERE { ?x rdfs:label ?n . FILTER(CONTAINS(?n, \"land\") && ?x != c:France) }", True),
    ("SELECT ?x WHERE { ?x rdfs:label ?n . FILTER(?x != zz:France) }", False),  # undeclared prefix
])
def test_queries(matcher, encode, text, ok):
    assert _accepts_tokens(matcher, encode, text) is ok


def test_every_fact_of_the_graph_can_be_written(matcher, encode, countries):
    """Completeness: each triple, as the tokenizer spells it, passes token by token."""
    ix = countries.index
    for s, p, o in ix.spo.tolist():
        S, P, O = ix.sparql[s], ix.sparql[p], ix.sparql[o]
        assert _accepts_tokens(matcher, encode, f"ASK {{ {S} {P} {O} . }}"), (S, P, O)
    for s, p, o in ix.spo[::7].tolist():  # the variable forms too
        S, P, O = ix.sparql[s], ix.sparql[p], ix.sparql[o]
        assert _accepts_tokens(matcher, encode, f"SELECT ?s WHERE {{ ?s {P} {O} . }}")
        assert _accepts_tokens(matcher, encode, f"SELECT ?o WHERE {{ {S} ?p ?o . }}")


def test_random_queries_parse_run_and_follow_the_graph(matcher, smol_info, countries):
    rng = np.random.default_rng(0)
    for _ in range(60):
        text = smol_info.decode_bytes(random_output(matcher, rng)).decode("utf-8")
        assert check_query(countries, text) == [], text


def test_masks_equal_the_brute_force_check(matcher, smol_info):
    """On states met by random queries, the walked mask is exactly the set of tokens whose bytes
    the tracker takes (and the grammar allows)."""
    rng = np.random.default_rng(1)
    tb = smol_info.token_bytes
    for _ in range(3):
        ids = random_output(matcher, rng, soft_tokens=20)
        matcher.reset()
        for k, t in enumerate(ids):
            if k % 4 == 0:
                words = matcher.walker.mask(matcher.tracker, matcher.state)
                got = set(np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")).tolist())
                want = {i for i in range(smol_info.vocab_size) if tb[i] and i not in smol_info.special_ids
                        and matcher.walker.allows(matcher.tracker, matcher.state, tb[i]) is not None}
                if matcher.tracker.can_end(matcher.state):
                    want |= set(smol_info.eos_ids)
                assert got == want, matcher.tracker.describe(matcher.state)
            assert matcher.accept_token(t)


def test_the_tracker_knows_the_grammars_filter_functions():
    text = SPARQL_GRAMMAR.read_text()
    names = set()
    for line in text.splitlines():
        if line.startswith("FUNCTION"):
            names |= set(re.findall(r'"([A-Z]+)"', line))
    names |= set(re.findall(r'"([A-Z]+)\(', text)) - {"COUNT", "FILTER"}
    assert names == set(FUNCTIONS)


def test_every_umls_fact_can_be_written(smol_info, encode):
    from structgen.kg import load_kg

    kg = load_kg("umls")
    m = sparql_matcher(smol_info, kg)
    ix = kg.index
    for s, p, o in ix.spo.tolist():
        assert _accepts_tokens(m, encode, f"ASK {{ {ix.sparql[s]} {ix.sparql[p]} {ix.sparql[o]} . }}")


def test_the_shortest_completion_is_exact_under_the_graph(matcher, smol_info):
    """The budget guard relies on it: from states met by random queries, walking byte by byte
    towards the shortest completion ends in exactly ``min_completion_bytes()`` bytes."""
    rng = np.random.default_rng(5)
    single = {tb[0]: i for i, tb in enumerate(smol_info.token_bytes) if len(tb) == 1 and i not in smol_info.special_ids}
    for _ in range(6):
        ids = random_output(matcher, rng, soft_tokens=15)
        for cut in rng.choice(len(ids), size=min(4, len(ids)), replace=False).tolist():
            matcher.reset()
            for t in ids[:cut]:
                assert matcher.accept_token(t)
            need, walked = matcher.min_completion_bytes(), 0
            while not matcher.is_accepting():
                options = []
                for b, t in single.items():
                    if matcher.accept_token(t):
                        options.append((matcher.min_completion_bytes(), t))
                        matcher.rollback(1)
                step_need, t = min(options)
                assert step_need == need - 1 - walked, matcher.tracker.describe(matcher.state)
                matcher.accept_token(t)
                walked += 1
            assert walked == need
