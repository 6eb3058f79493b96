"""The Matcher's mask is exact where the grammar has checks at value boundaries: a token is
allowed exactly when ``accept_token`` takes it (vLLM ends a request with an error otherwise).

Brute force: at states reached by random walks, every token of the automaton's mask (a superset
of what can be accepted) is tried, and the Matcher's mask must equal the tokens taken."""
from __future__ import annotations

import random

import numpy as np
import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher

SCHEMAS = {  # schema, prefixes that lead to the checks (walks also start from nothing)
    "unique strings": ({"type": "array", "items": {"type": "string", "maxLength": 3}, "uniqueItems": True},
                       ['["ab", "a', '["a", "b", ', '["", ']),
    "unique numbers": ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 6},
                       ["[1, 12, 1", "[3, 4"]),
    "required keys, any order": ({"type": "object", "minProperties": 2,
                                  "properties": {k: {"type": "integer"} for k in "abcdefghij"},
                                  "required": ["a", "b"], "additionalProperties": False},
                                 ['{"c": 1, "a": 2', '{"a": 1, "d": 5']),
    "dependentSchemas": ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                          "dependentSchemas": {"a": {"properties": {"b": {"minimum": 3}}}}},
                         ['{"a": 1, "b": ', '{"b": 1, "a": 2']),
    "contains": ({"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}, "maxItems": 4},
                 ["[1, 2", "[3, 1"]),
}


def _ids(words: np.ndarray, vocab: int) -> set[int]:
    return set(np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab]).tolist())


@pytest.fixture(scope="module")
def compiler(smol_info):
    return GrammarCompiler(smol_info)


def _check_exact(m: Matcher, g) -> tuple[set[int], int]:
    """The Matcher's mask against brute force over the automaton's; (allowed ids, tokens refused)."""
    exact = _ids(m.next_token_mask(), g.vocab_size)
    automaton = _ids(g.mask(*m._state), g.vocab_size)
    taken = set()
    for t in automaton:
        if t in g.eos_ids:
            if m.is_accepting():
                taken.add(t)
        elif m.accept_token(t):
            taken.add(t)
            m.rollback(1)
    assert exact == taken, (m.output_bytes(), sorted(exact ^ taken)[:10])
    return exact, len(automaton - taken)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_mask_equals_the_tokens_accepted(compiler, smol_info, name):
    schema, prefixes = SCHEMAS[name]
    g = compiler.compile_json_schema(schema, property_order="any")
    assert g.checks, "the schema no longer needs checks: the test would prove nothing"
    rng = random.Random(name)
    refused = 0
    for prefix in ["", *prefixes]:
        for _ in range(2):
            m = Matcher(g)
            assert m.accept_string(prefix)
            for _ in range(10):
                exact, n = _check_exact(m, g)
                refused += n
                pool = sorted(exact - set(g.eos_ids))
                if not pool:
                    break
                # prefer tokens that close values, so walks reach the checks often
                closers = [t for t in pool if smol_info.token_bytes[t][-1:] in (b'"', b"]", b"}", b",", b" ")]
                assert m.accept_token(rng.choice(closers if closers and rng.random() < 0.7 else pool))
    assert refused, "no check ever refused a token: the walks never reached one"


def test_a_duplicate_s_closing_quote_is_not_in_the_mask(compiler, smol_info):
    g = compiler.compile_json_schema(SCHEMAS["unique strings"][0])
    m = Matcher(g)
    assert m.accept_string('["ab", "ab')
    quote = smol_info.token_bytes.index(b'"')
    assert quote in _ids(g.mask(*m._state), g.vocab_size)  # the automaton alone allows it
    assert not m.is_token_allowed(quote) and not m.accept_token(quote)
    assert m.accept_string("c") and m.is_token_allowed(quote)
    m.rollback(1)  # the memo follows the state: the duplicate is refused again
    assert not m.is_token_allowed(quote)
