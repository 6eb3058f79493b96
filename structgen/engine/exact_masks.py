"""Exact masks for grammars with checks at value boundaries (``structgen.engine.checks``).

A grammar's cached mask depends on the automaton state only; a check depends on the output too,
so the cached mask can allow a token whose value then fails its check.  A serving engine ends a
request with an error when a token drawn from the mask is refused (vLLM does), and a sampler's
distribution must be the one it masked with, so the mask handed out is made exact here: every
allowed token that *could* run a check is tried on the real output, and the ones a check refuses
are cleared.

A check runs only where a lexeme of a *trigger* terminal ends (one whose scan can complete a
checked value or an array item: ``GrammarChecks.trigger_terms``), at a lexeme boundary or where
the lexeme cannot grow (an accepting state with no way out, e.g. a string's closing quote).  So
only these tokens are tried, the rest provably run no check:

* tokens crossing a lexeme boundary (outside the lexer state's inside walk) that contain a byte
  that can end a trigger lexeme -- or any crossing token, when the pending lexeme itself may be
  a trigger's;
* tokens staying inside the lexeme whose last byte can end a trigger lexeme and lead into an
  accepting dead end.

The byte sets are cached per grammar and lexer core, the per-byte token sets per vocabulary, so a
step costs a few numpy word operations plus one trial per candidate.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..byte_lru import ByteLRU
from .checks import CheckRun
from .walks import MASK

__all__ = ["exact_mask"]

_by_byte: dict[tuple[int, str], np.ndarray] = {}  # (trie uid, kind) -> [256, n_words] token sets
_closing: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # lexer core -> closing bytes
_triggers: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # grammar checks -> trigger words
#: candidate token ids per automaton state (keyed as the grammar's masks are): a function of the
#: state alone, so a step with checks costs a dictionary hit plus the trials
CANDIDATES = ByteLRU(8 << 20, name="exact.candidates")


def _token_sets(trie, kind: str) -> np.ndarray:
    """[256, n_words] uint32: row b holds the tokens whose last byte is b (``kind="last"``) or
    that contain b anywhere (``"any"``).  1 MB per 32k tokens each."""
    key = (trie.uid, kind)
    hit = _by_byte.get(key)
    if hit is None:
        if len(_by_byte) >= 8:
            _by_byte.clear()
        n = ((trie.vocab_size + 31) // 32) * 32
        tb = trie.token_bytes
        if kind == "last":
            ids = np.array([i for i, b in enumerate(tb) if b], dtype=np.int64)
            rows = np.frombuffer(b"".join(tb[i][-1:] for i in ids.tolist()), dtype=np.uint8)
        else:
            lengths = np.fromiter((len(b) for b in tb), dtype=np.int64, count=len(tb))
            ids = np.repeat(np.arange(len(tb)), lengths)
            rows = np.frombuffer(b"".join(tb), dtype=np.uint8)
        bits = np.zeros((256, n), dtype=bool)
        bits[rows, ids] = True
        hit = np.packbits(bits, axis=1, bitorder="little").view(np.uint32)
        _by_byte[key] = hit
    return hit


def warm_up(trie) -> None:
    """Make the vocabulary's per-byte token sets now (~0.1 s over 129k tokens), not in a first mask."""
    _token_sets(trie, "last")
    _token_sets(trie, "any")


