"""Next-token log-probabilities as the distribution-correcting samplers need them.

The samplers target distributions over whole token sequences, so they need the model's full,
untruncated, tempered next-token distribution at any prefix of the output -- often at prefixes
visited before (ASAp's trie, exact enumeration) and for several prefixes at once (SMC's
particles).  :class:`TokenLM` is that view; :class:`ModelLM` serves it from a transformers model
with a KV cache (a prefix trie of cached log-probabilities, batched forwards for particles), and
:class:`HashLM` is the seeded toy LM of the exact test harness (``docs/algorithms.md`` section 0).
"""
from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from typing import Any, Protocol, Sequence

import numpy as np
import torch

from ...errors import GenerationError, InvalidArgument
from ..kv_cache import KVCacheModel, causal_lm_forward, new_cache
from ..row_invariant import prompt_rows

__all__ = ["TokenLM", "Particles", "ModelLM", "ModelParticles", "PrefixParticles", "HashLM"]


class TokenLM(Protocol):
    """``logprobs(prefix)``: float64 log p(t | prompt, prefix) over the whole vocabulary (EOS ids
    included), after temperature, before any mask.  ``forward_passes`` counts model calls."""

    vocab_size: int
    eos_ids: tuple[int, ...]
    forward_passes: int

    def logprobs(self, prefix: Sequence[int]) -> np.ndarray: ...

    def particles(self, n: int) -> "Particles": ...


class Particles(Protocol):
    """``n`` continuations of the prompt advanced together, one token per row per step (SMC)."""

    def start(self) -> np.ndarray: ...  # [n, V] log-probabilities after the prompt

    def advance(self, tokens: Sequence[int]) -> np.ndarray: ...  # append one token per row -> [n, V]

    def reorder(self, rows: Sequence[int]) -> None: ...  # row i continues old row rows[i]


