"""Regex -> byte DFA: agrees with Python's re on random strings; bad input fails clearly."""
from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structgen.errors import GrammarError, UnsupportedFeature
from structgen.grammar.regex import compile_regex

PATTERNS = [
    r"\d{4}-\d{2}-\d{2}",
    r"[a-z]+@[a-z]+\.(com|org)",
    r"\(\d{3}\) \d{3}-\d{4}",
    r"(red|green|blue)",
    r"-?(0|[1-9]\d*)(\.\d+)?",
    r"[^a-c]*x?",
    r"(ab|a)*b",
    r"é+[α-ω]{1,3}",
    r"\w+\s\W",
    r"a{2,5}b{0,2}",
    r".{0,3}",
    r"[😀-😂]+",
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_fullmatch_agrees_with_re(pattern):
    dfa = compile_regex(pattern)
    # structgen's \d \w \s are ECMA-262's (ASCII); negated classes also exclude
    # Python's Unicode classes, so those patterns are checked one way (sound subset)
    one_sided = any(c in pattern for c in (r"\W", r"\D", r"\S"))
    rx = re.compile(pattern) if one_sided else re.compile(pattern, re.ASCII)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.from_regex(re.compile(pattern), fullmatch=True), st.text(max_size=8)))
    def check(s):
        want = rx.fullmatch(s) is not None
        got = dfa.matches(s.encode("utf-8"))
        if one_sided:
            if got:
                assert want
            return
        assert got == want, (pattern, s)

    check()


def test_search_semantics_for_json_schema_patterns():
    d = compile_regex("abc", search=True)
    assert d.matches(b"xxabcyy") and not d.matches(b"ab")
    d = compile_regex("^ab", search=True)
    assert d.matches(b"abz") and not d.matches(b"zab")
    d = compile_regex("^a$|^b$", search=True)
    assert d.matches(b"a") and d.matches(b"b") and not d.matches(b"ab")


# anchors inside the pattern, each from a MaskBench schema that was checked at the string's end for it
MID_ANCHORS = [r"^$|(^(?:\S+\s+){0,3}\S+$)", r"^01$|^07$", r"^([^,]|$)", r"(^.+\..+)|(^[a-z0-9_-]+)",
               r"^(\/?((\.{2})|([a-z0-9\-]*))($|\/))*$", r"^([0-9x]+\.[0-9x]+\.*[0-9x]*$|\%V\%)",
               r"^([^,]+(,|$)){3,}$", r"(?:^|\r?\n)-B-", r"a$b", r"(a|^)b", r"x(a|$)", r"$^", r"^$[a-z]*$"]


@pytest.mark.parametrize("json_string", [False, True])
@pytest.mark.parametrize("pattern", MID_ANCHORS)
def test_anchors_inside_a_pattern_hold_where_the_string_starts_and_ends(pattern, json_string):
    """``^`` and ``$`` anywhere in a JSON Schema pattern: an automaton, not a check at the string's
    end; as ``re.search`` decides on thousands of random strings (``$`` is the end of the string, as
    in ECMA-262: Python's also matches before a final newline, which those strings leave out)."""
    import json
    import random

    from structgen.automata import charclass as cc
    from structgen.automata.fsa import determinize
    from structgen.grammar.regex import build_nfa

    d = determinize(build_nfa(pattern, encoder=cc.JSON_STRING if json_string else cc.UTF8, search=True))
    rx, rng, alphabet = re.compile(pattern), random.Random(0), "ab.,/-01x7 \n\r%VBé"
    texts = ["", "01", "07", "a.b", "../x/", "1.2.3", "%V%", "a,b,c", "a,b", "b", "xa", "x", "-B-", "q\n-B-"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(3000)]
    for t in texts:
        if t.endswith("\n"):
            continue
        data = json.dumps(t)[1:-1].encode() if json_string else t.encode()
        assert d.matches(data) == (rx.search(t) is not None), t


def test_anchors_inside_a_pattern_under_multiline_are_refused():
    with pytest.raises(UnsupportedFeature):
        compile_regex(r"(?m)x(a|$)", search=True)


def test_utf8_is_exact():
    d = compile_regex(r"[^a]")
    assert d.matches("é".encode()) and d.matches("😀".encode())
    assert not d.matches(b"\xc3")  # truncated sequence
    assert not d.matches(b"\xed\xa0\x80")  # encoded surrogate
    assert not d.matches(b"\xc0\x80")  # overlong


def test_invalid_regex_names_position():
    with pytest.raises(GrammarError) as e:
        compile_regex("ab(c")
    assert e.value.position == 2


def test_unsupported_constructs_are_refused():
    for p in [r"(a)\1", r"(?>ab)", r"\bword", r"a++", r"(?=(a))\1", r"(?<=a(?=b))"]:
        with pytest.raises(UnsupportedFeature):
            compile_regex(p)


