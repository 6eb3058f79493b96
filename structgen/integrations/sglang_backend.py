"""structgen as an SGLang grammar backend (``sglang.srt.constrained``, SGLang 0.5).

SGLang builds one backend per scheduler from ``(server_args, tokenizer, vocab_size, eos_token_ids)``
and compiles each request's constraint (a ``(kind, spec)`` key: ``json``, ``regex``, ``ebnf``,
``structural_tag``) into a grammar object on a thread pool, caching a pristine copy per key.  Per
step it fills each object's bitmask row (int32, one bit per token, the format structgen's masks
already have), applies the rows to the logits, and feeds the sampled token back
(``accept_token``; a ``ValueError`` there aborts the request, which exact masks never cause).

The request logic is :class:`~structgen.integrations.served.ServedGrammar`, shared with the vLLM
backend: stop tokens allowed exactly where the output may end, the finish-within-budget guard
(SGLang does not hand ``max_new_tokens`` to grammars: :mod:`~structgen.integrations.sglang_plugin`
sets it once the request has its grammar), drafts and rollback.  A constraint structgen cannot
compile becomes SGLang's ``InvalidGrammarObject`` carrying structgen's message (the JSON pointer or
grammar position and the reason), which SGLang returns as the request's error.  ``ebnf`` grammars in
Lark syntax are structgen's; GBNF (``::=`` rules) goes to SGLang's own XGrammar backend, built
beside this one on first need, as the vLLM backend does.  This module imports SGLang.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Iterable, List, Optional, Tuple

import torch
from sglang.srt.constrained.base_grammar_backend import (BaseGrammarBackend, BaseGrammarObject,
                                                         InvalidGrammarObject)

from ..compiler import GrammarCompiler
from ..engine.matcher import Matcher
from ..errors import StructgenError
from ..runtime.masks import apply_token_bitmask_inplace
from ..tokenizer import TokenizerInfo
from .served import ServedGrammar, compile_served

__all__ = ["StructgenSGLangBackend", "StructgenSGLangGrammar", "is_gbnf"]

logger = logging.getLogger(__name__)

_GBNF_RULE = re.compile(r"^\s*[A-Za-z_][\w-]*\s*::=", re.MULTILINE)


def is_gbnf(spec: str) -> bool:
    """True for a grammar in GBNF/EBNF syntax (``name ::= ...`` rules) rather than Lark's."""
    return bool(_GBNF_RULE.search(spec))


class StructgenSGLangGrammar(BaseGrammarObject):
    """One request's grammar object: a :class:`ServedGrammar` behind SGLang's interface."""

    def __init__(self, grammar: Any, stop_token_ids: frozenset[int]):
        super().__init__()
        self.compiled = grammar
        self.served = ServedGrammar(matcher=Matcher(grammar), stop_token_ids=stop_token_ids)

    @property
    def matcher(self) -> Matcher:
        return self.served.matcher

    def set_budget(self, max_tokens: Optional[int]) -> None:
        """Mask every token after which the output could no longer finish in ``max_tokens``."""
        self.served.set_budget(max_tokens)

    def accept_token(self, token: int) -> None:
        if self.served.is_terminated():
            return  # SGLang feeds the stop token it sampled; nothing follows it
        if not self.served.accept_tokens("sglang", [int(token)]):
            raise ValueError(f"structgen refused token {token} after {self.served.tokens_taken} tokens")

    def rollback(self, k: int) -> None:
        self.served.rollback(k)

    def is_terminated(self) -> bool:
        return self.served.is_terminated()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device) -> torch.Tensor:
        return torch.full((batch_size, (vocab_size + 31) // 32), -1, dtype=torch.int32)

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        self.served.fill_bitmask(vocab_mask, idx)

    @staticmethod
    def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device) -> torch.Tensor:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        apply_token_bitmask_inplace(logits, vocab_mask)

    def copy(self) -> "StructgenSGLangGrammar":
        """A fresh request's grammar over the same compiled automata (SGLang caches a pristine copy
        per constraint and copies it for each request)."""
        return StructgenSGLangGrammar(self.compiled, self.served.stop_token_ids)

    # -- jump-forward (SGLang's --enable-jump-forward style hooks) -------------------------------
    def try_jump_forward(self, tokenizer) -> Optional[Tuple[List[int], str]]:
        """The text the grammar forces next, when it is whole UTF-8 (else None)."""
        forced = self.matcher.forced_continuation()
        if not forced or self.served.is_terminated():
            return None
        try:
            return [], forced.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: List[int], new_output_ids: List[int], next_state: int) -> None:
        """Take back the tokens after the common prefix of the old and retokenized outputs, then
        take the new ones (a token refused here is a ``ValueError``, as in ``accept_token``)."""
        k = 0
        while k < min(len(old_output_ids), len(new_output_ids)) and old_output_ids[k] == new_output_ids[k]:
            k += 1
        self.served.rollback(len(old_output_ids) - k)
        for t in new_output_ids[k:]:
            self.accept_token(t)


class StructgenSGLangBackend(BaseGrammarBackend):
    """The scheduler-level backend: one compiler (thread-safe; caches shared by every request)."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: Optional[Iterable[int]] = None):
        super().__init__()
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.info = TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self.compiler = GrammarCompiler(self.info)
        self.eos_token_ids = [int(t) for t in (eos_token_ids or ())]
        self.stop_token_ids = frozenset(self.eos_token_ids)
        self._xgrammar: Optional[BaseGrammarBackend] = None

    def _compiled(self, kind: str, spec: str) -> BaseGrammarObject:
        try:
            grammar = compile_served(self.compiler, kind, spec)
        except StructgenError as e:
            logger.warning("structgen: invalid %s constraint: %s", kind, e)
            return InvalidGrammarObject(str(e))
        return StructgenSGLangGrammar(grammar, self.stop_token_ids)

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        return self._compiled("json", key_string)

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return self._compiled("regex", key_string)

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        if is_gbnf(key_string):
            return self._xgrammar_backend().dispatch_ebnf(key_string)
        return self._compiled("lark", key_string)

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        return self._compiled("structural_tag", key_string)

    def _xgrammar_backend(self) -> BaseGrammarBackend:
        if self._xgrammar is None:
            from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend

            self._xgrammar = XGrammarGrammarBackend(self.tokenizer, vocab_size=self.vocab_size,
                                                    model_eos_token_ids=self.eos_token_ids or None)
        return self._xgrammar

    def reset(self) -> None:
        super().reset()
        self.compiler.clear_cache()
