"""Arrays: ``items``/``prefixItems``/``additionalItems`` and item counts as an explicit automaton,
``uniqueItems`` over small finite item sets in the automaton and over any other items by a
check as each item completes (``UniqueJsonItems``), and ``contains`` (with ``minContains`` /
``maxContains``) in the automaton too: each item is either one ``contains`` matches or one its
negation matches, and the automaton counts the matches beside the items.  Checked at the array's
end instead, ``contains`` let a served request write ``maxItems`` items none of which matches
and then find no way to close the array (a dead end no token can leave).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ...errors import UnsupportedFeature
from ..ir import Expr, Graph, Sym, seq
from ..negation import negate
from .checks import UniqueJsonItems
from .json_values import NOT_FINITE, json_type, tighten_counts
from .limits import ANNOTATIONS, MAX_ARRAY_COUNT, MAX_GRAPH_STATES, MAX_UNIQUE_VALUES, TYPES
from .refs import SchemaNode


def _contains_key(s: dict) -> str:
    """What a node's ``contains`` asks, so that the same one met twice (``allOf``) counts once."""
    return json.dumps([s["contains"], s.get("minContains", 1), s.get("maxContains")], sort_keys=True, default=str)


@dataclass(frozen=True)
class Contains:
    """An array's ``contains``: the subschema, its negation, and how many items must match it."""

    match: SchemaNode
    miss: SchemaNode
    least: int
    most: int | None

    @property
    def cap(self) -> int:
        """Matches counted up to this (past ``least`` with no ``most``, more change nothing)."""
        return self.most if self.most is not None else self.least


