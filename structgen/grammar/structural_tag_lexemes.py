"""The lexemes of free text in a structural tag: byte automata of UTF-8 text (bounded, and
without given strings inside), the minimal strings that stop a run of text and whether a set of
lexemes reads unambiguously, and the terminals whose lexeme can end a rule (the check that a
content cannot run on into the string that follows it).  Used by
:mod:`structgen.grammar.structural_tag`, which builds the grammar.
"""
from __future__ import annotations

import functools
import re

import numpy as np

from ..automata.fsa import DFA
from .ir import Alt, Expr, GrammarIR, Graph, Repeat, Seq, Sym

__all__ = ["utf8_text", "one_char", "one_byte", "containing", "minimal", "prefix_free", "nullable_rules",
           "last_terminals"]


# -- byte automata of free text ----------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def utf8_text() -> DFA:
    from .regex import compile_regex

    return compile_regex(r"(?s:.*)")


@functools.lru_cache(maxsize=None)
def one_char() -> DFA:
    from .regex import compile_regex

    return compile_regex(r"(?s:.)")


@functools.lru_cache(maxsize=None)
def one_byte() -> DFA:
    return DFA(np.array([[1], [-1]], dtype=np.int32), np.array([False, True]), np.zeros(256, dtype=np.int32), 0)


@functools.lru_cache(maxsize=256)
def containing(strings: tuple[str, ...]) -> DFA:
    """UTF-8 texts containing one of ``strings``."""
    from .regex import compile_regex

    return compile_regex("(?:" + "|".join(re.escape(s) for s in strings) + ")", search=True)


def minimal(lits) -> list[str]:
    """The strings of ``lits`` that no other of them begins (in first-seen order)."""
    uniq = list(dict.fromkeys(lits))
    return [m for m in uniq if not any(o != m and m.startswith(o) for o in uniq)]


def prefix_free(dfa: DFA) -> bool:
    """No accepted string is a proper prefix of another (the automaton is trimmed)."""
    acc = np.nonzero(dfa.accept)[0]
    return not bool((dfa.trans[acc] >= 0).any())


# -- the IR's last symbols (for the content / end-string check) ---------------------------------
def _nullable(e: Expr, rules_nullable: set) -> bool:
    if isinstance(e, Sym):
        return e.name in rules_nullable
    if isinstance(e, Seq):
        return all(_nullable(i, rules_nullable) for i in e.items)
    if isinstance(e, Alt):
        return any(_nullable(i, rules_nullable) for i in e.items)
    if isinstance(e, Repeat):
        return e.lo == 0 or _nullable(e.item, rules_nullable)
    if isinstance(e, Graph):
        seen, todo = {e.start}, [e.start]
        while todo:
            s = todo.pop()
            if s in e.finals:
                return True
            for a, x, b in e.edges:
                if a == s and b not in seen and (x is None or _nullable(x, rules_nullable)):
                    seen.add(b)
                    todo.append(b)
        return False
    return False


def _last(e: Expr, nullable: set) -> set[str]:
    """Symbols that can be the last one of ``e``."""
    if isinstance(e, Sym):
        return {e.name}
    if isinstance(e, Seq):
        out: set[str] = set()
        for i in reversed(e.items):
            out |= _last(i, nullable)
            if not _nullable(i, nullable):
                break
        return out
    if isinstance(e, Alt):
        return set().union(*(_last(i, nullable) for i in e.items))
    if isinstance(e, Repeat):
        return _last(e.item, nullable) if e.hi != 0 else set()
    if isinstance(e, Graph):
        tail = set(e.finals)
        changed = True
        while changed:
            changed = False
            for a, x, b in e.edges:
                if b in tail and a not in tail and (x is None or _nullable(x, nullable)):
                    tail.add(a)
                    changed = True
        return set().union(*(_last(x, nullable) for a, x, b in e.edges if b in tail and x is not None))
    return set()


def nullable_rules(ir: GrammarIR) -> set[str]:
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for n, body in ir.rules.items():
            if n not in nullable and _nullable(body, nullable):
                nullable.add(n)
                changed = True
    return nullable


def last_terminals(ir: GrammarIR, rule: str) -> set[str]:
    """The terminals whose lexeme can end a string of ``rule`` (parts of split terminals included)."""
    nullable = nullable_rules(ir)
    out: set[str] = set()
    seen: set[str] = set()
    todo = [rule]
    while todo:
        r = todo.pop()
        for s in _last(ir.rules[r], nullable):
            if s in ir.rules:
                if s not in seen:
                    seen.add(s)
                    todo.append(s)
            elif s in ir.terminals:
                out.add(s)
    out |= {n for n, t in ir.terminals.items() if t.lexeme_of in out}
    return out
