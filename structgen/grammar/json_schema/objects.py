"""Objects: properties in schema order or any order, required keys and presence conditions,
property counts, ``additionalProperties``/``patternProperties``/``propertyNames``, and the
key-set check of any-order objects too large to track.
"""
from __future__ import annotations

import re
from typing import Any

from ...errors import GrammarError, SchemaError, UnsupportedFeature
from ...automata.fsa import DFA, difference, difference_literals, intersect, union
from ..ir import Expr, Graph, alt, derives_something, seq
from ..negation import is_some_key_not, member_form, negate
from ..json_strings import literal_strings, string_dfa, string_forms
from ..presence import eval_presence, presence_keys
from ..regex import python_regex
from .checks import KeySetCheck
from .json_values import NOT_FINITE, check_pattern, pattern_search, tighten_counts
from .limits import (ANY_ORDER_MAX_TRACKED, ANY_ORDER_TRACK_ALL, MAX_GRAPH_STATES,
                     MAX_KEY_REGIONS, MAX_SOME_KEYS)
from .refs import SchemaNode, escape_pointer


def python_pattern(pat: str, pointer: str) -> str:
    r"""A ``patternProperties`` key checked (``SchemaError`` naming the pattern as written when it is
    no regular expression) and in the syntax of Python's ``re``: ECMA-262's ``\p{...}`` Unicode
    property escapes, which JSON Schema patterns may use, written as the classes they stand for
    (:func:`structgen.grammar.regex.python_regex`; the same string when there are none)."""
    try:
        py = python_regex(pat)
    except GrammarError as e:
        raise SchemaError(str(e), pointer=pointer) from None
    if py is pat:
        check_pattern(pat, pointer)
        return pat
    try:
        re.compile(py)
    except re.error as e:
        raise SchemaError(f"invalid regular expression {pat!r}: {e.msg}", pointer=pointer) from None
    return py


def other_key_term(defined: list[str], mask: int, patterns: list, names_nodes: list) -> tuple:
    """The terminal key of an object's undefined keys in one region of the key space (the patterns
    of ``mask``); with no pattern and no propertyNames it is "any string but the defined keys"."""
    return ("addkey", tuple(defined), mask, tuple(p for _, p, _ in patterns), tuple(id(x.schema) for x in names_nodes))


