"""A graph constraint with a finite language under the section 0 harness: masked sampling samples
the local target exactly, and ASAp converges to the model's own distribution
restricted to the graph's answers (docs/algorithms.md sections 0 and 4)."""
from __future__ import annotations

import numpy as np
import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.kg.matcher import GraphMatcher
from structgen.kg.sparql_tracker import SparqlTracker
from structgen.runtime.sampling.asap import ASAp
from structgen.runtime.sampling.exact import enumerate_target, total_variation
from structgen.runtime.sampling.lm import ModelLM
from structgen.runtime.sampling.sequence import sample_masked

# "which neighbour of Finland": the object slot of one triple pattern, a finite language
TEMPLATE = 'start: "ASK { c:Finland c:neighbour " PNAME " . }"\nPNAME: /[a-z]+:[A-Za-z_][A-Za-z0-9_]*/\n'
PREFIX = "ASK { c:Finland c:neighbour c:"
MAX_TOKENS = 11  # past the longest spelling (one byte a token, EOS), so no sample meets the budget


@pytest.fixture(scope="module")
def setup(tiny_model, countries):
    grammar = GrammarCompiler(tiny_model.info).compile_lark(TEMPLATE)
    matcher = GraphMatcher(Matcher(grammar), SparqlTracker(countries.index, countries.prefixes))
    assert matcher.accept_string(PREFIX)
    lm = ModelLM(tiny_model, tiny_model.hf_tokenizer.encode(PREFIX, add_special_tokens=False))
    # every tokenization: the samplers below run on the bare matcher, and the output continues a
    # prefix the canonical filter (which starts at the output's start) has not seen
    exact = enumerate_target(lm, matcher, max_tokens=MAX_TOKENS, canonical=False)
    return lm, matcher, exact


def _floor(target: dict, n: int) -> float:
    keys = list(target)
    p = np.array([target[k] for k in keys])
    draws = np.random.default_rng(99).choice(len(keys), size=n, p=p / p.sum())
    return total_variation(target, [keys[i] for i in draws])


def test_the_language_is_the_graphs_answers(setup, tiny_model, countries):
    lm, matcher, exact = setup
    texts = {tiny_model.info.decode_bytes(list(x)).decode() for x in exact.log_p}
    names = {countries.index.sparql[o][2:] for o in countries.index.objects_of(
        countries.index.by_sparql["c:Finland"], countries.index.by_sparql["c:neighbour"])}
    assert {t[: -len(" . }")] for t in texts} == names
    assert all(t.endswith(" . }") for t in texts)


def test_masked_sampling_samples_the_local_target(setup):
    lm, matcher, exact = setup
    rng = np.random.default_rng(0)
    got = [tuple(sample_masked(lm, matcher, rng, max_tokens=MAX_TOKENS).token_ids) for _ in range(2000)]
    q = exact.local_target()
    assert total_variation(q, got) < 3 * _floor(q, 2000)


def test_asap_converges_to_the_global_target(setup):
    """ASAp corrects masking's bias: the distribution of its next sample, read exactly off its
    trie, goes to the model's own distribution restricted to the graph's answers."""
    lm, matcher, exact = setup
    pi, q = exact.global_target(), exact.local_target()
    asap = ASAp(lm, matcher, max_tokens=MAX_TOKENS)
    rng = np.random.default_rng(1)
    for _ in range(400):
        asap.sample(rng)
    assert total_variation(pi, {x: asap.next_sample_probability(x) for x in pi}) <= 0.02
    assert total_variation(pi, q) > 0.05  # ...where masking alone stays off
