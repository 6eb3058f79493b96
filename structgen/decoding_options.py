"""``DecodingOptions``: how one request decodes, whichever door it comes in by.

``generate_json`` / ``generate_regex`` / ``generate_grammar`` / ``generate_structural_tag``, the
LangChain model and the CLI all build one of these from their own arguments, so the settings, their
defaults and their checks live in one place: a bad value (``temperature=-1``, ``top_p=2``, an
unknown sampler) is an ``InvalidArgument`` naming it before the constraint is compiled or the model
runs.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any

from .deadlines import DEFAULT_TIMEOUT
from .errors import InvalidArgument
from .sampler_methods import check_method

__all__ = ["DecodingOptions", "DEFAULT_MAX_TOKENS", "OPTION_NAMES"]

#: the token budget when none is given (the finish-within-budget guard ends the output inside it)
DEFAULT_MAX_TOKENS = 512


@dataclass(frozen=True)
class DecodingOptions:
    """The settings of one decoding request.

    ``max_tokens``: the budget, EOS included. ``temperature``: None or 0 for greedy (a sequence
    sampler takes None as 1.0). ``top_p`` / ``top_k``: nucleus and top-k truncation. ``seed``: the
    sampler's generator (row ``i`` of a batch uses ``seed + i``). ``sampler``: None for the
    decoding loop's own masked draw, or one of ``structgen.sampler_methods.METHODS`` (``"greedy"``
    is the loop's too), with ``particles`` for SMC and ``hmm`` for Deco-G. ``speculative``: drafts
    verified in one forward pass (the same output). ``timeout``: seconds for the whole call, None for
    no limit."""

    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = None
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    sampler: str | None = None
    particles: int = 8
    hmm: Any = None
    speculative: bool = True
    timeout: float | None = DEFAULT_TIMEOUT
    no_repeat_ngram: int | None = None

    def __post_init__(self) -> None:
        _check_int("max_tokens", self.max_tokens, low=1)
        if self.temperature is not None and not (_is_number(self.temperature) and self.temperature >= 0):
            raise InvalidArgument(f"temperature must be a number >= 0 or None, got {self.temperature!r}")
        if not (_is_number(self.top_p) and 0 < self.top_p <= 1):
            raise InvalidArgument(f"top_p must be in (0, 1], got {self.top_p!r}")
        _check_int("top_k", self.top_k, low=0)
        if self.seed is not None:
            _check_int("seed", self.seed, low=None)
        if self.sampler is not None and self.sampler != "greedy":
            check_method(self.sampler)
        _check_int("particles", self.particles, low=1)
        if not isinstance(self.speculative, bool):
            raise InvalidArgument(f"speculative must be True or False, got {self.speculative!r}")
        if self.no_repeat_ngram is not None:
            _check_int("no_repeat_ngram", self.no_repeat_ngram, low=0)
        if self.timeout is not None and not (_is_number(self.timeout) and self.timeout > 0):
            raise InvalidArgument(f"timeout must be a positive number of seconds or None, got {self.timeout!r}")

    def replace(self, **changes: Any) -> "DecodingOptions":
        """A copy with ``changes`` (checked like the original)."""
        return dataclasses.replace(self, **changes)

    def as_kwargs(self) -> dict[str, Any]:
        """The settings as keyword arguments (``generate_json(model, schema, **opts.as_kwargs())``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


#: the names of the settings, in order: what the LangChain model accepts per call and the CLI maps to
OPTION_NAMES = tuple(f.name for f in dataclasses.fields(DecodingOptions))


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def _check_int(name: str, value: Any, *, low: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or (low is not None and value < low):
        bound = "" if low is None else f" >= {low}"
        raise InvalidArgument(f"{name} must be an integer{bound}, got {value!r}")
