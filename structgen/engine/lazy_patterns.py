"""JSON string patterns too large for one automaton, followed by lazy DFAs in the mask.

``pattern: "^[ab]*a[ab]{22}$"`` ("an ``a`` 23rd from the end") has a 2**23-state DFA, so the front end
keeps a relaxed form of it in the string's automaton (``[ab]*a[ab]{4,}``) and hands the terminal the
pattern's DFA made on demand over the JSON-encoded content (``Terminal.lazy_patterns``,
``structgen.automata.lazy_dfa``), with a check where the string closes (what ``accept_token`` runs).
The relaxed automaton alone would let a string grow that can no longer end matching: a dead end for a
serving engine, minutes of rollbacks for a search.

So the mask follows the lazy DFA, exactly:

* inside such a string, the content written so far (from the value's opening quote, which the checks'
  tracker knows) is run through it, and one walk of the vocabulary from the state it ends in -- cached
  per state -- refuses every token that leaves the pattern, or closes the string where the content
  does not match;
* a token that opens such a string and ends inside it (`` "ab``) has the content it writes run
  through the DFA, once per grammar state for the tokens the grammar's mask allows.

A token kept leaves content the pattern can still complete (every state of the lazy DFA reaches an
accepting one), so no dead end comes from the pattern; the budget guard reads the bytes the pattern
needs beyond the relaxed automaton (:func:`pattern_shortfall`).
"""
from __future__ import annotations

import numpy as np

from ..byte_lru import ByteLRU
from .char_bounds import cleared, string_value_at

__all__ = ["lazy_pattern_mask", "pattern_shortfall", "warm_up"]

_QUOTE, _BACKSLASH = 0x22, 0x5C
#: Kept per process: the tokens a pattern takes, per lazy state a string reached (one walk each); the
#: tokens refused per grammar state where a token may open such a string.
WALKS = ByteLRU(16 << 20, name="engine.lazy_patterns.walks")
OPENERS = ByteLRU(4 << 20, name="engine.lazy_patterns.openers")
_opener_tables: dict[tuple, tuple] = {}  # (trie uid, starts inside a string) -> (token ids, content offsets)
_refused_by: dict[tuple, np.ndarray] = {}  # (trie uid, starts inside, lazy DFA) -> bool per opening token


def _opening_tokens(trie, inside: bool) -> tuple[np.ndarray, np.ndarray]:
    """(token ids, offset after the opening quote) of the tokens that, read from outside a string (or
    from inside one, ``inside``), open a string and end inside it having written content to it."""
    key = (trie.uid, inside)
    hit = _opener_tables.get(key)
    if hit is None:
        ids, offsets = [], []
        for t, tb in enumerate(trie.token_bytes):
            if not tb or _QUOTE not in tb:
                continue
            in_str, esc, opened = inside, False, -1
            for i, b in enumerate(tb):
                if esc:
                    esc = False
                elif in_str:
                    if b == _BACKSLASH:
                        esc = True
                    elif b == _QUOTE:
                        in_str = False
                elif b == _QUOTE:
                    in_str, opened = True, i + 1
            if in_str and 0 <= opened < len(tb):
                ids.append(t)
                offsets.append(opened)
        hit = _opener_tables[key] = (np.array(ids, dtype=np.int64), np.array(offsets, dtype=np.int64))
    return hit


def _content_mask(g, dfa, content: bytes) -> np.ndarray | None:
    """uint32 words: the tokens the pattern takes after ``content`` -- those that keep it alive or
    close the string where it matches (None: the content is refused)."""
    s = dfa.run(dfa.start, content)
    if s < 0:
        return None
    key = (g.trie.uid, dfa.uid, s)
    hit = WALKS.get(key)
    if hit is None:
        hit = dfa.mask(s, g.trie, g.n_words, closer=_QUOTE)
        WALKS.put(key, hit)
    return hit


