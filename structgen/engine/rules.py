"""Rule bodies (regular expressions over symbols) to small symbol automata.

Each rule becomes a DFA whose edges are terminals or nonterminals.  The
grammar is then trimmed (unproductive rules and dead states removed) so every
parser configuration can still complete, and checked for left recursion,
which would make the predictive parser loop.  Shortest-completion costs (in
bytes) are computed here too: they drive the finish-within-budget guard.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import GrammarError
from ..grammar.fsa import epsilon_closure
from ..grammar.ir import Alt, Expr, GrammarIR, Graph, Repeat, Seq, Sym

MAX_RULE_NFA_STATES = 200_000
INF = float("inf")


@dataclass
class RuleAutomaton:
    name: str
    final: list[bool]
    term_edges: list[dict[int, int]]  # terminal id -> next state
    nt_edges: list[tuple[tuple[int, int], ...]]  # (rule id, next state); tuples of ints: untracked by the GC
    cost: list[float] = field(default_factory=list)  # min bytes from state to final

    @property
    def n_states(self) -> int:
        return len(self.final)


class _SymNFA:
    def __init__(self) -> None:
        self.eps: list[list[int]] = [[]]
        self.edges: list[list[tuple[tuple[str, int], int]]] = [[]]

    def new(self) -> int:
        if len(self.eps) > MAX_RULE_NFA_STATES:
            raise GrammarError(f"rule automaton too large (over {MAX_RULE_NFA_STATES} states); reduce repetition bounds")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1


def _build(nfa: _SymNFA, e: Expr, a: int, b: int, resolve) -> None:
    if isinstance(e, Sym):
        nfa.edges[a].append((resolve(e.name), b))
    elif isinstance(e, Seq):
        cur = a
        for i, it in enumerate(e.items):
            nxt = b if i == len(e.items) - 1 else nfa.new()
            _build(nfa, it, cur, nxt, resolve)
            cur = nxt
        if not e.items:
            nfa.eps[a].append(b)
    elif isinstance(e, Alt):
        for it in e.items:
            _build(nfa, it, a, b, resolve)
    elif isinstance(e, Repeat):
        cur = a
        for _ in range(e.lo):
            nxt = nfa.new()
            _build(nfa, e.item, cur, nxt, resolve)
            cur = nxt
        if e.hi is None:
            loop = nfa.new()
            nfa.eps[cur].append(loop)
            end = nfa.new()
            _build(nfa, e.item, loop, end, resolve)
            nfa.eps[end].append(loop)
            nfa.eps[loop].append(b)
        else:
            for _ in range(e.hi - e.lo):
                nfa.eps[cur].append(b)
                nxt = nfa.new()
                _build(nfa, e.item, cur, nxt, resolve)
                cur = nxt
            nfa.eps[cur].append(b)
    elif isinstance(e, Graph):
        nodes = [nfa.new() for _ in range(e.n_states)]
        nfa.eps[a].append(nodes[e.start])
        for src, sub, dst in e.edges:
            if sub is None:
                nfa.eps[nodes[src]].append(nodes[dst])
            else:
                _build(nfa, sub, nodes[src], nodes[dst], resolve)
        for f in e.finals:
            nfa.eps[nodes[f]].append(b)
    else:  # pragma: no cover
        raise TypeError(e)


def _determinize(nfa: _SymNFA, start: int, final: int) -> tuple[list[bool], list[dict[tuple[str, int], int]]]:
    eps = nfa.eps
    single: dict[int, frozenset] = {}

    def closure1(s: int) -> frozenset:
        hit = single.get(s)
        if hit is None:
            hit = single[s] = epsilon_closure(eps, s)
        return hit

    def closure(states):
        if len(states) == 1:
            for s in states:
                return closure1(s)
        out: set = set()
        for s in states:
            out |= closure1(s)
        return frozenset(out)

    s0 = closure([start])
    index = {s0: 0}
    order = [s0]
    rows: list[dict] = []
    i = 0
    while i < len(order):
        cur = order[i]
        i += 1
        moves: dict = {}
        for s in cur:
            for sym, t in nfa.edges[s]:
                moves.setdefault(sym, set()).add(t)
        row = {}
        for sym, ts in moves.items():
            tgt = closure(ts)
            j = index.get(tgt)
            if j is None:
                j = len(order)
                index[tgt] = j
                order.append(tgt)
            row[sym] = j
        rows.append(row)
    return [final in st for st in order], rows


def build_rule_automata(ir: GrammarIR, term_index: dict[str, int]) -> tuple[list[RuleAutomaton], dict[str, int]]:
    names = list(ir.rules)
    rule_index = {n: i for i, n in enumerate(names)}

    def resolve(name: str) -> tuple[str, int]:
        if name in term_index:
            return ("t", term_index[name])
        if name in rule_index:
            return ("r", rule_index[name])
        raise GrammarError(f"symbol {name!r} is used but not defined")

    autos = []
    for n in names:
        nfa = _SymNFA()
        fin = nfa.new()
        _build(nfa, ir.rules[n], 0, fin, resolve)
        final, rows = _determinize(nfa, 0, fin)
        autos.append(
            RuleAutomaton(
                n,
                final,
                [{i: t for (k, i), t in row.items() if k == "t"} for row in rows],
                [tuple((i, t) for (k, i), t in row.items() if k == "r") for row in rows],
            )
        )
    _trim(autos, ir.start, rule_index)
    _check_left_recursion(autos)
    return autos, rule_index


def _trim(autos: list[RuleAutomaton], start: str, rule_index: dict[str, int]) -> None:
    """Drop edges into unproductive rules and states that cannot reach final."""
    productive = [False] * len(autos)
    changed = True
    while changed:
        changed = False
        for r, a in enumerate(autos):
            if productive[r]:
                continue
            # can any final be reached from start using term edges / productive nts?
            seen = {0}
            stack = [0]
            ok = False
            while stack:
                s = stack.pop()
                if a.final[s]:
                    ok = True
                    break
                nxts = list(a.term_edges[s].values()) + [t for n, t in a.nt_edges[s] if productive[n]]
                for t in nxts:
                    if t not in seen:
                        seen.add(t)
                        stack.append(t)
            if ok:
                productive[r] = True
                changed = True
    if not productive[rule_index[start]]:
        raise GrammarError(f"the grammar derives no string (rule {start!r} cannot complete)")
    for a in autos:
        a.nt_edges = [tuple((n, t) for n, t in edges if productive[n]) for edges in a.nt_edges]
        # co-reachability of final inside the rule (backward search)
        n = a.n_states
        preds: list[list[int]] = [[] for _ in range(n)]
        for st in range(n):
            for t in a.term_edges[st].values():
                preds[t].append(st)
            for _, t in a.nt_edges[st]:
                preds[t].append(st)
        live = list(a.final)
        stack = [st for st in range(n) if live[st]]
        while stack:
            t = stack.pop()
            for st in preds[t]:
                if not live[st]:
                    live[st] = True
                    stack.append(st)
        if not all(live):
            a.term_edges = [{k: t for k, t in d.items() if live[t]} for d in a.term_edges]
            a.nt_edges = [tuple((r, t) for r, t in e if live[t]) for e in a.nt_edges]


def _nullable(autos: list[RuleAutomaton]) -> list[bool]:
    nullable = [False] * len(autos)
    changed = True
    while changed:
        changed = False
        for r, a in enumerate(autos):
            if nullable[r]:
                continue
            seen = {0}
            stack = [0]
            while stack:
                s = stack.pop()
                if a.final[s]:
                    nullable[r] = True
                    changed = True
                    break
                for n, t in a.nt_edges[s]:
                    if nullable[n] and t not in seen:
                        seen.add(t)
                        stack.append(t)
    return nullable


def _check_left_recursion(autos: list[RuleAutomaton]) -> None:
    nullable = _nullable(autos)
    left: list[set[int]] = []
    for a in autos:
        out: set[int] = set()
        seen = {0}
        stack = [0]
        while stack:
            s = stack.pop()
            for n, t in a.nt_edges[s]:
                out.add(n)
                if nullable[n] and t not in seen:
                    seen.add(t)
                    stack.append(t)
        left.append(out)
    for r in range(len(autos)):
        seen = set()
        stack = list(left[r])
        while stack:
            n = stack.pop()
            if n == r:
                raise GrammarError(
                    f"rule {autos[r].name!r} is left-recursive through other rules; rewrite it with repetition (x*)"
                )
            if n not in seen:
                seen.add(n)
                stack.extend(left[n])


def compute_costs(autos: list[RuleAutomaton], term_cost: list[int]) -> list[float]:
    """Min bytes to complete each rule from each state (fixpoint); returns rule costs."""
    rule_cost = [INF] * len(autos)
    for a in autos:
        a.cost = [INF] * a.n_states
    changed = True
    while changed:
        changed = False
        for r, a in enumerate(autos):
            cost = a.cost
            inner = True
            while inner:
                inner = False
                for s in range(a.n_states):
                    best = 0.0 if a.final[s] else INF
                    for t, nxt in a.term_edges[s].items():
                        c = term_cost[t] + cost[nxt]
                        if c < best:
                            best = c
                    for n, nxt in a.nt_edges[s]:
                        c = rule_cost[n] + cost[nxt]
                        if c < best:
                            best = c
                    if best < cost[s]:
                        cost[s] = best
                        inner = True
            if cost[0] < rule_cost[r]:
                rule_cost[r] = cost[0]
                changed = True
    return rule_cost
