"""JSON Schema compiler: exact semantics on hand-written cases, explicit errors,
bounded compiles, the Test Suite baseline and a fixed MaskBench slice."""
from __future__ import annotations

import gzip
import json
import random
import time
from pathlib import Path

import jsonschema
import pytest

from structgen.bench.data_paths import DataNotFound
from structgen.bench.schema_suite import run_test_suite, suite_folder
from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import SchemaError, StructgenError

DATA = Path(__file__).resolve().parents[4] / "shared" / "data"


@pytest.fixture(scope="module")
def comp(smol_info):
    return GrammarCompiler(smol_info)


def accepts(comp, schema, value, **kw) -> bool:
    m = Matcher(comp.compile_json_schema(schema, **kw))
    text = value if isinstance(value, str) and kw.get("raw") else json.dumps(value, ensure_ascii=False)
    return m.accept_string(text) and m.is_accepting()


def accepts_text(comp, schema, text, **kw) -> bool:
    m = Matcher(comp.compile_json_schema(schema, **kw))
    return m.accept_string(text) and m.is_accepting()


CASES = [
    ({"type": "integer", "minimum": -5, "exclusiveMaximum": 10}, [-5, 0, 9, 3.0], [-6, 10, 2.5, "1"]),
    ({"type": "number", "minimum": 0.5, "maximum": 1.25}, [0.5, 1, 1.25, 0.75], [0.49, 1.26, -1]),
    ({"type": "integer", "multipleOf": 7}, [0, 14, -21], [3, 15]),
    ({"type": "number", "multipleOf": 0.01}, [1.25, 3, 0.1], [1.255]),
    ({"type": "string", "minLength": 2, "maxLength": 3}, ["ab", "abc", "é😀", 'a"'], ["a", "abcd"]),
    ({"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"}, ["AB12"], ["ab12", "AB"]),
    ({"type": "string", "pattern": "foo"}, ["xfooy"], ["fo"]),
    ({"type": "string", "format": "date"}, ["2024-02-29", "2023-12-31"], ["2023-02-29", "2024-13-01", "x"]),
    ({"type": "string", "format": "date-time"}, ["2024-01-01T12:00:00Z", "2024-01-01T12:00:00.5+01:00"],
     ["2024-01-01 12:00:00", "2024-01-01T12:00:61Z"]),
    ({"type": "string", "format": "uuid"}, ["123e4567-e89b-12d3-a456-426614174000"], ["123"]),
    ({"type": "string", "format": "ipv4"}, ["192.168.0.1"], ["256.1.1.1", "01.1.1.1"]),
    ({"enum": ["a", 1, None, [1, 2], {"k": True}]}, ["a", 1, 1.0, None, [1, 2], {"k": True}], ["b", 2, [2, 1]]),
    ({"const": "x", "type": "string"}, ["x"], ["y"]),
    ({"enum": [1, "a", 2], "type": "integer", "minimum": 2}, [2], [1, "a"]),
    ({"type": ["string", "null"]}, ["s", None], [1]),
    ({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]}, [1, "a"], ["ab", 1.5]),
    ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, [1, "a"], [None]),
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                {"properties": {"a": {"minimum": 3}}, "required": ["a"]}]}, [{"a": 3}], [{"a": 2}, {}]),
    ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["b"]},
     [{"b": 1}, {"a": "x", "b": 1}, {"b": 1, "c": [1, {"d": None}]}], [{"a": "x"}, {"b": "1"}]),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
     [{}, {"a": "x"}], [{"b": 1}]),
    ({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False},
     [{"x-a": 1}, {}], [{"x-a": "s"}, {"y": 1}]),
    ({"type": "object", "propertyNames": {"maxLength": 2}}, [{"ab": 1}], [{"abc": 1}]),
    ({"type": "object", "minProperties": 1, "maxProperties": 2}, [{"a": 1}, {"a": 1, "b": 2}],
     [{}, {"a": 1, "b": 2, "c": 3}]),
    ({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
     [["a", 1], ["a"], []], [["a", 1, 2], [1]]),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3}, [[1, 2], [1, 2, 3]],
     [[1], [1, 2, 3, 4], [1, "a"]]),
    ({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                         "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                         "required": ["v"], "additionalProperties": False}}, "$ref": "#/$defs/node"},
     [{"v": 1}, {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}], [{"v": 1, "kids": [{}]}]),
    ({"definitions": {"s": {"type": "string"}}, "properties": {"a": {"$ref": "#/definitions/s"}}},
     [{"a": "x"}], [{"a": 1}]),
    ({"not": {"type": "string"}}, [1, None, [1]], ["s"]),
    ({"type": "number", "not": {"type": "integer"}}, [1.5], [1, 2.0]),
    ({"type": "integer", "minimum": 0, "maximum": 10, "exclusiveMinimum": True}, [1, 10], [0]),  # draft-04
    (True, [1, "a", {"a": [None]}], []),
    # compound not, if/then/else and overlapping oneOf, through negation (structgen.grammar.negation)
    ({"not": {"type": "string", "minLength": 3}}, [5, None, "ab", ""], ["abc", "abcd"]),
    ({"type": "string", "not": {"pattern": "^a"}}, ["b", "ba", ""], ["a", "abc", 1]),
    ({"not": {"anyOf": [{"type": "integer", "minimum": 5}, {"const": "x"}]}}, [4, "y", 4.5, None], [5, 9, "x"]),
    ({"not": {"properties": {"a": {"type": "integer"}}}}, [{"a": "s"}, {"a": None, "b": 1}], [{"a": 1}, {}, 3]),
    ({"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "x": {"type": "integer"}},
      "required": ["kind"],
      "if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}, "else": {"not": {"required": ["x"]}}},
     [{"kind": "a", "x": 1}, {"kind": "b"}], [{"kind": "a"}, {"kind": "b", "x": 1}]),
    ({"if": {"type": "string"}, "then": {"maxLength": 1}, "else": {"type": "integer"}}, ["a", 3], ["ab", 1.5, None]),
    ({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}, [-1, 0.5, 2.5], [1, 0, "a"]),
    ({"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "pattern": "^a"}]}, ["bcd", "abcd"],
     ["ab", "bcde"]),
    ({"allOf": [{"enum": [[1, 2], [3], "s"]}, {"not": {"type": "array", "maxItems": 1}}]}, [[1, 2], "s"], [[3]]),
    # enum candidates are checked against the other keywords only (they already equal an enum member)
    ({"enum": [1, True, "x"], "allOf": [{"enum": [1.0, True, "y"]}], "not": {"type": "boolean"}, "minimum": 0},
     [1, 1.0], [True, "x", "y", 2]),
    # oneOf split by type: object keywords match every string, so strings match both branches
    ({"$defs": {"a": {"enum": ["a"]}},
      "oneOf": [{"properties": {"k": {"$ref": "#/$defs/a"}}, "required": ["k"]},
                {"properties": {"k": {"const": "b"}}, "required": ["k"], "additionalProperties": False}]},
     [{"k": "a"}, {"k": "b"}, {"k": "a", "x": 1}], ["s", 1, {"k": "c"}, {}, {"k": "b", "x": 1}]),
    ({"oneOf": [{"maxLength": 0}, {"format": "unknown-format", "minLength": 1}]}, ["", "ab"], [1, None, {}]),
    ({"not": {"format": "date"}}, ["x", "2024-13-01"], ["2024-01-01", 1]),
    # uniqueItems over a finite item set: one automaton state per subset of used values
    ({"type": "array", "items": {"enum": ["a", "b", 1]}, "uniqueItems": True, "minItems": 1},
     [["a"], ["b", "a"], [1, "a", "b"]], [[], ["a", "a"], [1, 1.0], ["c"]]),
    ({"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}, [[], [True, False]], [[True, True]]),
    # uniqueItems over any other items: the matcher compares each completed item with the earlier ones
    # (JSON equality: 1 == 1.0, key order and escapes do not matter, true != 1)
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True},
     [[], ["a"], ["a", "b", "ab"]], [["a", "a"], ["a", "b", "a"], ["\u0061", "a"]]),
    ({"type": "array", "uniqueItems": True},
     [[1, True], ["1", 1], [[1, 2], [2, 1]], [{"a": [1, 2]}, {"a": [2, 1]}], [0.1, 0.11]],
     [[1, 1.0], [None, None], [{"a": 1, "b": 2}, {"b": 2, "a": 1}], [[1], [1]], [100, 1e2]]),
    ({"type": "array", "items": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
      "uniqueItems": True}, [[[1, 2], [2, 1]]], [[[1, 2], [1, 2]], [[1, 1]]]),
    # "not" of a boolean, null, array or object value (the last two checked as the value completes)
    ({"not": {"enum": [True, None]}}, [False, 1, "true", [], {}], [True, None]),
    ({"type": "boolean", "not": {"const": False}}, [True], [False, 0]),
    ({"not": {"enum": [[1, 2], {"a": 1}]}}, [[2, 1], [1], {"a": 2}, {}, 1], [[1, 2], {"a": 1}, {"a": 1.0}]),
    # keywords the automaton over-approximates are validated when their value completes
    ({"type": "array", "contains": {"type": "integer", "minimum": 5}}, [[5], [1, 6], ["a", 7]], [[], [1, 2], ["7"]]),
    ({"$defs": {"t": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
                      "oneOf": [{"required": ["kids"]},
                                {"properties": {"leaf": {"const": True}}, "required": ["leaf"]}]}},
      "$ref": "#/$defs/t"},
     [{"kids": []}, {"leaf": True}, {"kids": [{"leaf": True}]}],
     [{}, {"kids": [], "leaf": True}, {"kids": [{"kids": [], "leaf": True}]}, {"kids": [{}]}]),
    # under anyOf a duplicate removes only the branch that needs unique items
    ({"anyOf": [{"type": "array", "uniqueItems": True}, {"type": "array", "items": {"type": "integer"}}]},
     [[1, 1], ["a", "b"], [1, 2, 1]], [["a", "a"], [1, "a", 1]]),
]


@pytest.mark.parametrize("schema,good,bad", CASES, ids=[str(i) for i in range(len(CASES))])
def test_schema_semantics(comp, schema, good, bad):
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()) \
        if "exclusiveMinimum" not in json.dumps(schema) or "true" not in json.dumps(schema) \
        else jsonschema.Draft4Validator(schema)
    for v in good:
        assert validator.is_valid(v), v
        assert accepts(comp, schema, v), ("valid rejected", v)
    for v in bad:
        assert not accepts(comp, schema, v), ("invalid accepted", v)


