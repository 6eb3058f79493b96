"""Kernels that apply a packed token bitmask to logits in place (``algorithms.md`` section 6).

Every kernel takes ``(logits [B, V'], bitmask int32 [B', W], width, indices)`` and sets
``logits[r, t] = -inf`` for each masked row r (all rows, or ``indices``) and each column t
whose bit is clear -- and for every column t >= ``width`` (the mask's real extent: beyond it a
padded vocabulary's columns are never real tokens, so they are closed, never left open).

* ``triton``: a Triton kernel for CUDA tensors, one program per (row, tile of 64 words = 2,048
  logits): it loads the words and the tile of logits, expands the bits, and writes the whole tile
  back with -inf where a bit is clear.  Measured on an H100 (``structgen bench gpu-masks``), this
  read-select-write runs at XGrammar's CUDA kernel's speed on large batches; an earlier persistent
  kernel (grid = SMs) that stored -inf under a per-bit mask and never read logits was 1.1x (fp32)
  to 3.4x (bf16) slower.  ``TRITON_INTERPRET=1`` runs it on CPU tensors (how CI checks its logic).
* ``compile``: the same computation in torch, through ``torch.compile`` (other accelerators).
* ``torch``: plain torch ops, one unpack and one ``masked_fill_`` per call (the CPU path).
"""
from __future__ import annotations

import functools

import torch

from .bitmask import bitmask_to_bool

__all__ = ["apply_torch", "apply_compiled", "apply_triton", "triton_available", "WORDS_PER_ITEM"]

_BITS = 32
#: words per Triton program (2,048 logits): 32 to 128 measured within noise of each other on an H100
WORDS_PER_ITEM = 64


def _banned(bitmask: torch.Tensor, width: int, n_cols: int) -> torch.Tensor:
    """Bool [B, n_cols]: True where column t is banned (bit clear, or t >= width; width <= 32*W)."""
    allowed = bitmask_to_bool(bitmask, min(width, n_cols))
    if allowed.shape[1] < n_cols:
        pad = torch.zeros(bitmask.shape[0], n_cols - allowed.shape[1], dtype=torch.bool, device=bitmask.device)
        allowed = torch.cat([allowed, pad], dim=1)
    return ~allowed


def apply_torch(logits: torch.Tensor, bitmask: torch.Tensor, width: int, indices: torch.Tensor | None) -> None:
    """The reference and CPU kernel."""
    if indices is None:
        logits.masked_fill_(_banned(bitmask, width, logits.shape[1]), float("-inf"))
        return
    rows = logits.index_select(0, indices)
    rows.masked_fill_(_banned(bitmask.index_select(0, indices), width, logits.shape[1]), float("-inf"))
    logits.index_copy_(0, indices, rows)


@functools.lru_cache(maxsize=None)
def _compiled():
    def fill(logits, bitmask, width: int):
        return logits.masked_fill(_banned(bitmask, width, logits.shape[1]), float("-inf"))

    return torch.compile(fill, dynamic=True)


def apply_compiled(logits: torch.Tensor, bitmask: torch.Tensor, width: int, indices: torch.Tensor | None) -> None:
    """``torch.compile`` of the torch kernel (devices without a Triton kernel)."""
    fill = _compiled()
    if indices is None:
        logits.copy_(fill(logits, bitmask, width))
        return
    rows = fill(logits.index_select(0, indices), bitmask.index_select(0, indices), width)
    logits.index_copy_(0, indices, rows)


def triton_available() -> bool:
    """Whether triton is installed, found without importing it: importing triton (and its CUDA
    bindings) in a process that never runs a Triton kernel ends it with nanobind's leak report, so
    it is imported only when :func:`apply_triton` builds the kernel."""
    import importlib.util

    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


@functools.lru_cache(maxsize=None)
def _triton_kernel():
    """Built on first use, so ``TRITON_INTERPRET`` is read when the kernel is made."""
    import triton
    import triton.language as tl

    @triton.jit
    def apply_bitmask_kernel(logits_ptr, bitmask_ptr, indices_ptr, logits_stride, bitmask_stride, n_cols, width,
                             n_words, HAS_INDICES: tl.constexpr, WORDS: tl.constexpr):
        block = tl.program_id(0)
        if HAS_INDICES:
            row = tl.load(indices_ptr + tl.program_id(1)).to(tl.int64)
        else:
            row = tl.program_id(1).to(tl.int64)
        words_idx = block * WORDS + tl.arange(0, WORDS)
        words = tl.load(bitmask_ptr + row * bitmask_stride + words_idx, mask=words_idx < n_words, other=0)
        bit = tl.arange(0, 32)
        cols = words_idx[:, None] * 32 + bit[None, :]  # [WORDS, 32], least significant bit first
        banned = (((words[:, None] >> bit[None, :]) & 1) == 0) | (cols >= width)
        ptrs = logits_ptr + row * logits_stride + cols
        inside = cols < n_cols
        # read, select, write the whole tile: full-width coalesced stores (a store masked bit by bit
        # ran 3x slower in bf16 on an H100)
        x = tl.load(ptrs, mask=inside)
        tl.store(ptrs, tl.where(banned, float("-inf"), x.to(tl.float32)).to(logits_ptr.dtype.element_ty),
                 mask=inside)

    return apply_bitmask_kernel


def apply_triton(logits: torch.Tensor, bitmask: torch.Tensor, width: int, indices: torch.Tensor | None) -> None:
    """The Triton kernel (CUDA tensors; CPU tensors under ``TRITON_INTERPRET=1``)."""
    if logits.stride(1) != 1 or bitmask.stride(1) != 1:
        raise ValueError("the Triton kernel needs rows that are contiguous in memory")
    n_cols = logits.shape[1]
    n_rows = logits.shape[0] if indices is None else indices.numel()
    # one program per (tile of 2,048 columns, row); tiles cover the columns up to n_cols: beyond the
    # mask's words every column is banned
    n_tiles = (n_cols + WORDS_PER_ITEM * _BITS - 1) // (WORDS_PER_ITEM * _BITS)
    if n_rows == 0 or n_tiles == 0:
        return
    _triton_kernel()[(n_tiles, n_rows)](logits, bitmask, indices if indices is not None else bitmask,
                                         logits.stride(0), bitmask.stride(0), n_cols, width, bitmask.shape[1],
                                         HAS_INDICES=indices is not None, WORDS=WORDS_PER_ITEM, num_warps=8)
