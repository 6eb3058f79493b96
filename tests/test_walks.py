"""Walks shared across grammars: a terminal with carve-outs walked as the shared
automaton (its "shadow") must give exactly the masks of a direct walk."""
from __future__ import annotations

import numpy as np
import pytest

from engine_helpers import brute_force_mask, mask_set
from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.engine.walks import TrieWalker
from structgen.grammar.fsa import DFA, difference, difference_literals
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
        assert np.array_equal(w1.mask, w2.mask), s
        e1 = sorted(zip(w1.ev_nodes.tolist(), w1.ev_states.tolist()))
        e2 = sorted(zip(w2.ev_nodes.tolist(), w2.ev_states.tolist()))
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