def test_whitespace_modes(comp):
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    assert accepts_text(comp, schema, '{"a": [1, 2]}')
    assert accepts_text(comp, schema, '{\n  "a": [\n    1\n  ]\n}')
    assert not accepts_text(comp, schema, '{"a": [1, 2]}', whitespace="compact")
    assert accepts_text(comp, schema, '{"a":[1,2]}', whitespace="compact")
    # bounded: a run longer than max_whitespace is refused
    assert not accepts_text(comp, schema, '{"a":' + " " * 40 + "[]}")


def test_strict_mode_closes_objects(comp):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert accepts(comp, schema, {"a": 1, "b": 2})
    assert not accepts(comp, schema, {"a": 1, "b": 2}, strict=True)


def test_property_order_is_schema_order(comp):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    assert accepts_text(comp, schema, '{"a": 1, "b": 2}')
    assert not accepts_text(comp, schema, '{"b": 2, "a": 1}')


def test_pydantic_models_are_schemas(comp):
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):
        name: str
        age: int

    assert accepts_text(comp, Person, '{"name": "Ann", "age": 3}')
    assert not accepts_text(comp, Person, '{"name": "Ann"}')


def test_a_pydantic_instance_is_refused_naming_its_class(comp):
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):
        name: str

    with pytest.raises(SchemaError, match=r"got an instance of Person; pass the class Person itself "
                                          r"\(or its \.model_json_schema\(\)\)"):
        comp.compile_json_schema(Person(name="Ann"))


@pytest.mark.parametrize("schema,pointer", [
    ({"type": "integer", "minimum": 5, "maximum": 1}, "#"),
    ({"type": "object", "properties": {"a": False}, "required": ["a"]}, "#"),
    ({"type": "strin"}, "#/type"),
    ({"properties": {"a": {"$ref": "#/definitions/missing"}}}, "#/properties/a"),
])
def test_schema_errors_name_the_pointer(comp, schema, pointer):
    with pytest.raises(SchemaError) as e:
        comp.compile_json_schema(schema)
    assert e.value.pointer.startswith(pointer), e.value.pointer


