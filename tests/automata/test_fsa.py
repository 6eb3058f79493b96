"""Automaton operations: the fast paths agree with the general constructions."""
from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from structgen.errors import GrammarError
from structgen.automata import fsa
from structgen.automata.fsa import difference, difference_literals, intersect, literal_set_dfa, union
from structgen.grammar.regex import compile_regex

PATTERNS = [r"[a-c]*", r"a(b|c)+d?", r"[^b]{0,4}", r"(ab|ba)*", r"\"[a-z]*\"", r"a{3,}|c"]


def _strings(alphabet: str, max_len: int):
    for n in range(max_len + 1):
        for t in itertools.product(alphabet, repeat=n):
            yield "".join(t).encode()


def unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique rows, inverse index) of a 2-D integer array (the reference Moore refinement's signatures)."""
    a = np.ascontiguousarray(a, dtype=np.int64)
    v = a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).reshape(-1)
    _, idx, inv = np.unique(v, return_index=True, return_inverse=True)
    return a[idx], inv.reshape(-1)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_difference_literals_matches_language(pattern):
    rng = random.Random(pattern)
    a = compile_regex(pattern)
    universe = list(_strings('abcd"', 4))
    for _ in range(20):
        removed = rng.sample(universe, rng.randint(0, 8)) + [b""] * rng.randint(0, 1)
        d = difference_literals(a, removed)
        for s in universe:
            assert d.matches(s) == (a.matches(s) and s not in removed), (pattern, removed, s)


def test_product_matches_language():
    universe = list(_strings("abcd", 5))
    for p, q in itertools.combinations(PATTERNS, 2):
        a, b = compile_regex(p), compile_regex(q)
        for op, f in ((intersect, lambda x, y: x and y), (union, lambda x, y: x or y),
                      (difference, lambda x, y: x and not y)):
            d = op(a, b)
            for s in universe:
                assert d.matches(s) == f(a.matches(s), b.matches(s)), (p, q, op.__name__, s)


def test_product_state_cap(monkeypatch):
    monkeypatch.setattr(fsa, "MAX_DFA_STATES", 50)
    with pytest.raises(GrammarError, match="too large"):
        intersect(compile_regex("[ab]{0,40}"), compile_regex("[a-c]*a[a-c]{3}"))


def test_difference_with_literal_set_dfa_equals_difference_literals():
    a = compile_regex(r"\"[a-z]{0,6}\"")
    names = [b'"id"', b'"name"', b'"n"', b'"zz"']
    x, y = difference(a, literal_set_dfa(names)), difference_literals(a, names)
    for s in _strings("inz\"", 5):
        assert x.matches(s) == y.matches(s)


def _depth_classes_reference(dfa, depth):
    """Moore refinement with numpy rows, ``depth`` rounds: the plain definition."""
    n = dfa.n_states
    part = dfa.accept.astype(np.int64)
    k = len(np.unique(part))
    for _ in range(depth):
        succ = np.where(dfa.trans >= 0, part[np.maximum(dfa.trans, 0)], -1)
        _, new = unique_rows(np.concatenate([part[:, None], succ], axis=1))
        k2 = int(new.max()) + 1
        part = new
        if k2 == k:
            break
        k = k2
    rep = np.zeros(k, dtype=np.int64)
    rep[part[::-1]] = np.arange(n)[::-1]
    return rep[part]


@pytest.mark.parametrize("pattern", [r"[a-z]{0,40}", r"(ab|c){3,30}x", r"[^\"]{5,60}", r"a*b{2,9}"])
@pytest.mark.parametrize("depth", [1, 4, 129])
def test_depth_classes_match_reference(pattern, depth):
    import numpy as np

    dfa = compile_regex(pattern)
    got = dfa.depth_classes(depth)
    assert np.array_equal(got, _depth_classes_reference(dfa, depth))


def test_hopcroft_classes_equal_moore_refinement_on_random_dfas():
    """minimize() uses Hopcroft's refinement; Moore's (run to its fixpoint) is the reference."""
    import numpy as np

    from structgen.automata.fsa import DFA, minimize, trim
    from structgen.automata.minimize_kernels import depth_canonical, hopcroft_blocks

    rng = np.random.default_rng(0)
    for _ in range(500):
        n, c = int(rng.integers(1, 30)), int(rng.integers(1, 5))
        trans = rng.integers(-1, n, size=(n, c)).astype(np.int32)
        trans[rng.random((n, c)) < 0.3] = -1
        cm = np.zeros(256, dtype=np.int32)
        cm[:c] = np.arange(c)
        d = trim(DFA(trans, rng.random(n) < 0.4, cm, 0))
        t, a = np.ascontiguousarray(d.trans, dtype=np.int32), np.ascontiguousarray(d.accept)
        h, m = hopcroft_blocks(t, a).tolist(), depth_canonical(t, a, d.n_states + 1).tolist()
        assert len(set(zip(h, m))) == len(set(h)) == len(set(m))  # the same partition
        assert minimize(d).n_states == (len(set(m)) if d.n_states > 2 else d.n_states)
