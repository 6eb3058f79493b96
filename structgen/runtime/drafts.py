"""Draft tokens without a draft model: what the grammar forces, and what the context repeats.

A draft is only a guess: the runtime feeds it with the last accepted token in one forward pass and
keeps a drafted token only where the ordinary step (mask, sampler, budget guard, accept) picks that
very token from the row of logits before it.  So a bad draft costs a wider forward pass, never a
different output.  Two sources (``../shared/docs/algorithms.md`` section 5):

- **grammar-forced bytes** (``Matcher.forced_continuation``: every live parser state agrees on the
  next bytes: keys of a fixed-order object, punctuation, ``const``/single ``enum`` values), turned
  into tokens the way the model's tokenizer writes them;
- **prompt lookup**: the last n tokens (n = 3, 2, 1) found earlier in the prompt or the output, and
  what followed them there (the prompt holds the schema: key names, enum values; the output repeats
  keys across array items).

Drafts are cut at the first token the grammar refuses (``validate_tokens``), so the forward pass is
never widened by a token that cannot be kept.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

__all__ = ["Drafter", "DraftStats", "PromptLookup", "forced_token_encoder"]


def _complete_utf8(data: bytes) -> str:
    """The longest prefix of ``data`` that is whole UTF-8 characters, as text."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""


def forced_token_encoder(model: Any) -> Callable[[bytes], list[int]]:
    """bytes -> token ids as the model's own tokenizer writes them (its ``encode``, no special tokens).

    Forced bytes that end inside a UTF-8 character are cut back to the last whole character.  A
    model without a Hugging Face tokenizer gets greedy longest-match over its token table."""
    tok = getattr(model, "hf_tokenizer", None)
    if tok is not None:
        def encode(data: bytes) -> list[int]:
            text = _complete_utf8(data)
            return list(tok.encode(text, add_special_tokens=False)) if text else []
        return encode
    return _longest_match_encoder(model.info)


def _longest_match_encoder(info: Any) -> Callable[[bytes], list[int]]:
    by_bytes: dict[bytes, int] = {}
    special = set(info.special_ids)
    for i, b in enumerate(info.token_bytes):
        if b and i not in special and b not in by_bytes:
            by_bytes[b] = i
    longest = max((len(b) for b in by_bytes), default=1)

    def encode(data: bytes) -> list[int]:
        out, i = [], 0
        while i < len(data):
            for n in range(min(longest, len(data) - i), 0, -1):
                t = by_bytes.get(data[i:i + n])
                if t is not None:
                    out.append(t)
                    i += n
                    break
            else:
                break
        return out
    return encode


class PromptLookup:
    """Propose what followed the most recent earlier occurrence of the context's last n tokens.

    ``max_ngram`` down to ``min_ngram`` are tried in turn; the first match wins.  Linear in the
    context (prompts here are a few thousand tokens at most), no index to keep in sync."""

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        n_ctx = len(context)
        if k <= 0 or n_ctx < 2:
            return []
        for n in range(min(self.max_ngram, n_ctx - 1), self.min_ngram - 1, -1):
            tail = list(context[n_ctx - n:])
            # the most recent earlier occurrence (not the tail itself)
            for start in range(n_ctx - n - 1, -1, -1):
                if context[start] == tail[0] and list(context[start:start + n]) == tail:
                    follow = list(context[start + n:start + n + k])
                    if follow:
                        return follow
                    break
        return []


_SORTED: dict[int, tuple[Any, list[bytes], Any]] = {}


def _sorted_vocabulary(info: Any) -> tuple[list[bytes], Any]:
    """The tokens' bytes in sorted order and their ids (for prefix queries), once per tokenizer
    (building it takes 20-30 ms for a 49k vocabulary: too much to pay on every call)."""
    import weakref

    import numpy as np

    hit = _SORTED.get(id(info))
    if hit is not None and hit[0]() is info:
        return hit[1], hit[2]
    special = set(info.special_ids)
    pairs = sorted((b, i) for i, b in enumerate(info.token_bytes) if b and i not in special)
    keys, ids = [b for b, _ in pairs], np.array([i for _, i in pairs], dtype=np.int64)
    if len(_SORTED) > 8:
        _SORTED.clear()
    _SORTED[id(info)] = (weakref.ref(info), keys, ids)
    return keys, ids


