"""Exact numeric constraints as byte DFAs over JSON number syntax.

Bounds (``minimum``/``maximum``, exclusive or not, decimals and negatives)
are compiled digit by digit: a DFA for "unsigned decimal <= B" and one for
">= A" are intersected, and the negative half is the mirror image under a
leading '-'.  ``multipleOf`` any finite decimal M/10^e is a remainder
automaton over x * 10^e mod M (positional spellings, trailing zeros allowed).  Bounded
numbers are written without exponents (a bound on ``1e400``-style text is not
worth the states), but where a one-sided bound at or beyond zero holds whatever
the exponent (``minimum: 0``: ``1e-06``); unbounded ones accept the full JSON grammar.
"""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np

from ..errors import UnsupportedFeature
from ..automata.fsa import DFA, NFA, determinize, intersect, union
from .regex import compile_regex

DIGITS = b"0123456789"
JSON_NUMBER = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?"
JSON_INTEGER = r"-?(0|[1-9][0-9]*)"
MAX_MODULUS = 100_000


def _digits_of(x: Fraction) -> tuple[str, str] | None:
    """Integer and fraction digit strings of a non-negative terminating decimal (None if not terminating)."""
    d = Decimal(x.numerator) / Decimal(x.denominator)
    if Fraction(d) != x:
        return None
    s = format(d, "f")
    if "." in s:
        i, f = s.split(".")
        f = f.rstrip("0")
    else:
        i, f = s, ""
    return i.lstrip("0") or "0", f


class _Builder:
    """Tiny explicit-DFA builder (states added on demand)."""

    def __init__(self) -> None:
        self.edges: list[dict[int, int]] = []
        self.accept: list[bool] = []

    def state(self, accept: bool = False) -> int:
        self.edges.append({})
        self.accept.append(accept)
        return len(self.edges) - 1

    def dfa(self, start: int = 0) -> DFA:
        nfa = NFA()
        base = [nfa.new_state() for _ in self.edges]
        nfa.add_eps(nfa.start, base[start])
        for s, row in enumerate(self.edges):
            for byte, t in row.items():
                nfa.add_range(base[s], byte, byte, base[t])
            if self.accept[s]:
                nfa.add_eps(base[s], nfa.final)
        return determinize(nfa)


def _unsigned_cmp_dfa(bound: Fraction, upper: bool, inclusive: bool, allow_fraction: bool) -> DFA:
    r"""Unsigned decimals ``(0|[1-9]\d*)(\.\d+)?`` that are <= (upper) or >= bound."""
    digits = _digits_of(bound)
    if digits is None:
        raise UnsupportedFeature(f"numeric bound {float(bound)} is not a terminating decimal")
    bi, bf = digits
    n = len(bi)
    m = len(bf)
    B = _Builder()
    start = B.state()
    states: dict[tuple, int] = {}

    def st(key: tuple) -> int:
        if key not in states:
            states[key] = B.state()
        return states[key]

    def cmp(a: str, b: str, pr: str) -> str:
        return pr if pr != "eq" else ("eq" if a == b else ("lt" if a < b else "gt"))

    def ok(rel: str) -> bool:
        return inclusive if rel == "eq" else (rel == "lt") == upper

    B.edges[start][ord("0")] = st(("zero",))
    for d in "123456789":
        B.edges[start][ord(d)] = st(("int", 1, cmp(d, bi[0], "eq")))
    work = list(states)
    seen: set = set()
    dots: set = set()
    while work:
        key = work.pop()
        if key in seen:
            continue
        seen.add(key)
        s = states[key]
        if key[0] == "int":
            _, k, pr = key
            for d in "0123456789":
                nk = ("int", k + 1, cmp(d, bi[k], pr)) if k < n else ("int", n + 1, "gt")
                B.edges[s][ord(d)] = st(nk)
                work.append(nk)
            rel = "lt" if k < n else ("gt" if k > n else pr)
        else:
            rel = "eq" if bi == "0" else "lt"
        B.accept[s] = ok("lt" if (rel == "eq" and bf) else rel)
        if allow_fraction:
            B.edges[s][ord(".")] = st(("dot", rel))
            dots.add(rel)
    for rel in ("lt", "gt"):
        if rel in dots or (rel == "lt" and "eq" in dots) or (rel == "gt" and "eq" in dots):
            free = st(("free", rel))
            B.accept[free] = ok(rel)
            for d in "0123456789":
                B.edges[free][ord(d)] = free
            if rel in dots:
                for d in "0123456789":
                    B.edges[states[("dot", rel)]][ord(d)] = free
    if "eq" in dots:
        for i in range(m + 1):
            src_state = states[("dot", "eq")] if i == 0 else st(("feq", i))
            if i > 0:
                B.accept[src_state] = ok("eq" if i >= m else "lt")
            ref = int(bf[i]) if i < m else 0
            for d in range(10):
                if d == ref:
                    tgt = st(("feq", min(i + 1, m) if m else 1))
                else:
                    tgt = states[("free", "lt" if d < ref else "gt")]
                B.edges[src_state][ord(str(d))] = tgt
        if m == 0:
            s1 = st(("feq", 1))
            B.accept[s1] = ok("eq")
            for d in range(10):
                B.edges[s1][ord(str(d))] = s1 if d == 0 else states[("free", "gt")]
    return B.dfa()


