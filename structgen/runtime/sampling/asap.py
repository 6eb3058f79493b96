"""ASAp (adaptive sampling with approximate expected futures): grammar-aligned decoding.

The exact global sampler picks ``t`` with probability proportional to ``p(t | x) * EFG(x t)``,
where the expected future grammaticality ``EFG(y)`` is the chance that the model, continued from
``y``, ends inside the language.  Masking uses ``EFG = 1`` for every viable prefix, hence its
bias.  ASAp keeps a trie over the samples drawn so far for one (prompt, constraint, temperature):
every visited node caches the model's next-token log-probabilities (a prefix seen before costs no
forward pass) and an upper bound ``theta`` of its EFG, tightened along each sampled path after the
sample (``theta(n) = U(n) + sum over expanded children of p * theta``).  Allowed tokens never
sampled at a node are one block of mass ``U(n)``, not a node each, so a 129k vocabulary costs
nothing per node (``docs/algorithms.md`` section 1).  The sampling distribution converges to the
model's distribution restricted to the language; samples are not independent (they share the trie).
"""
from __future__ import annotations

import numpy as np

from .constraint import allowed_ids, limit_to_eos
from .sequence import DeadEnd, SequenceSample

__all__ = ["ASAp"]


class _Node:
    __slots__ = ("ids", "probs", "unexpanded", "children", "theta")

    def __init__(self) -> None:
        self.ids = None  # allowed token ids (EOS when complete)
        self.probs = None  # p of each allowed id (full-vocabulary softmax, not renormalised)
        self.unexpanded = None  # bool per allowed id: never sampled here yet
        self.children: dict[int, _Node] = {}
        self.theta = 1.0  # upper bound of EFG(prefix): optimistic until visited

    def p(self, token: int) -> float:
        """p(token | prefix) of an allowed token."""
        return float(self.probs[np.searchsorted(self.ids, token)])


class ASAp:
    """One persistent trie for a prompt and constraint; :meth:`sample` draws the next sample.

    ``lm``: a :class:`~structgen.runtime.sampling.lm.TokenLM`; ``matcher``: a Matcher at the
    start of the output (rolled back after each sample)."""

    def __init__(self, lm, matcher, *, max_tokens: int) -> None:
        self.lm, self.matcher, self.max_tokens = lm, matcher, max_tokens
        self.eos = frozenset(lm.eos_ids)
        self.root = _Node()
        self.samples = 0

    def _visit(self, node: _Node, prefix: list[int]) -> None:
        node.ids = allowed_ids(self.matcher, eos_only=limit_to_eos(len(prefix), self.max_tokens))
        # only the allowed tokens' probabilities are kept (full-vocabulary softmax, not renormalised):
        # a node costs its allowed set, not the vocabulary
        node.probs = np.exp(self.lm.logprobs(prefix)[node.ids]) if len(node.ids) else np.zeros(0)
        node.unexpanded = np.ones(len(node.ids), dtype=bool)
        node.theta = float(node.probs.sum())

    def sample(self, rng: np.random.Generator) -> SequenceSample:
        node, path, out = self.root, [], []
        m = self.matcher
        try:
            while True:
                if node.ids is None:
                    self._visit(node, out)
                if len(node.ids) == 0 or node.theta <= 0.0:
                    node.theta = 0.0
                    raise DeadEnd(f"no token may follow after {len(out)} tokens")
                t = self._choose(node, rng)
                path.append(node)
                child = node.children.get(t)
                if child is None:
                    child = node.children[t] = _Node()
                    node.unexpanded[np.searchsorted(node.ids, t)] = False
                    if t in self.eos:
                        child.ids = np.zeros(0, dtype=np.int64)
                        child.theta = 1.0  # a complete output: its future is grammatical for sure
                if t in self.eos:
                    self.samples += 1
                    return SequenceSample(list(out), 0.0, steps=len(out) + 1)
                m.accept_token(t)
                out.append(t)
                node = child
        finally:
            if out:
                m.rollback(len(out))
            for n in reversed(path):  # tighten the bounds along the sampled path
                expanded = sum(n.p(c) * ch.theta for c, ch in n.children.items())
                n.theta = float(n.probs[n.unexpanded].sum()) + expanded

    def _choose(self, node: _Node, rng: np.random.Generator) -> int:
        """t with probability proportional to p(t) * theta(child t): the unexpanded block (theta 1)
        as one weight, then a token inside it by its probability."""
        kids = list(node.children.items())
        kid_w = np.array([node.p(c) * ch.theta for c, ch in kids]) if kids else np.zeros(0)
        block = node.probs * node.unexpanded
        u = float(block.sum())
        total = u + float(kid_w.sum())
        r = rng.random() * total
        if r < u:
            return int(node.ids[rng.choice(len(node.ids), p=block / u)])
        r -= u
        acc = np.cumsum(kid_w)
        i = int(np.searchsorted(acc, r, side="right"))
        return kids[min(i, len(kids) - 1)][0]

    def next_sample_probability(self, tokens) -> float:
        """The probability that the next :meth:`sample` returns ``tokens`` (EOS excluded), read off
        the trie without changing it: how far ASAp's sampling distribution has come."""
        m, node, prob, fed = self.matcher, self.root, 1.0, 0
        try:
            for depth, t in enumerate(list(tokens) + [self.lm.eos_ids[0]]):
                if node is not None and node.ids is not None:
                    ids, probs, kids = node.ids, node.probs, node.children
                else:  # never visited: every child's bound is still 1 (masked sampling from here)
                    ids = allowed_ids(m, eos_only=limit_to_eos(depth, self.max_tokens))
                    probs = np.exp(self.lm.logprobs(list(tokens[:depth]))[ids]) if len(ids) else np.zeros(0)
                    kids = {}
                if t in self.eos:
                    t = next((e for e in ids.tolist() if e in self.eos), t)
                if t not in set(ids.tolist()):
                    return 0.0
                weights = {int(c): float(pc) * (kids[c].theta if c in kids else 1.0)
                           for c, pc in zip(ids.tolist(), probs.tolist())}
                total = sum(weights.values())
                if total <= 0:
                    return 0.0
                prob *= weights[int(t)] / total
                if t in self.eos:
                    return prob
                m.accept_token(int(t))
                fed += 1
                node = kids.get(int(t)) if node is not None else None
            return prob
        finally:
            if fed:
                m.rollback(fed)

    @property
    def log_pl_bound(self) -> float:
        """log theta(root): an upper bound of log P(L) that tightens with every sample."""
        return float(np.log(self.root.theta)) if self.root.theta > 0 else float("-inf")
