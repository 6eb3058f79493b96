"""Lookarounds as exact DFAs (structgen.grammar.lookaround): differential against Python's re on
every short string, JSON-string encoding, Lark terminals with follow conditions and lazy
(shortest-match) semantics, and the errors."""
from __future__ import annotations

import itertools
import json
import random
import re

import numpy as np
import pytest

from structgen.errors import GrammarError, UnsupportedFeature
from structgen.grammar import lookaround as LA
from structgen.grammar.regex import compile_regex, compile_terminal


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTGEN_CACHE", str(tmp_path))


def _strings(alphabet: str, max_len: int) -> list[str]:
    return ["".join(t) for n in range(max_len + 1) for t in itertools.product(alphabet, repeat=n)]


#: every string over "abc" up to 5 characters, and over "ab" of 6 and 7
SUBJECTS = _strings("abc", 5) + [s for s in _strings("ab", 7) if len(s) > 5]


def _end_states(dfa, texts: list[bytes]) -> dict[bytes, int]:
    """The state each text leads to (-1: dead), one step per text from its prefix's state."""
    out = {b"": dfa.start}
    for t in sorted(set(texts), key=len):
        for i in range(1, len(t) + 1):
            p = t[:i]
            if p not in out:
                s = out[p[:-1]]
                out[p] = dfa.step(s, p[-1]) if s >= 0 else -1
    return out


def _accepted(dfa, texts: list[bytes]) -> dict[bytes, bool]:
    ends = _end_states(dfa, texts)
    return {t: ends[t] >= 0 and bool(dfa.accept[ends[t]]) for t in texts}


# -- a seeded generator of small patterns with lookarounds ----------------------------------------

_ATOMS = ["a", "b", ".", "[ab]", "[^a]", "a", "b", "c?"]


def _fixed(rng: random.Random, width: int, depth: int) -> str:
    """A pattern of exactly ``width`` characters (a lookbehind body); may hold lookbehinds, ``^``."""
    if depth > 0 and width > 0 and rng.random() < 0.25:
        return f"(?:{_fixed(rng, width, depth - 1)}|{_fixed(rng, width, depth - 1)})"
    parts = [rng.choice(["a", "b", ".", "[ab]", "[^b]"]) for _ in range(width)]
    if depth > 0 and rng.random() < 0.3:
        inner = _fixed(rng, rng.randint(1, 2), depth - 1)
        parts.insert(rng.randint(0, len(parts)), f"(?{rng.choice(['<=', '<!'])}{inner})")
    if rng.random() < 0.1:
        parts.insert(0, "^")
    return "".join(parts)


def _gen(rng: random.Random, depth: int, lazy: bool = True) -> str:
    if depth <= 0 or rng.random() < 0.25:
        return rng.choice(_ATOMS)
    k = rng.randrange(10)
    if k <= 2:
        return "".join(_gen(rng, depth - 1, lazy) for _ in range(rng.randint(2, 3)))
    if k == 3:
        return f"(?:{_gen(rng, depth - 1, lazy)}|{_gen(rng, depth - 1, lazy)})"
    if k <= 5:
        q = rng.choice(["*", "+", "?", "{1,2}", "{2}"]) + ("?" if lazy and rng.random() < 0.3 else "")
        return f"(?:{_gen(rng, depth - 1, lazy)}){q}"
    if k <= 7:
        body = _gen(rng, depth - 1, lazy) + ("$" if rng.random() < 0.15 else "")
        return f"(?{rng.choice('=!')}{body})"
    return f"(?{rng.choice(['<=', '<!'])}{_fixed(rng, rng.randint(1, 2), depth - 1)})"


def _has_look(p: str) -> bool:
    return any(x in p for x in ("(?=", "(?!", "(?<=", "(?<!"))


def _patterns(seed: int, n: int, lazy: bool = True) -> list[str]:
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        p = "".join(_gen(rng, 3, lazy) for _ in range(rng.randint(1, 2)))
        if _has_look(p):
            out.append(p)
    return out


