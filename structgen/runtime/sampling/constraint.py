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
    ids = np.flatnonzero(bits).astype(np.int64)
    if matcher.checks_at_commit:  # the mask over-approximates: a check may refuse a masked-in token
        ids = np.array([t for t in ids.tolist() if is_viable(matcher, t)], dtype=np.int64)
    return ids


def is_viable(matcher, token: int, *, eos_only: bool = False) -> bool:
    """True when ``token`` may follow (the matcher's state is left as it was)."""
    if token in matcher.grammar.eos_ids:
        return matcher.is_accepting()
    if eos_only or not matcher.accept_token(token):
        return False
    matcher.rollback(1)
    return True


def limit_to_eos(step: int, max_tokens: int) -> bool:
    """At the last position of the budget only EOS may come (the target is the language's
    outputs of at most ``max_tokens`` tokens, EOS included)."""
    return step >= max_tokens - 1
