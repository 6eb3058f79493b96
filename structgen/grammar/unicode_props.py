r"""Unicode property escapes of ECMA-262 regular expressions (``\p{...}`` and ``\P{...}``, which
JSON Schema's ``pattern`` allows: its regexes are read in unicode mode) as code point ranges, and
the rewrite of a pattern that uses them into Python ``re`` syntax (:func:`expand_property_escapes`),
which is what :mod:`structgen.grammar.regex` parses.

What a property can name (ECMA-262, *Unicode property escapes*; names are case-sensitive):

* a General_Category value, by its long name, short name or alias (``Letter``/``L``,
  ``Uppercase_Letter``/``Lu``, ``Decimal_Number``/``Nd``/``digit``, ``Punctuation``/``P``/``punct``,
  ...), alone or as ``General_Category=...``/``gc=...``: built from Python's :mod:`unicodedata`
  (one pass over the code points, about 0.4 s, the first time one is used; then kept in memory
  and on disk);
* ``Any``, ``ASCII``, ``Assigned`` and ``ASCII_Hex_Digit``, computed here;
* a script, ``Script=Greek``/``sc=Grek``, or ``Script_Extensions=...``/``scx=...``, and the other
  binary properties of ECMA-262 (``Alphabetic``, ``White_Space``, ``Emoji`` ...): Python's
  :mod:`unicodedata` has no such tables, so they come from the ``regex`` package (installed with
  ``transformers``); without it such a pattern raises ``UnsupportedFeature``.

Surrogate code points are in the tables as Unicode has them (``Cs``): a Python string may hold
one, so the rewritten pattern matches Python strings as the property does; the byte automata
never see them (UTF-8 and JSON-string encoders leave surrogates out).
"""
from __future__ import annotations

import functools
import re

from ..errors import GrammarError, UnsupportedFeature

MAX_CP = 0x10FFFF
Ranges = tuple[tuple[int, int], ...]

#: General_Category values: long name and aliases -> short name (PropertyValueAliases.txt, as
#: ECMA-262's table of General_Category values lists them)
_GC_NAMES = {
    "Cased_Letter": "LC", "Close_Punctuation": "Pe", "Connector_Punctuation": "Pc", "Control": "Cc",
    "cntrl": "Cc", "Currency_Symbol": "Sc", "Dash_Punctuation": "Pd", "Decimal_Number": "Nd", "digit": "Nd",
    "Enclosing_Mark": "Me", "Final_Punctuation": "Pf", "Format": "Cf", "Initial_Punctuation": "Pi",
    "Letter": "L", "Letter_Number": "Nl", "Line_Separator": "Zl", "Lowercase_Letter": "Ll", "Mark": "M",
    "Combining_Mark": "M", "Math_Symbol": "Sm", "Modifier_Letter": "Lm", "Modifier_Symbol": "Sk",
    "Nonspacing_Mark": "Mn", "Number": "N", "Open_Punctuation": "Ps", "Other": "C", "Other_Letter": "Lo",
    "Other_Number": "No", "Other_Punctuation": "Po", "Other_Symbol": "So", "Paragraph_Separator": "Zp",
    "Private_Use": "Co", "Punctuation": "P", "punct": "P", "Separator": "Z", "Space_Separator": "Zs",
    "Spacing_Mark": "Mc", "Surrogate": "Cs", "Symbol": "S", "Titlecase_Letter": "Lt", "Unassigned": "Cn",
    "Uppercase_Letter": "Lu",
}
#: the groups of General_Category values (one letter, and LC)
_GC_GROUPS = {
    "L": ("Lu", "Ll", "Lt", "Lm", "Lo"), "LC": ("Lu", "Ll", "Lt"), "M": ("Mn", "Mc", "Me"),
    "N": ("Nd", "Nl", "No"), "P": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"), "S": ("Sm", "Sc", "Sk", "So"),
    "Z": ("Zs", "Zl", "Zp"), "C": ("Cc", "Cf", "Cs", "Co", "Cn"),
}
_GC_LEAVES = frozenset(x for g in ("L", "M", "N", "P", "S", "Z", "C") for x in _GC_GROUPS[g])
_GC_SHORT = _GC_LEAVES | frozenset(_GC_GROUPS)