class ModelLM:
    """A structgen ``Model`` after ``prompt_ids``, at ``temperature`` (> 0).

    Log-probabilities are remembered per prefix (up to ``cache_bytes`` of them, least recently
    used dropped), so a prefix seen before costs no forward pass; a new prefix is fed from the
    longest prefix the KV cache holds.  ``particles(n)`` gives SMC one batched KV cache of ``n`` rows."""

    def __init__(self, model: Any, prompt_ids: Sequence[int], *, temperature: float = 1.0,
                 cache_bytes: int = 512 << 20, deadline: float | None = None) -> None:
        if temperature <= 0:
            raise InvalidArgument(f"temperature must be > 0 for sampling, got {temperature}")
        self.model = model
        self.prompt = [int(t) for t in prompt_ids]
        if not self.prompt:
            raise InvalidArgument("the prompt must not be empty")
        from ..loop import check_context

        check_context(model, len(self.prompt), 0)  # samplers bound the output themselves (max_tokens)
        self.temperature = float(temperature)
        self.vocab_size = model.info.vocab_size
        self.eos_ids = tuple(model.info.eos_ids)
        self.forward_passes = 0
        #: a ``time.monotonic()`` instant: a forward pass after it raises GenerationError("timeout"),
        #: which bounds every sampler's search (they all ask the model through this view)
        self.deadline = deadline
        self._kv = KVCacheModel(model.hf_model)
        self._memo: OrderedDict[tuple, np.ndarray] = OrderedDict()
        # remembered rows are whole-vocabulary float64 vectors (400 KB at 49k tokens): bound them by bytes
        self._entries = max(16, cache_bytes // (8 * max(1, self.vocab_size)))

    def _normalise(self, logits: torch.Tensor) -> np.ndarray:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise GenerationError(f"the sampler ran past its timeout after {self.forward_passes} forward passes; "
                                  "raise timeout= (None for no limit), lower particles, or relax the constraint",
                                  reason="timeout")
        x = logits[..., : self.vocab_size].double() / self.temperature
        return torch.log_softmax(x, dim=-1).numpy()

    def _remember(self, key: tuple, lp: np.ndarray) -> np.ndarray:
        self._memo[key] = lp
        if len(self._memo) > self._entries:
            self._memo.popitem(last=False)
        return lp

    def logprobs(self, prefix: Sequence[int]) -> np.ndarray:
        key = tuple(prefix)
        hit = self._memo.get(key)
        if hit is not None:
            self._memo.move_to_end(key)
            return hit
        want = self.prompt + list(key)
        have = self._kv.tokens
        common = 0
        for a, b in zip(have, want):
            if a != b:
                break
            common += 1
        common = min(common, len(want) - 1)  # at least one token is fed: its logits are the answer
        self._kv.crop(common)
        # the prompt's tokens in this pass one block (all of them from an empty cache), the prefix row by row
        with prompt_rows(max(0, len(self.prompt) - common)):
            logits = self._kv.forward(want[common:], logits_to_keep=1)[-1]
        self.forward_passes += 1
        return self._remember(key, self._normalise(logits))

    def particles(self, n: int) -> "ModelParticles":
        return ModelParticles(self, n)


class ModelParticles:
    """``n`` rows of one batched KV cache: one forward pass per step for every particle; a
    resampling step reorders the cache's rows."""

    def __init__(self, lm: ModelLM, n: int) -> None:
        self.lm, self.n = lm, n
        self.cache = None

    def start(self) -> np.ndarray:
        lm = self.lm
        ids = torch.tensor([lm.prompt], dtype=torch.long)
        with torch.no_grad():
            logits, self.cache = causal_lm_forward(lm.model.hf_model, ids, new_cache(lm.model.hf_model),
                                                   logits_to_keep=1)
        lm.forward_passes += 1
        self.cache.batch_repeat_interleave(self.n)
        row = lm._normalise(logits[0, -1].float())
        return np.repeat(row[None, :], self.n, axis=0)

    def advance(self, tokens: Sequence[int]) -> np.ndarray:
        ids = torch.tensor([[int(t)] for t in tokens], dtype=torch.long)
        with torch.no_grad():
            logits, self.cache = causal_lm_forward(self.lm.model.hf_model, ids, self.cache)
        self.lm.forward_passes += 1
        return self.lm._normalise(logits[:, -1].float())

    def reorder(self, rows: Sequence[int]) -> None:
        self.cache.reorder_cache(torch.tensor(list(rows), dtype=torch.long))


class PrefixParticles:
    """Particles over any :class:`TokenLM`, one ``logprobs`` call per row (toy LMs, tests)."""

    def __init__(self, lm: TokenLM, n: int) -> None:
        self.lm, self.n = lm, n
        self.prefixes: list[list[int]] = []

    def start(self) -> np.ndarray:
        self.prefixes = [[] for _ in range(self.n)]
        return np.stack([self.lm.logprobs(())] * self.n)

    def advance(self, tokens: Sequence[int]) -> np.ndarray:
        for p, t in zip(self.prefixes, tokens):
            p.append(int(t))
        return np.stack([self.lm.logprobs(p) for p in self.prefixes])

    def reorder(self, rows: Sequence[int]) -> None:
        self.prefixes = [list(self.prefixes[r]) for r in rows]


class HashLM:
    """The toy LM of the exact harness: logits drawn from a hash of the token context (seeded),
    so the same prefix always has the same distribution; ``bias`` is added to chosen logits
    (the harness adds +1 to the token "0" so that masking is visibly biased)."""

    def __init__(self, vocab_size: int, eos_ids: Sequence[int], *, seed: int = 0, scale: float = 1.5,
                 bias: dict[int, float] | None = None, temperature: float = 1.0) -> None:
        self.vocab_size = vocab_size
        self.eos_ids = tuple(eos_ids)
        self.seed, self.scale, self.temperature = seed, scale, temperature
        self.bias = dict(bias or {})
        self.forward_passes = 0

    def logprobs(self, prefix: Sequence[int]) -> np.ndarray:
        self.forward_passes += 1
        h = hashlib.sha256(f"{self.seed}:{','.join(map(str, prefix))}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(h[:8], "little"))
        logits = rng.normal(0.0, self.scale, self.vocab_size)
        for t, b in self.bias.items():
            logits[t] += b
        logits = logits / self.temperature
        return logits - np.logaddexp.reduce(logits)

    def particles(self, n: int) -> PrefixParticles:
        return PrefixParticles(self, n)
