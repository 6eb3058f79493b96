r"""ECMA-262's Unicode property escapes (\p{...}, \P{...}) in regexes: the tables, the rewrite into
Python's ``re`` syntax, and the automata built from them (JSON Schema patterns may use them)."""
from __future__ import annotations

import json
import random
import re
import unicodedata

import pytest

from structgen.errors import GrammarError
from structgen.grammar.regex import compile_regex, python_regex
from structgen.grammar.unicode_props import expand_property_escapes, property_ranges


def has_regex_module() -> bool:
    try:
        import regex  # noqa: F401
    except ImportError:
        return False
    return True


def in_ranges(ranges, cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


def test_general_categories_long_short_and_alias_names():
    assert property_ranges("Letter") == property_ranges("L") == property_ranges("gc=L") \
        == property_ranges("General_Category=Letter")
    assert property_ranges("digit") == property_ranges("Nd") == property_ranges("Decimal_Number")
    assert property_ranges("punct") == property_ranges("P")
    letters = property_ranges("L")
    for ch in "aZπЖ字ª":
        assert in_ranges(letters, ord(ch)), ch
    for ch in "1৪ -_😀":
        assert not in_ranges(letters, ord(ch)), ch
    assert in_ranges(property_ranges("Nd"), ord("৪"))  # BENGALI DIGIT FOUR
    assert in_ranges(property_ranges("Lu"), ord("Ä")) and not in_ranges(property_ranges("Lu"), ord("ä"))


@pytest.mark.parametrize("name", ["L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "N", "Nd", "No", "P", "Po",
                                  "S", "Sm", "Z", "Zs", "C", "Cc", "Cn"])
def test_general_category_agrees_with_unicodedata(name):
    ranges = property_ranges(name)
    rng = random.Random(name)
    for cp in [rng.randrange(0x110000) for _ in range(3000)] + list(range(0x180)):
        assert in_ranges(ranges, cp) == unicodedata.category(chr(cp)).startswith(name), hex(cp)


def test_computed_binary_properties():
    assert property_ranges("Any") == ((0, 0x10FFFF),)
    assert property_ranges("ASCII") == ((0, 0x7F),)
    assert in_ranges(property_ranges("Assigned"), ord("a")) and not in_ranges(property_ranges("Assigned"), 0x0378)
    assert property_ranges("AHex") == property_ranges("ASCII_Hex_Digit")


@pytest.mark.skipif(not has_regex_module(), reason="scripts come from the regex package")
def test_scripts_and_binary_properties_from_the_regex_package():
    greek = property_ranges("Script=Greek")
    assert greek == property_ranges("sc=Grek")
    assert in_ranges(greek, ord("α")) and not in_ranges(greek, ord("a"))
    assert in_ranges(property_ranges("scx=Grek"), ord("α"))
    assert in_ranges(property_ranges("White_Space"), 0x3000)
    d = compile_regex(r"^\p{Script=Greek}+$", search=True)
    assert d.matches("αβγ".encode()) and not d.matches("abc".encode())


@pytest.mark.parametrize("bad", [r"\p{Letters}", r"\p{letter}", r"x\p{gc=Foo}", r"\p{Foo=Bar}", r"\p{L", r"[\p{Nope}]"])
def test_unknown_properties_are_grammar_errors(bad):
    with pytest.raises(GrammarError) as e:
        compile_regex(bad)
    assert e.value.position == bad.index("\\p")


def test_rewrite_leaves_other_text_alone():
    for p in [r"abc", r"\\p{L}", r"[\\p]{2}", r"\d+\.\w"]:
        assert expand_property_escapes(p) is p
    assert re.fullmatch(python_regex(r"\\p{L}"), r"\p{L}")  # an escaped backslash, then text


@pytest.mark.parametrize("pattern, good, bad", [
    (r"^\p{Letter}+$", ["Hello", "π", "école"], ["123", "a1", ""]),
    (r"^\P{L}+$", ["123", "-_ ", "😀"], ["a", "1a"]),
    (r"^[\p{Lu}\d]+$", ["AB12", "ÄÖ"], ["a", "A b"]),
    (r"^[^\P{L}]+$", ["abπ"], ["a1"]),  # a negated class of a negated property
    (r"^[]\p{Nd}]+$", ["]৪২", "1]"], ["a"]),  # "]" first in a class is a literal (Python)
    (r"^\p{Lu}\p{Ll}*$", ["Hello", "Ωmega"], ["hello", "HEllo"]),
    (r"\p{Letter}cole", ["l'école", "l'ecole"], ["L'ÉCOLE", "cole"]),  # unanchored: a search
    (r"^\p{digit}+$", ["42", "৪২"], ["-%#"]),
    (r"(?i)^\p{Lu}+$", ["ABC", "abc"], ["123"]),
])
def test_automaton_and_python_rewrite_agree(pattern, good, bad):
    d = compile_regex(pattern, search=True, json_string=True)
    rx = re.compile(python_regex(pattern))
    for s, ok in [(s, True) for s in good] + [(s, False) for s in bad]:
        assert (rx.search(s) is not None) == ok, (pattern, s)
        body = json.dumps(s, ensure_ascii=False)[1:-1]
        assert d.matches(body.encode()) == ok, (pattern, s)
        if all(ord(c) <= 0xFFFF for c in s):  # (the JSON-string encoder writes astral characters raw)
            escaped = json.dumps(s)[1:-1]  # \uXXXX escapes of the JSON string
            assert d.matches(escaped.encode()) == ok, (pattern, s)


def test_property_class_of_no_character():
    d = compile_regex(r"a\P{Any}|b")
    assert d.matches(b"b") and not d.matches(b"a")
