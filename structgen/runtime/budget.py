"""Finish within budget: the guard that keeps a constrained output completable in the tokens left.

With small models most grammar-constrained failures are outputs cut at ``max_tokens`` (repeated
items, endless digits).  The engine precomputes, per automaton state, the fewest bytes that
complete the output; the guard refuses a sampled token after which even that shortest completion
no longer fits (each byte counted as one token, the safe bound), so a satisfiable constraint
always ends in a complete, valid output.
"""
from __future__ import annotations

import functools

import numpy as np

__all__ = ["BudgetGuard", "shortfall_message"]


def shortfall_message(max_tokens: int, needed: int, name: str = "max_tokens") -> str:
    """What to tell a user whose budget ``max_tokens`` no valid output fits (``needed``: the smallest
    that does, :meth:`BudgetGuard.tokens_needed`; ``name`` as their API calls the budget)."""
    return (f"no valid output fits in {name}={max_tokens}: the shortest needs {needed} tokens as the budget "
            f"guard counts them (one token per byte after the first, plus EOS); raise {name} to at least {needed}")


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

    def costs(self, ids: np.ndarray) -> np.ndarray:
        """:meth:`cost` of every token in ``ids`` (a mask's allowed tokens): :meth:`state_costs`, and
        the others accepted and rolled back one by one."""
        ids = np.asarray(ids, dtype=np.int64)
        out = self.state_costs(ids)
        for i in np.flatnonzero(np.isnan(out)).tolist():
            out[i] = self.cost(int(ids[i]))
        return out

    def state_costs(self, ids: np.ndarray) -> np.ndarray:
        """:meth:`cost` of the tokens of ``ids`` (allowed by the exact mask) that the automaton state
        alone decides, NaN for the others -- so a caller may keep the result per state.  A token whose
        bytes all stay inside the lexeme being read leaves the parser where it is, so its cost is the
        shortest completion from the lexer state its bytes end in: those tokens (inside a string,
        nearly the whole vocabulary) are walked through the lexer's table together.  Left NaN: tokens
        that cross a lexeme boundary; with checks at value boundaries, also those that complete the
        lexeme (a check may prune readings there); everything where a string's lazily followed
        pattern counts too (what it needs depends on the text), or a few tokens (one by one is as
        quick)."""
        m = self.matcher
        ids = np.asarray(ids, dtype=np.int64)
        g = m.grammar
        out = np.full(len(ids), np.nan)
        if m.is_terminated() or len(ids) < 256 or m.may_dead_end and getattr(g, "lazy_patterns", None):
            return out
        cid, lx, ls = m._state
        padded, lengths = _byte_table(g.tokenizer)
        special = np.isin(ids, np.fromiter(g.eos_ids, dtype=np.int64, count=len(g.eos_ids)))
        out[special] = 0.0
        walk = ids[~special]
        end_states = getattr(g, "token_end_states", None)
        if end_states is not None:  # the whole output is one lexeme (a lazy regex): its automaton says
            state = end_states(ls, walk, padded, lengths)
            inside = state >= 0
        else:
            state = np.full(len(walk), ls, dtype=np.int64)
            live = lengths[walk] > 0
            trans, classmap = lx.core.trans, lx.core.classmap
            for j in range(int(lengths[walk].max(initial=0))):
                step = live & (lengths[walk] > j)
                if not step.any():
                    break
                nxt = trans[state[step], classmap[padded[walk[step], j]]]
                state[step] = nxt
                live[step] = nxt >= 0  # a lexeme boundary (or a refusal): one by one
            inside = live & (lengths[walk] > 0)
            if m.may_dead_end and inside.any():  # a lexeme completed by the token may run a check
                complete = np.frombuffer(lx.core._dead_end_flags(), dtype=np.bool_)
                inside &= ~complete[np.where(inside, state, 0)]
        cost_walk = np.full(len(walk), np.nan)
        for end in np.unique(state[inside]).tolist():
            cost_walk[inside & (state == end)] = g.min_completion(cid, lx, end) + 2  # the token, the rest, EOS
        out[~special] = cost_walk
        return out

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


@functools.lru_cache(maxsize=8)
def _byte_table(tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """Every token's bytes as one padded uint8 array, and their lengths (per tokenizer, kept)."""
    tb = tokenizer.token_bytes
    lengths = np.fromiter((len(b) for b in tb), dtype=np.int64, count=len(tb))
    padded = np.zeros((len(tb), max(1, int(lengths.max(initial=1)))), dtype=np.uint8)
    for i, b in enumerate(tb):
        if b:
            padded[i, :len(b)] = np.frombuffer(b, dtype=np.uint8)
    return padded, lengths
