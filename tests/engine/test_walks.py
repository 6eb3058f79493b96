"""Walks shared across grammars: a terminal with carve-outs walked as the shared
automaton (its "shadow") must give exactly the masks of a direct walk."""
from __future__ import annotations

import numpy as np
import pytest

from engine_helpers import brute_force_mask, mask_set
from structgen.compiler import GrammarCompiler
from structgen.engine.counted import CountedStrings
from structgen.engine.matcher import Matcher
from structgen.engine.walks import EV_NODES, EV_STATES, MASK, TrieWalker
from structgen.automata.fsa import DFA, difference, difference_literals
from structgen.grammar.json_strings import string_dfa, string_forms

KEYS = ["name", "nam", "names", "naïve", "x", "ÿ", "a\"b", "名前"]


@pytest.fixture(scope="module")
def smol_compiler(smol_info):
    return GrammarCompiler(smol_info)


def test_shadow_marks_the_states_that_behave_as_the_shared_dfa():
    a = string_dfa()
    d = difference_literals(a, string_forms(KEYS))
    shared, base, pure, pure_of = d.shadow
    assert shared is a
    for s in np.nonzero(pure)[0]:
        assert pure_of[base[s]] == s
        for b in range(256):  # a pure state steps to the pure state of a's next state
            nxt = d.step(int(s), b)
            ref = a.step(int(base[s]), b)
            assert (nxt < 0) == (ref < 0)
            if nxt >= 0:
                assert pure[nxt] and base[nxt] == ref and d.accept[nxt] == a.accept[ref]
    for k in KEYS:
        for form in string_forms([k]):
            assert a.matches(form) and not d.matches(form)


def _carved(kind: str):
    d = difference_literals(string_dfa(), string_forms(KEYS))
    if kind == "keys and a pattern":  # patternProperties carved out too: the shadow is inherited
        d = difference(d, string_dfa(("^n[a-z]",)))
    return d


def test_difference_keeps_the_shadow_where_the_pattern_died():
    d = _carved("keys and a pattern")
    shared, base, pure, pure_of = d.shadow
    assert shared is string_dfa() and pure.any() and not pure.all()
    assert d.matches(b'"zzz"') and not d.matches(b'"nab"') and not d.matches(b'"name"')


@pytest.mark.parametrize("kind", ["keys", "keys and a pattern"])
def test_anchored_walks_equal_direct_walks(smol_compiler, kind):
    """Every state of a carved-out key DFA: the walk through the shared automaton equals
    the direct walk of its own table (tokens and lexeme ends)."""
    trie = smol_compiler.trie
    d = _carved(kind)
    assert d.shadow is not None
    plain = DFA(d.trans, d.accept, d.classmap, d.start)  # the same table, walked directly
    anchored, direct = TrieWalker(trie), TrieWalker(trie)
    for s in range(d.n_states):
        w1, w2 = anchored.dfa_walk(d, s), direct.dfa_walk(plain, s)
        assert np.array_equal(w1[MASK], w2[MASK]), s
        e1 = sorted(zip(w1[EV_NODES].tolist(), w1[EV_STATES].tolist()))
        e2 = sorted(zip(w2[EV_NODES].tolist(), w2[EV_STATES].tolist()))
        assert e1 == e2, s


@pytest.mark.parametrize("order", ["schema", "any"])
def test_key_prefix_masks_equal_brute_force(smol_compiler, order):
    """Masks along key prefixes, where key literals and the "any other key" terminal are alive together."""
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in KEYS},
              "additionalProperties": {"type": "boolean"}}
    g = smol_compiler.compile_json_schema(schema, property_order=order)
    for text in ['{', '{"', '{"n', '{"na', '{"nam', '{"name', '{"names', '{"name"', '{"q', '{"na\\u',
                 '{"a\\"', '{"名', '{"x": 1, "', '{"x": 1, "na', '{"nam": 2, "nam']:
        m = Matcher(g)
        assert m.accept_string(text), text
        assert mask_set(m) == brute_force_mask(m), text


def _masks_along(compiler, schema, text: str, step: int = 2) -> list:
    from structgen.engine.walks import clear_caches

    clear_caches()
    g = compiler.compile_json_schema(schema, property_order="any")
    g.clear_masks()
    m, data, out, i = Matcher(g), text.encode(), [], 0
    while i < len(data):
        out.append(m.next_token_mask().copy())
        assert m.accept_bytes(data[i:i + step]), i
        i += step
    return out


