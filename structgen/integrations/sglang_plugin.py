"""The ``sglang.srt.plugins`` entry point: makes ``--grammar-backend structgen`` an SGLang grammar backend.

SGLang keeps a registry for custom grammar backends (``register_grammar_backend``, consulted before
its built-in names) and an extensible list of ``--grammar-backend`` choices; its plugin loader runs
every installed ``sglang.srt.plugins`` entry point early in each process.  :func:`register` uses
both, and gives each request's grammar its ``max_new_tokens`` once SGLang has attached the grammar
(``GrammarManager._apply_request_reasoning_config`` runs right then, for cached and freshly compiled
grammars alike): the mask then runs structgen's finish-within-budget guard, and a request whose budget
no valid output fits is aborted with the smallest budget that does, before its first token.
"""
from __future__ import annotations

import logging
from typing import Any

__all__ = ["register", "BACKEND_NAME", "create_backend"]

logger = logging.getLogger(__name__)

BACKEND_NAME = "structgen"
_installed = False


def create_backend(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None):
    """SGLang's backend factory signature (``register_grammar_backend``)."""
    from .sglang_backend import StructgenSGLangBackend

    return StructgenSGLangBackend(tokenizer, vocab_size, eos_token_ids)


def register() -> None:
    """Install the backend (SGLang's plugin loader calls this in every process; repeated calls do nothing)."""
    global _installed
    if _installed:
        return
    from sglang.srt.constrained.base_grammar_backend import register_grammar_backend
    from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices

    if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([BACKEND_NAME])
    register_grammar_backend(BACKEND_NAME, create_backend)
    _wrap_budget()
    _installed = True


def budget_error(grammar: Any, max_new_tokens: int | None) -> str | None:
    """Give ``grammar`` (a structgen grammar object) the request's budget; the error message when
    no valid output fits in it (None when one does, or there is no budget)."""
    from ..runtime.budget import BudgetGuard, shortfall_message

    grammar.set_budget(max_new_tokens)
    if max_new_tokens is None:
        return None
    needed = BudgetGuard(grammar.matcher).tokens_needed(max_new_tokens)
    return shortfall_message(max_new_tokens, needed, "max_new_tokens") if needed else None


def _wrap_budget() -> None:
    from sglang.srt.constrained.grammar_manager import GrammarManager

    from .sglang_backend import StructgenSGLangGrammar

    original = GrammarManager._apply_request_reasoning_config
    if getattr(original, "_structgen", False):
        return

    def _apply_request_reasoning_config(self, req):
        original(self, req)
        if isinstance(req.grammar, StructgenSGLangGrammar) and not req.finished():
            error = budget_error(req.grammar, getattr(req.sampling_params, "max_new_tokens", None))
            if error is not None:
                req.set_finish_with_abort(error)

    _apply_request_reasoning_config._structgen = True
    GrammarManager._apply_request_reasoning_config = _apply_request_reasoning_config
