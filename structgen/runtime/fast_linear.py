"""A faster CPU forward for decoding: linear layers over a few rows computed as ``W @ x.T``.

Decoding feeds 1-8 new tokens per forward pass, so every linear layer multiplies a handful of rows
by a large weight matrix.  On x86 CPUs with torch's default BLAS, ``F.linear`` on 1 row takes the
matrix-vector path and on 2-8 rows a general GEMM that packs the weight matrix on every call:
measured on this project's 2-core Xeon with SmolLM2-135M (``structgen bench decode``), one token's
linear layers read the 540 MB of fp32 weights at about 15 GB/s, and 2-8 rows cost 1.6-2x one row.
Written the other way round, ``W @ x.T`` (a tall-skinny GEMM: the weights are the streamed left
operand, never packed) runs at about 23 GB/s for 2-4 rows, and a single row padded to two columns
takes the same path.  So one token's forward gets about 1.4x faster and 4 tokens cost about one.

The result is the same product in fp32 with another summation order (differences of ~1e-6
relative); plain and speculative decoding both run through it, so they stay token-identical.
``install`` is idempotent and ``uninstall`` restores ``torch.nn.Linear.forward`` semantics.
"""
from __future__ import annotations

import types
from contextlib import contextmanager
from typing import Any, Iterator

import torch
import torch.nn.functional as F

__all__ = ["install", "uninstall", "is_installed", "using", "SKINNY_MAX_ROWS"]

#: Row counts up to which ``W @ x.T`` is used (above it ``F.linear`` is as fast or faster).
SKINNY_MAX_ROWS = 8
_MARK = "_structgen_skinny"
_OWN_PATHS = ("_structgen_q4", "_structgen_int8_output", "_structgen_padded")


def _skinny_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    rows = x.numel() // x.shape[-1] if x.dim() else 0
    w = self.weight
    if not (0 < rows <= SKINNY_MAX_ROWS) or torch.is_grad_enabled() or x.device.type != "cpu" \
            or x.dtype != torch.float32 or w.dtype != torch.float32:
        return F.linear(x, w, self.bias)
    x2 = x.reshape(rows, x.shape[-1])
    if rows == 1:  # the matrix-vector path is the slow one: take the 2-column GEMM's
        out = torch.mm(w, torch.cat((x2, x2)).t())[:, :1].t()
    else:  # rows in a fresh contiguous block, handed over transposed: the fast GEMM layout
        out = torch.mm(w, x2.contiguous().t()).t()
    if self.bias is not None:
        out = out + self.bias
    return out.reshape(*x.shape[:-1], w.shape[0])


def install(hf_model: Any) -> int:
    """Route ``hf_model``'s ``nn.Linear`` layers through the skinny path; returns how many."""
    n = 0
    for module in hf_model.modules():
        # a layer on the int4 kernel (``gguf_q4``), on the int8 one (``int8_output``) or padded for row
        # invariance keeps its path
        if isinstance(module, torch.nn.Linear) and not getattr(module, _MARK, False) \
                and not any(getattr(module, own, False) for own in _OWN_PATHS):
            module.forward = types.MethodType(_skinny_forward, module)
            setattr(module, _MARK, True)
            n += 1
    return n


def uninstall(hf_model: Any) -> None:
    """Give ``hf_model``'s linear layers back their class's forward."""
    for module in hf_model.modules():
        if getattr(module, _MARK, False):
            del module.forward
            setattr(module, _MARK, False)


def is_installed(hf_model: Any) -> bool:
    return any(getattr(m, _MARK, False) for m in hf_model.modules())


@contextmanager
def using(hf_model: Any, fast: bool) -> Iterator[None]:
    """Run the block with the skinny path on (``fast=True``) or off, then put back what was there
    (benchmarks compare both paths on one loaded model)."""
    was = is_installed(hf_model)
    (install if fast else uninstall)(hf_model)
    try:
        yield
    finally:
        (install if was else uninstall)(hf_model)
