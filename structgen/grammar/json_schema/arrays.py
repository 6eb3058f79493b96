"""Arrays: ``items``/``prefixItems``/``additionalItems`` and item counts as an explicit automaton,
``uniqueItems`` over small finite item sets in the automaton and over any other items by a
check as each item completes (``UniqueJsonItems``).
"""
from __future__ import annotations

from ...errors import UnsupportedFeature
from ..ir import Expr, Graph, Sym, seq
from .checks import UniqueJsonItems
from .json_values import NOT_FINITE, json_type, tighten_counts
from .limits import ANNOTATIONS, MAX_ARRAY_COUNT, MAX_UNIQUE_VALUES, TYPES
from .refs import SchemaNode


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
        item_exprs: list[Expr | None] = []
        beyond_prefix: Expr | None = None  # every index past the prefixes has the same item schemas
        for i in range(J + (1 if hi is None else 0)):
            idx = i if i < J else J
            if idx < P:
                item_exprs.append(self.value(item_nodes(idx)))
                continue
            if idx == P:
                beyond_prefix = self.value(item_nodes(idx))
            item_exprs.append(beyond_prefix)
        if checked:
            wrapped: dict[int, Expr] = {}
            item_exprs = [None if e is None else wrapped.setdefault(id(e), self.unique_item(e)) for e in item_exprs]
        edges = []
        for j in range(J):
            e = item_exprs[j]
            if e is None:
                break
            edges.append((j, e if j == 0 else seq(self.COMMA, e), j + 1))
        reach = len(edges)  # highest count reachable
        if hi is None and reach == J:
            e = item_exprs[J]
            if e is not None:
                edges.append((J, seq(self.COMMA, e) if J > 0 else e, J))
        finals = tuple(j for j in range(lo, reach + 1))
        if not finals:
            return None
        body = Graph(J + 1, tuple(edges), 0, finals)
        return self.rule("arr", seq(self.LBRACK, body, self.RBRACK))

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
