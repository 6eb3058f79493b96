"""Length bounds a string's automaton does not hold, counted by the mask.

``pattern: "^(?:\\S+\\s+){0,29}\\S+$"`` with ``maxLength: 300`` has no small DFA: the product of the
pattern's automaton with a 300-character counter passes half a million states, so the front end
keeps the pattern's automaton alone and marks the terminal with its bounds
(``Terminal.char_bounds``), the value being checked where it closes.  A check only runs at the
closing quote, though: a string that outgrew ``maxLength`` is a dead end by then (every closing
quote refused, and no way back for a serving engine).

So the mask counts instead.  The characters written so far in the string are counted from the
output; one walk of the vocabulary from the lexer's sub-state records, per token, how many
characters it starts before the string closes and the fewest characters the pattern needs after
it (a shortest path in the pattern's automaton, a character weighing 1 and the bytes of one
character 0).  A token is kept when that shortest completion still fits ``maxLength`` (and, if it
closes the string, when the count lands within the bounds): exactly the tokens after which a
valid string exists, wherever the shortest completion is not below ``minLength`` too.  The walk is
cached per automaton state, so a step costs a count over the string so far and, near the bound,
one vectorised filter.
"""
from __future__ import annotations

import numpy as np

from ..automata.fsa import DFA
from ..automata.search_kernels import predecessors
from ..byte_lru import ByteLRU
from .counted import json_string_automaton, lockstep
from .json_tracker import value_start
from ..automata.kernel_cache import kernel

__all__ = ["char_bounds_mask", "CharCounts", "cleared", "string_value_at"]

_QUOTE = 0x22
#: Fewest characters to close from a state that cannot close (never in a trimmed automaton); also
#: the room of a string with no maxLength.
_FAR = 1 << 30
#: Walks kept per process (one per automaton state a bounded string reached).
WALKS = ByteLRU(16 << 20, name="engine.char_bounds.walks")


@kernel(nogil=True)
def _fewest_chars(dtrans, accept, pair, b_state, quote_class):
    """Per state: the fewest characters started before an accepting state (the closed string), by a
    breadth-first search backwards whose edges weigh 1 where a character starts (out of a character
    boundary on any byte but the quote) and 0 elsewhere."""
    n = dtrans.shape[0]
    offsets, preds = predecessors(dtrans)
    md = np.full(n, _FAR, dtype=np.int32)
    cur = np.empty(2 * len(preds) + n + 1, dtype=np.int64)  # a state enters a level at most once per edge
    nxt = np.empty(2 * len(preds) + n + 1, dtype=np.int64)
    n_cur = 0
    for s in range(n):
        if accept[s]:
            md[s] = 0
            cur[n_cur] = s
            n_cur += 1
    level = 0
    while n_cur > 0:
        n_nxt = 0
        i = 0
        while i < n_cur:  # the level grows as weight-0 edges reach new states
            t = cur[i]
            i += 1
            if md[t] != level:
                continue  # reached at a lower level since
            for e in range(offsets[t], offsets[t + 1]):
                s = preds[e]
                w = 1 if (pair[s] == b_state and dtrans[s, quote_class] != t) else 0
                if level + w < md[s]:
                    md[s] = level + w
                    if w == 0:
                        cur[n_cur] = s
                        n_cur += 1
                    else:
                        nxt[n_nxt] = s
                        n_nxt += 1
        cur, nxt = nxt, cur
        n_cur = n_nxt
        level += 1
    return md


@kernel(nogil=True)
def _walk(node_byte, node_depth, node_end, tok_ptr, tok_ids, dtrans, dcm, closed, pair, md, b_state, start,
          max_depth, tok_out, need_out, closed_out):
    """Walk the trie from state ``start``: per token, the fewest characters the string still needs
    with it -- those it starts plus the fewest after it, or those before the quote when it closes the
    string -- and whether it closes it."""
    state_at = np.empty(max_depth + 2, dtype=np.int32)
    count_at = np.zeros(max_depth + 2, dtype=np.int32)
    state_at[0] = start
    n = 0
    j = 1
    end = node_end[0]
    while j < end:
        d = node_depth[j]
        ps = state_at[d - 1]
        pc = count_at[d - 1]
        y = node_byte[j]
        ns = dtrans[ps, dcm[y]]
        if ns < 0:
            j = node_end[j]
            continue
        nc = pc + 1 if (pair[ps] == b_state and y != 0x22) else pc
        if closed[ns]:  # the string closed here: every token below writes nothing more into it
            for p in range(tok_ptr[j], tok_ptr[node_end[j]]):
                tok_out[n] = tok_ids[p]
                need_out[n] = nc
                closed_out[n] = True
                n += 1
            j = node_end[j]
            continue
        state_at[d] = ns
        count_at[d] = nc
        for p in range(tok_ptr[j], tok_ptr[j + 1]):
            tok_out[n] = tok_ids[p]
            need_out[n] = nc + md[ns]
            closed_out[n] = False
            n += 1
        j += 1
    return n


@kernel(nogil=True)
def _count_started(btrans, bcm, b_state, data):
    """Characters started by ``data`` (string content after the opening quote)."""
    a = b_state
    c = 0
    for i in range(len(data)):
        y = data[i]
        if a == b_state and y != 0x22:
            c += 1
        a = btrans[a, bcm[y]]
        if a < 0:
            return -1
    return c


