"""The canonical-tokenization filter as the sequence samplers see it: a Matcher that also refuses
non-canonical tokenizations (``structgen.tokenizer.canonical``).

Wrapping the constraint's Matcher (:class:`CanonicalMatcher`) makes the filter a factor of every
proposal and of the target alike: masking, ASAp, AWRS, SMC and the exact enumeration all query it
through ``allowed_ids`` / ``is_viable`` unchanged, and the target becomes the model's distribution
over *canonical* tokenizations restricted to the constraint (the distribution over texts users
mean).  ``canonical=False`` everywhere gives the old target (every tokenization)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import InvalidArgument, UnsupportedFeature

__all__ = ["CanonicalMatcher", "canonical_filter_for", "resolve_canonical", "with_canonical"]

_FILTERS: dict[str, Any] = {}  # tokenizer fingerprint -> CanonicalFilter


def canonical_filter_for(model: Any):
    """The canonical filter of a structgen ``Model``'s tokenizer (built once per tokenizer, its tables
    cached on disk).  ``UnsupportedFeature`` for tokenizers it does not cover (SentencePiece)."""
    from ...tokenizer.canonical import CanonicalFilter

    key = model.info.fingerprint()
    filt = _FILTERS.get(key)
    if filt is None:
        hf = getattr(model, "hf_tokenizer", None)
        backend = getattr(hf, "backend_tokenizer", None)
        if backend is None:
            raise UnsupportedFeature("canonical tokenizations need a tokenizer with a `tokenizers` backend "
                                     "(tokenizer.json); pass canonical=False")

        def encode(texts):
            return [e.ids for e in backend.encode_batch(list(texts), add_special_tokens=False)]

        filt = _FILTERS[key] = CanonicalFilter.from_tokenizer_json(backend.to_str(), model.info.token_bytes,
                                                                   model.info.eos_ids, hf_encode=encode)
    return filt


def resolve_canonical(canonical: Any, lm: Any = None, model: Any = None):
    """The filter ``canonical=`` asks for: ``False``/``None`` -> None (every tokenization); ``True`` ->
    the filter of the model behind ``lm`` (``ModelLM.model``) or ``model``, None for an LM without a
    tokenizer (the toy LMs); a ``CanonicalFilter`` as it is."""
    if canonical is None or canonical is False:
        return None
    if canonical is True:
        model = model if model is not None else getattr(lm, "model", None)
        if model is None or getattr(model, "info", None) is None:
            return getattr(lm, "canonical_filter", None)
        return canonical_filter_for(model)
    if hasattr(canonical, "allowed") and hasattr(canonical, "advance"):
        return canonical
    raise InvalidArgument(f"canonical= must be True, False or a CanonicalFilter, got {canonical!r}")


def with_canonical(matcher: Any, filt: Any):
    """``matcher`` wrapped by the filter (as it is when ``filt`` is None)."""
    return matcher if filt is None else CanonicalMatcher(matcher, filt)


class CanonicalMatcher:
    """A Matcher (the methods the sequence samplers use) that refuses, besides what the constraint
    refuses, the tokens the canonical filter refuses, and EOS where the filter says the output may
    not end.  The filter's state follows ``accept_token`` / ``rollback``."""

    def __init__(self, matcher: Any, filt: Any, states: list[int] | None = None) -> None:
        self.matcher, self.filter = matcher, filt
        self.grammar = matcher.grammar
        if filt.vocab_size != self.grammar.vocab_size:
            raise InvalidArgument(f"the canonical filter covers {filt.vocab_size} tokens, the grammar "
                                  f"{self.grammar.vocab_size}: build it from the model's tokenizer")
        self._eos = frozenset(self.grammar.eos_ids)
        self._states = list(states) if states is not None else [filt.start]
        self._words = getattr(filt, "_words_cache", None)
        if self._words is None:
            self._words = filt._words_cache = {}

    @property
    def vocab_size(self) -> int:
        return self.grammar.vocab_size

    @property
    def state(self) -> int:
        return self._states[-1]

    def reset(self) -> None:
        self.matcher.reset()
        self._states = [self.filter.start]

    def copy(self) -> "CanonicalMatcher":
        return CanonicalMatcher(self.matcher.copy(), self.filter, self._states)

    def is_accepting(self) -> bool:
        return self.filter.can_end(self.state) and self.matcher.is_accepting()

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def min_completion_bytes(self):
        return self.matcher.min_completion_bytes()

    def _filter_words(self, n_words: int) -> np.ndarray:
        s = self.state
        hit = self._words.get(s)
        if hit is None:
            bits = self.filter.allowed(s)
            packed = np.packbits(bits, bitorder="little")
            buf = np.zeros(n_words * 4, dtype=np.uint8)
            buf[: len(packed)] = packed
            hit = buf.view(np.uint32)
            if len(self._words) > 4096:
                self._words.clear()
            self._words[s] = hit
        return hit

    def next_token_mask(self) -> np.ndarray:
        words = np.asarray(self.matcher.next_token_mask(), dtype=np.uint32)
        out = words & self._filter_words(len(words))
        if self.filter.can_end(self.state):  # EOS bits as the constraint set them
            for e in self._eos:
                w, b = divmod(e, 32)
                if w < len(words):
                    out[w] |= words[w] & np.uint32(1 << b)
        return out

    def accept_token(self, token: int) -> bool:
        s = self.state
        if token in self._eos:
            if not self.filter.can_end(s):
                return False
            ok = self.matcher.accept_token(token)
            if ok:
                self._states.append(s)
            return ok
        if not self.filter.allowed(s)[token]:
            return False
        ok = self.matcher.accept_token(token)
        if ok:
            self._states.append(self.filter.advance(s, token))
        return ok

    def rollback(self, num_tokens: int = 1) -> None:
        self.matcher.rollback(num_tokens)
        if num_tokens:
            del self._states[-num_tokens:]
