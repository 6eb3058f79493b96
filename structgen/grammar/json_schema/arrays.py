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
from .limits import ANNOTATIONS, MAX_ARRAY_COUNT, MAX_GRAPH_STATES, MAX_SOME_ITEMS, MAX_UNIQUE_VALUES, TYPES
from .refs import SchemaNode


def _contains_key(s: dict) -> str:
    """What a node's ``contains`` asks, so that the same one met twice (``allOf``) counts once."""
    return json.dumps([s["contains"], s.get("minContains", 1), s.get("maxContains")], sort_keys=True, default=str)


@dataclass(frozen=True)
class ItemMarks:
    """What the array automaton counts beside the items: ``size`` states, the item *classes* (the
    schemas an item of the class matches besides the items', and the state each state moves to, -1
    for none) and the states an array may end in."""

    size: int
    classes: tuple  # ((extra SchemaNodes, next state per state), ...)
    finals: frozenset

    @staticmethod
    def counted(match: SchemaNode, miss: SchemaNode, least: int, most: int | None) -> "ItemMarks":
        """One ``contains``: matches counted up to ``most`` (or to ``least``, past which more change nothing)."""
        cap = most if most is not None else least
        step = tuple(-1 if most is not None and c == most else min(c + 1, cap) for c in range(cap + 1))
        return ItemMarks(cap + 1, (((miss,), tuple(range(cap + 1))), ((match,), step)),
                         frozenset(range(least, cap + 1)))

    @staticmethod
    def each(pairs: list[tuple[SchemaNode, SchemaNode]]) -> "ItemMarks":
        """Several plain ``contains`` (one match each): which of them an item has met, as bits."""
        full = (1 << len(pairs)) - 1
        classes = tuple((tuple(m if x >> j & 1 else n for j, (m, n) in enumerate(pairs)),
                         tuple(y | x for y in range(full + 1))) for x in range(full + 1))
        return ItemMarks(full + 1, classes, frozenset((full,)))


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
        marks = self.contains_of(nodes, bool(unique))
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
        if marks is not None and (J + 1) * marks.size > MAX_GRAPH_STATES:
            self.unsupported(nodes[0], "contains", "too many items and matches to count")
            marks = None
        if marks is None:
            marks = ItemMarks(1, (((), (0,)),), frozenset((0,)))
        D = marks.size

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

        # an item moves the count from j to j + 1, and the marks as its class says
        moves = [(exprs(list(extra)), nxt) for extra, nxt in marks.classes]

        def state(j: int, d: int) -> int:
            return j * D + d

        edges = []
        reached = {state(0, 0)}
        for j in range(J + (1 if hi is None else 0)):
            to = min(j + 1, J)
            for item, nxt in moves:
                e = item[j]
                if e is None:
                    continue
                for d in range(D):
                    if nxt[d] < 0:
                        continue
                    edges.append((state(j, d), e if j == 0 else seq(self.COMMA, e), state(to, nxt[d])))
        changed = True
        while changed:  # the states an array can reach (finals no item sequence reaches are left out)
            changed = False
            for a, _, b in edges:
                if a in reached and b not in reached:
                    reached.add(b)
                    changed = True
        finals = tuple(f for f in (state(j, d) for j in range(lo, J + 1) for d in sorted(marks.finals))
                       if f in reached)
        if not finals:
            return None
        body = Graph((J + 1) * D, tuple(edges), 0, finals)
        return self.rule("arr", seq(self.LBRACK, body, self.RBRACK))

    def contains_of(self, nodes: list[SchemaNode], unique: bool) -> ItemMarks | None:
        """What the array automaton counts for the array's ``contains``: one ``contains`` with its
        ``minContains`` / ``maxContains``, or up to ``MAX_SOME_ITEMS`` plain ones (each met once),
        each item matching a ``contains`` or its negation.  Anything else (``uniqueItems`` beside,
        a subschema without a negation, several counted ones) is left to a check as the array
        completes (``unsupported``).  None when nothing is to be counted."""
        found = list({_contains_key(n.schema): n for n in nodes if "contains" in n.schema}.values())
        counts = []
        for n in found:
            s = n.schema
            least, most = s.get("minContains", 1), s.get("maxContains")
            if not (isinstance(least, int) and not isinstance(least, bool) and least >= 0) or not (
                    most is None or isinstance(most, int) and not isinstance(most, bool) and most >= 0):
                self.unsupported(n, "minContains", "minContains/maxContains must be non-negative integers")
                return None
            if most is not None and most < least:
                self.unsupported(n, "contains", "maxContains below minContains")  # no array: the check says so
                return None
            if least or most is not None:  # minContains 0 and no maxContains: any array
                counts.append((n, least, most))
        if not counts:
            return None
        if unique:
            self.unsupported(counts[0][0], "contains", "contains with uniqueItems")
            return None
        if len(counts) > 1 and (len(counts) > MAX_SOME_ITEMS or any((lo, hi) != (1, None) for _, lo, hi in counts)):
            self.unsupported(counts[0][0], "contains", "more contains, or counted ones, than the automaton counts")
            return None
        pairs = []
        for n, _, _ in counts:
            sub = n.schema["contains"]
            neg = negate(sub, self.local_resolver(n.base, n.ptr + "/contains"), **self.negation_options(n.own_draft))
            if neg is None:
                self.unsupported(n, "contains", "its subschema has no negation the automaton holds")
                return None
            match = n.child(sub, f"{n.ptr}/contains")
            pairs.append((match, match.replaced(self.derived(sub, "contains-miss", lambda: neg)
                                                if isinstance(sub, dict) else neg)))
        if len(counts) == 1:
            return ItemMarks.counted(*pairs[0], counts[0][1], counts[0][2])
        return ItemMarks.each(pairs)

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
