"""Distil an HMM from a language model: sample its outputs for the task's prompts, fit by EM.

Deco-G's HMM is "instruction-aware": it learns what the model writes *for this task*, so the
prompts are the task's own instructions without any format instructions (the format is the HMM's
job at decoding time).  Each prompt's continuations are sampled together as rows of one batched
KV cache (one forward pass per token for all rows), at the model's own temperature and without
truncation, so the HMM sees the model's distribution; special tokens other than EOS are banned,
as they are at decoding time.  An output that ends keeps its EOS, so the HMM learns where outputs
end; one cut off at ``max_tokens`` is kept without it.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np
import torch

from ...errors import InvalidArgument
from ..kv_cache import causal_lm_forward, new_cache
from .hmm import HMM, fit_hmm

__all__ = ["sample_continuations", "distill_hmm", "read_prompts"]


def read_prompts(path) -> list[str]:
    """One prompt a line (blank lines skipped)."""
    from pathlib import Path

    lines = [ln.strip() for ln in Path(path).read_text(encoding="utf-8").splitlines()]
    prompts = [ln for ln in lines if ln]
    if not prompts:
        raise InvalidArgument(f"{path} holds no prompts (one prompt a line)")
    return prompts


def sample_continuations(model: Any, prompts: Sequence[str], *, samples_per_prompt: int, max_tokens: int = 48,
                         temperature: float = 1.0, batch: int = 32, seed: int = 0, chat: bool = True,
                         progress: Callable[[int], None] | None = None) -> list[list[int]]:
    """``samples_per_prompt`` sampled outputs (token ids, EOS kept where the output ended) per prompt."""
    if temperature <= 0:
        raise InvalidArgument(f"temperature must be > 0, got {temperature}")
    info = model.info
    vocab = info.vocab_size
    eos = torch.tensor(sorted(info.eos_ids), dtype=torch.long)
    banned = torch.tensor(sorted(set(info.special_ids) - set(info.eos_ids)), dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    out: list[list[int]] = []
    hf = model.hf_model
    for prompt in prompts:
        text = model.chat_prompt(prompt) if chat else prompt
        ids = torch.tensor([model.encode(text)], dtype=torch.long)
        left = samples_per_prompt
        while left > 0:
            n = min(batch, left)
            with torch.no_grad():
                logits, cache = causal_lm_forward(hf, ids, new_cache(hf), logits_to_keep=1)
                cache.batch_repeat_interleave(n)
                logits = logits[:, -1, :vocab].expand(n, -1)
                rows: list[list[int]] = [[] for _ in range(n)]
                alive = list(range(n))  # cache row j continues sample alive[j]
                for _ in range(max_tokens):
                    x = logits.float() / temperature
                    if len(banned):
                        x = x.index_fill(1, banned, float("-inf"))
                    tok = torch.multinomial(torch.softmax(x, dim=-1), 1, generator=gen).squeeze(1)
                    for j, i in enumerate(alive):
                        rows[i].append(int(tok[j]))
                    keep = ~torch.isin(tok, eos)
                    if not keep.any():
                        break
                    if not keep.all():  # finished samples leave the batch (and the KV cache)
                        idx = keep.nonzero().flatten()
                        cache.batch_select_indices(idx)
                        alive = [alive[j] for j in idx.tolist()]
                        tok = tok[idx]
                    logits, cache = causal_lm_forward(hf, tok[:, None], cache)
                    logits = logits[:, -1, :vocab]
            out.extend(rows)
            left -= n
            if progress is not None:
                progress(n)
    return out


def distill_hmm(model: Any, prompts: Sequence[str], *, hidden: int = 64, samples_per_prompt: int = 64,
                max_tokens: int = 48, temperature: float = 1.0, iterations: int = 30, batch: int = 32,
                seed: int = 0, chat: bool = True, echo: Callable[[str], None] | None = None,
                show_progress: bool = True) -> HMM:
    """Sample the model's outputs for ``prompts`` and fit an ``hidden``-state HMM to them
    (``HMM.meta`` records the sampling and EM times, sizes and the log-likelihood curve)."""
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    total = samples_per_prompt * len(prompts)
    with tqdm(total=total, desc="sampling", unit="sample", disable=not show_progress) as bar:
        seqs = sample_continuations(model, prompts, samples_per_prompt=samples_per_prompt, max_tokens=max_tokens,
                                    temperature=temperature, batch=batch, seed=seed, chat=chat, progress=bar.update)
    sample_s = time.perf_counter() - t0
    # a tenth of the samples is held out: its log-likelihood per token compares HMM sizes (a large H
    # on few samples fits the training samples better and the model's other outputs worse)
    order = np.random.default_rng(seed).permutation(len(seqs))
    n_held = len(seqs) // 10 if len(seqs) >= 20 else 0
    held = [seqs[i] for i in order[:n_held]]
    train = [seqs[i] for i in order[n_held:]]
    with tqdm(total=iterations, desc="EM", unit="iter", disable=not show_progress) as bar:
        def step(it: int, ll: float) -> None:
            bar.set_postfix(loglik=f"{ll:.3f}")
            bar.update(1)
        hmm = fit_hmm(train, hidden=hidden, vocab_size=model.info.vocab_size, eos_ids=model.info.eos_ids,
                      iterations=iterations, seed=seed, tokenizer=model.info.name, progress=step)
    if held:
        hmm.meta["heldout_loglik_per_token"] = sum(hmm.log_prob(s) for s in held) / sum(map(len, held))
        hmm.meta["heldout_sequences"] = len(held)
    hmm.meta.update({"prompts": len(prompts), "samples_per_prompt": samples_per_prompt, "max_tokens": max_tokens,
                     "temperature": temperature, "sample_seconds": sample_s, "em_seconds": hmm.meta["seconds"],
                     "ended_with_eos": sum(1 for s in seqs if s and s[-1] in model.info.eos_ids)})
    if echo is not None:
        held_ll = hmm.meta.get("heldout_loglik_per_token")
        echo(f"distilled a {hidden}-state HMM from {len(train)} samples ({hmm.meta['tokens']} tokens): "
             f"sampling {sample_s:.1f} s, EM {hmm.meta['seconds']:.1f} s over {hmm.meta['iterations']} iterations; "
             f"log-likelihood per token {hmm.meta['loglik_per_token'][-1]:.3f} on them"
             + (f", {held_ll:.3f} on {len(held)} held-out samples" if held else ""))
    return hmm


def twist_sequences(lm, matcher, rng: np.random.Generator, *, samples: int, max_tokens: int,
                    sequences: int = 512, continuation: int = 4, batch: int = 64) -> list[list[int]]:
    """The model's own next tokens from inside the constraint: ``samples`` walks through the language
    (masked samples and uniform walks over the allowed tokens, alternating), every prefix of every
    walk (each distinct one repeated to about ``sequences`` in all), each followed by up to
    ``continuation`` tokens of the model unconstrained, EOS kept where it ended.  What a twist must
    predict is how likely the *model* is to go on inside the language from a prefix of it: these are
    such draws at every branch point (an HMM fit to constrained samples alone would put the
    language's probability at 1 everywhere; one fit to whole free continuations spends its states
    on text far from the language)."""
    from .sequence import DeadEnd, sample_masked

    walks: list[list[int]] = []
    tries = 0
    while len(walks) < samples and tries < 4 * samples:
        tries += 1
        try:  # every other walk uniform over the allowed tokens: the language's prefixes the model itself
            # rarely enters (a first token of probability 1e-3 whose completion is likely) are the ones
            # the twist must know about
            y = (sample_masked(lm, matcher, rng, max_tokens=max_tokens) if tries % 2 else
                 sample_masked(_UniformLM(lm), matcher, rng, max_tokens=max_tokens)).token_ids
        except DeadEnd:
            continue
        walks.append(list(y))
    distinct = sorted({tuple(w[:k]) for w in walks for k in range(len(w) + 1)})
    reps = max(1, -(-sequences // max(1, len(distinct))))
    prefixes = [list(x) for x in distinct for _ in range(reps)]
    return _continue(lm, prefixes, rng, tokens=continuation, batch=batch)


def _continue(lm, prefixes: list[list[int]], rng: np.random.Generator, *, tokens: int,
              batch: int) -> list[list[int]]:
    """Each prefix followed by up to ``tokens`` tokens the model draws unconstrained (EOS kept where it
    ended), ``batch`` rows of one KV cache at a time, the prefixes fed token by token."""
    eos = set(lm.eos_ids)
    out: list[list[int]] = []
    for b0 in range(0, len(prefixes), batch):
        rows = prefixes[b0:b0 + batch]
        seqs = [list(r) for r in rows]
        parts = lm.particles(len(rows))
        lp = parts.start()
        ended = [False] * len(rows)
        for step in range(max(map(len, rows)) + tokens):
            feed = []
            for i, r in enumerate(rows):
                if step < len(r):
                    feed.append(r[step])
                    continue
                if ended[i] or len(seqs[i]) - len(r) >= tokens:
                    ended[i] = True
                    feed.append(seqs[i][-1] if seqs[i] else lm.eos_ids[0])
                    continue
                p = np.exp(lp[i] - lp[i].max())
                t = int(rng.choice(len(p), p=p / p.sum()))
                seqs[i].append(t)
                ended[i] = t in eos
                feed.append(t)
            if all(ended):
                break
            lp = parts.advance(feed)
        out.extend(s for s in seqs if s)
    return out


class _UniformLM:
    """Every token equally likely (the exploring walk of :func:`twist_sequences`)."""

    def __init__(self, lm) -> None:
        self.eos_ids, self.vocab_size = lm.eos_ids, lm.vocab_size
        self._row = np.full(lm.vocab_size, -np.log(lm.vocab_size))

    def logprobs(self, prefix) -> np.ndarray:
        return self._row


def distill_twist_hmm(lm, matcher, vocab_size: int, *, max_tokens: int, samples: int = 128,
                      hidden_choices: Sequence[int] = (2, 4, 8, 16), iterations: int = 20, seed: int = 0,
                      tokenizer: str = "") -> HMM:
    """An HMM for twisted SMC's twist over one constraint and prompt: fit to :func:`twist_sequences`
    at each size in ``hidden_choices`` and kept at the size whose held-out log-likelihood (a fifth
    of the sequences) is best (``meta["heldout_by_hidden"]`` records them)."""
    rng = np.random.default_rng(seed)
    seqs = twist_sequences(lm, matcher, rng, samples=samples, max_tokens=max_tokens)
    if len(seqs) < 10:
        from ...errors import GenerationError
        raise GenerationError(f"only {len(seqs)} sequences to distill a twist from: the constraint has too few "
                              f"outputs within max_tokens={max_tokens}", reason="no_token")
    order = rng.permutation(len(seqs))
    n_held = max(2, len(seqs) // 5)
    held = [seqs[i] for i in order[:n_held]]
    train = [seqs[i] for i in order[n_held:]]
    t0 = time.perf_counter()
    best, scores = None, {}
    for h in hidden_choices:
        hmm = fit_hmm(train, hidden=h, vocab_size=vocab_size, eos_ids=lm.eos_ids, iterations=iterations, seed=seed,
                      tokenizer=tokenizer)
        scores[h] = sum(hmm.log_prob(s) for s in held) / sum(map(len, held))
        if best is None or scores[h] > scores[best[0]]:
            best = (h, hmm)
    hmm = best[1]
    hmm.meta.update({"heldout_by_hidden": scores, "hidden": best[0], "sequences": len(seqs),
                     "fit_seconds": time.perf_counter() - t0})
    return hmm
