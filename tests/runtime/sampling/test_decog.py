"""Deco-G (docs/algorithms.md section 3): the exact verification experiment, the backward table,
pruning with its unpruned fallback, and the sampler behind structgen.sample's interface."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from structgen.bench.decog import HMMAsLM, UniformLM, _toy_dfa, exact_experiment, random_hmm
from structgen.errors import GenerationError, StructgenError
from structgen.runtime.sampling.decog import BackwardTable, DecoG, resolve_hmm
from structgen.runtime.sampling.draw import draw_samples
from structgen.runtime.sampling.hmm import HMM, HMMError
from structgen.runtime.sampling.token_dfa import dfa_from_function
from toy import LANGUAGE, MAX_TOKENS, toy_grammar, toy_info, toy_lm


def test_the_exact_experiment():
    e = exact_experiment(seed=0, samples=500)
    assert e["max_abs_error"] < 1e-12  # the sampler draws exactly P_HMM(x | format)
    assert math.isclose(e["p_alpha_table"], e["p_alpha_enumerated"], rel_tol=1e-12)
    assert e["tv_uniform_lm"] > 0.3  # another LM: a different distribution...
    assert e["uniform_satisfied"] == e["uniform_samples"]  # ...but the format always holds


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sequence_probabilities_sum_to_one_over_the_format(seed):
    hmm = random_hmm(4, 4, seed)
    dfa = _toy_dfa()
    dg = DecoG(hmm, dfa, 5, exact_length=True)
    seqs = list(itertools.product(range(4), repeat=5))
    lm = UniformLM(4)
    total = sum(math.exp(dg.sequence_log_prob(lm, x)) for x in seqs)
    assert math.isclose(total, 1.0, rel_tol=1e-12)
    assert all(dg.sequence_log_prob(lm, x) == -math.inf for x in seqs if not dfa.accepts(x))


def test_table_scales_keep_long_formats_finite():
    """A 400-token forced format: beta is ~1e-300 and below, kept as a normalised vector and a log scale."""
    hmm = random_hmm(3, 50, 0)
    dfa = dfa_from_function(2, 50, lambda s, t: (1 - s) if t == 7 else None, 0, [0])
    table = BackwardTable(hmm, dfa, 400)
    lp = table.log_prob(0, 400, hmm.gamma)
    assert np.isfinite(lp) and lp < -1000  # far below float64's smallest number, still exact in log space
    want = hmm.log_prob([7] * 400)
    assert math.isclose(lp, want, rel_tol=1e-9)
    assert table.log_prob(0, 399, hmm.gamma) == -math.inf  # odd lengths end in state 1: not final


def test_pruning_keeps_the_format():
    hmm = random_hmm(6, 4, 0)
    for kw in ({"top_k": 1}, {"top_k": 3}, {"mass": 0.5}):
        dg = DecoG(hmm, _toy_dfa(), 4, exact_length=True, **kw)
        rng = np.random.default_rng(1)
        assert all(_toy_dfa().accepts(dg.sample(UniformLM(4), rng).token_ids) for _ in range(200))


def test_pruning_that_leaves_no_mass_redoes_the_step_unpruned():
    """The most probable hidden state emits the one token the format needs with a probability
    that underflows in float32: pruned to it, every token's mass is 0, so the step is redone."""
    tiny = np.float32(1.4e-45)  # float32's smallest denormal: 0.4 x tiny rounds to 0
    B = np.array([[1.0, tiny], [0.5, 0.5], [0.5, 0.5]], dtype=np.float32)
    hmm = HMM(np.array([0.4, 0.3, 0.3]), np.full((3, 3), 1 / 3), B)
    dfa = dfa_from_function(2, 2, lambda s, t: 1 if (s == 0 and t == 1) else None, 0, [1])
    dg = DecoG(hmm, dfa, 1, exact_length=True, top_k=1)
    ids, lp = dg.step_logprobs(hmm.forward_start(), 0, 1, np.log([0.5, 0.5]))
    assert list(ids) == [1] and lp[0] == 0.0
    assert dg.stats.redos == 1


def test_the_hmm_must_cover_the_automatons_tokens():
    with pytest.raises(HMMError, match="token 3"):
        DecoG(random_hmm(2, 2, 0), _toy_dfa(), 4, exact_length=True)


def test_an_infeasible_window_is_refused_at_once():
    hmm = random_hmm(3, 50, 0)
    dfa = dfa_from_function(3, 50, lambda s, t: s + 1 if (t == 5 and s < 2) else None, 0, [2])
    with pytest.raises(GenerationError, match="fits within 1 tokens"):
        DecoG(hmm, dfa, 1, exact_length=True).sample(UniformLM(50), np.random.default_rng(0))


def test_decog_on_the_toy_problem_only_returns_the_language():
    """The engine's token automaton of the toy regex, an HMM over the 5-token vocabulary
    (EOS included), the toy LM: every sample is one of the 17 strings."""
    info = toy_info()
    hmm = random_hmm(4, 5, 0)
    samples = draw_samples(toy_lm(), toy_grammar(), info, n=300, method="decog", max_tokens=MAX_TOKENS, seed=0,
                           hmm=hmm)
    words = {"".join("0 1 00 11".split()[t] for t in s.token_ids) for s in samples}
    assert words <= set(LANGUAGE) and len(words) > 5


def test_decog_with_the_hmm_as_lm_matches_the_exact_target_on_the_engine_dfa():
    """With the LM equal to the guiding HMM, Deco-G on the engine's automaton samples exactly
    P_HMM(x | x in L, x ends with EOS within the window)."""
    from structgen.runtime.sampling.token_dfa import token_dfa

    hmm = random_hmm(3, 5, 7)
    dfa = token_dfa(toy_grammar())
    lm = HMMAsLM(hmm)
    lm.eos_ids = (4,)
    dg = DecoG(hmm, dfa, MAX_TOKENS)
    # every accepted token sequence: enumerate words of the language in every tokenization
    seqs = [x for n in range(1, 6) for x in itertools.product(range(4), repeat=n) if dfa.accepts(list(x) + [4])]
    assert len(seqs) == 68
    weight = {x: math.exp(hmm.log_prob(list(x) + [4])) for x in seqs}
    z = sum(weight.values())
    for x in seqs:
        assert math.isclose(math.exp(dg.sequence_log_prob(lm, x)), weight[x] / z, rel_tol=1e-9)


def test_resolve_hmm_checks_the_vocabulary_and_paths(tmp_path):
    hmm = random_hmm(2, 10, 0)
    with pytest.raises(HMMError, match="10 tokens, the model's 12"):
        resolve_hmm(hmm, 12)
    with pytest.raises(ValueError, match="needs hmm="):
        resolve_hmm(None, 10)
    p = hmm.save(tmp_path / "h")
    assert resolve_hmm(str(p), 10).hidden == 2
    with pytest.raises(HMMError):
        resolve_hmm(tmp_path / "missing.npz", 10)
    assert issubclass(HMMError, StructgenError)
