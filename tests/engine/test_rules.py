"""Rule automata: the batched subset construction and trimming against brute force."""
from __future__ import annotations

import itertools
import random

import pytest

from structgen.engine.rules import build_rule_automata
from structgen.errors import GrammarError
from structgen.grammar.ir import Alt, GrammarIR, Graph, Repeat, Seq, Sym

TERMS = ("a", "b", "c")


def _ir(rules: dict, start: str = "start") -> GrammarIR:
    # rule automata never look at terminal DFAs: names are enough
    return GrammarIR(rules=rules, terminals={}, start=start)


def _language(e, n: int) -> set[tuple[str, ...]]:
    """Every word of at most ``n`` symbols of ``e`` (terminal names only)."""
    if isinstance(e, Sym):
        return {(e.name,)}
    if isinstance(e, Alt):
        return set().union(*(_language(i, n) for i in e.items))
    if isinstance(e, Seq):
        out = {()}
        for it in e.items:
            out = {w + v for w in out for v in _language(it, n) if len(w + v) <= n}
        return out
    if isinstance(e, Repeat):
        one = _language(e.item, n)
        out, layer = set(), {()}
        for k in range((e.hi if e.hi is not None else n) + 1):
            if k >= e.lo:
                out |= layer
            layer = {w + v for w in layer for v in one if len(w + v) <= n}
            if not layer:
                break
        return out
    if isinstance(e, Graph):
        words = set()
        frontier = {(e.start, ())}
        for _ in range(4 * n + 4):
            nxt = set()
            for st, w in frontier:
                if st in e.finals:
                    words.add(w)
                for src, sub, dst in e.edges:
                    if src == st:
                        for v in (_language(sub, n) if sub is not None else {()}):
                            if len(w + v) <= n:
                                nxt.add((dst, w + v))
            frontier = nxt
        return words
    raise TypeError(e)


def _accepts(auto, word: tuple[int, ...]) -> bool:
    s = 0
    for t in word:
        s = dict(auto.term_edges(s)).get(t)
        if s is None:
            return False
    return auto.final[s]


def _random_expr(rng: random.Random, depth: int):
    k = rng.randrange(5 if depth else 1)
    if k == 0:
        return Sym(rng.choice(TERMS))
    if k == 1:
        return Seq(tuple(_random_expr(rng, depth - 1) for _ in range(rng.randrange(0, 3))))
    if k == 2:
        return Alt(tuple(_random_expr(rng, depth - 1) for _ in range(rng.randrange(1, 3))))
    if k == 3:
        lo = rng.randrange(3)
        return Repeat(_random_expr(rng, depth - 1), lo, rng.choice([None, lo, lo + 1, lo + 2]))
    edges = tuple((rng.randrange(3), rng.choice([None, _random_expr(rng, depth - 1)]), rng.randrange(3))
                  for _ in range(rng.randrange(1, 5)))
    return Graph(3, edges, 0, (rng.randrange(3),))


# seed 19 draws a large expression (45 s): make test-slow runs it
@pytest.mark.parametrize("seed", [pytest.param(s, marks=pytest.mark.minutes) if s == 19 else s for s in range(40)])
def test_rule_automaton_language_matches_brute_force(seed):
    rng = random.Random(seed)
    e = _random_expr(rng, 3)
    term_index = {t: i for i, t in enumerate(TERMS)}
    want = _language(e, 5)
    try:
        autos, _ = build_rule_automata(_ir({"start": e}), term_index)
    except GrammarError as err:  # only a rule with no word at all may be refused
        assert not want and "derives no string" in str(err)
        return
    got = {w for n in range(6) for w in itertools.product(range(3), repeat=n) if _accepts(autos[0], w)}
    assert got == {tuple(term_index[s] for s in w) for w in want}


def test_rules_are_deterministic_and_reference_each_other():
    # start: "a" item* "c" with item: "b" | "a" "b"; both rules determinised in one batch
    rules = {"start": Seq((Sym("a"), Repeat(Sym("item")), Sym("c"))), "item": Alt((Sym("b"), Seq((Sym("a"), Sym("b")))))}
    autos, index = build_rule_automata(_ir(rules), {t: i for i, t in enumerate(TERMS)})
    start, item = autos[index["start"]], autos[index["item"]]
    def run(word):  # ("t", terminal id) / ("r", rule id) steps from the start state
        s = 0
        for kind, x in word:
            s = dict(start.term_edges(s)).get(x) if kind == "t" else dict(start.nt_edges[s]).get(x)
            if s is None:
                return False
        return start.final[s]

    r_item = ("r", index["item"])
    assert run([("t", 0), ("t", 2)]) and run([("t", 0), r_item, r_item, ("t", 2)])
    assert not run([("t", 0), r_item]) and not run([r_item, ("t", 2)])
    assert _accepts(item, (1,)) and _accepts(item, (0, 1)) and not _accepts(item, (0,))


def test_unproductive_rules_are_trimmed():
    # `bad` can never finish (it always needs another `bad`): the edge into it is dropped
    rules = {"start": Alt((Sym("a"), Sym("bad"))), "bad": Seq((Sym("b"), Sym("bad")))}
    autos, index = build_rule_automata(_ir(rules), {t: i for i, t in enumerate(TERMS)})
    assert all(not edges for edges in autos[index["start"]].nt_edges)
    with pytest.raises(GrammarError, match="derives no string"):
        build_rule_automata(_ir({"start": Seq((Sym("a"), Sym("start")))}), {"a": 0})


def test_undefined_symbol_and_left_recursion_are_grammar_errors():
    with pytest.raises(GrammarError, match="not defined"):
        build_rule_automata(_ir({"start": Sym("zzz")}), {"a": 0})
    with pytest.raises(GrammarError, match="left-recursive"):
        build_rule_automata(_ir({"start": Alt((Sym("a"), Seq((Sym("start"), Sym("a")))))}), {"a": 0})


def test_huge_repetition_is_refused_not_hung():
    with pytest.raises(GrammarError, match="too large"):
        build_rule_automata(_ir({"start": Repeat(Sym("a"), 0, 500_000)}), {"a": 0})
