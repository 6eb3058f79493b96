"""The shared parse tree written back as text, and patterns relaxed for an automaton."""
from __future__ import annotations

import random
import re

import pytest

from structgen.bench.fuzz_cases import make_case
from structgen.errors import StructgenError
from structgen.grammar.regex import compile_regex
from structgen.grammar.regex_syntax import RELAXED_BOUND, parse, relaxed_pattern, unparse


def random_matches(dfa, rng: random.Random, n: int) -> list[bytes]:
    """``n`` byte strings the DFA accepts (random walks that stop at accepting states)."""
    dist = dfa.dist_to_accept()
    inv = dfa.class_ranges()
    out = []
    for _ in range(4 * n):
        s, data = dfa.start, bytearray()
        for _ in range(40):
            if dfa.accept[s] and (rng.random() < 0.3 or dist[s] == 0 and not (dfa.trans[s] >= 0).any()):
                break
            moves = [(c, int(t)) for c, t in enumerate(dfa.trans[s]) if t >= 0 and inv[c]]
            if not moves:
                break
            c, t = rng.choice(moves)
            lo, hi = rng.choice(inv[c])
            data.append(rng.randint(lo, hi))
            s = t
        while not dfa.accept[s]:  # finish along a shortest completion
            tail = dfa.shortest_string(s)
            data += tail
            s = dfa.start
            for b in data:
                s = dfa.step(s, b)
        out.append(bytes(data))
        if len(out) == n:
            break
    return out


def test_relaxed_patterns_match_everything_the_pattern_matches():
    """The fuzz campaign's random regexes: every string the exact automaton accepts (random walks),
    the relaxed pattern's automaton accepts too -- an over-approximation, as the JSON Schema
    fallback needs (the exact pattern is checked where the value ends)."""
    checked = 0
    for i in range(1200):
        pattern = make_case(5, 4 * i + 2, ("schema-random", "schema-mutation", "regex", "lark"), None)["source"]
        try:
            dfa = compile_regex(pattern)
            relaxed = relaxed_pattern(pattern)
        except StructgenError:
            continue
        if relaxed is None or dfa.is_empty():
            continue
        try:
            loose = compile_regex(relaxed)
        except StructgenError:
            continue  # (an anchor left mid-pattern once a lookaround went: the fallback tries the next)
        for data in random_matches(dfa, random.Random(i), 8):
            assert dfa.matches(data)
            assert loose.matches(data), (pattern, relaxed, data)
        checked += 1
    assert checked >= 150


@pytest.mark.parametrize("pattern, relaxed", [
    ("^[ab]*a[ab]{22}$", "^(?:[\\x61\\x62]){0,}\\x61(?:[\\x61\\x62]){4,}$"),
    (r"^([a-z]+)-\1$", "^(?:(?:[\\x61-\\x7a]){1,})\\x2d(?:(?:[\\x61-\\x7a]){1,})$"),  # backreference: its group
    (r"\bfoo(?=bar)", "\\x66\\x6f\\x6f"),  # lookarounds and word boundaries dropped
    ("(?i)ab{3,40}c", "(?i)\\x61(?:\\x62){3,}\\x63"),  # global flags kept
])
def test_relaxations(pattern, relaxed):
    assert relaxed_pattern(pattern) == relaxed
    assert RELAXED_BOUND == 4


def test_unparse_round_trips_the_language():
    for pattern in [r"[a-c]{2,3}x|y+", r"(?:\d\.){1,3}", r"[^\s]é?", r"(?s:.)\Z"]:
        text = unparse(list(parse(pattern)))
        for s in ["ab x", "abx", "yyy", "1.2.", "1.", "xé", "a\n", "\n"]:
            assert bool(re.fullmatch(pattern, s)) == bool(re.fullmatch(text, s)), (pattern, text, s)


# The code points where Python's re and ECMA-262 disagree about \s (\x1c-\x1f, \x85 are Python's only,
# \ufeff ECMA's only), about \d and \w (Unicode digits and letters are Python's only), and some that both agree on.
_DIALECT_EDGES = [0x09, 0x0A, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x30, 0x41, 0x5F, 0x61, 0x85, 0xA0, 0xE9, 0x660,
                  0x966, 0x1680, 0x2000, 0x2028, 0x202F, 0x3000, 0x4E00, 0xFEFF, 0xFF10]
