"""AWRS (adaptive weighted rejection sampling): exact constrained tokens without a full mask.

Tokens are drawn from the model in random order without replacement (Gumbel keys) and tested one
at a time with the matcher; the first that passes is an exact draw from the locally constrained
distribution ``p c / Z_c``.  A little more testing gives an unbiased estimate ``w`` of the local
mass ``Z_c = sum_t p(t) c(t)``: ``(token, w)`` is properly weighted, ``E[w f(token)] = sum_t p(t)
c(t) f(t)``, which is the importance weight sequential Monte Carlo needs to correct masking's
myopia (``docs/algorithms.md`` section 2).  Three estimators:

* ``"two-pass"``: a second pass in fresh Gumbel order over the tokens left after the first
  (accepted one included) counts further rejections; ``w = (1 - R1) / (rejections + 1)``;
* ``"recursive"``: only the next token of the same order is tested; with ``R`` the mass rejected
  before the accepted ``y`` and ``q = p(y) / (1 - R)``, ``w = (1 - R) (q + (1 - q) [next accepted])``;
* ``"geometric"``: phantom rejections ``Geometric(1 - R) - 1`` before each draw make the run look
  like sampling with replacement; after ``k = 2`` acceptances, ``w = (k - 1) / (draws - 1)``
  (the unbiased negative-binomial estimator).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ...errors import InvalidArgument
from .constraint import is_viable, limit_to_eos
from .sequence import SequenceSample

__all__ = ["awrs_step", "sample_awrs", "ESTIMATORS"]

ESTIMATORS = ("two-pass", "recursive", "geometric")


def _gumbel_order(rng: np.random.Generator, lp: np.ndarray, live: np.ndarray, chunk: int = 64):
    """Live token ids in Gumbel-max order (sampling without replacement by ``exp(lp)``), yielded
    lazily: the top ``chunk`` by ``argpartition``, then the next, so a full sort is rarely paid."""
    ids = np.flatnonzero(live)
    if len(ids) == 0:
        return
    keys = lp[ids] + rng.gumbel(size=len(ids))
    order_done = 0
    remaining = np.arange(len(ids))
    while len(remaining):
        k = min(chunk, len(remaining))
        part = np.argpartition(-keys[remaining], k - 1)[:k] if k < len(remaining) else np.arange(len(remaining))
        top = remaining[part]
        top = top[np.argsort(-keys[top], kind="stable")]
        for i in top:
            yield int(ids[i])
        mask = np.ones(len(remaining), dtype=bool)
        mask[part] = False
        remaining = remaining[mask]
        order_done += k
        chunk *= 4


def awrs_step(lp: np.ndarray, viable: Callable[[int], bool], rng: np.random.Generator, *,
              estimator: str = "two-pass") -> tuple[int | None, float, int]:
    """One constrained token: ``(token or None, log w, constraint checks)``.

    ``lp``: normalised log-probabilities over the vocabulary (``-inf`` for tokens that can never
    be accepted); ``viable(t)``: the constraint's verdict on one token.  ``None`` (log w = -inf)
    when no token is viable: the particle dies."""
    if estimator not in ESTIMATORS:
        raise InvalidArgument(f"unknown AWRS estimator {estimator!r}: one of {ESTIMATORS}")
    p = np.exp(lp)
    live = p > 0
    checks = 0
    if estimator == "geometric":
        return _geometric(p, live, viable, rng)
    rejected_mass = 0.0
    n_rej = 0
    y = None
    order = _gumbel_order(rng, lp, live)
    for t in order:
        checks += 1
        if viable(t):
            y = t
            break
        rejected_mass += p[t]
        n_rej += 1
        live[t] = False
    # 1 - R as the mass left (not 1 - sum of the rejected): where the constraint keeps a tiny share
    # (1e-17 after a canonical prefix) the subtraction would round it to 0 and kill the particle
    keep = float(p[live].sum()) if y is not None else 0.0
    if y is None or keep <= 0.0:
        return None, float("-inf"), checks
    if estimator == "recursive":
        q = p[y] / keep
        nxt = next(order, None)  # the next token of the same order
        accepted = False
        if nxt is not None:
            checks += 1
            accepted = viable(nxt)
        w = keep * (q + (1.0 - q) * accepted)
        return y, math.log(w), checks
    # two-pass: a fresh Gumbel order over the pool pass 1 left (the accepted token stays in it)
    for t in _gumbel_order(rng, lp, live):
        checks += 1
        if viable(t):
            break
        n_rej += 1
        live[t] = False
    return y, math.log(keep) - math.log(n_rej + 1), checks


def _geometric(p: np.ndarray, live: np.ndarray, viable, rng: np.random.Generator, k: int = 2):
    """Sampling with replacement simulated without re-testing a rejected token: before each real
    draw from the pool left, ``Geometric(1 - R) - 1`` phantom draws stand for hits on the tokens
    already rejected (mass ``R``); accepted tokens stay in the pool.  Stop after ``k``
    acceptances; the first is the token, ``(k - 1) / (draws - 1)`` the weight."""
    ids = np.flatnonzero(live)
    pool = p[ids].copy()
    rejected_mass = 0.0
    draws = accepts = checks = 0
    y = None
    known: dict[int, bool] = {}
    while accepts < k:
        keep = float(pool.sum())  # the mass not rejected (see awrs_step)
        if keep <= 0.0:
            break
        draws += int(rng.geometric(keep)) - 1  # phantom hits on rejected tokens
        i = int(rng.choice(len(ids), p=pool / pool.sum()))
        t = int(ids[i])
        draws += 1
        ok = known.get(t)
        if ok is None:
            checks += 1
            ok = known[t] = viable(t)
        if ok:
            accepts += 1
            if y is None:
                y = t
        else:
            rejected_mass += pool[i]
            pool[i] = 0.0
    if y is None or accepts < k:
        return (None, float("-inf"), checks) if y is None else (y, float("-inf"), checks)
    return y, math.log(k - 1) - math.log(draws - 1), checks


def sample_awrs(lm, matcher, rng: np.random.Generator, *, max_tokens: int,
                estimator: str = "two-pass", budget_aware: bool = False) -> SequenceSample:
    """One sequence with AWRS tokens (a single particle): ``log_weight`` is the log of its
    importance weight (the product of the step weights), so weighted samples estimate the model's
    distribution restricted to the language and ``mean(w)`` estimates P(L)."""
    eos = frozenset(lm.eos_ids)
    out: list[int] = []
    log_w = 0.0
    checks = 0
    try:
        while True:
            last = limit_to_eos(len(out), max_tokens)
            left = max_tokens - len(out) if budget_aware else None
            t, lw, c = awrs_step(lm.logprobs(out), lambda tok: is_viable(matcher, tok, eos_only=last, remaining=left),
                                 rng, estimator=estimator)
            checks += c
            log_w += lw
            if t is None:
                return SequenceSample(list(out), float("-inf"), steps=len(out) + 1, checks=checks)
            if t in eos:
                return SequenceSample(list(out), log_w, steps=len(out) + 1, checks=checks)
            matcher.accept_token(t)
            out.append(t)
    finally:
        if out:
            matcher.rollback(len(out))
