"""Distribution-correct samplers against exact targets (the section 0 harness on the toy problem).

Every target is computed exactly by enumeration; sampled frequencies are compared by total
variation with the noise floor of as many exact draws (TV < 3 x floor), as the harness says.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from structgen.engine.matcher import Matcher
from structgen.runtime.sampling.asap import ASAp
from structgen.runtime.sampling.awrs import ESTIMATORS, awrs_step, sample_awrs
from structgen.runtime.sampling.draw import draw_samples
from structgen.runtime.sampling.exact import enumerate_target, total_variation
from structgen.runtime.sampling.sequence import sample_masked
from structgen.runtime.sampling.smc import resample, run_smc
from toy import MAX_TOKENS, toy_grammar, toy_info, toy_lm


@pytest.fixture(scope="module")
def toy():
    lm, matcher = toy_lm(), Matcher(toy_grammar())
    exact = enumerate_target(lm, matcher, max_tokens=MAX_TOKENS)
    return lm, matcher, exact


def _floor(target: dict, n: int, seed: int = 99) -> float:
    """TV between the target and n exact draws from it: the noise floor of n samples."""
    keys = list(target)
    p = np.array([target[k] for k in keys])
    draws = np.random.default_rng(seed).choice(len(keys), size=n, p=p / p.sum())
    return total_variation(target, [keys[i] for i in draws])


def test_the_exact_targets(toy):
    lm, matcher, exact = toy
    pi, q = exact.global_target(), exact.local_target()
    assert len(pi) == 68  # 17 strings, several tokenizations each ("00" and "11" are tokens)
    strings = {"".join("0 1 00 11".split()[t] for t in x) for x in pi}
    assert strings == set(__import__("toy").LANGUAGE)
    assert math.isclose(sum(pi.values()), 1.0) and math.isclose(sum(q.values()), 1.0)
    assert total_variation(pi, q) > 0.15  # masking samples a visibly different distribution


def test_masked_sampling_samples_the_local_target(toy):
    lm, matcher, exact = toy
    rng = np.random.default_rng(0)
    got = [sample_masked(lm, matcher, rng, max_tokens=MAX_TOKENS).token_ids for _ in range(5000)]
    q, pi = exact.local_target(), exact.global_target()
    assert total_variation(q, got) < 3 * _floor(q, 5000)
    assert total_variation(pi, got) > 0.15  # ...and not the global one


def test_asap_converges_to_the_global_target(toy):
    lm, matcher, exact = toy
    pi = exact.global_target()
    lm = toy_lm()
    asap = ASAp(lm, matcher, max_tokens=MAX_TOKENS)
    rng = np.random.default_rng(1)
    thetas, tvs, passes = [], [], 0
    for _ in range(5):
        before = lm.forward_passes
        for _ in range(1000):
            asap.sample(rng)
        passes += lm.forward_passes - before
        thetas.append(asap.root.theta)
        tvs.append(total_variation(pi, {x: asap.next_sample_probability(x) for x in pi}))
    assert tvs[-1] <= 0.01  # the distribution of the next sample, read exactly off the trie
    assert all(b <= a + 1e-12 for a, b in zip(thetas, thetas[1:]))  # the bound only tightens
    p_l = math.exp(exact.log_pl)
    assert thetas[-1] >= p_l - 1e-12 and thetas[-1] <= 1.05 * p_l  # theta(root) -> P(L) from above
    assert passes <= exact.nodes  # a prefix is asked of the LM once, however often it is sampled


def test_asap_bounds_are_upper_bounds_of_the_exact_efg(toy):
    lm, matcher, exact = toy
    asap = ASAp(lm, matcher, max_tokens=MAX_TOKENS)
    rng = np.random.default_rng(2)
    for _ in range(300):
        asap.sample(rng)
    log_p = exact.log_p

    def efg(prefix, lp_prefix):  # exact: sum over completions of P(s | prefix)
        return sum(math.exp(v - lp_prefix) for x, v in log_p.items() if x[:len(prefix)] == prefix)

    def walk(node, prefix, lp_prefix):
        if node.ids is None or not len(node.ids):
            return
        assert node.theta >= efg(prefix, lp_prefix) - 1e-9
        for t, child in node.children.items():
            if t not in lm.eos_ids:
                walk(child, prefix + (t,), lp_prefix + math.log(node.p(t)))

    walk(asap.root, (), 0.0)


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("case", ["random", "peaked", "single"])
def test_awrs_weights_are_unbiased(estimator, case):
    """One step, no LM: E[w 1[y = t]] = p(t) c(t) for every token, so E[w] = Z_c."""
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.full(50, 0.5))
    c = rng.random(50) < 0.2
    if case == "peaked":
        p = np.full(50, 0.3 / 49)
        p[7] = 0.7
        c[7] = True
    elif case == "single":
        c[:] = False
        c[11] = True
    lp, n = np.log(p), 40_000
    acc = np.zeros(50)
    for _ in range(n):
        y, lw, _ = awrs_step(lp, lambda t: bool(c[t]), rng, estimator=estimator)
        if y is not None:
            acc[y] += math.exp(lw)
    z = float(p[c].sum())
    assert abs(acc.sum() / n - z) < 0.02 * z + 3e-3
    assert np.abs(acc / n - p * c).max() < 0.02 * z + 3e-3
    assert not acc[~c].any()  # only allowed tokens are ever returned


def test_awrs_sequence_weights_estimate_the_global_target(toy):
    lm, matcher, exact = toy
    pi = exact.global_target()
    rng = np.random.default_rng(4)
    got = [sample_awrs(lm, matcher, rng, max_tokens=MAX_TOKENS) for _ in range(6000)]
    w = np.exp([s.log_weight for s in got])
    assert abs(w.mean() / math.exp(exact.log_pl) - 1) < 0.05  # mean(w) estimates P(L)
    assert total_variation(pi, [s.token_ids for s in got], w) < 3 * _floor(pi, 6000)


@pytest.mark.minutes  # 41 s: make test-slow
def test_smc_evidence_and_weighted_particles(toy):
    lm, matcher, exact = toy
    pi, p_l = exact.global_target(), math.exp(exact.log_pl)
    rng = np.random.default_rng(5)
    tv = {}
    for n_particles, runs in ((1, 1500), (4, 1500), (16, 1500)):
        est, evid = {}, []
        self_norm = {}
        for _ in range(runs):
            run = run_smc(lm, matcher, rng, particles=n_particles, max_tokens=MAX_TOKENS)
            z = math.exp(run.log_evidence)
            evid.append(z)
            for part in run.particles:
                if np.isfinite(part.log_weight):
                    x = tuple(part.token_ids)
                    est[x] = est.get(x, 0.0) + z * math.exp(part.log_weight)
                    self_norm[x] = self_norm.get(x, 0.0) + math.exp(part.log_weight) / runs
        assert abs(np.mean(evid) / p_l - 1) < 0.05, n_particles  # unbiased for every N
        total = sum(est.values())
        tv[n_particles] = total_variation(pi, self_norm)
        if n_particles == 16:  # runs weighted by their evidence: a consistent estimate of pi
            assert total_variation(pi, {x: v / total for x, v in est.items()}) < 3 * _floor(pi, runs * 4)
    assert tv[1] > 0.15 and tv[4] < tv[1] and tv[16] < tv[4]  # N = 1 is masking; more particles, less bias


def test_smc_log_evidence_mean_within_two_percent(toy):
    lm, matcher, exact = toy
    rng = np.random.default_rng(6)
    z = [math.exp(run_smc(lm, matcher, rng, particles=16, max_tokens=MAX_TOKENS).log_evidence) for _ in range(1500)]
    assert abs(np.mean(z) / math.exp(exact.log_pl) - 1) < 0.02


@pytest.mark.parametrize("scheme", ["systematic", "stratified"])
def test_resampling_keeps_particles_in_proportion_to_their_weights(scheme):
    rng = np.random.default_rng(7)
    w = np.array([0.1, 0.2, 0.3, 0.4])
    counts = np.zeros(4)
    for _ in range(5000):
        counts += np.bincount(resample(np.log(w), rng, scheme), minlength=4)
    assert np.allclose(counts / counts.sum(), w, atol=0.01)


@pytest.mark.parametrize("method", ["masked", "asap", "awrs", "smc"])
def test_every_method_is_reproducible_and_stays_in_the_language(method, toy):
    lm = toy[0]
    runs = [draw_samples(lm, toy_grammar(), toy_info(), n=20, method=method, particles=4, max_tokens=MAX_TOKENS,
                         seed=11) for _ in range(2)]
    assert [(s.token_ids, s.log_weight) for s in runs[0]] == [(s.token_ids, s.log_weight) for s in runs[1]]
    strings = set(__import__("toy").LANGUAGE)
    assert all(s.text in strings for s in runs[0])


def test_budget_aware_particles_steer_towards_ending(tiny_model):
    """On a random model that rambles, particles that may write anything die at the token budget;
    budget-aware particles only take tokens after which the output can still finish, and end."""
    import re

    from structgen.api import compiler_for
    from structgen.runtime.sampling.lm import ModelLM

    g = compiler_for(tiny_model).compile_regex(r"[a-z]{1,30}\.")
    lm = ModelLM(tiny_model, tiny_model.encode("Write a word."), temperature=1.0)
    m = Matcher(g)
    rng = np.random.default_rng(8)
    alive = {}
    for aware in (False, True):
        runs = [run_smc(lm, m, rng, particles=6, max_tokens=5, budget_aware=aware) for _ in range(4)]
        parts = [p for r in runs for p in r.particles if np.isfinite(p.log_weight)]
        alive[aware] = len(parts)
        for p in parts:
            assert len(p.token_ids) < 5 and re.fullmatch(r"[a-z]{1,30}\.", _text(tiny_model, p.token_ids))
    assert alive[True] == 24 and alive[True] > alive[False]


def _text(model, ids):
    return model.info.decode_bytes(ids).decode()
