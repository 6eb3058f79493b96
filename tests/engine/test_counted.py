"""Counted walks of the vocabulary (``structgen.engine.counted``): the mask of a length-bounded
string's position is read from one walk of the trie through the unbounded string, by how many
characters may still come and how many must.  Checked against brute force: stepping the bounded
string's own automaton over every token (and every trie node) of the real SmolLM2 vocabulary."""
from __future__ import annotations

import numpy as np
import pytest

import structgen.compiler  # noqa: F401  (names the string automata of counted walks)
from structgen.engine.counted import (MAX_COUNT, CountedStrings, boundary_counts, class_counted,
                                      counted_strings)
from structgen.engine.trie import TokenTrie
from structgen.grammar.json_strings import class_string_dfa, length_content, quoted, string_dfa


class TrieWalker:
    """A plain-Python pre-order walk of a trie with a DFA (the reference)."""

    def __init__(self, trie: TokenTrie):
        self.trie = trie
        self.nb, self.nd, self.ne = trie.node_byte.tolist(), trie.node_depth.tolist(), trie.node_end.tolist()
        self.tp, self.ti = trie.tok_ptr.tolist(), trie.tok_ids.tolist()

    def walk(self, dfa, state: int) -> tuple[set[int], set[int], set[int]]:
        """(tokens whose bytes keep ``dfa`` alive from ``state``, those of them that end accepting,
        nodes whose parent's path ends accepting: where the next lexeme starts)."""
        trans, cm, acc = dfa.trans.tolist(), dfa.classmap.tolist(), dfa.accept.tolist()
        at = [0] * (self.trie.max_depth + 2)
        at[0] = state
        alive, ending, after = set(), set(), set()
        nb, nd, ne, tp, ti = self.nb, self.nd, self.ne, self.tp, self.ti
        j, end = 1, ne[0]
        while j < end:
            ps = at[nd[j] - 1]
            if acc[ps]:
                after.add(j)
            s = trans[ps][cm[nb[j]]]
            if s < 0:
                j = ne[j]
                continue
            at[nd[j]] = s
            toks = ti[tp[j]:tp[j + 1]]
            alive.update(toks)
            if acc[s]:
                ending.update(toks)
            j += 1
        return alive, ending, after


def _bits(words: np.ndarray, vocab_size: int) -> set[int]:
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")[:vocab_size]
    return set(np.nonzero(bits)[0].tolist())


def _state(dfa, data: bytes) -> int:
    s = dfa.start
    for b in data:
        s = dfa.step(s, b)
        assert s >= 0, data
    return s


@pytest.fixture(scope="module")
def trie(smol_info):
    return TokenTrie.cached(smol_info.token_bytes, frozenset(smol_info.special_ids), smol_info.vocab_size,
                            fingerprint=smol_info.fingerprint())


@pytest.fixture(scope="module")
def walker(trie):
    return TrieWalker(trie)


@pytest.fixture(scope="module")
def cs(trie):
    out = counted_strings(trie)
    assert out is not None
    return out


# -- a hand-made vocabulary: every count by hand -------------------------------------------------

TOKS = [b'"', b"a", b"ab", b'ab"', b"\\", b"\\n", b'\\n"', b"\xc3", b"\xc3\xa9", b'",', b"abc", b'"a', b"}",
        b"\n", b'ab",']


def _paths(trie: TokenTrie) -> list[bytes]:
    out, path = [], []
    for j in range(trie.n_nodes):
        d = int(trie.node_depth[j])
        del path[max(d - 1, 0):]
        if d:
            path.append(int(trie.node_byte[j]))
        out.append(bytes(path))
    return out


@pytest.mark.parametrize("lo,hi,mask,after", [
    # open tokens start at most hi characters (an escape or a UTF-8 lead byte starts one); closing
    # tokens close after lo..hi; a token running past the quote is the next lexeme's (a boundary)
    (0, 0, {b'"'}, {b'",', b'"a'}),
    (1, 2, {b"a", b"ab", b'ab"', b"\\", b"\\n", b'\\n"', b"\xc3", b"\xc3\xa9", b"}"}, {b'ab",'}),
    (0, 1, {b'"', b"a", b"\\", b"\\n", b'\\n"', b"\xc3", b"\xc3\xa9", b"}"}, {b'",', b'"a'}),
    (3, 3, {b"a", b"ab", b"\\", b"\\n", b"\xc3", b"\xc3\xa9", b"abc", b"}"}, set()),
])
def test_counts_of_a_small_vocabulary(lo, hi, mask, after):
    trie = TokenTrie.build(TOKS, frozenset(), len(TOKS))
    c = CountedStrings(trie, string_dfa())
    m, ev = c.inside(lo, hi)
    assert {TOKS[t] for t in _bits(m, len(TOKS))} == mask
    paths = _paths(trie)
    assert {paths[j] for j in ev} == after  # the node of the byte after the closing quote


# -- the real vocabulary against brute force ------------------------------------------------------

