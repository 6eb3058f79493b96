"""Many prompts as one batch: one decoding per row, one forward pass for all rows.

Each row runs the ordinary :class:`~structgen.runtime.loop.Decoding` (its own matcher, sampler, budget
guard and drafter) in a thread of its own; only its KV cache differs: a :class:`RowCache` that, instead
of running the model, hands its tokens to a :class:`BatchForward` and waits.  When every live row has
asked, one forward pass runs over all of them and each row gets its rows of logits back.  So
speculation, backtracking and streaming work per row exactly as for one prompt.

**One timeline, holes allowed.**  Rows ask for different numbers of tokens (a prompt of 40 tokens
beside one of 90; 1 token beside 1 + 3 drafts), and roll back different numbers (rejected drafts).
The batch's KV cache has one shared column axis: each forward appends as many columns as the widest
request, a row's shorter request leaves padding columns, and a row's rollback turns its columns into
holes.  A 4-D attention mask lets each query see exactly its own row's live columns before it, and
position ids are per row, so every row computes what it would alone (up to fp32 summation order:
the batch's matrices have other shapes).  Finished rows are dropped from the cache.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import torch

from .kv_cache import causal_lm_forward, new_cache

__all__ = ["BatchForward", "RowCache", "run_batch"]


class BatchForward:
    """The shared forward pass of ``n`` rows (see the module docstring)."""

    def __init__(self, hf_model: Any, n: int, pad_id: int = 0) -> None:
        self.model = hf_model
        self.pad_id = pad_id
        self.cond = threading.Condition()
        self.live = set(range(n))
        self.requests: dict[int, list[int]] = {}
        self.results: dict[int, torch.Tensor] = {}
        self.generation = 0
        self.error: BaseException | None = None
        self.cache: Any = None
        self.rows: list[int] = []  # row id of each batch index of the cache
        self.valid = torch.zeros((0, 0), dtype=torch.bool)  # [batch index, column] live columns
        self.columns: dict[int, list[int]] = {r: [] for r in range(n)}  # a row's sequence -> its columns
        self.forward_passes = 0
        self.widths: list[int] = []  # columns per forward pass (a row's request padded to the widest)

    # -- what rows call -------------------------------------------------------------------------
    def forward(self, row: int, tokens: Sequence[int]) -> torch.Tensor:
        """Rows of logits for ``tokens`` after row ``row``'s sequence, once every live row has asked."""
        with self.cond:
            self.requests[row] = [int(t) for t in tokens]
            gen = self.generation
            self._maybe_run()
            while self.generation == gen and self.error is None:
                self.cond.wait()
            if self.error is not None:
                raise RuntimeError("the batch's forward pass failed") from self.error
            return self.results.pop(row)

    def crop(self, row: int, n: int) -> None:
        """Keep the first ``n`` tokens of row ``row``'s sequence: its later columns become holes."""
        with self.cond:
            cols = self.columns[row]
            if n < len(cols) and row in self.rows:
                b = self.rows.index(row)
                self.valid[b, cols[n:]] = False
            del cols[n:]

    def length(self, row: int) -> int:
        return len(self.columns[row])

    def leave(self, row: int) -> None:
        """Row ``row`` is done: the others no longer wait for it."""
        with self.cond:
            self.live.discard(row)
            self.requests.pop(row, None)
            self._maybe_run()

    # -- the batched pass -----------------------------------------------------------------------
    def _maybe_run(self) -> None:
        if not self.requests or len(self.requests) < len(self.live):
            return
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 - every waiting row must hear of it
            self.error = e
        self.requests = {}
        self.generation += 1
        self.cond.notify_all()

    @torch.no_grad()
    def _run(self) -> None:
        reqs = self.requests
        order = sorted(reqs)
        self._select(order)
        width = max(len(t) for t in reqs.values())
        past = self.valid.shape[1]
        ids = torch.full((len(order), width), self.pad_id, dtype=torch.long)
        pos = torch.zeros((len(order), width), dtype=torch.long)
        new_valid = torch.zeros((len(order), width), dtype=torch.bool)
        for b, row in enumerate(order):
            toks = reqs[row]
            start = len(self.columns[row])
            ids[b, :len(toks)] = torch.tensor(toks, dtype=torch.long)
            pos[b] = start + torch.arange(width)
            new_valid[b, :len(toks)] = True
            self.columns[row].extend(range(past, past + len(toks)))
        valid = torch.cat([self.valid, new_valid], dim=1)
        causal = torch.arange(past + width)[None, :] <= (past + torch.arange(width))[:, None]  # [width, cols]
        allowed = valid[:, None, :] & causal[None, :, :]
        allowed |= torch.eye(past + width, dtype=torch.bool)[past:][None]  # a padding query sees itself
        dtype = next(self.model.parameters()).dtype
        mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)[:, None]
        if self.cache is None:
            self.cache = new_cache(self.model)
        logits, self.cache = causal_lm_forward(self.model, ids, self.cache, attention_mask=mask, position_ids=pos)
        self.valid = valid
        self.forward_passes += 1
        self.widths.append(width)
        for b, row in enumerate(order):
            self.results[row] = logits[b, :len(reqs[row])].float()

    def _select(self, order: list[int]) -> None:
        """Drop finished rows from the cache (the ones not asking are the finished ones)."""
        if self.cache is None:
            self.rows = list(order)
            self.valid = torch.zeros((len(order), 0), dtype=torch.bool)
            return
        if order == self.rows:
            return
        keep = [self.rows.index(r) for r in order]
        self.cache.batch_select_indices(torch.tensor(keep, dtype=torch.long))
        self.valid = self.valid[keep]
        self.rows = list(order)


class RowCache:
    """One row's view of a :class:`BatchForward`, with :class:`~structgen.runtime.kv_cache.KVCacheModel`'s
    interface (what :class:`~structgen.runtime.loop.Decoding` uses)."""

    def __init__(self, batch: BatchForward, row: int) -> None:
        self.batch, self.row = batch, row
        self.forward_passes = 0

    def __len__(self) -> int:
        return self.batch.length(self.row)

    def forward(self, tokens: Sequence[int], *, logits_to_keep: int = 0) -> torch.Tensor:
        if len(tokens) == 0:
            raise ValueError("forward() needs at least one token")
        out = self.batch.forward(self.row, tokens)
        self.forward_passes += 1
        return out[-logits_to_keep:] if logits_to_keep else out

    def crop(self, n: int) -> None:
        if n < 0 or n > len(self):
            raise ValueError(f"cannot crop a cache of {len(self)} tokens to {n}")
        self.batch.crop(self.row, n)


def run_batch(hf_model: Any, make_decodings: Sequence[Callable[[RowCache], Any]], *, pad_id: int = 0) -> list[Any]:
    """Run one decoding per row in lockstep forward passes; each entry of the result is the row's
    ``GenerationResult`` or the exception it raised (rows fail independently)."""
    n = len(make_decodings)
    batch = BatchForward(hf_model, n, pad_id=pad_id)
    results: list[Any] = [None] * n

    def work(row: int) -> None:
        try:
            results[row] = make_decodings[row](RowCache(batch, row)).run()
        except BaseException as e:  # noqa: BLE001 - reported per row
            results[row] = e
        finally:
            batch.leave(row)

    threads = [threading.Thread(target=work, args=(r,), name=f"structgen-row-{r}", daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run_batch.last_stats = {"forward_passes": batch.forward_passes, "widths": list(batch.widths)}  # type: ignore[attr-defined]
    return results