class ArraysMixin:
    """The arrays part of :class:`~structgen.grammar.json_schema.compiler.SchemaCompiler`."""

    # -- arrays -------------------------------------------------------------------------------
    def array(self, nodes: list[SchemaNode]) -> Expr | None:
        saved, self._combinator_depth = self._combinator_depth, 0
        try:
            return self.array_body(nodes)
        finally:
            self._combinator_depth = saved

    def array_body(self, nodes: list[SchemaNode]) -> Expr | None:
        lo, hi = 0, None
        prefix_lists: list[tuple[SchemaNode, list]] = []
        rests: list[SchemaNode] = []
        for n in nodes:
            s = n.schema
            lo, hi = tighten_counts(s, n, lo, hi, "minItems", "maxItems")
            items = s.get("items")
            prefix = s.get("prefixItems")
            if isinstance(items, list):  # draft <= 2019: tuple form
                prefix_lists.append((n, items))
                ai = s.get("additionalItems", True)
                rests.append(n.child(ai, f"{n.ptr}/additionalItems"))
            else:
                if isinstance(prefix, list):
                    prefix_lists.append((n, prefix))
                if items is not None:
                    rests.append(n.child(items, f"{n.ptr}/items"))
        if hi is not None and lo > hi:
            return None
        P = max((len(p) for _, p in prefix_lists), default=0)

        def item_nodes(i: int) -> list[SchemaNode]:
            out = []
            for n, p in prefix_lists:
                key = "items" if isinstance(n.schema.get("items"), list) else "prefixItems"
                if i < len(p):
                    out.append(n.child(p[i], f"{n.ptr}/{key}/{i}"))
            # rest schemas apply to indices beyond each node's own prefix
            for r in rests:
                owner_prefix = next((len(p) for n, p in prefix_lists if r.ptr.startswith(n.ptr + "/")), 0)
                if i >= owner_prefix:
                    out.append(r)
            return out

        unique = [n for n in nodes if n.schema.get("uniqueItems") is True]
        contains = self.contains_of(nodes, bool(unique), hi)
        if contains is not None and hi is not None and contains.least > hi:
            return None
        checked = False  # items told apart at run time (see unique_item)
        if unique and (hi is None or hi > 1):
            e = self.unique_array(unique[0], item_nodes, P, lo, hi)
            if e is not NOT_FINITE:
                return e
            checked = True
        J = hi if hi is not None else max(lo, P, 1)
        if J > MAX_ARRAY_COUNT:
            raise UnsupportedFeature(f"maxItems/minItems of {J} is too large to enforce exactly",
                                     pointer=nodes[0].ptr, keyword="maxItems")
        K = contains.cap if contains else 0
        if (J + 1) * (K + 1) > MAX_GRAPH_STATES:
            self.unsupported(nodes[0], "contains", "too many items and matches to count")
            contains, K = None, 0

        def exprs(extra: list[SchemaNode]) -> list[Expr | None]:
            out: list[Expr | None] = []
            beyond_prefix: Expr | None = None  # every index past the prefixes has the same item schemas
            for i in range(J + (1 if hi is None else 0)):
                idx = i if i < J else J
                if idx < P:
                    out.append(self.value(item_nodes(idx) + extra))
                    continue
                if idx == P:
                    beyond_prefix = self.value(item_nodes(idx) + extra)
                out.append(beyond_prefix)
            if checked:
                wrapped: dict[int, Expr] = {}
                out = [None if e is None else wrapped.setdefault(id(e), self.unique_item(e)) for e in out]
            return out

        # an item moves the count from j to j + 1 and, when contains matches it, the matches from c to c + 1
        moves = [(exprs([contains.miss]), 0), (exprs([contains.match]), 1)] if contains else [(exprs([]), 0)]

        def state(j: int, c: int) -> int:
            return j * (K + 1) + c

        edges = []
        reach = 0  # highest count reachable
        for j in range(J + (1 if hi is None else 0)):
            if j > reach:
                break
            to = min(j + 1, J)
            for item, step in moves:
                e = item[j]
                if e is None:
                    continue
                if to > reach:
                    reach = to
                for c in range(K + 1):
                    if step and contains.most is not None and c == contains.most:
                        continue  # one match more than maxContains
                    edges.append((state(j, c), e if j == 0 else seq(self.COMMA, e), state(to, min(c + step, K))))
        least, most = (contains.least, contains.cap) if contains else (0, 0)
        finals = tuple(state(j, c) for j in range(lo, reach + 1) for c in range(least, most + 1))
        if not finals:
            return None
        body = Graph((J + 1) * (K + 1), tuple(edges), 0, finals)
        return self.rule("arr", seq(self.LBRACK, body, self.RBRACK))

    def contains_of(self, nodes: list[SchemaNode], unique: bool, hi: int | None) -> Contains | None:
        """The array's ``contains`` when the automaton can count it (one ``contains`` whose
        negation is a schema, no ``uniqueItems`` beside it); any other ``contains`` is left to a
        check as the array completes (``unsupported``).  None when nothing is to be counted."""
        with_contains = list({_contains_key(n.schema): n for n in nodes if "contains" in n.schema}.values())
        if not with_contains:
            return None
        n = with_contains[0]
        s = n.schema
        least, most = s.get("minContains", 1), s.get("maxContains")
        if not (isinstance(least, int) and not isinstance(least, bool) and least >= 0) or not (
                most is None or isinstance(most, int) and not isinstance(most, bool) and most >= 0):
            self.unsupported(n, "minContains", "minContains/maxContains must be non-negative integers")
            return None
        if len(with_contains) > 1 or unique:
            why = "more than one contains" if len(with_contains) > 1 else "contains with uniqueItems"
            self.unsupported(n, "contains", why)
            return None
        if most is not None and most < least:
            self.unsupported(n, "contains", "maxContains below minContains")  # no array: the check says so
            return None
        if least == 0 and most is None:
            return None  # minContains 0: any array
        sub = s["contains"]
        neg = negate(sub, self.local_resolver(n.base, n.ptr + "/contains"), **self.format_kinds())
        if neg is None:
            self.unsupported(n, "contains", "its subschema has no negation the automaton holds")
            return None
        match = n.child(sub, f"{n.ptr}/contains")
        miss = match.replaced(self.derived(sub, "contains-miss", lambda: neg) if isinstance(sub, dict) else neg)
        return Contains(match, miss, least, most)

    def unique_item(self, e: Expr) -> Sym:
        """An item of a uniqueItems array the grammar cannot tell apart by itself: a rule of its own,
        checked by a :class:`UniqueJsonItems` check against the array's earlier items
        (``structgen.engine.checks``): the token that would complete a duplicate is rejected."""
        sym = self.rule("uitem", e)
        self.ir.checks.append(UniqueJsonItems(sym.name))
        return sym

    def unique_array(self, n: SchemaNode, item_nodes, P: int, lo: int, hi: int | None) -> Expr | None:
        """uniqueItems over a finite item set (enum, const, boolean, null): the array
        automaton tracks which values are used, one state per subset.  Returns ``NOT_FINITE``
        for any other item set: the array is then compiled with its items checked at run time."""
        values = None
        if P == 0:
            nodes = item_nodes(0)
            flat = self.flatten(nodes, frozenset()) if nodes else []
            if flat is None:
                values = []
            else:
                values = self.finite_candidates(flat)
                if values is NOT_FINITE:
                    types = set(TYPES)
                    for x in flat:
                        t = x.schema.get("type")
                        if t is not None:
                            types &= set([t] if isinstance(t, str) else t)
                    rest = [k for x in flat for k in x.schema if k not in ANNOTATIONS and k != "type"]
                    values = ([v for v in (None, True, False) if json_type(v) in types]
                              if types <= {"null", "boolean"} and not rest else None)
        if values is None or len(values) > MAX_UNIQUE_VALUES:
            return NOT_FINITE
        k = len(values)
        exprs = [self.const_expr(v) for v in values]
        edges = []
        for used in range(1 << k):
            for i in range(k):
                if not used >> i & 1:
                    edges.append((used, exprs[i] if used == 0 else seq(self.COMMA, exprs[i]), used | 1 << i))
        finals = tuple(u for u in range(1 << k) if lo <= bin(u).count("1") <= (hi if hi is not None else k))
        if not finals:
            return None
        return self.rule("arr", seq(self.LBRACK, Graph(1 << k, tuple(edges), 0, finals), self.RBRACK))
