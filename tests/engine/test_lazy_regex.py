"""Regex constraints over a lazy DFA: masks equal brute force, the Matcher contract, bounds."""
from __future__ import annotations

import random

import numpy as np
import pytest
import regex as oracle_re

from structgen import GrammarCompiler, Matcher, generate_regex
from structgen.compiler import EAGER_REGEX_STATES
from structgen.engine.compiled import CompiledGrammar
from structgen.engine.lazy_regex import LazyRegexGrammar
from structgen.errors import GrammarError
from structgen.automata.fsa import nfa_tables
from structgen.grammar.regex import build_nfa


@pytest.fixture(scope="module")
def compiler(smol_info):
    return GrammarCompiler(smol_info)


def lazy_grammar(compiler, pattern: str) -> LazyRegexGrammar:
    """A lazy grammar for any pattern, small ones included (the compiler picks eager tables there)."""
    return LazyRegexGrammar(nfa_tables(build_nfa(pattern)), compiler.tokenizer, compiler.trie, source=pattern)


def allowed(m: Matcher) -> set[int]:
    words = m.next_token_mask()
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: m.vocab_size]
    return set(np.flatnonzero(bits).tolist())


def brute_force(pattern: str, out: bytes, info, eos_ids) -> set[int] | None:
    """Tokens after which ``out`` is still a prefix of a match (the ``regex`` package's partial
    matching, an engine independent of structgen's automata), and EOS where ``out`` matches.  Only
    tokens whose bytes complete whole characters are judged (None for the others)."""
    want = set()
    for t, b in enumerate(info.token_bytes):
        if not b or t in info.special_ids:
            continue
        try:
            text = (out + b).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if oracle_re.fullmatch(pattern, text, partial=True):
            want.add(t)
    if oracle_re.fullmatch(pattern, out.decode("utf-8")):
        want.update(eos_ids)
    return want


def whole_char_tokens(info, out: bytes) -> set[int]:
    keep = set()
    for t, b in enumerate(info.token_bytes):
        try:
            (out + b).decode("utf-8")
            keep.add(t)
        except UnicodeDecodeError:
            pass
    return keep | set(info.eos_ids)


