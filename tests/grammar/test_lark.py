"""Lark grammar text to IR (``structgen.grammar.lark``), checked against lark's own parser: every
sentence lark accepts is accepted by structgen's matcher and every sentence lark rejects is not."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
from lark import Lark
from lark.exceptions import LarkError

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import GrammarError
from structgen.grammar.lark import lark_to_ir

GRAMMARS = Path(__file__).resolve().parents[2] / "grammars"
LISTS = r"""
start: "[" [item ("," item)*] "]"
item: NUMBER | WORD | start
NUMBER: /-?[0-9]+/
WORD: /[a-z]+/
%ignore " "
"""


def _valid(rng: random.Random, depth: int = 0) -> str:
    items = []
    for _ in range(rng.randint(0, 3)):
        r = rng.random()
        items.append(str(rng.randint(-99, 99)) if r < 0.4 else "ab"[:rng.randint(1, 2)] if r < 0.7 or depth > 2
                     else _valid(rng, depth + 1))
    sep = rng.choice([",", ", ", " , "])
    return "[" + sep.join(items) + "]"


def _sentences(rng: random.Random, n: int) -> list[str]:
    """Valid lists and their random mutations (a byte dropped, swapped or inserted)."""
    out = {"[]", "[1]", "[a,[2,b]]", "[ 1 , [ ] ]", "[,]", "[1,]", "[[]", "[-]", "[ab,-12,[[x]]]"}
    alphabet = "[],-0123456789ab "
    while len(out) < n:
        s = _valid(rng)
        out.add(s)
        i = rng.randrange(len(s))
        op = rng.random()
        out.add(s[:i] + s[i + 1:] if op < 0.33 else s[:i] + rng.choice(alphabet) + s[i + 1:] if op < 0.66
                else s[:i] + rng.choice(alphabet) + s[i:])
    return sorted(out)


@pytest.fixture(scope="module")
def comp(smol_info):
    return GrammarCompiler(smol_info)


def test_accepts_exactly_what_lark_accepts(comp):
    parser = Lark(LISTS, parser="earley")
    g = comp.compile_lark(LISTS)
    seen = {True: 0, False: 0}
    for s in _sentences(random.Random(0), 400):
        try:
            parser.parse(s)
            ok = True
        except LarkError:
            ok = False
        m = Matcher(g)
        got = m.accept_string(s) and m.is_accepting()
        assert got == ok, s
        seen[ok] += 1
    assert seen[True] > 10 and seen[False] > 100


def test_left_recursion_is_rewritten():
    ir = lark_to_ir("start: start \"a\" | \"b\"")
    assert "start" in ir.rules and ir.start == "start"


def test_shipped_grammars_compile(comp):
    for path in sorted(GRAMMARS.glob("*.lark")):
        assert comp.compile_lark(path) is not None, path


def test_errors_are_grammar_errors(comp):
    with pytest.raises(GrammarError, match="not found"):
        comp.compile_lark("no/such/file.lark")
    with pytest.raises(GrammarError):
        lark_to_ir("start: \"a\"", start="missing")
    with pytest.raises(GrammarError, match="terminal BAD"):  # was Python's re.error
        comp.compile_lark("start: BAD\nBAD: /[a-/\n")
    with pytest.raises(GrammarError, match="cannot read"):  # was FileNotFoundError
        comp.compile_lark("%import .missing_module.THING\nstart: THING\n")


@pytest.mark.parametrize("terminal", [r"/9$/", r"/^\D/", r"/a(b|^c)/", r"/(?=x$)x/", r"/\Aab/"])
def test_an_anchor_in_a_terminal_is_refused_naming_it(comp, terminal):
    """In Lark an anchor ties a terminal to the start or end of the whole input (found by the fuzzer:
    structgen used to treat it as a no-op and accept text lark refuses)."""
    with pytest.raises(GrammarError, match="terminal T0 .*anchor"):
        comp.compile_lark(f'start: " " T0\nT0: {terminal}\n')


def test_dollar_and_caret_as_characters_are_fine(comp):
    g = comp.compile_lark('start: T0+\nT0: /[$^]/ | /\\$/\n')
    m = Matcher(g)
    assert m.accept_string("$^$") and m.is_accepting()