@pytest.mark.parametrize("schema,values", [
    ({"properties": {"a": {"type": "array", "contains": {"type": "integer"}}}},
     [{"a": [1]}, {"a": ["x", 2]}, {"a": []}, {"a": ["x"]}, {}]),
    ({"if": {"items": {"type": "string"}}, "then": {"maxItems": 1}}, [["a"], ["a", "b"], [1, 2], "s"]),
    ({"oneOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "array", "maxItems": 2}]},
     [[1, 2], [1, 2, 3], ["a"], ["a", "b", "c"], []]),
    ({"type": "string", "pattern": "^(?=a)ab$"}, ["ab", "b", "abc"]),  # a lookaround
    ({"properties": {"p": {"type": "string", "pattern": "(?<!x)y"}}}, [{"p": "y"}, {"p": "xy"}, {"p": "ay"}]),
    # patternProperties past the automaton (a lookaround; overlapping patterns that split the key
    # space into more than MAX_KEY_REGIONS regions: every key may contain any of the six letters)
    ({"type": "object", "patternProperties": {"^(?=a)ab$": {"type": "integer"}}},
     [{"ab": 1}, {"ab": "x"}, {"abc": "x"}, {"b": [1]}, {}]),
    ({"type": "object", "additionalProperties": False,
      "patternProperties": {c: {"type": t} for c, t in zip("abcdef", ["integer", "number"] * 3)}},
     [{"a1": 1, "b1": 2.5}, {"a1": 2.5}, {"z": 1}, {"e": 2, "f": 3, "c": 0}, {"ab": 1.5}, {"fa": 1}]),
    ({"type": "string", "not": {"pattern": "\\bx"}}, ["x", "a x", "ax", ""]),
    ({"type": "object", "propertyNames": {"pattern": "^(?!x)"}, "properties": {"a": {"type": "integer"}}},
     [{"a": 1}, {"xa": 1}, {"b": "s"}, {"a": "s"}]),
])
def test_keywords_beyond_the_automaton_are_checked_as_values_complete(comp, schema, values):
    """Keywords the automaton can only over-approximate compile to a value check (jsonschema on the
    completed value): exact, never silently dropped."""
    validator = jsonschema.Draft202012Validator(schema)
    for v in values:
        assert accepts(comp, schema, v) == validator.is_valid(v), v


def test_many_patterns_that_exclude_each_other_split_the_keys_without_a_check(comp):
    """patternProperties split the key space by which patterns a key matches; regions are made
    pattern by pattern and empty ones dropped, so eight prefixes (SAML-like namespaces in MaskBench)
    give nine regions, not 256 combinations: exact, and no check."""
    schema = {"type": "object", "additionalProperties": False,
              "patternProperties": {f"^{c}:": {"type": t} for c, t in zip("abcdefgh", ["integer", "string"] * 4)}}
    assert not comp.compile_json_schema(schema).checks
    validator = jsonschema.Draft202012Validator(schema)
    for v in [{"a:1": 1, "b:1": "x"}, {"a:": "x"}, {"z": 1}, {"e:": 2, "f:": "y", "c:": 0}, {"h:": 1}, {}, {"ab": 1}]:
        assert accepts(comp, schema, v) == validator.is_valid(v), v


CONTAINS = [
    {"type": "array", "contains": {"const": "x"}, "maxItems": 3},
    {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array", "items": {"type": "integer"},
     "contains": {"minimum": 5}, "minContains": 2, "maxContains": 3, "maxItems": 5},
    {"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": [{"type": "boolean"}],
     "contains": {"type": "boolean"}, "maxContains": 1},
    {"$schema": "http://json-schema.org/draft-07/schema#", "contains": {"type": "string"}, "minContains": 0},
    {"contains": {"type": "integer", "maximum": 0}, "minItems": 2},
    {"maxItems": 3, "allOf": [{"contains": {"type": "string"}}, {"contains": {"type": "integer"}},
                              {"contains": {"const": None}}]},
]


@pytest.mark.parametrize("schema", CONTAINS)
def test_contains_is_counted_by_the_automaton(comp, schema):
    """``contains`` / ``minContains`` / ``maxContains`` compile into the array automaton (no check):
    every array of up to five items drawn from a few values is classified as jsonschema does."""
    g = comp.compile_json_schema(schema)
    assert not g.checks
    validator = jsonschema.validators.validator_for(schema)(schema)
    pool = [0, 6, -1, "x", "a", True, None]
    rng = random.Random(0)
    for v in [[]] + [[rng.choice(pool) for _ in range(rng.randrange(1, 6))] for _ in range(300)] + ["x", 3]:
        m = Matcher(g)
        assert (m.accept_string(json.dumps(v)) and m.is_accepting()) == validator.is_valid(v), v


@pytest.mark.parametrize("schema", [{"not": {"multipleOf": 3}}, {"type": "integer", "not": {"multipleOf": 4}},
                                    {"type": "number", "minimum": 2, "maximum": 30, "not": {"multipleOf": 1.5}},
                                    {"type": "array", "contains": {"type": "integer", "multipleOf": 3}, "maxItems": 2}])
def test_not_multiple_of_is_an_automaton(comp, schema):
    """``not: {multipleOf: m}`` is the positional numbers less the multiples' automaton (so a
    ``contains`` over multiples has a negation to count with); no check, and every number below
    (exponent spellings aside, which the number automata leave out) is classified as jsonschema does."""
    g = comp.compile_json_schema(schema)
    assert not g.checks
    validator = jsonschema.validators.validator_for(schema)(schema)
    numbers = [v for i in range(-20, 33) for v in (i, i + 0.5, i + 0.25)]
    values = numbers + ["x", None] if "contains" not in schema else [[3], [1], [1, 6], [2, 4], ["a", 9], [1, 2, 3]]
    for v in values:
        m = Matcher(g)
        assert (m.accept_string(json.dumps(v)) and m.is_accepting()) == validator.is_valid(v), v


ONE_KEY = {"type": "object", "maxProperties": 1, "propertyNames": {"pattern": "^....$"},
           "allOf": [{"not": {"propertyNames": {"not": {"pattern": "a1"}}}},
                     {"not": {"propertyNames": {"not": {"pattern": "b2"}}}}]}


@pytest.mark.parametrize("schema", [
    ONE_KEY,
    {"type": "object", "not": {"propertyNames": {"not": {"const": "0"}}}, "patternProperties": {"\\d": {"type": "boolean"}}},
    {"not": {"propertyNames": {"not": {"enum": ["a", "b"]}}}},
])
def test_some_key_matching_is_an_automaton(comp, schema):
    """"Some key matches S" (``not: {propertyNames: {not: S}}``) is a required key when S is a few
    strings, and where at most one key is allowed, that key's own schema: no check."""
    g = comp.compile_json_schema(schema, property_order="any")
    assert not g.checks
    validator = jsonschema.validators.validator_for(schema)(schema)
    for k in ["a1b2", "b2a1", "a12a", "xa1b", "0", "a", "b", "", "a1b2c"]:
        for v in ({k: True}, {k: 1}, {}, {k: True, "zz": False}, {k: 1, "0": True}, [k], k):
            m = Matcher(g)
            assert (m.accept_string(json.dumps(v)) and m.is_accepting()) == validator.is_valid(v), v


SOME_KEYS = {"type": "object", "propertyNames": {"pattern": "^..$"}, "maxProperties": 2,
             "properties": {"ab": {"type": "integer"}},
             "allOf": [{"not": {"propertyNames": {"not": {"pattern": c}}}} for c in "abcd"]}


@pytest.mark.parametrize("order", ["schema", "any"])
def test_keys_that_must_match_are_counted_by_the_object_automaton(comp, order):
    """Four "some key matches" schemas over at most two keys (``object6``): the automaton marks
    which each key meets -- defined keys by their name, undefined ones by their class of the key
    space -- and ends only with all four.  Every object of up to three two-letter keys is classified
    as jsonschema does, and no check is left."""
    g = comp.compile_json_schema(SOME_KEYS, property_order=order)
    assert not g.checks
    validator = jsonschema.Draft202012Validator(SOME_KEYS)
    keys = ["ab", "cd", "ac", "bd", "ad", "xa", "b", "dc"]
    objs = [{}] + [{k: 1} for k in keys] + [{k1: 1, k2: 2} for k1 in keys for k2 in keys if k1 < k2]
    objs += [{"ab": 1, "cd": 2, "xx": 3}, {"ab": "s", "cd": 1}, {"cd": 1, "ab": 2}]
    for v in objs:
        if order == "schema" and "ab" in v and list(v)[0] != "ab":
            continue  # schema order writes the defined key first
        m = Matcher(g)
        assert (m.accept_string(json.dumps(v)) and m.is_accepting()) == validator.is_valid(v), v
    m = Matcher(g)  # one key that meets none of the four leaves two to meet four: refused at once
    assert m.accept_string('{"') and not m.copy().accept_string('xy"')


def test_not_of_pattern_properties_that_forbid_keys_is_some_key(comp):
    """``not: {patternProperties: {P: false}}`` is "some key matches P": two of them over at most two
    keys leave no room for a key that matches neither, from its first byte."""
    schema = {"type": "object", "patternProperties": {"^[0-9]$": {"type": "array"}}, "additionalProperties": False,
              "maxProperties": 2, "not": {"anyOf": [{"patternProperties": {"^(1|3)$": False}},
                                                    {"patternProperties": {"^(2|4)$": False}}]}}
    g = comp.compile_json_schema(schema, property_order="any")
    assert not g.checks
    validator = jsonschema.Draft202012Validator(schema)
    for a in "012345":
        for v in ({a: []}, *({a: [], b: []} for b in "012345" if b != a), {a: 1}):
            m = Matcher(g)
            assert (m.accept_string(json.dumps(v)) and m.is_accepting()) == validator.is_valid(v), v
    m = Matcher(g)
    assert m.accept_string('{"') and not m.copy().accept_string('5"') and m.accept_string('3": [], "4": []}')


def test_the_one_key_that_must_match_is_steered_from_its_first_byte(comp):
    """The dead end a check at ``}`` left: a wrong first letter of the one key.  Now it is refused."""
    m = Matcher(comp.compile_json_schema(ONE_KEY))
    assert m.accept_string('{"')
    assert not m.copy().accept_string("x")
    assert m.accept_string('b2a1": 0}') and m.is_accepting()


def test_an_array_that_must_still_contain_offers_only_matching_items(comp):
    """The dead end a check at ``]`` left: two items that do not match and one slot left.  The
    automaton now allows only an item that matches, so no token leads where nothing is allowed."""
    m = Matcher(comp.compile_json_schema({"type": "array", "contains": {"const": "x"}, "maxItems": 3}))
    assert m.accept_string('["a", "b", ')
    assert not m.copy().accept_string('"y"') and not m.copy().accept_string("1")
    assert m.accept_string('"x"]') and m.is_accepting()


def test_not_items_is_an_array_that_contains(comp):
    """``not: {items: S}`` is "some item fails S", counted like ``contains``; an object schema that
    forbids every key is ``maxProperties: 0``, so its negation is a count (two such ``not items``
    are one ``contains``).  The last free slot then takes only an object with a key."""
    schema = {"type": "array", "maxItems": 2, "allOf": [
        {"not": {"items": {"patternProperties": {"ab": False}, "additionalProperties": False}}},
        {"not": {"items": {"patternProperties": {"cd": False}, "additionalProperties": False}}}]}
    g = comp.compile_json_schema(schema)
    assert not g.checks
    validator = jsonschema.Draft202012Validator(schema)
    for v in ([], [1], [{}], [{"a": 1}], [1, {"x": 0}], [{}, {}], [1, 2], [{"ab": 1}, 3], [1, 2, {"a": 1}]):
        m = Matcher(g)
        assert (m.accept_string(json.dumps(v)) and m.is_accepting()) == validator.is_valid(v), v
    m = Matcher(g)
    assert m.accept_string("[1, ") and not m.copy().accept_string("2") and not m.copy().accept_string("{}")
    assert m.accept_string('{"k": 0}]') and m.is_accepting()


def test_contains_the_automaton_cannot_count_is_checked(comp):
    """``contains`` the automaton does not count (a counted one beside another, one beside
    ``uniqueItems``, one whose subschema has no negation) is validated as the array completes."""
    schema = {"allOf": [{"contains": {"type": "string"}, "maxContains": 1}, {"contains": {"type": "integer"}}]}
    g = comp.compile_json_schema(schema)
    assert g.checks
    for v, ok in (([1, "a"], True), (["a"], False), ([1], False), ([1, "a", "b"], False)):
        m = Matcher(g)
        assert (m.accept_string(json.dumps(v)) and m.is_accepting()) == ok, v


@pytest.mark.parametrize("schema,keyword", [
    ({"$ref": "https://example.com/remote.json"}, "$ref"),
])
def test_unsupported_keywords_are_refused(comp, schema, keyword):
    with pytest.raises(StructgenError) as e:
        comp.compile_json_schema(schema)
    assert e.value.pointer.startswith("#")


def test_lenient_mode_overapproximates_and_validates(comp):
    g = comp.compile_json_schema({"type": "string", "format": "regex"}, lenient=True)
    assert g.validator is not None and not g.validator.is_valid("(")
    m = Matcher(g)
    assert m.accept_string('"("') and m.is_accepting()  # grammar over-approximates; validator decides


def test_huge_bounds_compile_fast_or_fail_clearly(comp):
    t0 = time.perf_counter()
    for schema in [{"type": "string", "maxLength": 10 ** 9}, {"type": "array", "maxItems": 10 ** 6},
                   {"type": "string", "minLength": 10 ** 6}]:
        try:
            comp.compile_json_schema(schema)
        except StructgenError:
            pass
    deep = {"type": "integer"}
    for _ in range(60):
        deep = {"type": "array", "items": deep}
    comp.compile_json_schema(deep)
    wide = {"anyOf": [{"type": "object", "properties": {f"k{i}": {"const": i}}, "required": [f"k{i}"]}
                      for i in range(200)]}
    comp.compile_json_schema(wide)
    assert time.perf_counter() - t0 < 60


def test_array_counts_past_the_limit_are_refused_with_their_pointer(comp):
    """A count the rule automaton cannot hold is refused up front, naming where it is
    (not a pointer-less "automaton too large" after seconds of building)."""
    from structgen.errors import UnsupportedFeature

    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}, "minItems": 100000}}}
    with pytest.raises(UnsupportedFeature) as e:
        comp.compile_json_schema(schema)
    assert e.value.pointer == "#/properties/a"


