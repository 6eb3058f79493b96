"""Twisted SMC: particles proposed and weighted with the HMM's look-ahead, P(the constraint can still
be met | prefix), as the twist (tractable-proposal SMC; ``docs/algorithms.md`` section 2).

Plain SMC (``smc.py``) proposes each token from the model masked to the constraint, so where the
model rarely finishes inside the language the particles' weights spread over orders of magnitude
and a few carry the estimate.  Here each particle carries the twist ``psi(x)``: Deco-G's backward
table (``decog.py``) over the product of the distilled HMM and the constraint's token automaton,
the budget's remaining length included.  A particle at prefix ``x`` draws its next token from

    q(t | x) ∝ p_LM(t | x) m(t) psi(x t)        (m: the constraint's mask, canonical filter included)

and multiplies its weight by ``Z(x) / psi(x)`` with ``Z(x) = sum_t p_LM(t | x) m(t) psi(x t)``.  The
product telescopes: at the end (``psi`` of a finished output is 1) a particle's weight is
``p_LM(x) / q(x)`` for the global target, so the normalised weights are consistent and their mean
an unbiased estimate of ``P(L)`` for any positive twist; resampling when the effective sample size
falls below half keeps the twisted weights.  When the model *is* the HMM the twist is exact,
``Z(x) = psi(x)``: every weight is ``P(L)`` and one particle draws exactly from the target
(``tests/runtime/sampling/test_twisted_smc.py``).  The constraint must be regular (a token automaton,
as Deco-G's); the twist never rules out a token the model and the constraint allow (the HMM's
emissions are all positive), so nothing of the target is lost.

Independent runs share one batch of the model (``run_twisted_smc_runs``: ``runs x particles`` rows
of one KV cache, each run resampled within its own rows), so a few particles a run cost a forward
pass per step for all of them, not one per run.
"""
from __future__ import annotations

import numpy as np

from ...errors import InvalidArgument
from .constraint import allowed_ids
from .lm import PrefixParticles
from .sequence import SequenceSample
from .smc import SMCRun, resample
from .weights import effective_sample_size, log_mean_exp

__all__ = ["run_twisted_smc", "run_twisted_smc_runs", "MAX_BATCH_ROWS"]

#: rows of one batch (runs x particles); more runs are drawn in further batches
MAX_BATCH_ROWS = 64


def run_twisted_smc(lm, matcher, rng: np.random.Generator, *, twist, particles: int, max_tokens: int,
                    ess_threshold: float = 0.5, scheme: str = "stratified") -> SMCRun:
    """One twisted SMC run from the matcher's start (left unchanged).  ``twist``: a ``DecoG`` over
    the constraint's token automaton with a window of at least ``max_tokens`` (its backward table
    is the twist).  Outputs have at most ``max_tokens`` tokens, EOS included."""
    return run_twisted_smc_runs(lm, matcher, rng, twist=twist, particles=particles, max_tokens=max_tokens, runs=1,
                                ess_threshold=ess_threshold, scheme=scheme)[0]