def _signed_range(lo: Fraction | None, lo_excl: bool, hi: Fraction | None, hi_excl: bool,
                  allow_fraction: bool) -> DFA:
    parts: list[DFA] = []
    zero = Fraction(0)
    # non-negative half: values in [max(lo, 0), hi]
    if hi is None or hi > zero or (hi == zero and not hi_excl):
        d = _unsigned_all(allow_fraction)
        if lo is not None and lo > zero:
            d = intersect(d, _unsigned_cmp_dfa(lo, upper=False, inclusive=not lo_excl, allow_fraction=allow_fraction))
        if hi is not None:
            d = intersect(d, _unsigned_cmp_dfa(hi, upper=True, inclusive=not hi_excl, allow_fraction=allow_fraction))
        if lo is not None and lo == zero and lo_excl:
            d = intersect(d, _unsigned_cmp_dfa(zero, upper=False, inclusive=False, allow_fraction=allow_fraction))
        parts.append(d)
    # negative half: -u with u in (0, -lo] and u >= -hi
    if lo is None or lo < zero:
        u = _unsigned_all(allow_fraction)
        u = intersect(u, _unsigned_cmp_dfa(zero, upper=False, inclusive=False, allow_fraction=allow_fraction))
        if lo is not None:
            u = intersect(u, _unsigned_cmp_dfa(-lo, upper=True, inclusive=not lo_excl, allow_fraction=allow_fraction))
        if hi is not None and hi < zero:
            u = intersect(u, _unsigned_cmp_dfa(-hi, upper=False, inclusive=not hi_excl, allow_fraction=allow_fraction))
        nfa = NFA()
        mid = nfa.new_state()
        nfa.add_bytes(nfa.start, b"-", mid)
        nfa.add_dfa(u, mid, nfa.final)
        parts.append(determinize(nfa))
    if not parts:
        from ..automata.fsa import empty_dfa

        return empty_dfa()
    out = parts[0]
    for p in parts[1:]:
        out = union(out, p)
    return out


def _unsigned_all(allow_fraction: bool) -> DFA:
    return compile_regex(r"(0|[1-9][0-9]*)(\.[0-9]+)?" if allow_fraction else r"(0|[1-9][0-9]*)")


