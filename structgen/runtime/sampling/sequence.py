"""Whole-sequence sampling under a constraint: the result type and plain masked sampling.

Masked sampling renormalises the model's distribution over the allowed tokens at each step; it
samples the *local* target ``q`` (``exact.py``), not the model's distribution restricted to the
language.  It is the baseline the correct samplers are measured against.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .constraint import allowed_ids, limit_to_eos

__all__ = ["SequenceSample", "DeadEnd", "sample_masked"]


class DeadEnd(Exception):
    """No token may follow (a value check left no completion, or the budget ran out)."""


@dataclass
class SequenceSample:
    """One sampled output: ``token_ids`` (EOS excluded) and its log importance weight (0 for
    unweighted methods).  ``checks`` counts constraint checks, ``steps`` tokens drawn."""

    token_ids: list[int]
    log_weight: float = 0.0
    steps: int = 0
    checks: int = 0
    extra: dict = field(default_factory=dict)


def draw(rng: np.random.Generator, lp: np.ndarray, ids: np.ndarray) -> int:
    """A token of ``ids`` with probability proportional to ``exp(lp[ids])``."""
    w = lp[ids]
    w = np.exp(w - w.max())
    return int(ids[rng.choice(len(ids), p=w / w.sum())])


def sample_masked(lm, matcher, rng: np.random.Generator, *, max_tokens: int) -> SequenceSample:
    """One masked sample from the matcher's current state (the matcher is rolled back after)."""
    eos = frozenset(lm.eos_ids)
    out: list[int] = []
    checks = 0
    try:
        while True:
            ids = allowed_ids(matcher, eos_only=limit_to_eos(len(out), max_tokens))
            checks += matcher.grammar.vocab_size
            if len(ids) == 0:
                raise DeadEnd(f"no token may follow after {len(out)} tokens")
            t = draw(rng, lm.logprobs(out), ids)
            if t in eos:
                return SequenceSample(list(out), 0.0, steps=len(out) + 1, checks=checks)
            matcher.accept_token(t)
            out.append(t)
    finally:
        if out:
            matcher.rollback(len(out))
