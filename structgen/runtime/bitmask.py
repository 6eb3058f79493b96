"""The token bitmask's layout: shape, packing and unpacking (no kernels, no dispatch).

An ``int32`` tensor of shape ``[batch, ceil(vocab_size / 32)]``; token ``t`` is allowed iff bit
``t % 32`` of word ``t // 32`` is set (XGrammar's layout).  The bottom of the mask modules:
:mod:`structgen.runtime.masks` (allocate, apply, dispatch) and :mod:`structgen.runtime.mask_kernels`
(the kernels) both import it, and it imports neither.
"""
from __future__ import annotations

import torch

__all__ = ["BITS", "get_bitmask_shape", "bitmask_to_bool", "bool_to_bitmask"]

BITS = 32
_BITS = BITS


def get_bitmask_shape(batch_size: int, vocab_size: int) -> tuple[int, int]:
    """Shape ``(batch_size, ceil(vocab_size / 32))`` of a bitmask for ``vocab_size`` tokens."""
    return batch_size, (vocab_size + _BITS - 1) // _BITS


_SHIFTS: dict[torch.device, torch.Tensor] = {}


def _shifts(device: torch.device) -> torch.Tensor:
    s = _SHIFTS.get(device)
    if s is None:
        s = _SHIFTS[device] = torch.arange(_BITS, dtype=torch.int32, device=device)
    return s


def bitmask_to_bool(bitmask: torch.Tensor, vocab_size: int | None = None) -> torch.Tensor:
    """Unpack ``int32 [..., W]`` into ``bool [..., vocab_size]`` (``True`` = allowed).

    ``vocab_size`` defaults to ``32 * W``; it may not exceed it.
    """
    if bitmask.dtype != torch.int32:
        raise TypeError(f"bitmask must be int32, got {bitmask.dtype}")
    width = bitmask.shape[-1] * _BITS
    if vocab_size is None:
        vocab_size = width
    if vocab_size > width:
        raise ValueError(f"vocab_size {vocab_size} exceeds the bitmask's {width} bits")
    # Arithmetic right shift sign-extends negative words, but `& 1` keeps only
    # the bit we shifted down, so bit 31 reads correctly too.
    bits = (bitmask.unsqueeze(-1) >> _shifts(bitmask.device)) & 1
    return bits.reshape(*bitmask.shape[:-1], width)[..., :vocab_size].bool()


def bool_to_bitmask(allowed: torch.Tensor) -> torch.Tensor:
    """Pack ``bool [..., V]`` into ``int32 [..., ceil(V/32)]`` (the inverse of ``bitmask_to_bool``).

    Padding bits past ``V`` are left clear.  Meant for tests and for engines
    that compute a bool mask; the hot path fills words directly.
    """
    v = allowed.shape[-1]
    words = (v + _BITS - 1) // _BITS
    pad = words * _BITS - v
    a = allowed.to(torch.int64)
    if pad:
        a = torch.nn.functional.pad(a, (0, pad))
    a = a.reshape(*allowed.shape[:-1], words, _BITS)
    packed = (a << torch.arange(_BITS, dtype=torch.int64, device=allowed.device)).sum(-1)
    # Map [0, 2^32) onto int32's two's complement.
    packed = torch.where(packed >= 2**31, packed - 2**32, packed)
    return packed.to(torch.int32)