HANDWRITTEN = [
    r"^(?=.*[A-Z])(?=.*\d)(?!.*\s).{8,}$", r"^(?!\s)(?!.*\s$).*$", r"^(?!.*--)[a-z-]+$", r"(?:(?!ab).)*",
    r"^(?:(?!ab).)*$", r"a(?:(?!ab)[abc])*b", r"(?<=a)b", r"(?<!x)y", r"(?<!a)b+", r"a(?=b(?!a))",
    r"(?=a(?<=ba))..", r"(?<=(?<!b)a)b", r"(?!(?=a)ab)[ab]+", r"^(?!a|b$).*", r"(?=.*c)(?<!b)a",
    r"^(?!.*(?<=a)b).*$", r"(?=(?:ab)*$)", r"(?:a(?=b)|b(?!a)|c)+", r"^(?=^a).*", r"b(?<=^ab)",
]


def _check_against_re(pattern: str, subjects: list[str]) -> None:
    rx = re.compile(pattern)
    for search in (False, True):
        dfa = compile_regex(pattern, search=search)
        texts = [s.encode() for s in subjects]
        got = _accepted(dfa, texts)
        for s, t in zip(subjects, texts):
            want = (rx.search(s) if search else rx.fullmatch(s)) is not None
            assert got[t] == want, (pattern, "search" if search else "fullmatch", s, want)


@pytest.mark.parametrize("pattern", HANDWRITTEN)
def test_handwritten_patterns_agree_with_re(pattern):
    alphabet = "aA1b -c" if "A-Z" in pattern else "ab-c "
    subjects = _strings(alphabet, 4) + (["Abcdefg1", "Abcdefg 1", "abcdefg12", "ABCDEFG1x"] if "A-Z" in pattern
                                        else ["ab--c", "a-b-c", " a", "a ", "ababab"])
    _check_against_re(pattern, subjects)


@pytest.mark.parametrize("batch", range(10))
def test_generated_patterns_agree_with_re(batch):
    for pattern in _patterns(1000 + batch, 80):
        _check_against_re(pattern, SUBJECTS)


def test_generated_patterns_in_json_strings():
    """The same construction over JSON-string escapes: ``"`` and ``é`` (also as ``\\u00e9``)."""
    subjects = _strings('ab"é', 4)
    for pattern in _patterns(2000, 60):
        rx = re.compile(pattern)
        for search in (False, True):
            dfa = compile_regex(pattern, search=search, json_string=True)
            texts = {s: (json.dumps(s)[1:-1].encode(), json.dumps(s, ensure_ascii=False)[1:-1].encode())
                     for s in subjects}
            got = _accepted(dfa, [t for pair in texts.values() for t in pair])
            for s, pair in texts.items():
                want = (rx.search(s) if search else rx.fullmatch(s)) is not None
                assert got[pair[0]] == want and got[pair[1]] == want, (pattern, search, s, want)


JSON_CASES = [
    (r'^(?!.*")[^\\]*$', 'a"é\\'), (r'(?<=é)"', 'a"é'), (r"^(?=.*ü).{2,}$", "aü\""), (r'"(?!")', '"ab'),
    (r"(?<!\\)x", "x\\a"), (r"^(?:(?!\n).)*é\Z", "aé\n"), (r"(?<=[^\x00-\x7f])a", "aé€\t"),
]


@pytest.mark.parametrize("pattern,alphabet", JSON_CASES)
def test_json_string_encoding(pattern, alphabet):
    """The DFA reads the characters as written inside a JSON string literal (escapes, \\uXXXX)."""
    rx = re.compile(pattern)
    subjects = _strings(alphabet, 4)
    for search in (False, True):
        dfa = compile_regex(pattern, search=search, json_string=True)
        for s in subjects:
            want = (rx.search(s) if search else rx.fullmatch(s)) is not None
            for enc in (json.dumps(s)[1:-1], json.dumps(s, ensure_ascii=False)[1:-1]):
                assert dfa.matches(enc.encode()) == want, (pattern, search, s, enc)


