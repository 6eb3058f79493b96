"""Plain next-token sampling over (already masked) logits.

This is the baseline every smarter sampler (ASAp, AWRS+SMC, ...) is compared
with: mask first, then temperature / top-k / top-p.  Filtering *after*
masking matters: a nucleus computed before masking can consist entirely of
disallowed tokens, leaving nothing (or only the tail) to sample from.
"""
from __future__ import annotations

import torch

from ...errors import GenerationError, InvalidArgument

__all__ = ["sample_next", "filter_logits", "MaskedSampler", "NoTokenAllowed"]


class NoTokenAllowed(GenerationError):
    """Every logit is ``-inf``: nothing may be sampled at this step."""


def filter_logits(logits_1d: torch.Tensor, *, top_p: float = 1.0, top_k: int = 0) -> torch.Tensor:
    """Return a float32 copy of ``logits_1d`` with tokens outside top-k / top-p set to ``-inf``.

    ``top_k=0`` and ``top_p=1.0`` disable the filters.  At least one token (the
    most likely allowed one) always survives.
    """
    if not 0.0 < top_p <= 1.0:
        raise InvalidArgument(f"top_p must be in (0, 1], got {top_p}")
    if top_k < 0:
        raise InvalidArgument(f"top_k must be >= 0, got {top_k}")
    x = logits_1d.detach().to(torch.float32).clone()
    neg_inf = float("-inf")
    if top_k and top_k < x.numel():
        kth = torch.topk(x, top_k).values[-1]
        x.masked_fill_(x < kth, neg_inf)
    if top_p < 1.0:
        sorted_x, order = torch.sort(x, descending=True)
        probs = torch.softmax(sorted_x, dim=-1)
        # Drop a token when the mass strictly before it already reaches top_p;
        # the first token is therefore always kept.
        before = torch.cumsum(probs, dim=-1) - probs
        drop = before >= top_p
        x[order[drop]] = neg_inf
    return x


def sample_next(
    logits_1d: torch.Tensor,
    *,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    generator: torch.Generator | None = None,
) -> int:
    """Pick the next token id from one row of (masked) logits.

    ``temperature == 0`` is greedy argmax (ties go to the lowest id, as
    ``torch.argmax`` does), which makes constrained greedy decoding
    deterministic.  Otherwise: divide by the temperature, keep the top-k,
    keep the top-p nucleus (all computed over the masked logits), sample from the softmax with ``generator``.
    Raises ``GenerationError`` when every logit is ``-inf`` (nothing allowed).
    """
    if logits_1d.dim() != 1:
        raise InvalidArgument(f"expected 1-D logits, got shape {tuple(logits_1d.shape)}")
    if temperature < 0:
        raise InvalidArgument(f"temperature must be >= 0, got {temperature}")
    if temperature == 0.0:
        t = int(torch.argmax(logits_1d))
        if logits_1d[t] == float("-inf"):
            raise NoTokenAllowed("no token is allowed at this step (every logit is -inf)")
        return t
    # Work on the allowed (finite) entries only: under a constraint that is
    # usually a small fraction of the vocabulary, so sort/softmax get cheap.
    x = logits_1d.detach()
    idx = torch.isfinite(x).nonzero().squeeze(1)
    if idx.numel() == 0:
        raise NoTokenAllowed("no token is allowed at this step (every logit is -inf)")
    # Same order as transformers' warpers: temperature, then top-k, then top-p
    # (the nucleus depends on the temperature).
    sub = x.index_select(0, idx).to(torch.float32) / temperature
    if top_p < 1.0 or top_k:
        sub = filter_logits(sub, top_p=top_p, top_k=top_k)
    probs = torch.softmax(sub, dim=-1)
    return int(idx[torch.multinomial(probs, 1, generator=generator)])


class MaskedSampler:
    """Today's sampling, behind the :class:`~structgen.runtime.sampling.base.Sampler` interface:
    greedy at ``temperature=0``, else temperature / top-k / top-p over the masked logits with a
    seeded generator (the same seed gives the same draws)."""

    needs_mask = True

    def __init__(self, *, temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0, seed: int | None = None):
        if temperature < 0:
            raise InvalidArgument(f"temperature must be >= 0, got {temperature}")
        if not 0.0 < top_p <= 1.0:
            raise InvalidArgument(f"top_p must be in (0, 1], got {top_p}")
        if top_k < 0:
            raise InvalidArgument(f"top_k must be >= 0, got {top_k}")
        self.temperature, self.top_p, self.top_k, self.seed = temperature, top_p, top_k, seed
        self.log_weight = 0.0
        self.reset()

    def reset(self) -> None:
        self.generator = torch.Generator().manual_seed(int(self.seed)) if self.seed is not None else None
        self.log_weight = 0.0

    def sample(self, logits: torch.Tensor, context=None) -> int:
        return sample_next(logits, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
                           generator=self.generator)
