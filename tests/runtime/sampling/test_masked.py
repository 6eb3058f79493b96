"""Greedy and filtered sampling over masked logits."""
from __future__ import annotations

import math

import pytest
import torch

from structgen.errors import GenerationError
from structgen.runtime.masks import apply_token_bitmask_inplace, bool_to_bitmask
from structgen.runtime.sampling.masked import filter_logits, sample_next


def test_greedy_is_argmax_and_respects_mask():
    logits = torch.tensor([0.0, 5.0, 1.0, 4.0])
    assert sample_next(logits) == 1
    allowed = torch.tensor([[True, False, True, True]])
    apply_token_bitmask_inplace(logits, bool_to_bitmask(allowed))
    assert sample_next(logits) == 3


def test_all_masked_raises():
    logits = torch.full((10,), float("-inf"))
    with pytest.raises(GenerationError):
        sample_next(logits)
    with pytest.raises(GenerationError):
        sample_next(logits, temperature=1.0)


def test_top_k_and_top_p_filters():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    assert torch.isfinite(filter_logits(logits, top_k=2)).tolist() == [True, True, False, False]
    assert torch.isfinite(filter_logits(logits, top_p=0.7)).tolist() == [True, True, False, False]
    assert torch.isfinite(filter_logits(logits, top_p=0.8)).tolist() == [True, True, False, False]
    assert torch.isfinite(filter_logits(logits, top_p=0.81)).tolist() == [True, True, True, False]
    assert torch.isfinite(filter_logits(logits, top_p=0.01)).tolist() == [True, False, False, False]


def test_top_p_after_masking_keeps_allowed_tail():
    # The unmasked nucleus at top_p=0.9 would be tokens {0, 1}; both are
    # masked, so the nucleus must be computed among the allowed ones.
    logits = torch.log(torch.tensor([0.6, 0.35, 0.03, 0.02]))
    allowed = torch.tensor([[False, False, True, True]])
    apply_token_bitmask_inplace(logits, bool_to_bitmask(allowed))
    g = torch.Generator().manual_seed(0)
    seen = {sample_next(logits, temperature=1.0, top_p=0.9, generator=g) for _ in range(200)}
    assert seen == {2, 3}


def test_sampling_distribution_and_seed():
    p = torch.tensor([0.1, 0.2, 0.3, 0.4])
    logits = torch.log(p)
    g = torch.Generator().manual_seed(123)
    n = 8000
    counts = torch.zeros(4)
    for _ in range(n):
        counts[sample_next(logits, temperature=1.0, generator=g)] += 1
    freq = counts / n
    assert torch.allclose(freq, p, atol=0.025)
    a = [sample_next(logits, temperature=1.0, generator=torch.Generator().manual_seed(5)) for _ in range(3)]
    b = [sample_next(logits, temperature=1.0, generator=torch.Generator().manual_seed(5)) for _ in range(3)]
    assert a == b


def test_temperature_sharpens():
    logits = torch.tensor([0.0, math.log(2.0)])
    g = torch.Generator().manual_seed(1)
    n = 5000
    hits = sum(sample_next(logits, temperature=0.25, generator=g) for _ in range(n))
    # p(1) = 2^4 / (1 + 2^4) = 0.941
    assert abs(hits / n - 16 / 17) < 0.02


def test_bf16_logits_ok():
    logits = torch.tensor([0.0, 3.0, 1.0], dtype=torch.bfloat16)
    assert sample_next(logits) == 1
    assert sample_next(logits, temperature=0.5, top_k=1) == 1