_ECMA_SPACE = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F,
               0x205F, 0x3000, 0xFEFF}


def _ecma_fullmatch(pattern: str, ch: str) -> bool:
    r"""``pattern`` matched as ECMA-262 would: \d and \w ASCII, \s its own list (by substitution into re)."""
    ecma = {r"\d": "0-9", r"\w": "0-9A-Za-z_", r"\s": "".join(f"\\u{c:04x}" for c in sorted(_ECMA_SPACE))}
    out, i = [], 0
    in_set = False
    while i < len(pattern):
        two = pattern[i:i + 2]
        if two in ecma or two.lower() in ecma and two[1].isupper():
            body = ecma[two.lower()]
            if two[1].isupper():
                out.append(f"[^{body}]" if not in_set else None)
            else:
                out.append(body if in_set else f"[{body}]")
            i += 2
            continue
        in_set = {"[": True, "]": False}.get(pattern[i], in_set)
        out.append(pattern[i])
        i += 1
    assert None not in out, f"test helper cannot rewrite {pattern!r}"
    return re.fullmatch("".join(out), ch, re.ASCII) is not None


@pytest.mark.parametrize("pattern", [r"\s", r"\S", r"\d", r"\D", r"\w", r"\W", r"[^\s]", r"[^\d]", r"[^\w]",
                                     r"[\s]", r"[\sx]", r"[^\sx]", r"[^\d\s]", r"[^a-z\s]"])
def test_class_escapes_hold_only_what_both_dialects_match(pattern):
    r"""A character the automaton takes matches under Python's re (lark's dialect) and under ECMA-262
    (JSON Schema's): ``[^\s]`` must not take \x1c, which Python counts as a space (a fuzz case generated
    it inside a Lark terminal ``/[^\s]/``, and lark refused the text)."""
    dfa = compile_regex(pattern)
    for cp in _DIALECT_EDGES:
        ch = chr(cp)
        if dfa.matches(ch.encode()):
            assert re.fullmatch(pattern, ch), (pattern, hex(cp), "Python's re refuses it")
            assert _ecma_fullmatch(pattern, ch), (pattern, hex(cp), "ECMA-262 refuses it")
    assert any(dfa.matches(chr(cp).encode()) for cp in _DIALECT_EDGES), pattern


def test_ecma_named_groups_are_read_and_named_backreferences_refused():
    from structgen.errors import GrammarError
    from structgen.grammar.regex_syntax import ecma_named_groups, python_regex

    assert ecma_named_groups(r"^(?<major>\d+)\.(?<minor>\d+)$") == r"^(?P<major>\d+)\.(?P<minor>\d+)$"
    for same in (r"(?<=a)b", r"(?<!a)b", r"[(?<x>]", r"\(?<x>", "plain"):
        assert ecma_named_groups(same) is same
    assert python_regex(r"(?<v>\p{Lu})") == python_regex(r"(?P<v>\p{Lu})")
    with pytest.raises(GrammarError, match="named backreference"):
        ecma_named_groups(r"(?<q>['\"]).*\k<q>")


def test_a_schema_pattern_with_named_groups_compiles_and_validates(smol_info):
    """.NET's global.json: "version": {"pattern": "^(?<major>\\d+)\\.(?<minor>\\d+)\\.(?<patch>\\d+)..."}"""
    from structgen import GrammarCompiler, Matcher
    from structgen.errors import SchemaError

    comp = GrammarCompiler(smol_info)
    schema = {"type": "string", "pattern": r"^(?<major>\d+)\.(?<minor>\d+)$"}
    g = comp.compile_json_schema(schema)
    for text, ok in (('"10.2"', True), ('"10"', False)):
        m = Matcher(g)
        assert (m.accept_string(text) and m.is_accepting()) == ok
    assert not list(g.validator.iter_errors("3.4")) if g.validator else True
    with pytest.raises(SchemaError, match="named backreference"):
        comp.compile_json_schema({"type": "string", "pattern": r"(?<q>a)\k<q>"})
