"""TV to an exact target against samples and seconds for one sampler: the measurement every part of
``structgen bench samplers`` makes (``samplers.py``, ``samplers_unlikely.py``)."""
from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np

from ..runtime.sampling.asap import ASAp
from ..runtime.sampling.awrs import sample_awrs
from ..runtime.sampling.weights import effective_sample_size, log_mean_exp
from ..runtime.sampling.exact import total_variation
from ..runtime.sampling.sequence import DeadEnd, sample_masked
from ..runtime.sampling.smc import run_smc
from ..runtime.sampling.twisted import MAX_BATCH_ROWS, run_twisted_smc_runs

__all__ = ["tv_curve", "SMC_METHODS"]

SMC_METHODS = ("smc", "twisted-smc")


def _checkpoints(n: int) -> list[int]:
    pts = [c for c in (30, 100, 300, 1000, 3000, 10000, 30000, 100000) if c < n]
    return pts + [n]


def tv_curve(method: str, lm, matcher, pi: dict, *, n: int, max_tokens: int, seed: int, particles: int = 16,
             progress: Callable[[str], None] | None = None, twist: Any = None) -> dict:
    """TV of the first k samples to ``pi`` at checkpoints k, plus costs (and the seconds at each
    checkpoint).  SMC counts particles: ``n // particles`` runs, each run's particles weighted by its
    evidence times their weight.  ``twist``: the ``DecoG`` over the constraint that ``twisted-smc``
    takes as its twist and ``decog`` samples with."""
    rng = np.random.default_rng(seed)
    counts: dict[tuple, float] = {}
    total_w = 0.0
    curve, exact_curve, at_seconds = [], [], []
    checks = steps = dead = 0
    log_ws: list[float] = []  # AWRS: every draw's log weight (-inf for dead ones); SMC: each run's log evidence
    run_ess: list[float] = []
    passes0 = lm.forward_passes
    asap = ASAp(lm, matcher, max_tokens=max_tokens) if method == "asap" else None
    t0 = time.perf_counter()
    done = 0
    pending: list = []  # twisted SMC: runs drawn in one batch, not yet counted
    marks = _checkpoints(n)
    while done < n:
        items: list[tuple[tuple, float]] = []
        try:
            if method == "masked":
                s = sample_masked(lm, matcher, rng, max_tokens=max_tokens)
                items, checks, steps = [(tuple(s.token_ids), 1.0)], checks + s.checks, steps + s.steps
            elif method == "asap":
                s = asap.sample(rng)
                items, steps = [(tuple(s.token_ids), 1.0)], steps + s.steps
            elif method == "awrs":
                s = sample_awrs(lm, matcher, rng, max_tokens=max_tokens)
                checks, steps = checks + s.checks, steps + s.steps
                items = [(tuple(s.token_ids), math.exp(s.log_weight))] if np.isfinite(s.log_weight) else []
                log_ws.append(s.log_weight)
                dead += not items
            elif method == "decog":
                s = twist.sample(lm, rng, matcher=matcher if hasattr(matcher, "filter") else None)
                items, steps = [(tuple(s.token_ids), 1.0)], steps + s.steps
            else:
                if method == "twisted-smc":
                    if not pending:  # runs batched in one KV cache (MAX_BATCH_ROWS rows)
                        left = -(-(n - done) // particles)
                        pending.extend(run_twisted_smc_runs(lm, matcher, rng, twist=twist, particles=particles,
                                                            max_tokens=max_tokens,
                                                            runs=max(1, min(left, MAX_BATCH_ROWS // particles))))
                    run = pending.pop(0)
                else:
                    run = run_smc(lm, matcher, rng, particles=particles, max_tokens=max_tokens)
                log_ws.append(run.log_evidence)
                run_ess.append(effective_sample_size(p.log_weight for p in run.particles))
                z = math.exp(run.log_evidence) if np.isfinite(run.log_evidence) else 0.0
                checks, steps = checks + run.checks, steps + sum(p.steps for p in run.particles)
                items = [(tuple(p.token_ids), z * math.exp(p.log_weight)) for p in run.particles
                         if np.isfinite(p.log_weight)]
        except DeadEnd:
            dead += 1
        done += particles if method in SMC_METHODS else 1
        for x, w in items:
            counts[x] = counts.get(x, 0.0) + w
            total_w += w
        while marks and done >= marks[0]:
            k = marks.pop(0)
            f = {x: v / total_w for x, v in counts.items()} if total_w > 0 else {}
            curve.append((k, total_variation(pi, f)))
            at_seconds.append(time.perf_counter() - t0)
            if asap is not None:
                exact_curve.append((k, total_variation(pi, {x: asap.next_sample_probability(x) for x in pi})))
            if progress:
                progress(f"{method}: {k} samples, TV {curve[-1][1]:.4f}")
    seconds = time.perf_counter() - t0
    samples = n if method not in SMC_METHODS else -(-n // particles) * particles
    ess = log_evidence = None
    if method == "awrs":
        ess = effective_sample_size(log_ws)
    elif method in SMC_METHODS:
        ess = float(np.mean(run_ess)) if run_ess else 0.0  # per run, out of `particles`
    if log_ws:
        log_evidence = log_mean_exp(log_ws)
    return {"ess": ess, "log_evidence": log_evidence, "method": method, "particles": particles if method in SMC_METHODS
            else None, "curve": curve, "curve_seconds": at_seconds, "exact_curve": exact_curve, "seconds": seconds,
            "ms_per_sample": 1000 * seconds / max(1, samples), "ms_per_token": 1000 * seconds / max(1, steps),
            "forward_passes_per_sample": (lm.forward_passes - passes0) / max(1, samples),
            "checks_per_token": checks / max(1, steps) if method in ("masked", "awrs", "smc") else None,
            "dead": dead}


def _noise_floor(pi: dict, n: int, seed: int = 12345) -> float:
    keys = list(pi)
    p = np.array([pi[k] for k in keys])
    draws = np.random.default_rng(seed).choice(len(keys), size=n, p=p / p.sum())
    return total_variation(pi, [keys[i] for i in draws])
