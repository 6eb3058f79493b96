"""The grammar IR every front end produces and the engine compiles.

A grammar is a set of rules whose bodies are regular expressions over symbols
(``Sym``, ``Seq``, ``Alt``, ``Repeat``) plus terminals, each a byte DFA.  Bodies
stay regular so repetition (``x*``, ``{m,n}``) needs no helper rules and no
left recursion; the engine turns each body into a small symbol automaton.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Hashable, Union

from ..automata.fsa import DFA


class _Node:
    """An immutable expression node whose hash is computed once, when it is made.

    ``alt`` deduplicates its items through a set and rule bodies nest deeply (an object's members
    hold its values' expressions), so a structural hash recomputed on every lookup -- what a
    frozen dataclass does -- rehashed whole subtrees again and again."""

    __slots__ = ("_hash",)
    _fields: tuple[str, ...] = ()

    def _key(self) -> tuple:
        return tuple(getattr(self, f) for f in self._fields)

    def __eq__(self, other: object) -> bool:
        return self is other or (type(other) is type(self) and self._hash == other._hash  # type: ignore[attr-defined]
                                 and self._key() == other._key())  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._fields)})"

    def __reduce__(self):
        return type(self), self._key()  # the hash is made again in the loading process


class Sym(_Node):
    __slots__ = ("name",)
    _fields = ("name",)

    def __init__(self, name: str):
        self.name = name
        self._hash = hash((1, name))


class _Items(_Node):
    """A node over a tuple of sub-expressions (``_tag`` keeps the kinds' hashes apart)."""

    __slots__ = ("items",)
    _fields = ("items",)
    _tag = 0

    def __init__(self, items: tuple["Expr", ...]):
        self.items = items
        self._hash = hash((self._tag, items))


class Seq(_Items):
    __slots__ = ()
    _tag = 2


class Alt(_Items):
    __slots__ = ()
    _tag = 3


class Repeat(_Node):
    __slots__ = ("item", "lo", "hi")
    _fields = ("item", "lo", "hi")

    def __init__(self, item: "Expr", lo: int = 0, hi: int | None = None):
        self.item = item
        self.lo = lo
        self.hi = hi  # None = unbounded
        self._hash = hash((4, item, lo, hi))


class Graph(_Node):
    """An explicit automaton over sub-expressions: edges (src, expr or None, dst).

    Used where a regular expression would be quadratic, e.g. object members
    with optional properties, commas and property counts."""

    __slots__ = ("n_states", "edges", "start", "finals")
    _fields = ("n_states", "edges", "start", "finals")

    def __init__(self, n_states: int, edges: tuple[tuple[int, "Expr | None", int], ...], start: int,
                 finals: tuple[int, ...]):
        self.n_states = n_states
        self.edges = edges
        self.start = start
        self.finals = finals
        self._hash = hash((5, n_states, edges, start, finals))


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


def derives_something(expr: Expr, rules: dict[str, "Expr"]) -> bool:
    """Whether ``expr`` derives at least one string, its rules read from ``rules``: a compiler asks
    before it keeps a narrowed form of a value (an object a policy closes; a Graph's finals may be
    unreachable).  A name that is neither a rule yet (one being compiled) nor missing counts as
    deriving something: terminals are never empty, and a rule in progress is judged when it is done."""
    productive: set[str] = set()

    def walk(e: Expr, visiting: frozenset) -> bool:
        if isinstance(e, Sym):
            if e.name in productive or e.name not in rules:
                return True
            if e.name in visiting:
                return False  # a derivation through itself alone never ends
            if walk(rules[e.name], visiting | {e.name}):
                productive.add(e.name)
                return True
            return False
        if isinstance(e, Seq):
            return all(walk(x, visiting) for x in e.items)
        if isinstance(e, Alt):
            return any(walk(x, visiting) for x in e.items)
        if isinstance(e, Repeat):
            return e.lo == 0 or walk(e.item, visiting)
        reached, frontier = {e.start}, [e.start]  # Graph: a final state reachable over edges that derive
        live = [(a, b) for a, x, b in e.edges if x is None or walk(x, visiting)]
        while frontier:
            q = frontier.pop()
            for a, b in live:
                if a == q and b not in reached:
                    reached.add(b)
                    frontier.append(b)
        return not reached.isdisjoint(e.finals)

    return walk(expr, frozenset())


@dataclass(frozen=True)
class FollowCondition:
    """What may come right after a lexeme that ends in a given DFA state (a lookahead at a
    terminal's end): ``next_bytes``, the bytes allowed next; ``at_end``, whether the output may end
    there."""

    next_bytes: frozenset
    at_end: bool


@dataclass
class Terminal:
    """A lexeme: its byte language as a DFA.  ``ignore`` lexemes (Lark's ``%ignore``) may appear
    between any two lexemes (never twice in a row unless ``GrammarIR.ignore_repeats``).

    ``lexeme_of``: this terminal is one part of the grammar symbol named there (the rules use that
    name): a terminal whose accepting states carry different follow conditions, or a newline
    terminal split by the indentation column its lexeme ends at, is lexed as several parts.
    ``follow``: the condition every lexeme of this part must meet (None: none).  ``column``: the
    indentation column of a newline part.  ``lexable=False``: a ``%declare``d terminal, fed by a
    post-lexer (the indenter), never lexed.  ``char_bounds``: ``(lo, hi)`` characters a JSON string
    lexeme must hold where its DFA does not count them (the product with the bound was too large):
    the engine's masks count them instead (``structgen.engine.char_bounds``).  ``lazy_patterns``: the
    lazy DFAs (``structgen.automata.lazy_dfa``) of the ``pattern``s a JSON string lexeme must match
    where its DFA holds a relaxed form only (the pattern's own DFA was too large): the engine's masks
    follow them instead (``structgen.engine.lazy_patterns``)."""

    name: str
    dfa: DFA
    ignore: bool = False
    lexeme_of: str | None = None
    follow: FollowCondition | None = None
    column: int | None = None
    lexable: bool = True
    char_bounds: tuple[int, int] | None = None
    lazy_patterns: tuple = ()


@dataclass(frozen=True)
class CheckContext:
    """What a check sees when the value it watches completes.

    ``output[start:end]`` is the value's text (``start`` is -1 when the engine could not place the
    value's start); ``keys`` are the distinct keys of the JSON object that closed last, which is the
    value itself when the value is an object."""

    output: bytes
    start: int
    end: int
    keys: frozenset = frozenset()


class Check:
    """A constraint an automaton cannot hold, tested when a value completes (a *monitor*).

    A front end wraps the value in a rule of its own (``rule``, a name of ``GrammarIR.rules``) and
    lists the check in ``GrammarIR.checks``; the engine (``structgen.engine.checks``) runs it on the
    byte that completes that rule, so the token that would complete a failing value is the one
    refused.  Two kinds: :class:`ValueCheck` (a verdict on one value) and :class:`DistinctItems`
    (items of one array that must differ)."""

    __slots__ = ("rule",)

    def __init__(self, rule: str):
        self.rule = rule

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.rule!r})"

    def describe(self) -> str:
        """What the check asks, for error messages (a front end says it in its own terms)."""
        return f"a check on rule {self.rule}"


