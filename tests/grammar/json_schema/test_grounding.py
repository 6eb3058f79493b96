"""Grounded extraction: string values constrained to spans of a source text (``SchemaOptions.source``,
``structgen.grammar.grounding``)."""
from __future__ import annotations

import json
import random
import time

import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import SchemaError
from structgen.grammar.grounding import canonical_encoding, is_span, span_content_dfa, span_string_dfa
from structgen.grammar.json_schema import SchemaOptions, schema_to_ir

TEXTS = [
    "Marie Curie won.",
    'a"b\\c\nd\te\x00f\x1f',
    "héllo wörld 😀 ok\u2028x\x7f",
    "  aa  ",
    "abcabcab",
    "é è ê",  # encodings sharing a first byte
    '\x01\x02 \x1f"\\\\',  # escapes sharing a first byte
    "\t\n ",
    "",
    "x\ud800y",  # a lone surrogate ends spans
]

SOURCE = 'In 1903, Marie Curie and Pierre Curie shared the "Nobel" prize.\nWrite to marie@sorbonne.fr'


def content(s: str) -> bytes:
    return json.dumps(s, ensure_ascii=False)[1:-1].encode()


def language_size(d) -> int:
    """How many byte strings an acyclic DFA accepts (a span automaton's language is finite)."""
    ranges = d.class_ranges()
    width = [sum(b - a + 1 for a, b in r) for r in ranges]
    memo: dict[int, int] = {}
    order, seen = [], set()
    stack = [(d.start, False)]
    while stack:  # post-order, without recursion
        s, done = stack.pop()
        if done:
            order.append(s)
            continue
        if s in seen:
            continue
        seen.add(s)
        stack.append((s, True))
        stack.extend((int(t), False) for t in d.trans[s] if t >= 0 and int(t) not in seen)
    for s in order:
        memo[s] = int(d.accept[s]) + sum(width[c] * memo[int(t)] for c, t in enumerate(d.trans[s]) if t >= 0)
    return memo[d.start]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_the_automaton_accepts_exactly_the_trimmed_spans(text):
    d = span_content_dfa(text)
    subs = {text[i:j] for i in range(len(text)) for j in range(i + 1, len(text) + 1)}
    spans = {s for s in subs if is_span(s, text)}
    for s in subs:
        if not any(0xD800 <= ord(c) <= 0xDFFF for c in s):
            assert d.matches(content(s)) == (s in spans), s
    assert language_size(d) == len(spans)  # nothing else: no other spelling, no non-span
    quoted = span_string_dfa(text)
    assert all(quoted.matches(json.dumps(s, ensure_ascii=False).encode()) for s in spans)
    assert not d.matches(b"")


def test_random_non_spans_are_refused():
    rng = random.Random(7)
    text = "".join(rng.choice("abc \"\\\né😀") for _ in range(300))
    d = span_content_dfa(text)
    for _ in range(2000):
        s = "".join(rng.choice("abc \"\\\né😀") for _ in range(rng.randint(1, 12)))
        assert d.matches(content(s)) == is_span(s, text), s


def test_one_canonical_encoding_and_no_blank_edges():
    d = span_content_dfa('Ab/c "q"\n')
    assert d.matches(b"Ab/c") and not d.matches(b"\\u0041b") and not d.matches(b"Ab\\/c")
    assert d.matches(b'c \\"q\\"') and not d.matches(b"c ") and not d.matches(b" \\\"q")
    assert canonical_encoding("\n") == b"\\n" and canonical_encoding("\x00") == b"\\u0000"
    assert canonical_encoding("é") == "é".encode() and canonical_encoding('"') == b'\\"'
    assert span_content_dfa("   ").is_empty() and span_content_dfa("").is_empty()


@pytest.fixture(scope="module")
def comp(smol_info):
    return GrammarCompiler(smol_info)


def accepts(comp, schema, value, source=SOURCE, **kw) -> bool:
    m = Matcher(comp.compile_json_schema(schema, source=source, **kw))
    return m.accept_string(json.dumps(value, ensure_ascii=False)) and m.is_accepting()