def test_lookaround_patterns_use_the_disk_cache(tmp_path, monkeypatch):
    from structgen.grammar import regex as R

    monkeypatch.setattr(R, "DISK_CACHE_MIN_SECONDS", 0.0)
    pattern = r"^(?=.*[A-Z])(?!.*\s).{3,}$"
    built = R._compile_cached.__wrapped__(pattern, True, True, 0)
    assert len(list((tmp_path / "regex").glob("*.npz"))) == 1
    loaded = R._compile_cached.__wrapped__(pattern, True, True, 0)
    assert np.array_equal(built.trans, loaded.trans) and np.array_equal(built.accept, loaded.accept)
    assert loaded.matches(b"aB c") is False and loaded.matches(b"aBc") is True


def test_patterns_without_lookarounds_take_the_plain_path():
    from structgen.automata.fsa import determinize
    from structgen.grammar.regex import build_nfa

    for p in [r"[a-z]+@[a-z]+\.(com|org)", r"(ab|a)*b", r"^é+[α-ω]{1,3}$"]:
        assert not LA.has_lookaround(re._parser.parse(p))
        plain = determinize(build_nfa(p, search=True))
        got = compile_regex(p, search=True)
        assert np.array_equal(plain.trans, got.trans) and np.array_equal(plain.classmap, got.classmap)


# -- Lark terminals -------------------------------------------------------------------------------

OP = r"[+*]|[?](?![a-z])"
STRING = r'([ubf]?r?|r[ubf])("(?!"").*?(?<!\\)(\\\\)*?"|\'(?!\'\').*?(?<!\\)(\\\\)*?\')'
LONG_STRING = r'([ubf]?r?|r[ubf])(""".*?(?<!\\)(\\\\)*?"""|\'\'\'.*?(?<!\\)(\\\\)*?\'\'\')'
ESCAPED_STRING = r'".*?(?<!\\)(\\\\)*?"'
C_COMMENT = r"/\*(.|\n)*?\*/"


def _follow_ok(term, state: int, f: str) -> bool:
    cond = term.follow.get(state)
    if cond is None:
        return True
    return cond.at_end if not f else f.encode()[0] in cond.next_bytes


def _check_terminal(pattern: str, flags: int, lexemes: list[str], follows: list[str], exact: bool) -> None:
    """``exact``: ``re.match`` returns exactly the lexeme (lazy terminals in the documented scope,
    and terminals whose matches are single characters); otherwise some match ends exactly there."""
    term = compile_terminal(pattern, flags)
    dfa = term.dfa
    assert dfa.is_empty() or (dfa.dist_to_accept() >= 0).all(), "trimmed"
    assert all(dfa.accept[s] for s in term.follow), "conditions only on accepting states"
    rx = re.compile(pattern, flags)
    ends = _end_states(dfa, [w.encode() for w in lexemes])
    for w in lexemes:
        s = ends[w.encode()]
        for f in follows:
            got = s >= 0 and bool(dfa.accept[s]) and _follow_ok(term, s, f)
            if exact:
                m = rx.match(w + f)
                want = m is not None and m.group() == w
            else:
                want = re.match(f"(?:{pattern})(?<=\\A[\\s\\S]{{{len(w)}}})", w + f, flags) is not None
            assert got == want, (pattern, w, f, want)


def test_lark_op_terminal():
    term = compile_terminal(OP)
    assert len(term.follow) == 1
    (cond,) = term.follow.values()
    assert cond.at_end and not any(b in cond.next_bytes for b in b"az") and all(b in cond.next_bytes for b in b"A?{ ")
    _check_terminal(OP, 0, _strings("+*?a", 2), ["", "a", "z", "?", "A", "+a"], exact=True)