@pytest.mark.parametrize("schema,value", [
    # a long string: chunk + tail terminals alive together, masked from the counted walk
    ({"type": "string", "minLength": 20, "maxLength": 3000}, "".join("abc XYZ 019 .,é\"\\" [i % 16] for i in range(600))),
    # one single-byte class with bounds (patterns like ids and hex digests)
    ({"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,255}$"}, "abc_XYZ-0123456789" * 3),
    ({"type": "string", "pattern": "^[A-Fa-f\\d]{24}$"}, "0123456789abcdefABCDEF01"),
])
def test_counted_masks_equal_direct_walks(smol_compiler, monkeypatch, schema, value):
    """Masks taken from counted walks (long-string chunks, character classes) equal the masks of
    walking every state directly, position by position."""
    import json

    text = json.dumps({"v": value}, ensure_ascii=False)
    obj = {"type": "object", "properties": {"v": schema}, "required": ["v"]}
    taken = []
    chunk_walk, counted_inside = TrieWalker._chunk_walk, CountedStrings.inside
    monkeypatch.setattr(TrieWalker, "_chunk_walk", lambda self, *a: taken.append("chunk") or chunk_walk(self, *a))
    monkeypatch.setattr(CountedStrings, "inside", lambda self, *a: taken.append("counted") or counted_inside(self, *a))
    counted = _masks_along(smol_compiler, obj, text)
    assert len(taken) > 10  # the counted path served most positions
    monkeypatch.setattr(TrieWalker, "_counted", lambda self, dfa, sub: None)
    monkeypatch.setattr(TrieWalker, "_counted_chunk", lambda self, core, ls: None)
    direct = _masks_along(smol_compiler, obj, text)
    assert len(counted) == len(direct)
    for k, (a, b) in enumerate(zip(counted, direct)):
        assert np.array_equal(a, b), k


def test_class_patterns_are_recognised_exactly():
    from structgen.engine.counted import class_counted

    def dfa(pattern):
        return string_dfa((pattern,))

    base, lo, hi = class_counted(dfa("^[0-9a-f]{24}$"))
    assert (lo, hi) == (24, 24)
    assert class_counted(dfa("^[0-9a-zA-Z_-]{1,255}$"))[1:] == (1, 255)
    assert class_counted(dfa("^[a-z]{2}[0-9]{3,40}$")) is None  # two classes
    assert class_counted(dfa("^[a-c]{3,30}x$")) is None  # a different last character
    assert class_counted(dfa("^[a-zé]{3,30}$")) is None  # a character beyond ASCII


def test_text_loops_are_exactly_the_states_every_character_returns_to():
    """plain_loop_states flags 2 only where every plain byte and every well-formed UTF-8
    character lead back to the state (checked character by character)."""
    from structgen.engine.trie import PLAIN_BYTES, plain_loops

    chars = [chr(c) for c in (0xE9, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xE000, 0xFFFD, 0x10000, 0x3FFFF,
                              0x40000, 0x10FFFF, 0x540D)]
    cases = [string_dfa(), string_dfa(("^[^@]+@[^@]+$",)), string_dfa(("^[a-z ]*$",)),
             string_dfa(("^[^é]*$",)), string_dfa(("^.*名.*$",)), string_dfa((), 3, None)]
    seen = set()
    for d in cases:
        flags = plain_loops(d.trans, d.classmap)
        for s in range(d.n_states):
            plain = all(d.step(s, b) == s for b in range(256) if PLAIN_BYTES[b])
            every_char = plain and all(_run(d, s, ch.encode()) == s for ch in chars)
            assert flags[s] == (0 if not plain else 2 if every_char else 1) or (flags[s] == 1 and every_char), (d, s)
            seen.add(int(flags[s]))
    assert seen == {0, 1, 2}


def _run(d, s, data: bytes) -> int:
    for b in data:
        s = d.step(s, b)
        if s < 0:
            return -1
    return s