@pytest.mark.parametrize("fmt", ["annotate", "assert"])
def test_test_suite_baseline(comp, fmt):
    """Per keyword file, with ``format`` read either way: groups handled exactly never regress,
    and no invalid instance is ever accepted."""
    try:
        suite_folder()
    except DataNotFound as e:
        pytest.skip(str(e))
    report = run_test_suite(comp, format=fmt)
    print("\n" + report.table())
    bad = [g for g in report.groups if g.status in ("invalidation_error", "crash")]
    assert not bad, bad
    baseline = set(json.loads((Path(__file__).parent / "data" / f"test_suite_exact_{fmt}.json").read_text()))
    lost = baseline - report.exact_ids()
    assert not lost, f"groups that used to pass: {sorted(lost)}"


MASKBENCH = DATA / "maskbench-dev.jsonl.gz"


@pytest.mark.skipif(not MASKBENCH.exists(), reason="MaskBench not found beside the repo (../shared/data)")
def test_maskbench_slice(deepseek_info, deepseek_tokenizer):
    """A fixed random slice, scored as MaskBench's README says: >= 85% pass,
    zero invalidation errors, zero crashes; every failure an explicit structgen error."""
    rows = [json.loads(line) for line in gzip.open(MASKBENCH)]
    rng = random.Random(1234)
    sample = rng.sample(rows, 250)
    comp = GrammarCompiler(deepseek_info)
    counts = {"pass": 0, "compile_error": 0, "validation_error": 0, "invalidation_error": 0}
    invalidations = []
    t_end = time.perf_counter() + 420
    done = 0
    for r in sample:
        if time.perf_counter() > t_end:
            break
        done += 1
        try:
            g = comp.compile_json_schema(r["schema"], property_order="any")  # instances: keys in any order
        except StructgenError:
            counts["compile_error"] += 1
            continue
        m = Matcher(g)
        status = "pass"
        for t in r["tests"]:
            m.reset()
            ids = deepseek_tokenizer.encode(json.dumps(t["data"], ensure_ascii=False), add_special_tokens=False).ids
            ok = all(m.accept_token(i) for i in ids) and m.is_accepting()
            if t["valid"] and not ok:
                status = "validation_error"
                break
            if not t["valid"] and ok:
                status = "invalidation_error"
                invalidations.append(r["id"])
                break
        counts[status] += 1
    print(counts, f"{done} schemas")
    assert done >= 100
    assert not invalidations, invalidations
    assert counts["pass"] / done >= 0.90, counts


def test_excluded_numbers_in_every_spelling(comp):
    schema = {"type": "number", "not": {"enum": [1, 2.5, 0]}}
    for v in ["1", "1.0", "1.000", "2.5", "2.50", "0", "-0", "0.0"]:
        assert not accepts_text(comp, schema, v), v
    for v in ["1.5", "2", "-1", "0.25", "10"]:
        assert accepts_text(comp, schema, v), v
    assert not accepts_text(comp, {"if": {"const": 1}, "then": False}, "1")
    assert accepts_text(comp, {"if": {"const": 1}, "then": False}, "2")


def test_multiple_of_finite_decimals(comp):
    for m, good, bad in [(0.25, ["0.75", "2", "-1.5", "3.250"], ["0.1", "2.2", "1.125"]),
                         (0.3, ["0.9", "3", "-0.6"], ["1", "0.5"]),
                         (7, ["14", "-21", "0", "7.000"], ["15", "7.5"])]:
        schema = {"type": "number", "multipleOf": m}
        for v in good:
            assert accepts_text(comp, schema, v), (m, v)
        for v in bad:
            assert not accepts_text(comp, schema, v), (m, v)


