"""JSON string terminals: quotes around a content DFA built from
``pattern``, ``minLength``/``maxLength`` and ``format``.

Content DFAs accept the *encoded* characters (escapes included), so a pattern
and a length bound intersect exactly at the byte level: every character has
the same set of encodings in both automata.  Length bounds use a direct
counting construction instead of regex repetition, which keeps
``maxLength: 255`` cheap.
"""
from __future__ import annotations

import functools
from json.encoder import encode_basestring as _encode_raw, encode_basestring_ascii as _encode_ascii

import numpy as np

from ..errors import GrammarError, UnsupportedFeature
from ..automata import charclass as cc
from ..automata.fsa import DFA, compact_classes, counted_repeat, dfa_cache, intersect, literal_set_dfa, nfa_tables, trim
from ..automata.lazy_dfa import LazyDFA
from .regex import compile_regex
from .regex_syntax import build_nfa

#: Beyond this many counted characters a length bound is refused (the DFA would be too large).
MAX_COUNTED_LENGTH = 4096
#: Length bounds above this are compiled as chunks of CHUNK_CHARS characters counted by the parser.
MAX_DIRECT_LENGTH = 1024
CHUNK_CHARS = 256


@functools.lru_cache(maxsize=None)
def json_char() -> DFA:
    """One JSON string character in any of its encodings (prefix-free)."""
    return compile_regex(r"(?s:.)", json_string=True)


@functools.lru_cache(maxsize=None)
def any_content() -> DFA:
    return compile_regex(r"(?s:.*)", json_string=True)


@dfa_cache(32 << 20)
def length_content(lo: int, hi: int | None) -> DFA:
    """Content of ``lo..hi`` characters, built as a chain of char-DFA copies."""
    if hi is None and lo == 0:
        return any_content()
    bound = hi if hi is not None else lo
    if bound > MAX_COUNTED_LENGTH:
        raise UnsupportedFeature(
            f"string length bound {bound} exceeds {MAX_COUNTED_LENGTH}, the largest enforced exactly", keyword="maxLength"
        )
    try:
        return counted_repeat(json_char(), lo, hi)
    except GrammarError:
        raise UnsupportedFeature(f"string length bound {bound} needs too many automaton states",
                                 keyword="maxLength") from None


def quoted(content: DFA, *, closing: bool = True) -> DFA:
    """``"`` + content (+ ``"`` when ``closing``); content never contains a raw quote."""
    n = content.n_states
    # classes: refine content classes with the quote byte
    cm = content.classmap.copy()
    q = ord('"')
    quote_cls = content.n_classes
    cm[q] = quote_cls
    trans = np.full((n + 2, content.n_classes + 1), -1, dtype=np.int32)
    inner = np.where(content.trans >= 0, content.trans + 1, -1)
    trans[1:n + 1, :content.n_classes] = inner
    # '"' inside the content only follows a backslash (an escape); elsewhere it closes the string
    trans[1:n + 1, quote_cls] = inner[:, content.classmap[q]]
    trans[0, quote_cls] = content.start + 1
    accept = np.zeros(n + 2, dtype=bool)
    if closing:
        for s in np.nonzero(content.accept)[0]:
            assert trans[s + 1, quote_cls] < 0, "raw quote inside JSON string content"
            trans[s + 1, quote_cls] = n + 1
        accept[n + 1] = True
    else:
        accept[1:n + 1] = content.accept
    return compact_classes(trim(DFA(trans, accept, cm, 0)))


def string_dfa(patterns: tuple[str, ...] = (), min_len: int = 0, max_len: int | None = None,
               formats: tuple[str, ...] = ()) -> DFA:
    """A complete JSON string literal satisfying every constraint given (cached by bytes)."""
    return _string_dfa(patterns, min_len, max_len, formats)


#: Bytes of string automata kept for reuse (a long ``maxLength`` or pattern makes megabyte tables).
STRING_DFA_CACHE_BYTES = 128 << 20


