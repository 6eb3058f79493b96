"""Deco-G: sample ``p_LM(t | x) * P_HMM(format holds | x t)``, the HMM looking ahead over the format.

``docs/algorithms.md`` section 3.  Once per (HMM, format, length window) a backward table gives,
for every token-automaton state ``s``, hidden state ``z`` and remaining length ``k``, the
probability that the next ``k`` tokens, the first emitted from ``z``, drive the automaton from
``s`` to the end:

    beta_0[s][z] = 1[s final]            beta_k[done] = 1 (the output has ended)
    beta_k[s][z] = sum_(s -> s') E[s,s'][z] * (A beta_k-1[s'])[z],   E[s,s'][z] = sum_(t: s -t-> s') B[z,t]

(per-edge emission sums, computed once).  Each level is stored normalised with a log scale, so
long formats do not underflow.  Per generated token, with the HMM's forward vector ``a``:

    den[t] = sum_z a[z] B[z,t]          num[t] = sum_z a[z] B[z,t] (A beta_k-1[s'(t)])[z]
    score[t] = log p_LM(t | x) + log num[t] - log den[t]

``num/den`` is the HMM's probability that the format still holds after ``t``: zero exactly for
tokens after which it cannot, so every output satisfies the format; when the LM is the HMM itself
the sampler draws exactly from P_HMM(x | format).  Pruning keeps the ``top_k`` hidden states of
``a`` (or the fewest that hold ``mass`` of it) and redoes the step unpruned if that leaves no mass.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ...errors import GenerationError, InvalidArgument
from .constraint import allowed_ids
from .hmm import HMM, HMMError
from .sequence import DeadEnd, SequenceSample
from .token_dfa import TokenDFA

__all__ = ["BackwardTable", "DecoG", "resolve_hmm", "MAX_TABLE_BYTES"]

MAX_TABLE_BYTES = 1 << 30


class BackwardTable:
    """``beta_k[s]`` for ``k = 0..max_len`` as normalised vectors ``vec[k, s]`` (H) with log scales
    ``log_scale[k, s]`` (``-inf`` where the format cannot be finished in ``k`` tokens)."""

    def __init__(self, hmm: HMM, dfa: TokenDFA, max_len: int) -> None:
        h, n = hmm.hidden, dfa.n_states
        need = (max_len + 1) * n * h * 8
        if need > MAX_TABLE_BYTES:
            raise GenerationError(
                f"the Deco-G backward table would take {need / 2**20:.0f} MiB ({n} format states x {max_len + 1} "
                f"lengths x {h} hidden states): lower max_tokens or use a smaller HMM", reason="no_token")
        top = max((int(t[-1]) for t in dfa.tokens if len(t)), default=-1)
        if top >= hmm.vocab_size:
            raise HMMError(f"the format uses token {top}, outside the HMM's vocabulary of {hmm.vocab_size}")
        t0 = time.perf_counter()
        self.hmm, self.dfa, self.max_len = hmm, dfa, max_len
        A = hmm.A.astype(np.float64)
        B = hmm.B
        src, dst, sums = [], [], []
        for s, groups in enumerate(dfa.groups):
            if dfa.absorbing[s]:
                continue
            for d, toks in groups:
                src.append(s)
                dst.append(d)
                sums.append(B[:, toks].sum(axis=1, dtype=np.float64))
        self.n_edges = len(src)
        src_a = np.asarray(src, dtype=np.int64)
        dst_a = np.asarray(dst, dtype=np.int64)
        esum = np.asarray(sums, dtype=np.float64).reshape(len(src), h)
        vec = np.zeros((max_len + 1, n, h))
        log_scale = np.full((max_len + 1, n), -np.inf)
        absorbing = dfa.absorbing
        ends = dfa.final & ~absorbing  # beta_0: the output may stop here
        vec[0, ends] = 1.0
        log_scale[0, ends] = 0.0
        vec[:, absorbing] = 1.0
        log_scale[:, absorbing] = 0.0
        firsts = np.flatnonzero(np.r_[True, src_a[1:] != src_a[:-1]]) if len(src_a) else np.zeros(0, dtype=np.int64)
        rows = src_a[firsts]
        for k in range(1, max_len + 1):
            if not len(src_a):
                break
            a_beta = vec[k - 1] @ A.T  # (A beta)[s'] for every state
            sc = log_scale[k - 1, dst_a]
            m = np.maximum.reduceat(sc, firsts)  # per source state, the largest scale of its edges
            m_edge = np.repeat(m, np.diff(np.r_[firsts, len(src_a)]))
            w = np.where(np.isfinite(sc), np.exp(sc - np.where(np.isfinite(m_edge), m_edge, 0.0)), 0.0)
            terms = esum * a_beta[dst_a] * w[:, None]
            tot = np.add.reduceat(terms, firsts, axis=0)
            top = tot.max(axis=1)
            ok = (top > 0) & np.isfinite(m)
            vec[k, rows[ok]] = tot[ok] / top[ok, None]
            log_scale[k, rows[ok]] = m[ok] + np.log(top[ok])
        self.vec, self.log_scale = vec, log_scale
        self.seconds = time.perf_counter() - t0

    def log_prob(self, state: int, remaining: int, a: np.ndarray) -> float:
        """log sum_z a[z] beta_remaining[state][z]: with ``a = gamma`` and the start state, log P_HMM(format)."""
        v = float(a @ self.vec[remaining, state])
        return self.log_scale[remaining, state] + math.log(v) if v > 0 else -math.inf

    @property
    def nbytes(self) -> int:
        return int(self.vec.nbytes + self.log_scale.nbytes)


@dataclass
class StepStats:
    """Per-call counters: steps, unpruned redos, seconds in the Deco-G arithmetic."""

    steps: int = 0
    redos: int = 0
    seconds: float = 0.0


def _log_ratio(log_scale: float, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """log(scale * num / den), -inf where num is 0 (num <= den: the table's vectors are <= 1)."""
    num = num.astype(np.float64)
    ok = num > 0
    out = np.full(len(num), -np.inf)
    out[ok] = log_scale + np.log(num[ok]) - np.log(den[ok])
    return out


class DecoG:
    """The sampler over one (HMM, token automaton, length window).  ``top_k`` / ``mass``: hidden
    state pruning (None: off).  ``exact_length``: outputs have exactly ``max_len`` tokens and no
    EOS (the verification experiment); otherwise an output ends with EOS within ``max_len``."""

    def __init__(self, hmm: HMM, dfa: TokenDFA, max_len: int, *, top_k: int | None = None,
                 mass: float | None = None, exact_length: bool = False) -> None:
        if top_k is not None and top_k < 1:
            raise InvalidArgument(f"top_k must be >= 1, got {top_k}")
        if mass is not None and not 0.0 < mass <= 1.0:
            raise InvalidArgument(f"mass must be in (0, 1], got {mass}")
        self.hmm, self.dfa, self.max_len = hmm, dfa, max_len
        self.top_k, self.mass, self.exact_length = top_k, mass, exact_length
        self.table = BackwardTable(hmm, dfa, max_len)
        self._A = hmm.A.astype(np.float64)
        self.stats = StepStats()

    # -- one step ------------------------------------------------------------------
    def _rows(self, a: np.ndarray) -> np.ndarray | None:
        h = len(a)
        if self.top_k is not None and self.top_k < h:
            keep = np.argpartition(-a, self.top_k - 1)[: self.top_k]
        elif self.mass is not None and self.mass < 1.0:
            order = np.argsort(-a)
            c = np.cumsum(a[order])
            keep = order[: int(np.searchsorted(c, self.mass * c[-1])) + 1]
        else:
            return None
        return np.sort(keep) if len(keep) < h else None

    def _log_ratio(self, a: np.ndarray, state: int, remaining: int, rows: np.ndarray | None):
        """(token ids, log num - log den) for the tokens of ``state``; -inf where the format can no
        longer be finished in ``remaining - 1`` tokens after them."""
        dfa, table = self.dfa, self.table
        B = self.hmm.B
        A = self._A
        if rows is not None:
            a, B, A = a[rows], B[rows], A[rows]
        ids = dfa.tokens[state]
        dests = dfa.dests[state]
        den = (a.astype(B.dtype) @ B)[ids].astype(np.float64)
        k = remaining - 1
        out = np.full(len(ids), -np.inf)
        big = [(d, toks) for d, toks in dfa.groups[state] if np.isfinite(table.log_scale[k, d])]
        if not big:
            return ids, out
        pos = {}
        for d, _ in big:
            pos[d] = np.flatnonzero(dests == d)
        full = [(d, toks) for d, toks in big if len(toks) * 16 >= B.shape[1]]
        if full:  # large groups: one matrix product over the whole vocabulary for all of them
            W = np.stack([a * (A @ table.vec[k, d]) for d, _ in full]).astype(B.dtype)
            M = W @ B
            for j, (d, toks) in enumerate(full):
                out[pos[d]] = _log_ratio(table.log_scale[k, d], M[j, toks], den[pos[d]])
        for d, toks in big:
            if len(toks) * 16 >= B.shape[1]:
                continue
            w = (a * (A @ table.vec[k, d])).astype(B.dtype)
            out[pos[d]] = _log_ratio(table.log_scale[k, d], w @ B[:, toks], den[pos[d]])
        return ids, out

    def lookahead(self, a: np.ndarray, state: int, remaining: int):
        """(token ids, the HMM's log P(format finishes within ``remaining - 1`` tokens | x t) for
        each): pruned first, unpruned when pruning leaves no mass.  Deco-G's factor and twisted
        SMC's twist."""
        rows = self._rows(a)
        ids, lr = self._log_ratio(a, state, remaining, rows)
        if rows is not None and not np.isfinite(lr).any():
            self.stats.redos += 1
            ids, lr = self._log_ratio(a, state, remaining, None)
        return ids, lr

    def step_logprobs(self, a: np.ndarray, state: int, remaining: int, lm_logprobs: np.ndarray):
        """(token ids, normalised log-probabilities of the step): the LM's log-probabilities plus
        the HMM's log P(format | x t) (:meth:`lookahead`)."""
        t0 = time.perf_counter()
        ids, lr = self.lookahead(a, state, remaining)
        score = lm_logprobs[ids] + lr
        if not np.isfinite(score).any():
            raise DeadEnd(f"no token keeps the format finishable within {remaining} tokens")
        top = score.max()
        logz = top + math.log(np.exp(score - top).sum())
        self.stats.steps += 1
        self.stats.seconds += time.perf_counter() - t0
        return ids, score - logz

    # -- whole outputs ------------------------------------------------------------------
    def check_feasible(self) -> None:
        if not np.isfinite(self.table.log_scale[self.max_len, self.dfa.start]):
            raise GenerationError(f"no output of the format fits within {self.max_len} tokens", reason="max_tokens")

    def sample(self, lm, rng: np.random.Generator, prefix_lm: Sequence[int] = (), *,
               matcher=None) -> SequenceSample:
        """One output (EOS excluded), the LM asked at each prefix (``lm.logprobs``).  ``matcher`` (a
        ``CanonicalMatcher`` at its start, used on a copy): each step is restricted to its mask, the
        canonical filter's (the backward table does not see the filter: a step the mask leaves empty
        is a ``DeadEnd``, and the sample is drawn again by the caller)."""
        if matcher is not None:
            matcher = matcher.copy()
        self.check_feasible()
        dfa, hmm = self.dfa, self.hmm
        s, a = dfa.start, hmm.forward_start()
        out: list[int] = []
        for step in range(self.max_len):
            ids, lp = self.step_logprobs(a, s, self.max_len - step, lm.logprobs(list(prefix_lm) + out))
            p = np.exp(lp)
            if matcher is not None:
                p = np.where(np.isin(ids, allowed_ids(matcher)), p, 0.0)
                if not p.sum() > 0:
                    raise DeadEnd(f"no token the constraint's mask allows may follow after {len(out)} tokens")
            t = int(ids[rng.choice(len(ids), p=p / p.sum())])
            s = dfa.step(s, t)
            if dfa.absorbing[s]:
                return SequenceSample(out, 0.0, steps=step + 1)  # no matcher checks: the table decides
            out.append(t)
            if matcher is not None:
                matcher.accept_token(t)
            a = hmm.forward_step(a, t)
        if self.exact_length and dfa.final[s]:
            return SequenceSample(out, 0.0, steps=self.max_len)
        raise DeadEnd(f"the output did not end within {self.max_len} tokens")  # pragma: no cover - beta forbids it

    def sequence_log_prob(self, lm, seq: Sequence[int]) -> float:
        """log of the probability that :meth:`sample` returns ``seq`` (EOS excluded): the product
        of its step probabilities (the verification experiment)."""
        dfa, hmm = self.dfa, self.hmm
        s, a = dfa.start, hmm.forward_start()
        total, out = 0.0, []
        eos = list(dfa.eos_ids[:1]) if not self.exact_length else []
        for step, t in enumerate(list(seq) + eos):
            ids, lp = self.step_logprobs(a, s, self.max_len - step, lm.logprobs(out))
            i = int(np.searchsorted(ids, t))
            if i >= len(ids) or ids[i] != t:
                return -math.inf
            total += float(lp[i])
            s = dfa.step(s, int(t))
            out.append(int(t))
            if not dfa.absorbing[s]:
                a = hmm.forward_step(a, int(t))
        return total


def resolve_hmm(hmm, vocab_size: int) -> HMM:
    """An ``HMM`` object, or the path of a saved one; its vocabulary must be the model's."""
    if hmm is None:
        raise InvalidArgument("the 'decog' sampler needs hmm= (an HMM, or the path of one saved by `structgen hmm distill`)")
    if isinstance(hmm, (str, Path)):
        hmm = HMM.load(hmm)
    if not isinstance(hmm, HMM):
        raise TypeError(f"hmm= must be an HMM or a path, got {type(hmm).__name__}")
    if hmm.vocab_size != vocab_size:
        raise HMMError(f"the HMM's vocabulary has {hmm.vocab_size} tokens, the model's {vocab_size}: "
                       "distill the HMM from this model")
    return hmm
