"""Samplers: one interface (:class:`Sampler`), masked sampling as the baseline."""
from .base import Sampler, StepContext
from .masked import MaskedSampler, NoTokenAllowed, filter_logits, sample_next

__all__ = ["Sampler", "StepContext", "MaskedSampler", "NoTokenAllowed", "filter_logits", "sample_next"]
