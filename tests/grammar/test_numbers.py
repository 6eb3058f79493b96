"""Number automata against exact arithmetic (``structgen.grammar.numbers``): sound for every
spelling (accepted => the value satisfies the bounds and multipleOf) and complete for positional
spellings (an exponent spelling, or an integer written with a fraction, may be refused:
generation never needs them)."""
from __future__ import annotations

import random
from fractions import Fraction

import pytest

from structgen.grammar.numbers import number_dfa


def _spellings(rng: random.Random, n: int):
    out = set()
    for _ in range(n):
        whole = rng.randint(-300, 300)
        kind = rng.random()
        if kind < 0.4:
            out.add(str(whole))
        elif kind < 0.8:
            out.add(f"{whole}.{rng.randint(0, 99):0{rng.randint(1, 3)}d}")
        else:
            out.add(f"{whole}e{rng.randint(-2, 2)}")
    return sorted(out)


def _value(s: str) -> Fraction:
    if "e" in s:
        m, e = s.split("e")
        return Fraction(m) * Fraction(10) ** int(e)
    return Fraction(s)


CASES = [
    dict(integer=True, minimum=-17, maximum=250),
    dict(integer=False, exclusive_minimum=-3.5, maximum=12.25),
    dict(integer=False, minimum=0, multiple_of=0.25),
    dict(integer=True, exclusive_maximum=100, multiple_of=7),
    dict(integer=False, minimum=-1, exclusive_maximum=1),
]


@pytest.mark.parametrize("kw", CASES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_number_dfa_matches_exact_arithmetic(kw):
    d = number_dfa(**kw)
    lo = kw.get("minimum")
    hi = kw.get("maximum")
    xlo, xhi, mult = kw.get("exclusive_minimum"), kw.get("exclusive_maximum"), kw.get("multiple_of")
    for s in _spellings(random.Random(0), 1500):
        v = _value(s)
        ok = ((lo is None or v >= Fraction(str(lo))) and (hi is None or v <= Fraction(str(hi)))
              and (xlo is None or v > Fraction(str(xlo))) and (xhi is None or v < Fraction(str(xhi)))
              and (mult is None or v % Fraction(str(mult)) == 0)
              and (not kw["integer"] or v.denominator == 1))
        got = d.matches(s.encode())
        positional = "e" not in s and not (kw["integer"] and "." in s)  # integers: plain digits
        assert got == ok if positional else (not got or ok), (kw, s)


def test_an_empty_range_accepts_nothing():
    assert number_dfa(integer=True, minimum=5, maximum=4).is_empty()
    assert number_dfa(integer=True, exclusive_minimum=1, exclusive_maximum=2).is_empty()
