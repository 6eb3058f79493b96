"""The combined lexer: stepping its table equals running every terminal DFA at once."""
from __future__ import annotations

import random

import pytest

from structgen.engine.lexer import LexerCore
from structgen.errors import GrammarError
from structgen.automata.fsa import literal_dfa
from structgen.grammar.json_strings import string_dfa, string_forms
from structgen.automata.fsa import difference_literals
from structgen.grammar.regex import compile_regex

PATTERNS = [r"[0-9]+", r"-?[0-9]+(\.[0-9]+)?", r"[a-z]+", r"true", r"null", r"\s+", r"ab|abc|abd", r"a*"]


def _reference(dfas, data: bytes):
    """Per-DFA states after ``data`` (-1 dead); the accepting members."""
    states = [d.start for d in dfas]
    for b in data:
        states = [d.step(s, b) if s >= 0 else -1 for d, s in zip(dfas, states)]
    return states, tuple(j for j, (d, s) in enumerate(zip(dfas, states)) if s >= 0 and d.accept[s])


def _run(core, data: bytes):
    s = 0
    for b in data:
        s = int(core.trans[s, core.classmap[b]])
        if s < 0:
            return -1
    return s


@pytest.mark.parametrize("seed", range(6))
def test_core_steps_like_its_dfas(seed):
    rng = random.Random(seed)
    dfas = tuple(compile_regex(p) for p in rng.sample(PATTERNS, rng.randint(1, 5)))
    dfas += (literal_dfa(b"ab"), string_dfa(), difference_literals(string_dfa(), string_forms(["ab", "b"])))
    core = LexerCore(dfas)
    alphabet = b'ab"c01.- \\e'
    for _ in range(400):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 7)))
        states, accepting = _reference(dfas, data)
        s = _run(core, data)
        assert (s < 0) == all(x < 0 for x in states), data
        if s >= 0:
            assert core.acc_kinds[core.acc_id[s] + 1] == accepting, data
            assert core.substates(s) == tuple(states), data


@pytest.mark.parametrize("pattern", PATTERNS + ["json-string", "other-key"])
def test_lone_terminal_core_is_a_view_or_a_copy_that_steps_alike(pattern):
    """A single terminal whose start is never re-entered is used as its own table; one whose start
    is re-entered (``a*``) goes through the product kernel.  Both step like the DFA."""
    d = {"json-string": string_dfa(), "other-key": difference_literals(string_dfa(), string_forms(["ab"]))}.get(
        pattern) or compile_regex(pattern)
    core = LexerCore((d,))
    reentered = d.start != 0 or bool((d.trans == 0).any())
    assert (core.trans is not None) and ((core.n_states == d.n_states) != reentered)
    rng = random.Random(pattern)
    alphabet = b'ab"c01.- \\etrunl'
    for _ in range(300):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 7)))
        states, accepting = _reference((d,), data)
        s = _run(core, data)
        assert (s < 0) == (states[0] < 0), data
        if s >= 0:
            assert core.acc_kinds[core.acc_id[s] + 1] == accepting, data
            assert core.substates(s) == tuple(states), data


def test_core_with_no_dfas_and_state_cap(monkeypatch):
    empty = LexerCore(())
    assert empty.trans.shape == (1, 1) and empty.acc_kinds == ((),)
    import structgen.engine.lexer as lexer

    monkeypatch.setattr(lexer, "MAX_LEXER_STATES", 10)
    with pytest.raises(GrammarError, match="lexer too large"):
        LexerCore((compile_regex("[a-z]{0,30}"), compile_regex("[a-m]{0,30}x")))


def test_a_cut_to_first_bytes_keeps_an_automaton_whose_lexemes_all_start_there():
    """After an opener's blanks, lexemes may not start with a blank: an automaton none of whose
    lexemes does is kept as it is (its lexers then share one core), the others are cut."""
    from structgen.engine.lexer import starting_with

    first = frozenset(range(256)) - frozenset(b" \t\n\r")
    string = string_dfa()
    assert starting_with(string, first) is string
    closer = compile_regex(r"[ \t\n\r]{0,4}\}")
    cut = starting_with(closer, first)
    assert cut is not closer
    assert cut.matches(b"}") and not cut.matches(b" }") and closer.matches(b" }")
    empty_ok = compile_regex(r"a*")  # the empty lexeme starts with no byte: cut
    assert not starting_with(empty_ok, first).matches(b"")
