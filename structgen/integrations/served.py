"""One served request's constraint, whatever server runs it (vLLM, SGLang): no server imported here.

A serving engine samples from the mask and cannot draw again, so what structgen's own loop does by
searching (finishing within the budget, the request's own stop tokens) is folded into the mask:

* the request's stop tokens (EOS and the user's) are allowed exactly where the output may end, and
  once one is taken the request is terminated;
* with a budget (``max_tokens``), where the shortest completion comes within ``BUDGET_MARGIN``
  bytes of the tokens left, every allowed token is checked (``BudgetGuard``) and those after which
  the output could no longer finish are cleared;
* ``validate_tokens`` / ``rollback`` prune and take back speculative drafts.

:mod:`structgen.integrations.vllm_backend` and :mod:`structgen.integrations.sglang_backend` adapt
this to each server's grammar-object interface; :func:`compile_served` is the one place a request's
kind becomes a compiled grammar.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field

import numpy as np

from ..compiler import GrammarCompiler
from ..engine.matcher import Matcher, write_mask_row
from ..runtime.budget import BudgetGuard

__all__ = ["ServedGrammar", "compile_served", "choice_pattern", "KINDS", "JSON_WHITESPACE", "BUDGET_MARGIN"]

logger = logging.getLogger(__name__)

#: JSON whitespace policy for served schemas (as ``generate_json``: bounded, so a small model
#: cannot fill its budget with blanks)
JSON_WHITESPACE = "flexible"

#: how close (in bytes of the shortest completion, counted one token per byte) the budget must be
#: before every allowed token is checked against it: a token adds at most this many bytes to the
#: shortest completion in the grammars measured (an array item's separator opening a new item)
BUDGET_MARGIN = 48
#: bytes of budget prices one request keeps (per parser/lexer state, two arrays over the allowed tokens:
#: 1.5 MB for a state inside a string of a 129k vocabulary)
COST_CACHE_BYTES = 32 << 20

#: the request kinds :func:`compile_served` takes
KINDS = ("json", "json_object", "regex", "choice", "lark", "structural_tag")


def choice_pattern(choices: list[str]) -> str:
    """A regex matching exactly one of ``choices`` (a CHOICE request)."""
    return "|".join(re.escape(c) for c in choices)


def compile_served(compiler: GrammarCompiler, kind: str, spec: str):
    """The compiled grammar of one served request of ``kind`` (one of :data:`KINDS`); structgen
    errors propagate for the server to turn into the request's error."""
    if kind == "json":
        return compiler.compile_json_schema(spec, whitespace=JSON_WHITESPACE)
    if kind == "json_object":
        return compiler.compile_json_schema({"type": "object"}, whitespace=JSON_WHITESPACE)
    if kind == "regex":
        return compiler.compile_regex(spec)
    if kind == "choice":
        return compiler.compile_regex(choice_pattern(json.loads(spec)))
    if kind == "lark":
        return compiler.compile_lark(spec)
    if kind == "structural_tag":
        return compiler.compile_structural_tag(spec, whitespace=JSON_WHITESPACE)
    raise ValueError(f"structgen does not serve {kind!r} requests (it serves {', '.join(KINDS)})")


def _ids(words: np.ndarray) -> np.ndarray:
    """The token ids whose bits are set in ``words`` (ascending)."""
    return np.flatnonzero(np.unpackbits(np.ascontiguousarray(words, dtype=np.uint32).view(np.uint8),
                                        bitorder="little")).astype(np.int64)


