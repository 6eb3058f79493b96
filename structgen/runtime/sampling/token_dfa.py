"""A regular constraint as an automaton over tokens: what the HMM's backward table walks.

The engine tracks an output with a Matcher whose state is three integers (parser configuration,
lexer, lexer state); for a regular constraint finitely many of them are reachable from the start.
Reading them off the engine -- each state's mask, then each allowed token's successor -- gives the
token DFA, with transitions grouped by destination (the backward table sums emissions per group,
not per token).  EOS from a state where the output may end leads to ``done``, the one state past
the end.  A constraint that is not regular (a recursive grammar: unboundedly many configurations)
or that needs checks on whole values (``uniqueItems``, jsonschema checks at value boundaries) has
no such automaton and is refused with ``UnsupportedFeature``.
"""
from __future__ import annotations

import weakref
from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ...errors import UnsupportedFeature

__all__ = ["TokenDFA", "token_dfa", "cached_token_dfa", "dfa_from_function", "recursive_rule"]

MAX_STATES = 20_000


@dataclass
class TokenDFA:
    """States ``0..n-1`` from ``start``.  Per state: ``tokens[s]`` (sorted int64 ids) and
    ``dests[s]`` (their successors), and ``groups[s]``, a list of (destination, token ids).
    ``final[s]``: the output may stop at ``s`` (remaining length 0 accepts there);
    ``absorbing[s]``: the state past EOS, where the constraint is settled whatever follows."""

    start: int
    tokens: list[np.ndarray]
    dests: list[np.ndarray]
    final: np.ndarray
    absorbing: np.ndarray
    eos_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        self.groups: list[list[tuple[int, np.ndarray]]] = []
        for toks, ds in zip(self.tokens, self.dests):
            order = np.argsort(ds, kind="stable")
            ds_sorted, toks_sorted = ds[order], toks[order]
            cuts = np.flatnonzero(np.diff(ds_sorted)) + 1
            self.groups.append([(int(d[0]), t) for d, t in zip(np.split(ds_sorted, cuts), np.split(toks_sorted, cuts))
                                if len(d)])

    @property
    def n_states(self) -> int:
        return len(self.tokens)

    @property
    def n_edges(self) -> int:
        return sum(len(g) for g in self.groups)

    def step(self, state: int, token: int) -> int | None:
        """The successor of ``state`` on ``token`` (None: the token is not allowed)."""
        toks = self.tokens[state]
        i = int(np.searchsorted(toks, token))
        if i < len(toks) and toks[i] == token:
            return int(self.dests[state][i])
        return None

    def accepts(self, seq: Sequence[int]) -> bool:
        """True when ``seq`` leads from the start to a final or absorbing state."""
        s: int | None = self.start
        for t in seq:
            s = self.step(s, int(t))
            if s is None:
                return False
        return bool(self.final[s] or self.absorbing[s])


def dfa_from_function(n_states: int, vocab_size: int, delta: Callable[[int, int], int | None], start: int,
                      final: Sequence[int]) -> TokenDFA:
    """A token DFA from a transition function (tests, hand-written formats): ``delta(s, t)`` is
    the successor or None; exact-length semantics (no EOS, no absorbing state)."""
    tokens, dests = [], []
    for s in range(n_states):
        pairs = [(t, delta(s, t)) for t in range(vocab_size)]
        pairs = [(t, d) for t, d in pairs if d is not None]
        tokens.append(np.array([t for t, _ in pairs], dtype=np.int64))
        dests.append(np.array([d for _, d in pairs], dtype=np.int64))
    fin = np.zeros(n_states, dtype=bool)
    fin[list(final)] = True
    return TokenDFA(start, tokens, dests, fin, np.zeros(n_states, dtype=bool))


def recursive_rule(autos, start: int) -> str | None:
    """The name of a rule reachable from ``start`` that lies on a cycle of rule references, or None
    (then the parser's stacks are bounded and finitely many configurations exist)."""
    graph = [{n for row in a.nt_edges for n, _ in row} for a in autos]
    WHITE, GREY, BLACK = 0, 1, 2
    colour = [WHITE] * len(autos)
    colour[start] = GREY
    path = [(start, iter(graph[start]))]
    while path:
        r, it = path[-1]
        nxt = next(it, None)
        if nxt is None:
            colour[r] = BLACK
            path.pop()
        elif colour[nxt] == GREY:
            return autos[nxt].name
        elif colour[nxt] == WHITE:
            colour[nxt] = GREY
            path.append((nxt, iter(graph[nxt])))
    return None