def log(schema, source=SOURCE) -> dict:
    ir, _ = schema_to_ir(schema, SchemaOptions(source=source))
    return getattr(ir, "grounding", {"grounded": [], "fell_back": []})


NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def test_values_are_spans_of_the_source(comp):
    assert accepts(comp, NAME, {"name": "Marie Curie"})
    assert accepts(comp, NAME, {"name": 'the "Nobel" prize.\nWrite'})
    assert not accepts(comp, NAME, {"name": "Marie Dupont"})
    assert not accepts(comp, NAME, {"name": " Marie"}) and not accepts(comp, NAME, {"name": "Marie "})
    assert not accepts(comp, NAME, {"name": ""})
    assert accepts(comp, NAME, {"name": "Marie Dupont"}, source=None)  # no source: any string
    # other keys' values (any JSON value) hold grounded strings too
    assert log(NAME) == {"grounded": ["#/properties/name", "(any JSON value)"], "fell_back": []}


def test_keywords_meet_the_spans(comp):
    first = {"type": "string", "pattern": "^[A-Z][a-z]+$"}
    assert accepts(comp, first, "Marie") and not accepts(comp, first, "Maria")
    short = {"type": "string", "maxLength": 5, "minLength": 4}
    assert accepts(comp, short, "Curie") and not accepts(comp, short, "Marie C") and not accepts(comp, short, "In")
    assert not accepts(comp, {"type": "string", "not": {"enum": ["Marie"]}}, "Marie")
    assert accepts(comp, {"type": "array", "items": {"type": "string"}}, ["Marie", "Pierre Curie"])


def test_enum_const_keys_and_opt_out_are_not_grounded(comp):
    schema = {"type": "object", "properties": {
        "kind": {"enum": ["physicist", "chemist"]}, "tag": {"const": "nobel"},
        "free": {"type": "string", "x-grounded": False}, "name": {"type": "string"}},
        "additionalProperties": {"type": "integer"}}
    value = {"kind": "chemist", "tag": "nobel", "free": "made up", "name": "Pierre Curie", "any key": 3}
    assert accepts(comp, schema, value)
    assert not accepts(comp, schema, {**value, "name": "made up"})
    assert log(schema) == {"grounded": ["#/properties/name"], "fell_back": []}
    names = {"type": "object", "propertyNames": {"maxLength": 3}, "additionalProperties": {"type": "string"}}
    assert accepts(comp, names, {"xyz": "Curie"}) and not accepts(comp, names, {"xyz": "Curies"})
    with pytest.raises(SchemaError, match="x-grounded"):
        comp.compile_json_schema({"type": "string", "x-grounded": "no"}, source=SOURCE)


def test_fields_no_span_can_meet_fall_back(comp):
    email = {"type": "object", "properties": {"e": {"type": "string", "format": "email"}}}
    assert accepts(comp, email, {"e": "marie@sorbonne.fr"}) and not accepts(comp, email, {"e": "x@y.org"})
    assert accepts(comp, email, {"e": "x@y.org"}, source="Marie Curie, no address")  # fell back
    assert not accepts(comp, email, {"e": "Marie Curie"}, source="Marie Curie, no address")
    fell = log(email, "Marie Curie, no address")["fell_back"]
    assert [p for p, _ in fell] == ["#/properties/e"] and "no span" in fell[0][1]
    long = {"type": "string", "minLength": 500}
    assert accepts(comp, long, "x" * 500) and "minLength" in log(long)["fell_back"][0][1]
    assert log(NAME, "   ")["fell_back"][0][0] == "#/properties/name"


def test_the_source_is_part_of_the_cache_key(comp):
    a = comp.compile_json_schema(NAME, source="Marie Curie")
    assert comp.compile_json_schema(NAME, source="Marie Curie") is a
    assert comp.compile_json_schema(NAME, source="Pierre Curie") is not a
    with pytest.raises(SchemaError, match="source"):
        SchemaOptions(source=b"bytes")


