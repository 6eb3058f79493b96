"""Reasoning chains under the graph (DoG): facts are triples adjacent to the entities reached."""
from __future__ import annotations

import numpy as np
import pytest

from structgen.kg import KnowledgeGraphError
from structgen.kg.generate import chain_matcher, parse_chain
from structgen.kg.soundness import check_chain, random_output


@pytest.fixture(scope="module")
def france(smol_info, countries):
    return chain_matcher(smol_info, countries, ["c:France"], max_hops=3)


@pytest.mark.parametrize("text,ok", [
    ("France has a capital. [France; capital; Paris] so\nAnswer: Paris", True),
    ("[France; neighbour; Germany] and [Germany; capital; Berlin]\nAnswer: Berlin", True),
    ("[Spain; neighbour; France]\nAnswer: Spain", True),  # a triple into the reached set
    ("[France; neighbour; Japan]\nAnswer: Japan", False),  # not a triple
    ("[Germany; capital; Berlin]\nAnswer: Berlin", False),  # does not touch the chain yet
    ("[France; capital; Paris]\nAnswer: Berlin", False),  # the answer was not reached
    ("[France; rdfs:label; France]\nAnswer: France", False),  # names are not facts
])
def test_chains(france, text, ok):
    france.reset()
    assert (france.accept_string(text) and france.is_accepting()) is ok


def test_parse_chain_maps_labels_to_terms(countries):
    facts, answer, label = parse_chain(countries, "[France; capital; Paris]\nAnswer: Paris")
    assert [t.value.rsplit("/", 1)[1] for t in facts[0]] == ["France", "capital", "Paris"]
    assert label == "Paris" and answer.value.endswith("/Paris")


def test_random_chains_are_true_and_well_formed(smol_info, countries):
    rng = np.random.default_rng(0)
    for i in range(30):
        start = ["c:France"] if i % 2 else ["c:Peru", "c:Japan"]
        m = chain_matcher(smol_info, countries, start, max_hops=3)
        text = smol_info.decode_bytes(random_output(m, rng)).decode("utf-8")
        assert check_chain(countries, start, text) == [], text


def test_a_start_entity_must_be_in_the_graph(smol_info, countries):
    with pytest.raises(KnowledgeGraphError, match="Atlantis"):
        chain_matcher(smol_info, countries, ["c:Atlantis"])
