"""Finite value sets: an ``enum`` or ``const`` anywhere in a conjunction makes the value set
finite, and every candidate is validated against the other keywords, so they combine exactly.
"""
from __future__ import annotations

import json
import math

from ...errors import SchemaError
from ...automata.fsa import literal_set_dfa
from ..ir import Expr, alt, seq
from ..json_strings import literal_strings
from ..presence import eval_presence
from .json_values import NOT_FINITE, dedupe, json_filter, number_spellings, without_enum
from .limits import ENUM_STRINGS_AS_ONE_TERMINAL
from .refs import SchemaNode


class FiniteValuesMixin:
    """The finite part of :class:`~structgen.grammar.json_schema.compiler.SchemaCompiler`."""

    def finite_values(self, nodes: list[SchemaNode]):
        """An enum or const anywhere in the conjunction makes the value set finite: every
        other keyword (``not``, ``if``/``then``/``else``, ``uniqueItems``, ``contains``,
        overlapping ``oneOf``...) is then enforced exactly by validating each candidate
        with jsonschema, so nothing is refused.  Returns ``NOT_FINITE`` otherwise."""
        keep = self.finite_candidates(nodes)
        if keep is NOT_FINITE:
            return NOT_FINITE
        if not keep:
            return None
        strs = [v for v in keep if isinstance(v, str)]
        if len(strs) > ENUM_STRINGS_AS_ONE_TERMINAL:
            # one literal-set terminal: a lexer over thousands of one-string terminals would not fit
            rest = [self.const_expr(v) for v in keep if not isinstance(v, str)]
            return alt(self.term(("strs", tuple(strs)), literal_strings(strs), "LIT"), *rest)
        return alt(*[self.const_expr(v) for v in keep])

    def finite_candidates(self, nodes: list[SchemaNode]):
        """The values an enum/const conjunction admits (validated against every keyword),
        or ``NOT_FINITE`` when no enum or const bounds it."""
        candidates = None
        for n in nodes:
            s = n.schema
            if not isinstance(s, dict):
                continue
            if "const" in s:
                vals = [s["const"]]
            elif "enum" in s:
                vals = s["enum"]
                if not isinstance(vals, list):
                    raise SchemaError("enum must be an array", pointer=f"{n.ptr}/enum")
            else:
                continue
            candidates = list(vals) if candidates is None else json_filter(candidates, vals)
        if candidates is None:
            return NOT_FINITE
        presence = [p for n in nodes if isinstance(n.schema, dict) for p in n.schema.get("__presence__", [])]
        # every candidate already equals a member of each enum and each const (JSON equality, as
        # jsonschema's): validating them against those again would cost len(enum) comparisons each
        rest = [without_enum(n) for n in nodes]
        keep = [v for v in candidates
                if self.valid_under(v, rest)
                and all(eval_presence(p, set(v) if isinstance(v, dict) else None) for p in presence)]
        return dedupe(keep)

    def const_expr(self, v) -> Expr:
        if isinstance(v, dict):
            if not v:
                return seq(self.LBRACE, self.RBRACE)
            members = [(k, seq(self.term(("key", k), literal_strings([k]), "KEY"), self.COLON, self.const_expr(x)))
                       for k, x in v.items()]
            if self.opts.property_order == "any" and len(members) > 1:
                # the same object with its members in any order (JSON objects are unordered); past
                # the any-order automaton's size the value's own order is kept
                e = self.any_order_members(members, [], set(v), [], [], len(v), len(v))
                if e is not NOT_FINITE and e is not None:
                    return self.rule("obj", seq(self.LBRACE, e, self.RBRACE))
            parts: list[Expr] = [self.LBRACE]
            for i, (_, e) in enumerate(members):
                if i:
                    parts.append(self.COMMA)
                parts.append(e)
            parts.append(self.RBRACE)
            return seq(*parts)
        if isinstance(v, list):
            if not v:
                return seq(self.LBRACK, self.RBRACK)
            parts = [self.LBRACK]
            for i, x in enumerate(v):
                if i:
                    parts.append(self.COMMA)
                parts.append(self.const_expr(x))
            parts.append(self.RBRACK)
            return seq(*parts)
        if isinstance(v, str):
            return self.term(("str", v), literal_strings([v]), "LIT")
        if isinstance(v, bool) or v is None or (isinstance(v, float) and not math.isfinite(v)):
            return self.term(("num", (json.dumps(v),)), literal_set_dfa([json.dumps(v).encode()]), "LIT")
        # a number: the spelling json.dumps gives (1e-09) and every positional one (0.000000001,
        # 0.0000000010, ...), as an instance may spell the same value either way
        from ...automata.fsa import union
        from ..regex import compile_regex

        d = union(literal_set_dfa([json.dumps(v).encode()]), compile_regex(number_spellings(v)))
        return self.term(("num", number_spellings(v), json.dumps(v)), d, "LIT")
