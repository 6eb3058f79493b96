"""Structural tags (structgen.grammar.structural_tag): the language of each format, matcher-level
(accepted and refused texts, masks equal brute force on the real SmolLM2 tokenizer), the errors a
bad spec raises (naming its JSON path), and GrammarIR.embed."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from engine_helpers import tokenize_randomly

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import GrammarError, SchemaError, StructgenError, UnsupportedFeature
from structgen.automata.fsa import literal_dfa
from structgen.grammar.ir import GrammarIR, Repeat, Sym, ValueCheck, seq
from structgen.grammar.lark import lark_to_ir
from structgen.grammar.structural_tag import structural_tag_to_ir, tag_nodes
from structgen.structural_output import read_segments

WEATHER = {"type": "object", "additionalProperties": False, "required": ["city"],
           "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["c", "f"]}}}
TIME = {"type": "object", "additionalProperties": False, "required": ["tz"], "properties": {"tz": {"type": "string"}}}
INT = {"type": "json_schema", "json_schema": {"type": "integer"}}


def tag(begin, end, content=None):
    return {"type": "tag", "begin": begin, "content": content or INT, "end": end}


def st(fmt):
    return {"type": "structural_tag", "format": fmt}


TOOLS = st({"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
    tag('<tool_call>{"name": "get_weather", "arguments": ', "}</tool_call>",
        {"type": "json_schema", "json_schema": WEATHER}),
    tag('<tool_call>{"name": "get_time", "arguments": ', "}</tool_call>", {"type": "json_schema", "json_schema": TIME}),
]})
W = '<tool_call>{"name": "get_weather", "arguments": {"city":"Paris"}}</tool_call>'
T = '<tool_call>{"name": "get_time", "arguments": {"tz":"UTC"}}</tool_call>'


def triggered(**kw):
    return st({"type": "triggered_tags", "triggers": ["<t>"], "tags": [tag("<t>", "</t>")], **kw})


# (name, spec, accepted texts, refused texts)
LANGUAGES = [
    ("tool-calls", TOOLS,
     ["", "Sure.", f"Let me check. {W}", f"{W}{T}", f"a {W} b {T} c", "I use <tool but not the tag",
      "ends in a prefix <tool_call", "<tool_cal>", "emoji 😀 and é"],
     [f"x {W[:-1]}", '<tool_call>{"name": "get_weather", "arguments": {"town":"Paris"}}</tool_call>',
      '<tool_call>{"name": "get_weather", "arguments": {"city":"Paris","unit":"k"}}</tool_call>',
      '<tool_call>{"name": "other", "arguments": {}}</tool_call>', "a <tool_call>", "<tool_call>x"]),
    # triggers that are prefixes of each other: "<f" dispatches every "<f..." tag
    ("prefix-triggers", st({"type": "triggered_tags", "triggers": ["<f", "<func>"],
                            "tags": [tag("<f=a>", "</f>"), tag("<func>", "</func>", {"type": "const_string",
                                                                                       "value": "X"})]}),
     ["t <f=a>1</f> u <func>X</func>", "t <g", "<", "x<f=a>12</f>"],
     ["t <fx", "<func>Y</func>", "t <f=b>1</f>", "<f"]),
    # XGrammar's at_least_one: the output opens with a tag, free text may follow
    ("at-least-one", triggered(at_least_one=True), ["<t>1</t>", "<t>1</t> and <t>2</t> more"],
     ["", "x", "x<t>1</t>"]),
    ("at-least-one-text-first", triggered(at_least_one=True, text_before_first=True),
     ["<t>1</t>", "x<t>1</t>", "x<t>1</t>y<t>2</t>z"], ["", "x"]),
    ("stop-after-first", triggered(stop_after_first=True), ["", "x", "x<t>1</t>"], ["x<t>1</t>y", "<t>1</t><t>2</t>"]),
    ("first-only", triggered(stop_after_first=True, at_least_one=True), ["<t>12</t>"],
     ["x<t>1</t>", "<t>1</t>y", ""]),
    ("byte-budget", triggered(max_bytes=5), ["abcde", "abcde<t>1</t>abcde", "éé", ""],
     ["abcdef", "abcdef<t>1</t>", "<t>1</t>abcdef", "ééé"]),
    ("char-budget", triggered(max_chars=3), ["ééé", "abc<t>1</t>"], ["éééé"]),
    ("excludes", triggered(excludes=["bad"]), ["good", "ba d<t>1</t>"], ["bad", "x<t>1</t>bad"]),
    ("think-then-json", st({"type": "sequence", "elements": [
        tag("<think>", "</think>", {"type": "any_text"}), {"type": "regex", "pattern": "\n?"}, INT]}),
     ["<think>hmm </thin {}</think>\n12", "<think></think>3"], ["<think>x</think>x3", "<think>x</think>", "3"]),
    ("regex-content", st(tag("<r>", ["</r>", "</R>"], {"type": "regex", "pattern": "[a-z<]*"})),
     ["<r>ab</r>", "<r>a<b</R>", "<r></r>"], ["<r>a</r>b</r>", "<r>A</r>"]),
    ("lark-content", st(tag("<g>", "</g>", {"type": "grammar", "grammar":
                                          'start: NUMBER ("+" NUMBER)*\n%import common.NUMBER\n'
                                          '%import common.WS\n%ignore WS'})),
     ["<g>1 + 2</g>", "<g> 1+2 </g>"], ["<g>1 +</g>", " <g>1</g>", "<g>1</g> "]),
    ("separator", st({"type": "tags_with_separator", "tags": [tag("<a>", "</a>")], "separator": ","}),
     ["", "<a>1</a>", "<a>1</a>,<a>2</a>"], ["<a>1</a>,", "<a>1</a><a>2</a>", "x"]),
    ("dispatch", st({"type": "dispatch", "rules": [["<x>", INT]]}), ["hey <x>1 more <x>2", "", "<x>1<x>2"],
     ["<x>a", "<x>"]),
    ("any-text-then-const", st({"type": "sequence", "elements": [{"type": "any_text"},
                                                                 {"type": "const_string", "value": "X"}]}),
     ["X", "aX"], ["aXbX", "a"]),
    ("star-after-text", st({"type": "sequence", "elements": [{"type": "any_text"}, {"type": "star", "content":
                                                                                    tag("<a>", "</a>")}]}),
     ["hi", "hi<a>1</a><a>2</a>", ""], ["hi<a>1</a>x"]),
    ("legacy", {"structures": [{"begin": "<function=get_weather>", "schema": WEATHER, "end": "</function>"}],
                "triggers": ["<function="]},
     ['ok <function=get_weather>{"city":"Oslo"}</function> bye', "no call"],
     ["ok <function=other>{}</function>", '<function=get_weather>{"town":"Oslo"}</function>']),
]


@pytest.fixture(scope="module")
def compiler(smol_info):
    return GrammarCompiler(smol_info)


def accepts(grammar, text: str) -> bool:
    m = Matcher(grammar)
    return m.accept_string(text) and m.is_accepting()


@pytest.mark.parametrize("name,spec,good,bad", LANGUAGES, ids=[x[0] for x in LANGUAGES])
def test_language(compiler, name, spec, good, bad):
    g = compiler.compile_structural_tag(spec, whitespace="compact")
    for text in good:
        assert accepts(g, text), text
    for text in bad:
        assert not accepts(g, text), text


def test_json_text_spec_and_cache(compiler):
    g = compiler.compile_structural_tag(TOOLS)
    assert compiler.compile_structural_tag(json.dumps(TOOLS)) is g
    assert compiler.compile_structural_tag(TOOLS, whitespace="compact") is not g
    assert accepts(g, 'x <tool_call>{"name": "get_weather", "arguments": { "city" : "Paris" }}</tool_call>')


def test_accepted_under_any_tokenization(compiler, smol_info):
    """Tokens that straddle the trigger and the free text (``" <tool_call>{"`` ...) are taken."""
    g = compiler.compile_structural_tag(TOOLS, whitespace="compact")
    vocab = {b: t for t, b in enumerate(smol_info.token_bytes) if b and t not in smol_info.special_ids}
    rng = random.Random(0)
    for text in [f"Let me check. {W} Done.", f"{W}{T}", "a <tool and <tool_cal"]:
        for _ in range(5):
            ids = tokenize_randomly(text.encode(), vocab, rng)
            m = Matcher(g)
            assert all(m.accept_token(t) for t in ids) and m.is_accepting(), text


def mask_set(m) -> set[int]:
    bits = np.unpackbits(m.next_token_mask().view(np.uint8), bitorder="little")[: m.grammar.vocab_size]
    return set(np.nonzero(bits)[0].tolist())


def brute_force(m) -> set[int]:
    """Every token ``accept_token`` takes (taken back at once)."""
    out = set()
    for t in range(m.grammar.vocab_size):
        if m.accept_token(t):
            out.add(t)
            m.rollback(1)
    return out


MASK_STATES = [
    (TOOLS, ["", "Let me check. <tool", "Let me check. <tool_call>", '<tool_call>{"name": "get_weather", "arguments": '
             '{"city":"Pa', W, W + " done <tool_call", f"x {W} y"]),
    (triggered(max_bytes=5), ["", "abcd", "abcde", "abcde<t>1", "<t>1</t>ab"]),
    (triggered(at_least_one=True, stop_after_first=True), ["", "<t>", "<t>1</t>"]),
    (st({"type": "sequence", "elements": [tag("<think>", "</think>", {"type": "any_text"}), INT]}),
     ["", "<think>a </th", "<think>a</think>"]),
]


@pytest.mark.parametrize("case", range(len(MASK_STATES)))
def test_masks_equal_brute_force(compiler, case):
    spec, prefixes = MASK_STATES[case]
    g = compiler.compile_structural_tag(spec, whitespace="compact")
    for prefix in prefixes:
        m = Matcher(g)
        assert m.accept_string(prefix), prefix
        assert mask_set(m) == brute_force(m), prefix


def test_masks_on_random_walks(compiler):
    from engine_helpers import brute_force_mask

    g = compiler.compile_structural_tag(TOOLS, whitespace="compact")
    rng = random.Random(1)
    eos = set(g.eos_ids)
    for _ in range(6):
        m = Matcher(g)
        for _ in range(rng.randint(0, 30)):
            allowed = sorted(mask_set(m) - eos)
            if not allowed:
                break
            assert m.accept_token(rng.choice(allowed))
        assert mask_set(m) == brute_force_mask(m)


# (spec, error class, JSON path the message names)
ERRORS = [
    (st({"type": "triggered_tags", "triggers": ["<t>"], "tags": [tag("<u>", "</u>")]}), GrammarError,
     "/format/tags/0/begin"),
    (st({"type": "triggered_tags", "triggers": ["<t>"], "tags": [
        tag("<t>", "</t>", {"type": "json_schema", "json_schema": {"type": "array", "uniqueItems": True}})]}),
     UnsupportedFeature, "/format/tags/0/content/json_schema"),
    (st(tag("<t>", "</t>", {"type": "json_schema", "json_schema": {"type": "strin"}})), SchemaError,
     "/format/content/json_schema/type"),
    (st(tag("<t>", "</t>", {"type": "json_schema", "json_schema": {"type": "object", "properties": {
        "a": {"$ref": "http://example.com/x"}}}})), SchemaError, "/format/content/json_schema/properties/a"),
    (st(tag("<t>", "</t>", {"type": "token", "token": 3})), UnsupportedFeature, "/format/content/type"),
    (st({"type": "sequence", "elements": [{"type": "any_text"}, INT]}), UnsupportedFeature, "/format/elements/0"),
    (st(tag("<t>", "</t>", {"type": "regex", "pattern": "(("})), GrammarError, "/format/content/pattern"),
    (st({"type": "tag", "begin": 5, "content": INT, "end": "</t>"}), GrammarError, "/format/begin"),
    (st({"type": "tag", "begin": "<t>", "content": INT, "end": "</t>", "extra": 1}), UnsupportedFeature,
     "/format/extra"),
    (st({"type": "triggered_tags", "triggers": ["aa"], "tags": [tag("aa", "</t>")]}), GrammarError, "/format"),
    (st({"type": "any_text", "max_tokens": 5}), UnsupportedFeature, "/format/max_tokens"),
    (st(tag("<t>", "</t>", {"type": "grammar", "grammar": 'root ::= "a"'})), GrammarError, "/format/content/grammar"),
    (st(tag("<t>", "5", {"type": "json_schema", "json_schema": {"type": "number"}})), GrammarError, "/format/content"),
    (st({"type": "or", "elements": [{"type": "any_text"}, tag("<a>", "</a>")]}), UnsupportedFeature, "/format"),
    (st({"type": "json_schema", "json_schema": {}, "style": "qwen_xml"}), UnsupportedFeature, "/format/style"),
    (st({"type": "repeat", "min": 2, "max": 1, "content": INT}), GrammarError, "/format/max"),
    (st({"type": "nope"}), GrammarError, "/format/type"),
    (st({"type": "sequence", "elements": [INT, "x"]}), GrammarError, "/format/elements/1"),
    ({"structures": [{"begin": "<f>", "schema": "{bad", "end": "</f>"}], "triggers": ["<f>"]}, SchemaError,
     "/structures/0/schema"),
    ({"structures": [{"begin": "<f>", "schema": {"type": "object", "properties": {"a": {"type": "x"}}},
                      "end": "</f>"}], "triggers": ["<f>"]}, SchemaError, "/structures/0/schema/properties/a/type"),
    ({"structures": [{"begin": "<g>", "schema": {}, "end": "</f>"}], "triggers": ["<f>"]}, GrammarError,
     "/structures/0/begin"),
    ({"structures": [], "triggers": "<f>"}, GrammarError, "/structures"),
    ("not json", GrammarError, "not valid JSON"),
]


@pytest.mark.parametrize("spec,cls,path", ERRORS, ids=[f"{i}-{e[2]}" for i, e in enumerate(ERRORS)])
def test_spec_errors_name_the_path(spec, cls, path):
    with pytest.raises(cls) as info:
        structural_tag_to_ir(spec)
    assert path in str(info.value)


def test_lenient_drops_checks():
    spec = st(tag("<t>", "</t>", {"type": "json_schema", "json_schema": {"type": "array", "uniqueItems": True}}))
    from structgen.grammar.structural_tag import StructuralTagOptions

    ir = structural_tag_to_ir(spec, StructuralTagOptions(lenient=True))
    assert not ir.checks


def _mutations(node, rng: random.Random):
    """Copies of ``node`` with one value replaced by a wrong one."""
    junk = [None, 1, -1, "", "x", [], {}, [1], {"type": 3}, True, 1.5, {"type": "tag"}]
    paths = []

    def walk(n, path):
        if isinstance(n, dict):
            for k, v in n.items():
                paths.append(path + [k])
                walk(v, path + [k])
        elif isinstance(n, list):
            for i, v in enumerate(n):
                paths.append(path + [i])
                walk(v, path + [i])

    walk(node, [])
    for _ in range(120):
        doc = json.loads(json.dumps(node))
        p = rng.choice(paths)
        cur = doc
        for k in p[:-1]:
            cur = cur[k]
        cur[p[-1]] = rng.choice(junk)
        yield doc


def test_no_foreign_exception_for_a_bad_spec():
    rng = random.Random(0)
    for spec in (TOOLS, LANGUAGES[1][1], LANGUAGES[9][1], LANGUAGES[-1][1],
                 st({"type": "dispatch", "rules": [["<x>", INT]], "loop": False}),
                 st({"type": "tags_with_separator", "tags": [tag("<a>", "</a>")], "separator": ",",
                     "at_least_one": True})):
        for doc in _mutations(spec, rng):
            try:
                structural_tag_to_ir(doc)
            except StructgenError:
                pass


def test_embed_renames_and_writes_out_ignored_terminals():
    host = GrammarIR(rules={}, terminals={}, start="start")
    inner = lark_to_ir('start: "a" "b"\n%import common.WS\n%ignore WS')
    inner.checks.append(ValueCheck("start"))
    top = host.embed(inner, "p_")
    assert all(n.startswith("p_") for n in host.terminals) and "p_start" in host.rules
    assert not any(t.ignore for t in host.terminals.values())
    assert [c.rule for c in host.checks] == ["p_start"] and inner.checks[0].rule == "start"
    host.terminals["X"] = host.terminals["p_WS"].__class__("X", literal_dfa(b"x"))
    host.rules["start"] = seq(Sym(top), Sym("X"))
    with pytest.raises(ValueError):
        host.embed(inner, "p_")
    assert isinstance(host.rules[top].items[-1], Repeat)


def test_tag_nodes_and_read_segments():
    text = f'Let me check. {W} and {T}.'
    segs = read_segments(TOOLS, text)
    assert [s.value for s in segs] == [{"city": "Paris"}, {"tz": "UTC"}]
    assert text[segs[0].start:segs[0].stop] == W and segs[1].end == "}</tool_call>"
    assert len(tag_nodes(TOOLS)) == 2 and len(tag_nodes(LANGUAGES[-1][1])) == 1
    legacy = read_segments(LANGUAGES[-1][1], 'ok <function=get_weather>{"city":"Oslo"}</function>')
    assert legacy[0].value == {"city": "Oslo"}
    regex = read_segments(LANGUAGES[10][1], "<r>ab</R>")
    assert regex[0].content == "ab" and regex[0].end == "</R>"
