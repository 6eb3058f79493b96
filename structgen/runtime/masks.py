"""Token bitmasks: the one data structure between the grammar engine and logits.

Layout (XGrammar's, so its users and kernels can share our masks): an
``int32`` tensor of shape ``[batch, ceil(vocab_size / 32)]``; token ``t`` is
allowed iff bit ``t % 32`` of word ``t // 32`` is set.  A packed mask is 32x
smaller than a bool mask, which matters when a 129k vocabulary is filled every
step and copied to a GPU.

The engine (pure Python/numpy) only *fills* masks; this module is the only
place that turns them into masked logits.  ``apply_token_bitmask_inplace``
dispatches to a kernel of :mod:`structgen.runtime.mask_kernels` (Triton on
CUDA, ``torch.compile`` on other accelerators, torch ops on the CPU).  The layout itself (shape,
packing, unpacking) is :mod:`structgen.runtime.bitmask`, which both this module and the kernels
import; its names are re-exported here.
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

import torch

from .bitmask import BITS as _BITS, bitmask_to_bool, bool_to_bitmask, get_bitmask_shape

__all__ = [
    "allocate_token_bitmask",
    "reset_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_to_bool",
    "bool_to_bitmask",
    "get_bitmask_shape",
]


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> torch.Tensor:
    """A CPU ``int32`` bitmask ``[batch_size, ceil(vocab_size/32)]`` with every bit set.

    All bits set (each word ``-1``) means "everything allowed", so a row that a
    matcher never fills leaves its logits untouched.
    """
    if batch_size < 1 or vocab_size < 1:
        raise ValueError(f"batch_size and vocab_size must be positive, got {batch_size}, {vocab_size}")
    return torch.full(get_bitmask_shape(batch_size, vocab_size), -1, dtype=torch.int32)


def reset_token_bitmask(bitmask: torch.Tensor) -> None:
    """Set every bit again (everything allowed), in place."""
    bitmask.fill_(-1)


BACKENDS = ("auto", "triton", "compile", "torch")

# Backend registry: device type -> kernel with mask_kernels.apply_torch's signature.
_KERNELS: dict[str, Callable[[torch.Tensor, torch.Tensor, int, torch.Tensor | None], None]] = {}


def register_bitmask_kernel(
    device_type: str,
    kernel: Callable[[torch.Tensor, torch.Tensor, int, torch.Tensor | None], None],
) -> None:
    """Use ``kernel`` for logits on ``device_type`` under ``backend="auto"``."""
    _KERNELS[device_type] = kernel


def apply_token_bitmask_inplace(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    indices: Sequence[int] | torch.Tensor | None = None,
    *,
    vocab_size: int | None = None,
    backend: str = "auto",
) -> None:
    """Set the logits of disallowed tokens to ``-inf``, in place.

    ``logits``: ``[V']`` or ``[B, V']`` float tensor (fp32/fp16/bf16, any device).
    ``bitmask``: int32 ``[W]`` or ``[B, W]`` (a 1-D logits row takes a 1-D
    mask or a one-row 2-D mask).  Column t is allowed when t < ``min(32*W,
    vocab_size)`` and its bit is set; every other column -- the padding of a
    model whose logits are wider than its vocabulary or than the mask -- is set
    to ``-inf`` too, never left open.  ``indices`` picks which batch rows to
    mask (row ``r`` of logits with row ``r`` of the mask); ``None`` means all.
    ``backend``: ``"triton"`` (CUDA tensors; CPU tensors under
    ``TRITON_INTERPRET=1``), ``"compile"`` (``torch.compile``), ``"torch"``,
    or ``"auto"``: a kernel registered for the device, else Triton on CUDA when
    installed, ``torch.compile`` on other accelerators, torch ops on the CPU.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if bitmask.dtype != torch.int32:
        raise TypeError(f"bitmask must be int32, got {bitmask.dtype}")
    if not logits.is_floating_point():
        raise TypeError(f"logits must be a float tensor, got {logits.dtype}")
    if logits.dim() == 1:
        if bitmask.dim() == 2:
            if bitmask.shape[0] != 1:
                raise ValueError(f"1-D logits need a one-row bitmask, got shape {tuple(bitmask.shape)}")
        elif bitmask.dim() != 1:
            raise ValueError(f"bitmask must be 1-D or 2-D, got shape {tuple(bitmask.shape)}")
        if indices is not None:
            raise ValueError("indices apply to 2-D (batched) logits only")
        logits2, bitmask2 = logits.unsqueeze(0), bitmask.reshape(1, -1)
    elif logits.dim() == 2:
        if bitmask.dim() != 2:
            raise ValueError(f"2-D logits need a 2-D bitmask, got shape {tuple(bitmask.shape)}")
        logits2, bitmask2 = logits, bitmask
        if indices is None and bitmask.shape[0] != logits.shape[0]:
            raise ValueError(
                f"batch sizes differ: logits {logits.shape[0]} rows, bitmask {bitmask.shape[0]} rows"
            )
    else:
        raise ValueError(f"logits must be 1-D or 2-D, got shape {tuple(logits.shape)}")

    width = bitmask2.shape[-1] * _BITS  # the mask's extent: columns beyond it are closed
    if vocab_size is not None:
        width = min(width, vocab_size)
    if bitmask2.device != logits2.device:
        bitmask2 = bitmask2.to(logits2.device, non_blocking=True)

    idx: torch.Tensor | None = None
    if indices is not None:
        idx = torch.as_tensor(indices, dtype=torch.int64, device=logits2.device).reshape(-1)
        n = min(logits2.shape[0], bitmask2.shape[0])
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= n):
            raise IndexError(f"indices out of range for {n} rows")
        if idx.numel() == 0:
            return

    _kernel(backend, logits2.device)(logits2, bitmask2, width, idx)


def _kernel(backend: str, device: torch.device) -> Callable:
    from . import mask_kernels as mk

    if backend == "auto":
        custom = _KERNELS.get(device.type)
        if custom is not None:
            return custom
        if device.type == "cpu":
            return mk.apply_torch
        backend = "triton" if device.type == "cuda" and mk.triton_available() else "compile"
    if backend == "triton":
        if not mk.triton_available():
            raise RuntimeError("backend='triton' needs triton: pip install 'structgen[gpu]'")
        if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError(f"backend='triton' runs on CUDA tensors (or with TRITON_INTERPRET=1), not {device.type}")
        return mk.apply_triton
    return mk.apply_compiled if backend == "compile" else mk.apply_torch
