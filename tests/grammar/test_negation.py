"""Schema negation (``structgen.grammar.negation``): for every instance exactly one of a schema and
its negation accepts it, checked with jsonschema itself."""
from __future__ import annotations

import jsonschema
import pytest

from structgen.grammar.negation import is_simple_not, is_some_key_not, negate

INSTANCES = [None, True, False, 0, 1, -3, 2.5, 10, 100, "", "a", "abc", "hello world", [], [1], [1, "a"], {},
             {"a": 1}, {"a": "x", "b": 2}, {"b": None}, {"ab": "s"}, {"ab": 1, "c": None}, {"c": "x"}, {"x": 1}]
SCHEMAS = [
    {"type": "integer"},
    {"type": ["string", "null"]},
    {"minimum": 2},
    {"type": "number", "exclusiveMaximum": 10},
    {"maxLength": 2},
    {"type": "string", "pattern": "^a"},
    {"enum": [1, "a", None]},
    {"const": {"a": 1}},
    {"required": ["a"]},
    {"properties": {"a": {"type": "integer"}}},
    {"anyOf": [{"type": "string"}, {"minimum": 5}]},
    {"allOf": [{"type": "integer"}, {"maximum": 3}]},
    {"maxItems": 1},
    {"multipleOf": 0.5, "maximum": 3},
    {"items": {"type": "integer"}},
    {"contains": {"type": "string"}, "maxItems": 1},
    {"type": "array", "items": False},
    {"propertyNames": {"not": {"const": "a"}}},
    {"propertyNames": {"not": {"enum": ["a", "b", 3]}}},
    {"patternProperties": {"a": False}, "additionalProperties": False},
    {"items": {"properties": {"b": False}, "additionalProperties": False}},
    {"patternProperties": {"^a": False, "b$": False}},
    # closed objects ("some key is undefined"), as the branches of discriminated-union oneOfs are
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
    {"properties": {"a": {}}, "patternProperties": {"^b": {}}, "additionalProperties": False},
    {"patternProperties": {"^a": {}, "^b": False}, "additionalProperties": {}},
    # propertyNames whose negation is no list of strings: "some key fails it"
    {"propertyNames": {"pattern": "^a"}},
    {"type": "object", "propertyNames": {"maxLength": 0}},
    # values constrained by key: "some member of these keys has a value outside it"
    {"additionalProperties": {"type": "string"}, "maximum": 3},
    {"patternProperties": {"^a": {"type": "string"}}},
    {"properties": {"b": {}}, "patternProperties": {"^a": {"type": "integer"}, "x": False},
     "additionalProperties": {"type": "null"}},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: str(s)[:40])
def test_negation_is_the_exact_complement(schema):
    neg = negate(schema, lambda ref: None)
    assert neg is not None, schema
    a, b = jsonschema.Draft202012Validator(schema), jsonschema.Draft202012Validator(neg)
    for x in INSTANCES:
        assert a.is_valid(x) != b.is_valid(x), (schema, neg, x)


def test_booleans_and_what_cannot_be_negated():
    assert negate(True, lambda r: None) is False and negate(False, lambda r: None) is True
    assert negate({"$ref": "#/$defs/x"}, lambda r: None) is None  # a ref that cannot be followed
    assert negate({"uniqueItems": True}, lambda r: None) is None  # a relation between items
    assert is_some_key_not({"patternProperties": {"^a": {"type": "string"}}})  # a member form: the object counts it
    assert not is_some_key_not({"patternProperties": {"^a": {"type": "string"}, "^b": {}}})
    assert is_simple_not({"type": "string"}) and not is_simple_not({"properties": {"a": {}}})


@pytest.mark.parametrize("schema", [{"items": {"type": "integer", "maximum": 3}}, {"type": "array", "items": {"not": {}}},
                                    {"items": {"items": {"type": "string"}}},
                                    {"items": {"minimum": 2, "exclusiveMinimum": True, "maximum": 4}},
                                    {"minimum": 1, "maximum": 3, "exclusiveMaximum": True}])
def test_items_negate_in_draft_4_without_contains(schema):
    """Draft-04 has no ``contains``: "some item fails" is a draft-07 subschema whose ``contains`` reads
    the item's negation as draft-04 again, exclusive bounds as draft-04 flags.  (The negation is always a
    subschema: a ``$schema`` at the root of an explicitly draft-04 validator would not switch it.)"""
    neg = negate(schema, lambda ref: None, with_contains=False)
    assert neg is not None
    a, b = jsonschema.Draft4Validator(schema), jsonschema.Draft4Validator({"allOf": [neg]})
    for x in INSTANCES + [[3], [2], [4, 1], [["a"]], [["a", 1]], [[]], 3, 4, 1.5, [2.5], [4.5]]:
        assert a.is_valid(x) != b.is_valid(x), (schema, neg, x)
