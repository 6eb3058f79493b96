"""The decoding loop: one forward pass per token over a KV cache, mask, sample, advance.

The loop knows nothing of grammars: it talks to a *matcher* through the
contract in docs/architecture.md section 3 (XGrammar's names)::

    matcher.fill_next_token_bitmask(bitmask, index=0)  # bit set = allowed; EOS only when the constraint can end
    matcher.accept_token(t) -> bool
    matcher.is_accepting() -> bool
    matcher.is_terminated() -> bool                    # accepted EOS, or nothing can follow
    matcher.reset()

``KVCacheModel`` feeds any number of tokens per forward pass and can roll its
cache back (``crop``), which is what jump-forward decoding and speculative
drafts need; plain decoding just feeds one token at a time.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import torch

from ..errors import GenerationError
from ..masks import allocate_token_bitmask, apply_token_bitmask_inplace
from ..sampling.basic import sample_next

__all__ = [
    "MatcherProtocol",
    "KVCacheModel",
    "GenerationResult",
    "generate_constrained",
    "generate_unconstrained",
    "BudgetGuard",
]


class MatcherProtocol(Protocol):
    """What the loop needs from a matcher (the engine's ``Matcher`` implements it)."""

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, index: int = 0) -> Any: ...
    def accept_token(self, token_id: int) -> bool: ...
    def is_accepting(self) -> bool: ...
    def is_terminated(self) -> bool: ...
    def reset(self) -> Any: ...


BudgetGuard = Callable[[torch.Tensor, int], None]
"""``guard(bitmask, remaining)``: called after the matcher filled row 0 of
``bitmask``, with the number of tokens still allowed *including* the one
about to be sampled; it may clear more bits (e.g. tokens from which no
completion fits in ``remaining - 1`` tokens).  Keeps budget policy out of the
loop and out of the matcher's core contract."""


class KVCacheModel:
    """A transformers causal LM plus its KV cache for one sequence.

    ``forward(tokens)`` appends ``tokens`` after everything already cached and
    returns their logits in one pass; ``crop(n)`` keeps only the first ``n``
    cached tokens.  Note: the logits *predicting* position ``n`` come from
    token ``n-1``, so to resume after ``crop(n)`` re-feed from the token you
    want the next logits for (e.g. ``crop(n - 1); forward([tokens[n - 1]])``).

    transformers 5.x changed ``Cache.crop``: it now takes a *negative* count
    of tokens to remove (a positive absolute length raises), where 4.x took the
    absolute length to keep.  We always pass ``-(removed)``, which means the
    same thing under both.
    """

    def __init__(self, hf_model: Any) -> None:
        self.model = hf_model
        try:
            self.device = next(hf_model.parameters()).device
        except StopIteration:  # pragma: no cover - a model without parameters
            self.device = torch.device("cpu")
        self.cache: Any = None
        self.tokens: list[int] = []
        self._supports_logits_to_keep = True

    def __len__(self) -> int:
        return len(self.tokens)

    def reset(self) -> None:
        """Forget every cached token."""
        self.cache = None
        self.tokens = []

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        try:
            return DynamicCache(config=self.model.config)
        except TypeError:  # older transformers: no config argument
            return DynamicCache()

    # no_grad rather than inference_mode: callers mask the returned logits in
    # place, which inference tensors forbid outside inference mode.
    @torch.no_grad()
    def forward(self, tokens: Sequence[int], *, logits_to_keep: int = 0) -> torch.Tensor:
        """Feed ``tokens`` after the cached ones; float32 logits ``[k, V]`` for the last ``k`` of them.

        ``logits_to_keep=0`` returns a row for every token fed (what draft
        verification needs); ``1`` only the last row (cheap prefill: the
        ``lm_head`` matmul over a long prompt is skipped).
        """
        if len(tokens) == 0:
            raise ValueError("forward() needs at least one token")
        if self.cache is None:
            self.cache = self._new_cache()
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
        kwargs: dict[str, Any] = {"input_ids": ids, "past_key_values": self.cache, "use_cache": True}
        if logits_to_keep and self._supports_logits_to_keep:
            kwargs["logits_to_keep"] = logits_to_keep
        try:
            out = self.model(**kwargs)
        except TypeError:
            if "logits_to_keep" not in kwargs:
                raise
            self._supports_logits_to_keep = False
            del kwargs["logits_to_keep"]
            out = self.model(**kwargs)
        if out.past_key_values is not None:
            self.cache = out.past_key_values
        self.tokens.extend(int(t) for t in tokens)
        logits = out.logits[0]
        if logits_to_keep:
            logits = logits[-logits_to_keep:]
        return logits.float()

    def crop(self, n: int) -> None:
        """Keep only the first ``n`` cached tokens (roll back ``len(self) - n``)."""
        if n < 0 or n > len(self.tokens):
            raise ValueError(f"cannot crop a cache of {len(self.tokens)} tokens to {n}")
        if n == len(self.tokens):
            return
        if n == 0 or self.cache is None:
            self.reset()
            return
        self.cache.crop(-(len(self.tokens) - n))
        del self.tokens[n:]


