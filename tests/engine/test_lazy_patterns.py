"""JSON Schema patterns too large for an automaton, followed by lazy DFAs in the mask
(``structgen.engine.lazy_patterns``).

The reference is the same schema compiled with the normal automaton limit, where the pattern's DFA is
built and the masks are exact with no check; the lazy side is compiled with the limit lowered, so that
the same pattern takes the lazy path.  Along random walks the two masks must be equal at every step
(string openers, content, escapes and closing quotes included)."""
from __future__ import annotations

import json
import random
import zlib

import jsonschema
import numpy as np
import pytest

import structgen.automata.fsa as fsa
import structgen.grammar.regex as regex
from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.runtime.budget import BudgetGuard
from engine_helpers import masks_agree_along_walks

CASES = {
    "an a 13th from the end, the whole output": {"type": "string", "pattern": "^[ab]*a[ab]{12}$"},
    "a hex id in an object": {"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^x[0-9a-f]*f[0-9a-f]{10}$"}, "n": {"type": "integer"}},
        "required": ["id"], "additionalProperties": False},
    "a written-out run (nothing relaxes: any string in the automaton)": {
        "type": "object", "properties": {"v": {"type": "string", "pattern": "^[ab]*a" + "[ab]" * 10 + "$"}}},
    "array items": {"type": "array", "items": {"type": "string", "pattern": "^[a-c]*c[a-c]{9}$"},
                    "minItems": 1, "maxItems": 3},
}


def _ids(words: np.ndarray, vocab: int) -> np.ndarray:
    return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab])


def _lazy(smol_info, schema, monkeypatch, tmp_path):
    """``schema`` compiled with the automaton limit lowered (before any compile at the normal limit, and
    with no automaton on disk: each would give the pattern's DFA whole)."""
    compiler = GrammarCompiler(smol_info)
    with monkeypatch.context() as mp:
        mp.setattr(fsa, "MAX_DFA_STATES", 500)
        mp.setenv("STRUCTGEN_CACHE", str(tmp_path))
        mp.setattr(regex, "_FAILED", {})  # the failures at the lowered limit are forgotten after
        return compiler.compile_json_schema(schema)


@pytest.mark.parametrize("name", list(CASES))
def test_lazy_masks_equal_the_pattern_automaton(smol_info, monkeypatch, tmp_path, name):
    schema = CASES[name]
    lazy = _lazy(smol_info, schema, monkeypatch, tmp_path)
    assert lazy.lazy_patterns, "the pattern should be over the lowered limit (the case tests nothing)"
    exact = GrammarCompiler(smol_info).compile_json_schema(schema)
    assert not exact.lazy_patterns and not exact.checks
    def pick(rng, ids, walk):
        return rng.choice([int(t) for t in ids if t not in lazy.eos_ids] or [int(ids[0])])

    steps = masks_agree_along_walks(lazy, exact, random.Random(zlib.crc32(name.encode())), pick, walks=10, steps=120,
                                    same_completion=True)
    assert steps > 150


def test_long_counted_run_after_a_star_generates_without_dead_ends(smol_info):
    """``[ab]*a[ab]{22}`` (2**23 DFA states) as a pattern: every walk with no rollback finishes valid,
    and the budget guard's shortest completion counts what the pattern still needs."""
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[ab]*a[ab]{22}$"}},
              "required": ["code"], "additionalProperties": False}
    g = GrammarCompiler(smol_info).compile_json_schema(schema)
    assert g.lazy_patterns
    rng = random.Random(5)
    for _ in range(6):
        m = Matcher(g)
        for _ in range(400):
            ids = _ids(m.next_token_mask(), g.vocab_size)
            assert len(ids), f"dead end after {m.output_bytes()!r}"
            pick = [int(t) for t in ids if t not in g.eos_ids or rng.random() < 0.2] or [int(ids[0])]
            assert m.accept_token(rng.choice(pick))
            if m.is_terminated():
                break
        assert m.is_terminated()
        jsonschema.validate(json.loads(m.output_bytes()), schema)
    m = Matcher(g)
    assert m.accept_string('{"code": "a')
    assert m.min_completion_bytes() >= 22 + 2  # 22 characters, the quote, the brace
    assert BudgetGuard(m).cost(g.eos_ids[0]) == 0


def test_opening_tokens_are_followed(smol_info, monkeypatch, tmp_path):
    """A token that opens the string and writes into it (`` "-``) is refused when the pattern cannot
    start so, though the relaxed automaton takes it (here any string: nothing in the pattern relaxes)."""
    schema = {"type": "array", "items": {"type": "string", "pattern": "^[ab]*b" + "[ab]" * 9 + "$"}}
    g = _lazy(smol_info, schema, monkeypatch, tmp_path)
    assert g.lazy_patterns
    tok = {b: i for i, b in enumerate(smol_info.token_bytes)}

    def allowed():
        m = Matcher(g)
        assert m.accept_string("[")
        return set(_ids(m.next_token_mask(), g.vocab_size).tolist())

    followed = allowed()
    g.lazy_patterns, lazy = {}, g.lazy_patterns
    relaxed = allowed()
    g.lazy_patterns = lazy
    assert tok[b' "'] in followed
    assert tok[b' "-'] in relaxed and tok[b' "-'] not in followed


def test_lenient_grammars_follow_the_pattern_too(smol_info):
    """``lenient=True`` leaves no check, but the mask still follows the pattern: walks end valid."""
    from structgen.errors import UnsupportedFeature
    from structgen.runtime.sampling.token_dfa import token_dfa

    schema = {"type": "string", "pattern": "^[0-9a-f]*f[0-9a-f]{30}$"}
    g = GrammarCompiler(smol_info).compile_json_schema(schema, lenient=True)
    assert g.lazy_patterns and not g.checks
    rng = random.Random(11)
    for _ in range(3):
        m = Matcher(g)
        while not m.is_terminated():
            ids = _ids(m.next_token_mask(), g.vocab_size)
            assert len(ids), m.output_bytes()
            assert m.accept_token(rng.choice([int(t) for t in ids if t not in g.eos_ids] or [int(ids[0])]))
        jsonschema.validate(json.loads(m.output_bytes()), schema)
    with pytest.raises(UnsupportedFeature, match="too large"):
        token_dfa(g)
