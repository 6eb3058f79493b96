"""The HMM: EM that recovers a known model's likelihood, files, and its own checks."""
from __future__ import annotations

import math

import numpy as np
import pytest

from structgen.runtime.sampling.hmm import HMM, HMMError, fit_hmm


def _known_hmm() -> HMM:
    h, v = 3, 12
    A = np.full((h, h), 0.05)
    np.fill_diagonal(A, 0.9)
    A /= A.sum(1, keepdims=True)
    B = np.full((h, v), 0.01)
    for z in range(h):
        B[z, 4 * z: 4 * z + 4] = 1.0
    B /= B.sum(1, keepdims=True)
    return HMM(np.full(h, 1 / h), A, B)


def _sample(hmm: HMM, n: int, rng) -> list[list[int]]:
    out = []
    for _ in range(n):
        z = rng.choice(hmm.hidden, p=hmm.gamma)
        seq = []
        for _ in range(rng.integers(4, 20)):
            seq.append(int(rng.choice(hmm.vocab_size, p=hmm.B[z])))
            z = rng.choice(hmm.hidden, p=hmm.A[z])
        out.append(seq)
    return out


def test_em_climbs_to_the_true_models_likelihood():
    true = _known_hmm()
    seqs = _sample(true, 800, np.random.default_rng(0))
    fit = fit_hmm(seqs, hidden=3, vocab_size=12, iterations=60, seed=1)
    ll = fit.meta["loglik_per_token"]
    assert all(b >= a - 1e-9 for a, b in zip(ll, ll[1:]))  # EM never goes down
    n = sum(map(len, seqs))
    got = sum(fit.log_prob(s) for s in seqs) / n
    want = sum(true.log_prob(s) for s in seqs) / n
    assert got > want - 0.02  # as good as the model that made the data (or overfit a little)
    assert (fit.B > 0).all() and np.allclose(fit.A.sum(1), 1) and np.allclose(fit.B.sum(1), 1, atol=1e-5)


def test_the_forward_pass_matches_enumeration():
    hmm = _known_hmm()
    total = sum(math.exp(hmm.log_prob([a, b])) for a in range(12) for b in range(12))
    assert math.isclose(total, 1.0, rel_tol=1e-12)
    lp = hmm.next_token_logprobs([0, 5])
    assert math.isclose(lp[3], hmm.log_prob([0, 5, 3]) - hmm.log_prob([0, 5]), rel_tol=1e-12)


def test_padded_batches_give_the_same_fit_as_one_by_one():
    seqs = _sample(_known_hmm(), 40, np.random.default_rng(3))
    a = fit_hmm(seqs, hidden=3, vocab_size=12, iterations=3, seed=0, batch_size=40, tol=0.0)
    b = fit_hmm(seqs, hidden=3, vocab_size=12, iterations=3, seed=0, batch_size=1, tol=0.0)
    assert np.allclose(a.A, b.A) and np.allclose(a.B, b.B, rtol=1e-5)


def test_save_and_load(tmp_path):
    hmm = fit_hmm([[1, 2, 3, 0], [2, 2, 0]], hidden=2, vocab_size=5, eos_ids=(0,), iterations=2, tokenizer="toy")
    p = hmm.save(tmp_path / "model.npz")
    back = HMM.load(p)
    assert back.eos_ids == (0,) and back.tokenizer == "toy" and back.meta["sequences"] == 2
    assert np.array_equal(back.B, hmm.B) and np.array_equal(back.A, hmm.A)


def test_bad_files_and_matrices_are_hmm_errors(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an npz file")
    with pytest.raises(HMMError, match="cannot read"):
        HMM.load(bad)
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(HMMError):
        HMM.load(tmp_path / "other.npz")
    with pytest.raises(HMMError, match="> 0"):
        HMM(np.ones(2) / 2, np.ones((2, 2)) / 2, np.array([[1.0, 0.0], [0.5, 0.5]]))
    with pytest.raises(HMMError, match="shapes"):
        HMM(np.ones(2) / 2, np.ones((3, 3)) / 3, np.ones((2, 4)) / 4)


def test_fit_refuses_what_it_cannot_fit():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        fit_hmm([[1, 9]], hidden=2, vocab_size=5)
    with pytest.raises(ValueError, match="no non-empty"):
        fit_hmm([[]], hidden=2, vocab_size=5)