@dataclass
class ServedGrammar:
    """One request's grammar object over a structgen Matcher, in vLLM's method shapes
    (``accept_tokens``, ``validate_tokens``, ``rollback``, ``fill_bitmask``, ``is_terminated``).

    ``is_terminated`` is True only once a stop token was taken; the request's stop tokens are
    allowed exactly where the output may end."""

    matcher: Matcher
    stop_token_ids: frozenset[int] = frozenset()
    #: the request's ``max_tokens`` (None: no budget; see :meth:`set_budget`)
    max_tokens: int | None = None
    _history: list[bool] = field(default_factory=list)  # per taken token: True when it was a stop
    _stopped: bool = False
    _cost_cache: dict = field(default_factory=dict)
    _cost_bytes: int = 0

    def set_budget(self, max_tokens: int | None) -> None:
        """Mask every token after which the output could no longer finish in ``max_tokens``."""
        self.max_tokens = max_tokens

    def _take(self, token: int) -> bool:
        m = self.matcher
        if token in self.stop_token_ids and token not in m.grammar.eos_ids:
            if not m.is_accepting():
                return False
            self._stopped = True
            self._history.append(True)
            return True
        if not m.accept_token(token):
            return False
        self._stopped = token in m.grammar.eos_ids or token in self.stop_token_ids
        self._history.append(False)
        return True

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        for t in tokens:
            if self._stopped:
                return True  # tokens after the stop are the server's padding, not the grammar's business
            if not self._take(t):
                m = self.matcher
                logger.error("structgen: request %s: token %d refused after %d tokens (%s allowed there; output "
                             "ends %r)", request_id, t, len(self._history),
                             "tokens were" if m.next_token_mask().any() else "no token was",
                             m.output_bytes()[-60:].decode("utf-8", "replace"))
                return False
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest prefix of ``tokens`` (speculative drafts) the grammar and the budget take: a
        draft the budget refuses is pruned here, as the mask refuses it at its position, and so is a
        draft after which no token would be allowed (a dead end: the mask looks one token ahead,
        ``structgen.engine.exact_masks``; vLLM cannot take an accepted draft back)."""
        n = 0
        for t in tokens:
            if self._stopped or not self._within_budget_token(t) or not self._take(t):
                break
            if self._dead_end():
                self.rollback(1)
                break
            n += 1
        self.rollback(n)
        return list(tokens[:n])

    def _dead_end(self) -> bool:
        """Nothing is allowed next and the output may not end (only where checks can leave that)."""
        m = self.matcher
        return (not self._stopped and m.may_dead_end and not m.is_accepting()
                and not m.next_token_mask().any())

    def rollback(self, num_tokens: int) -> None:
        for _ in range(num_tokens):
            if not self._history.pop():
                self.matcher.rollback(1)
            self._stopped = False

    def mask_words(self) -> np.ndarray:
        """The next token's mask (uint32 words): the matcher's, the request's stop tokens where the
        output may end, the budget's cut."""
        m = self.matcher
        words = m.next_token_mask()
        extra = [t for t in self.stop_token_ids if t not in m.grammar.eos_ids and 0 <= t < 32 * len(words)]
        if extra and m.is_accepting():
            words = words.copy()
            for t in extra:
                words[t >> 5] |= np.uint32(1 << (t & 31))
        if self.max_tokens is not None:
            words = self._within_budget(words)
        return words

    def fill_bitmask(self, bitmask, batch_index: int) -> None:
        write_mask_row(bitmask, batch_index, self.mask_words())

    def _within_budget(self, words: np.ndarray) -> np.ndarray:
        """``words`` without the tokens after which the output cannot finish in the tokens left (the
        guard of structgen's loop, applied to the whole mask where the budget is near)."""
        m = self.matcher
        remaining = self.max_tokens - len(self._history)
        if m.is_terminated() or m.min_completion_bytes() + 2 + BUDGET_MARGIN <= remaining:
            return words
        ids, cost = self._costs(words)
        bad = ids[cost > remaining]
        if not len(bad) or len(bad) == len(ids):  # all bad: cut at max_tokens rather than sample from nothing
            return words
        out = words.copy()
        np.bitwise_and.at(out, bad >> 5, ~(np.uint32(1) << (bad & 31).astype(np.uint32)))
        return out

    def _within_budget_token(self, token: int) -> bool:
        if self.max_tokens is None or token in self.stop_token_ids:
            return True
        return BudgetGuard(self.matcher).cost(token) <= self.max_tokens - len(self._history)

    def _costs(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(allowed token ids, the tokens each needs at least: itself, the shortest completion after
        it one token per byte, EOS: ``BudgetGuard.cost``).  What the parser and lexer state alone
        decides (``BudgetGuard.state_costs``: inside a string, nearly every token) is kept per state,
        for the grammar's own mask there; the rest is tried token by token -- and kept too where the
        grammar has no checks, so the state decides everything."""
        m = self.matcher
        guard = BudgetGuard(m)
        cid, lx, ls = m._state
        key = (cid, lx.id, ls)
        ids = _ids(words)
        hit = self._cost_cache.get(key)
        if hit is None:
            if len(self._cost_cache) > 256 or self._cost_bytes > COST_CACHE_BYTES:
                self._cost_cache.clear()
                self._cost_bytes = 0
            base = ids if not m.may_dead_end else _ids(m.grammar.mask(cid, lx, ls))
            hit = self._cost_cache[key] = (base, guard.state_costs(base))
            self._cost_bytes += base.nbytes + hit[1].nbytes
        base, base_cost = hit
        if m.may_dead_end or len(base) != len(ids) or not np.array_equal(base, ids):
            pos = np.minimum(np.searchsorted(base, ids), max(len(base) - 1, 0))
            found = base[pos] == ids if len(base) else np.zeros(len(ids), dtype=bool)
            cost = np.full(len(ids), np.nan)
            cost[found] = base_cost[pos[found]]
        else:
            cost = base_cost
        todo = np.flatnonzero(np.isnan(cost))
        if len(todo):
            cost = cost.copy()
            for i in todo.tolist():
                cost[i] = guard.cost(int(ids[i]))
            if not m.may_dead_end and len(base) == len(ids):
                self._cost_cache[key] = (base, cost)  # no checks: the state decides the rest too
        if self.stop_token_ids:
            cost = cost.copy()
            cost[np.isin(ids, np.fromiter(self.stop_token_ids, dtype=np.int64))] = 0
        return ids, cost

    @property
    def tokens_taken(self) -> int:
        return len(self._history)

    def is_terminated(self) -> bool:
        return self._stopped

    def reset(self) -> None:
        self.matcher.reset()
        self._history.clear()
        self._stopped = False
