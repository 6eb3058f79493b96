"""The grammar IR every front end produces and the engine compiles.

A grammar is a set of rules whose bodies are regular expressions over symbols
(``Sym``, ``Seq``, ``Alt``, ``Repeat``) plus terminals, each a byte DFA.  Bodies
stay regular so repetition (``x*``, ``{m,n}``) needs no helper rules and no
left recursion; the engine turns each body into a small symbol automaton.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from .fsa import DFA


@dataclass(frozen=True)
class Sym:
    name: str


@dataclass(frozen=True)
class Seq:
    items: tuple["Expr", ...]


@dataclass(frozen=True)
class Alt:
    items: tuple["Expr", ...]


@dataclass(frozen=True)
class Repeat:
    item: "Expr"
    lo: int = 0
    hi: int | None = None  # None = unbounded


@dataclass(frozen=True)
class Graph:
    """An explicit automaton over sub-expressions: edges (src, expr or None, dst).

    Used where a regular expression would be quadratic, e.g. object members
    with optional properties, commas and property counts."""

    n_states: int
    edges: tuple[tuple[int, "Expr | None", int], ...]
    start: int
    finals: tuple[int, ...]


Expr = Union[Sym, Seq, Alt, Repeat, Graph]
EPSILON = Seq(())


def seq(*items: Expr) -> Expr:
    flat: list[Expr] = []
    for it in items:
        if isinstance(it, Seq):
            flat.extend(it.items)
        else:
            flat.append(it)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*items: Expr) -> Expr:
    flat: list[Expr] = []
    seen: set = set()
    for it in items:
        if isinstance(it, Alt):
            flat.extend(it.items)
            seen.update(it.items)
        elif it not in seen:
            seen.add(it)
            flat.append(it)
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def opt(item: Expr) -> Expr:
    return Repeat(item, 0, 1)


@dataclass
class Terminal:
    """A lexeme: its byte language as a DFA.  ``ignore`` lexemes (Lark's
    ``%ignore``) may appear between any two lexemes, never twice in a row."""

    name: str
    dfa: DFA
    ignore: bool = False


@dataclass
class GrammarIR:
    rules: dict[str, Expr]
    terminals: dict[str, Terminal]
    start: str
    source: str = ""
    meta: dict = field(default_factory=dict)

    def add_terminal(self, name: str, dfa: DFA, *, ignore: bool = False) -> Sym:
        self.terminals[name] = Terminal(name, dfa, ignore)
        return Sym(name)