class ValueCheck(Check):
    """A verdict on a completed value of ``rule``.

    ``pure``: the verdict depends on the value's bytes alone (not on ``context.keys``), so the
    engine may remember it per (rule, bytes)."""

    __slots__ = ()
    pure = True

    def accepts(self, value: bytes, context: CheckContext) -> bool:  # pragma: no cover - interface
        raise NotImplementedError


class DistinctItems(Check):
    """Completed values of ``rule`` must differ within their enclosing array (``uniqueItems``).

    ``identity(value)`` is a hashable value equal exactly when two values count as the same item;
    None when the bytes are not a whole value (the item is then not compared)."""

    __slots__ = ()

    def identity(self, value: bytes) -> Hashable | None:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass
class GrammarIR:
    """Rules (``start`` names the top one), terminals and the checks run at value boundaries.

    ``key_families``: an "any other key" terminal -> the key-literal terminals it was carved from
    (an any-order object's keys); the engine's lexers that hold one hold them all, so the sets of
    keys left share one lexer (``structgen.engine.lexer.Lexer``)."""

    rules: dict[str, Expr]
    terminals: dict[str, Terminal]
    start: str
    source: str = ""
    checks: list[Check] = field(default_factory=list)
    key_families: dict[str, set[str]] = field(default_factory=dict)
    #: Lark's semantics: ignored lexemes may follow each other (JSON Schema's bounded whitespace
    #: may not, or a bound would mean nothing)
    ignore_repeats: bool = False
    #: a post-lexer that turns newline lexemes into indent / dedent symbols (structgen.grammar.indenter)
    indenter: "Any" = None
    #: what a JSON Schema's ``source`` grounded: {"grounded": [pointers], "fell_back": [(pointer, why)]}
    grounding: "dict | None" = None

    def add_terminal(self, name: str, dfa: DFA, *, ignore: bool = False, follow: FollowCondition | None = None) -> Sym:
        self.terminals[name] = Terminal(name, dfa, ignore, follow=follow)
        return Sym(name)

    def embed(self, other: "GrammarIR", prefix: str) -> str:
        """Copy ``other``'s rules, terminals, checks and key families into this IR, every name
        prefixed with ``prefix``, and return the name of the rule that derives ``other``'s language
        (its start rule, renamed).  ``other`` is not modified; its automata are shared.

        ``other``'s ignored terminals (Lark's ``%ignore``) are not ignored in this IR -- they would
        then apply between this IR's own lexemes too: they are written out before each of
        ``other``'s terminals and once at its end (at most one in a row unless
        ``other.ignore_repeats``), which is the language they gave ``other``.  A grammar with an
        indenter cannot be embedded (``ValueError``), nor one whose renamed names are taken."""
        if other.indenter is not None:
            raise ValueError("a grammar with an indenter cannot be embedded in another")
        new = {n: prefix + n for n in (*other.rules, *other.terminals)}
        taken = [n for n in new.values() if n in self.rules or n in self.terminals]
        if taken:
            raise ValueError(f"names {taken[:3]} are taken already (choose another prefix)")
        ignored = [n for n, t in other.terminals.items() if t.ignore and t.lexeme_of is None]
        gap = None
        if ignored:
            gap = Repeat(alt(*[Sym(new[n]) for n in ignored]), 0, None if other.ignore_repeats else 1)
        symbols = {n for n, t in other.terminals.items() if t.lexeme_of is None}

        def rename(e: Expr) -> Expr:
            if isinstance(e, Sym):
                s = Sym(new.get(e.name, e.name))
                return seq(gap, s) if gap is not None and e.name in symbols else s
            if isinstance(e, Seq):
                return Seq(tuple(rename(i) for i in e.items))
            if isinstance(e, Alt):
                return Alt(tuple(rename(i) for i in e.items))
            if isinstance(e, Repeat):
                return Repeat(rename(e.item), e.lo, e.hi)
            if isinstance(e, Graph):
                return Graph(e.n_states, tuple((a, None if x is None else rename(x), b) for a, x, b in e.edges),
                             e.start, e.finals)
            raise TypeError(f"unknown expression node {type(e).__name__}")

        for n, body in other.rules.items():
            self.rules[new[n]] = rename(body)
        for n, t in other.terminals.items():
            self.terminals[new[n]] = Terminal(new[n], t.dfa, t.ignore and gap is None,
                                              None if t.lexeme_of is None else new[t.lexeme_of], t.follow, t.column,
                                              t.lexable, t.char_bounds, t.lazy_patterns)
        for c in other.checks:
            c2 = copy.copy(c)
            c2.rule = new[c.rule]
            self.checks.append(c2)
        for d, keys in other.key_families.items():
            self.key_families[new[d]] = {new[k] for k in keys}
        if gap is None:
            return new[other.start]
        top = prefix + "__embedded"
        if top in self.rules or top in self.terminals:
            raise ValueError(f"name {top!r} is taken already (choose another prefix)")
        self.rules[top] = seq(Sym(new[other.start]), gap)
        return top
