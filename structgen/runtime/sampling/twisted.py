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
"""
from __future__ import annotations

import numpy as np

from ...errors import InvalidArgument
from .constraint import allowed_ids
from .lm import PrefixParticles
from .sequence import SequenceSample
from .smc import SMCRun, _log_mean_exp, resample

__all__ = ["run_twisted_smc"]


def run_twisted_smc(lm, matcher, rng: np.random.Generator, *, twist, particles: int, max_tokens: int,
                    ess_threshold: float = 0.5, scheme: str = "stratified") -> SMCRun:
    """One twisted SMC run from the matcher's start (left unchanged).  ``twist``: a ``DecoG`` over
    the constraint's token automaton with a window of at least ``max_tokens`` (its backward table
    is the twist).  Outputs have at most ``max_tokens`` tokens, EOS included."""
    if particles < 1:
        raise InvalidArgument(f"particles must be >= 1, got {particles}")
    if twist.max_len < max_tokens:
        raise InvalidArgument(f"the twist's window ({twist.max_len} tokens) is shorter than max_tokens={max_tokens}")
    twist.check_feasible()
    dfa, hmm = twist.dfa, twist.hmm
    eos = frozenset(lm.eos_ids)
    n = particles
    matchers = [matcher.copy() for _ in range(n)]
    batch = lm.particles(n) if hasattr(lm, "particles") else PrefixParticles(lm, n)
    lps = batch.start()
    tokens: list[list[int]] = [[] for _ in range(n)]
    states = [dfa.start] * n
    alphas = [hmm.forward_start()] * n
    log_psi = np.zeros(n)  # log psi of each particle's prefix (1 before the first token: Z(empty) is P(L)'s factor)
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
            remaining = max_tokens - len(tokens[i])
            ids, lr = twist.lookahead(alphas[i], states[i], remaining)
            allowed = allowed_ids(matchers[i])
            checks += 1
            ok = np.isin(ids, allowed) & np.isfinite(lr)
            score = np.full(len(ids), -np.inf)
            score[ok] = lps[i][ids[ok]] + lr[ok]
            if not ok.any() or not np.isfinite(score).any():
                log_w[i] = -np.inf  # a dead end (the canonical filter can leave one): the particle dies
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
        finite = np.isfinite(log_w)
        if not finite.any():
            break
        w = np.exp(log_w[finite] - log_w[finite].max())
        if w.sum() ** 2 / (w ** 2).sum() < ess_threshold * n:
            keep = resample(log_w, rng, scheme)
            mean = _log_mean_exp(log_w)
            tokens = [list(tokens[k]) for k in keep]
            matchers = [matchers[k].copy() for k in keep]
            states = [states[k] for k in keep]
            alphas = [alphas[k] for k in keep]
            log_psi = log_psi[keep].copy()
            done = done[keep].copy()
            lps = lps[keep]
            batch.reorder(keep.tolist())
            log_w = np.full(n, mean)
            resamples += 1
    log_z = _log_mean_exp(log_w)
    norm = log_w - (np.logaddexp.reduce(log_w) if np.isfinite(log_w).any() else 0.0)
    parts = [SequenceSample(tokens[i], float(norm[i]), steps=len(tokens[i]) + 1) for i in range(n)]
    return SMCRun(parts, log_z, resamples=resamples, checks=checks, steps=steps)