def test_python_string_terminals_match_re_match():
    term = compile_terminal(STRING, re.I)
    ends = _end_states(term.dfa, [b'""'])
    cond = term.follow[ends[b'""']]
    assert cond.at_end and ord('"') not in cond.next_bytes and ord("a") in cond.next_bytes
    lexemes = _strings("\"\\a'", 5) + ['r"a"', 'Rb"\\""', "bR'x'", 'u"\\\\"', 'f"a\\"b"']
    _check_terminal(STRING, re.I, lexemes, ["", '"', "'", "a", "\\", '"a'], exact=True)
    long_lexemes = [s for s in _strings("\"a\\", 8) if len(s) >= 6] + ['"""\\""""', "'''a'''", 'rb"""x"""']
    _check_terminal(LONG_STRING, re.I | re.S, long_lexemes, ["", '"', "a", "\\"], exact=True)


@pytest.mark.parametrize("pattern,flags,alphabet", [
    (ESCAPED_STRING, 0, "\"\\a"), (C_COMMENT, 0, "/*a\n"), (r"<!--.*?-->", 0, "<!-a"),
])
def test_common_lazy_terminals_match_re_match(pattern, flags, alphabet):
    _check_terminal(pattern, flags, _strings(alphabet, 6), ["", alphabet[0], alphabet[-1]], exact=True)


def _lazy_in_scope(seed: int, n: int) -> list[str]:
    """Opening, one lazy loop of fixed-width iterations, fixed-width closing delimiter."""
    rng = random.Random(seed)
    opens = ["", "a", "ab", "b", "[ab]", "a(?!a)"]
    bodies = [".", "[ab]", "a", "[^a]", "(?:ab|ba)", "(?:(?!bb).)", "(?:(?<!a)b|a)", "(?:a(?=b)|b)"]
    closes = ["b", "ab", "bb", "b(?=a)", "b(?!b)", "(?<!a)b", "a(?<=ba)", "c"]
    quants = ["*?", "+?", "{1,3}?", "??"]
    return [f"{rng.choice(opens)}{rng.choice(bodies)}{rng.choice(quants)}{rng.choice(closes)}" for _ in range(n)]


def test_generated_lazy_terminals_match_re_match():
    lexemes = _strings("abc", 5)
    compiled = 0
    for pattern in _lazy_in_scope(7, 40):
        try:
            compile_terminal(pattern)
        except UnsupportedFeature:
            continue  # e.g. a closing lookbehind that can look before the lexeme
        compiled += 1
        _check_terminal(pattern, 0, lexemes, ["", "a", "b", "c", "ab", "ba"], exact=True)
    assert compiled >= 30


def test_lazy_terminals_take_the_shortest_match():
    """Outside the documented scope the shortest match is still what the DFA gives (re.match differs)."""
    dfa = compile_terminal(r"a+?b+").dfa
    assert dfa.matches(b"ab") and not dfa.matches(b"abb") and dfa.matches(b"aaab")
    dfa = compile_terminal(r"a*?(?:ab)*?b").dfa  # two lazy loops trading length: re.match gives "abb"
    assert dfa.matches(b"ab") and not dfa.matches(b"abb")
    dfa = compile_terminal(r"a*?").dfa  # lazy with no lookaround: the plain DFA, cut
    assert dfa.accepts_empty() and dfa.n_states == 1 and not dfa.matches(b"a")


def test_generated_greedy_terminals():
    lexemes = _strings("abc", 4)
    compiled = 0
    for pattern in _patterns(77, 160, lazy=False):
        try:
            compile_terminal(pattern)
        except UnsupportedFeature as e:
            assert "before the start" in str(e) or "more than the one following byte" in str(e) \
                or "anchor" in str(e), e
            continue
        compiled += 1
        _check_terminal(pattern, 0, lexemes, ["", "a", "b", "c", "ba"], exact=False)
    assert compiled >= 45