def test_contradictory_schema_is_a_schema_error(comp):
    schema = {"type": "object", "required": ["a", "b"],
              "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}  # every object matches both branches
    with pytest.raises(SchemaError) as e:
        comp.compile_json_schema(schema)
    assert e.value.pointer == "#"


def test_any_property_order(comp):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                                              "c": {"type": "boolean"}}, "required": ["a", "c"]}
    kw = {"property_order": "any"}
    for text in ['{"c": true, "a": 1}', '{"b": "x", "c": false, "a": 2}', '{"a": 1, "c": true, "z": null}']:
        assert accepts_text(comp, schema, text, **kw), text
    for text in ['{"c": true}', '{"a": 1, "c": true, "a": 2}', '{"b": 1, "a": 1, "c": true}']:
        assert not accepts_text(comp, schema, text, **kw), text
    assert not accepts_text(comp, schema, '{"c": true, "a": 1}')  # schema order by default
    many = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(12)},
            "required": ["p11"], "additionalProperties": False}
    assert accepts_text(comp, many, '{"p11": 1, "p3": 2, "p0": 3}', **kw)
    assert not accepts_text(comp, many, '{"p3": 2}', **kw)
    assert not accepts_text(comp, many, '{"p11": 1, "x": 2}', **kw)


def test_any_order_untracked_members_are_one_edge_per_state(comp):
    """40 properties, 6 of them required (tracked): the object automaton has 2**6 * 2 states (and
    their after-comma twins) with the untracked members behind one rule, not 34 edges each."""
    props = {f"p{i}": {"type": "integer"} for i in range(40)}
    schema = {"type": "object", "properties": props, "required": [f"p{i}" for i in range(6)]}
    g = comp.compile_json_schema(schema, property_order="any")
    obj = [a for a in g._autos if a.name.startswith("obj")]
    edges = sum(len(a.term_next) for a in obj) + sum(len(row) for a in obj for row in a.nt_edges)
    assert obj and edges < 64 * 2 * 8, edges
    text = json.dumps({f"p{i}": i for i in reversed(range(40))})
    assert accepts_text(comp, schema, text, property_order="any")
    assert not accepts_text(comp, schema, json.dumps({f"p{i}": i for i in range(1, 40)}), property_order="any")


def test_any_order_with_too_many_keys_to_track_checks_them_at_close(comp):
    """Seven required keys and a dependency are too many for the automaton to track in any order:
    the distinct keys are checked when the object closes, so any order is accepted and a missing
    key, an unmet dependency or a property count out of bounds refuses the closing brace."""
    import random

    props = {k: {"type": "integer"} for k in "abcdefghij"}
    schema = {"type": "object", "properties": props, "required": list("abcdefg"),
              "dependentRequired": {"h": ["i"]}, "minProperties": 8, "maxProperties": 9}
    g = comp.compile_json_schema(schema, property_order="any")
    assert any(type(c).__name__ == "KeySetCheck" for cs in g.checks.value.values() for c in cs)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(0)
    n_valid = 0
    for _ in range(150):
        obj = {k: rng.randint(0, 3) for k in rng.sample("abcdefghij", rng.randint(6, 10))}
        n_valid += validator.is_valid(obj)
        assert accepts(comp, schema, obj, property_order="any") == validator.is_valid(obj), obj
    assert 0 < n_valid < 150
    m = Matcher(g)
    assert m.may_dead_end and m.accept_string('{"g": 1, "a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1')
    assert not m.accept_string("}")  # 7 keys: minProperties 8
    assert m.accept_string(', "j": 0}') and m.is_accepting()


def test_deep_nesting_compiles_on_the_compile_thread(comp):
    """Deeply nested schemas recurse deeply: they compile on the large-stack compile thread
    (from any caller thread, concurrently), and past the limit fail with a SchemaError."""
    import threading

    from structgen.errors import SchemaError

    def nested(depth: int) -> dict:
        s: dict = {"type": "integer"}
        for _ in range(depth):
            s = {"type": "array", "items": s, "maxItems": 1}
        return s

    results: dict = {}

    def work(key, depth):
        try:
            g = comp.compile_json_schema(nested(depth))
            m = Matcher(g)
            results[key] = m.accept_string("[" * depth + "1" + "]" * depth) and m.is_accepting()
        except Exception as e:  # noqa: BLE001 - reported below
            results[key] = e

    threads = [threading.Thread(target=work, args=(i, 600 + i)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {0: True, 1: True}
    with pytest.raises(SchemaError, match="nested too deeply"):
        comp.compile_json_schema(nested(60_000))


def test_wide_enums_compile_in_linear_time(comp):
    """A 20,000-value enum compiles in about a second (deduplication and membership were quadratic)."""
    t = time.perf_counter()
    g = comp.compile_json_schema({"enum": [f"value-{i}" for i in range(20000)] + ["value-7"]})
    assert time.perf_counter() - t < 60
    for text, ok in (('"value-19999"', True), ('"value-20000"', False), ('"value-7"', True)):
        m = Matcher(g)
        assert (m.accept_string(text) and m.is_accepting()) == ok, text


@pytest.mark.parametrize("draft,integer_fraction", [
    ("http://json-schema.org/draft-04/schema#", False),
    ("http://json-schema.org/draft-07/schema#", True),
    ("https://json-schema.org/draft/2020-12/schema", True),
])
def test_integers_follow_the_declared_draft(comp, draft, integer_fraction):
    """Draft-04 counts 5.0 as a number, not an integer; from draft-06 on it is an integer: the
    engine agrees with the draft's own validator either way (MaskBench labels by it)."""
    schemas = [{"$schema": draft, "type": "object", "properties": {"id": {"type": "integer"}}},
               {"$schema": draft, "type": "integer", "minimum": 3, "maximum": 70000},
               {"$schema": draft, "type": "integer", "multipleOf": 5}]
    for schema in schemas:
        validator = jsonschema.validators.validator_for(schema)(schema)
        for text in ['{"id": 12345.0}', '{"id": 12345}', "12345.0", "12345", "10.0", "10"]:
            assert accepts_text(comp, schema, text) == validator.is_valid(json.loads(text)), (schema, text)
    # the two readings really differ here
    assert accepts_text(comp, schemas[0], '{"id": 12345.0}') is integer_fraction


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema#",
                                   "http://json-schema.org/draft-07/schema#",
                                   "https://json-schema.org/draft/2020-12/schema", None])
