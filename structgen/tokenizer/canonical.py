"""Canonical tokenizations of a byte-level BPE tokenizer: which next tokens may follow the last one.

A language model puts almost all of a text's probability on one tokenization, the one its tokenizer
produces (the *canonical* one).  A sampler that lets non-canonical splits through (``red c|at``
instead of ``red| cat``) spends its samples on paths of tiny probability.  :class:`CanonicalFilter`
is a per-step mask over next tokens, built from the tokenizer alone (its vocabulary, merges and
pre-tokenizer), so that a token sequence the filter accepts at every step is exactly
``tokenizer.encode(text)`` of its text, and ``encode(text)`` is accepted at every step.

How (Vieira et al. 2025, "Language Models over Canonical Byte-Pair Encodings"):

* **BPE inside one pre-token** is checked by adjacent bigrams: a sequence is BPE's output iff every
  token is (``bpe(bytes(t)) == [t]``) and every adjacent pair (a, b) is.  A pair is not when some merge
  ``(x, y)`` with ``x`` on a's right spine (a, its right child, its right child...), ``y`` on b's left
  spine, fires before ``x`` and ``y`` are absorbed: ``rank(x, y) < min(consume(x), consume(y))``
  (``consume``: the rank of the merge that makes the spine node's parent; merges run in rank order, a
  merge's parts always being older than it).  Per last token that is a union of slices of
  precomputed arrays: a few numpy operations, cached per last token.
* **The pre-tokenizer** (GPT-2's regex: contractions, letter / number / symbol runs with one optional
  leading space, whitespace runs) puts boundaries BPE never merges across.  Around the a|b boundary it
  is decided by a few characters on either side: the output's last three and the next token's first three characters,
  abstracted to their classes (letters, digits, symbols, each whitespace character, the apostrophe
  and the letters of contractions kept as they are), and the window is pre-tokenized with the
  tokenizer's own regex.  A boundary inside a or b (a token that would straddle two pre-tokens in
  this context) rejects the pair; a boundary at the a|b seam waives the BPE test.
* **The one dependency on what comes next**: a whitespace run's last character belongs to the next
  pre-token when a non-space follows (``\\s+(?!\\S)``), so ``"  \\n"`` is split one way before text
  and another before the end.  Each pair is judged in both contexts (next text starts with
  whitespace or the text ends: ``E``; it starts with a non-space: ``X``); a pair valid in only one
  leaves a flag the next step honours (the next token must start with whitespace / must not, and
  the output may end only where ``X`` was not required).  The filter's state is (last token, flag).

Exactness is checked against ``encode`` on random texts (words, digits, punctuation, whitespace
runs, JSON fragments, unicode): ``tests/tokenizer/test_canonical.py``.  SentencePiece vocabularies
are not covered (``UnsupportedFeature``).  The tables (each token's spines, classes, and the
single-token check, which runs the tokenizer over the vocabulary) are cached on disk per tokenizer.
"""
from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any, Mapping, Sequence

import numpy as np

from .._cache import atomic_pickle_dump, cache_root, code_fingerprint, pickle_load_or_none
from ..errors import UnsupportedFeature
from .token_bytes import _byte_level_bytes

__all__ = ["CanonicalFilter", "GPT2_PRETOKENIZE", "FLAG_NONE", "FLAG_WS", "FLAG_TEXT"]

#: the regex of ``ByteLevel(use_regex=True)`` (GPT-2's)
GPT2_PRETOKENIZE = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

FLAG_NONE, FLAG_WS, FLAG_TEXT = 0, 1, 2  # what the next token must start with: anything / whitespace (or end) / non-space
_TABLE_VERSION = 1
_INF = np.iinfo(np.int64).max
_KEEP = set(" '") | set("strevmld")
_HEAD_CHARS, _TAIL_CHARS = 3, 3


def _classes():
    import regex

    letter, number, space = regex.compile(r"\p{L}"), regex.compile(r"\p{N}"), regex.compile(r"\s")

    def rep(ch: str) -> str:
        if ch in _KEEP:
            return ch
        if 0xDC80 <= ord(ch) <= 0xDCFF:  # a byte of an incomplete character: kept as it is
            return ch
        if space.match(ch):
            return ch
        if letter.match(ch):
            return "a"
        if number.match(ch):
            return "0"
        return "."
    return rep


def _chars(b: bytes) -> str:
    return b.decode("utf-8", errors="surrogateescape")


