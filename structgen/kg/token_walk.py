"""Token masks for a byte-level constraint that changes with the graph (a *tracker*).

A graph constraint decides, byte by byte, whether the text may go on: ``tracker.step(state, byte)``
returns the next state or None.  The tokens it allows from a state are the vocabulary entries whose
bytes it takes one after another; the walk below finds them without testing every token:

* the vocabulary is one sorted list of byte strings, so a trie node is a range of that list (no
  per-node objects), and a walk descends only into bytes the tracker takes -- inside an entity name
  that is a handful of nodes;
* a state that many bytes leave unchanged (free text, a variable's name, a FILTER expression) names
  those bytes (``tracker.invariant(state)``): every token made of them only is allowed at once, and
  the other tokens are walked from their first other byte, from a sorted list of those suffixes
  built once per byte set.

Masks are cached per state, bounded in bytes (``structgen.byte_lru``)."""
from __future__ import annotations

from bisect import bisect_left
from typing import Any, Hashable, Protocol

import numpy as np

from ..byte_lru import ByteLRU
from ..uids import new_uid

__all__ = ["Tracker", "SortedTrie", "TokenWalker"]

MASK_CACHE_BYTES = 32 << 20
#: the masks of every walker and tracker, keyed by their serial numbers and the tracker's state (a
#: serial number is never reused, so a mask cannot outlive the tracker it was made for into another)
_MASKS = ByteLRU(MASK_CACHE_BYTES, name="kg.masks")


class Tracker(Protocol):
    """A byte-level constraint: hashable states, None for a refused byte."""

    initial: Hashable
    uid: int  # a serial number (structgen.uids.new_uid): the mask cache's key

    def step(self, state: Any, byte: int) -> Any | None: ...

    def invariant(self, state: Any) -> bytes | None:
        """The bytes ``b`` with ``step(state, b) == state`` (as a 256-byte table of 0/1), or None."""

    def can_end(self, state: Any) -> bool: ...


class SortedTrie:
    """Byte strings (with a token id each) sorted, read as a trie: a node is ``(lo, hi, depth)``."""

    def __init__(self, keys: list[bytes], ids: list[int]):
        order = sorted(range(len(keys)), key=keys.__getitem__)
        self.keys = [keys[i] for i in order]
        self.ids = [ids[i] for i in order]

    def walk(self, tracker: Tracker, state: Any, out: list[int]) -> None:
        """Append the ids of the keys ``tracker`` takes whole from ``state``."""
        keys, ids, step = self.keys, self.ids, tracker.step
        stack = [(0, len(keys), 0, state)]
        while stack:
            lo, hi, d, st = stack.pop()
            i = lo
            if d:
                while i < hi and len(keys[i]) == d:  # keys ending here: taken whole
                    out.append(ids[i])
                    i += 1
            while i < hi:
                k = keys[i]
                b = k[d]
                j = hi if b == 255 else bisect_left(keys, k[:d] + bytes((b + 1,)), i, hi)
                nxt = step(st, b)
                if nxt is not None:
                    stack.append((i, j, d + 1, nxt))
                i = j


class TokenWalker:
    """The allowed-token masks of one tracker over one tokenizer's vocabulary."""

    def __init__(self, token_bytes: list[bytes], special_ids: set[int] | frozenset[int], vocab_size: int,
                 eos_ids: frozenset[int] | set[int]):
        self.vocab_size = vocab_size
        self.n_words = (vocab_size + 31) // 32
        self.eos_ids = frozenset(eos_ids)
        ids = [i for i, b in enumerate(token_bytes[:vocab_size]) if b and i not in special_ids]
        self._tokens = [token_bytes[i] for i in ids]
        self._ids = np.array(ids, dtype=np.int64)
        self.trie = SortedTrie(self._tokens, ids)
        self._classes: dict[bytes, tuple[np.ndarray, SortedTrie]] = {}
        self.uid = new_uid()
        self._padded = None

    # -- byte-set classes ---------------------------------------------------------------------------
    def _byte_matrix(self) -> tuple[np.ndarray, np.ndarray]:
        if self._padded is None:
            n = len(self._tokens)
            width = max(len(t) for t in self._tokens)
            mat = np.full((n, width), 256, dtype=np.int16)  # 256: past the token's end
            for r, t in enumerate(self._tokens):
                mat[r, : len(t)] = np.frombuffer(t, dtype=np.uint8)
            self._padded = (mat, np.array([len(t) for t in self._tokens]))
        return self._padded

    def _class(self, table: bytes) -> tuple[np.ndarray, SortedTrie]:
        """Tokens made only of ``table``'s bytes (as mask words) and the others' suffixes from
        their first other byte."""
        hit = self._classes.get(table)
        if hit is not None:
            return hit
        mat, lens = self._byte_matrix()
        keep = np.zeros(257, dtype=bool)
        keep[:256] = np.frombuffer(table, dtype=np.uint8) != 0
        keep[256] = True
        inside = keep[mat]
        first_out = np.where(inside.all(axis=1), -1, np.argmin(inside, axis=1))
        free = self._words(self._ids[first_out < 0])
        rows = np.flatnonzero(first_out >= 0)
        suffixes = [self._tokens[r][first_out[r]:] for r in rows.tolist()]
        trie = SortedTrie(suffixes, self._ids[rows].tolist())
        self._classes[table] = (free, trie)
        return free, trie

    def _words(self, ids) -> np.ndarray:
        bits = np.zeros(self.n_words * 32, dtype=np.uint8)
        bits[np.asarray(ids, dtype=np.int64)] = 1
        return np.packbits(bits, bitorder="little").view(np.uint32).copy()

    # -- masks --------------------------------------------------------------------------------------
    def mask(self, tracker: Tracker, state: Any) -> np.ndarray:
        """The tokens ``tracker`` allows from ``state`` as uint32 words (EOS where it may end);
        read-only, cached per (walker, tracker, state)."""
        ck = (self.uid, tracker.uid, state)
        hit = _MASKS.get(ck)
        if hit is not None:
            return hit
        out: list[int] = []
        table = tracker.invariant(state)
        if table is None:
            self.trie.walk(tracker, state, out)
            words = self._words(out)
        else:
            free, trie = self._class(table)
            trie.walk(tracker, state, out)
            words = free | self._words(out)
        if tracker.can_end(state):
            for e in self.eos_ids:
                if e < self.vocab_size:
                    words[e >> 5] |= np.uint32(1 << (e & 31))
        words.setflags(write=False)
        _MASKS.put(ck, words)
        return words

    def allows(self, tracker: Tracker, state: Any, data: bytes) -> Any | None:
        """The state after ``data`` (None when a byte is refused)."""
        for b in data:
            state = tracker.step(state, b)
            if state is None:
                return None
        return state