def token_dfa(grammar, *, max_states: int = MAX_STATES) -> TokenDFA:
    """The token automaton of a compiled grammar (``CompiledGrammar``), states reachable from the
    start.  Raises ``UnsupportedFeature`` when the grammar has value checks or more than
    ``max_states`` token-level states (a recursive, hence non-regular, constraint, or one too large
    to tabulate); the message says which."""
    if grammar.checks:
        raise UnsupportedFeature(
            "the constraint is checked on whole values as they complete (uniqueItems, or keywords enforced by "
            "jsonschema at value boundaries): it has no finite token automaton, so the HMM cannot look ahead "
            "over it (Deco-G, twisted SMC)", keyword="decog")
    if getattr(grammar, "lazy_patterns", None):
        raise UnsupportedFeature(
            "a string pattern of the constraint is too large for an automaton (its states are made as masks reach "
            "them): it has no finite token automaton to tabulate, so the HMM cannot look ahead over it",
            keyword="decog")
    # a lazy regex (structgen.engine.lazy_regex) has no rules: regular, its states are enumerated below
    rec = None if getattr(grammar, "lazy", False) else recursive_rule(grammar.parser.autos, grammar.parser.start_rule)
    if rec is not None:
        raise UnsupportedFeature(
            f"rule {rec!r} is recursive (it refers to itself through other rules), so the constraint is not "
            "regular and has no finite token automaton: in a JSON Schema, a recursive $ref, or a value of any JSON "
            "type (additionalProperties or items left open; compile with strict=True or close them with "
            "additionalProperties: false); Deco-G and twisted SMC need a regular format", keyword="decog")
    tb = grammar.tokenizer.token_bytes
    special = grammar.tokenizer.special_ids
    eos = tuple(grammar.eos_ids)
    cid0 = grammar.parser.initial
    init = (cid0, grammar.lexer_for(cid0), 0)
    index: dict[tuple, int] = {}
    states: list[tuple] = []
    DONE = -1

    def key(st) -> tuple:
        return (st[0], st[1].id, st[2])

    def intern(st) -> int:
        k = key(st)
        i = index.get(k)
        if i is None:
            if len(states) >= max_states:
                raise UnsupportedFeature(
                    f"more than {max_states} token-level states are reachable: the constraint is not regular "
                    "(a recursive rule: JSON Schema $ref recursion, a recursive grammar) or is too large for a token "
                    "automaton (long counted repetitions); Deco-G and twisted SMC need a regular format", keyword="decog")
            i = index[k] = len(states)
            states.append(st)
            queue.append(i)
        return i

    queue: deque[int] = deque()
    intern(init)
    tokens: list[np.ndarray] = []
    dests: list[list[int]] = []
    while queue:
        s = queue.popleft()
        cid, lx, ls = states[s]
        words = np.ascontiguousarray(grammar.mask(cid, lx, ls), dtype=np.uint32)
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: grammar.vocab_size]
        toks, ds = [], []
        can_end = grammar.can_end(cid, lx, ls)
        for t in np.flatnonzero(bits).tolist():
            if t in special or not tb[t]:
                continue
            nxt = grammar.advance(cid, lx, ls, tb[t])
            if nxt is None:
                continue
            toks.append(t)
            ds.append(intern(nxt))
        if can_end:
            toks.extend(eos)
            ds.extend([DONE] * len(eos))
        tokens.append(np.asarray(toks, dtype=np.int64))  # states leave the FIFO queue in index order
        dests.append(ds)
    done = len(states)
    out_tokens, out_dests = [], []
    for toks, ds in zip(tokens, dests):
        d = np.asarray([done if x == DONE else x for x in ds], dtype=np.int64)
        order = np.argsort(toks, kind="stable")
        out_tokens.append(toks[order])
        out_dests.append(d[order])
    out_tokens.append(np.zeros(0, dtype=np.int64))  # done: nothing more is read
    out_dests.append(np.zeros(0, dtype=np.int64))
    final = np.zeros(done + 1, dtype=bool)
    absorbing = np.zeros(done + 1, dtype=bool)
    final[done] = absorbing[done] = True
    return TokenDFA(0, out_tokens, out_dests, final, absorbing, eos)


_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # grammar -> TokenDFA, or (error, max_states)


def cached_token_dfa(grammar, *, max_states: int = MAX_STATES) -> TokenDFA:
    """:func:`token_dfa`, built once per compiled grammar for every caller (Deco-G, twisted SMC, the
    canonical filter's dead-end search).  A refusal is remembered with the limit it was made under and
    raised again; a larger ``max_states`` than a refusal for size tries again."""
    hit = _CACHE.get(grammar)
    if isinstance(hit, TokenDFA):
        if hit.n_states <= max_states:
            return hit
        raise UnsupportedFeature(f"more than {max_states} token-level states are reachable "
                                 f"({hit.n_states})", keyword="decog")
    if hit is not None:
        err, limit = hit
        if max_states <= limit or "more than" not in str(err):
            raise err
    try:
        dfa = token_dfa(grammar, max_states=max_states)
    except UnsupportedFeature as e:
        _CACHE[grammar] = (e, max_states)
        raise
    _CACHE[grammar] = dfa
    return dfa
