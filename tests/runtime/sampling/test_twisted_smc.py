"""Twisted SMC (runtime/sampling/twisted.py): with the model equal to the HMM the twist is exact and
one particle draws exactly from the target, every run's evidence being P(L); with another HMM the
twist is only a guide and the weights still make the particles consistent."""
from __future__ import annotations

import math

import numpy as np
import pytest

from structgen.bench.decog import HMMAsLM, random_hmm
from structgen.engine.matcher import Matcher
from structgen.errors import InvalidArgument
from structgen.runtime.sampling.decog import DecoG
from structgen.runtime.sampling.draw import draw_samples
from structgen.runtime.sampling.exact import enumerate_target, total_variation
from structgen.runtime.sampling.token_dfa import token_dfa
from structgen.runtime.sampling.twisted import run_twisted_smc
from toy import MAX_TOKENS, toy_grammar, toy_info, toy_lm


def _hmm_lm(seed: int = 7):
    hmm = random_hmm(3, 5, seed)
    lm = HMMAsLM(hmm)
    lm.eos_ids = (4,)
    return hmm, lm


def _frequencies(runs) -> dict:
    f: dict = {}
    for run in runs:
        for p in run.particles:
            if np.isfinite(p.log_weight):
                w = math.exp(run.log_evidence + p.log_weight)
                f[tuple(p.token_ids)] = f.get(tuple(p.token_ids), 0.0) + w
    z = sum(f.values())
    return {k: v / z for k, v in f.items()}


def test_with_the_exact_twist_one_particle_is_an_exact_sample():
    hmm, lm = _hmm_lm()
    twist = DecoG(hmm, token_dfa(toy_grammar()), MAX_TOKENS)
    exact = enumerate_target(lm, Matcher(toy_grammar()), max_tokens=MAX_TOKENS, canonical=False)
    pi = exact.global_target()
    rng = np.random.default_rng(0)
    runs = [run_twisted_smc(lm, Matcher(toy_grammar()), rng, twist=twist, particles=1, max_tokens=MAX_TOKENS)
            for _ in range(4000)]
    # every run's weight is P(L) itself: nothing to correct, so the draw is the target's
    assert all(math.isclose(r.log_evidence, exact.log_pl, rel_tol=0, abs_tol=1e-9) for r in runs)
    counts: dict = {}
    for r in runs:
        counts[tuple(r.particles[0].token_ids)] = counts.get(tuple(r.particles[0].token_ids), 0) + 1
    freq = {k: v / len(runs) for k, v in counts.items()}
    assert set(freq) <= set(pi)
    floor = 0.5 * sum(math.sqrt(p * (1 - p) / len(runs)) for p in pi.values())  # E|f - p| ~ sd, summed
    assert total_variation(pi, freq) < 2.5 * floor
    # plain SMC with one particle is masking's local target, far from it
    assert total_variation(pi, exact.local_target()) > 5 * floor


def test_with_another_hmm_the_weights_correct_the_twist():
    _, lm = _hmm_lm(7)
    guide = random_hmm(3, 5, 99)  # a different HMM: the twist is approximate
    twist = DecoG(guide, token_dfa(toy_grammar()), MAX_TOKENS)
    exact = enumerate_target(lm, Matcher(toy_grammar()), max_tokens=MAX_TOKENS, canonical=False)
    pi = exact.global_target()
    rng = np.random.default_rng(1)
    runs = [run_twisted_smc(lm, Matcher(toy_grammar()), rng, twist=twist, particles=8, max_tokens=MAX_TOKENS)
            for _ in range(1000)]
    assert len({round(r.log_evidence, 6) for r in runs}) > 10  # the weights do vary
    n = 8 * len(runs)
    floor = 0.5 * sum(math.sqrt(p * (1 - p) / n) for p in pi.values())
    tv = total_variation(pi, _frequencies(runs))
    assert tv < 3 * floor and tv < 0.5 * total_variation(pi, exact.local_target()), (tv, floor)


