"""Bitmask helpers against a brute-force Python reference."""
from __future__ import annotations

import random

import pytest
import torch

from structgen.runtime.masks import (
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    bitmask_to_bool,
    bool_to_bitmask,
    get_bitmask_shape,
    reset_token_bitmask,
)


def _bit(word: int, b: int) -> bool:
    return (word & 0xFFFFFFFF) >> b & 1 == 1


def _ref_allowed(row: list[int], t: int) -> bool:
    return _bit(row[t // 32], t % 32)


def _random_mask(rng: random.Random, rows: int, words: int) -> torch.Tensor:
    vals = [[rng.getrandbits(32) - 2**31 for _ in range(words)] for _ in range(rows)]
    # Sprinkle in the extreme words too.
    for r in range(rows):
        for w in range(words):
            x = rng.random()
            if x < 0.1:
                vals[r][w] = -1
            elif x < 0.2:
                vals[r][w] = 0
            elif x < 0.25:
                vals[r][w] = -(2**31)
    return torch.tensor(vals, dtype=torch.int32)


def test_allocate_shape_and_all_allowed():
    m = allocate_token_bitmask(3, 49152)
    assert m.dtype == torch.int32 and m.shape == (3, 1536)
    assert get_bitmask_shape(2, 33) == (2, 2)
    assert allocate_token_bitmask(1, 33).shape == (1, 2)
    assert bool(bitmask_to_bool(m, 49152).all())
    m[0, 0] = 0
    reset_token_bitmask(m)
    assert int(m[0, 0]) == -1


@pytest.mark.parametrize("vocab", [1, 31, 32, 33, 100, 1000])
def test_bitmask_to_bool_matches_reference(vocab):
    rng = random.Random(vocab)
    rows, words = 3, (vocab + 31) // 32
    m = _random_mask(rng, rows, words)
    b = bitmask_to_bool(m, vocab)
    assert b.shape == (rows, vocab)
    lm = m.tolist()
    for r in range(rows):
        assert b[r].tolist() == [_ref_allowed(lm[r], t) for t in range(vocab)]
    assert torch.equal(bool_to_bitmask(b)[..., : words - 1], m[..., : words - 1])
    assert torch.equal(bitmask_to_bool(bool_to_bitmask(b), vocab), b)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("logit_width_delta", [-40, -1, 0, 7, 64])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_apply_2d_matches_reference(seed, logit_width_delta, dtype):
    rng = random.Random(seed * 1000 + logit_width_delta)
    vocab = rng.randrange(40, 300)
    words = (vocab + 31) // 32
    width = max(1, words * 32 + logit_width_delta)
    rows = rng.randrange(1, 5)
    m = _random_mask(rng, rows, words)
    logits = torch.randn(rows, width).to(dtype)
    orig = logits.clone()
    apply_token_bitmask_inplace(logits, m)
    lm = m.tolist()
    for r in range(rows):
        for t in range(width):
            if t >= words * 32 or not _ref_allowed(lm[r], t):  # beyond the mask: closed
                assert logits[r, t] == float("-inf")
            else:
                assert logits[r, t] == orig[r, t]


def test_apply_vocab_size_limits_width():
    m = torch.zeros(1, 4, dtype=torch.int32)  # nothing allowed
    logits = torch.zeros(1, 128)
    apply_token_bitmask_inplace(logits, m, vocab_size=100)
    assert bool(torch.isneginf(logits).all())  # padding past vocab_size is closed too
    m = torch.full((1, 4), -1, dtype=torch.int32)  # everything allowed
    logits = torch.zeros(1, 128)
    apply_token_bitmask_inplace(logits, m, vocab_size=100)
    assert bool((logits[0, :100] == 0).all()) and bool(torch.isneginf(logits[0, 100:]).all())


def test_apply_1d_with_1d_and_2d_mask():
    rng = random.Random(7)
    m = _random_mask(rng, 1, 5)
    for mask in (m, m[0]):
        logits = torch.randn(150)
        orig = logits.clone()
        apply_token_bitmask_inplace(logits, mask)
        for t in range(150):
            expect = orig[t] if _ref_allowed(m[0].tolist(), t) else float("-inf")
            assert logits[t] == expect
    with pytest.raises(ValueError):
        apply_token_bitmask_inplace(torch.randn(150), _random_mask(rng, 2, 5))


def test_apply_indices_only_touches_listed_rows():
    rng = random.Random(11)
    rows, vocab = 4, 200
    m = _random_mask(rng, rows, 7)
    logits = torch.randn(rows, vocab)
    orig = logits.clone()
    apply_token_bitmask_inplace(logits, m, indices=[2, 0])
    lm = m.tolist()
    for r in range(rows):
        for t in range(vocab):
            if r in (0, 2) and not _ref_allowed(lm[r], t):
                assert logits[r, t] == float("-inf")
            else:
                assert logits[r, t] == orig[r, t]
    with pytest.raises(IndexError):
        apply_token_bitmask_inplace(logits, m, indices=[4])


def test_bit_31_and_word_boundaries():
    vocab = 96
    allowed = torch.zeros(vocab, dtype=torch.bool)
    allowed[[0, 31, 32, 63, 95]] = True
    m = bool_to_bitmask(allowed.unsqueeze(0))
    logits = torch.zeros(vocab)
    apply_token_bitmask_inplace(logits, m)
    assert torch.isfinite(logits).nonzero().flatten().tolist() == [0, 31, 32, 63, 95]
