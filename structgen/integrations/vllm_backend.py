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

from dataclasses import dataclass

import torch
from vllm.v1.structured_output.backend_types import (StructuredOutputBackend, StructuredOutputGrammar,
                                                     StructuredOutputOptions)
from vllm.v1.structured_output.utils import grammar_is_likely_lark

from ..compiler import GrammarCompiler
from ..engine.matcher import Matcher
from ..errors import StructgenError
from ..tokenizer import TokenizerInfo
from .served import BUDGET_MARGIN, JSON_WHITESPACE, ServedGrammar, choice_pattern, compile_served

__all__ = ["StructgenBackend", "StructgenGrammar", "choice_pattern", "delegated", "compile_request",
           "JSON_WHITESPACE", "BUDGET_MARGIN"]

#: vLLM's request kinds -> structgen's (``structgen.integrations.served.KINDS``)
_KINDS = {StructuredOutputOptions.JSON: "json", StructuredOutputOptions.JSON_OBJECT: "json_object",
          StructuredOutputOptions.REGEX: "regex", StructuredOutputOptions.CHOICE: "choice",
          StructuredOutputOptions.GRAMMAR: "lark", StructuredOutputOptions.STRUCTURAL_TAG: "structural_tag"}


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
    kind = _KINDS.get(request_type)
    if kind is None:
        raise ValueError(f"structgen does not serve {request_type.name} requests")
    return compile_served(compiler, kind, spec)


@dataclass
class StructgenGrammar(ServedGrammar, StructuredOutputGrammar):
    """One request's grammar object: :class:`~structgen.integrations.served.ServedGrammar`, whose
    methods are vLLM's ``StructuredOutputGrammar`` interface."""
