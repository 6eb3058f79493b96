"""The decoding runtime: ONE step-by-step generator every entry point consumes.

``generate_json`` / ``generate_regex`` / ``generate_grammar``, the LangChain chat model (invoke
and stream), the CLI and the benchmarks all decode through :class:`Decoding`.  Each step:

1. mask: the matcher fills a token bitmask, which is applied to the logits (skipped for samplers
   that test candidates themselves, ``Sampler.needs_mask = False``);
2. sample: the :class:`~structgen.runtime.sampling.Sampler` picks a token;
3. budget guard: a token after which the output cannot finish in the tokens left is refused;
4. accept: the matcher takes the token (masks are exact: a refusal is an engine bug, raised);
   where a check at a value boundary leaves no token allowed (``Matcher.may_dead_end``), the last
   token is taken back and redrawn without it (a bounded number of times);
5. stop: EOS, or the matcher can take nothing more.

The loop talks to the matcher through :class:`MatcherProtocol` (architecture.md section 3, XGrammar's
names) and knows nothing of grammars.  Seams for the speculative backbone and the samplers:
:meth:`Decoding.feed` runs several tokens in one forward pass and returns a row of logits per
token, :meth:`Decoding.rollback` takes tokens back from the matcher and the KV cache alike, and
the sampler sees a :class:`~structgen.runtime.sampling.StepContext` and may carry a weight.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol, Sequence

import torch

from ..errors import GenerationError, InvalidArgument
from .budget import BudgetGuard, shortfall_message
from .drafts import Drafter, DraftStats
from .kv_cache import KVCacheModel
from .masks import allocate_token_bitmask, apply_token_bitmask_inplace
from .row_invariant import prompt_rows
from .sampling import MaskedSampler, NoTokenAllowed, Sampler, StepContext

__all__ = [
    "MatcherProtocol",
    "KVCacheModel",
    "GenerationResult",
    "Decoding",
    "generate_constrained",
    "generate_unconstrained",
    "MAX_BACKTRACKS",
    "check_context",
    "make_drafter",
]

#: Dead ends a decoding may back out of (grammars with checks only: see :class:`Decoding`).
MAX_BACKTRACKS = 64
#: guard refusals in one draw after which :meth:`Decoding._guard_sweep` looks for an allowed token
GUARD_SWEEP_AFTER = 16
#: prompt tokens per forward pass of the prefill; the deadline is checked between chunks.  512 is the
#: key block of torch's CPU attention kernel: chunks on its block boundaries give every row the same
#: logits, bit for bit, as one pass over the whole prompt (checked on the 4-bit and the dense model)
PREFILL_CHUNK = 512


def check_context(model: Any, prompt_tokens: int, max_tokens: int) -> None:
    """Refuse, before any forward pass, a prompt and budget the model's context cannot hold (the
    model would run past its positions and write garbage)."""
    limit = getattr(model, "context_length", None)
    if limit and prompt_tokens + max_tokens > limit:
        what = "the prompt alone" if prompt_tokens >= limit else "the prompt and max_tokens together"
        raise GenerationError(f"{what} exceed the model's context: {prompt_tokens} prompt tokens + max_tokens="
                              f"{max_tokens} > {limit} positions; shorten the prompt or lower max_tokens",
                              reason="context", num_tokens=0)


class MatcherProtocol(Protocol):
    """What the runtime needs from a matcher (the engine's ``Matcher`` implements it)."""

    may_dead_end: bool  # checks may leave no token allowed before the end (then: take tokens back)

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> Any: ...
    def accept_token(self, token_id: int) -> bool: ...
    def is_accepting(self) -> bool: ...
    def is_terminated(self) -> bool: ...
    def is_token_allowed(self, token_id: int) -> bool: ...
    def rollback(self, num_tokens: int = 1) -> Any: ...
    def min_completion_bytes(self) -> float: ...
    def reset(self) -> Any: ...


@dataclass
class GenerationResult:
    """One finished generation.

    ``token_ids`` excludes the final EOS; ``text`` is decoded from the tokens'
    exact bytes (``text_bytes``).  ``finish_reason``: ``"eos"`` (EOS chosen),
    ``"terminated"`` (the matcher could not continue), ``"length"``
    (unconstrained only: ``max_tokens`` reached).  ``seconds`` is the whole
    call: ``prefill_seconds`` (the prompt's forward passes, which give the
    first token's logits) plus ``decode_seconds`` (everything after them).
    ``tokens_per_second`` is the decoding speed alone: the tokens after the
    first over ``decode_seconds`` (the whole call's rate, prefill included, is
    :attr:`overall_tokens_per_second`); ``mask_seconds`` is the time spent
    filling and applying masks.
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
    log_weight: float = 0.0
    forward_passes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    #: ``generate_json(reasoning=True)``: the thinking text before the JSON (``text`` is the JSON alone)
    reasoning: str | None = None
    #: with a weighting ``sampler`` (``awrs``, ``smc``): the effective sample size of the weighted set
    #: the output was drawn from, and its estimate of log P(constraint) (None otherwise)
    ess: float | None = None
    log_evidence: float | None = None

    @property
    def overall_tokens_per_second(self) -> float:
        """``num_tokens / seconds``: the whole call's rate, the prompt's prefill included."""
        return self.num_tokens / self.seconds if self.seconds > 0 else 0.0


class Decoding:
    """One generation, step by step: iterate it to stream the accepted token ids.

    ``matcher=None`` decodes without a constraint (stopping at EOS unless ``stop_at_eos=False``,
    or at ``max_tokens`` with ``finish_reason="length"``).  With a matcher, the output is complete
    and valid or ``GenerationError`` is raised (with ``.partial``, the text so far).
    ``optional=True`` lets the first token choose: when the constraint allows it (and the budget
    guard too), the rest is constrained; otherwise the matcher is dropped and the text is free
    (LangChain's "auto" tool choice).  ``deadline``: a ``time.monotonic()`` instant after which
    ``GenerationError`` (``reason="timeout"``) is raised, checked between the prefill's chunks of
    ``PREFILL_CHUNK`` prompt tokens, before every step and inside a long guard search.  The matcher is used as given (not reset), so a caller may
    pre-advance it.  ``drafter``: speculation (see ``docs/architecture.md``); ``kv``: the KV cache
    to decode through (default: the model's own; a batch row's ``runtime.batch.RowCache``).
    """

    def __init__(self, model: Any, prompt_ids: Sequence[int], matcher: MatcherProtocol | None = None, *,
                 max_tokens: int, sampler: Sampler | None = None, budget_guard: BudgetGuard | None = None,
                 optional: bool = False, deadline: float | None = None, stop_at_eos: bool = True,
                 drafter: Drafter | None = None, kv: Any = None, no_repeat_ngram: int = 0) -> None:
        if max_tokens < 0:
            raise InvalidArgument(f"max_tokens must be >= 0, got {max_tokens}")
        self.prompt = [int(t) for t in prompt_ids]
        if not self.prompt:
            raise InvalidArgument("prompt_ids must not be empty (the first forward pass needs a token)")
        check_context(model, len(self.prompt), max_tokens)
        self.model = model
        self.info = model.info
        self.matcher = matcher
        self.max_tokens = max_tokens
        self.sampler = sampler if sampler is not None else MaskedSampler()
        self.guard = budget_guard
        self.optional = optional and matcher is not None
        self.deadline = deadline
        self.eos = frozenset(self.info.eos_ids) if stop_at_eos or matcher is not None else frozenset()
        self.tokens: list[int] = []
        self.finish_reason: str | None = None
        self.steps = 0
        self.mask_seconds = 0.0
        # the model behind a KV cache: one sequence's own, or a row of a batch (runtime.batch.RowCache)
        self._kv = kv if kv is not None else KVCacheModel(model.hf_model)
        self._emitted = 0  # tokens already yielded: never rolled back
        self._backtracks = 0
        self._bitmask = None
        self._t0 = self._t_prefill = 0.0
        self._prefilled = 0  # prompt tokens run so far
        self.forward_seconds = 0.0  # forward passes after the prefill
        self.drafter = drafter
        self.no_repeat_ngram = int(no_repeat_ngram or 0)
        self.draft_stats = DraftStats()
        # rows of logits fed ahead of acceptance: (drafted token, source, the row that follows it)
        self._pending: deque[tuple[int, str, torch.Tensor]] = deque()

    # -- seams: several tokens per forward pass, and taking tokens back ------------------------------
    def feed(self, tokens: Sequence[int]) -> torch.Tensor:
        """Run ``tokens`` after everything fed so far in one forward pass: float32 logits ``[k, V]``,
        row ``i`` predicting the token after ``tokens[i]``."""
        return self._forward(tokens)

    def _forward(self, tokens: Sequence[int]) -> torch.Tensor:
        t = time.perf_counter()
        try:
            return self._kv.forward(tokens)
        finally:
            self.forward_seconds += time.perf_counter() - t

    def rollback(self, n: int) -> torch.Tensor:
        """Take the last ``n`` generated tokens back (matcher and KV cache) and return the logits
        predicting the next token again."""
        if not 0 < n <= len(self.tokens) - self._emitted:
            raise InvalidArgument(f"cannot roll back {n} of {len(self.tokens)} generated tokens "
                             f"({self._emitted} already streamed)")
        if self.matcher is not None:
            self.matcher.rollback(n)
        self._pending.clear()
        del self.tokens[len(self.tokens) - n:]
        kept = self.prompt + self.tokens
        self._kv.crop(len(kept) - 1)
        return self._forward([kept[-1]])[-1]

    # -- the loop -------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[int]:
        """Yield each token once it is final.  Without checks at value boundaries that is at once; with them
        a dead end may take tokens back (at most ``MAX_BACKTRACKS`` in all), so a token is held back
        until no backtrack left can reach it, and the rest comes when decoding ends."""
        for _ in self._steps():
            yield from self._release(final=False)
        yield from self._release(final=True)

    def _release(self, final: bool) -> Iterator[int]:
        upto = len(self.tokens)
        if not final and self.matcher is not None and self.matcher.may_dead_end:
            upto -= MAX_BACKTRACKS - self._backtracks
        while self._emitted < upto:
            self._emitted += 1
            yield self.tokens[self._emitted - 1]

    def _steps(self) -> Iterator[None]:
        """Decode; yields after each accepted token (which :meth:`__iter__` releases when final)."""
        self._t0 = time.perf_counter()
        self.sampler.reset()
        if self.guard is not None and self.matcher is not None and not self.optional \
                and not self.matcher.is_terminated():
            needed = self.guard.tokens_needed(self.max_tokens)
            if needed:  # said at once, before the prompt is run, with the number that would fit
                raise GenerationError(shortfall_message(self.max_tokens, needed), partial="", reason="budget",
                                      num_tokens=0)
        matcher = self.matcher
        if matcher is not None and matcher.is_terminated():
            self._run_prompt([])
            self._t_prefill = time.perf_counter()
            self.finish_reason = "terminated"
            return
        logits = self._prefill()
        self._t_prefill = time.perf_counter()
        banned: dict[int, set[int]] = {}  # tokens refused at a position after backing out of a dead end
        self._backtracks = 0
        while len(self.tokens) < self.max_tokens:
            self._check_deadline()
            self.steps += 1
            pos = len(self.tokens)
            self._mask(logits, banned.get(pos, ()))
            t = self._draw(logits)
            matcher = self.matcher
            if t is None:  # nothing the matcher takes: a check at a value boundary left a dead end
                if not (matcher is not None and matcher.may_dead_end and self.tokens
                        and self._backtracks < MAX_BACKTRACKS and len(self.tokens) > self._emitted):
                    raise self._no_token_error()
                # e.g. a string item of a uniqueItems array at its maxLength whose only completions are
                # earlier items: take the last token back and draw again at that position without it
                self._backtracks += 1
                last = self.tokens[-1]
                logits = self.rollback(1)
                for k in [k for k in banned if k > len(self.tokens)]:
                    del banned[k]
                banned.setdefault(len(self.tokens), set()).add(last)
                continue
            if t in self.eos:
                self.finish_reason = "eos"
                return
            self.tokens.append(t)
            yield
            if matcher is not None and matcher.is_terminated():
                self.finish_reason = "terminated"
                return
            if len(self.tokens) < self.max_tokens:
                logits = self._next_logits(t)
        if self.matcher is not None:
            raise GenerationError(f"max_tokens={self.max_tokens} reached before the constraint was complete",
                                  partial=self.partial_text(), reason="max_tokens", num_tokens=len(self.tokens))
        self.finish_reason = "length"

    def _prefill(self) -> torch.Tensor:
        """The prompt, with the first drafts (a forced ``{"key":`` opening) fed behind its last chunk."""
        draft, sources = self._propose(self.prompt)
        rows = self._run_prompt(draft)
        self._pending.extend(zip(draft, sources, rows[1:]))
        return rows[0]

    def _run_prompt(self, draft: list[int]) -> torch.Tensor:
        """Run the prompt in forward passes of ``PREFILL_CHUNK`` tokens, the deadline checked before
        each, and ``draft`` behind the last: the rows predicting the first token and each draft's next.
        Each chunk is one causal block over the chunks before it (``prompt_rows``), the drafts' rows
        as plain decoding computes them."""
        prompt, chunk = self.prompt, max(1, int(PREFILL_CHUNK))
        while True:
            self._check_deadline()
            part = prompt[self._prefilled:self._prefilled + chunk]
            last = self._prefilled + len(part) == len(prompt)
            fed = part + draft if last else part
            with prompt_rows(len(part)):
                rows = self._kv.forward(fed, logits_to_keep=len(draft) + 1 if last else 1)
            self._prefilled += len(part)
            if last:
                return rows

    def _propose(self, context: list[int]) -> tuple[list[int], list[str]]:
        if self.drafter is None:
            return [], []
        room = self.max_tokens - len(self.tokens) - 1  # the last position's token is sampled, never fed
        if room <= 0:
            return [], []
        draft, sources = self.drafter.propose(self.matcher, context, room)
        for d in sources:
            self.draft_stats.drafted[d] += 1
        return draft, sources

    def _next_logits(self, t: int) -> torch.Tensor:
        """The row predicting the token after ``t`` (just accepted).  When ``t`` is the draft the
        last forward pass fed next, its row is already there (a draft kept: no forward pass);
        otherwise the rejected drafts leave the KV cache and ``t`` is fed with new drafts."""
        pending = self._pending
        if pending:
            drafted, source, row = pending.popleft()
            if drafted == t:
                self.draft_stats.accepted[source] += 1
                return row
            pending.clear()
        kept = len(self.prompt) + len(self.tokens) - 1  # everything before t
        if len(self._kv) > kept:
            self._kv.crop(kept)
        draft, sources = self._propose(self.prompt + self.tokens)
        rows = self._forward([t, *draft])
        pending.extend(zip(draft, sources, rows[1:]))
        return rows[0]

    def _constrained(self) -> bool:
        return self.matcher is not None and not self.optional

    def _mask(self, logits: torch.Tensor, banned) -> None:
        vocab = self.info.vocab_size
        if logits.shape[-1] > vocab:
            logits[vocab:] = float("-inf")  # logits beyond the token table: never allowed
        if self._constrained() and self.sampler.needs_mask:
            tm = time.perf_counter()
            if self._bitmask is None:
                self._bitmask = allocate_token_bitmask(1, vocab)
            self._bitmask.fill_(0)  # a matcher sets the bits it allows; stale bits must not leak
            self.matcher.fill_next_token_bitmask(self._bitmask, 0)
            apply_token_bitmask_inplace(logits, self._bitmask, vocab_size=vocab)
            self.mask_seconds += time.perf_counter() - tm
        for b in banned:
            logits[b] = float("-inf")
        if self.no_repeat_ngram > 1 and self._constrained():
            penalize_repeated_ngrams(logits, self.tokens, self.no_repeat_ngram)

    def _draw(self, logits: torch.Tensor) -> int | None:
        """A token the budget guard allows and the matcher takes (accepted already); refused
        candidates are set to ``-inf`` in ``logits`` and drawn again.  None when none is left."""
        remaining = self.max_tokens - len(self.tokens)
        context = StepContext(len(self.tokens), remaining, self.matcher)
        refusals = 0
        while True:
            try:
                t = self.sampler.sample(logits, context)
            except NoTokenAllowed:
                return None
            matcher = self.matcher
            if self.optional:  # the first token decides: the constraint, or free text from here on
                self.optional = False
                if not (t not in self.eos and matcher.is_token_allowed(t)
                        and (self.guard is None or self.guard.allows(t, remaining))):
                    self.matcher = self.guard = context.matcher = matcher = None
            if matcher is None:
                return t
            if self.guard is not None and not self.guard.allows(t, remaining):
                logits[t] = float("-inf")  # the same distribution as masking every token that fails
                refusals += 1
                if refusals >= GUARD_SWEEP_AFTER:
                    # many refusals in a row (a tight budget where most tokens cannot finish): find
                    # an allowed token without one full draw per refused token
                    self._check_deadline()
                    if self._guard_sweep(logits, remaining):
                        refusals = -(1 << 30)  # swept: the next draw is allowed (or nothing is left)
                continue
            if t in self.eos:
                if not matcher.is_accepting() or not matcher.accept_token(t):
                    raise GenerationError(f"the matcher allowed EOS id {t} but the constraint is not complete",
                                          partial=self.partial_text(), reason="eos", num_tokens=len(self.tokens))
                return t
            if matcher.accept_token(t):
                return t
            raise GenerationError(f"the matcher rejected token {t}, which its own mask allowed",
                                  partial=self.partial_text(), reason="rejected", num_tokens=len(self.tokens))

    def _guard_sweep(self, logits: torch.Tensor, remaining: int) -> bool:
        """After many refusals in one draw of a plain sampler (greedy, or temperature without
        top-k / top-p): narrow ``logits`` so that the sampler's next draw is a token the budget guard
        allows, drawn from the distribution of masking every token it refuses.  False (nothing done)
        for other samplers, which go on drawing one token at a time.

        * greedy: tokens are tried from the highest logit down (ties by id, as argmax breaks them);
          those above the first one the guard allows are masked;
        * sampling: rejection in batches of 64 draws with the sampler's own generator from the
          masked distribution less the tokens already refused (the same target), each token asked
          once; the token drawn is the one left open.
        Either way no token is asked twice, the sweep stops at the first token allowed, and the
        deadline is checked as it goes."""
        smp = self.sampler
        if not (isinstance(smp, MaskedSampler) and smp.top_p == 1.0 and smp.top_k == 0):
            return False
        allows = self.guard.allows
        ids = torch.isfinite(logits).nonzero().squeeze(1)
        if smp.temperature == 0.0:
            ids = ids[torch.sort(logits[ids], descending=True, stable=True).indices]
            for n, t in enumerate(ids.tolist()):
                if t in self.eos or allows(t, remaining):
                    logits[ids[:n]] = float("-inf")
                    return True
                if n % 64 == 63:
                    self._check_deadline()
            logits[ids] = float("-inf")
            return True
        probs = torch.softmax(logits[ids].double() / smp.temperature, dim=-1)
        while len(ids) and float(probs.sum()) > 0.0:
            for k in torch.multinomial(probs, 64, replacement=True, generator=smp.generator).tolist():
                if probs[k] == 0.0:
                    continue  # refused earlier in this batch
                t = int(ids[k])
                if t in self.eos or allows(t, remaining):
                    keep = logits[t].item()
                    logits.fill_(float("-inf"))
                    logits[t] = keep
                    return True
                probs[k] = 0.0
            self._check_deadline()
        logits[ids] = float("-inf")
        return True

    def _check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise self._timeout_error()

    def _timeout_error(self) -> GenerationError:
        """Where the time went: the prompt's prefill, the forward passes while decoding, the masks,
        and the rest (sampling, the matcher, the checks' search)."""
        now = time.perf_counter()
        spent = now - self._t0
        n = len(self.prompt)
        prefilling = self._prefilled < n
        prefill = (now if prefilling else self._t_prefill) - self._t0
        other = max(0.0, spent - prefill - self.forward_seconds - self.mask_seconds)
        ran = f"{self._prefilled} of {n} prompt tokens run" if prefilling else f"{n} prompt tokens"
        why = (f"generation ran past its timeout ({spent:.1f} s) after {len(self.tokens)} tokens: "
               f"{prefill:.1f} s in the prompt's prefill ({ran}), {self.forward_seconds:.1f} s in forward passes "
               f"while decoding, {self.mask_seconds:.1f} s in masks, {other:.1f} s in sampling, the matcher and "
               f"its checks ({self.steps} steps, {self._backtracks} tokens taken back)")
        checks = self._checks_text()
        if prefilling or prefill > spent / 2:
            why += ("; most of it running the prompt: raise timeout= (None for no limit), shorten the prompt "
                    "or use a faster model")
        else:
            if checks and (self._backtracks or self.mask_seconds > spent / 2 or other > spent / 2):
                why += f"; most of it searching for an output that passes {checks}"
            why += "; raise timeout= (None for no limit) or relax the constraint"
        return GenerationError(why, partial=self.partial_text(), reason="timeout", num_tokens=len(self.tokens))

    def _checks_text(self) -> str:
        """The constraint's checks at value boundaries, for an error message ('' when none)."""
        describe = getattr(self.matcher, "describe_checks", None)
        return describe() if describe is not None else ""

    def _no_token_error(self) -> GenerationError:
        why = "the constraint cannot be continued with this vocabulary"
        if self.guard is not None and self.matcher is not None:
            need = self.matcher.min_completion_bytes()
            why += (f" within max_tokens={self.max_tokens}: the shortest completion from here is {need:g} bytes,"
                    " and the budget guard counts one token per byte; raise max_tokens")
        checks = self._checks_text()
        if checks and self._backtracks:
            why += (f"; {self._backtracks} tokens were taken back searching for an output that passes {checks}, "
                    f"and none within max_tokens={self.max_tokens} was found")
        return GenerationError(f"no token is allowed after {len(self.tokens)} generated tokens ({why})",
                               partial=self.partial_text(), reason="no_token", num_tokens=len(self.tokens))

    # -- results --------------------------------------------------------------------------------
    def partial_text(self) -> str:
        return self.info.decode_bytes(self.tokens).decode("utf-8", errors="replace")

    def run(self) -> GenerationResult:
        """Decode to the end and return the result."""
        for _ in self:
            pass
        return self.result()

    def result(self) -> GenerationResult:
        now = time.perf_counter()
        seconds = now - self._t0
        decode = now - self._t_prefill
        ids = list(self.tokens)
        raw = self.info.decode_bytes(ids)
        return GenerationResult(
            token_ids=ids, text=raw.decode("utf-8", errors="replace"), num_tokens=len(ids), seconds=seconds,
            # decoding only: the first token's logits come from the prefill
            tokens_per_second=(len(ids) - 1) / decode if len(ids) > 1 and decode > 0 else 0.0,
            finish_reason=self.finish_reason or "",
            text_bytes=raw, prompt_tokens=len(self.prompt), prefill_seconds=self._t_prefill - self._t0,
            decode_seconds=decode, mask_seconds=self.mask_seconds, steps=self.steps,
            log_weight=self.sampler.log_weight, forward_passes=self._kv.forward_passes,
            extra={"speculation": self.draft_stats.as_dict()} if self.drafter is not None else {})


#: what a token that would repeat an n-gram loses (added to its logit): far below any other allowed
#: token, yet finite, so it stays the way out where the grammar and the budget allow nothing else
REPEAT_PENALTY = 1.0e4


def penalize_repeated_ngrams(logits: torch.Tensor, tokens: Sequence[int], n: int) -> None:
    """Make every token that would write an ``n``-token sequence already in ``tokens`` a last resort
    (in place), where another token is allowed: greedy decoding of a small model under a grammar
    otherwise loops (``"john-john-john..."``, a tree nesting ``src/src.json`` to the budget), since the
    grammar lets it go on and its own output makes going on likelier.  Forced tokens (the only one
    allowed) are untouched, and so is the model's choice among the others."""
    if len(tokens) < n - 1:
        return
    prefix = list(tokens[len(tokens) - n + 1:])
    last = prefix[-1]
    followers = {tokens[i + 1] for i in range(n - 2, len(tokens) - 1)
                 if tokens[i] == last and list(tokens[i - n + 2:i + 1]) == prefix}
    if not followers:
        return
    finite = torch.isfinite(logits)
    idx = torch.tensor(sorted(followers), dtype=torch.long)
    if int(finite.sum()) - int(finite[idx].sum()) <= 0:
        return  # nothing else is allowed: the repeat is the grammar's, not the model's
    logits[idx] -= REPEAT_PENALTY


def generate_constrained(model: Any, prompt_ids: Sequence[int], matcher: MatcherProtocol, *, max_tokens: int,
                         temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0, seed: int | None = None,
                         budget_guard: BudgetGuard | None = None, sampler: Sampler | None = None,
                         speculative: bool | Drafter = False, deadline: float | None = None,
                         no_repeat_ngram: int = 0) -> GenerationResult:
    """Generate until the constraint is complete (:class:`Decoding` to the end).

    ``model``: a ``structgen.models.Model`` (needs ``.hf_model`` and ``.info``).  Raises
    ``GenerationError`` (with ``.partial``) if ``max_tokens`` runs out first or a step leaves no
    token allowed.  ``speculative``: True drafts grammar-forced and prompt-lookup tokens (:class:`Drafter`) and
    verifies them in one forward pass; the output is the one plain decoding gives (a ``Drafter``
    instance chooses the sources).  ``deadline``: a ``time.monotonic()`` instant (see :class:`Decoding`);
    ``no_repeat_ngram``: as :class:`Decoding`'s."""
    sampler = sampler if sampler is not None else MaskedSampler(temperature=temperature, top_p=top_p,
                                                                top_k=top_k, seed=seed)
    return Decoding(model, prompt_ids, matcher, max_tokens=max_tokens, sampler=sampler,
                    budget_guard=budget_guard, drafter=make_drafter(model, speculative), deadline=deadline,
                    no_repeat_ngram=no_repeat_ngram).run()


def make_drafter(model: Any, speculative: bool | Drafter | None) -> Drafter | None:
    """The drafter ``speculative`` asks for: None for False, the default sources for True."""
    if isinstance(speculative, Drafter):
        return speculative
    return Drafter(model) if speculative else None


def generate_unconstrained(model: Any, prompt_ids: Sequence[int], *, max_tokens: int, temperature: float = 0.0,
                           top_p: float = 1.0, top_k: int = 0, seed: int | None = None,
                           stop_at_eos: bool = True, speculative: bool | Drafter = False) -> GenerationResult:
    """The same loop with no matcher: the baseline for measuring constraint overhead.  Stops at
    an EOS id (unless ``stop_at_eos=False``) or after ``max_tokens`` (``finish_reason="length"``).
    ``speculative=True`` drafts by prompt lookup (nothing is forced without a grammar)."""
    sampler = MaskedSampler(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
    return Decoding(model, prompt_ids, None, max_tokens=max_tokens, sampler=sampler, stop_at_eos=stop_at_eos,
                    drafter=make_drafter(model, speculative)).run()
