"""A hidden Markov model over a tokenizer's vocabulary: the look-ahead model of Deco-G.

The HMM stands in for the language model when the sampler asks "from here, how likely is the
rest of the output to satisfy the format?" (``decog.py``).  It is small enough that this question
has an exact answer for any regular format (a backward table over the format's token automaton),
and it is distilled from the LM's own outputs (``hmm_distill.py``), so its answer approximates the
LM's.  Fitting is EM with scaled forward-backward over padded batches (torch, float64 for the
small matrices); every emission gets a pseudocount, so no token is impossible under the HMM and a
format the LM can satisfy is never ruled out by the guide.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from ...errors import StructgenError

__all__ = ["HMM", "fit_hmm", "HMMError"]

_MAGIC = "structgen-hmm/1"


class HMMError(StructgenError):
    """An HMM file that cannot be read, or one that does not fit the model it is used with."""


@dataclass
class HMM:
    """Initial distribution ``gamma`` (H), transitions ``A`` (H x H, rows sum to 1) and emissions
    ``B`` (H x V, rows sum to 1, every entry > 0).  The emission row of a hidden state is the
    distribution of the token it emits; the chain starts at the first token of the output.
    ``eos_ids``: the vocabulary's end-of-sequence tokens, emitted once at the end of a trained
    output (no padding), so "the output ends here" is an ordinary emission."""

    gamma: np.ndarray
    A: np.ndarray
    B: np.ndarray
    eos_ids: tuple[int, ...] = ()
    tokenizer: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.gamma = np.asarray(self.gamma)
        self.A = np.asarray(self.A)
        self.B = np.asarray(self.B)
        h = self.gamma.shape[0]
        if self.A.shape != (h, h) or self.B.ndim != 2 or self.B.shape[0] != h:
            raise HMMError(f"inconsistent HMM shapes: gamma {self.gamma.shape}, A {self.A.shape}, B {self.B.shape}")
        if not (self.B > 0).all():
            raise HMMError("every emission probability must be > 0 (a zero would rule tokens out for good)")
        self.eos_ids = tuple(int(e) for e in self.eos_ids)

    @property
    def hidden(self) -> int:
        return int(self.gamma.shape[0])

    @property
    def vocab_size(self) -> int:
        return int(self.B.shape[1])

    @property
    def emission_bytes(self) -> int:
        return int(self.B.nbytes)

    # -- probabilities -------------------------------------------------------------
    def forward_start(self) -> np.ndarray:
        """P(z_1 = z): the hidden state that emits the first token."""
        return self.gamma.astype(np.float64)

    def forward_step(self, a: np.ndarray, token: int) -> np.ndarray:
        """From ``a`` (proportional to P(x_<t, z_t)) to P(x_<=t, z_t+1), renormalised to sum 1."""
        a = (a * self.B[:, token]) @ self.A
        s = a.sum()
        if not s > 0:
            raise HMMError(f"token {token} has probability 0 under the HMM")
        return a / s

    def log_prob(self, tokens: Sequence[int]) -> float:
        """log P_HMM(x_1..x_n) (a prefix: what follows is summed out)."""
        a = self.forward_start()
        total = 0.0
        for t in tokens:
            a = a * self.B[:, int(t)]
            s = float(a.sum())
            total += np.log(s)
            a = (a / s) @ self.A
        return total

    def next_token_logprobs(self, tokens: Sequence[int]) -> np.ndarray:
        """log P_HMM(x_n+1 = t | x_1..x_n) over the vocabulary."""
        a = self.forward_start()
        for t in tokens:
            a = self.forward_step(a, int(t))
        p = a @ self.B
        return np.log(p / p.sum())

    # -- files ------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """One ``.npz`` file (the matrices and a JSON header)."""
        p = Path(path)
        if p.suffix != ".npz":
            p = p.with_suffix(p.suffix + ".npz") if p.suffix else p.with_suffix(".npz")
        p.parent.mkdir(parents=True, exist_ok=True)
        header = {"magic": _MAGIC, "eos_ids": list(self.eos_ids), "tokenizer": self.tokenizer, "meta": self.meta}
        tmp = p.with_name(p.name + ".tmp.npz")
        np.savez(tmp, gamma=self.gamma, A=self.A, B=self.B, header=np.array(json.dumps(header)))
        tmp.replace(p)
        return p

    @classmethod
    def load(cls, path: str | Path) -> "HMM":
        p = Path(path)
        if not p.is_file():
            raise HMMError(f"no HMM file at {p}")
        try:
            with np.load(p, allow_pickle=False) as z:
                header = json.loads(str(z["header"]))
                if header.get("magic") != _MAGIC:
                    raise HMMError(f"{p} is not a structgen HMM file")
                return cls(z["gamma"], z["A"], z["B"], tuple(header["eos_ids"]), header.get("tokenizer", ""),
                           header.get("meta", {}))
        except HMMError:
            raise
        except Exception as e:  # a damaged or foreign file
            raise HMMError(f"cannot read the HMM file {p}: {type(e).__name__}: {e}") from None


def _padded(sequences: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    n, t = len(sequences), max(len(s) for s in sequences)
    x = torch.zeros((n, t), dtype=torch.long)
    mask = torch.zeros((n, t), dtype=torch.bool)
    for i, s in enumerate(sequences):
        x[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
        mask[i, : len(s)] = True
    return x, mask


def _e_step(gamma, A, B, x, mask):
    """Expected counts of one EM iteration over a padded batch: (initial [H], transitions
    [H, H], emissions [H, V] accumulated by token, log-likelihood).  Padded positions observe
    nothing (emission likelihood 1), so they neither change the likelihood nor add counts."""
    n, t = x.shape
    h = gamma.shape[0]
    e = B.T[x].clone()  # [n, t, H] emission likelihoods of the observed tokens
    e[~mask] = 1.0
    alpha = torch.empty((n, t, h), dtype=B.dtype)
    c = torch.empty((n, t), dtype=B.dtype)
    a = gamma.expand(n, h) * e[:, 0]
    for i in range(t):
        if i:
            a = (alpha[:, i - 1] @ A) * e[:, i]
        c[:, i] = a.sum(1)
        alpha[:, i] = a / c[:, i : i + 1]
    beta = torch.empty_like(alpha)
    beta[:, t - 1] = 1.0
    for i in range(t - 2, -1, -1):
        beta[:, i] = ((e[:, i + 1] * beta[:, i + 1]) @ A.T) / c[:, i + 1 : i + 2]
    post = alpha * beta  # P(z_i | x), rows sum to 1
    post = post * mask[..., None]
    emis = torch.zeros((h, B.shape[1]), dtype=B.dtype)
    emis.index_add_(1, x[mask], post[mask].T)
    valid_pair = (mask[:, 1:] & mask[:, :-1])[..., None]
    right = (e[:, 1:] * beta[:, 1:] / c[:, 1:, None]) * valid_pair
    trans = torch.einsum("nti,ntj->ij", alpha[:, :-1], right) * A
    loglik = torch.log(c).masked_fill(~mask, 0.0).sum()
    return post[:, 0].sum(0), trans, emis, float(loglik)


def fit_hmm(sequences: Sequence[Sequence[int]], *, hidden: int, vocab_size: int, eos_ids: Sequence[int] = (),
            iterations: int = 30, pseudocount: float = 1e-3, batch_size: int = 512, seed: int = 0,
            tokenizer: str = "", tol: float = 1e-5,
            progress: Callable[[int, float], None] | None = None) -> HMM:
    """Fit an H-state HMM to token sequences by EM (Baum-Welch, scaled forward-backward).

    Start: a random transition matrix and, per state, emissions drawn around the data's unigram
    distribution (a Dirichlet-like perturbation, so the states start apart).  ``pseudocount``:
    expected emission counts each state adds, spread evenly over the vocabulary, so every emission
    stays > 0.  Stops after ``iterations`` or when the mean
    per-token log-likelihood improves by less than ``tol``.  ``progress(iteration, mean_ll)``."""
    seqs = [list(map(int, s)) for s in sequences if len(s)]
    if not seqs:
        raise ValueError("no non-empty sequences to fit an HMM on")
    if hidden < 1:
        raise ValueError(f"hidden must be >= 1, got {hidden}")
    top = max(max(s) for s in seqs)
    if top >= vocab_size:
        raise ValueError(f"token id {top} is outside the vocabulary of {vocab_size}")
    t0 = time.perf_counter()
    g = torch.Generator().manual_seed(seed)
    dt = torch.float64
    n_tokens = sum(len(s) for s in seqs)
    uni = torch.bincount(torch.as_tensor([t for s in seqs for t in s]), minlength=vocab_size).to(dt) + pseudocount
    B = uni[None, :] * torch.empty((hidden, vocab_size), dtype=dt).exponential_(1.0, generator=g)  # ~Dirichlet(unigram)
    B /= B.sum(1, keepdim=True)
    A = torch.empty((hidden, hidden), dtype=dt).uniform_(0.5, 1.5, generator=g)
    A /= A.sum(1, keepdim=True)
    gamma = torch.full((hidden,), 1.0 / hidden, dtype=dt)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))  # similar lengths share a batch
    batches = [_padded([seqs[i] for i in order[j: j + batch_size]]) for j in range(0, len(seqs), batch_size)]
    history: list[float] = []
    for it in range(iterations):
        init = torch.zeros(hidden, dtype=dt)
        trans = torch.zeros((hidden, hidden), dtype=dt)
        emis = torch.zeros((hidden, vocab_size), dtype=dt)
        ll = 0.0
        for x, mask in batches:
            i0, tr, em, l = _e_step(gamma, A, B, x, mask)
            init += i0
            trans += tr
            emis += em
            ll += l
        history.append(ll / n_tokens)
        gamma = (init + 1e-6) / (init + 1e-6).sum()
        A = (trans + 1e-6) / (trans + 1e-6).sum(1, keepdim=True)
        B = (emis + pseudocount / vocab_size) / (emis + pseudocount / vocab_size).sum(1, keepdim=True)
        if progress is not None:
            progress(it + 1, history[-1])
        if it and abs(history[-1] - history[-2]) < tol:
            break
    meta = {"sequences": len(seqs), "tokens": n_tokens, "iterations": len(history), "loglik_per_token": history,
            "pseudocount": pseudocount, "seconds": time.perf_counter() - t0, "seed": seed}
    return HMM(gamma.numpy(), A.numpy(), B.to(torch.float32).numpy(), tuple(eos_ids), tokenizer, meta)
