"""Numbers and integers: bounds, ``multipleOf`` and excluded values as one number terminal
(``structgen.grammar.numbers`` builds the automata).
"""
from __future__ import annotations

from ...errors import SchemaError, UnsupportedFeature
from ...automata.fsa import difference, intersect, literal_set_dfa
from ..ir import Expr
from ..grounding import source_numbers
from ..numbers import number_dfa
from ..regex import compile_regex
from .json_values import number_spellings, tighten
from .limits import ANNOTATIONS
from .refs import SchemaNode, integer_fraction

#: Numbers without an exponent: what an excluded value's or a multiple's automaton spells
POSITIONAL_NUMBER = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?"


class NumbersMixin:
    """The numeric part of :class:`~structgen.grammar.json_schema.compiler.SchemaCompiler`."""

    # -- scalars ----------------------------------------------------------------------------
    def number(self, nodes: list[SchemaNode], integer: bool, non_integer: bool = False,
               excluded: tuple = ()) -> Expr | None:
        kw: dict = {}
        mults = []
        mult_nodes = []  # (multipleOf, the node it is from)
        for n in nodes:
            s = n.schema
            for name, arg in (("minimum", "minimum"), ("maximum", "maximum")):
                if name in s:
                    v = s[name]
                    if not isinstance(v, (int, float)) or isinstance(v, bool):
                        raise SchemaError(f"{name} must be a number", pointer=f"{n.ptr}/{name}")
                    excl_key = "exclusiveMinimum" if name == "minimum" else "exclusiveMaximum"
                    if s.get(excl_key) is True:  # draft-04 boolean form
                        arg = "exclusive_" + arg
                    tighten(kw, arg, v)
            for name, arg in (("exclusiveMinimum", "exclusive_minimum"), ("exclusiveMaximum", "exclusive_maximum")):
                v = s.get(name)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    tighten(kw, arg, v)
            if "multipleOf" in s:
                m = s["multipleOf"]
                if not isinstance(m, (int, float)) or isinstance(m, bool) or m <= 0:
                    raise SchemaError("multipleOf must be a positive number", pointer=f"{n.ptr}/multipleOf")
                mults.append(m)
                mult_nodes.append((m, n))
        # 5.0 is an integer unless a schema that asks for integers is read as draft-04
        frac = all(integer_fraction(n) for n in nodes if isinstance(n.schema, dict) and _says_integer(n.schema))
        frac = frac and not self.opts.plain_integers  # generation writes 5, never 5.0
        try:
            d = number_dfa(integer=integer, multiple_of=mults[0] if mults else None, allow_integer_fraction=frac, **kw)
            for m in mults[1:]:
                d = intersect(d, number_dfa(integer=integer, multiple_of=m, allow_integer_fraction=frac))
        except UnsupportedFeature:
            # a multipleOf no automaton of this size holds (a numerator past numbers.MAX_MODULUS, a
            # divisor that is no finite decimal): the others and the bounds are kept, and the number
            # without it is an over-approximation that the value's check decides (see unsupported)
            d = number_dfa(integer=integer, allow_integer_fraction=frac, **kw)
            for m, n in mult_nodes:
                try:
                    d = intersect(d, number_dfa(integer=integer, multiple_of=m, allow_integer_fraction=frac))
                except UnsupportedFeature as e:
                    self.unsupported(n, "multipleOf", str(e).split(": ", 1)[-1])
        if non_integer:  # "not": {"type": "integer"}: numbers with a non-zero fraction (no exponent forms)
            d = intersect(d, compile_regex(r"-?(0|[1-9][0-9]*)\.[0-9]*[1-9][0-9]*"))
        not_mults = [(n.schema["not"]["multipleOf"], n) for n in nodes
                     if isinstance(n.schema.get("not"), dict) and "multipleOf" in n.schema["not"]
                     and {k for k in n.schema["not"] if k not in ANNOTATIONS} == {"multipleOf"}]
        for m, n in not_mults:  # "not": {"multipleOf": m}: positional spellings, less the multiples'
            if not isinstance(m, (int, float)) or isinstance(m, bool) or m <= 0:
                raise SchemaError("multipleOf must be a positive number", pointer=f"{n.ptr}/not/multipleOf")
            try:
                multiples = number_dfa(integer=integer, multiple_of=m, allow_integer_fraction=frac)
            except UnsupportedFeature as e:  # the non-multiples stay in: checked as the value completes
                self.unsupported(n, "not", str(e).split(": ", 1)[-1])
                continue
            d = difference(intersect(d, compile_regex(POSITIONAL_NUMBER)), multiples)
        ex = tuple(v for v in excluded if isinstance(v, (int, float)) and not isinstance(v, bool))
        if ex:  # "not": {"const"/"enum"}: positional spellings only, so each value's spellings form a regular set
            d = intersect(d, compile_regex(POSITIONAL_NUMBER))
            d = difference(d, compile_regex("|".join(number_spellings(v) for v in ex)))
        if d.is_empty():
            return None
        grounded = False
        if self.opts.ground_numbers and self.grounds(nodes):
            spans = intersect(d, literal_set_dfa([x.encode() for x in source_numbers(self.opts.source, integer)]))
            if spans.is_empty():
                self.not_grounded(nodes, "no number of the source meets the number's keywords")
            else:
                d, grounded = spans, True
                self.now_grounded(nodes)
        return self.term(("num", integer, integer and frac, non_integer, tuple(sorted(kw.items())), tuple(mults), ex,
                          tuple(m for m, _ in not_mults), grounded), d,
                         "INT" if integer else "NUM")


def _says_integer(schema: dict) -> bool:
    t = schema.get("type")
    return t == "integer" or isinstance(t, list) and "integer" in t
