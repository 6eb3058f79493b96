r"""JSON Schema groups of the official test suite that were refused or rejected valid instances:
``\p{...}`` in patterns, a ``multipleOf`` too large for an automaton (now a check at the value
boundary), and ``unevaluatedProperties``/``unevaluatedItems`` beside ``anyOf``/``oneOf``/``if``."""
from __future__ import annotations

import json

import pytest
from jsonschema.validators import validator_for

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import SchemaError
from structgen.grammar.json_schema import SchemaOptions, schema_to_ir
from structgen.grammar.json_schema.checks import SchemaCheck
from structgen.grammar.regex_jsonschema import ecma_patterns

D = "https://json-schema.org/draft/2020-12/schema"


@pytest.fixture(scope="module")
def comp(smol_info):
    return GrammarCompiler(smol_info)


def accepts(grammar, value) -> bool:
    m = Matcher(grammar)
    return m.accept_string(json.dumps(value, ensure_ascii=False)) and m.is_accepting()


def check_group(comp, schema, good, bad):
    g = comp.compile_json_schema(schema, property_order="any")
    for v in good:
        assert accepts(g, v), v
    for v in bad:
        assert not accepts(g, v), v


# -- multipleOf past the automaton's modulus ------------------------------------------------------------
def test_multiple_of_too_large_is_checked_not_refused(comp):
    schema = {"$schema": D, "type": "integer", "multipleOf": 0.123456789}  # multipleOf#3
    check_group(comp, schema, [0, 123456789, -246913578], [1, 1e308, 5])
    ir, _ = schema_to_ir(schema, SchemaOptions())
    assert any(isinstance(c, SchemaCheck) for c in ir.checks)
    comp.compile_json_schema(schema, lenient=True)  # lenient: no check, the output is validated


def test_multiple_of_keeps_the_others_exact(comp):
    schema = {"type": "object", "properties": {
        "a": {"type": "number", "multipleOf": 123456789, "maximum": 1e12},
        "b": {"allOf": [{"multipleOf": 7}, {"multipleOf": 0.123456789}]}}}
    check_group(comp, schema, [{"a": 246913578}, {"b": 864197523}, {}],
                [{"a": 5}, {"a": 1e13}, {"b": 7}, {"b": 123456789}])
    ir, _ = schema_to_ir({"type": "integer", "multipleOf": 7}, SchemaOptions())
    assert not ir.checks  # an exact multipleOf needs no check


# -- \p{...} ---------------------------------------------------------------------------------------------
def test_pattern_properties_with_property_escape(comp):
    schema = {"$schema": D, "type": "object", "patternProperties": {"^\\p{Letter}+$": {"type": "number"}}}
    check_group(comp, schema, [{"π": 1}, {"123": 1}, {"abc": 2, "1": "x"}], [{"π": "x"}, {"ab": None}])
    closed = {"type": "object", "patternProperties": {"\\p{Letter}cole": True, "^\\p{digit}+$": True},
              "properties": {"école": {"type": "integer"}}, "additionalProperties": False}
    check_group(comp, closed, [{"l'ecole": 1}, {"l'école": "x"}, {"৪২": 0}, {"école": 3}],
                [{"L'ÉCOLE": 1}, {"-%#": 1}, {"école": "x"}])


def test_unknown_property_is_a_schema_error(comp):
    with pytest.raises(SchemaError):
        comp.compile_json_schema({"type": "object", "patternProperties": {"\\p{Lettre}": True}})


def test_validator_class_reads_property_escapes():
    schema = {"$schema": D, "type": "object", "properties": {"s": {"pattern": "^\\p{L}+$"}},
              "patternProperties": {"^\\p{Lu}": {"type": "number"}}, "additionalProperties": False}
    v = ecma_patterns(validator_for(schema))(schema)
    assert v.is_valid({"s": "π", "Ä": 1})
    assert not v.is_valid({"s": "π1"}) and not v.is_valid({"Ä": "x"}) and not v.is_valid({"a": 1})
    plain = {"$schema": D, "pattern": "^a+$"}
    assert ecma_patterns(validator_for(plain))(plain).is_valid("aa")
    uneval = {"$schema": D, "type": "object",
              "anyOf": [{"patternProperties": {"^\\p{Lu}+$": True}}, {"patternProperties": {"^\\p{N}+$": True}}],
              "unevaluatedProperties": False}
    v = ecma_patterns(validator_for(uneval))(uneval)
    assert v.is_valid({"ÄB": 1, "12": 2}) and not v.is_valid({"ab": 1}) and not v.is_valid({"ÄB": 1, "x": 2})