# (structgen's \w and \d are ASCII, as in ECMA-262 and inside Python's Unicode classes: the oracle's
# are Unicode, so the patterns spell ASCII classes out)
PATTERNS = [r"[ab]*a[ab]{22}", r"[0-9a-f]*f[0-9a-f]{6}", r"([a-z0-9_]+@)?[a-z]{2,5}\.(com|org)", r"(ab)*",
            r"[é-ü]*x.{3}", r"(cat|category|dog)s?( [0-9]+)?", r".*[0-9]{5}"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_masks_equal_brute_force_along_random_walks(compiler, smol_info, pattern):
    g = lazy_grammar(compiler, pattern)
    rng = random.Random(7)
    m = Matcher(g)
    for _ in range(8):
        got = allowed(m)
        out = m.output_bytes()
        want = brute_force(pattern, out, smol_info, g.eos_ids)
        judged = whole_char_tokens(smol_info, out)
        assert got & judged == want, (pattern, out, sorted(got & judged ^ want)[:10])
        # the rest (tokens ending inside a character) must agree with accept_token
        for t in list(got - judged)[:50]:
            c = m.copy()
            assert c.accept_token(t)
        ids = [t for t in got if t not in g.eos_ids]
        if not ids:
            break
        assert m.accept_token(rng.choice(ids))


def test_lazy_and_eager_masks_agree(compiler):
    """Below the threshold the compiler builds eager tables: both constructions give one mask."""
    pattern = r"[ab]*a[ab]{6}(x|yz)?"
    eager = compiler.compile_regex(pattern)
    assert isinstance(eager, CompiledGrammar)
    lazy = lazy_grammar(compiler, pattern)
    rng = random.Random(3)
    me, ml = Matcher(eager), Matcher(lazy)
    for _ in range(25):
        a, b = allowed(me), allowed(ml)
        assert a == b
        assert me.is_accepting() == ml.is_accepting()
        assert me.min_completion_bytes() == ml.min_completion_bytes()
        ids = [t for t in a if t not in eager.eos_ids]
        if not ids:
            break
        t = rng.choice(ids)
        assert me.accept_token(t) and ml.accept_token(t)


@pytest.mark.parametrize("n", [13, 22, 64])
def test_counted_run_after_a_star_compiles_lazily(compiler, n):
    pattern = f"[ab]*a[ab]{{{n}}}"
    g = compiler.compile_regex(pattern)
    assert isinstance(g, LazyRegexGrammar)
    assert g.dfa.n_states > EAGER_REGEX_STATES  # the exploration that chose the lazy DFA
    m = Matcher(g)
    assert m.min_completion_bytes() == n + 1
    assert m.accept_string("b" * 5 + "a" + "b" * n)
    assert m.is_accepting() and m.min_completion_bytes() == 0
    assert not m.accept_string("c")
    assert m.accept_string("a")
    assert not m.is_accepting()  # the a n+1 from the end is now a b


def test_small_patterns_keep_eager_tables(compiler):
    assert isinstance(compiler.compile_regex(r"[ab]*a[ab]{3}"), CompiledGrammar)
    assert isinstance(compiler.compile_regex(r"[0-9a-z_-]{1,255}"), CompiledGrammar)  # counted class
    assert isinstance(compiler.compile_regex(r"(?=ab)[ab]*a[ab]{3}"), CompiledGrammar)  # lookaround
    with pytest.raises(GrammarError, match="lookarounds is too large"):  # lookarounds have no lazy DFA yet
        compiler.compile_regex(r"(?=ab)[ab]*a[ab]{20}")


def test_matcher_contract_on_a_lazy_grammar(compiler, smol_info):
    g = compiler.compile_regex(r"[ab]*a[ab]{15}!")
    assert isinstance(g, LazyRegexGrammar)
    token = {b: i for i, b in reversed(list(enumerate(smol_info.token_bytes)))}
    m = Matcher(g)
    assert m.accept_string("ab")
    c = m.copy()
    assert m.accept_token(token[b"a"])
    m.rollback(1)
    assert m.output_bytes() == c.output_bytes() == b"ab"
    ids = [token[b"b"], token[b"a"], token[b"!"]]
    assert m.validate_tokens(ids) == ids[:2]
    assert m.accept_string("b" * 14)
    assert m.forced_continuation() == b""  # a, b or ! may follow
    assert m.accept_string("!")
    assert m.forced_continuation() == b"" and m.is_accepting() and allowed(m) == set(g.eos_ids)
    assert m.accept_token(g.eos_ids[0]) and m.is_terminated()
    m.reset()
    assert m.output_bytes() == b"" and not m.is_accepting()


def test_budget_costs_of_a_whole_mask(compiler):
    """The budget guard's vectorised costs read the lazy DFA's end states (one token: its bytes'
    end state's shortest completion, plus the token and EOS)."""
    from structgen.runtime.budget import BudgetGuard

    g = compiler.compile_regex(r".{0,3}[ab]*a[ab]{20}")
    assert isinstance(g, LazyRegexGrammar)
    m = Matcher(g)
    guard = BudgetGuard(m)
    ids = np.array(sorted(t for t in allowed(m) if t not in g.eos_ids))
    assert len(ids) >= 256
    fast = guard.costs(ids)
    slow = np.array([guard.cost(int(t)) for t in ids[:300]])
    assert np.array_equal(fast[:300], slow)


def test_generate_regex_with_a_counted_run_after_a_star(tiny_model):
    """A pattern eager tables refuse (2**23 states) generates, on the tiny random model, within
    its budget: the guard knows the 23 bytes still owed."""
    pattern = r"[ab]*a[ab]{22}"
    text = generate_regex(tiny_model, pattern, "A string of a and b:", max_tokens=40, temperature=1.0, seed=1)
    assert oracle_re.fullmatch(pattern, text)


def test_token_automaton_of_a_lazy_regex_is_bounded_by_its_states(compiler):
    """Deco-G's token automaton enumerates a lazy regex's states like any regular grammar's, and a
    language with too many token-level states is refused with a structgen error."""
    from structgen.errors import UnsupportedFeature
    from structgen.runtime.sampling.token_dfa import token_dfa

    small = lazy_grammar(compiler, r"(cat|dog)s?")
    assert len(token_dfa(small).tokens) >= 2
    with pytest.raises(UnsupportedFeature, match="token-level states"):
        token_dfa(compiler.compile_regex(r"[ab]*a[ab]{22}"), max_states=500)


def test_lazy_and_eager_constructions_agree_on_random_regexes(compiler):
    """Differential: the fuzz campaign's random regexes (classes, Unicode, counted and lazy
    repetition, alternation), each built both ways -- eager subset construction and minimisation
    (``compile_regex``) and the lazy DFA over the NFA's important states -- and walked at random:
    every step's mask, acceptance and shortest completion agree."""
    from structgen.bench.fuzz_cases import make_case
    from structgen.errors import StructgenError

    compared = 0
    for i in range(1000):
        pattern = make_case(11, 4 * i + 2, ("schema-random", "schema-mutation", "regex", "lark"), None)["source"]
        try:
            eager = compiler.compile_regex(pattern)
            lazy = lazy_grammar(compiler, pattern)
        except StructgenError:
            continue  # refused (a lookaround, a backreference, an invalid pattern): the fuzz checks how
        if not isinstance(eager, CompiledGrammar) or not len(lazy.dfa.tables.start):
            continue
        rng = random.Random(i)
        me, ml = Matcher(eager), Matcher(lazy)
        for _ in range(10):
            a, b = allowed(me), allowed(ml)
            assert a == b, (pattern, me.output_bytes(), sorted(a ^ b)[:8])
            assert me.is_accepting() == ml.is_accepting()
            assert me.min_completion_bytes() == ml.min_completion_bytes(), (pattern, me.output_bytes())
            ids = [t for t in a if t not in eager.eos_ids]
            if not ids:
                break
            t = rng.choice(ids)
            assert me.accept_token(t) and ml.accept_token(t)
        compared += 1
        if compared == 150:
            break
    assert compared == 150