def test_pathological_patterns_are_bounded():
    t0 = time.perf_counter()
    d = compile_regex(r"(a*)*b")
    assert d.matches(b"aaab") and not d.matches(b"aaa")
    with pytest.raises(GrammarError):
        compile_regex(r"a{1,1000000}")
    with pytest.raises(GrammarError):
        compile_regex(r"((a|b){50}){50}{50}")
    assert time.perf_counter() - t0 < 30


def test_disk_cache_keeps_only_slow_automata(tmp_path, monkeypatch):
    """Slow-to-build automata are saved and loaded back exactly; quick ones are rebuilt (a file
    costs about as much to load as they do to build)."""
    import numpy as np

    from structgen.grammar import regex as R

    monkeypatch.setenv("STRUCTGEN_CACHE", str(tmp_path))
    monkeypatch.setattr(R, "DISK_CACHE_MIN_SECONDS", 1e9)
    R._compile_cached("[a-c]{2}x", False, False, 0)
    assert not (tmp_path / "regex").exists()
    monkeypatch.setattr(R, "DISK_CACHE_MIN_SECONDS", 0.0)
    built = R._compile_cached.__wrapped__("[a-c]{3}y", False, True, 0)
    assert len(list((tmp_path / "regex").glob("*.npz"))) == 1
    loaded = R._compile_cached.__wrapped__("[a-c]{3}y", False, True, 0)
    assert np.array_equal(built.trans, loaded.trans) and np.array_equal(built.classmap, loaded.classmap)
    assert np.array_equal(built.accept, loaded.accept) and built.start == loaded.start


def _same_language(a, b) -> bool:
    from structgen.automata.fsa import difference

    return difference(a, b).is_empty() and difference(b, a).is_empty()


@pytest.mark.parametrize("pattern", [
    r"^[0-9a-zA-Z_-]{1,255}$", r"^[A-Fa-f\d]{24}$", r"^([a-fA-F\d\-]{36})$", r"^(?:\w){16,}$",
    r"^.{3,40}$", r"^[^a-c]{0,20}$", r"(?i)^[a-c]{17}$", r"^é{16,18}$",
])
@pytest.mark.parametrize("json_string", [False, True])
def test_counted_class_patterns_equal_the_general_construction(pattern, json_string):
    """The chain-of-copies fast path accepts exactly what the Thompson NFA + subset construction does."""
    from structgen.automata import charclass as cc
    from structgen.automata.fsa import determinize
    from structgen.grammar.regex import build_nfa, counted_class_dfa

    enc = cc.JSON_STRING if json_string else cc.UTF8
    fast = counted_class_dfa(pattern, encoder=enc, search=True)
    assert fast is not None
    general = determinize(build_nfa(pattern, encoder=enc, search=True))
    assert _same_language(fast, general)


@pytest.mark.parametrize("pattern", [r"[a-z]{20}", r"^[a-z]{20}", r"^[a-z]{3}$", r"^ab{20}$", r"^(ab){20}$", r"^a{20}|b$"])
def test_counted_class_fast_path_only_takes_whole_counted_classes(pattern):
    from structgen.grammar.regex import counted_class_dfa

    assert counted_class_dfa(pattern, search=True) is None


@pytest.mark.parametrize("lo,hi", [(0, 5), (3, 17), (2, None), (0, 1)])
def test_length_content_equals_a_repeated_any_character(lo, hi):
    from structgen.automata import charclass as cc
    from structgen.automata.fsa import determinize
    from structgen.grammar.json_strings import length_content
    from structgen.grammar.regex import build_nfa

    rep = "{%d,%s}" % (lo, "" if hi is None else hi)
    general = determinize(build_nfa("(?s:.)" + rep, encoder=cc.JSON_STRING))
    assert _same_language(length_content(lo, hi), general)


@pytest.mark.parametrize("json_string", [False, True])
@pytest.mark.parametrize("pattern", PATTERNS + [r"^dev|alpha|beta|rc|RC|stable$", r"ab|^c|d$", r"\\u00|é"])
def test_search_matches_collapse_to_one_state_without_changing_the_language(pattern, json_string):
    """Once an unanchored pattern has matched, anything may follow: the subset construction
    keeps that state alone (the "universal" flag); the language is the one without the shortcut."""
    from structgen.automata import charclass as cc
    from structgen.automata.fsa import determinize
    from structgen.grammar.regex import build_nfa

    enc = cc.JSON_STRING if json_string else cc.UTF8
    nfa = build_nfa(pattern, encoder=enc, search=True)
    assert nfa.universal
    fast = determinize(nfa)
    nfa.universal = []
    assert _same_language(fast, determinize(nfa))