class CharCounts:
    """What counting needs of one string automaton: its states paired with the JSON string's (where
    characters begin) and each state's fewest characters to the closing quote."""

    __slots__ = ("uid", "b_state", "pair", "fewest", "closed", "_dtrans", "_dcm", "_btrans", "_bcm")

    def __init__(self, dfa: DFA, base: DFA):
        self.uid = dfa.uid
        q = base.classmap[_QUOTE]
        self.b_state = int(base.trans[base.start, q])
        pair, _, ok, _ = lockstep(dfa, base, base.start, self.b_state, int(base.trans[self.b_state, q]),
                                  counts=False)
        self._dtrans = np.ascontiguousarray(dfa.trans, dtype=np.int32)
        self._dcm = dfa.classmap.astype(np.int64)
        self._btrans = np.ascontiguousarray(base.trans, dtype=np.int32)
        self._bcm = base.classmap.astype(np.int64)
        self.pair = pair if ok else None
        self.fewest = _fewest_chars(self._dtrans, np.ascontiguousarray(dfa.accept, dtype=np.bool_), pair,
                                    self.b_state, int(dfa.classmap[_QUOTE])) if ok else None
        self.closed = np.ascontiguousarray(dfa.accept & (dfa.trans < 0).all(axis=1), dtype=np.bool_)

    def started(self, content: bytes) -> int:
        """Characters started by ``content`` (the string's bytes after its opening quote); -1 when
        they are no JSON string prefix."""
        return int(_count_started(self._btrans, self._bcm, self.b_state, np.frombuffer(content, dtype=np.uint8)))

    def walk(self, trie, state: int) -> tuple:
        """(token ids, the fewest characters the string needs with each, whether each closes it,
        the largest need, the smallest need of a closing token) from ``state``."""
        key = (trie.uid, self.uid, state)
        hit = WALKS.get(key)
        if hit is None:
            n_tok = len(trie.tok_ids)
            tok = np.empty(n_tok, dtype=np.int32)
            need = np.empty(n_tok, dtype=np.int32)
            closed = np.empty(n_tok, dtype=np.bool_)
            n = _walk(trie.node_byte, trie.node_depth, trie.node_end, trie.tok_ptr, trie.tok_ids, self._dtrans,
                      self._dcm, self.closed, self.pair, self.fewest, self.b_state, int(state), trie.max_depth, tok,
                      need, closed)
            tok, need, closed = tok[:n].copy(), need[:n].copy(), closed[:n].copy()
            shut = need[closed]
            hit = (tok, need, closed, int(need.max()) if n else -1, int(shut.min()) if len(shut) else _FAR)
            WALKS.put(key, hit)
        return hit


def char_counts(dfa: DFA) -> CharCounts | None:
    """The automaton's :class:`CharCounts` (kept on it); None when its states do not fix where
    characters begin, or no JSON string automaton was named."""
    hit = getattr(dfa, "_char_counts", False)
    if hit is False:
        base = json_string_automaton()
        cc = CharCounts(dfa, base) if base is not None else None
        hit = dfa.keep("_char_counts", cc if cc is not None and cc.pair is not None else None)
    return hit


def _string_start(tracker: tuple) -> int:
    """Offset of the opening quote of the string being written (a value, not a key), -1 if unknown."""
    frames = tracker[2]
    if frames and frames[-1][0] == "o" and frames[-1][2] >= 0:
        return -1  # an object's key: keys carry no counted bounds
    return value_start(tracker)


def string_value_at(state: tuple, tracker: tuple, table: dict) -> tuple | None:
    """(the lexer's DFA index, its sub-state, ``table``'s entry, the offset of the opening quote) when
    the output is inside a string value (not a key) whose lexeme the lexer reads with exactly one
    terminal alive, a terminal ``table`` has; else None."""
    if not tracker[0]:
        return None  # outside a string
    cid, lx, ls = state
    live = lx.core.single_live(ls)
    if live is None:
        return None
    j, sub = live
    entry = table.get(lx.term_ids[j])
    if entry is None:
        return None
    start = _string_start(tracker)
    return None if start < 0 else (j, sub, entry, start)


def char_bounds_mask(g, state: tuple, tracker: tuple, out, mask: np.ndarray) -> np.ndarray:
    """``mask`` without the tokens after which the string being written can no longer meet its
    counted bounds (``g.char_bounds``); the same array when none is removed or the lexer is not
    inside exactly one bounded string."""
    at = string_value_at(state, tracker, g.char_bounds)
    if at is None:
        return mask
    j, sub, bounds, start = at
    cc = char_counts(state[1].core.dfas[j])
    if cc is None:
        return mask
    c = cc.started(bytes(out[start + 1:]))
    if c < 0:
        return mask
    lo, hi = bounds
    room = _FAR if hi is None else hi - c
    tok, need, closed, max_need, min_shut = cc.walk(g.trie, sub)
    if max_need <= room and min_shut >= lo - c:
        return mask
    ids = tok[(need > room) | closed & (need < lo - c)]
    return cleared(mask, ids) if len(ids) else mask


def cleared(mask: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """A copy of ``mask`` (uint32 words) with the bits of token ids ``ids`` cleared."""
    out = mask.copy()
    np.bitwise_and.at(out, ids >> 5, ~np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32)))
    return out
