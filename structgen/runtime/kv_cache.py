"""A transformers causal LM and its KV cache for one sequence: feed tokens, get logits, crop.

Feeding several tokens in one forward pass and cropping the cache back are what jump-forward
decoding, speculative drafts and backtracking need; plain decoding feeds one token at a time.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

__all__ = ["KVCacheModel", "causal_lm_forward", "new_cache"]

_CACHE_ARG: dict[type, str] = {}


def _cache_arg(hf_model: Any) -> str:
    """The name a model's ``forward`` takes its KV cache by: ``cache`` from transformers 5.2x on
    (``past_key_values`` is deprecated there and goes in 5.40), ``past_key_values`` before."""
    cls = type(hf_model)
    name = _CACHE_ARG.get(cls)
    if name is None:
        import inspect

        try:
            params = inspect.signature(hf_model.forward).parameters
        except (TypeError, ValueError):  # pragma: no cover - a forward without a signature
            params = {}
        name = _CACHE_ARG[cls] = "cache" if "cache" in params else "past_key_values"
    return name


def new_cache(hf_model: Any) -> Any:
    """An empty transformers ``DynamicCache`` for ``hf_model``."""
    from transformers import DynamicCache

    try:
        return DynamicCache(config=hf_model.config)
    except TypeError:  # older transformers: no config argument
        return DynamicCache()


def causal_lm_forward(hf_model: Any, input_ids: torch.Tensor, cache: Any, **kwargs: Any) -> tuple[torch.Tensor, Any]:
    """One forward pass of a transformers causal LM over ``input_ids`` ``[batch, k]`` after ``cache``:
    ``(logits, cache)``, whatever the transformers version calls the cache argument."""
    out = hf_model(input_ids=input_ids, use_cache=True, **{_cache_arg(hf_model): cache}, **kwargs)
    new = getattr(out, "cache", None)
    if new is None:
        new = getattr(out, "past_key_values", None)
    return out.logits, (new if new is not None else cache)


class KVCacheModel:
    """A transformers causal LM plus its KV cache for one sequence.

    ``forward(tokens)`` appends ``tokens`` after everything already cached and
    returns their logits in one pass; ``crop(n)`` keeps only the first ``n``
    cached tokens.  Note: the logits *predicting* position ``n`` come from
    token ``n-1``, so to resume after ``crop(n)`` re-feed from the token you
    want the next logits for (e.g. ``crop(n - 1); forward([tokens[n - 1]])``).

    transformers 5.x changed ``Cache.crop``: it now takes a *negative* count
    of tokens to remove (a positive absolute length raises), where 4.x took the
    absolute length to keep.  We always pass ``-(removed)``, which means the
    same thing under both.
    """

    def __init__(self, hf_model: Any) -> None:
        self.model = hf_model
        try:
            self.device = next(hf_model.parameters()).device
        except StopIteration:  # pragma: no cover - a model without parameters
            self.device = torch.device("cpu")
        self.cache: Any = None
        self.tokens: list[int] = []
        self._supports_logits_to_keep = True
        self.forward_passes = 0

    def __len__(self) -> int:
        return len(self.tokens)

    def reset(self) -> None:
        """Forget every cached token."""
        self.cache = None
        self.tokens = []

    # no_grad rather than inference_mode: callers mask the returned logits in
    # place, which inference tensors forbid outside inference mode.
    @torch.no_grad()
    def forward(self, tokens: Sequence[int], *, logits_to_keep: int = 0) -> torch.Tensor:
        """Feed ``tokens`` after the cached ones; float32 logits ``[k, V]`` for the last ``k`` of them.

        ``logits_to_keep=0`` returns a row for every token fed (what draft
        verification needs); ``1`` only the last row (cheap prefill: the
        ``lm_head`` matmul over a long prompt is skipped).
        """
        if len(tokens) == 0:
            raise ValueError("forward() needs at least one token")
        if self.cache is None:
            self.cache = new_cache(self.model)
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
        kwargs: dict[str, Any] = {}
        if logits_to_keep and self._supports_logits_to_keep:
            kwargs["logits_to_keep"] = logits_to_keep
        try:
            logits, self.cache = causal_lm_forward(self.model, ids, self.cache, **kwargs)
        except TypeError:
            if "logits_to_keep" not in kwargs:
                raise
            self._supports_logits_to_keep = False
            logits, self.cache = causal_lm_forward(self.model, ids, self.cache)
        self.forward_passes += 1
        self.tokens.extend(int(t) for t in tokens)
        logits = logits[0]
        if logits_to_keep:
            logits = logits[-logits_to_keep:]
        return logits.float()

    def crop(self, n: int) -> None:
        """Keep only the first ``n`` cached tokens (roll back ``len(self) - n``)."""
        if n < 0 or n > len(self.tokens):
            raise ValueError(f"cannot crop a cache of {len(self.tokens)} tokens to {n}")
        if n == len(self.tokens):
            return
        if n == 0 or self.cache is None:
            self.reset()
            return
        self.cache.crop(-(len(self.tokens) - n))
        del self.tokens[n:]
