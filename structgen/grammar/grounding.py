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

from ..automata.fsa import DFA, MAX_DFA_STATES, dfa_cache, empty_dfa, minimize, trim
from ..automata.product_kernels import pair_product
from ..errors import GrammarError
from .json_strings import quoted

__all__ = ["source_numbers", "span_content_dfa", "span_string_dfa", "is_span", "longest_span", "canonical_encoding", "product_within",
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
    ending with whitespace, free of lone surrogates, and a substring of ``source``."""
    return (bool(value) and not value[0].isspace() and not value[-1].isspace()
            and not any(_is_surrogate(c) for c in value) and value in source)


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
    return d if d.is_empty() else minimize(trim(d))


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