# needs, in json_values.check_pattern, the pattern rewritten by regex.python_regex (see the report)
def test_pattern_with_property_escape(comp):
    schema = {"$schema": D, "type": "string", "pattern": "^\\p{Letter}+$"}  # pattern#2
    check_group(comp, schema, ["Hello", "π"], ["123", ""])


# needs make_validator to use regex_jsonschema.ecma_patterns (see the report)
def test_final_validator_reads_property_escapes():
    from structgen.grammar.json_schema.input import make_validator

    v = make_validator({"type": "object", "patternProperties": {"^\\p{L}+$": {"type": "number"}}})
    assert v.is_valid({"π": 1}) and not v.is_valid({"π": "x"})


# -- unevaluated* beside anyOf / oneOf / if: needs logic.conjunction to drop them from the copies it hands
# each branch (the value's check validates them against the schema as written; see the report)
UNEVALUATED = [
    ({"$schema": D, "type": "object", "properties": {"foo": {"type": "string"}},
      "anyOf": [{"properties": {"bar": {"const": "bar"}}, "required": ["bar"]},
                {"properties": {"baz": {"const": "baz"}}, "required": ["baz"]}],
      "unevaluatedProperties": False},  # unevaluatedProperties#11
     [{"foo": "foo", "bar": "bar"}, {"foo": "foo", "bar": "bar", "baz": "baz"}],
     [{"foo": "foo", "bar": "bar", "quux": 1}, {"foo": "foo"}]),
    ({"$schema": D, "if": {"properties": {"foo": {"const": "then"}}, "required": ["foo"]},
      "then": {"properties": {"bar": {"type": "string"}}, "required": ["bar"]},
      "else": {"properties": {"baz": {"type": "string"}}, "required": ["baz"]},
      "unevaluatedProperties": False},  # unevaluatedProperties#14
     [{"foo": "then", "bar": "bar"}, {"baz": "baz"}],
     [{"foo": "then", "bar": "bar", "baz": "baz"}, {"foo": "else", "baz": "baz"}]),
    ({"$schema": D, "prefixItems": [{"const": "foo"}],
      "anyOf": [{"prefixItems": [True, {"const": "bar"}]}, {"prefixItems": [True, True, {"const": "baz"}]}],
      "unevaluatedItems": False},  # unevaluatedItems#11
     [["foo", "bar"], ["foo", "bar", "baz"]], [["foo", "bar", 42], ["foo", "bar", "baz", 42]]),
    ({"$schema": D, "unevaluatedItems": {"type": "boolean"},
      "anyOf": [{"items": {"type": "string"}}, True]},  # unevaluatedItems#8
     [["yes", "no"], [True, False]], [["yes", False], ["foo", 42], [1]]),
]


@pytest.mark.parametrize("schema, good, bad", UNEVALUATED)
def test_unevaluated_beside_branches(comp, schema, good, bad):
    check_group(comp, schema, good, bad)


@pytest.mark.parametrize("schema, good, bad", UNEVALUATED)
def test_unevaluated_beside_branches_never_accepts_invalid(comp, schema, good, bad):
    g = comp.compile_json_schema(schema, property_order="any")
    for v in bad:
        assert not accepts(g, v), v


# -- patterns too large for their exact automaton ------------------------------------------------------
def test_a_pattern_too_large_keeps_a_relaxed_automaton_and_its_check(comp, smol_info):
    """``[ab]*a[ab]{22}`` has a 2**23-state DFA: the string is checked where it ends, and its
    automaton is the relaxed pattern's (``[ab]*a[ab]{4,}``), so inside the string only ``a``/``b``
    text is allowed rather than any string."""
    schema = {"type": "string", "pattern": "^[ab]*a[ab]{22}$"}
    g = comp.compile_json_schema(schema)
    check_group(comp, schema, ["b" + "a" + "b" * 22, "a" * 23], ["a" * 22, "ab" * 12, "b" * 30, "c" + "a" * 23])
    m = Matcher(g)
    assert m.accept_string('"ba')
    words = m.next_token_mask()
    allowed = {smol_info.token_bytes[t] for t in range(smol_info.vocab_size)
               if (words[t >> 5] >> (t & 31)) & 1}
    assert b"ab" in allowed and b"bb" in allowed
    assert all(set(b) <= set(b"ab") for b in allowed - {b"\\"})  # (a backslash starts an escape: \u0061)
    assert b'"' not in allowed  # the check refuses closing here: no a 23rd from the end yet