#: ECMA-262's binary properties: short name -> long name (the long names map to themselves)
_BINARY_SHORT = {
    "AHex": "ASCII_Hex_Digit", "Alpha": "Alphabetic", "Bidi_C": "Bidi_Control", "Bidi_M": "Bidi_Mirrored",
    "CI": "Case_Ignorable", "CWCF": "Changes_When_Casefolded", "CWCM": "Changes_When_Casemapped",
    "CWKCF": "Changes_When_NFKC_Casefolded", "CWL": "Changes_When_Lowercased", "CWT": "Changes_When_Titlecased",
    "CWU": "Changes_When_Uppercased", "DI": "Default_Ignorable_Code_Point", "Dep": "Deprecated",
    "Dia": "Diacritic", "EBase": "Emoji_Modifier_Base", "EComp": "Emoji_Component", "EMod": "Emoji_Modifier",
    "EPres": "Emoji_Presentation", "Ext": "Extender", "ExtPict": "Extended_Pictographic", "Gr_Base": "Grapheme_Base",
    "Gr_Ext": "Grapheme_Extend", "Hex": "Hex_Digit", "IDC": "ID_Continue", "IDS": "ID_Start",
    "IDSB": "IDS_Binary_Operator", "IDST": "IDS_Trinary_Operator", "Ideo": "Ideographic", "Join_C": "Join_Control",
    "LOE": "Logical_Order_Exception", "Lower": "Lowercase", "NChar": "Noncharacter_Code_Point",
    "Pat_Syn": "Pattern_Syntax", "Pat_WS": "Pattern_White_Space", "QMark": "Quotation_Mark",
    "RI": "Regional_Indicator", "SD": "Soft_Dotted", "STerm": "Sentence_Terminal", "Term": "Terminal_Punctuation",
    "UIdeo": "Unified_Ideograph", "Upper": "Uppercase", "VS": "Variation_Selector", "space": "White_Space",
    "XIDC": "XID_Continue", "XIDS": "XID_Start",
}
_BINARY = {**{v: v for v in _BINARY_SHORT.values()}, **_BINARY_SHORT,
           "Any": "Any", "ASCII": "ASCII", "Assigned": "Assigned", "Cased": "Cased", "Dash": "Dash",
           "Emoji": "Emoji", "Math": "Math", "Radical": "Radical"}

_SCRIPT_KEYS = {"Script": "Script", "sc": "Script", "Script_Extensions": "Script_Extensions",
                "scx": "Script_Extensions"}
_GC_KEYS = ("General_Category", "gc")
_NAME = re.compile(r"[A-Za-z0-9_]+\Z")


class UnknownProperty(ValueError):
    """A ``\\p{...}`` that names no property ECMA-262 knows (the message says which)."""


