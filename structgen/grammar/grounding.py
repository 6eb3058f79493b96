"""Grounded strings: a byte DFA whose language is every span (substring) of a source text, so that a
JSON string value cannot say what the text does not.

The automaton is the source's *suffix automaton* (linear in the text: at most 2n states and 3n
transitions), each character transition expanded into the bytes of its JSON encoding.  Decisions:

* **One encoding per character**: the one ``json.dumps(..., ensure_ascii=False)`` writes (UTF-8
  for ordinary characters; ``\\"``, ``\\\\``, ``\\n``/``\\t``/... and ``\\u001f``-style escapes for
  the other control characters).  Other spellings JSON allows (``\\u0041`` for ``A``, ``\\/``) are
  not generated; a decoded value is the same either way, which is what the final validation and
  :func:`is_span` read.  Lone surrogates (not encodable as UTF-8) end spans: no span holds one.
* **Trimmed spans**: a span never starts or ends with whitespace (``str.isspace``), and is never
  empty -- ``" Marie"`` or ``""`` are not useful answers.  Both are cut inside the automaton: the
  start state has no whitespace moves, and a state accepts only if the character that enters it
  (one per state in a suffix automaton) is not whitespace.
* **Whole words**: a span never starts or ends inside a word of the text (a maximal run of ASCII
  letters and digits): the suffix automaton is intersected with "every word of the value is a word of
  the text" (``_whole_words_dfa``), which refuses "Ac" of "Accra" and "202" of "2025" -- truncations a
  small model writes when the tokens of a word inside a JSON string are unusual -- and keeps any run of
  whole words with what lies between them.  Other scripts have no such words: their spans are as before.
* **Balanced brackets**: a span holds both round (or square) brackets of a pair or neither, so a
  phone number is "(988) 847-7508", never "988) 847-7508".
* **Deterministic expansion**: encodings are a prefix code, so the bytes of the characters leaving
  one state branch only where their encodings differ (a small trie per state, needed only where
  two encodings share a first byte).  Since every transition into a state carries the same
  character, the bytes past that point are a chain owned by the target state, shared by all its
  incoming transitions.
"""
from __future__ import annotations

import json
import re

import numpy as np

from ..automata.fsa import DFA, MAX_DFA_STATES, dfa_cache, empty_dfa, literal_set_dfa, minimize, trim
from ..automata.product_kernels import pair_product
from ..errors import GrammarError
from .json_strings import quoted

__all__ = ["source_numbers", "words_of", "span_content_dfa", "span_string_dfa", "is_span", "longest_span", "canonical_encoding", "product_within",
           "GROUNDING_CACHE_BYTES"]

#: Bytes of span automata kept for reuse (each cache): a source is met again by the fields and calls of one
#: extraction, rarely later, and a 50k-character source makes ~13 MB of tables.
GROUNDING_CACHE_BYTES = 32 << 20


def canonical_encoding(ch: str) -> bytes:
    """The bytes of one character inside a JSON string, as ``json.dumps(ensure_ascii=False)``
    writes them (lone surrogates get their ``\\uXXXX`` escape, having no UTF-8 form)."""
    if _is_surrogate(ch):
        return json.dumps(ch)[1:-1].encode("ascii")
    return json.dumps(ch, ensure_ascii=False)[1:-1].encode("utf-8")


def is_span(value: str, source: str) -> bool:
    """Whether ``value`` (decoded) is a span the automaton accepts: non-empty, not starting or
    ending with whitespace, free of lone surrogates, a substring of ``source``, made of whole words of
    it (every maximal run of ASCII letters and digits in ``value`` is one in ``source``), its round and
    square brackets balanced."""
    return (bool(value) and not value[0].isspace() and not value[-1].isspace()
            and not any(_is_surrogate(c) for c in value) and value in source
            and set(words_of(value)) <= set(words_of(source)) and _brackets_balance(value))


