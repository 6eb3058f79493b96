"""The Matcher's mask is exact where the grammar has checks at value boundaries: a token is
allowed only when ``accept_token`` takes it (vLLM ends a request with an error otherwise), and a
token taken is left out only when nothing could follow it (a dead end).

Brute force: at states reached by random walks, every token of the automaton's mask (a superset
of what can be accepted) is tried, and the Matcher's mask must be the tokens taken less the dead
ends."""
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
    # overlapping oneOf branches, one of which has no negation (a member whose value repeats an item):
    # checked (a dependentSchemas, then a value-typed additionalProperties were the case here until the
    # automata held them)
    "overlapping oneOf": ({"oneOf": [{"type": "object", "additionalProperties": {"type": "array", "uniqueItems": True,
                                                                              "maxItems": 3}},
                                     {"type": "object", "properties": {"a": {"minimum": 3}}}]},
                          ['{"a": [1, 2', '{"b": [2], "a": 1', '{"b": [3, 3']),
    # contains beside uniqueItems: left to a check (alone, the automaton counts it)
    "contains": ({"type": "array", "items": {"type": "integer"}, "maxItems": 4, "uniqueItems": True,
                  "contains": {"const": 3}},
                 ["[1, 2", "[3, 1"]),
}


def _ids(words: np.ndarray, vocab: int) -> set[int]:
    return set(np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab]).tolist())


@pytest.fixture(scope="module")
def compiler(smol_info):
    return GrammarCompiler(smol_info)


def _taken(m: Matcher, g) -> set[int]:
    """Brute force: the tokens of the automaton's mask that ``accept_token`` takes (EOS when the
    output may end)."""
    taken = set()
    for t in _ids(g.mask(*m._state), g.vocab_size):
        if t in g.eos_ids:
            if m.is_accepting():
                taken.add(t)
        elif m.accept_token(t):
            taken.add(t)
            m.rollback(1)
    return taken


def _check_exact(m: Matcher, g) -> tuple[set[int], int]:
    """The Matcher's mask against brute force over the automaton's; (allowed ids, tokens refused).
    Every allowed token is taken; a token taken but not allowed must lead into a dead end (no token
    taken after it, the output unfinished): the mask's lookahead clears those and nothing else."""
    exact = _ids(m.next_token_mask(), g.vocab_size)
    taken = _taken(m, g)
    assert exact <= taken, (m.output_bytes(), sorted(exact - taken)[:10])
    for t in taken - exact:
        assert m.accept_token(t)
        assert not m.is_accepting() and not _taken(m, g), (m.output_bytes(), t, "cleared but not a dead end")
        m.rollback(1)
    return exact, len(_ids(g.mask(*m._state), g.vocab_size) - exact)


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


def test_no_token_leads_into_a_dead_end_of_a_unique_string_item(compiler, smol_info):
    """The named dead end: a string item one character short of its maxLength, whose only completion
    repeats an earlier item -- the token that would corner it is cleared; others stay."""
    tok = {b: i for i, b in reversed(list(enumerate(smol_info.token_bytes)))}
    g = compiler.compile_json_schema(SCHEMAS["unique strings"][0])
    m = Matcher(g)
    assert m.accept_string('["abc", "ab')
    allowed = _ids(m.next_token_mask(), g.vocab_size)
    assert tok[b"c"] not in allowed and tok[b"d"] in allowed
    assert m.accept_token(tok[b"c"]) and not _ids(m.next_token_mask(), g.vocab_size)  # what it would lead to
    one = compiler.compile_json_schema({"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": True})
    m = Matcher(one)
    assert m.accept_string('["a", "')
    allowed = _ids(m.next_token_mask(), one.vocab_size)
    assert tok[b"a"] not in allowed and tok[b"b"] in allowed


def test_random_walks_never_meet_a_dead_end(compiler, smol_info):
    """Walks that take any allowed token (rollback never used) always find a token or may end.
    (Walks draw no token with a backslash, so they stay inside one spelling per item.)"""
    g = compiler.compile_json_schema({"type": "array", "items": {"type": "string", "maxLength": 1,
                                                                   "pattern": "^[abc]*$"},
                                      "uniqueItems": True, "maxItems": 4})  # 4 distinct items exist
    assert g.checks
    rng = random.Random(0)
    for _ in range(30):
        m = Matcher(g)
        for _ in range(40):
            pool = sorted(t for t in _ids(m.next_token_mask(), g.vocab_size) - set(g.eos_ids)
                          if b"\\" not in smol_info.token_bytes[t])
            if not pool:
                assert m.is_accepting(), m.output_bytes()
                break
            assert m.accept_token(rng.choice(pool))


@pytest.mark.parametrize("opener", ["[", "{"])
def test_whitespace_after_an_opener_cannot_run_past_what_an_item_may_follow(compiler, opener):
    """Blanks after "[" belong to it (the closer's own leading blanks cannot add to them): past
    max_whitespace blanks only "]" could follow, a dead end where a check refuses the empty array."""
    schema = ({"type": "array", "oneOf": [{"items": {"type": "integer"}}, {"items": {"type": "boolean"}}]}
              if opener == "[" else {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}})
    g = compiler.compile_json_schema(schema)
    m = Matcher(g)
    assert m.accept_string(opener + " " * 16)
    assert not m.accept_string(" ")
    assert m.accept_string("1]" if opener == "[" else '"a": 1}') and m.is_accepting()
    assert Matcher(g).accept_string(opener + " " * 16 + ("1" + " " * 16 + "]" if opener == "[" else '"a": 1' + " " * 16 + "}"))


def test_an_item_spelled_with_an_escape_is_looked_ahead_too(compiler, smol_info):
    """Sampled through vLLM: '"d\\u0061"' then '"d\\u006' -- the digit completing the escape would make
    the earlier item again at maxLength (tests_vllm met it); it is left out, the others stay."""
    tok = {b: i for i, b in reversed(list(enumerate(smol_info.token_bytes)))}
    g = compiler.compile_json_schema({"type": "array", "uniqueItems": True, "items": {
        "type": "string", "minLength": 2, "maxLength": 2, "pattern": "^[a-e]*$"}})
    m = Matcher(g)
    assert m.accept_string('["d\\u0061", "d\\u006')
    allowed = _ids(m.next_token_mask(), g.vocab_size)
    assert tok[b"1"] not in allowed and tok[b"2"] in allowed


def test_a_check_on_one_value_makes_no_candidates_elsewhere(compiler):
    """The closing quote of every string is a trigger (the string terminal is shared), but only the
    items of the checked array can run the check: trials elsewhere would be wasted (issue 34)."""
    from structgen.engine.exact_masks import _candidate_ids

    schema = {"type": "object", "properties": {
        "x": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}}
    g = compiler.compile_json_schema(schema, property_order="any")
    assert g.checks

    def candidates(prefix: str) -> tuple:
        m = Matcher(g)
        assert m.accept_string(prefix)
        return _candidate_ids(g, *m._state, g.mask(*m._state))

    assert candidates('{"name": "ab') == ()
    assert candidates('{"tags": ["a", "b') == ()
    closing = candidates('{"x": ["ab", "a')
    assert closing and all(b'"' in compiler.tokenizer.token_bytes[t] for t in closing)