def run_twisted_smc_runs(lm, matcher, rng: np.random.Generator, *, twist, particles: int, max_tokens: int,
                         runs: int, ess_threshold: float = 0.5, scheme: str = "stratified") -> list[SMCRun]:
    """``runs`` independent twisted SMC runs, batched ``MAX_BATCH_ROWS`` rows at a time."""
    if particles < 1:
        raise InvalidArgument(f"particles must be >= 1, got {particles}")
    if runs < 1:
        raise InvalidArgument(f"runs must be >= 1, got {runs}")
    if twist.max_len < max_tokens:
        raise InvalidArgument(f"the twist's window ({twist.max_len} tokens) is shorter than max_tokens={max_tokens}")
    twist.check_feasible()
    per_batch = max(1, MAX_BATCH_ROWS // particles)
    out: list[SMCRun] = []
    while len(out) < runs:
        out.extend(_batch(lm, matcher, rng, twist, particles, max_tokens, min(per_batch, runs - len(out)),
                          ess_threshold, scheme))
    return out


def _batch(lm, matcher, rng, twist, particles: int, max_tokens: int, runs: int, ess_threshold: float,
           scheme: str) -> list[SMCRun]:
    dfa, hmm = twist.dfa, twist.hmm
    eos = frozenset(lm.eos_ids)
    P = particles
    n = runs * P
    matchers = [matcher.copy() for _ in range(n)]
    batch = lm.particles(n) if hasattr(lm, "particles") else PrefixParticles(lm, n)
    lps = batch.start()
    tokens: list[list[int]] = [[] for _ in range(n)]
    states = [dfa.start] * n
    alphas = [hmm.forward_start()] * n
    log_psi = np.zeros(n)  # log psi of each particle's prefix (1 before the first token)
    log_w = np.zeros(n)
    done = np.zeros(n, dtype=bool)
    checks = np.zeros(runs, dtype=np.int64)
    resamples = np.zeros(runs, dtype=np.int64)
    steps = 0
    while not done.all():
        steps += 1
        feed = []
        for i in range(n):
            if done[i]:
                feed.append(tokens[i][-1] if tokens[i] else lm.eos_ids[0])
                continue
            ids, lr = twist.lookahead(alphas[i], states[i], max_tokens - len(tokens[i]))
            checks[i // P] += 1
            ok = np.isin(ids, allowed_ids(matchers[i])) & np.isfinite(lr)
            score = np.full(len(ids), -np.inf)
            score[ok] = lps[i][ids[ok]] + lr[ok]
            if not ok.any() or not np.isfinite(score).any():
                log_w[i] = -np.inf  # a dead end the mask could not see: the particle dies
                done[i] = True
                feed.append(lm.eos_ids[0])
                continue
            top = float(score.max())
            p = np.exp(score - top)
            z = float(p.sum())
            log_w[i] += top + np.log(z) - log_psi[i]
            j = int(rng.choice(len(ids), p=p / z))
            t = int(ids[j])
            log_psi[i] = lr[j]
            if t in eos:
                done[i] = True
                feed.append(lm.eos_ids[0])
                continue
            matchers[i].accept_token(t)
            tokens[i].append(t)
            states[i] = dfa.step(states[i], t)
            alphas[i] = hmm.forward_step(alphas[i], t)
            feed.append(t)
        if done.all():
            break
        lps = batch.advance(feed)
        order = np.arange(n)
        for r in range(runs):  # each run resamples within its own rows
            rows = slice(r * P, (r + 1) * P)
            lw = log_w[rows]
            if not np.isfinite(lw).any() or done[rows].all():
                continue
            if effective_sample_size(lw) < ess_threshold * P:
                order[rows] = r * P + resample(lw, rng, scheme)
                log_w[rows] = log_mean_exp(lw)
                resamples[r] += 1
        if (order != np.arange(n)).any():
            keep = order.tolist()
            tokens = [list(tokens[k]) for k in keep]
            matchers = [matchers[k].copy() if k != i else matchers[k] for i, k in enumerate(keep)]
            states = [states[k] for k in keep]
            alphas = [alphas[k] for k in keep]
            log_psi = log_psi[order].copy()
            done = done[order].copy()
            lps = lps[order]
            batch.reorder(keep)
    result = []
    for r in range(runs):
        lw = log_w[r * P:(r + 1) * P]
        norm = lw - (np.logaddexp.reduce(lw) if np.isfinite(lw).any() else 0.0)
        parts = [SequenceSample(tokens[r * P + i], float(norm[i]), steps=len(tokens[r * P + i]) + 1) for i in range(P)]
        result.append(SMCRun(parts, log_mean_exp(lw), resamples=int(resamples[r]), checks=int(checks[r]), steps=steps))
    return result
