"""The lazy DFA: state ids kept as its tables grow, and a bound on their size."""
from __future__ import annotations

import pytest

from structgen.automata.fsa import nfa_tables
from structgen.automata.lazy_dfa import LazyDFA
from structgen.errors import GrammarError
from structgen.grammar.regex import build_nfa


def test_start_set_and_distances():
    d = LazyDFA(nfa_tables(build_nfa(r"ab|c")))
    assert not d.accept[d.start] and d.dist[d.start] == 1
    s = d.run(d.start, b"a")
    assert d.dist[s] == 1 and d.run(s, b"b") >= 0 and d.accept[d.run(s, b"b")]
    assert d.run(d.start, b"x") == -1 and d.run(s, b"c") == -1


def test_tables_grow_keeping_state_ids():
    tables = nfa_tables(build_nfa(r"[ab]*a[ab]{12}"))
    d = LazyDFA(tables, capacity=4)
    s = d.run(d.start, b"abbabab")
    path = [d.run(d.start, b"abbabab"[:k]) for k in range(8)]
    assert d.explore(10_000) is False or d.n_states <= 10_000
    assert d.sets.shape[0] > 4  # grown
    assert [d.run(d.start, b"abbabab"[:k]) for k in range(8)] == path and path[-1] == s


def test_growth_past_the_bound_is_a_grammar_error_naming_the_pattern():
    tables = nfa_tables(build_nfa(r"[ab]*a[ab]{30}"))
    d = LazyDFA(tables, source=r"[ab]*a[ab]{30}", capacity=16, max_bytes=64 << 10)
    with pytest.raises(GrammarError, match=r"\[ab\]\*a\[ab\]\{30\}"):
        d.explore(1 << 30)
