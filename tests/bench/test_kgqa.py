"""The KGQA benchmark's question set: seeded, and every gold answer set is what SPARQL on the graph
returns for the question's path."""
from __future__ import annotations

from structgen.bench.kgqa import make_questions


def test_questions_are_seeded_and_their_gold_answers_are_the_graphs(countries):
    qs = make_questions(countries, 40, seed=3)
    assert qs == make_questions(countries, 40, seed=3)
    assert len(qs) == 40 and len({q["question"] for q in qs}) == 40
    assert {q["hops"] for q in qs} == {1, 2}
    ix = countries.index
    for q in qs:
        s = ix.by_sparql[q["start"]]
        words = q["question"]
        rels = [p for p in ix.relations().tolist() if f" {ix.labels[p]} " in f" {words} " or
                f"its {ix.labels[p]}?" in words]
        assert rels, words
        assert q["gold"] and len(q["gold"]) <= 10
        if q["hops"] == 1:
            found = [{ix.terms[o].value for o in ix.objects_of(s, p).tolist()} for p in rels]
            assert set(q["gold"]) in found, words