def test_terminal_conditions_are_never_merged():
    # the lexeme "a" may be followed by anything but "b"; "ab" by anything: different states
    term = compile_terminal(r"a(?!b)|ab")
    s_a = term.dfa.step(term.dfa.start, ord("a"))
    s_ab = term.dfa.step(s_a, ord("b"))
    assert s_a in term.follow and s_ab not in term.follow
    assert ord("b") not in term.follow[s_a].next_bytes and term.follow[s_a].at_end
    term = compile_terminal(r"x(?=a)|y(?=b)")
    sx, sy = (term.dfa.step(term.dfa.start, ord(c)) for c in "xy")
    assert sx != sy and term.follow[sx].next_bytes == {ord("a")} and term.follow[sy].next_bytes == {ord("b")}
    assert compile_terminal(r"a\Z").follow[1] == LA.FollowCondition(frozenset(), True)


def test_non_ascii_follow_conditions():
    term = compile_terminal(r"a(?![^b])")  # every character a byte 0xC2..0xF4 starts is not "b"
    (cond,) = term.follow.values()
    assert cond.at_end and ord("b") in cond.next_bytes
    assert 0xC3 not in cond.next_bytes and ord("c") not in cond.next_bytes
    _check_terminal(r"é(?=[^a])", 0, ["é", "éé", "a"], ["", "a", "é", "€", "😀", "b"], exact=True)


# -- errors ---------------------------------------------------------------------------------------

def test_terminal_errors():
    with pytest.raises(UnsupportedFeature, match="more than the one following byte"):
        compile_terminal(r"a(?!bc)")
    with pytest.raises(UnsupportedFeature, match="more than the one following byte"):
        compile_terminal(r"a(?!é)")  # é's two bytes
    with pytest.raises(UnsupportedFeature, match="before the start"):
        compile_terminal(r"(?<=a)b")
    with pytest.raises(UnsupportedFeature, match="before the start"):
        compile_terminal(r"a?(?<=a)b")
    for p in [r"^a", r"a$"]:
        with pytest.raises(UnsupportedFeature, match="anchor"):
            compile_terminal(p)
    # the same patterns are fine where the whole string is the subject
    assert compile_regex(r"a(?!bc)", search=True).matches(b"abd") and not compile_regex(r"a(?!bc).*").matches(b"abc")
    d = compile_regex(r"(?<=a)b", search=True)
    assert d.matches(b"ab") and not d.matches(b"b") and not compile_regex(r"(?<=a)b").matches(b"b")


def test_regex_errors_name_the_pattern():
    cases = [
        (r"(?<=a(?=b))b", UnsupportedFeature, "lookahead inside a lookbehind"),
        (r"(?<=a$)b", UnsupportedFeature, "inside a lookbehind"),
        (r"(?<=a+)b", GrammarError, "fixed-width"),
        (r"(?=a)\bb", UnsupportedFeature, "word-boundary"),
        (r"(?=(a))\1", UnsupportedFeature, "backreference"),
        (r"(?=a)(?>a)", UnsupportedFeature, "atomic"),
        (r"(?=a)a++", UnsupportedFeature, "possessive"),
        (r"(?=a", GrammarError, "invalid"),
    ]
    for pattern, exc, words in cases:
        with pytest.raises(exc) as e:
            compile_regex(pattern)
        assert words in str(e.value) and repr(pattern) in str(e.value), (pattern, str(e.value))


def test_blowup_is_bounded(monkeypatch):
    from structgen.grammar import lookaround_construction

    monkeypatch.setattr(lookaround_construction, "MAX_CONFIGURATIONS", 2000)  # the real bound takes about a second to reach
    with pytest.raises(GrammarError, match="too large") as e:
        LA.compile_lookaround(r"^(?:a(?=[ab]{20}b)|b)*$")
    assert "(?=[ab]{20}b)" in str(e.value)
