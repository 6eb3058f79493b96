"""Key lexers shared by every set of keys left in an object (``Lexer.widened``).

An object's key lexer holds all of its key literals beside the "any other key"
terminal, whichever keys the parser still allows; a token that completes a key
the parser does not allow is dropped from the mask and refused on commit.
These tests compare every mask with the grammar that builds one lexer per set
of allowed keys (no widening) and with brute force.
"""
from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from engine_helpers import brute_force_mask, mask_set
from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher

# four keys: an any-order object tracks all of them (more: only the required ones)
PROPS4 = {k: {"type": "integer"} for k in ["name", "names", "type", "ty"]}
PROPS = {k: {"type": "integer"} for k in ["name", "type", "id", "value", "names", "ty"]}

SCHEMAS = [
    ("any", {"type": "object", "properties": PROPS4}),
    ("any", {"type": "object", "properties": PROPS, "required": ["name", "ty"]}),
    ("any", {"type": "object", "properties": PROPS, "required": ["id"], "additionalProperties": {"type": "boolean"}}),
    ("schema", {"type": "object", "properties": PROPS}),
    ("any", {"type": "array", "items": {"anyOf": [
        {"type": "object", "properties": {"name": {"type": "integer"}, "id": {"type": "integer"}}},
        {"type": "object", "properties": {"name": {"type": "string"}, "type": {"type": "string"}},
         "required": ["type"]}]}}),
    ("any", {"type": "object", "properties": {"name": {"type": "integer"}, "inner": {
        "type": "object", "properties": {"name": {"type": "integer"}, "id": {"type": "integer"}}}}}),
]

TEXTS = [
    '{"name": 1, "type": 2, "id": 3, "value": 4, "names": 5, "ty": 6, "other": 7}',
    '{"ty": 1, "names": 2, "type": 3, "name": 4}',
    '{"id": 3, "value": 4, "name": 1, "nam": 1, "names": 5}',
    '[{"name": 1, "id": 2}, {"type": "a", "name": "b", "zz": 1}, {"id": 1, "name": 2}]',
    '{"name": 1, "inner": {"name": 2, "id": 3}, "id": 4}',
    '{"ty": 2, "id": 3, "name": 1, "extra": true, "names": 0}',
]


@pytest.fixture(scope="module", params=["smol", "deepseek"])
def compilers(request, smol_info, deepseek_info):
    info = smol_info if request.param == "smol" else deepseek_info
    return GrammarCompiler(info), GrammarCompiler(info)


def _pair(compilers, schema, order):
    """(the grammar as compiled, the same grammar with one lexer per set of allowed terminals)."""
    g = compilers[0].compile_json_schema(schema, property_order=order)
    g0 = compilers[1].compile_json_schema(schema, property_order=order)
    g0.key_families = {}
    del g0._lexer_of[:]  # an array: configuration -> lexer id
    for cache in (g0._lexer_by_allowed, g0._excluded_of, g0._refused_ends):
        cache.clear()
    g0.clear_masks()
    return g, g0


@pytest.mark.parametrize("order,schema", SCHEMAS)
def test_masks_equal_one_lexer_per_key_set(compilers, order, schema):
    g, g0 = _pair(compilers, schema, order)
    assert g.key_families, "the object's key literals were not recorded as a family"
    validator = jsonschema.Draft202012Validator(schema)
    seen_valid = 0
    for text in TEXTS:
        m, m0 = Matcher(g), Matcher(g0)
        data = text.encode()
        for i in range(len(data)):
            if not np.array_equal(m.next_token_mask(), m0.next_token_mask()):
                assert mask_set(m) == mask_set(m0), (text, data[:i])
            ok, ok0 = m.accept_bytes(data[i:i + 1]), m0.accept_bytes(data[i:i + 1])
            assert ok == ok0, (text, data[:i + 1])
            if not ok:
                break
        valid = validator.is_valid(json.loads(text))
        if order == "any":  # (schema order also refuses keys out of order)
            assert (ok and m.is_accepting()) == valid, text
        seen_valid += valid
    assert seen_valid >= 1  # the texts reach past the first keys


@pytest.mark.parametrize("order,schema", SCHEMAS[:3])
def test_masks_after_used_keys_equal_brute_force(smol_info, order, schema):
    g = GrammarCompiler(smol_info).compile_json_schema(schema, property_order=order)
    for prefix in ['{"name": 1, ', '{"name": 1, "', '{"name": 1, "na', '{"name": 1, "name', '{"id": 1, "name": 1,',
                   '{"type": 1, "ty', '{"type": 1, "ty": 2, "']:
        m = Matcher(g)
        assert m.accept_string(prefix), prefix
        assert mask_set(m) == brute_force_mask(m), prefix


def test_a_used_key_is_refused_when_its_quote_closes(compilers):
    g, _ = _pair(compilers, SCHEMAS[0][1], "any")
    m = Matcher(g)
    assert m.accept_string('{"name": 1, "name')
    assert m.accept_string('s": 2')  # "names" is another key
    m = Matcher(g)
    assert m.accept_string('{"name": 1, "name')
    assert not m.accept_string('"')  # the key is complete and used: nothing can follow
    assert not m.accept_string('":')
    tb = g.tokenizer.token_bytes
    m = Matcher(g)
    assert m.accept_string('{"name": 1,')
    for t in sorted(mask_set(m)):
        if tb[t].lstrip(b" ") in (b'"name"', b'"name":', b'"name":"'):
            raise AssertionError(f"token {tb[t]!r} completes a used key")


def test_every_set_of_keys_left_shares_one_lexer(compilers):
    """The point of widening: visiting keys in any order builds one key lexer, not one per set."""
    info = compilers[0].tokenizer
    g, g0 = _pair((GrammarCompiler(info), GrammarCompiler(info)), SCHEMAS[0][1], "any")  # no lexer made yet
    doc = {k: i for i, k in enumerate(PROPS4)}
    for gr in (g, g0):
        m = Matcher(gr)
        assert m.accept_string(json.dumps(doc))
    # g0: one key lexer per set of keys left (4, 3, 2, 1 here); g: one per set of the other terminals
    # beside the keys (with or without "}"), whatever keys are left
    (other_key,) = g.key_families
    per_set = [lx for lx in g0.lexers.lexers if other_key in lx.term_ids]
    shared = [lx for lx in g.lexers.lexers if other_key in lx.term_ids]
    assert all(lx.widened for lx in shared)
    assert len({tuple(sorted(set(lx.term_ids) - lx.widened)) for lx in shared}) == len(shared) <= 2
    assert len(per_set) >= len(PROPS4)


def test_a_used_key_is_refused_when_its_quote_closes_with_value_checks(compilers):
    """The same refusal when the grammar also checks values as they complete (here uniqueItems
    on a sibling array, so commits take the checked path: the used key's lexeme ends at its quote,
    and the scan that ending would make fails)."""
    schema = {"type": "object", "properties": {**PROPS4, "tags": {
        "type": "array", "items": {"type": "array"}, "uniqueItems": True}}, "required": ["name"]}
    g, _ = _pair(compilers, schema, "any")
    m = Matcher(g)
    assert m._tracker is not None, "uniqueItems over arrays should be checked at value boundaries"
    assert m.accept_string('{"tags": [[1], [2]], "name": 1, "name')
    assert not m.accept_string('"')
    assert m.accept_string('s": 2}') and m.is_accepting()