def test_keywords_are_read_as_the_declared_draft_reads_them(comp, draft):
    """Drafts 4-7: keywords beside "$ref" are ignored, and keywords of later drafts (const before
    draft-06, if/then before draft-07, dependentRequired before 2019-09) mean nothing; the
    engine accepts exactly what the draft's own validator accepts."""
    defs = {"thing": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}
    props = {
        "ref": {"type": "string", "$ref": "#/definitions/thing"},
        "c": {"const": 3},
        "cond": {"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}},
        "dep": {"type": "object", "dependentRequired": {"a": ["b"]}},
    }
    schema = {"type": "object", "definitions": defs, "properties": props}
    if draft:
        schema["$schema"] = draft
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
    docs = [{"ref": {"n": 1}}, {"ref": "text"}, {"c": 3}, {"c": 4}, {"cond": {"a": 1}}, {"cond": {"a": 1, "b": 2}},
            {"dep": {"a": 1}}, {"dep": {"a": 1, "b": 2}}]
    verdicts = []
    for doc in docs:
        expected = validator.is_valid(doc)
        verdicts.append(expected)
        assert accepts(comp, schema, doc) == expected, (draft, doc)
    if draft and "draft-04" in draft:  # the draft really changes the verdicts checked here
        assert verdicts[:4] == [True, False, True, True] and verdicts[4] and verdicts[6]


def test_combinatorial_anyof_nesting_compiles_loosely_in_bounded_time(comp, monkeypatch):
    """allOf of anyOfs distributes into every combination of branches (4**8 here): past the
    budget the schema is compiled again without distributing them -- each anyOf over-approximated
    and checked when its value completes -- instead of running for minutes or being refused."""
    from structgen.grammar.json_schema import limits

    monkeypatch.setattr(limits, "MAX_BRANCH_CONJUNCTIONS", 500)
    types = ["string", "integer", "boolean", "null"]
    schema = {"type": "object",
              "allOf": [{"anyOf": [{"properties": {f"p{level}": {"type": t}}} for t in types]} for level in range(8)]}
    t0 = time.perf_counter()
    g = comp.compile_json_schema(schema, property_order="any")
    assert time.perf_counter() - t0 < 30
    assert g.checks.value  # the dropped anyOfs are checked
    validator = jsonschema.Draft202012Validator(schema)
    for v in [{"p0": "x", "p3": 1, "p7": None}, {"p1": [1]}, {"p2": {}}, {}, {"q": []}, {"p5": True, "p6": 1.5}]:
        assert accepts(comp, schema, v, property_order="any") == validator.is_valid(v), v


@pytest.mark.parametrize("schema,pointer", [
    ({"type": "string", "pattern": "[z-a]"}, "#/pattern"),
    ({"properties": {"a": {"type": "string", "pattern": "("}}}, "#/properties/a/pattern"),
    ({"type": "object", "patternProperties": {"(": {}}}, "#/patternProperties/("),
    ({"type": "string", "not": {"pattern": "a{2,1}"}}, "#/not/pattern"),
])
def test_a_pattern_that_is_no_regex_is_a_schema_error_naming_it(comp, schema, pointer):
    """Before, such a schema compiled (the pattern over-approximated and checked as its value
    completed, a check that could never pass) and generation wandered to the end of its budget."""
    with pytest.raises(SchemaError, match="invalid regular expression") as e:
        comp.compile_json_schema(schema)
    assert e.value.pointer == pointer


@pytest.mark.parametrize("schema,good,bad", [
    ({"enum": [1e-09]}, ["1e-09", "0.000000001", "0.0000000010"], ["1e-10", "0.00000001", "0.000000002"]),
    ({"const": {"a": [2.5e-3]}}, ['{"a":[0.0025]}', '{"a":[0.0025]}', '{"a":[0.00250]}'], ['{"a":[0.025]}']),
    ({"enum": [100, -0.5]}, ["100", "100.0", "100.00", "-0.5", "-0.50"], ["1e2", "-0.6", "10"]),
    ({"enum": [0]}, ["0", "0.0", "-0"], ["00", "0.1"]),
])
def test_enum_numbers_take_every_positional_spelling(comp, schema, good, bad):
    """A JSON number has many spellings; an enum or const value takes json.dumps' one and every
    positional one (found by the fuzz campaign: 1e-09 refused 0.000000001)."""
    for text in good:
        assert accepts_text(comp, schema, text), text
    for text in bad:
        assert not accepts_text(comp, schema, text), text


def test_const_objects_in_any_member_order_with_property_order_any(comp):
    schema = {"enum": [{"a": 1, "b": [True], "c": {"x": None, "y": "z"}}, 3]}
    for text in ('{"a":1,"b":[true],"c":{"x":null,"y":"z"}}', '{"c":{"y":"z","x":null},"b":[true],"a":1}'):
        assert accepts_text(comp, schema, text, property_order="any"), text
    for text in ('{"a":1,"a":1,"b":[true],"c":{"x":null,"y":"z"}}', '{"b":[true],"a":1}'):
        assert not accepts_text(comp, schema, text, property_order="any"), text
    assert not accepts_text(comp, schema, '{"b":[true],"a":1,"c":{"x":null,"y":"z"}}')  # schema order by default


@pytest.mark.parametrize("schema", [
    {"dependencies": {"x": {"not": {"required": ["error"]}}}},
    {"dependentSchemas": {"x": {"not": {"required": ["error"]}}}},
    {"dependencies": {"x": {"anyOf": [{"not": {"required": ["a"]}}, {"required": ["b"]}]}}},
    # the fuzz case (a mutated MaskBench schema) that refused null: oneOf's second branch holds for it
    {"oneOf": [{"anyOf": [{"required": ["x"], "not": {"required": ["error"]}},
                          {"required": ["error"], "not": {"required": ["x"]}, "type": "boolean"}]},
               {"dependencies": {"x": {"not": {"required": ["error"]}}}}]},
])
def test_a_dependency_holds_for_every_value_that_is_not_an_object(comp, schema):
    """A dependency fires on an object with its key only: ``not required`` in its schema is false of a
    non-object, yet the dependency is not consulted there.  Every verdict equals jsonschema's (members
    in any order: the default order is the schema's)."""
    validator = jsonschema.Draft202012Validator if "dependentSchemas" in schema else jsonschema.Draft7Validator
    for value in [None, True, 1, "s", [], {}, {"x": 1}, {"error": 1}, {"x": 1, "error": 2}, {"x": 1, "a": 1},
                  {"x": 1, "a": 1, "b": 2}]:
        assert accepts(comp, schema, value, property_order="any") == validator(schema).is_valid(value), value


@pytest.mark.parametrize("pattern", [r"^$|(^(?:\S+\s+){0,19}\S+$)", r"^01$|^07$", r"(^$)|(^[a-f0-9]{8}$)"])
def test_a_pattern_with_anchors_inside_is_an_automaton(comp, pattern):
    """Anchors inside a pattern (MaskBench's word-count and either-empty-or patterns) hold where the
    string starts and ends: no check where the string ends, verdicts as jsonschema's."""
    schema = {"type": "string", "pattern": pattern, "maxLength": 60}
    g = comp.compile_json_schema(schema)
    assert not g.checks
    validator = jsonschema.Draft202012Validator(schema)
    for v in ["", "01", "07", "0", "017", "a b c", " a", "a ", "deadbeef", "deadbeef0", "w " * 20 + "w", "x" * 61]:
        m = Matcher(g)
        assert (m.accept_string(json.dumps(v)) and m.is_accepting()) == validator.is_valid(v), v


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "additionalProperties": False},
               {"type": "object", "properties": {"a": {"type": "integer"}, "c": {"type": "boolean"}}, "additionalProperties": False}]},
    {"oneOf": [{"type": "object", "properties": {"kind": {"enum": ["x", "y"]}, "b": {}}, "additionalProperties": False,
                "required": ["kind"]},
               {"type": "object", "properties": {"kind": {"const": "x"}, "c": {}}, "additionalProperties": False}]},
    {"oneOf": [{"type": "object", "patternProperties": {"^x": {}}, "additionalProperties": False},
               {"type": "object", "properties": {"xa": {"type": "integer"}}, "propertyNames": {"maxLength": 2}}]},
])
def test_overlapping_one_of_over_closed_objects_is_an_automaton(comp, schema):
    """oneOf over closed objects (``additionalProperties: false``, discriminated unions) whose branches
    overlap: each branch joined with the others' negations, "some key is undefined" and "some key fails
    propertyNames" among them (counted by the object automaton): no check, verdicts as jsonschema's."""
    g = comp.compile_json_schema(schema, property_order="any")
    assert not g.checks, g.checks.describe()
    validator = jsonschema.Draft202012Validator(schema)
    for v in [None, 1, {}, {"a": 1}, {"b": "s"}, {"c": True}, {"a": 1, "b": "s", "c": True}, {"a": "x"}, {"kind": "x"},
              {"kind": "y"}, {"kind": "x", "b": 1}, {"kind": "x", "c": 1}, {"kind": "z"}, {"c": 1}, {"xa": 1}, {"xa": "s"},
              {"xb": 1, "q": 2}, {"q": 1}, {"xa": 1, "q": 1}, {"xab": 1}]:
        assert accepts(comp, schema, v, property_order="any") == validator.is_valid(v), v