class ObjectsMixin:
    """The objects part of :class:`~structgen.grammar.json_schema.compiler.SchemaCompiler`."""

    # -- objects --------------------------------------------------------------------------------
    def object(self, nodes: list[SchemaNode]) -> Expr | None:
        saved, self._combinator_depth = self._combinator_depth, 0
        try:
            closer = self.closing_node(nodes)
            if closer is None:
                return self.object_body(nodes)
            closed = self.object_body(nodes + [closer])
            if closed is not None and derives_something(closed, self.ir.rules):
                return closed
            opened = self.object_body(nodes)
            if opened is not None and not self.opts.strict:
                return opened  # members="named" never empties an object: its open form instead
            if opened is not None:
                self.emptied_by_policy.append(nodes[0].ptr)
            return None
        finally:
            self._combinator_depth = saved

    def closing_node(self, nodes: list[SchemaNode]) -> SchemaNode | None:
        """A node that closes the conjunction ``nodes`` to the members it names (SchemaOptions.members,
        ``strict``), or None where the object stays open.  Closing the conjunction as a whole, not
        each schema in it, keeps ``allOf`` parts, ``if``/``then``/``else`` and ``dependentSchemas``
        meaning what they mean: a key named by any of them is allowed.  Map-like objects (an
        ``additionalProperties``, ``unevaluatedProperties`` or ``propertyNames`` schema) are left as
        they are; under "named", so are objects that name nothing (any member is what they ask for)."""
        if not nodes or self.opts.members == "any" and not self.opts.strict:
            return None  # (no node: "any value", whose objects stay open)
        names: dict[str, bool] = {}
        patterns: dict[str, bool] = {}
        for n in nodes:
            s = n.schema
            if not isinstance(s, dict):
                continue
            for kw in ("additionalProperties", "unevaluatedProperties"):
                if kw in s and s[kw] is not True and s[kw] != {}:
                    if s[kw] is not False:
                        return None  # a map: its keys are the user's to choose
            if "propertyNames" in s and s["propertyNames"] is not True and s["propertyNames"] != {}:
                return None
            props = s.get("properties")
            names.update(dict.fromkeys(props if isinstance(props, dict) else (), True))
            req = s.get("required")
            names.update(dict.fromkeys((k for k in req if isinstance(k, str)) if isinstance(req, list) else (), True))
            names.update(dict.fromkeys((k for p in s.get("__presence__", []) for k in presence_keys(p)), True))
            pats = s.get("patternProperties")
            patterns.update(dict.fromkeys(pats if isinstance(pats, dict) else (), True))
        if not names and not patterns and not self.opts.strict:
            return None
        key = (tuple(names), tuple(patterns))
        schema = self._closers.get(key)
        if schema is None:
            schema = self._closers[key] = {"properties": names, "patternProperties": patterns,
                                           "additionalProperties": False}
        return nodes[0].replaced(schema)

    def object_body(self, nodes: list[SchemaNode]) -> Expr | None:
        minp, maxp = 0, None
        order: list[str] = []
        in_order: set[str] = set()
        required: set[str] = set()
        names_nodes: list[SchemaNode] = []
        some_keys: list[SchemaNode] = []  # not: {propertyNames: S} -- some key fails S -- or a member form
        for n in nodes:
            s = n.schema
            props = s.get("properties") or {}
            if not isinstance(props, dict):
                raise SchemaError("properties must be an object", pointer=f"{n.ptr}/properties")
            for k in props:
                if k not in in_order:
                    in_order.add(k)
                    order.append(k)
            req = s.get("required") or []
            if isinstance(req, list):
                required.update(x for x in req if isinstance(x, str))
            minp, maxp = tighten_counts(s, n, minp, maxp, "minProperties", "maxProperties")
            if "propertyNames" in s:
                names_nodes.append(n.child(s["propertyNames"], f"{n.ptr}/propertyNames"))
            if is_some_key_not(s.get("not")):
                some_keys.append(n)
        some = [self.some_member(n) for n in some_keys]  # (key, value that sets the mark, its complement)
        if some_keys and maxp is not None and maxp <= 1 and None not in some and all(v is None for _, v, _ in some):
            # at most one key: it must match every "some key" schema, and there must be one
            names_nodes += [k for k, _, _ in some]
            minp, some_keys, some = max(minp, 1), [], []
        elif None in some or len(some) > MAX_SOME_KEYS:
            self.unsupported(some_keys[0], "not", "keys that must match beyond what the automaton counts")
            some = []
        for k in sorted(required - in_order):
            order.append(k)
        presence = [p for n in nodes for p in n.schema.get("__presence__", [])]
        tracked: list[str] = sorted({k for p in presence for k in presence_keys(p)})
        if len(tracked) > 10:
            raise UnsupportedFeature("presence constraints over more than 10 keys", pointer=nodes[0].ptr,
                                     keyword="required")
        for k in tracked:
            if k not in order:
                order.append(k)
        if maxp is not None and (minp > maxp or len(required) > maxp):
            return None

        def value_nodes_for(key: str) -> list[SchemaNode]:
            out = []
            for n in nodes:
                s = n.schema
                props = s.get("properties") or {}
                if key in props:
                    out.append(n.child(props[key], f"{n.ptr}/properties/{escape_pointer(key)}"))
                    matched = True
                else:
                    matched = False
                for pat, ps in (s.get("patternProperties") or {}).items():
                    ptr = f"{n.ptr}/patternProperties/{escape_pointer(pat)}"
                    if pattern_search(python_pattern(pat, ptr), key, n):
                        out.append(n.child(ps, ptr))
                        matched = True
                if not matched:
                    out.append(self.additional_node(n))
            return out

        members: list[tuple[str, Expr]] = []
        moves_of: dict[str, list[tuple[int, Expr]]] = {}  # key -> (marks it sets, member) alternatives
        for k in order:
            if names_nodes and not self.valid_under(k, names_nodes):
                if k in required:
                    return None
                continue
            key_sym = None
            alts = []
            empty_mark = self.empty_mark()
            for mark, extra in self.member_splits(some, lambda j: self.valid_under(k, [some[j][0]])):
                e = self.value(value_nodes_for(k) + extra)
                if e is not None:
                    key_sym = key_sym or self.term(("key", k), literal_strings([k]), "KEY")
                    alts.append((mark, seq(key_sym, self.COLON, e)))
            if not alts and k in required:
                return None
            if alts and k not in required and self.stated_in_source(value_nodes_for(k)):
                required.add(k)  # grounded extraction: a member the text states is written
            if k not in required:
                self.forget_empty(empty_mark)
            if alts:
                members.append((k, alt(*[e for _, e in alts])))
                moves_of[k] = alts
        full = (1 << len(some)) - 1  # every "some key / member" met
        # undefined members, one alternative per set of "some key" schemas their keys match (one set
        # when there are none), and per "some member" value class
        key_schemas = [kn for kn, _, _ in some]
        adds = []
        for x in range(full + 1):
            for mark, extra in self.member_splits(some, lambda j: bool(x >> j & 1)):
                e = self.additional_members(nodes, order, names_nodes + self.key_classes(key_schemas, x), extra)
                if e is not None:
                    adds.append((mark, e))
        add_member = alt(*[e for _, e in adds]) if adds else None
        other_key = self._terms.get(other_key_term(order, 0, [], []))
        if other_key is not None and members:
            # any string but the defined keys: every key prefix stays alive with it, so the engine's key
            # lexers may hold all of this object's key literals (structgen.engine.lexer.Lexer)
            family = self.ir.key_families.setdefault(other_key.name, set())
            family.update(self._terms[("key", k)].name for k, _ in members)
        if self.opts.property_order == "any":
            e = self.any_order_members(members, adds, required, tracked, presence, minp, maxp, moves_of, full)
            if e is NOT_FINITE:
                if some:
                    self.unsupported(some_keys[0], "not", "too many keys to track beside the keys that must match")
                return self.checked_object(members, add_member, required, presence, minp, maxp)
            return None if e is None else self.rule("obj", seq(self.LBRACE, e, self.RBRACE))
        n_def = len(members)
        C = maxp if maxp is not None else max(minp, 1)
        if (n_def + 1) * (C + 1) > MAX_GRAPH_STATES:
            raise UnsupportedFeature("too many properties and property counts to enforce exactly",
                                     pointer=nodes[0].ptr, keyword="maxProperties")

        bit = {k: 1 << j for j, k in enumerate(tracked)}
        PB = 1 << len(tracked)
        XB = full + 1
        if (n_def + 1) * (C + 1) * PB * XB > MAX_GRAPH_STATES:
            raise UnsupportedFeature("too many properties, counts and presence constraints to enforce exactly",
                                     pointer=nodes[0].ptr, keyword="properties")

        def sid(i: int, c: int, p: int = 0, x: int = 0) -> int:
            return ((i * (C + 1) + c) * PB + p) * XB + x

        edges = []
        for i, (k, _) in enumerate(members):
            kb = bit.get(k, 0)
            for c in range(C + 1):
                for p in range(PB):
                    for x in range(XB):
                        if k not in required:
                            edges.append((sid(i, c, p, x), None, sid(i + 1, c, p, x)))
                        if maxp is not None and c >= maxp:
                            continue
                        nc = min(c + 1, C)
                        for mk, e in moves_of[k]:
                            edges.append((sid(i, c, p, x), e if c == 0 else seq(self.COMMA, e),
                                          sid(i + 1, nc, p | kb, x | mk)))
        for mk, add in adds:
            for c in range(C + 1):
                if maxp is not None and c >= maxp:
                    continue
                nc = min(c + 1, C)
                for p in range(PB):
                    for x in range(XB):
                        edges.append((sid(n_def, c, p, x), add if c == 0 else seq(self.COMMA, add),
                                      sid(n_def, nc, p, x | mk)))
        finals = tuple(sid(n_def, c, p, full) for c in range(C + 1) for p in range(PB) if c >= minp and all(
            eval_presence(pr, {k for k in tracked if p & bit[k]}) for pr in presence))
        if not finals:
            return None
        body = Graph((n_def + 1) * (C + 1) * PB * XB, tuple(edges), sid(0, 0), finals)
        return self.rule("obj", seq(self.LBRACE, body, self.RBRACE))

    def some_member(self, n: SchemaNode) -> tuple | None:
        """``(key schema, value schema, its complement)`` of a ``not`` the object counts: "some key
        fails propertyNames" (value schemas None) or a member form (``negation.member_form``: some
        member of these keys has a value failing S -- the value that sets the mark is ``not: S``);
        None when the key schema has no negation."""
        sub = n.schema["not"]
        form = member_form(sub)
        if form is None:
            key = self.some_key_schema(n)
            return None if key is None else (key, None, None)
        keys, value = form
        ptr = f"{n.ptr}/not"
        vptr = f"{ptr}/additionalProperties" if "additionalProperties" in sub else \
            f"{ptr}/patternProperties/{escape_pointer(next(iter(sub['patternProperties'])))}"
        key = n.child(self.derived(sub, "member-key", lambda: keys) if isinstance(keys, dict) else keys, ptr)
        fails = n.child(self.derived(sub, "member-fails", lambda: {"not": value}), vptr)
        return key, fails, n.child(value, vptr)

    @staticmethod
    def member_splits(some: list, matches) -> list[tuple[int, list[SchemaNode]]]:
        """``(marks, extra value schemas)`` alternatives for a member whose key matches the ``some``
        schemas ``j`` where ``matches(j)``: a "some key" schema is met by the key alone; a "some
        member" schema splits the value in two, failing its S (the mark set) or meeting it."""
        plain = sum(1 << j for j, (_, v, _) in enumerate(some) if v is None and matches(j))
        valued = [j for j, (_, v, _) in enumerate(some) if v is not None and matches(j)]
        out = []
        for t in range(1 << len(valued)):
            extra = [some[j][1] if t >> i & 1 else some[j][2] for i, j in enumerate(valued)]
            out.append((plain | sum(1 << j for i, j in enumerate(valued) if t >> i & 1), extra))
        return out

    def some_key_schema(self, n: SchemaNode) -> SchemaNode | None:
        """The key schema of ``not: {propertyNames: S}``: S's negation, which some key must match;
        None when S has none (the object is then checked as it closes)."""
        ptr = f"{n.ptr}/not/propertyNames"
        names = n.schema["not"]["propertyNames"]
        neg = negate(names, self.local_resolver(n.base, ptr), **self.negation_options(n.own_draft))
        if neg is None:
            return None
        return n.child(self.derived(names, "some-key", lambda: neg) if isinstance(names, dict) else neg, ptr)

    def key_classes(self, some: list[SchemaNode], x: int) -> list[SchemaNode]:
        """Key schemas of the keys that match exactly the ``some`` schemas of bit set ``x``."""
        out = []
        for j, n in enumerate(some):
            if x >> j & 1:
                out.append(n)
            elif isinstance(n.schema, bool):
                out.append(n.replaced(not n.schema))
            else:
                out.append(n.replaced(self.derived(n.schema, "not-key", lambda: {"not": n.schema})))
        return out

    def any_order_members(self, members: list, adds: list, required: set, tracked: list, presence: list,
                          minp: int, maxp: int | None, moves_of: dict | None = None, full: int = 0):
        """Members in any order: the automaton tracks which keys were seen (all of them when
        there are few, else the required and presence-tested ones, letting other optional keys
        repeat -- a repeated key's every value still satisfies its schema, and a JSON parser
        keeps one).  ``NOT_FINITE`` when that cannot be exact (the caller keeps schema order)."""
        keys = [k for k, _ in members]
        watched = keys if len(keys) <= ANY_ORDER_TRACK_ALL else sorted(set(tracked) | (required & set(keys)))
        if len(watched) > ANY_ORDER_MAX_TRACKED or (minp and len(watched) < len(keys)):
            return NOT_FINITE
        if any(k not in keys for k in required):
            return None  # a required key with no allowed value
        bit = {k: 1 << j for j, k in enumerate(watched)}
        S = 1 << len(watched)
        C = maxp if maxp is not None else max(minp, 1)
        XB = full + 1  # which "some key matches" schemas were met (see some_key_schema)
        if S * (C + 1) * XB > MAX_GRAPH_STATES:
            return NOT_FINITE
        moves_of = moves_of or {k: [(0, e)] for k, e in members}

        def sid(seen: int, c: int, x: int = 0) -> int:
            return (seen * (C + 1) + c) * XB + x

        # one COMMA edge per state into a "after the comma" twin (S * (C + 1) onward), then the
        # members: the rule automaton stays deterministic on its first symbol, small to build.  The
        # members that change no tracked bit are one rule of their own, one edge per state: a
        # 40-property object with 6 tracked keys is 128 states of 7 edges, not of 41
        # adds: (marks, undefined members) pairs, one per class of the key space (see object_body)
        free: dict[int, list] = {}  # untracked members by the "some key" marks they set
        for k, _ in members:
            if k not in bit:
                for mk, e in moves_of[k]:
                    free.setdefault(mk, []).append(e)
        for x, e in adds:
            free.setdefault(x, []).append(e)
        moves = [(bit[k], mk, e) for k, _ in members if k in bit for mk, e in moves_of[k]]
        for x, es in free.items():
            if len(es) > 1 and S > 1:
                moves.append((0, x, self.rule("mems", alt(*es))))
            else:
                moves += [(0, x, e) for e in es]
        twin = S * (C + 1) * XB
        edges = []
        for seen in range(S):
            for c in range(C + 1):
                if maxp is not None and c >= maxp:
                    continue
                nc = min(c + 1, C)
                for x in range(XB):
                    src = sid(seen, c, x)
                    if c > 0:
                        edges.append((src, self.COMMA, twin + src))
                        src = twin + src
                    for b, mk, e in moves:
                        if b and seen & b:
                            continue
                        edges.append((src, e, sid(seen | b, nc, x | mk)))
        req_bits = sum(bit[k] for k in required if k in bit)
        finals = tuple(sid(seen, c, full) for seen in range(S) for c in range(C + 1)
                       if c >= minp and seen & req_bits == req_bits
                       and all(eval_presence(pr, {k for k in watched if seen & bit[k]}) for pr in presence))
        if not finals:
            return None
        return Graph(2 * S * (C + 1) * XB, tuple(edges), sid(0, 0), finals)

    def checked_object(self, members: list, add_member, required: set, presence: list, minp: int,
                       maxp: int | None) -> Expr | None:
        """Members in any order when there are too many keys to track in the automaton: any member
        may follow any other, and the distinct keys are checked when the object closes (required
        keys, presence conditions, property counts: ``structgen.engine.checks``), so the
        token writing the ``}`` of an object that misses one is refused."""
        if not required <= {k for k, _ in members}:
            return None  # a required key with no allowed value
        moves = [e for _, e in members] + ([add_member] if add_member is not None else [])
        if not moves:
            return self.rule("obj", seq(self.LBRACE, self.RBRACE)) if minp == 0 and not required else None
        # states: 0 before the first member, 1 after a member, 2 after a comma
        edges = [(0, e, 1) for e in moves] + [(1, self.COMMA, 2)] + [(2, e, 1) for e in moves]
        sym = self.rule("cobj", seq(self.LBRACE, Graph(3, tuple(edges), 0, (0, 1)), self.RBRACE))
        self.ir.checks.append(KeySetCheck(sym.name, frozenset(required), tuple(presence), minp, maxp))
        return sym

    def additional_node(self, n: SchemaNode) -> SchemaNode:
        s = n.schema
        if "additionalProperties" in s:
            return n.child(s["additionalProperties"], f"{n.ptr}/additionalProperties")
        return n.child(True, f"{n.ptr}/additionalProperties")  # (strict closes the conjunction: closing_node)

    def additional_members(self, nodes: list[SchemaNode], defined: list[str], names_nodes: list[SchemaNode],
                           extra_values: list[SchemaNode] = ()) -> Expr | None:
        """Members whose key is not defined: one alternative per region of the key space (their values
        also meeting ``extra_values``)."""
        patterns: list[tuple[SchemaNode, str, Any]] = []
        for n in nodes:
            for pat, ps in (n.schema.get("patternProperties") or {}).items():
                python_pattern(pat, f"{n.ptr}/patternProperties/{escape_pointer(pat)}")
                patterns.append((n, pat, ps))
        base = string_dfa()
        if defined:
            base = difference_literals(base, string_forms(defined))
        if names_nodes:
            try:
                nd = self.key_dfa(names_nodes)
            except UnsupportedFeature as e:
                self.unsupported(nodes[0], "propertyNames", str(e).split(": ", 1)[-1])
                nd = string_dfa()  # any key here; the check at the object's end enforces the names
            if nd is None:
                return None
            base = intersect(base, nd)
        try:
            for n, pat, _ in patterns:
                self.pattern_dfa(pat, n)
        except UnsupportedFeature as e:
            self.unsupported(nodes[0], "patternProperties", str(e).split(": ", 1)[-1])
            return self.loose_members(nodes, base, patterns, extra_values)
        regions = self.key_regions(base, patterns)
        if regions is None:
            self.unsupported(nodes[0], "patternProperties",
                             f"its {len(patterns)} patternProperties split the key space into over "
                             f"{MAX_KEY_REGIONS} regions")
            return self.loose_members(nodes, base, patterns, extra_values)
        alts = []
        for mask, d in regions:
            vnodes = [n.child(ps, f"{n.ptr}/patternProperties/{escape_pointer(pat)}")
                      for j, (n, pat, ps) in enumerate(patterns) if mask >> j & 1]
            for n in nodes:
                if not any(pn is n and mask >> j & 1 for j, (pn, _, _) in enumerate(patterns)):
                    vnodes.append(self.additional_node(n))
            e = self.value(vnodes + list(extra_values))
            if e is None:
                continue
            key = self.term(other_key_term(defined, mask, patterns, names_nodes), d, "KEY")
            alts.append(seq(key, self.COLON, e))
        return alt(*alts) if alts else None

    def key_regions(self, base: DFA, patterns: list) -> list[tuple[int, DFA]] | None:
        """The key space ``base`` split by which ``patterns`` a key matches: ``(bits, keys)`` for each
        region with keys, by bits.  Pattern by pattern, each region splits in two and empty halves are
        dropped, so the work follows the regions there are (patterns that exclude each other, as most
        do, give one region each) rather than the 2**n combinations; None past MAX_KEY_REGIONS."""
        regions = [(0, base)]
        for j, (n, pat, _) in enumerate(patterns):
            pd = self.pattern_dfa(pat, n)
            split = []
            for mask, d in regions:
                for m, half in ((mask | 1 << j, intersect(d, pd)), (mask, difference(d, pd))):
                    if not half.is_empty():
                        split.append((m, half))
            if len(split) > MAX_KEY_REGIONS:
                return None
            regions = split
        return sorted(regions, key=lambda r: r[0])

    def loose_members(self, nodes: list[SchemaNode], keys: DFA, patterns: list,
                      extra_values: list[SchemaNode] = ()) -> Expr | None:
        """Undefined members when their patterns cannot be compiled exactly (too many to split the
        key space by, or regex features beyond a finite automaton): one member per pattern -- its
        keys (any key where the pattern has no automaton) with its value -- and one for the keys
        no pattern matches, with the additional schema.  A key matching several patterns gets
        any one of their values: an over-approximation the caller has left to a check at the
        value boundary (``unsupported``), which validates the whole object when it closes."""
        alts = []
        covered: DFA | None = None  # the keys some pattern matches (None: unknown)
        exact = True
        for n, pat, ps in patterns:
            try:
                pd = self.pattern_dfa(pat, n)
            except UnsupportedFeature:
                pd, exact = None, False
            kd = keys if pd is None else intersect(keys, pd)
            if pd is not None and exact:
                covered = pd if covered is None else union(covered, pd)
            v = self.value([n.child(ps, f"{n.ptr}/patternProperties/{escape_pointer(pat)}"), *extra_values])
            if v is None or kd.is_empty():
                continue
            alts.append(seq(self.term(("loosekey", id(n.schema), pat, id(keys)), kd, "KEY"), self.COLON, v))
        v = self.value([self.additional_node(n) for n in nodes] + list(extra_values))
        if v is not None:
            kd = keys
            if exact and covered is not None:
                try:
                    kd = difference(keys, covered)
                except GrammarError:
                    kd = keys
            if not kd.is_empty():
                alts.append(seq(self.term(("loosekey", "additional", id(keys)), kd, "KEY"), self.COLON, v))
        return alt(*alts) if alts else None
