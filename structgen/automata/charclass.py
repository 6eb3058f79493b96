"""Sets of Unicode code points as sorted inclusive ranges, and their encodings
as byte paths: raw UTF-8 (regexes, Lark terminals) or the body of a JSON string
literal (escapes included).  Encoding per character keeps UTF-8 exact: a DFA
built this way accepts only well-formed UTF-8 for the characters the pattern
allows.
"""
from __future__ import annotations

import functools
import re

from .fsa import NFA

MAX_CP = 0x10FFFF
Ranges = list[tuple[int, int]]


def normalize(ranges) -> Ranges:
    out: Ranges = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def complement(ranges: Ranges) -> Ranges:
    out: Ranges = []
    prev = 0
    for lo, hi in normalize(ranges):
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CP:
        out.append((prev, MAX_CP))
    return out


def intersect(a: Ranges, b: Ranges) -> Ranges:
    return complement(complement(a) + complement(b))


def subtract(a: Ranges, b: Ranges) -> Ranges:
    return intersect(a, complement(b))


def contains(ranges: Ranges, cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


@functools.lru_cache(maxsize=None)
def unicode_class(name: str) -> tuple[tuple[int, int], ...]:
    """Ranges of Python's Unicode ``\\d``, ``\\w`` or ``\\s`` (computed once, cached on disk)."""
    import sys

    from .._cache import atomic_pickle_dump, cache_root, pickle_load_or_none

    path = cache_root() / f"unicode-{name}-{sys.version_info[0]}.{sys.version_info[1]}.pkl"
    cached = pickle_load_or_none(path)
    if isinstance(cached, tuple) and all(isinstance(r, tuple) and len(r) == 2 for r in cached):
        return cached
    out = _compute_unicode_class(name)
    atomic_pickle_dump(out, path)
    return out


def _compute_unicode_class(name: str) -> tuple[tuple[int, int], ...]:
    rx = re.compile({"digit": r"\d", "word": r"\w", "space": r"\s"}[name])
    out: list[tuple[int, int]] = []
    start = None
    for cp in range(MAX_CP + 2):
        hit = cp <= MAX_CP and not (0xD800 <= cp <= 0xDFFF) and rx.match(chr(cp)) is not None
        if hit and start is None:
            start = cp
        elif not hit and start is not None:
            out.append((start, cp - 1))
            start = None
    return tuple(out)


# Positive classes use ECMA-262's (ASCII) meaning, which is also inside
# Python's Unicode meaning; negated classes exclude Python's Unicode class.
# Both are therefore sound under either regex dialect a validator may use.
ASCII_DIGIT: Ranges = [(0x30, 0x39)]
ASCII_WORD: Ranges = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
ECMA_SPACE: Ranges = normalize(
    [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
     (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
)


def category(name: str, negated: bool, *, widest: bool = False) -> Ranges:
    r"""The characters of ``\d``/``\w``/``\s`` (``\D``/``\W``/``\S`` when ``negated``) that both
    dialects agree on: the narrowest meaning.  ``widest=True`` gives the union of the two meanings
    instead, for an item inside a negated set (``[^\s]``), whose complement must be the narrowest."""
    narrow: Ranges = {"digit": ASCII_DIGIT, "word": ASCII_WORD}.get(name) or intersect(ECMA_SPACE, list(unicode_class("space")))
    wide = normalize(list(unicode_class(name)) + (ECMA_SPACE if name == "space" else []))
    if negated:
        return complement(narrow if widest else wide)
    return wide if widest else narrow


def casefold_ranges(ranges: Ranges) -> Ranges:
    """Add the other case of every cased character (ASCII exactly, else by str.lower/upper)."""
    extra: Ranges = []
    for lo, hi in ranges:
        for a, b, delta in ((0x41, 0x5A, 32), (0x61, 0x7A, -32)):
            x, y = max(lo, a), min(hi, b)
            if x <= y:
                extra.append((x + delta, y + delta))
        if hi > 0x7F and hi - lo < 4096:
            for cp in range(max(lo, 0x80), hi + 1):
                ch = chr(cp)
                for other in (ch.lower(), ch.upper()):
                    if len(other) == 1:
                        extra.append((ord(other), ord(other)))
    return normalize(ranges + extra)


def utf8_sequences(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Split a code point range into byte-range sequences (surrogates excluded)."""
    out: list[list[tuple[int, int]]] = []

    def split(lo: int, hi: int) -> None:
        if lo > hi:
            return
        if lo <= 0xDFFF and hi >= 0xD800:
            split(lo, 0xD7FF)
            split(0xE000, hi)
            return
        for boundary in (0x7F, 0x7FF, 0xFFFF):
            if lo <= boundary < hi:
                split(lo, boundary)
                split(boundary + 1, hi)
                return
        if hi <= 0x7F:
            out.append([(lo, hi)])
            return
        for i in range(1, 4):
            m = (1 << (6 * i)) - 1
            if (lo & ~m) != (hi & ~m):
                if (lo & m) != 0:
                    split(lo, lo | m)
                    split((lo | m) + 1, hi)
                    return
                if (hi & m) != m:
                    split(lo, (hi & ~m) - 1)
                    split(hi & ~m, hi)
                    return
        a = chr(lo).encode("utf-8")
        b = chr(hi).encode("utf-8")
        out.append(list(zip(a, b)))

    split(lo, hi)
    return out


def add_byte_seq(nfa: NFA, a: int, seq: list[tuple[int, int]], b: int) -> None:
    cur = a
    for i, (x, y) in enumerate(seq):
        nxt = b if i == len(seq) - 1 else nfa.new_state()
        nfa.add_range(cur, x, y, nxt)
        cur = nxt


class _FragmentEncoder:
    """Encodes a character set once as a small minimized DFA and embeds that
    fragment wherever the set occurs: NFAs stay small, determinization fast."""

    #: sets with at most this many ranges are written inline (cheaper than a fragment)
    INLINE_RANGES = 2

    def add_chars(self, nfa: NFA, a: int, ranges: Ranges, b: int) -> None:
        ranges = normalize(ranges)
        if len(ranges) <= self.INLINE_RANGES and all(hi < 0x80 for _, hi in ranges) and self._ascii_inline(ranges):
            self._add_raw(nfa, a, ranges, b)
            return
        nfa.add_dfa(self._fragment(tuple(ranges)), a, b)

    def _ascii_inline(self, ranges: Ranges) -> bool:
        return True

    @functools.lru_cache(maxsize=4096)
    def _fragment(self, ranges: tuple):
        from .fsa import determinize

        frag = NFA()
        self._add_raw(frag, frag.start, list(ranges), frag.final)
        return determinize(frag)

    def _add_raw(self, nfa: NFA, a: int, ranges: Ranges, b: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class Utf8Encoder(_FragmentEncoder):
    """Characters as their raw UTF-8 bytes."""

    def _add_raw(self, nfa: NFA, a: int, ranges: Ranges, b: int) -> None:
        for lo, hi in normalize(ranges):
            for seq in utf8_sequences(lo, hi):
                add_byte_seq(nfa, a, seq, b)


_HEX_DIGITS = {d: [ord(c) for c in {format(d, "x"), format(d, "X")}] for d in range(16)}
_SHORT_ESCAPES = {0x22: b'\\"', 0x5C: b"\\\\", 0x2F: b"\\/", 0x08: b"\\b", 0x0C: b"\\f", 0x0A: b"\\n",
                  0x0D: b"\\r", 0x09: b"\\t"}


def _add_hex_range(nfa: NFA, a: int, b: int, lo: int, hi: int, width: int, full: dict | None = None) -> None:
    """Paths of ``width`` hex digits (either case) whose value is in [lo, hi].

    ``full`` shares the "any k hex digits, then b" tails between ranges, which
    keeps the NFA (and its determinization) small."""
    if full is None:
        full = {}
    if width == 0:
        nfa.add_eps(a, b)
        return
    unit = 16 ** (width - 1)
    if lo == 0 and hi == unit * 16 - 1:
        key = width
        if key not in full:
            s = nfa.new_state()
            full[key] = s
            if width == 1:
                for lo_b, hi_b in ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)):
                    nfa.add_range(s, lo_b, hi_b, b)
            else:
                nxt_state = nfa.new_state()
                for lo_b, hi_b in ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)):
                    nfa.add_range(s, lo_b, hi_b, nxt_state)
                _add_hex_range(nfa, nxt_state, b, 0, unit - 1, width - 1, full)
        nfa.add_eps(a, full[key])
        return
    dlo, dhi = lo // unit, hi // unit
    for d in range(dlo, dhi + 1):
        sub_lo = lo - d * unit if d == dlo else 0
        sub_hi = hi - d * unit if d == dhi else unit - 1
        mid = b if width == 1 else nfa.new_state()
        for byte in _HEX_DIGITS[d]:
            nfa.add_range(a, byte, byte, mid)
        if width > 1:
            _add_hex_range(nfa, mid, b, sub_lo, sub_hi, width - 1, full)


class JsonStringEncoder(_FragmentEncoder):
    """Characters as they may appear inside a JSON string literal.

    Raw UTF-8 for everything but ``"``, ``\\`` and control characters; short
    escapes (``\\n``, ``\\"`` ...), and ``\\uXXXX`` for any BMP character that is
    not a surrogate (astral characters are written raw).
    """

    def __init__(self, allow_unicode_escapes: bool = True):
        self.allow_unicode_escapes = allow_unicode_escapes

    def _ascii_inline(self, ranges: Ranges) -> bool:
        # inline only sets with no character that needs an escape
        return not intersect(ranges, [(0x00, 0x1F), (0x22, 0x22), (0x2F, 0x2F), (0x5C, 0x5C)]) and False

    def _add_raw(self, nfa: NFA, a: int, ranges: Ranges, b: int) -> None:
        ranges = normalize(ranges)
        raw = subtract(ranges, [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])
        Utf8Encoder()._add_raw(nfa, a, raw, b)
        for cp, esc in _SHORT_ESCAPES.items():
            if contains(ranges, cp):
                nfa.add_bytes(a, esc, b)
        bmp = intersect(ranges, [(0, 0xD7FF), (0xE000, 0xFFFF)])
        if not self.allow_unicode_escapes:
            bmp = intersect(bmp, [(0, 0x1F)])
        if bmp:
            mid = nfa.new_state()
            nfa.add_bytes(a, b"\\u", mid)
            full: dict = {}
            for lo, hi in bmp:
                _add_hex_range(nfa, mid, b, lo, hi, 4, full)


UTF8 = Utf8Encoder()
JSON_STRING = JsonStringEncoder()
