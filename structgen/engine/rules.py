"""Rule bodies (regular expressions over symbols) to small symbol automata.

Each rule becomes a DFA whose edges are terminals or nonterminals.  The
grammar is then trimmed (unproductive rules and dead states removed) so every
parser configuration can still complete, and checked for left recursion,
which would make the predictive parser loop.  Shortest-completion costs (in
bytes) are computed here too: they drive the finish-within-budget guard.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import GrammarError
from ..grammar.ir import Alt, Expr, GrammarIR, Graph, Repeat, Seq, Sym
from ..automata.subset_kernels import subset_construction
from .rule_kernels import trim_rules

MAX_RULE_NFA_STATES = 200_000
#: Summed size of the NFA subsets the subset construction may expand before it gives up.
MAX_RULE_DETERMINIZE_WORK = 20_000_000
INF = float("inf")
#: terminal edges are keyed ``state << TERM_SHIFT | terminal id`` (see RuleAutomaton.term_next)
TERM_SHIFT = 24


@dataclass
class RuleAutomaton:
    """One rule's symbol DFA.

    Every row is a tuple of ints or int pairs and the terminal edges are one int -> int dict, so
    none of it is tracked by the garbage collector: a cached grammar holds thousands of rows, and a
    tuple of per-state dicts would stay tracked (and rescanned by every full collection) forever."""

    name: str
    final: tuple[bool, ...]
    terms: tuple[tuple[int, ...], ...]  # per state: the terminal ids with an edge (sorted)
    term_next: dict[int, int]  # (state << TERM_SHIFT) | terminal id -> next state
    nt_edges: tuple[tuple[tuple[int, int], ...], ...]  # (rule id, next state)
    cost: tuple[float, ...] = ()  # min bytes from state to final

    @property
    def n_states(self) -> int:
        return len(self.final)

    def term_edges(self, state: int) -> list[tuple[int, int]]:
        """(terminal id, next state) for each terminal edge out of ``state``."""
        base, nxt = state << TERM_SHIFT, self.term_next
        return [(t, nxt[base | t]) for t in self.terms[state]]


class _SymNFA:
    """A symbol NFA as flat edge lists (every rule of a grammar in one state space)."""

    def __init__(self) -> None:
        self.n = 0
        self.limit = MAX_RULE_NFA_STATES  # per rule: see build_rule_automata
        self.eps_src: list[int] = []
        self.eps_dst: list[int] = []
        self.e_src: list[int] = []
        self.e_sym: list[int] = []
        self.e_dst: list[int] = []
        # id(items of a Seq) -> its symbol codes when every item is a symbol, else None: an object's
        # member sequences are laid down once per automaton state, so they are read once
        self.seq_codes: dict[int, list[int] | None] = {}

    def new(self) -> int:
        return self.reserve(1)

    def reserve(self, k: int) -> int:
        """``k`` new states; the first one's id."""
        if self.n + k > self.limit:
            raise GrammarError(f"rule automaton too large (over {MAX_RULE_NFA_STATES} states); reduce repetition bounds")
        self.n += k
        return self.n - k

    def eps(self, a: int, b: int) -> None:
        self.eps_src.append(a)
        self.eps_dst.append(b)


