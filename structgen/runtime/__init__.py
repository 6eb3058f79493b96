"""Everything that touches logits and models: masks, the one decoding loop, samplers, prompts.

The engine below knows nothing of torch; this layer knows nothing of grammars beyond the
Matcher contract and the token bitmask.
"""
from .budget import BudgetGuard
from .kv_cache import KVCacheModel
from .loop import Decoding, GenerationResult, MatcherProtocol, generate_constrained, generate_unconstrained
from .prompts import render_chat, user_prompt

__all__ = ["BudgetGuard", "KVCacheModel", "Decoding", "GenerationResult", "MatcherProtocol",
           "generate_constrained", "generate_unconstrained", "render_chat", "user_prompt"]