# -- tables ------------------------------------------------------------------------------------------
def all_code_points() -> str:
    """Every code point, in order (surrogates included), as one string (~20 ms)."""
    import numpy as np

    return np.arange(MAX_CP + 1, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


@functools.lru_cache(maxsize=1)
def gc_table() -> dict[str, Ranges]:
    """Ranges of every General_Category leaf value (``Lu``, ``Nd``, ... ``Cn``) of this Python's
    :mod:`unicodedata`, built once (one pass, ~0.4 s) and kept on disk per Unicode version."""
    import unicodedata

    from .._cache import atomic_pickle_dump, cache_root, pickle_load_or_none

    path = cache_root() / f"unicode-gc-{unicodedata.unidata_version}.pkl"
    cached = pickle_load_or_none(path)
    if isinstance(cached, dict) and set(cached) == _GC_LEAVES:
        return cached
    out: dict[str, list[tuple[int, int]]] = {k: [] for k in _GC_LEAVES}
    prev, start = None, 0
    for cp, cat in enumerate(map(unicodedata.category, all_code_points())):
        if cat != prev:
            if prev is not None:
                out[prev].append((start, cp - 1))
            prev, start = cat, cp
    out[prev].append((start, MAX_CP))
    table = {k: tuple(v) for k, v in out.items()}
    try:
        atomic_pickle_dump(table, path)
    except OSError:  # a read-only cache folder: the table is only rebuilt next time
        pass
    return table


def _merge(ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def complement(ranges: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    prev = 0
    for lo, hi in ranges:
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CP:
        out.append((prev, MAX_CP))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def general_category(short: str) -> Ranges:
    t = gc_table()
    return _merge(r for leaf in _GC_GROUPS.get(short, (short,)) for r in t[leaf])


@functools.lru_cache(maxsize=128)
def _regex_module_property(text: str) -> Ranges:
    """A property the ``regex`` package knows (``Script=Greek``, ``Alphabetic``), ~10 ms each."""
    try:
        import regex as regex_module
    except ImportError:
        raise UnsupportedFeature(f"the Unicode property \\p{{{text}}} needs the 'regex' package "
                                 "(Python's unicodedata has no script or binary-property tables)") from None
    try:
        rx = regex_module.compile(r"\p{%s}+" % text)
    except regex_module.error as e:
        raise UnknownProperty(f"unknown Unicode property \\p{{{text}}} ({e})") from None
    return tuple((m.start(), m.end() - 1) for m in rx.finditer(_code_points()))


@functools.lru_cache(maxsize=1)
def _code_points() -> str:
    return all_code_points()


@functools.lru_cache(maxsize=256)
def property_ranges(spec: str) -> Ranges:
    """The code points of ``\\p{spec}`` (sorted, merged, inclusive ranges); ``UnknownProperty`` for
    a name ECMA-262 does not know, ``UnsupportedFeature`` for one that needs tables this Python
    lacks."""
    if "=" in spec:
        key, _, value = spec.partition("=")
        if key in _GC_KEYS:
            short = _GC_NAMES.get(value, value)
            if short not in _GC_SHORT:
                raise UnknownProperty(f"unknown General_Category value {value!r}")
            return general_category(short)
        if key in _SCRIPT_KEYS:
            if not _NAME.match(value):
                raise UnknownProperty(f"unknown {_SCRIPT_KEYS[key]} value {value!r}")
            return _regex_module_property(f"{_SCRIPT_KEYS[key]}={value}")
        raise UnknownProperty(f"unknown Unicode property {key!r} (ECMA-262 allows General_Category, "
                              "Script and Script_Extensions with a value)")
    short = _GC_NAMES.get(spec, spec)
    if short in _GC_SHORT:
        return general_category(short)
    name = _BINARY.get(spec)
    if name is None:
        raise UnknownProperty(f"unknown Unicode property {spec!r}")
    if name == "Any":
        return ((0, MAX_CP),)
    if name == "ASCII":
        return ((0, 0x7F),)
    if name == "ASCII_Hex_Digit":
        return ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66))
    if name == "Assigned":
        return complement(general_category("Cn"))
    return _regex_module_property(name)


# -- patterns -----------------------------------------------------------------------------------------
def _cp(c: int) -> str:
    return "\\u%04x" % c if c <= 0xFFFF else "\\U%08x" % c


def class_text(ranges: Ranges) -> str:
    """The ranges as the inside of a Python character class (``\\u0041-\\u005a...``)."""
    return "".join(_cp(lo) if lo == hi else f"{_cp(lo)}-{_cp(hi)}" for lo, hi in ranges)


def expand_property_escapes(pattern: str) -> str:
    r"""``pattern`` with every ``\p{...}``/``\P{...}`` written as the character class it stands for
    (Python's ``re`` has no property escapes): ``[...]`` outside a class, its ranges inside one.
    Returns ``pattern`` itself (the same object) when it has none.  ``GrammarError`` (with the
    escape's position) for an unknown property, ``UnsupportedFeature`` for one this Python has no
    tables for."""
    if "\\p" not in pattern and "\\P" not in pattern:
        return pattern
    out = _expand(pattern)
    return pattern if out is None else out


@functools.lru_cache(maxsize=256)
def _expand(pattern: str) -> str | None:
    """The rewritten pattern, or None when it has no property escape (``\\p`` only after ``\\``)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    class_start = -1
    found = False
    last = 0
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 < n and pattern[i + 1] in "pP" and i + 2 < n and pattern[i + 2] == "{":
                end = pattern.find("}", i + 3)
                if end < 0:
                    raise GrammarError(f"invalid regular expression {pattern!r}: missing '}}' of the Unicode "
                                       "property escape", position=i, source=pattern)
                found = True
                negated = pattern[i + 1] == "P"
                spec = pattern[i + 3:end]
                try:
                    ranges = property_ranges(spec)
                except UnknownProperty as e:
                    raise GrammarError(f"invalid regular expression {pattern!r}: {e}", position=i,
                                       source=pattern) from None
                except UnsupportedFeature as e:
                    raise UnsupportedFeature(f"regular expression {pattern!r}: {str(e).split(': ', 1)[-1]}") from None
                if negated:
                    ranges = complement(ranges)
                out.append(pattern[last:i])
                if in_class:
                    if not ranges:
                        raise UnsupportedFeature(f"regular expression {pattern!r}: \\{pattern[i + 1]}{{{spec}}} "
                                                 "matches no character, inside a character class")
                    out.append(class_text(ranges))
                elif ranges:
                    out.append("[" + class_text(ranges) + "]")
                else:
                    out.append("[^\\x00-\\U0010ffff]")  # no character at all
                i = last = end + 1
                continue
            i += 2  # any other escape: the escaped character is not syntax
            continue
        if in_class:
            if c == "]" and i > class_start:
                in_class = False
        elif c == "[":
            in_class = True
            class_start = i + 1
            if class_start < n and pattern[class_start] == "^":
                class_start += 1
            # a "]" right after "[" or "[^" is a literal in Python's syntax: the class ends later
        i += 1
    if not found:
        return None
    out.append(pattern[last:])
    return "".join(out)


def data_version() -> str:
    """What the tables were built from (a part of cache keys of automata built with them)."""
    import unicodedata

    try:
        import regex as regex_module

        rv = getattr(regex_module, "__version__", "?")
    except ImportError:
        rv = "-"
    return f"{unicodedata.unidata_version}/{rv}"