def _brackets_balance(value: str, depth: int = 3) -> bool:
    for opening, closing in ("()", "[]"):
        level = 0
        for c in value:
            level += (c == opening) - (c == closing)
            if level < 0 or level > depth:
                return False
        if level:
            return False
    return True


def longest_span(source: str) -> int:
    """The most characters a span of ``source`` can hold (an upper bound: its trimmed length)."""
    return len(source.strip())


def span_string_dfa(source: str) -> DFA:
    """A complete JSON string literal (quotes included) whose value is a span of ``source``."""
    return _span_string_dfa(source)


def span_content_dfa(source: str) -> DFA:
    """The content of such a string literal (the bytes between the quotes), as ``string_dfa``'s
    automata read it before :func:`~structgen.grammar.json_strings.quoted` adds the quotes."""
    return _span_content_dfa(source)


@dfa_cache(GROUNDING_CACHE_BYTES)
def _span_string_dfa(source: str) -> DFA:
    return quoted(span_content_dfa(source))


@dfa_cache(GROUNDING_CACHE_BYTES)
def _span_content_dfa(source: str) -> DFA:
    if not isinstance(source, str):
        raise TypeError(f"source must be a str, not {type(source).__name__}")
    nxt, last = _suffix_automaton(source)
    d = _expand(nxt, last)
    if d.is_empty():
        return d
    return minimize(product_within(product_within(minimize(trim(d)), _whole_words_dfa(source)), _BALANCED))


