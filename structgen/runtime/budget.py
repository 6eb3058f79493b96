"""Finish within budget: the guard that keeps a constrained output completable in the tokens left.

With small models most grammar-constrained failures are outputs cut at ``max_tokens`` (repeated
items, endless digits).  The engine precomputes, per automaton state, the fewest bytes that
complete the output; the guard refuses a sampled token after which even that shortest completion
no longer fits (each byte counted as one token, the safe bound), so a satisfiable constraint
always ends in a complete, valid output.
"""
from __future__ import annotations

__all__ = ["BudgetGuard"]


class BudgetGuard:
    """Refuses a token after which the output can no longer be completed in the tokens left.

    Only the sampled token is checked (accept, look up the shortest completion, roll back:
    microseconds); the decoding runtime draws again without a refused token, which samples the
    same distribution as masking every failing token."""

    def __init__(self, matcher) -> None:
        self.matcher = matcher

    def allows(self, token_id: int, remaining: int) -> bool:
        """True if after ``token_id`` the output can still finish within ``remaining - 1`` tokens
        (+ EOS).  ``remaining`` counts the token about to be sampled."""
        return self.cost(token_id) <= remaining

    def cost(self, token_id: int) -> float:
        """The fewest tokens the output needs from here if ``token_id`` comes next: the token, the
        shortest completion after it (one token per byte) and EOS; 0 for EOS, inf for a token the
        grammar refuses."""
        m = self.matcher
        if token_id in m.grammar.eos_ids:
            return 0
        if not m.accept_token(token_id):
            return float("inf")
        try:
            return m.min_completion_bytes() + (0 if m.is_terminated() else 1) + 1
        finally:
            m.rollback(1)

    def tokens_needed(self, max_tokens: int) -> int:
        """The smallest budget (tokens, EOS included) from which this guard lets decoding start from
        the matcher's state, looked at only when ``max_tokens`` is below the quick bound: 0 when
        ``max_tokens`` is enough.  The guard lets a first token ``t`` through when the shortest
        completion after it, one token per byte, plus EOS, fits in the tokens left; the minimum over
        the allowed first tokens is the answer."""
        m = self.matcher
        if m.is_accepting():
            return 0 if max_tokens >= 1 else 1
        need = m.min_completion_bytes()
        if need + 1 <= max_tokens:  # the shortest completion's first byte as a token of its own fits
            return 0
        import numpy as np

        words = np.ascontiguousarray(m.next_token_mask(), dtype=np.uint32)
        ids = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[: m.grammar.vocab_size])
        best = float("inf")
        for t in ids.tolist():
            if t in m.grammar.eos_ids or not m.accept_token(t):
                continue
            try:
                best = min(best, m.min_completion_bytes() + (1 if m.is_terminated() else 2))
            finally:
                m.rollback(1)
        if best == float("inf"):
            return 0  # nothing fits at all: decoding reports that itself
        return 0 if best <= max_tokens else int(best)

    def shortest_completion(self) -> float:
        """Fewest bytes that complete the output from the matcher's state (for error messages)."""
        return self.matcher.min_completion_bytes()