@dataclass
class DraftStats:
    """What speculation did in one decoding: tokens proposed and kept, per source (forward passes are
    the KV cache's own count, ``GenerationResult.forward_passes``)."""

    drafted: dict[str, int] = field(default_factory=lambda: {"forced": 0, "lookup": 0})
    accepted: dict[str, int] = field(default_factory=lambda: {"forced": 0, "lookup": 0})

    def as_dict(self) -> dict[str, Any]:
        return {"drafted": dict(self.drafted), "accepted": dict(self.accepted)}


class Drafter:
    """Drafts for the decoding runtime: grammar-forced tokens first, then prompt lookup.

    ``max_draft``: tokens proposed per forward pass at most.  The default 3 feeds at most 4 tokens
    a pass: with ``fast_linear`` that costs about 1.2x one token for SmolLM2-135M on this 2-core
    CPU, and 8 tokens about 2x (``structgen bench decode`` measures it on yours).  ``lookup=False`` keeps to forced tokens (jump-forward only)."""

    def __init__(self, model: Any, *, max_draft: int = 3, lookup: bool = True, forced: bool = True,
                 max_ngram: int = 3) -> None:
        if max_draft < 1:
            raise ValueError(f"max_draft must be >= 1, got {max_draft}")
        self.max_draft = max_draft
        self.encode = forced_token_encoder(model) if forced else None
        self.token_bytes = model.info.token_bytes
        self._sorted_keys, self._sorted_ids = _sorted_vocabulary(model.info)
        self.lookup = PromptLookup(max_ngram=max_ngram) if lookup else None

    def _back_off(self, matcher: Any, tokens: list[int]) -> list[int]:
        """Drop trailing forced tokens that a longer vocabulary token, allowed by the grammar at that
        point, could span past (``"`` when ``":`` may follow a key): the model would likely write the
        longer token, and a draft it rejects only widens the forward pass.  At most 4 tokens."""
        tb = self.token_bytes
        n = len(tokens)
        accepted = 0
        while accepted < n and matcher.accept_token(tokens[accepted]):
            accepted += 1
        try:
            n = accepted  # a forced tokenization the grammar refuses is cut there
            for _ in range(4):
                if n == 0:
                    break
                tail = b"".join(tb[t] for t in tokens[n - 1:accepted])
                matcher.rollback(1)
                accepted -= 1
                if not self._longer_token_allowed(matcher, tail):
                    matcher.accept_token(tokens[n - 1])
                    accepted += 1
                    break
                n -= 1
        finally:
            if accepted:
                matcher.rollback(accepted)
        return tokens[:n]

    def _longer_token_allowed(self, matcher: Any, prefix: bytes) -> bool:
        """Whether a token whose bytes extend ``prefix`` is allowed in the matcher's state."""
        import bisect

        import numpy as np

        keys = self._sorted_keys
        lo = bisect.bisect_right(keys, prefix)  # the token equal to prefix itself sorts just before
        hi = bisect.bisect_left(keys, prefix + b"\xff" * 64, lo)
        if lo >= hi:
            return False
        ids = self._sorted_ids[lo:hi]
        words = matcher.next_token_mask()
        return bool(((words[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).any())

    def propose(self, matcher: Any, context: Sequence[int], k: int) -> tuple[list[int], list[str]]:
        """Up to ``k`` tokens to try after ``context`` (the matcher is in the state after it; None
        when decoding is free), each with its source; the matcher's state is unchanged."""
        k = min(k, self.max_draft)
        if k <= 0:
            return [], []
        draft: list[int] = []
        if self.encode is not None and matcher is not None:
            forced = matcher.forced_continuation(limit=16 * k)
            if forced:
                draft = self._back_off(matcher, self.encode(forced)[:k + 1])[:k]
        sources = ["forced"] * len(draft)
        if self.lookup is not None and len(draft) < k:
            more = self.lookup.propose(list(context) + draft, k - len(draft))
            draft += more
            sources += ["lookup"] * len(more)
        if matcher is not None and draft:
            keep = len(matcher.validate_tokens(draft))
            del draft[keep:], sources[keep:]
        return draft, sources