def _build(nfa: _SymNFA, e: Expr, a: int, b: int, codes: dict[str, int]) -> None:
    """Thompson construction of ``e`` between states ``a`` and ``b`` (symbol edges inline: most
    expressions are symbols, sequences of symbols, or object graphs whose edges are either)."""
    t = type(e)
    if t is Sym:
        nfa.e_src.append(a)
        nfa.e_sym.append(_code(codes, e.name))
        nfa.e_dst.append(b)
    elif t is Seq:
        _build_seq(nfa, e.items, a, b, codes)
    elif t is Alt:
        for it in e.items:
            _build(nfa, it, a, b, codes)
    elif t is Repeat:
        cur = a
        for _ in range(e.lo):
            nxt = nfa.new()
            _build(nfa, e.item, cur, nxt, codes)
            cur = nxt
        if e.hi is None:
            loop = nfa.new()
            nfa.eps(cur, loop)
            end = nfa.new()
            _build(nfa, e.item, loop, end, codes)
            nfa.eps(end, loop)
            nfa.eps(loop, b)
        else:
            for _ in range(e.hi - e.lo):
                nfa.eps(cur, b)
                nxt = nfa.new()
                _build(nfa, e.item, cur, nxt, codes)
                cur = nxt
            nfa.eps(cur, b)
    elif t is Graph:
        base = nfa.reserve(e.n_states)
        nfa.eps(a, base + e.start)
        for src, sub, dst in e.edges:
            ts = type(sub)
            if ts is Sym:  # most edges are a symbol or a run of them: laid down here, not by a recursive call
                nfa.e_src.append(base + src)
                nfa.e_sym.append(_code(codes, sub.name))
                nfa.e_dst.append(base + dst)
            elif ts is Seq:
                _build_seq(nfa, sub.items, base + src, base + dst, codes)
            elif sub is None:
                nfa.eps(base + src, base + dst)
            else:
                _build(nfa, sub, base + src, base + dst, codes)
        for f in e.finals:
            nfa.eps(base + f, b)
    else:  # pragma: no cover
        raise TypeError(e)


def _build_seq(nfa: _SymNFA, items, a: int, b: int, codes: dict[str, int]) -> None:
    """A sequence between ``a`` and ``b``: symbol items as edges inline, others built recursively
    (the inner states reserved at once: most schemas' rules are long runs of symbols)."""
    n = len(items)
    if not n:
        nfa.eps(a, b)
        return
    first = nfa.reserve(n - 1) if n > 1 else 0
    e_src, e_sym, e_dst = nfa.e_src, nfa.e_sym, nfa.e_dst
    key = id(items)
    syms = nfa.seq_codes.get(key, ())
    if syms == ():
        syms = nfa.seq_codes[key] = ([_code(codes, it.name) for it in items]
                                     if all(type(it) is Sym for it in items) else None)
    if syms is not None:  # a run of symbols: its edges in three list extensions
        inner = range(first, first + n - 1)
        e_src.append(a)
        e_src.extend(inner)
        e_sym.extend(syms)
        e_dst.extend(inner)
        e_dst.append(b)
        return
    get = codes.get
    cur = a
    for i, it in enumerate(items):
        nxt = b if i == n - 1 else first + i
        if type(it) is Sym:
            c = get(it.name)
            if c is None:
                c = _code(codes, it.name)
            e_src.append(cur)
            e_sym.append(c)
            e_dst.append(nxt)
        else:
            _build(nfa, it, cur, nxt, codes)
        cur = nxt


def _code(codes: dict[str, int], name: str) -> int:
    c = codes.get(name)
    if c is None:
        raise GrammarError(f"symbol {name!r} is used but not defined")
    return c