def test_text_subtree_kinds_match_their_tokens(smol_compiler):
    """node_plain_below: 1 where every byte below a node is plain, 2 where the bytes below form
    well-formed text from a character boundary (the last character possibly cut)."""
    from structgen.engine.trie import PLAIN_BYTES

    trie = smol_compiler.trie
    tb = trie.token_bytes
    rng = np.random.default_rng(0)
    kinds = trie.node_plain_below
    assert (kinds == 2).any() and (kinds == 1).any()
    # rebuild each node's path bytes from the preorder arrays
    path = [b""] * trie.n_nodes
    stack = [b""] * (trie.max_depth + 2)
    for j in range(1, trie.n_nodes):
        d = int(trie.node_depth[j])
        stack[d] = stack[d - 1] + bytes([int(trie.node_byte[j])])
        path[j] = stack[d]
    for j in rng.choice(trie.n_nodes, 3000, replace=False).tolist():
        below = [path[i][len(path[j]):] for i in range(j + 1, int(trie.node_end[j]))]
        plain = all(PLAIN_BYTES[b] for x in below for b in x)
        text = _boundary(path[j]) and all(_well_formed_prefix(x) for x in below)
        assert kinds[j] == (1 if plain else 2 if text else 0), (j, path[j])
    assert tb  # the trie came from a real vocabulary


def _boundary(data: bytes) -> bool:
    """After ``data`` a reader that resynchronises at ASCII bytes is at a character boundary."""
    tail = data
    for i in range(len(data) - 1, -1, -1):
        if data[i] < 0x80:
            tail = data[i + 1:]
            break
    return _well_formed_prefix(tail) and _decodes(tail)


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _well_formed_prefix(data: bytes) -> bool:
    """Plain ASCII and UTF-8 characters, the last possibly cut short."""
    for cut in range(4):
        if cut > len(data):
            break
        head = data[:len(data) - cut]
        try:
            head.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if any(b < 0x80 and not (0x20 <= b <= 0x7E and b not in b'"\\') for b in head):
            return False
        rest = data[len(data) - cut:]
        if not rest:
            return True
        return any(_decodes(rest + tail) for tail in (b"\x80", b"\x80\x80", b"\x80\x80\x80", b"\xa0\x80", b"\x90\x80\x80"))
    return False


@pytest.mark.parametrize("schema", [
    {"type": "string"},
    {"type": "string", "pattern": "^[^@]+@[^@]+$"},
    {"type": "string", "minLength": 40},
    {"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
])
def test_text_loop_masks_equal_brute_force(smol_compiler, schema):
    """Masks inside free text -- walks that take whole subtrees of well-formed UTF-8 without a
    visit -- equal brute force, at every byte offset (including inside multi-byte characters)."""
    import json

    from structgen.engine.walks import clear_caches

    clear_caches()
    value = "naïve 名前 x@y ü€𝄞 plain text, more text é, and after it: ü€𝄞 名前 é ok"
    doc = {"x-a": 1, "名前": value} if schema.get("type") == "object" else value
    data = json.dumps(doc, ensure_ascii=False).encode()
    g = smol_compiler.compile_json_schema(schema, property_order="any")
    m = Matcher(g)
    for i in range(len(data) - 1):
        if data[i] >= 0x80 or i % 8 == 0:  # every offset around multi-byte characters, some others
            assert mask_set(m) == brute_force_mask(m), (i, data[:i])
        assert m.accept_bytes(data[i:i + 1]), i


def test_boundary_events_group_by_label_in_preorder():
    """Continuations are keyed by a group's nodes, so a group holds exactly its label's events, in
    the order the walk met them, whatever order the labels came in."""
    from structgen.engine.walks import split_by_state_label

    rng = np.random.default_rng(0)
    for n in (0, 1, 5, 200):
        nodes = np.sort(rng.choice(10_000, size=n, replace=False)).astype(np.int32)
        states = rng.integers(0, 6, size=n).astype(np.int32)
        label_of = np.array([3, -1, 3, 0, 7, 2], dtype=np.int32)
        labels, ptr, grouped = split_by_state_label(nodes, states, label_of)
        want = sorted({int(label_of[s]) for s in states})
        assert labels.tolist() == want
        for i, lab in enumerate(want):
            got = grouped[ptr[i]:ptr[i + 1]].tolist()
            assert got == [int(v) for v, s in zip(nodes, states) if label_of[s] == lab]