def test_a_50k_character_source_compiles_quickly(comp):
    rng = random.Random(3)
    words = "the of and radium polonium Nobel prize Paris Warsaw née Skłodowska étude 1903 😀 \"q\" \\ \n".split(" ")
    text = " ".join(rng.choice(words) for _ in range(12_000))[:49_980] + " Marie Curie"
    schema = {"type": "object", "properties": {
        "name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}},
        "either": {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 5}]}}}
    t = time.perf_counter()
    g = comp.compile_json_schema(schema, source=text)
    elapsed = time.perf_counter() - t
    print(f"\n50k-character source: compiled in {elapsed:.2f} s")
    assert elapsed < 30  # a loose bound (shared machine); the print is the measurement
    m = Matcher(g)
    assert m.accept_string('{"name": "Marie Curie", "tags": ["radium", "')
    m.next_token_mask()
    assert m.accept_string('Paris"], "either": "Marie Curie"}') and m.is_accepting()
    too_long = json.dumps(text[-30:].strip(), ensure_ascii=False)  # a span, over maxLength
    for bad in ('{"name": "Marie Dupont"}', '{"tags": [%s]}' % too_long, '{"either": "Marie"}'):
        m = Matcher(g)
        assert not (m.accept_string(bad) and m.is_accepting()), bad


@pytest.mark.parametrize("value,ok", [
    ("Accra", True), ("Ac", False), ("ccra", False), ("2025", True), ("202", False), ("Open Source Workshop", True),
    ("Source Work", False), ("(988) 847-7508", True), ("988) 847-7508", False), ("(988", False),
    ("silva.m@brightwater.tv", True), ("[draft]", True), ("draft]", False),
])
def test_spans_never_cut_a_word_and_keep_both_brackets_of_a_pair(value, ok):
    """A small model cut words ("Ac" for Accra, "202" for 2025) and pairs ("988) 847-7508") when the tokens
    inside a JSON string were unusual; such spans are refused by the automaton, as by is_span."""
    text = "On 2025-01-13 the Open Source Workshop [draft] meets in Accra; call (988) 847-7508 or silva.m@brightwater.tv."
    assert span_content_dfa(text).matches(content(value)) is ok
    assert is_span(value, text) is ok


def test_words_of_other_scripts_are_not_cut_by_the_word_rule():
    text = "東京タワーは高い。Café crème"
    d = span_content_dfa(text)
    assert d.matches(content("東京")) and d.matches(content("タワー"))  # no ASCII words: any span
    # words are ASCII runs: "Caf" is a whole word of "Café" by that rule (a known limit), "Ca" is not
    assert d.matches(content("Café")) and d.matches(content("Caf")) and not d.matches(content("Ca"))


def test_an_optional_member_the_source_states_is_written(smol_info):
    comp = GrammarCompiler(smol_info)
    schema = {"type": "object", "properties": {
        "product": {"type": "string"}, "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "cabin": {"enum": ["economy", "business"]}, "note": {"type": "string"}, "missing": {"type": "string",
                                                                                          "format": "email"}},
        "required": ["product"], "additionalProperties": False}
    src = "One Cast Iron Skillet (SKU KIT-1482), shipped in business class."

    def ok(text, **kw):
        m = Matcher(comp.compile_json_schema(schema, source=src, **kw))
        return m.accept_string(text) and m.is_accepting()

    full = '{"product":"Cast Iron Skillet","sku":"KIT-1482","cabin":"business"}'
    assert ok(full) and ok('{"product":"Cast Iron Skillet","sku":"KIT-1482","cabin":"business","note":"One"}')
    assert not ok('{"product":"Cast Iron Skillet","cabin":"business"}')  # the text states an SKU
    assert not ok('{"product":"Cast Iron Skillet","sku":"KIT-1482"}')  # and a cabin it names
    assert ok('{"product":"Cast Iron Skillet"}', stated_members=False)  # the option gives them back
    assert ok('{"product":"Cast Iron Skillet","cabin":"business"}', stated_members=False)