#: a word: a maximal run of ASCII letters and digits (a span never cuts one: "Ac" of "Accra" is not a value)
_WORD = re.compile(rb"[A-Za-z0-9]+")
_ALNUM = np.zeros(256, dtype=bool)
_ALNUM[list(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")] = True
_HEX = np.zeros(256, dtype=bool)
_HEX[list(b"0123456789abcdefABCDEF")] = True


def words_of(value: str) -> list[str]:
    """The words of ``value`` (its maximal runs of ASCII letters and digits)."""
    return [w.decode("ascii") for w in _WORD.findall(value.encode("utf-8", "surrogatepass"))]


def _balanced_dfa(depth: int = 3) -> DFA:
    """Content whose round brackets balance, nested at most ``depth`` deep: a span holds both brackets
    of a pair or neither ("(988) 847-7508", not "988) 847-7508"); square brackets alike."""
    pairs = ((ord("("), ord(")")), (ord("["), ord("]")))
    n = (depth + 1) ** len(pairs)
    trans = np.zeros((n, 256), dtype=np.int32)
    for state in range(n):
        levels = [state // (depth + 1) ** i % (depth + 1) for i in range(len(pairs))]
        trans[state, :] = state
        for i, (opening, closing) in enumerate(pairs):
            unit = (depth + 1) ** i
            trans[state, opening] = state + unit if levels[i] < depth else -1
            trans[state, closing] = state - unit if levels[i] > 0 else -1
    accept = np.zeros(n, dtype=bool)
    accept[0] = True
    return DFA(trans, accept, np.arange(256, dtype=np.int32), 0)


_BALANCED = _balanced_dfa()


def _whole_words_dfa(source: str) -> DFA:
    """JSON string content whose every word is a word of ``source``: intersected with the spans, a value
    that starts or ends inside a word of the text ("Innovat", "202" of "2025") is refused, while a
    value that is a run of whole words and the characters between them is not.  Bytes outside ASCII
    letters and digits (other scripts, punctuation, blanks) are not words, and escapes (``\\n``,
    ``\\u00e9``) are read as single characters."""
    words = literal_set_dfa(_WORD.findall(source.encode("utf-8", "surrogatepass")))  # the words' trie
    # states: 0 outside a word (accepting), 1 after a backslash, 2-5 inside \uXXXX (hex digits left:
    # 4..1), then the trie's states from 6 (its start is never entered: a word starts with its first byte)
    base = 6
    inside = np.where(words.trans[:, words.classmap] >= 0, words.trans[:, words.classmap] + base, -1)
    inside[:, ~_ALNUM] = -1  # only letters and digits continue a word
    outside_row = np.where(_ALNUM, -1, 0).astype(np.int32)  # a non-word byte stays outside
    outside_row[ord("\\")] = 1
    outside_row[_ALNUM] = inside[words.start, _ALNUM]
    trans = np.full((base + words.n_states, 256), -1, dtype=np.int32)
    trans[0] = outside_row
    trans[1, list(b'"\\/bfnrt')] = 0
    trans[1, ord("u")] = 2
    for k in range(2, 5):
        trans[k, _HEX] = k + 1
    trans[5, _HEX] = 0
    trans[base:] = inside
    ends = base + np.flatnonzero(words.accept)  # a word may end here: what follows is read as outside
    trans[np.ix_(ends, np.flatnonzero(~_ALNUM))] = outside_row[~_ALNUM]
    accept = np.zeros(len(trans), dtype=bool)
    accept[0] = True
    accept[ends] = True
    return DFA(trans, accept, np.arange(256, dtype=np.int32), 0)


def _is_surrogate(ch: str) -> bool:
    return 0xD800 <= ord(ch) <= 0xDFFF


def _suffix_automaton(text: str) -> tuple[list[dict[str, int]], list[str]]:
    """The suffix automaton of ``text`` (Blumer et al.): per state its transitions and the
    character every transition into it carries ("" for the start state)."""
    nxt: list[dict[str, int]] = [{}]
    link = [-1]
    length = [0]
    last_char = [""]
    last = 0
    for c in text:
        cur = len(nxt)
        nxt.append({})
        length.append(length[last] + 1)
        link.append(0)
        last_char.append(c)
        p = last
        while p >= 0 and c not in nxt[p]:
            nxt[p][c] = cur
            p = link[p]
        if p >= 0:
            q = nxt[p][c]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = len(nxt)
                nxt.append(dict(nxt[q]))
                length.append(length[p] + 1)
                link.append(link[q])
                last_char.append(c)
                while p >= 0 and nxt[p].get(c) == q:
                    nxt[p][c] = clone
                    p = link[p]
                link[q] = link[cur] = clone
        last = cur
    return nxt, last_char


def _expand(nxt: list[dict[str, int]], last_char: list[str]) -> DFA:
    """The suffix automaton over bytes: each character move becomes its canonical encoding, the
    start's whitespace moves and every lone-surrogate move dropped, acceptance where the entering
    character is not whitespace (see the module docstring)."""
    n = len(nxt)
    enc = {c: canonical_encoding(c) for c in set(last_char[1:])}
    used = sorted({b for e in enc.values() for b in e})
    if not used:
        return empty_dfa()
    classmap = np.zeros(256, dtype=np.int32)  # class 0: bytes no encoding uses
    classmap[used] = np.arange(1, len(used) + 1, dtype=np.int32)
    # chain[t]: the state after the first byte of t's entering character (the others follow it)
    chain = [0] * n
    total = n
    for t in range(1, n):
        k = len(enc[last_char[t]])
        if k > 1:
            chain[t] = total
            total += k - 1
    src: list[int] = []
    byte: list[int] = []
    dst: list[int] = []

    def jump(t: int, j: int) -> int:
        """The state after ``j`` bytes of ``t``'s entering character."""
        k = len(enc[last_char[t]])
        return t if j == k else chain[t] + j - 1

    for t in range(1, n):  # the chains: bytes 2..k of the entering character
        e = enc[last_char[t]]
        for j in range(1, len(e)):
            src.append(jump(t, j))
            byte.append(e[j])
            dst.append(jump(t, j + 1))
    trie_nodes = 0
    for s in range(n):
        moves = [(enc[c], t) for c, t in nxt[s].items()
                 if not _is_surrogate(c) and not (s == 0 and c.isspace())]
        firsts: dict[int, int] = {}
        for e, _ in moves:
            firsts[e[0]] = firsts.get(e[0], 0) + 1
        shared = [(e, t) for e, t in moves if firsts[e[0]] > 1]
        for e, t in moves:
            if firsts[e[0]] == 1:
                src.append(s)
                byte.append(e[0])
                dst.append(jump(t, 1))
        if shared:  # encodings with a common first byte: a trie until they part
            prefixes: dict[bytes, int] = {}
            for e, _ in shared:
                for j in range(1, len(e)):
                    prefixes[e[:j]] = prefixes.get(e[:j], 0) + 1
            node = {b"": s}
            for e, t in shared:
                for j in range(1, len(e) + 1):
                    p = e[:j]
                    if prefixes.get(p, 0) > 1:
                        if p not in node:
                            node[p] = total + trie_nodes
                            trie_nodes += 1
                            src.append(node[e[:j - 1]])
                            byte.append(e[j - 1])
                            dst.append(node[p])
                    else:
                        src.append(node[e[:j - 1]])
                        byte.append(e[j - 1])
                        dst.append(jump(t, j))
                        break
    total += trie_nodes
    trans = np.full((total, len(used) + 1), -1, dtype=np.int32)
    trans[np.array(src, dtype=np.int64), classmap[np.array(byte, dtype=np.int64)]] = np.array(dst, dtype=np.int32)
    accept = np.zeros(total, dtype=bool)
    accept[1:n] = [not c.isspace() for c in last_char[1:]]
    return DFA(trans, accept, classmap, 0)


def product_within(a: DFA, b: DFA, mode: str = "and", max_states: int | None = None) -> DFA:
    """:func:`~structgen.automata.fsa.product` (``and`` or ``diff``) with a state bound of its own:
    a span automaton alone may pass ``MAX_DFA_STATES``, and its products with small automata stay
    near its size.  Default bound: ``a``'s states plus ``MAX_DFA_STATES``; past it, GrammarError."""
    if max_states is None:
        max_states = a.n_states + MAX_DFA_STATES
    pairs = a.classmap.astype(np.int64) * (b.n_classes + 1) + b.classmap
    uniq, classmap = np.unique(pairs, return_inverse=True)
    ca = uniq // (b.n_classes + 1)
    cb = uniq % (b.n_classes + 1)
    ta = np.ascontiguousarray(a.trans[:, ca], dtype=np.int32)
    tb = np.ascontiguousarray(b.trans[:, cb], dtype=np.int32)
    n, trans, acc, _, _ = pair_product(ta, tb, np.ascontiguousarray(a.accept, dtype=np.bool_),
                                       np.ascontiguousarray(b.accept, dtype=np.bool_), int(a.start), int(b.start),
                                       {"and": 0, "diff": 2}[mode], max_states)
    if n < 0:
        raise GrammarError(f"automaton too large (over {max_states} DFA states) in a grounded product")
    return trim(DFA(trans, acc, classmap.astype(np.int32).reshape(256), 0))


#: a number written in a text: digits not inside a word (not the 4686 of "IB4686"), thousands
#: separated by commas or not, a decimal part
_TEXT_NUMBER = re.compile(r"(?<![\w.])(-?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w])")


def source_numbers(source: str, integer: bool) -> list[str]:
    """The JSON spellings of the numbers ``source`` writes (grounded numbers: ``SchemaOptions.
    ground_numbers``): "1,200" is 1200, "07" is 7, "-3.50" is -3.50; integers alone when ``integer``."""
    out: dict[str, None] = {}
    for sign, whole, frac in _TEXT_NUMBER.findall(source):
        digits = str(int(whole.replace(",", "")))
        if frac and not integer:
            out[f"{sign}{digits}{frac}"] = None
        if not frac or set(frac[1:]) == {"0"}:
            out[f"{sign}{digits}"] = None
        if sign:  # "-5" in a text is often a dash before a number
            out[digits] = None
    return list(out)
