"""Sequential Monte Carlo with AWRS proposals: weighted particles for the global target.

``N`` particles advance together (one batched forward pass per step for a real model); each
extends by an AWRS token and multiplies its weight by the AWRS weight.  When the effective sample
size ``(sum w)^2 / sum w^2`` falls below ``ess_threshold * N``, particles are resampled
(systematic or stratified) and every weight is set to their mean, which keeps the evidence
estimate unbiased.  At the end the normalised weights make the particles a consistent estimate
of the model's distribution restricted to the language, and ``mean(w)`` an unbiased estimate of
``P(L)`` for every ``N`` (``docs/algorithms.md`` section 2).  A particle that finishes (EOS)
keeps its weight and waits; at the last position of the token budget only EOS is viable, so a
particle forced to stop there is weighted by the model's probability of stopping.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import InvalidArgument
from .awrs import awrs_step
from .constraint import is_viable, limit_to_eos
from .sequence import SequenceSample
from .weights import effective_sample_size, log_mean_exp

__all__ = ["SMCRun", "run_smc", "resample"]


@dataclass
class SMCRun:
    """One run: the particles (``log_weight`` normalised within the run) and ``log_evidence``,
    the run's estimate of log P(L)."""

    particles: list[SequenceSample]
    log_evidence: float
    resamples: int = 0
    checks: int = 0
    steps: int = 0
    extra: dict = field(default_factory=dict)


def resample(log_w: np.ndarray, rng: np.random.Generator, scheme: str = "stratified") -> np.ndarray:
    """Indices of the particles kept (systematic: one uniform; stratified: one per stratum)."""
    n = len(log_w)
    w = np.exp(log_w - np.max(log_w))
    cdf = np.cumsum(w / w.sum())
    cdf[-1] = 1.0
    if scheme == "systematic":
        u = (rng.random() + np.arange(n)) / n
    elif scheme == "stratified":
        u = (rng.random(n) + np.arange(n)) / n
    else:
        raise InvalidArgument(f"unknown resampling scheme {scheme!r}: 'systematic' or 'stratified'")
    return np.searchsorted(cdf, u, side="left").clip(0, n - 1)


def run_smc(lm, matcher, rng: np.random.Generator, *, particles: int, max_tokens: int,
            ess_threshold: float = 0.5, scheme: str = "stratified", estimator: str = "two-pass",
            budget_aware: bool = False) -> SMCRun:
    """One SMC run from the matcher's current state (left unchanged).  ``budget_aware``: a token
    is viable only if the output can still finish in the tokens left (see ``is_viable``)."""
    if particles < 1:
        raise InvalidArgument(f"particles must be >= 1, got {particles}")
    eos = frozenset(lm.eos_ids)
    n = particles
    matchers = [matcher.copy() for _ in range(n)]
    batch = lm.particles(n)
    lps = batch.start()
    tokens: list[list[int]] = [[] for _ in range(n)]
    log_w = np.zeros(n)
    done = np.zeros(n, dtype=bool)
    checks = resamples = steps = 0
    while not done.all():
        steps += 1
        feed = []
        for i in range(n):
            if done[i]:
                feed.append(tokens[i][-1] if tokens[i] else lm.eos_ids[0])
                continue
            m = matchers[i]
            last = limit_to_eos(len(tokens[i]), max_tokens)
            left = max_tokens - len(tokens[i]) if budget_aware else None
            t, lw, c = awrs_step(lps[i], lambda tok, m=m, last=last, left=left: is_viable(m, tok, eos_only=last,
                                                                                          remaining=left),
                                 rng, estimator=estimator)
            checks += c
            log_w[i] += lw
            if t is None or t in eos:
                done[i] = True
                feed.append(lm.eos_ids[0])
                continue
            m.accept_token(t)
            tokens[i].append(t)
            feed.append(t)
        if done.all():
            break
        lps = batch.advance(feed)
        if not np.isfinite(log_w).any():
            break
        if effective_sample_size(log_w) < ess_threshold * n:
            keep = resample(log_w, rng, scheme)
            mean = log_mean_exp(log_w)
            tokens = [list(tokens[k]) for k in keep]
            matchers = [matchers[k].copy() for k in keep]
            done = done[keep].copy()
            lps = lps[keep]
            batch.reorder(keep.tolist())
            log_w = np.full(n, mean)
            resamples += 1
    log_z = log_mean_exp(log_w)
    norm = log_w - (np.logaddexp.reduce(log_w) if np.isfinite(log_w).any() else 0.0)
    parts = [SequenceSample(tokens[i], float(norm[i]), steps=len(tokens[i]) + 1) for i in range(n)]
    return SMCRun(parts, log_z, resamples=resamples, checks=checks, steps=steps)