def number_dfa(*, integer: bool, minimum=None, maximum=None, exclusive_minimum=None, exclusive_maximum=None,
               multiple_of=None, allow_integer_fraction: bool = True) -> DFA:
    """DFA for a JSON number (or integer) satisfying JSON Schema's numeric keywords."""
    lo = hi = None
    lo_excl = hi_excl = False
    for v, excl in ((minimum, False), (exclusive_minimum, True)):
        if v is not None:
            f = Fraction(str(v)) if isinstance(v, float) else Fraction(v)
            if lo is None or f > lo or (f == lo and excl):
                lo, lo_excl = f, excl
    for v, excl in ((maximum, False), (exclusive_maximum, True)):
        if v is not None:
            f = Fraction(str(v)) if isinstance(v, float) else Fraction(v)
            if hi is None or f < hi or (f == hi and excl):
                hi, hi_excl = f, excl
    if integer:
        # normalise to inclusive integer bounds
        import math

        if lo is not None:
            lo = Fraction(math.floor(lo) + 1) if (lo_excl and lo.denominator == 1) else Fraction(math.ceil(lo))
            lo_excl = False
        if hi is not None:
            hi = Fraction(math.ceil(hi) - 1) if (hi_excl and hi.denominator == 1) else Fraction(math.floor(hi))
            hi_excl = False
    bounded = lo is not None or hi is not None
    if not bounded and multiple_of is None:
        return compile_regex(_integer_regex(allow_integer_fraction) if integer else JSON_NUMBER)
    if bounded:
        d = _signed_range(lo, lo_excl, hi, hi_excl, allow_fraction=not integer)
        if integer and allow_integer_fraction:
            # 5.0 is an integer too: allow a zero fraction after in-range integers
            d = _with_zero_fraction(d)
        elif not integer:
            for rx in _exponent_half_lines(lo, lo_excl, hi, hi_excl):
                d = union(d, compile_regex(rx))
    else:
        d = compile_regex(_integer_regex(allow_integer_fraction) if integer else r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")
    if multiple_of is not None:
        d = intersect(d, _multiple_dfa(multiple_of, integer, allow_integer_fraction))
    return d


_UNSIGNED_EXP = r"(0|[1-9][0-9]*)(\.[0-9]+)?[eE][+-]?[0-9]+"
_NONZERO_EXP = r"([1-9][0-9]*(\.[0-9]+)?|0\.[0-9]*[1-9][0-9]*)[eE][+-]?[0-9]+"


def _exponent_half_lines(lo, lo_excl: bool, hi, hi_excl: bool) -> list[str]:
    """Exponent spellings a one-sided bound at or beyond zero admits whatever the exponent:
    ``minimum: 0`` holds for every non-negative number, so ``1e-06`` is as valid as
    ``0.000001`` (data written by other tools uses it).  Other bounded numbers stay positional."""
    out = []
    if hi is None and lo is not None and (lo < 0 or (lo == 0 and not lo_excl)):
        out.append(_UNSIGNED_EXP)  # every non-negative number is >= lo
    elif hi is None and lo == 0:
        out.append(_NONZERO_EXP)  # exclusiveMinimum 0: a mantissa with a non-zero digit
    if lo is None and hi is not None and (hi > 0 or (hi == 0 and not hi_excl)):
        out.append("-" + _UNSIGNED_EXP)
    elif lo is None and hi == 0:
        out.append("-" + _NONZERO_EXP)
    return out


def _integer_regex(allow_fraction: bool) -> str:
    """A JSON integer, with json.dumps' ``.0`` after it where the draft counts 5.0 as an integer
    (longer zero runs would let a model loop)."""
    return JSON_INTEGER + (r"(\.0)?" if allow_fraction else "")


def _with_zero_fraction(d: DFA) -> DFA:
    return union(d, intersect(_concat_zero_fraction(d), compile_regex(r"-?(0|[1-9][0-9]*)\.0")))


def _concat_zero_fraction(d: DFA) -> DFA:
    nfa = NFA()
    mid = nfa.new_state()
    nfa.add_dfa(d, nfa.start, mid)
    dot = nfa.new_state()
    nfa.add_bytes(mid, b".", dot)
    z = nfa.new_state()
    nfa.add_bytes(dot, b"0", z)  # json.dumps writes 5.0; longer zero runs would let a model loop
    nfa.add_eps(z, nfa.final)
    return determinize(nfa)


def _multiple_dfa(multiple_of, integer: bool, allow_integer_fraction: bool = True) -> DFA:
    m = Fraction(str(multiple_of)) if isinstance(multiple_of, float) else Fraction(multiple_of)
    if m <= 0:
        raise UnsupportedFeature(f"multipleOf must be positive, got {multiple_of}")
    den = m.denominator
    for f in (2, 5):
        while den % f == 0:
            den //= f
    if den != 1:
        raise UnsupportedFeature(f"multipleOf {multiple_of} (only finite decimals are enforced exactly)")
    e = 0  # m = M / 10^e
    while (m * 10 ** e).denominator != 1:
        e += 1
    d = _decimal_mod_dfa(int(m * 10 ** e), e)
    return intersect(d, compile_regex(_integer_regex(allow_integer_fraction))) if integer else d


def _decimal_mod_dfa(M: int, e: int) -> DFA:
    """Positional decimals x with x * 10^e a multiple of M (so x a multiple of M / 10^e).

    Reads digits into a remainder of x * 10^f mod M (f fraction digits so far, at
    most e; later fraction digits must be zeros) and accepts when the missing
    10^(e - f) makes the remainder zero."""
    if M > MAX_MODULUS:
        raise UnsupportedFeature(f"multipleOf with {M} in its numerator is too large to enforce (limit {MAX_MODULUS})")
    B = _Builder()

    def ok(r: int, f: int) -> bool:
        return r * pow(10, e - f, M) % M == 0

    ints = [B.state(accept=ok(r, 0)) for r in range(M)]
    fracs = [[B.state(accept=ok(r, f)) for r in range(M)] for f in range(1, e + 1)]
    tails = [B.state(accept=ok(r, e)) for r in range(M)]  # past e fraction digits: zeros only
    start, neg = B.state(), B.state()
    zero = B.state(accept=True)
    dots = [B.state() for _ in range(M)]
    B.edges[start][ord("-")] = neg
    for s in (start, neg):
        B.edges[s][ord("0")] = zero
        for dgt in range(1, 10):
            B.edges[s][ord(str(dgt))] = ints[dgt % M]
    B.edges[zero][ord(".")] = dots[0]
    for r in range(M):
        for dgt in range(10):
            B.edges[ints[r]][ord(str(dgt))] = ints[(r * 10 + dgt) % M]
        B.edges[ints[r]][ord(".")] = dots[r]
        first = fracs[0] if e >= 1 else tails
        for dgt in range(10):
            if e >= 1:
                B.edges[dots[r]][ord(str(dgt))] = first[(r * 10 + dgt) % M]
            elif dgt == 0:
                B.edges[dots[r]][ord("0")] = tails[r]
        for f in range(e - 1):  # fracs[f] has read f + 1 fraction digits
            for dgt in range(10):
                B.edges[fracs[f][r]][ord(str(dgt))] = fracs[f + 1][(r * 10 + dgt) % M]
        if e >= 1:
            B.edges[fracs[e - 1][r]][ord("0")] = tails[r]
        B.edges[tails[r]][ord("0")] = tails[r]
    return B.dfa(start)


__all__ = ["number_dfa", "JSON_NUMBER", "JSON_INTEGER"]
_ = np