@dataclass
class GenerationResult:
    """One finished generation.

    ``token_ids`` excludes the final EOS; ``text`` is decoded from the tokens'
    exact bytes (``text_bytes``).  ``finish_reason``: ``"eos"`` (EOS chosen),
    ``"terminated"`` (the matcher could not continue), ``"length"``
    (unconstrained only: ``max_tokens`` reached).  ``seconds`` is the whole
    call (prefill included); ``tokens_per_second = num_tokens / seconds``;
    ``decode_seconds`` leaves out the prompt's prefill, ``mask_seconds`` is
    the time spent filling and applying masks.
    """

    token_ids: list[int]
    text: str
    num_tokens: int
    seconds: float
    tokens_per_second: float
    finish_reason: str
    text_bytes: bytes = b""
    prompt_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    mask_seconds: float = 0.0
    steps: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _bytes_to_text(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


def _make_generator(seed: int | None) -> torch.Generator | None:
    return torch.Generator().manual_seed(seed) if seed is not None else None


def _check_prompt(prompt_ids: Sequence[int]) -> list[int]:
    ids = [int(t) for t in prompt_ids]
    if not ids:
        raise ValueError("prompt_ids must not be empty (the first forward pass needs a token)")
    return ids


def _result(
    model: Any, ids: list[int], finish: str, t0: float, t_prefill: float, mask_s: float, steps: int, n_prompt: int
) -> GenerationResult:
    now = time.perf_counter()
    seconds = now - t0
    raw = model.info.decode_bytes(ids)
    return GenerationResult(
        token_ids=ids,
        text=_bytes_to_text(raw),
        num_tokens=len(ids),
        seconds=seconds,
        tokens_per_second=len(ids) / seconds if seconds > 0 else 0.0,
        finish_reason=finish,
        text_bytes=raw,
        prompt_tokens=n_prompt,
        prefill_seconds=t_prefill - t0,
        decode_seconds=now - t_prefill,
        mask_seconds=mask_s,
        steps=steps,
    )


def generate_constrained(
    model: Any,
    prompt_ids: Sequence[int],
    matcher: MatcherProtocol,
    *,
    max_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int | None = None,
    budget_guard: BudgetGuard | None = None,
) -> GenerationResult:
    """Generate until the constraint is complete, one token per forward pass.

    ``model``: a ``structgen.models.Model`` (needs ``.hf_model`` and ``.info``).
    The matcher is used as given (not reset), so a caller may pre-advance it.
    Each step: fill the mask, let ``budget_guard`` trim it, set disallowed
    logits to ``-inf``, sample (greedy at ``temperature=0``), ``accept_token``.
    Stops on an EOS id (the matcher only allows it when accepting) or when
    ``matcher.is_terminated()``.  Raises ``GenerationError`` (with
    ``.partial``, the text so far) if ``max_tokens`` runs out first, or if a
    step leaves no token allowed.
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    info = model.info
    eos = frozenset(info.eos_ids)
    prompt = _check_prompt(prompt_ids)
    gen = _make_generator(seed)
    t0 = time.perf_counter()
    kv = KVCacheModel(model.hf_model)
    logits = kv.forward(prompt, logits_to_keep=1)[-1]
    t_prefill = time.perf_counter()
    bitmask = allocate_token_bitmask(1, info.vocab_size)
    out: list[int] = []
    mask_s = 0.0
    steps = 0

    def partial() -> str:
        return _bytes_to_text(info.decode_bytes(out))

    if matcher.is_terminated():
        return _result(model, out, "terminated", t0, t_prefill, mask_s, steps, len(prompt))
    banned: dict[int, set[int]] = {}  # tokens refused at a position after backtracking from a dead end
    backtracks = 0
    while len(out) < max_tokens:
        step = len(out)
        steps += 1
        tm = time.perf_counter()
        bitmask.fill_(0)  # a matcher sets the bits it allows; stale bits must not leak
        matcher.fill_next_token_bitmask(bitmask, 0)
        guard_allows = getattr(budget_guard, "allows", None)
        if budget_guard is not None and guard_allows is None:
            budget_guard(bitmask, max_tokens - step)
        if logits.shape[-1] > info.vocab_size:
            logits[info.vocab_size:] = float("-inf")  # logits beyond the table: never allowed
        apply_token_bitmask_inplace(logits, bitmask, vocab_size=info.vocab_size)
        for b in banned.get(step, ()):
            logits[b] = float("-inf")
        mask_s += time.perf_counter() - tm
        t = _draw_accepted(matcher, logits, eos, guard_allows, max_tokens - step, temperature, top_p, top_k, gen,
                           len(out), partial)
        if t is None:  # nothing the matcher takes: a check at commit (uniqueItems) left a dead end
            if not (getattr(matcher, "checks_at_commit", False) and out and backtracks < MAX_BACKTRACKS):
                raise GenerationError(
                    f"no token is allowed after {len(out)} generated tokens "
                    "(the constraint cannot be continued with this vocabulary"
                    + (" within max_tokens" if guard_allows is not None else "") + ")",
                    partial=partial(), reason="no_token", num_tokens=len(out))
            # e.g. a string item of a uniqueItems array at its maxLength whose only completions are
            # earlier items: take the last token back and draw again at that position without it
            backtracks += 1
            last = out.pop()
            matcher.rollback(1)
            for k in [k for k in banned if k > len(out)]:
                del banned[k]
            banned.setdefault(len(out), set()).add(last)
            kept = kv.tokens[:len(prompt) + len(out)]
            kv.crop(len(kept) - 1)
            logits = kv.forward([kept[-1]])[-1]
            continue
        if t in eos:
            return _result(model, out, "eos", t0, t_prefill, mask_s, steps, len(prompt))
        out.append(t)
        if matcher.is_terminated():
            return _result(model, out, "terminated", t0, t_prefill, mask_s, steps, len(prompt))
        if len(out) < max_tokens:
            logits = kv.forward([t])[-1]
    raise GenerationError(
        f"max_tokens={max_tokens} reached before the constraint was complete", partial=partial(),
        reason="max_tokens", num_tokens=len(out))


#: Dead ends a decoding may back out of (checks at commit only: see ``generate_constrained``).
MAX_BACKTRACKS = 64


def _draw_accepted(matcher, logits, eos, guard_allows, remaining, temperature, top_p, top_k, gen, n_out,
                   partial) -> int | None:
    """Sample a token the guard allows and the matcher takes (EOS: the matcher takes it at the end);
    refused candidates are masked out of ``logits`` and drawn again.  None when none is left."""
    while True:  # until the matcher takes the sampled token
        try:
            t = sample_next(logits, temperature=temperature, top_p=top_p, top_k=top_k, generator=gen)
        except GenerationError:  # every logit is -inf
            return None
        # a guard with ``allows(token, remaining)`` checks only the sampled token and
        # resamples without it: the same distribution as masking every failing token
        if guard_allows is not None and not guard_allows(t, remaining):
            logits[t] = float("-inf")
            continue
        if t in eos:
            if not matcher.is_accepting() or not matcher.accept_token(t):
                raise GenerationError(f"the matcher allowed EOS id {t} but the constraint is not complete",
                                      partial=partial(), reason="eos", num_tokens=n_out)
            return t
        if matcher.accept_token(t):
            return t
        if not getattr(matcher, "checks_at_commit", False):
            raise GenerationError(f"the matcher rejected token {t}, which its own mask allowed",
                                  partial=partial(), reason="rejected", num_tokens=n_out)
        # a check at commit (uniqueItems: the token completes a duplicate item) refused it:
        # drawing again without it samples from the model's distribution over the tokens it takes
        logits[t] = float("-inf")


def generate_unconstrained(
    model: Any,
    prompt_ids: Sequence[int],
    *,
    max_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int | None = None,
    stop_at_eos: bool = True,
) -> GenerationResult:
    """The same loop with no matcher: the baseline for measuring constraint overhead.

    Stops at an EOS id (unless ``stop_at_eos=False``) or after ``max_tokens``
    (``finish_reason="length"``, not an error: there is no constraint to break).
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    info = model.info
    eos = frozenset(info.eos_ids) if stop_at_eos else frozenset()
    prompt = _check_prompt(prompt_ids)
    gen = _make_generator(seed)
    t0 = time.perf_counter()
    kv = KVCacheModel(model.hf_model)
    logits = kv.forward(prompt, logits_to_keep=1)[-1]
    t_prefill = time.perf_counter()
    out: list[int] = []
    for step in range(max_tokens):
        t = sample_next(logits, temperature=temperature, top_p=top_p, top_k=top_k, generator=gen)
        if t in eos:
            return _result(model, out, "eos", t0, t_prefill, 0.0, step + 1, len(prompt))
        out.append(t)
        if step + 1 < max_tokens:
            logits = kv.forward([t])[-1]
    return _result(model, out, "length", t0, t_prefill, 0.0, max_tokens, len(prompt))
