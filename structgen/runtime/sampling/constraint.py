"""The constraint as the sequence samplers query it: allowed token ids, and one token's viability.

Both come from the engine's Matcher (``docs/architecture.md``): a token is viable after a prefix
when ``accept_token`` takes it (the engine's automata are trimmed, so an accepted prefix can
always be completed), and EOS is viable exactly when the prefix is a complete output.
"""
from __future__ import annotations

import numpy as np

__all__ = ["allowed_ids", "is_viable", "limit_to_eos"]


def allowed_ids(matcher, *, eos_only: bool = False) -> np.ndarray:
    """Token ids the matcher allows next (EOS ids when the output may end), ascending int64;
    ``eos_only`` (the last position of a token budget): only EOS, and only if accepting."""
    g = matcher.grammar
    if eos_only:
        return np.array(sorted(g.eos_ids) if matcher.is_accepting() else (), dtype=np.int64)
    words = np.ascontiguousarray(matcher.next_token_mask(), dtype=np.uint32)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: g.vocab_size]
    return np.flatnonzero(bits).astype(np.int64)


def is_viable(matcher, token: int, *, eos_only: bool = False, remaining: int | None = None) -> bool:
    """True when ``token`` may follow (the matcher's state is left as it was).

    With ``remaining`` (tokens left, this one included) the token must also leave room to finish:
    the shortest completion after it, counted one token per byte as the budget guard counts it,
    plus EOS, fits in ``remaining - 1``.  The target becomes the outputs that stay finishable
    within the budget at every step, so particles steer towards ending instead of dying at it."""
    if token in matcher.grammar.eos_ids:
        return matcher.is_accepting()
    if eos_only or not matcher.accept_token(token):
        return False
    try:
        if remaining is None:
            return True
        need = matcher.min_completion_bytes()
        return need + (0 if matcher.is_terminated() else 1) <= remaining - 1
    finally:
        matcher.rollback(1)


def limit_to_eos(step: int, max_tokens: int) -> bool:
    """At the last position of the budget only EOS may come (the target is the language's
    outputs of at most ``max_tokens`` tokens, EOS included)."""
    return step >= max_tokens - 1