MEMBER_SCHEMAS = [
    # MaskBench's oneOf4: keys matching a pattern, their values bounded differently per branch
    {"type": "object", "maxProperties": 1, "oneOf": [
        {"patternProperties": {"a": {"multipleOf": 10, "maximum": 20}}},
        {"patternProperties": {"a": {"multipleOf": 5, "maximum": 80}}},
        {"patternProperties": {"a": {"multipleOf": 5, "maximum": 60}}}]},
    # a value-typed additionalProperties beside defined keys and a pattern
    {"oneOf": [{"type": "object", "properties": {"id": {"type": "integer"}}, "patternProperties": {"^x-": {}},
                "additionalProperties": {"type": "string"}},
               {"type": "object", "properties": {"id": {"minimum": 3}}}]},
    # the form written out: "some member whose key matches ^n has a value that is not a number"
    {"type": "object", "not": {"patternProperties": {"^n": {"type": "number"}}}, "maxProperties": 3},
]
MEMBER_VALUES = [None, 1, "s", {}, {"a": 10}, {"a": 5}, {"a": 40}, {"a": 70}, {"a": 100}, {"ba": 20}, {"a": "x"}, {"b": 1},
                 {"a": 10, "b": 1}, {"id": 1}, {"id": 5}, {"id": "s"}, {"q": "s"}, {"q": 1}, {"id": 4, "q": 1},
                 {"id": 4, "q": "s"}, {"x-a": 1}, {"x-a": 1, "id": 2}, {"n": 1}, {"n": "s"}, {"na": None, "m": 1},
                 {"n": 1, "nb": [1]}, {"n": 1, "o": 2}]


@pytest.mark.parametrize("order", ["any", "schema"])
@pytest.mark.parametrize("schema", MEMBER_SCHEMAS, ids=range(len(MEMBER_SCHEMAS)))
def test_some_member_with_a_value_outside_its_schema_is_an_automaton(comp, schema, order):
    """A value-typed patternProperties or additionalProperties negates to "some member of these keys
    has a value outside it" (``negation.member_form``), which the object automaton counts: the oneOfs
    over such branches compile without checks, with jsonschema's verdicts."""
    g = comp.compile_json_schema(schema, property_order=order)
    assert not g.checks, g.checks.describe()
    validator = jsonschema.Draft202012Validator(schema)
    for v in MEMBER_VALUES:
        if order == "schema" and isinstance(v, dict) and len(v) > 1:
            continue  # (schema order: defined keys first, which these need not follow)
        assert accepts(comp, schema, v, property_order=order) == validator.is_valid(v), v


def test_a_one_of_whose_joined_branches_hold_too_much_is_checked_not_refused(comp):
    """Twelve branches each requiring a key of a closed object (helm-testsuite's ``asserts``): joined
    with the others' negations, a branch tests the presence of more keys than the object automaton
    tracks.  That oneOf is compiled again as anyOf over its branches and checked as the value
    completes (it was refused); verdicts as jsonschema's."""
    keys = [f"k{i}" for i in range(12)]
    schema = {"type": "object", "properties": {k: True for k in keys}, "additionalProperties": False,
              "oneOf": [{"required": [k], "properties": {k: {"type": "integer"}}} for k in keys]}
    g = comp.compile_json_schema(schema, property_order="any")
    assert g.checks
    validator = jsonschema.Draft202012Validator(schema)
    for v in [{}, {"k0": 1}, {"k0": "s"}, {"k0": 1, "k1": 2}, {"k0": 1, "k1": "x"}, {"k3": 1, "k4": None, "k11": []},
              {"z": 1}]:
        assert accepts(comp, schema, v, property_order="any") == validator.is_valid(v), v


def test_a_one_of_whose_joins_distribute_too_far_is_checked_alone(comp, monkeypatch):
    """Joined branches are bounded (MAX_JOIN_CONJUNCTIONS): past it that oneOf is checked, and only it --
    the schema is not compiled loosely as a whole (an anyOf beside it keeps its automaton)."""
    from structgen.grammar.json_schema import limits

    monkeypatch.setattr(limits, "MAX_JOIN_CONJUNCTIONS", 2)
    closed = [{"type": "object", "properties": {"a": {"type": "integer"}, k: {}}, "additionalProperties": False}
              for k in "bcd"]
    schema = {"type": "object", "properties": {"u": {"oneOf": closed},
                                               "w": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}
    g = comp.compile_json_schema(schema, property_order="any")
    assert "#/properties/u" in g.checks.describe() and "#/properties/w" not in g.checks.describe()
    validator = jsonschema.Draft202012Validator(schema)
    for v in [{"u": {"a": 1}}, {"u": {"b": 1}}, {"u": {"b": 1, "c": 2}}, {"u": {"e": 1}}, {"w": 1}, {"w": None},
              {"u": {"d": [], "a": 2}, "w": "s"}]:
        assert accepts(comp, schema, v, property_order="any") == validator.is_valid(v), v


# a schema-form dependency over values (as in MaskBench's o12175: `format` decides what `type` may be)
KIND_BY_FORMAT = {"type": "object", "properties": {"type": {"type": "string"}, "format": {"type": "string"}},
                  "dependencies": {"format": {"oneOf": [
                      {"properties": {"type": {"enum": ["integer"]}, "format": {"enum": ["int32", "int64"]}}},
                      {"properties": {"type": {"enum": ["number"]}, "format": {"enum": ["float", "double"]}}}]},
                      "n": ["type"]}}


@pytest.mark.parametrize("schema", [
    KIND_BY_FORMAT,
    {"dependentSchemas": {"a": {"properties": {"b": {"maximum": 3}}}, "b": {"required": ["c"]}}},
    {"dependencies": {"a": {"properties": {"b": {"type": "string"}}}, "b": False}},
])
def test_a_dependency_over_values_is_an_automaton(comp, schema):
    """A schema-form dependency that reads values (not only which keys are present) is three disjoint
    branches the automata hold -- not an object, an object without the key, an object with it that
    meets the schema -- so no check is left for the object's close, where a wrong value read earlier
    would already have doomed it (a dead end through vLLM).  Every verdict equals jsonschema's."""
    g = comp.compile_json_schema(schema, property_order="any")
    assert not g.checks, g.checks.describe()
    validator = (jsonschema.Draft202012Validator if "dependentSchemas" in schema else jsonschema.Draft7Validator)(schema)
    keys = {"type": ["integer", "number", "x"], "format": ["int32", "float", "y"], "n": [1], "a": [0],
            "b": [2, 5, "s"], "c": [None]}
    values = [None, 1, "s", [], {}]
    for k1, v1s in keys.items():
        for v1 in v1s:
            values.append({k1: v1})
            for k2, v2s in keys.items():
                if k2 != k1:
                    values.extend({k1: v1, k2: v2} for v2 in v2s)
    values += [{"format": "int32", "type": "integer", "n": 1}, {"a": 0, "b": 2, "c": None}, {"a": 0, "b": 5, "c": 1}]
    for value in values:
        m = Matcher(g)
        assert (m.accept_string(json.dumps(value)) and m.is_accepting()) == validator.is_valid(value), value


_D4 = "http://json-schema.org/draft-04/schema#"
_D2020 = "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("schema, values", [
    # a "$schema" inside switches the draft for what that subschema reaches (its children, its refs' targets),
    # as jsonschema evaluates it; the keywords beside a "$ref" count or not by the draft that reached it
    ({"properties": {"a": {"$schema": _D4, "$ref": "#/definitions/s", "type": "number"}},
      "definitions": {"s": {"type": "string"}}}, [{"a": "x"}, {"a": 1}]),
    ({"properties": {"a": {"$ref": "#/definitions/w"}},
      "definitions": {"w": {"$schema": _D4, "properties": {"b": {"$ref": "#/definitions/s", "type": "number"}}},
                      "s": {"type": "string"}}}, [{"a": {"b": "x"}}, {"a": {"b": 1}}]),
    ({"properties": {"a": {"$schema": _D4, "properties": {"b": {"$ref": "#/definitions/s", "type": "number"}}}},
      "definitions": {"s": {"type": "string"}}}, [{"a": {"b": "x"}}, {"a": {"b": 1}}]),
    ({"$schema": _D4, "properties": {"a": {"$schema": _D2020, "properties": {
        "b": {"$ref": "#/definitions/s", "type": "number"}}}}, "definitions": {"s": {"type": "string"}}},
     [{"a": {"b": "x"}}, {"a": {"b": 1}}]),
    # draft-04 writes integers without a fraction: 1.0 is not one inside, is one outside
    ({"properties": {"a": {"$schema": _D4, "properties": {"i": {"type": "integer"}}}, "j": {"type": "integer"}}},
     [{"a": {"i": 1.0}}, {"a": {"i": 1}}, {"j": 1.0}]),
    # the fuzz case (a mutated MaskBench schema): a draft-04 definition reached by a $ref from the undeclared root
    ({"definitions": {"user": {"$schema": _D4, "properties": {"mail": {"$ref": "#/definitions/user/definitions/m",
                                                                        "type": "number"}},
                               "definitions": {"m": {"type": ["string"]}}, "type": ["object"]}},
      "properties": {"user": {"$ref": "#/definitions/user"}}, "type": ["object"]},
     [{"user": {"mail": "a@b.c"}}, {"user": {"mail": 1}}]),
])
def test_a_schema_inside_switches_the_draft_as_jsonschema_does(comp, schema, values):
    validator = jsonschema.validators.validator_for(schema)(schema)
    for value in values:
        text = json.dumps(value)
        assert accepts_text(comp, schema, text, property_order="any") == validator.is_valid(value), value