def _refused_contents(trie, inside: bool, dfa) -> np.ndarray:
    """Bool per opening token (:func:`_opening_tokens`): the pattern refuses the content it writes."""
    key = (trie.uid, inside, dfa.uid)
    hit = _refused_by.get(key)
    if hit is None:
        ids, offsets = _opening_tokens(trie, inside)
        tb = trie.token_bytes
        hit = np.array([dfa.run(dfa.start, tb[t][off:]) < 0 for t, off in zip(ids.tolist(), offsets.tolist())],
                       dtype=bool)
        if len(_refused_by) > 256:
            _refused_by.clear()
        _refused_by[key] = hit
    return hit


def _opener_refusals(g, state: tuple, inside: bool) -> np.ndarray:
    """The token ids allowed by the grammar's mask at ``state`` that open a string of a lazily
    followed terminal with content its pattern refuses.  Only tokens some pattern of the grammar
    refuses are advanced through the grammar, to learn whose string they open."""
    cid, lx, ls = state
    key = (g._serial, cid, lx.id, ls, inside)
    hit = OPENERS.get(key)
    if hit is not None:
        return hit
    ids, offsets = _opening_tokens(g.trie, inside)
    base = g.mask(cid, lx, ls)
    pick = ((base[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).astype(bool)
    refusing = {d.uid: _refused_contents(g.trie, inside, d) for ds in g.lazy_patterns.values() for d in ds}
    pick &= np.logical_or.reduce(list(refusing.values()))
    tb = g.tokenizer.token_bytes
    refused = []
    for i in np.flatnonzero(pick).tolist():
        t = int(ids[i])
        nxt = g.advance(cid, lx, ls, tb[t])
        if nxt is None:
            continue
        _, lx2, ls2 = nxt
        live = lx2.core.single_live(ls2)
        dfas = None if live is None else g.lazy_patterns.get(lx2.term_ids[live[0]])
        if dfas is not None and any(refusing[d.uid][i] for d in dfas):
            refused.append(t)
    hit = np.array(refused, dtype=np.int64)
    OPENERS.put(key, hit)
    return hit


def lazy_pattern_mask(g, state: tuple, tracker: tuple, out, mask: np.ndarray) -> np.ndarray:
    """``mask`` without the tokens after which a string of a lazily followed pattern
    (``g.lazy_patterns``) can no longer match it; the same array when none is removed."""
    if not tracker[1]:  # (after a backslash no token opens a string)
        refused = _opener_refusals(g, state, bool(tracker[0]))
        if len(refused):
            mask = cleared(mask, refused)
    at = string_value_at(state, tracker, g.lazy_patterns)
    if at is None:
        return mask
    _, _, dfas, start = at
    content = bytes(out[start + 1:])
    for d in dfas:
        kept = _content_mask(g, d, content)
        if kept is None:
            return mask  # written before the pattern was followed (a token the check will refuse)
        mask = mask & kept
    return mask


def pattern_shortfall(g, state: tuple, tracker: tuple, out) -> float:
    """How many more bytes the string being written needs to close, by its lazily followed patterns,
    than its relaxed automaton says (0 outside such a string): what the budget guard adds to the
    grammar's shortest completion."""
    at = string_value_at(state, tracker, g.lazy_patterns)
    if at is None:
        return 0.0
    j, sub, dfas, start = at
    content = bytes(out[start + 1:])
    need = 0.0
    for d in dfas:
        s = d.run(d.start, content)
        need = max(need, float("inf") if s < 0 else float(d.dist[s]) + 1)  # (+ the closing quote)
    relaxed = float(state[1].core.dfas[j].dist_to_accept()[sub])
    return max(0.0, need - relaxed)


def warm_up(trie) -> None:
    """Find the vocabulary's string-opening tokens now (~10 ms over 129k tokens), not in a first mask."""
    _opening_tokens(trie, False)
    _opening_tokens(trie, True)
