"""The sampler seam of the decoding runtime: masked logits in, one token out.

A sampler sees one step at a time (:class:`StepContext`): the logits (already masked when
``needs_mask`` is True, the raw model logits otherwise, for samplers that test candidates with
the matcher themselves, such as adaptive rejection sampling) and the matcher.  It may carry state
across steps and an importance weight for the sequence (``log_weight``: 0 for samplers that draw
from the masked distribution as it is).  The runtime redraws without a token the matcher or the
budget guard refuses, by setting its logit to ``-inf`` and asking again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

__all__ = ["Sampler", "StepContext"]


@dataclass
class StepContext:
    """What a sampler may read at one decoding step.

    ``step``: tokens generated so far; ``remaining``: tokens still allowed, the one being
    drawn included; ``matcher``: the constraint's matcher (None when unconstrained)."""

    step: int
    remaining: int
    matcher: Any = None


@runtime_checkable
class Sampler(Protocol):
    """Chooses the next token.  ``sample`` raises ``NoTokenAllowed`` when every logit is ``-inf``."""

    needs_mask: bool
    log_weight: float

    def reset(self) -> None: ...

    def sample(self, logits: torch.Tensor, context: StepContext) -> int: ...
