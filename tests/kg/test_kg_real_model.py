"""On the real SmolLM2: graph-constrained SPARQL runs and names real answers; chains state true
facts (the capability shown on the embedded model, not only on a random one)."""
from __future__ import annotations

import pytest

from structgen.kg import generate_chain, generate_sparql
from structgen.kg.soundness import check_chain, check_query

pytestmark = pytest.mark.slow


def test_generate_sparql_on_smollm2(smol, countries):
    r = generate_sparql(smol, "What is the capital of Germany?", countries)
    assert check_query(countries, r.body) == []
    assert [a.value.rsplit("/", 1)[1] for a in r.answers] == ["Berlin"]
    assert r.query.startswith(countries.prologue())


def test_generate_chain_on_smollm2(smol, countries):
    r = generate_chain(smol, "What is the capital of France?", countries, ["c:France"], max_hops=2)
    assert check_chain(countries, ["c:France"], r.text) == []
    assert r.facts and r.answer is not None
    beams = generate_chain(smol, "What is the capital of France?", countries, ["c:France"], max_hops=2, beams=3)
    assert beams.beams and all(check_chain(countries, ["c:France"], b.text) == [] for b in beams.beams)
    assert [b.score for b in beams.beams] == sorted((b.score for b in beams.beams), reverse=True)
