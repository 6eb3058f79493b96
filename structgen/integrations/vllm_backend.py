"""structgen as a vLLM structured-output backend (vLLM v1, ``vllm/v1/structured_output``).

vLLM builds one backend per engine from ``(vllm_config, tokenizer, vocab_size)`` and asks it to
compile each request's constraint into a grammar object; per step it fills that object's bitmask
row, feeds it the sampled tokens (``accept_tokens``), and with speculative decoding prunes drafts
(``validate_tokens``) and takes tokens back (``rollback``).  A False from ``accept_tokens`` ends
the request with an error, which structgen's exact masks never cause.

The request's budget: vLLM does not hand ``max_tokens`` to ``compile_grammar``, so
:mod:`~structgen.integrations.vllm_plugin` gives it to the grammar right after (``set_budget``), and
the mask runs the same finish-within-budget guard as structgen's own loop.  vLLM samples from the
mask and cannot draw again, so where the budget is near (the shortest completion within
``BUDGET_MARGIN`` bytes of the tokens left) every allowed token is checked and those after which
the output could not finish are cleared; elsewhere the mask is the grammar's.

Served here: JSON (a schema), JSON_OBJECT, REGEX, CHOICE, GRAMMAR in Lark syntax and
STRUCTURAL_TAG (XGrammar's format, new and legacy, through ``compile_structural_tag``; a shape
structgen does not support fails the request with an error naming the spec's JSON path).
GRAMMAR requests in EBNF/GBNF syntax go to vLLM's own XGrammar backend, built beside this one on
first need (vLLM keeps one backend per engine).  This module
imports vLLM; :mod:`structgen.integrations.vllm_plugin` installs it.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field

import numpy as np
import torch
from vllm.v1.structured_output.backend_types import (StructuredOutputBackend, StructuredOutputGrammar,
                                                     StructuredOutputOptions)
from vllm.v1.structured_output.utils import grammar_is_likely_lark

from ..compiler import GrammarCompiler
from ..engine.matcher import Matcher, write_mask_row
from ..errors import StructgenError
from ..runtime.budget import BudgetGuard
from ..tokenizer import TokenizerInfo

__all__ = ["StructgenBackend", "StructgenGrammar", "choice_pattern", "delegated"]

logger = logging.getLogger(__name__)

#: JSON whitespace policy for served schemas (as ``generate_json``: bounded, so a small model
#: cannot fill its budget with blanks)
JSON_WHITESPACE = "flexible"

#: how close (in bytes of the shortest completion, counted one token per byte) the budget must be
#: before every allowed token is checked against it: a token adds at most this many bytes to the
#: shortest completion in the grammars measured (an array item's separator opening a new item)
BUDGET_MARGIN = 48


def choice_pattern(choices: list[str]) -> str:
    """A regex matching exactly one of ``choices`` (vLLM's CHOICE request)."""
    return "|".join(re.escape(c) for c in choices)


def delegated(request_type: StructuredOutputOptions, spec: str) -> bool:
    """True for the requests structgen hands to vLLM's XGrammar backend."""
    return request_type == StructuredOutputOptions.GRAMMAR and not grammar_is_likely_lark(spec)


@dataclass
class StructgenBackend(StructuredOutputBackend):
    """The engine-level backend: one compiler (thread-safe, caches shared by every request)."""

    def __post_init__(self) -> None:
        self.info = TokenizerInfo.from_huggingface(self.tokenizer, vocab_size=self.vocab_size)
        self.compiler = GrammarCompiler(self.info)
        spec = self.vllm_config.speculative_config
        self.num_speculative_tokens = spec.num_speculative_tokens if spec is not None else 0
        self._xgrammar = None

    def compile_grammar(self, request_type: StructuredOutputOptions, grammar_spec: str,
                        stop_token_ids: set[int] | None = None) -> StructuredOutputGrammar:
        if delegated(request_type, grammar_spec):
            return self._xgrammar_backend().compile_grammar(request_type, grammar_spec, stop_token_ids)
        try:
            grammar = compile_request(self.compiler, request_type, grammar_spec)
        except StructgenError as e:  # vLLM fails this request only (the front end refused most already)
            raise ValueError(f"structgen could not compile the {request_type.name} request: {e}") from e
        matcher = Matcher(grammar, max_rollback_tokens=self.num_speculative_tokens + 2)
        return StructgenGrammar(matcher=matcher, stop_token_ids=frozenset(stop_token_ids or ()))

    def _xgrammar_backend(self):
        if self._xgrammar is None:
            from vllm.v1.structured_output.backend_xgrammar import XgrammarBackend

            self._xgrammar = XgrammarBackend(self.vllm_config, tokenizer=self.tokenizer, vocab_size=self.vocab_size)
        return self._xgrammar

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        return torch.full((max_num_seqs, (self.vocab_size + 31) // 32), -1, dtype=torch.int32)

    def destroy(self) -> None:
        self.compiler.clear_cache()
        if self._xgrammar is not None:
            self._xgrammar.destroy()


def compile_request(compiler: GrammarCompiler, request_type: StructuredOutputOptions, spec: str):
    """The compiled grammar of one vLLM request (structgen errors propagate)."""
    if request_type == StructuredOutputOptions.JSON:
        return compiler.compile_json_schema(spec, whitespace=JSON_WHITESPACE)
    if request_type == StructuredOutputOptions.JSON_OBJECT:
        return compiler.compile_json_schema({"type": "object"}, whitespace=JSON_WHITESPACE)
    if request_type == StructuredOutputOptions.REGEX:
        return compiler.compile_regex(spec)
    if request_type == StructuredOutputOptions.CHOICE:
        return compiler.compile_regex(choice_pattern(json.loads(spec)))
    if request_type == StructuredOutputOptions.GRAMMAR:
        return compiler.compile_lark(spec)
    if request_type == StructuredOutputOptions.STRUCTURAL_TAG:
        return compiler.compile_structural_tag(spec, whitespace=JSON_WHITESPACE)
    raise ValueError(f"structgen does not serve {request_type.name} requests")


@dataclass
class StructgenGrammar(StructuredOutputGrammar):
    """One request's grammar object over a structgen Matcher.

    ``is_terminated`` is True only once a stop token was taken (vLLM stops masking a terminated
    request); the request's stop tokens (``SamplingParams.all_stop_token_ids``: EOS and the user's)
    are allowed exactly where the output may end."""

    matcher: Matcher
    stop_token_ids: frozenset[int] = frozenset()
    #: the request's ``max_tokens`` (None: no budget; set by the plugin through ``set_budget``)
    max_tokens: int | None = None
    _history: list[bool] = field(default_factory=list)  # per taken token: True when it was a stop
    _stopped: bool = False
    _cost_cache: dict = field(default_factory=dict)

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
        for i, t in enumerate(tokens):
            if self._stopped:
                return True  # tokens after the stop are vLLM's padding, not the grammar's business
            if not self._take(t):
                logger.error("structgen: request %s: token %d refused after %d tokens", request_id, t, i)
                return False
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest prefix of ``tokens`` (speculative drafts) the grammar and the budget take: a
        draft the budget refuses is pruned here, as the mask refuses it at its position."""
        n = 0
        for t in tokens:
            if self._stopped or not self._within_budget_token(t) or not self._take(t):
                break
            n += 1
        self.rollback(n)
        return list(tokens[:n])

    def rollback(self, num_tokens: int) -> None:
        for _ in range(num_tokens):
            if not self._history.pop():
                self.matcher.rollback(1)
            self._stopped = False

    def fill_bitmask(self, bitmask: torch.Tensor, batch_index: int) -> None:
        m = self.matcher
        words = m.next_token_mask()
        extra = [t for t in self.stop_token_ids if t not in m.grammar.eos_ids and 0 <= t < 32 * len(words)]
        if extra and m.is_accepting():
            words = words.copy()
            for t in extra:
                words[t >> 5] |= np.uint32(1 << (t & 31))
        if self.max_tokens is not None:
            words = self._within_budget(words)
        write_mask_row(bitmask, batch_index, words)

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
        it one token per byte, EOS: ``BudgetGuard.cost``).  A grammar without checks keeps them per
        parser and lexer state (the same state comes back every step inside a long string or a
        repeated item)."""
        m = self.matcher
        key = None
        if not m.may_dead_end:  # no checks: the state alone decides what follows
            cid, lx, ls = m._state
            key = (cid, lx.id, ls)
            hit = self._cost_cache.get(key)
            if hit is not None:
                return hit
        ids = np.flatnonzero(np.unpackbits(np.ascontiguousarray(words, dtype=np.uint32).view(np.uint8),
                                           bitorder="little")).astype(np.int64)
        cost = BudgetGuard(m).costs(ids)
        if self.stop_token_ids:
            cost[np.isin(ids, np.fromiter(self.stop_token_ids, dtype=np.int64))] = 0
        if key is not None:
            if len(self._cost_cache) > 256:
                self._cost_cache.clear()
            self._cost_cache[key] = (ids, cost)
        return ids, cost

    def is_terminated(self) -> bool:
        return self._stopped

    def reset(self) -> None:
        self.matcher.reset()
        self._history.clear()
        self._stopped = False