@dfa_cache(STRING_DFA_CACHE_BYTES)
def _string_dfa(patterns: tuple[str, ...], min_len: int, max_len: int | None, formats: tuple[str, ...]) -> DFA:
    from .formats import format_content

    parts: list[DFA] = [compile_regex(p, search=True, json_string=True) for p in patterns]
    parts += [format_content(f) for f in formats]
    if min_len or max_len is not None:
        parts.append(length_content(min_len, max_len))
    if not parts:
        d = any_content()
    else:
        d = parts[0]
        for p in parts[1:]:
            d = intersect(d, p)
    out = quoted(d)
    if not patterns and not formats and max_len is not None:
        # exactly "any string of min_len..max_len characters": the engine can mask its states
        # from one counted walk of the unbounded string (structgen.engine.counted)
        out.length_bounds = (min_len, max_len)
    return out


@functools.lru_cache(maxsize=64)
def lazy_content(pattern: str) -> LazyDFA | None:
    """The content of a JSON string matching ``pattern`` (JSON Schema semantics: a search unless
    anchored; escapes included) as a DFA made on demand, for a pattern whose whole DFA is too large
    (``[ab]*a[ab]{22}``: 2**23 states); None when the pattern has no NFA here (lookarounds,
    backreferences).  One per pattern, shared by every grammar: its states are made as masks reach
    them and kept (bounded by ``lazy_dfa.MAX_LAZY_BYTES``)."""
    try:
        tables = nfa_tables(build_nfa(pattern, encoder=cc.JSON_STRING, search=True))
    except (GrammarError, UnsupportedFeature):
        return None
    return LazyDFA(tables, source=pattern) if len(tables.start) else None


def string_forms(values: list[str]) -> list[bytes]:
    """Each string's JSON literal in its json.dumps forms (raw and ASCII-escaped): the encoders
    json.dumps itself calls on a string, without its per-call set-up."""
    out = []
    for v in values:
        raw = _encode_raw(v)
        out.append(raw.encode("utf-8"))
        if not raw.isascii():
            out.append(_encode_ascii(v).encode("utf-8"))
    return out


def literal_strings(values: list[str]) -> DFA:
    """Exactly the given strings (see :func:`string_forms`); one shared DFA per set of values
    (:func:`~structgen.automata.fsa.literal_set_dfa`), so equal keys and enums share lexers and walks."""
    return literal_set_dfa(string_forms(values))


@functools.lru_cache(maxsize=None)
def chunk_terminals() -> tuple[DFA, DFA]:
    """(first chunk: quote + CHUNK_CHARS characters, later chunk: CHUNK_CHARS characters)."""
    body = length_content(CHUNK_CHARS, CHUNK_CHARS)
    first = quoted(body, closing=False)
    # the engine masks chunk states from the counted walk (structgen.engine.counted)
    first.chunk_chars = body.chunk_chars = CHUNK_CHARS
    return first, body


@functools.lru_cache(maxsize=64)
def tail_terminal(lo: int, hi: int, opening: bool) -> DFA:
    """lo..hi characters then the closing quote (with the opening quote too if ``opening``)."""
    q = quoted(length_content(lo, hi))
    if not opening:
        # drop the opening quote: start from the state after it
        start = int(q.trans[0, q.classmap[ord('"')]])
        q = trim(DFA(q.trans.copy(), q.accept.copy(), q.classmap.copy(), start))
    q.length_bounds = (lo, hi)  # masked from the counted walk, like any length-bounded string
    return q


@functools.lru_cache(maxsize=256)
def class_string_dfa(chars: frozenset) -> DFA:
    """A JSON string of any number of characters from ``chars`` (printable ASCII bytes; in every
    encoding, escapes included): the base of a counted walk of that class (``structgen.engine.counted``)."""
    body = "".join(f"\\x{b:02x}" for b in sorted(chars))
    return quoted(compile_regex(f"[{body}]*", json_string=True))