def test_the_evidence_is_unbiased_with_an_inexact_twist():
    _, lm = _hmm_lm(7)
    twist = DecoG(random_hmm(3, 5, 5), token_dfa(toy_grammar()), MAX_TOKENS)
    exact = enumerate_target(lm, Matcher(toy_grammar()), max_tokens=MAX_TOKENS, canonical=False)
    rng = np.random.default_rng(2)
    z = [math.exp(run_twisted_smc(lm, Matcher(toy_grammar()), rng, twist=twist, particles=4,
                                  max_tokens=MAX_TOKENS).log_evidence) for _ in range(600)]
    assert abs(np.mean(z) / math.exp(exact.log_pl) - 1) < 4 * np.std(z) / math.sqrt(len(z)) / math.exp(exact.log_pl) + 1e-3


def test_draw_samples_twisted_smc_on_the_toy_problem():
    info = toy_info()
    hmm = random_hmm(4, 5, 0)
    pi = enumerate_target(toy_lm(), Matcher(toy_grammar()), max_tokens=MAX_TOKENS, canonical=False).global_target()
    out = draw_samples(toy_lm(), toy_grammar(), info, n=200, method="twisted-smc", particles=8,
                       max_tokens=MAX_TOKENS, seed=0, hmm=hmm, canonical=False, ess_warning=None)
    assert out and all(tuple(s.token_ids) in pi for s in out)
    assert out.ess is not None and out.ess >= 1 and np.isfinite(out.log_evidence)
    f: dict = {}
    for s in out:
        f[tuple(s.token_ids)] = f.get(tuple(s.token_ids), 0.0) + math.exp(s.log_evidence + s.log_weight)
    z = sum(f.values())
    assert total_variation(pi, {k: v / z for k, v in f.items()}) < 0.08


def test_twisted_smc_needs_an_hmm_and_a_window_as_long_as_the_budget():
    with pytest.raises(InvalidArgument, match="hmm="):
        draw_samples(toy_lm(), toy_grammar(), toy_info(), n=1, method="twisted-smc", max_tokens=MAX_TOKENS, seed=0,
                     canonical=False)
    hmm, lm = _hmm_lm()
    twist = DecoG(hmm, token_dfa(toy_grammar()), 4)
    with pytest.raises(InvalidArgument, match="window"):
        run_twisted_smc(lm, Matcher(toy_grammar()), np.random.default_rng(0), twist=twist, particles=2,
                        max_tokens=MAX_TOKENS)


def test_runs_batched_in_one_cache_are_independent_runs():
    """Many runs share one batch of the LM, each resampled within its own rows: with the exact twist
    every run is still one exact draw of weight P(L), and with another HMM they still converge."""
    from structgen.runtime.sampling.twisted import run_twisted_smc_runs

    hmm, lm = _hmm_lm()
    exact = enumerate_target(lm, Matcher(toy_grammar()), max_tokens=MAX_TOKENS, canonical=False)
    pi = exact.global_target()
    twist = DecoG(hmm, token_dfa(toy_grammar()), MAX_TOKENS)
    runs = run_twisted_smc_runs(lm, Matcher(toy_grammar()), np.random.default_rng(3), twist=twist, particles=1,
                                max_tokens=MAX_TOKENS, runs=150)
    assert len(runs) == 150 and all(math.isclose(r.log_evidence, exact.log_pl, abs_tol=1e-9) for r in runs)
    guide = DecoG(random_hmm(3, 5, 99), token_dfa(toy_grammar()), MAX_TOKENS)
    runs = run_twisted_smc_runs(lm, Matcher(toy_grammar()), np.random.default_rng(4), twist=guide, particles=8,
                                max_tokens=MAX_TOKENS, runs=1000)
    assert sum(r.resamples for r in runs) > 0  # resampling happened, within runs
    n = 8 * len(runs)
    floor = 0.5 * sum(math.sqrt(p * (1 - p) / n) for p in pi.values())
    tv = total_variation(pi, _frequencies(runs))
    assert tv < 3 * floor and tv < 0.5 * total_variation(pi, exact.local_target()), (tv, floor)