def _bytes_into(trans: np.ndarray, classmap: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Bool [256]: the bytes on which some state of a DFA table steps into one of ``targets``."""
    into = ((trans >= 0) & targets[np.where(trans >= 0, trans, 0)]).any(axis=0)  # per byte class
    return into[classmap.astype(np.intp)]


def _closing_bytes(core) -> np.ndarray:
    """The bytes that lead some state of ``core`` into an accepting state with no way out."""
    hit = _closing.get(core)
    if hit is None:
        dead = (core.trans < 0).all(axis=1) & (core.acc_id >= 0)
        hit = _closing[core] = np.flatnonzero(_bytes_into(core.trans, core.classmap, dead)).astype(np.uint8)
    return hit


def _trigger_bytes(g) -> np.ndarray:
    """The bytes that can end a lexeme of one of the grammar's trigger terminals."""
    ends = np.zeros(256, dtype=bool)
    for t in g.checks.trigger_terms:
        d = g.term_dfas[t]
        ends |= _bytes_into(d.trans, d.classmap, d.accept)
    return np.flatnonzero(ends).astype(np.uint8)


def _union(sets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return np.bitwise_or.reduce(sets[rows], axis=0) if len(rows) else np.zeros(sets.shape[1], dtype=np.uint32)


def _static_sets(g) -> dict:
    """Per grammar: the trigger bytes, the tokens containing one, and per lexer core the tokens
    ending in a trigger byte that closes a lexeme (made on first need)."""
    hit = _triggers.get(g.checks)
    if hit is None:
        trig = _trigger_bytes(g)
        hit = _triggers[g.checks] = {"bytes": trig, "ends": _union(_token_sets(g.trie, "any"), trig), "closing": {}}
    return hit


def _candidates(g, lx, ls: int, mask: np.ndarray) -> np.ndarray:
    """The allowed tokens whose advance may run a check (token ids, ascending; int64)."""
    static = _static_sets(g)
    inside = g._walker.inside(lx, ls)[MASK]
    crossing = mask & ~inside
    pending = int(lx.boundary[ls]) if ls else -1
    if pending >= 0 and not g.checks.trigger_terms.isdisjoint(lx.acc_set(pending)):
        cand = crossing  # the pending lexeme may be a trigger's: its end runs a check
    else:
        cand = crossing & static["ends"]
    closing = static["closing"].get(lx.core.uid)
    if closing is None:
        closing = static["closing"][lx.core.uid] = _union(
            _token_sets(g.trie, "last"), np.intersect1d(_closing_bytes(lx.core), static["bytes"]))
    cand |= mask & inside & closing
    for e in g.eos_ids:  # EOS is decided by is_accepting, which runs the checks already
        cand[e >> 5] &= ~np.uint32(1 << (e & 31))
    words = np.flatnonzero(cand)
    if not len(words):
        return words
    bits = np.unpackbits(cand[words].view(np.uint8).reshape(-1, 4), axis=1, bitorder="little")
    w, b = np.nonzero(bits)
    return words[w] * 32 + b


def _by_bytes(g, cands) -> tuple[int, ...]:
    """The candidate ids sorted by their bytes, so tokens sharing a prefix are neighbours."""
    tb = g.trie.token_bytes
    return tuple(sorted(cands, key=tb.__getitem__))


def refused_tokens(g, state: tuple, tracker: tuple, out, tokens: tuple[int, ...]) -> list[int]:
    """The ``tokens`` (sorted by bytes) that ``g.advance`` with checks refuses from ``state``
    after ``out``.  The tokens are walked as a trie: a prefix shared by several tokens is stepped
    (and its checks run: a closing quote's value check, an array item's identity) once, not once
    per token -- most candidates share their first byte, the one that ends the checked value."""
    token_bytes = g.trie.token_bytes
    step, finish = g.step, g.finish
    base = len(out)
    buf = bytearray(out)  # the output, then the bytes of the path being tried
    run = CheckRun.over(g, tracker, buf, base)
    cid, lx, ls = state
    path: list = [(cid, lx, ls, tracker)]  # path[d]: the state after d bytes of the current prefix, or None
    prev = b""
    refused = []
    for t in tokens:
        data = token_bytes[t]
        k = 0
        limit = min(len(data), len(prev), len(path) - 1)
        while k < limit and data[k] == prev[k]:
            k += 1
        del path[k + 1:]
        del buf[base + k:]
        buf += data[k:]
        st = path[k]
        while st is not None and k < len(data):
            c, lx, ls, tr = st
            run.tracker, run.end = tr, base + k
            nxt = step(c, lx, ls, data[k], run)
            st = None if nxt is None else (nxt[0], nxt[1], nxt[2], run.tracker)
            path.append(st)
            k += 1
        if st is None or finish(st[0], st[1], st[2]) is None:
            refused.append(t)
        prev = data
    return refused


def exact_mask(g, state: tuple, tracker: tuple, out: bytearray, mask: np.ndarray) -> np.ndarray:
    """``mask`` (the automaton's, read-only) without the tokens a check refuses from ``state`` after
    ``out``; the same array when nothing is refused."""
    cid, lx, ls = state
    key = g._uid | (cid << 48) | (lx.id << 28) | ls  # as CompiledGrammar.mask keys its masks
    cands = CANDIDATES.get(key)
    if cands is None:
        cands = _by_bytes(g, _candidates(g, lx, ls, mask).tolist())  # ints in a tuple: untracked by the GC
        CANDIDATES.put(key, cands)
    if not cands:
        return mask
    refused = refused_tokens(g, state, tracker, out, cands)
    if not refused:
        return mask
    m = mask.copy()
    for t in refused:
        m[t >> 5] &= ~np.uint32(1 << (t & 31))
    return m