@pytest.mark.parametrize("lo,hi", [(0, 3), (2, 5), (4, 4)])
def test_bounded_string_positions_match_brute_force(trie, walker, cs, lo, hi):
    d = string_dfa(min_len=lo, max_len=hi)
    assert d.length_bounds == (lo, hi)
    counts = boundary_counts(d, cs.base, cs.b_state, cs.closed_state)
    for k in range(hi + 1):
        s = _state(d, b'"' + "é".encode() * k)  # multi-byte characters count once each
        assert counts[s] == k
        m, ev = cs.inside(lo - k, hi - k)
        alive, _, after = walker.walk(d, s)
        assert _bits(m, trie.vocab_size) == alive, (lo, hi, k)
        assert set(ev.tolist()) == after, (lo, hi, k)


def test_unbounded_budgets_are_the_unbounded_string(trie, walker, cs):
    alive, ending, after = walker.walk(cs.base, cs.b_state)
    m, ev = cs.inside(0, MAX_COUNT)
    assert _bits(m, trie.vocab_size) == alive and set(ev.tolist()) == after
    assert len(ending) > 10 and len(alive) > 40_000  # most tokens may sit inside a string
    m2, ev2 = cs.inside(0, 10 * MAX_COUNT)  # budgets past the longest token behave alike
    assert np.array_equal(m, m2) and np.array_equal(ev, ev2)
    m3, _ = cs.inside(1, MAX_COUNT)  # at least one character must come: only a bare quote is refused
    bare = {t for t in ending if trie.token_bytes[t] == b'"'}
    assert bare and _bits(m3, trie.vocab_size) == alive - bare


def test_boundary_counts_only_at_character_boundaries(cs):
    d = string_dfa(min_len=1, max_len=3)
    counts = boundary_counts(d, cs.base, cs.b_state, cs.closed_state)
    expect = {b"": -1, b'"': 0, b'"a': 1, b'"ab': 2, b'"abc': 3, b'"\\': -1, b'"\\n': 1, b'"\xc3': -1,
              b'"\xc3\xa9': 1, b'"a\\u00e': -1, b'"a\\u00e9': 2, b'"a"': -1}
    assert {k: int(counts[_state(d, k)]) for k in expect} == expect
    assert boundary_counts(d, cs.base, cs.b_state, cs.closed_state) is counts  # cached on the DFA
    # a state reached after one character or after two: no count fits it
    assert boundary_counts(string_dfa(patterns=("^(a|bc)d$",)), cs.base, cs.b_state, cs.closed_state) is None


@pytest.mark.parametrize("r,tail", [(1, None), (3, None), (2, (0, 5)), (4, (1, 2))])
def test_chunks_match_brute_force(trie, walker, cs, r, tail):
    """Inside a long string's chunk with ``r`` characters left: tokens that fit in the chunk,
    tokens closing the tail after lo..hi characters, and the nodes where a token leaves the chunk
    (exactly ``r`` characters before it) or the string."""
    m, closed_ev, open_ev = cs.chunk(r, *(tail or (None, None)))
    fits, _, _ = walker.walk(length_content(0, r), length_content(0, r).start)
    _, _, chunk_end = walker.walk(length_content(r, r), length_content(r, r).start)
    want, want_closed = set(fits), set()
    if tail is not None:
        t = quoted(length_content(*tail))
        _, closing, want_closed = walker.walk(t, _state(t, b'"'))
        want |= closing
    assert _bits(m, trie.vocab_size) == want
    assert set(closed_ev.tolist()) == want_closed
    assert set(open_ev.tolist()) == chunk_end
    assert len(chunk_end) > 0 and (tail is None or len(want_closed) > 0)


# -- strings of one character class ---------------------------------------------------------------

HEX = frozenset(b"0123456789abcdef")


@pytest.mark.parametrize("pattern,chars,lo,hi", [
    ("^[0-9a-f]{24}$", HEX, 24, 24),
    ("^[a-z]{2,6}$", frozenset(b"abcdefghijklmnopqrstuvwxyz"), 2, 6),
    ("^[a-z]{0,4}$", frozenset(b"abcdefghijklmnopqrstuvwxyz"), 0, 4),
])
def test_class_strings_are_recognised(pattern, chars, lo, hi):
    base, got_lo, got_hi = class_counted(string_dfa(patterns=(pattern,)))
    assert (got_lo, got_hi) == (lo, hi) and base is class_string_dfa(chars)


@pytest.mark.parametrize("pattern", ["^[a-z]{3}[0-9]{2}$", "^(ab|cd)$", "^[a-z]*$", "^[a-zé]{3}$",
                                     "^[a-z]{2}x$"])
def test_other_strings_are_not_class_strings(pattern):
    assert class_counted(string_dfa(patterns=(pattern,))) is None


def test_class_string_positions_match_brute_force(trie, walker):
    d = string_dfa(patterns=("^[0-9a-f]{6,8}$",))
    base, lo, hi = class_counted(d)
    c = counted_strings(trie, base)
    assert c is counted_strings(trie, base) and c is not counted_strings(trie)  # one walk per class
    counts = boundary_counts(d, c.base, c.b_state, c.closed_state)
    for k in (0, 1, 5, 6, 7, 8):
        s = _state(d, b'"' + b"a0f9e3c7"[:k])
        assert counts[s] == k
        m, ev = c.inside(lo - k, hi - k)
        alive, _, after = walker.walk(d, s)
        assert _bits(m, trie.vocab_size) == alive, k
        assert set(ev.tolist()) == after, k
