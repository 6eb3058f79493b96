"""Exact targets by enumeration: the harness every sampler is measured against.

For a constraint whose language is finite, walk the trie of viable token prefixes, asking the LM
at each node (``docs/algorithms.md`` section 0).  That gives, for every token sequence of the
language (two tokenizations of a string are two outcomes):

* the global target ``pi(x) = P(x) / P(L)`` -- the model's own distribution restricted to L,
  what ASAp, AWRS+SMC and Deco-G aim at;
* the local target ``q(x) = prod_i p(x_i | x_<i) m(x_i) / Z_i`` -- what masking samples;
* ``P(L)``, the model's probability of ending inside the language.

By default (``canonical="auto"``) only canonical tokenizations are walked (the tokenizer's own split of
each text, ``canonical.py``): the target the samplers aim at by default.  ``canonical=False``
enumerates every tokenization (the old target).  A toy LM without a tokenizer has no filter unless
one is passed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from .canonical import CanonicalMatcher, resolve_canonical, with_canonical
from .constraint import allowed_ids, limit_to_eos

__all__ = ["ExactTarget", "enumerate_target", "total_variation"]


@dataclass
class ExactTarget:
    """Token sequences of L (EOS excluded) -> log P(x) and log q(x); ``log_pl`` = log P(L)."""

    log_p: dict[tuple, float] = field(default_factory=dict)
    log_q: dict[tuple, float] = field(default_factory=dict)
    nodes: int = 0

    @property
    def log_pl(self) -> float:
        return float(np.logaddexp.reduce(list(self.log_p.values()))) if self.log_p else float("-inf")

    def global_target(self) -> dict[tuple, float]:
        lpl = self.log_pl
        return {x: math.exp(v - lpl) for x, v in self.log_p.items()}

    def local_target(self) -> dict[tuple, float]:
        """What masking samples: ``q`` renormalised over the outputs (a dead end -- a prefix with no
        completion, which the canonical filter can make -- sends masking back to draw again)."""
        q = {x: math.exp(v) for x, v in self.log_q.items()}
        z = sum(q.values())
        return {x: v / z for x, v in q.items()} if z > 0 else q


def enumerate_target(lm, matcher, *, max_tokens: int, max_nodes: int = 200_000, canonical="auto") -> ExactTarget:
    """Walk every viable prefix of ``matcher``'s language (from its current state) up to
    ``max_tokens`` tokens (EOS included).  Raises ``ValueError`` past ``max_nodes`` prefixes:
    the language is too large to enumerate.  ``canonical``: True (the filter of the LM's model),
    False (every tokenization) or a ``CanonicalFilter``; a matcher already wrapped by one is kept."""
    if not isinstance(matcher, CanonicalMatcher):
        matcher = with_canonical(matcher, resolve_canonical(canonical, lm))
    out = ExactTarget()
    eos = frozenset(lm.eos_ids)

    def walk(prefix: list[int], lp_x: float, lq_x: float) -> None:
        out.nodes += 1
        if out.nodes > max_nodes:
            raise ValueError(f"more than {max_nodes} prefixes: the language is too large to enumerate")
        ids = allowed_ids(matcher, eos_only=limit_to_eos(len(prefix), max_tokens))
        if len(ids) == 0:
            return
        lp = lm.logprobs(prefix)
        log_z = float(np.logaddexp.reduce(lp[ids]))
        for t in ids.tolist():
            lpt = float(lp[t])
            if t in eos:
                x = tuple(prefix)
                out.log_p[x] = lp_x + lpt
                out.log_q[x] = lq_x + lpt - log_z
                continue
            matcher.accept_token(t)
            prefix.append(t)
            walk(prefix, lp_x + lpt, lq_x + lpt - log_z)
            prefix.pop()
            matcher.rollback(1)

    walk([], 0.0, 0.0)
    return out


def total_variation(target: dict[tuple, float], samples: Iterable[Sequence[int]] | dict[tuple, float],
                    weights: Sequence[float] | None = None) -> float:
    """TV = 1/2 sum |f(x) - target(x)| between ``target`` and the empirical distribution of
    ``samples`` (weighted by ``weights`` when given), or a second distribution as a dict."""
    if isinstance(samples, dict):
        f = samples
    else:
        f = {}
        seqs = [tuple(s) for s in samples]
        w = np.ones(len(seqs)) if weights is None else np.asarray(weights, dtype=np.float64)
        total = float(w.sum())
        for x, wi in zip(seqs, w):
            f[x] = f.get(x, 0.0) + float(wi) / total
    keys = set(target) | set(f)
    return 0.5 * sum(abs(f.get(x, 0.0) - target.get(x, 0.0)) for x in keys)