def build_rule_automata(ir: GrammarIR, term_index: dict[str, int]) -> tuple[list[RuleAutomaton], dict[str, int]]:
    """One deterministic symbol automaton per rule (Thompson NFAs, one batched subset construction)."""
    names = list(ir.rules)
    rule_index = {n: i for i, n in enumerate(names)}
    # symbol codes: terminal t -> 2t, rule r -> 2r + 1
    codes = {n: 2 * i for n, i in term_index.items()}
    codes.update((n, 2 * i + 1) for n, i in rule_index.items())

    nfa = _SymNFA()
    starts, finals = [], []
    for n in names:
        nfa.limit = nfa.n + MAX_RULE_NFA_STATES
        s, f = nfa.new(), nfa.new()
        starts.append(s)
        finals.append(f)
        _build(nfa, ir.rules[n], s, f, codes)
    i32 = np.int32
    ok, dfa_ptr, is_final, o_src, o_sym, o_dst = subset_construction(
        nfa.n, np.array(nfa.eps_src, dtype=i32), np.array(nfa.eps_dst, dtype=i32), np.array(nfa.e_src, dtype=i32),
        np.array(nfa.e_sym, dtype=i32), np.array(nfa.e_dst, dtype=i32), 2 * (len(term_index) + len(names)) + 1,
        np.array(starts, dtype=i32), np.array(finals, dtype=i32), MAX_RULE_DETERMINIZE_WORK, 1 << 40,
        np.zeros(0, dtype=np.bool_))
    if not ok:
        raise GrammarError("rule automaton too large (subset construction over its work limit); "
                           "reduce repetition bounds")
    productive, keep = trim_rules(dfa_ptr, is_final, o_src, o_sym, o_dst)
    if not productive[rule_index[ir.start]]:
        raise GrammarError(f"the grammar derives no string (rule {ir.start!r} cannot complete)")
    ptr = dfa_ptr.tolist()
    final = is_final.tolist()
    n_total = ptr[-1]
    src, sym = o_src[keep].astype(np.int64), o_sym[keep].astype(np.int64)
    rule_base = dfa_ptr[:-1].repeat(np.diff(dfa_ptr))  # per global state: its rule's first state
    local_dst = o_dst[keep] - rule_base[src]  # state ids within the rule
    terms_all, t_src, t_ids, t_dst = _rows(src, sym, local_dst, n_total, terminals=True)
    nt_all, *_ = _rows(src, sym, local_dst, n_total, terminals=False)
    # terminal edges keyed (state within the rule << TERM_SHIFT) | terminal, rule by rule
    t_keys = ((t_src - rule_base[t_src]) << TERM_SHIFT | t_ids).tolist()
    t_dst_list = t_dst.tolist()
    t_off = np.searchsorted(t_src, dfa_ptr).tolist()
    # tuples and int dicts, not lists: a cached grammar's rows then cost the garbage collector nothing
    autos = [RuleAutomaton(n, tuple(final[ptr[r]:ptr[r + 1]]), tuple(terms_all[ptr[r]:ptr[r + 1]]),
                           dict(zip(t_keys[t_off[r]:t_off[r + 1]], t_dst_list[t_off[r]:t_off[r + 1]])),
                           tuple(nt_all[ptr[r]:ptr[r + 1]])) for r, n in enumerate(names)]
    _check_left_recursion(autos)
    return autos, rule_index


def _rows(src: np.ndarray, sym: np.ndarray, dst: np.ndarray, n_states: int, *, terminals: bool):
    """Per state, its terminal ids (sorted) or its (rule id, next state) pairs, from the edge arrays
    (symbol codes: terminal t -> 2t, rule r -> 2r + 1); states with none share the empty tuple.
    Also returns the chosen edges' sources, symbol ids and targets, sorted by source then symbol."""
    pick = (sym & 1) == (0 if terminals else 1)
    s_, y_, d_ = src[pick], sym[pick] >> 1, dst[pick]
    order = np.lexsort((y_, s_))
    s_, y_, d_ = s_[order], y_[order], d_[order]
    counts = np.bincount(s_, minlength=n_states)
    off = np.concatenate(([0], np.cumsum(counts))).tolist()
    items = y_.tolist() if terminals else list(zip(y_.tolist(), d_.tolist()))
    rows: list[tuple] = [()] * n_states
    for st in np.flatnonzero(counts).tolist():
        rows[st] = tuple(items[off[st]:off[st + 1]])
    return rows, s_, y_, d_


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
            cost, terms, term_next = a.cost, a.terms, a.term_next
            inner = True
            while inner:
                inner = False
                for s in range(a.n_states):
                    best = 0.0 if a.final[s] else INF
                    base = s << TERM_SHIFT
                    for t in terms[s]:
                        c = term_cost[t] + cost[term_next[base | t]]
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
    for a in autos:
        a.cost = tuple(a.cost)  # read-only from here on (and untracked by the GC)
    return rule_cost
