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