def _abstract(s: str, rep) -> str:
    return "".join(rep(c) for c in s)


class CanonicalFilter:
    """The canonical-tokenization filter of one byte-level BPE tokenizer.

    A state is an int ``(context * (V + 1) + last_token) * 3 + flag``: the last token
    (``V`` at the start of the output), the flag the last pair left (what the next token must start
    with) and ``context``, the id of the output's last few characters abstracted to their classes
    with where the last token starts among them (the pre-tokenizer's left context).  :meth:`allowed`
    is the mask of the next tokens (a bool array over the vocabulary, EOS ids excluded:
    :meth:`can_end` says whether the output may end), :meth:`advance` the state after a token."""

    def __init__(self, tables: Mapping[str, Any], eos_ids: Sequence[int] = (), *, cache_entries: int = 512) -> None:
        import regex

        self.vocab_size = int(tables["vocab_size"])
        self.eos_ids = tuple(int(e) for e in eos_ids)
        self._pattern = regex.compile(tables["pattern"])
        self._unigram = np.asarray(tables["unigram"], dtype=bool)
        self._starts_ws = np.asarray(tables["starts_ws"], dtype=bool)
        self._head_key = np.asarray(tables["head_key"], dtype=np.int64)
        self._heads: list[str] = tables["heads"]
        self._texts: list[str] = tables["texts"]  # each token's characters, abstracted
        self._right_spine: list = tables["right_spine"]  # token -> [(node, consume rank)]
        self._left_index: dict = tables["left_index"]  # node -> (consume ranks desc, tokens)
        self._merges_from: dict = tables["merges_from"]  # x -> (ys, ranks) ascending rank
        self._rep = _classes()
        self._contexts: list[tuple[str, int]] = [("", 0)]
        self._context_id: dict[tuple[str, int], int] = {("", 0): 0}
        self._next_context: dict[tuple[int, int], int] = {}
        self.start = self.vocab_size * 3
        self._conflict_cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._verdicts: dict[int, np.ndarray] = {}
        self._pair_cache: OrderedDict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._mask_cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._words_cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._entries = cache_entries

    # ------------------------------------------------------------------ building
    @classmethod
    def from_tokenizer_json(cls, tok_json: Mapping[str, Any] | str, token_bytes: Sequence[bytes],
                            eos_ids: Sequence[int] = (), *, hf_encode=None, use_cache: bool = True) -> "CanonicalFilter":
        """The filter of a ``tokenizer.json`` (a dict or its text) whose token bytes are ``token_bytes``
        (the model's ``TokenizerInfo.token_bytes``: empty for special ids).  ``hf_encode(texts) ->
        list[list[int]]`` (the tokenizer's own batch encode) checks each token alone; without it the
        check is BPE's on the token's bytes and the regex's on its text.  The tables are cached on
        disk (``$STRUCTGEN_CACHE/canonical``), keyed by the tokenizer and this module's code."""
        text = tok_json if isinstance(tok_json, str) else json.dumps(tok_json, sort_keys=True)
        data = json.loads(text) if isinstance(tok_json, str) else tok_json
        key = hashlib.sha256(
            f"v{_TABLE_VERSION}|{code_fingerprint(__name__)}|{hf_encode is not None}|".encode()
            + text.encode() + b"|" + b"\0".join(token_bytes)).hexdigest()[:24]
        path = cache_root() / "canonical" / f"{key}.pkl"
        tables = pickle_load_or_none(path) if use_cache else None
        if not isinstance(tables, dict) or tables.get("key") != key:
            tables = build_tables(data, token_bytes, hf_encode=hf_encode)
            tables["key"] = key
            if use_cache:
                atomic_pickle_dump(tables, path)
        return cls(tables, eos_ids)

    # ------------------------------------------------------------------ the pieces of a mask
    def _verdict(self, ctx: int) -> np.ndarray:
        """For a left context against every head class: rows (straddle E, seam E, straddle X, seam X)."""
        hit = self._verdicts.get(ctx)
        if hit is not None:
            return hit
        tail, a0 = self._contexts[ctx]
        out = np.zeros((4, len(self._heads)), dtype=bool)
        for hk, head in enumerate(self._heads):
            out[0, hk], out[1, hk] = _window(self._pattern, tail, a0, head, "")
            out[2, hk], out[3, hk] = _window(self._pattern, tail, a0, head, "x")
        self._verdicts[ctx] = out
        return out

    def _conflicts(self, a: int) -> np.ndarray:
        """Tokens b such that BPE would merge across a|b (were they in one pre-token)."""
        hit = self._conflict_cache.get(a)
        if hit is not None:
            self._conflict_cache.move_to_end(a)
            return hit
        bad = np.zeros(self.vocab_size, dtype=bool)
        for x, cx in self._right_spine[a]:
            ys = self._merges_from.get(x)
            if ys is None:
                continue
            y_ids, ranks = ys
            n = int(np.searchsorted(ranks, cx))  # merges (x, y) that fire before x is absorbed
            for y, r in zip(y_ids[:n].tolist(), ranks[:n].tolist()):
                idx = self._left_index.get(y)
                if idx is None:
                    continue
                consume, toks = idx  # consume ranks descending
                # ... and before y is absorbed (a tie is the same merge: the leftmost pair, ours, goes first)
                m = int(np.searchsorted(-consume, -r, side="right"))
                bad[toks[:m]] = True
        self._conflict_cache[a] = bad
        if len(self._conflict_cache) > self._entries:
            self._conflict_cache.popitem(last=False)
        return bad

    def pair_masks(self, last: int, ctx: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(ok if whitespace or the end follows, ok if a non-space follows) over next tokens b, after
        ``last`` (``vocab_size``: the start) in left context ``ctx``."""
        key = (last, ctx)
        hit = self._pair_cache.get(key)
        if hit is not None:
            self._pair_cache.move_to_end(key)
            return hit
        V = self.vocab_size
        hk = self._head_key
        ver = self._verdict(ctx)
        base = self._unigram
        if last < V and not self._unigram[last]:
            base = np.zeros(V, dtype=bool)
        if last == V:
            okE = base & ~ver[0][hk]
            okX = base & ~ver[2][hk]
        else:
            free = ~self._conflicts(last)
            okE = base & ~ver[0][hk] & (ver[1][hk] | free)
            okX = base & ~ver[2][hk] & (ver[3][hk] | free)
        res = (okE, okX)
        self._pair_cache[key] = res
        if len(self._pair_cache) > self._entries:
            self._pair_cache.popitem(last=False)
        return res

    def _advance_context(self, ctx: int, token: int) -> int:
        key = (ctx, token)
        hit = self._next_context.get(key)
        if hit is not None:
            return hit
        tail, _ = self._contexts[ctx]
        raw = _bytes(tail)
        start = len(raw)
        joined = _chars(raw + _bytes(self._texts[token]))
        # the character holding the token's first byte starts the token (it may begin in the tail)
        pos, first = 0, 0
        for i, c in enumerate(joined):
            n = len(_bytes(c))
            if pos + n > start:
                first = i
                break
            pos += n
        n = min(len(joined), _TAIL_CHARS)
        # a window may not start at an apostrophe: whether it opens a contraction depends on the
        # character before it (after a symbol or a space it continues a symbol run)
        while n < len(joined) and joined[-n] == "'":
            n += 1
        keep = joined[-n:]
        a0 = max(0, first - (len(joined) - len(keep)))
        new = (_abstract(keep, self._rep), a0)
        nid = self._context_id.get(new)
        if nid is None:
            nid = self._context_id[new] = len(self._contexts)
            self._contexts.append(new)
        self._next_context[key] = nid
        return nid

    # ------------------------------------------------------------------ the per-step interface
    def _split(self, state: int) -> tuple[int, int, int]:
        rest, flag = divmod(state, 3)
        ctx, last = divmod(rest, self.vocab_size + 1)
        return ctx, last, flag

    def allowed(self, state: int) -> np.ndarray:
        """Bool mask over the vocabulary of the tokens that may follow (EOS ids not included)."""
        hit = self._mask_cache.get(state)
        if hit is not None:
            self._mask_cache.move_to_end(state)
            return hit
        ctx, last, flag = self._split(state)
        okE, okX = self.pair_masks(last, ctx)
        m = okE | okX
        if flag == FLAG_WS:
            m = m & self._starts_ws
        elif flag == FLAG_TEXT:
            m = m & ~self._starts_ws
        self._mask_cache[state] = m
        if len(self._mask_cache) > self._entries:
            self._mask_cache.popitem(last=False)
        return m

    def allowed_words(self, state: int, n_words: int) -> np.ndarray:
        """:meth:`allowed` packed as a token bitmask of ``n_words`` uint32 words (the engine's
        layout), cached per state beside the bool masks."""
        hit = self._words_cache.get(state)
        if hit is None:
            packed = np.packbits(self.allowed(state), bitorder="little")
            buf = np.zeros(n_words * 4, dtype=np.uint8)
            buf[: len(packed)] = packed
            hit = buf.view(np.uint32)
            self._words_cache[state] = hit
            if len(self._words_cache) > self._entries:
                self._words_cache.popitem(last=False)
        else:
            self._words_cache.move_to_end(state)
        return hit

    def is_allowed(self, state: int, token: int) -> bool:
        if token in self.eos_ids:
            return self.can_end(state)
        return 0 <= token < self.vocab_size and bool(self.allowed(state)[token])

    def advance(self, state: int, token: int) -> int:
        """The state after ``token`` (which :meth:`allowed` allows)."""
        ctx, last, _ = self._split(state)
        okE, okX = self.pair_masks(last, ctx)
        e, x = bool(okE[token]), bool(okX[token])
        flag = FLAG_NONE if e and x else FLAG_WS if e else FLAG_TEXT
        return (self._advance_context(ctx, token) * (self.vocab_size + 1) + token) * 3 + flag

    @staticmethod
    def can_end(state: int) -> bool:
        return state % 3 != FLAG_TEXT

    def accepts(self, tokens: Sequence[int]) -> bool:
        """True when every step of ``tokens`` (a whole output) is allowed and it may end there."""
        return self.first_rejection(tokens) is None

    def first_rejection(self, tokens: Sequence[int]) -> int | None:
        """The index of the first token the filter refuses (``len(tokens)`` when only the end is
        refused), or None when the whole sequence is accepted."""
        s = self.start
        for i, t in enumerate(tokens):
            if not self.allowed(s)[t]:
                return i
            s = self.advance(s, t)
        return None if self.can_end(s) else len(tokens)


def _has_partial(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


def _bytes(s: str) -> bytes:
    return s.encode("utf-8", errors="surrogateescape")


def _is_partial(c: str) -> bool:
    return 0xDC80 <= ord(c) <= 0xDCFF


def _window(pattern, tail: str, a0: int, head: str, ctx: str) -> tuple[bool, bool]:
    """Pre-tokenize ``tail + head + ctx`` (the last token starting at character ``a0`` of ``tail``):
    (a boundary strictly inside the last token or inside the next one, a boundary at the seam).
    A character split across tokens is joined; one the head leaves unfinished counts as a symbol."""
    if not head:
        return False, True
    return _window1(pattern, tail, a0, head, ctx)


def _window1(pattern, tail: str, a0: int, head: str, ctx: str) -> tuple[bool, bool]:
    if (tail and _is_partial(tail[-1])) or _is_partial(head[0]):  # a character across the seam: by bytes
        raw = _bytes(tail) + _bytes(head)
        text = _chars(raw + _bytes(ctx))
        cuts = {len(_bytes(text[:m.start()])) for m in pattern.finditer(text)}
        ka, kb = len(_bytes(tail)), len(raw)
        lo = len(_bytes(tail[:a0]))
    else:
        text = tail + head + ctx
        cuts = {m.start() for m in pattern.finditer(text)}
        ka, kb, lo = len(tail), len(tail) + len(head), a0
    straddle = any(lo < c < ka or ka < c < kb for c in cuts if c > 0)
    return straddle, ka in cuts or ka == 0


def build_tables(tok_json: Mapping[str, Any], token_bytes: Sequence[bytes], *, hf_encode=None) -> dict:
    """The filter's tables for a byte-level BPE ``tokenizer.json`` (see the module docstring)."""
    model = tok_json.get("model") or {}
    if model.get("type") != "BPE":
        raise UnsupportedFeature(f"canonical tokenizations: only BPE tokenizers are supported, not {model.get('type')!r}")
    pre = tok_json.get("pre_tokenizer") or {}
    if not (pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space")):
        raise UnsupportedFeature(f"canonical tokenizations: only a ByteLevel pre-tokenizer with GPT-2's regex is "
                                 f"supported, not {json.dumps(pre)[:200]}")
    if tok_json.get("normalizer"):
        raise UnsupportedFeature("canonical tokenizations: tokenizers with a normalizer are not supported")
    vocab: dict[str, int] = model["vocab"]
    V = len(token_bytes)
    byte_id = {}
    for s, i in vocab.items():
        b = _byte_level_bytes(s)
        if b is not None and len(b) == 1:
            byte_id[b[0]] = int(i)
    ranks: dict[tuple[int, int], int] = {}
    merged: dict[tuple[int, int], int] = {}
    for r, m in enumerate(model.get("merges") or []):
        left, right = m.split(" ", 1) if isinstance(m, str) else m
        li, ri, oi = vocab.get(left), vocab.get(right), vocab.get(left + right)
        if li is None or ri is None or oi is None or (li, ri) in ranks:
            continue
        ranks[(li, ri)] = r
        merged[(li, ri)] = oi

    # each token's own BPE (the single-token check) and the merge tree it builds
    unigram = np.zeros(V, dtype=bool)
    trees: list = [None] * V  # token -> {node: (left, right, rank)} of its own BPE run
    for t in range(V):
        b = token_bytes[t]
        if not b:
            continue
        nodes = [byte_id.get(x, -1) for x in b]
        if -1 in nodes:
            continue
        kids: dict[int, tuple[int, int, int]] = {}
        while len(nodes) > 1:
            best, at = None, -1
            for i in range(len(nodes) - 1):
                r = ranks.get((nodes[i], nodes[i + 1]))
                if r is not None and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            o = merged[(nodes[at], nodes[at + 1])]
            kids[o] = (nodes[at], nodes[at + 1], best)
            nodes[at:at + 2] = [o]
        if nodes == [t]:
            unigram[t] = True
            trees[t] = kids
    pattern = GPT2_PRETOKENIZE
    import regex

    pat = regex.compile(pattern)
    texts = [_chars(b) for b in token_bytes]
    for t in range(V):  # one pre-token alone (a token with part of a character is judged in context)
        if unigram[t] and not _has_partial(token_bytes[t]):
            ms = [m.group() for m in pat.finditer(texts[t])]
            if len(ms) != 1 or ms[0] != texts[t]:
                unigram[t] = False
    if hf_encode is not None:  # the tokenizer's own verdict for tokens that are whole characters
        whole = [t for t in range(V) if unigram[t] and not _has_partial(token_bytes[t])]
        enc = hf_encode([token_bytes[t].decode("utf-8") for t in whole])
        for t, e in zip(whole, enc):
            if list(e) != [t]:
                unigram[t] = False

    right_spine: list = [None] * (V + 1)
    left_nodes: dict[int, list[tuple[int, int]]] = {}
    for t in range(V):
        if not unigram[t]:
            right_spine[t] = []
            continue
        kids = trees[t]
        rs, ls = [(t, _INF)], [(t, _INF)]
        node = t
        while node in kids:
            left, right, r = kids[node]
            rs.append((right, r))
            node = right
        node = t
        while node in kids:
            left, right, r = kids[node]
            ls.append((left, r))
            node = left
        right_spine[t] = rs
        for y, cy in ls:
            left_nodes.setdefault(y, []).append((cy, t))
    right_spine[V] = []
    left_index = {}
    for y, lst in left_nodes.items():
        lst.sort(key=lambda p: -p[0])
        left_index[y] = (np.array([c for c, _ in lst], dtype=np.int64), np.array([t for _, t in lst], dtype=np.int64))
    by_x: dict[int, list[tuple[int, int]]] = {}
    for (x, y), r in ranks.items():
        by_x.setdefault(x, []).append((r, y))
    merges_from = {}
    for x, lst in by_x.items():
        lst.sort()
        merges_from[x] = (np.array([y for _, y in lst], dtype=np.int64), np.array([r for r, _ in lst], dtype=np.int64))

    rep = _classes()
    heads: dict[str, int] = {}
    head_key = np.zeros(V, dtype=np.int64)
    starts_ws = np.zeros(V, dtype=bool)
    space = regex.compile(r"\s")
    abstract = []
    for t in range(V):
        s = texts[t]
        a = _abstract(s, rep)
        abstract.append(a)
        if s:
            starts_ws[t] = bool(space.match(s[0]))
        head_key[t] = heads.setdefault(a[:_HEAD_CHARS], len(heads))
    return {"vocab_size": V, "pattern": pattern, "unigram": unigram, "starts_ws": starts_ws,
            "head_key": head_key, "heads": list(heads), "texts": abstract,
            "right_spine": right_spine, "left_index": left_index, "merges_from": merges_from}
