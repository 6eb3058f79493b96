"""``GraphMatcher``: a grammar Matcher and a graph tracker held to the same output.

The grammar (an engine :class:`~structgen.engine.matcher.Matcher`) owns the syntax; the tracker owns
the graph (which terms a slot may hold, given what was written).  The mask is the AND of both masks,
a token is accepted only when both take its bytes, and EOS only when both may end, so "allowed by
the mask" and "accepted" stay the same thing and every output the runtime returns satisfies both.
It keeps the Matcher contract (``docs/architecture.md``), so the decoding loop, speculation, the
budget guard and the sequence samplers run on it unchanged."""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..engine.matcher import Matcher, accepted_prefix, write_mask_row
from .token_walk import TokenWalker, Tracker

__all__ = ["GraphMatcher", "walker_for"]

_WALKERS: dict[int, tuple[Any, TokenWalker]] = {}  # id(tokenizer info) -> (that info, its walker)


def walker_for(info) -> TokenWalker:
    """The token walker of a tokenizer (one per process and tokenizer)."""
    hit = _WALKERS.get(id(info))
    if hit is None or hit[0] is not info:
        hit = _WALKERS[id(info)] = (info, TokenWalker(info.token_bytes, info.special_ids, info.vocab_size,
                                                      info.eos_ids))
    return hit[1]


class GraphMatcher:
    """A grammar matcher constrained further by a graph tracker (see the module docstring)."""

    may_dead_end = False

    def __init__(self, base: Matcher, tracker: Tracker, walker: TokenWalker | None = None):
        self.base = base
        self.grammar = base.grammar
        self.tracker = tracker
        self.walker = walker or walker_for(base.grammar.tokenizer)
        self.mask_seconds = 0.0
        self.mask_calls = 0
        self._state = tracker.initial
        self._states: list = []

    # -- state --------------------------------------------------------------------------------------
    def reset(self) -> None:
        self.base.reset()
        self._state = self.tracker.initial
        self._states = []

    def copy(self) -> "GraphMatcher":
        m = GraphMatcher(self.base.copy(), self.tracker, self.walker)
        m._state = self._state
        m._states = list(self._states)
        return m

    @property
    def state(self) -> Any:
        """The tracker's state (the graph context of the next byte)."""
        return self._state

    @property
    def vocab_size(self) -> int:
        return self.grammar.vocab_size

    def is_accepting(self) -> bool:
        return self.base.is_accepting() and self.tracker.can_end(self._state)

    def is_terminated(self) -> bool:
        return self.base.is_terminated() and self.tracker.can_end(self._state)

    def output_bytes(self) -> bytes:
        return self.base.output_bytes()

    # -- masks ----------------------------------------------------------------------------------------
    def next_token_mask(self) -> np.ndarray:
        t0 = time.perf_counter()
        base = self.base.next_token_mask()
        graph = self.walker.mask(self.tracker, self._state)
        n = min(len(base), len(graph))
        out = base[:n] & graph[:n]
        self.mask_seconds += time.perf_counter() - t0
        self.mask_calls += 1
        return out

    def fill_next_token_bitmask(self, bitmask, index: int = 0) -> None:
        write_mask_row(bitmask, index, self.next_token_mask())

    def is_token_allowed(self, token_id: int) -> bool:
        m = self.next_token_mask()
        return 0 <= token_id < self.vocab_size and bool((m[token_id >> 5] >> np.uint32(token_id & 31)) & 1)

    # -- advancing ------------------------------------------------------------------------------------
    def accept_token(self, token_id: int) -> bool:
        g = self.grammar
        if token_id in g.eos_ids:
            if not self.tracker.can_end(self._state) or not self.base.accept_token(token_id):
                return False
            self._push(self._state)
            return True
        tb = g.tokenizer.token_bytes
        if not (0 <= token_id < len(tb)) or not tb[token_id]:
            return False
        nxt = self.walker.allows(self.tracker, self._state, tb[token_id])
        if nxt is None or not self.base.accept_token(token_id):
            return False
        self._push(nxt)
        return True

    def accept_bytes(self, data: bytes) -> bool:
        nxt = self.walker.allows(self.tracker, self._state, data)
        if nxt is None or not self.base.accept_bytes(data):
            return False
        self._push(nxt)
        return True

    def accept_string(self, text: str) -> bool:
        return self.accept_bytes(text.encode("utf-8"))

    def _push(self, nxt: Any) -> None:
        self._states.append(self._state)
        self._state = nxt

    def rollback(self, num_tokens: int = 1) -> None:
        if num_tokens > len(self._states):
            raise ValueError(f"cannot roll back {num_tokens} tokens; only {len(self._states)} in history")
        self.base.rollback(num_tokens)
        if num_tokens:
            self._state = self._states[-num_tokens]
            del self._states[-num_tokens:]

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        return accepted_prefix(self, tokens)

    # -- look-ahead --------------------------------------------------------------------------------------
    def forced_continuation(self, limit: int = 256) -> bytes:
        """The grammar's forced bytes, cut where the graph would refuse one."""
        forced = self.base.forced_continuation(limit)
        st = self._state
        for i, b in enumerate(forced):
            st = self.tracker.step(st, b)
            if st is None:
                return forced[:i]
        return forced

    def min_completion_bytes(self) -> float:
        """Fewest bytes to an end: the term being written finished with its shortest allowed
        completion, then the grammar's shortest completion from there (exact for SPARQL, where a
        variable can always follow); never below the tracker's own bound (``min_extra``)."""
        base = self.base.min_completion_bytes()
        finish = getattr(self.tracker, "finish_term", None)
        suffix = finish(self._state) if finish is not None else b""
        if suffix:
            b = self.base.copy()
            if b.accept_bytes(suffix):
                base = max(base, len(suffix) + b.min_completion_bytes())
        gap = getattr(self.tracker, "base_gap", None)
        if gap is not None:
            base += gap(self._state)
        extra = getattr(self.tracker, "min_extra", None)
        return max(base, float(extra(self._state)) if extra is not None else 0.0)