def test_a_ref_into_a_place_the_meta_schema_never_checked_gets_a_schema_error(comp):
    """``#/name`` is under a key that is no keyword, so the meta-schema check does not look there; a
    oneOf over it read its ``properties`` as an object and raised AttributeError (fuzz seed 27, case
    9440). Now: a SchemaError naming the pointer."""
    schema = {"type": "object", "properties": {"x": {"oneOf": [{"$ref": "#/name"}, {"$ref": "#/other"}]}},
              "name": {"type": "object", "properties": "object"}, "other": {"type": "string"}}
    with pytest.raises(SchemaError, match="properties must be an object") as e:
        comp.compile_json_schema(schema)
    assert e.value.pointer == "#/name/properties"


@pytest.mark.parametrize("value", [-3, [False], "x", None, {"op": "remove", "path": "/a"},
                                   {"op": "move", "path": "/a", "from": "/b"}, {"op": "remove"}])
def test_one_of_branches_told_apart_by_a_property_still_overlap_on_non_objects(comp, value):
    """Branches without "type" that differ only by a required property's values exclude each other
    for objects, but every non-object matches all of them, so oneOf refuses it (fuzz seed 28, case
    4160: a JSON Patch schema whose branches lost their "type": -3 was accepted)."""
    schema = {"oneOf": [{"required": ["op", "path"], "properties": {"op": {"enum": ["remove"]}}},
                        {"required": ["op", "path", "from"], "properties": {"op": {"enum": ["move", "copy"]}}}]}
    assert accepts(comp, schema, value, property_order="any") == jsonschema.Draft202012Validator(schema).is_valid(value)


# -- generation policies: members="named", strict=True, plain_integers --------------------------------

def test_named_members_close_objects_that_name_members_and_leave_maps_and_free_objects_open(comp):
    named = {"members": "named"}
    person = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}
    assert accepts(comp, person, {"name": "Ada"}, **named)
    assert not accepts(comp, person, {"name": "Ada", "type": "object"}, **named)
    assert accepts(comp, person, {"name": "Ada", "type": "object"})  # the spec's language is unchanged
    assert accepts(comp, {"type": "object"}, {"x": 1}, **named)  # names nothing: any member is the point
    tags = {"type": "object", "additionalProperties": {"type": "string"}}
    assert accepts(comp, tags, {"x": "y"}, **named)  # a map
    pats = {"type": "object", "properties": {"a": {}}, "patternProperties": {"^x-": {"type": "integer"}}}
    assert accepts(comp, pats, {"a": 1, "x-b": 2}, **named) and not accepts(comp, pats, {"a": 1, "b": 2}, **named)


def test_named_members_close_the_conjunction_not_each_part(comp):
    """A key named by any allOf part, by if/then/else or by dependentSchemas is allowed."""
    named = {"members": "named"}
    parts = {"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {"type": "integer"}}}],
             "required": ["a", "b"]}
    assert accepts(comp, parts, {"a": 1, "b": 2}, **named) and not accepts(comp, parts, {"a": 1, "b": 2, "c": 3}, **named)
    cond = {"type": "object", "properties": {"kind": {"enum": ["car", "bike"]}}, "required": ["kind"],
            "if": {"properties": {"kind": {"const": "car"}}}, "then": {"properties": {"doors": {"type": "integer"}},
                                                                       "required": ["doors"]}}
    assert accepts(comp, cond, {"kind": "car", "doors": 4}, **named)
    assert accepts(comp, cond, {"kind": "bike"}, **named)


def test_a_policy_never_empties_a_satisfiable_object_and_strict_says_where_it_does(comp):
    from structgen.errors import UnsatisfiableSchema

    few = {"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 2}
    assert accepts(comp, few, {"a": 1, "b": 2}, members="named")  # closed it would have no value: left open
    with pytest.raises(UnsatisfiableSchema, match="strict=True") as e:
        comp.compile_json_schema({"type": "object", "properties": {"inner": few}, "required": ["inner"]}, strict=True)
    assert e.value.pointer == "#/properties/inner"


def test_strict_keeps_if_then_else_satisfiable(comp):
    """strict=True closed the objects inside if/then/else one by one, so no object met both the if and the
    properties beside it; it closes the conjunction now."""
    schema = {"type": "object", "properties": {"country": {"enum": ["US", "CA"]}, "zip": {"type": "string"}},
              "required": ["country", "zip"],
              "if": {"properties": {"country": {"const": "US"}}},
              "then": {"properties": {"zip": {"pattern": "^[0-9]{5}$"}}},
              "else": {"properties": {"zip": {"pattern": "^[A-Z][0-9][A-Z] [0-9][A-Z][0-9]$"}}}}
    assert accepts(comp, schema, {"country": "US", "zip": "12345"}, strict=True)
    assert accepts(comp, schema, {"country": "CA", "zip": "K1A 0B1"}, strict=True)
    assert not accepts(comp, schema, {"country": "US", "zip": "K1A 0B1"}, strict=True)
    assert not accepts(comp, schema, {"country": "US", "zip": "12345", "state": "NY"}, strict=True)
    assert not accepts(comp, {"type": "object"}, {"x": 1}, strict=True)  # strict closes free-form objects too


def test_plain_integers_are_written_without_a_fraction(comp):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}
    assert accepts_text(comp, schema, '{"n":5.0}')  # the spec: 5.0 is an integer
    assert not accepts_text(comp, schema, '{"n":5.0}', plain_integers=True)
    assert not accepts_text(comp, schema, '{"n":5e0}', plain_integers=True)
    assert accepts_text(comp, schema, '{"n":5}', plain_integers=True)


@pytest.mark.parametrize("schema,pointer", [
    ({"type": "object", "properties": {"a": {"type": "object", "required": ["b"],
                                             "properties": {"b": {"type": "string", "minLength": 5, "maxLength": 2}}}},
      "required": ["a"]}, "#/properties/a/properties/b"),
    ({"type": "array", "items": {"allOf": [{"type": "string"}, {"type": "integer"}]}, "minItems": 1}, "#/items"),
    ({"type": "object", "properties": {"opt": {"enum": []}, "req": {"not": {}}}, "required": ["req"]},
     "#/properties/req"),
    ({"allOf": [{"type": "string"}, {"type": "integer"}]}, "#"),
])
def test_an_unsatisfiable_schema_names_the_deepest_empty_subschema_every_value_needs(comp, schema, pointer):
    """UnsatisfiableSchema pointed at "#" whatever the cause."""
    from structgen.errors import UnsatisfiableSchema

    with pytest.raises(UnsatisfiableSchema) as e:
        comp.compile_json_schema(schema)
    assert e.value.pointer == pointer
