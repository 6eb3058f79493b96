"""The token automaton read off the engine: the same language as the Matcher, and refusals that
say why a constraint has none."""
from __future__ import annotations

import numpy as np
import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import UnsupportedFeature
from structgen.runtime.sampling.token_dfa import token_dfa


@pytest.fixture(scope="module")
def compiler(smol_info):
    return GrammarCompiler(smol_info)


def _walk_agrees(grammar, dfa, rng, walks: int = 40) -> None:
    """Random walks through the Matcher: at every step the automaton allows exactly the mask's
    tokens, and EOS leads to the absorbing state exactly when the matcher accepts."""
    info = grammar.tokenizer
    for _ in range(walks):
        m, s = Matcher(grammar), dfa.start
        for _ in range(30):
            words = np.ascontiguousarray(m.next_token_mask(), dtype=np.uint32)
            bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: grammar.vocab_size]
            mask = {t for t in np.flatnonzero(bits).tolist() if t not in info.special_ids or t in info.eos_ids}
            assert set(dfa.tokens[s].tolist()) == mask
            t = int(rng.choice(dfa.tokens[s]))
            s = dfa.step(s, t)
            assert m.accept_token(t)
            if dfa.absorbing[s]:
                assert t in info.eos_ids
                break


@pytest.mark.parametrize("pattern", [r"Answer: [a-z ]{1,12}\.", r"(yes|no|maybe)", r"\d{3}-\d{4}"])
def test_regex_automaton_is_the_matchers_language(compiler, pattern):
    g = compiler.compile_regex(pattern)
    dfa = token_dfa(g)
    _walk_agrees(g, dfa, np.random.default_rng(0))


def test_closed_schema_automaton(compiler):
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 8},
                                               "sure": {"type": "boolean"}}, "required": ["answer", "sure"]}
    g = compiler.compile_json_schema(schema, strict=True)
    dfa = token_dfa(g)
    assert dfa.n_states > 10
    _walk_agrees(g, dfa, np.random.default_rng(1), walks=20)


@pytest.mark.parametrize("schema", [
    {"$defs": {"n": {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"},
    {"type": "object", "properties": {"a": {"type": "string"}}},  # open: any JSON value may follow
])
def test_recursive_constraints_are_refused_at_once(compiler, schema):
    g = compiler.compile_json_schema(schema)
    with pytest.raises(UnsupportedFeature, match="recursive"):
        token_dfa(g)


def test_value_checks_are_refused(compiler):
    g = compiler.compile_json_schema({"type": "array", "items": {"type": "integer"}, "uniqueItems": True})
    with pytest.raises(UnsupportedFeature, match="whole values"):
        token_dfa(g)


def test_a_state_bound_is_refused_naming_it(compiler):
    g = compiler.compile_regex(r"[a-z]{1,200}")
    with pytest.raises(UnsupportedFeature, match="more than 50 token-level states"):
        token_dfa(g, max_states=50)
