"""GGUF's quantized block formats read into what torch's int4 CPU kernel multiplies (numpy only).

``_weight_int4pack_mm_for_cpu`` computes with ``w = (n - 8) * scale + zero`` per group of 32 columns,
``n`` a 4-bit digit.  Every type people download (a Q4_K_M file mixes Q4_K with Q5_0, Q6_K and Q8_0) is,
per group of 32, a scale ``S`` times small integers ``v`` plus an optional offset ``Z`` (:func:`integer_form`):
Q4_0 ``d*(q-8)``, Q4_1 ``d*q + m``, Q4_K and Q5_K ``(d*sc)*q - dmin*m`` over eight groups of a
256-weight super-block, Q5_0 ``d*(q-16)``, Q5_1 ``d*q + m``, Q8_0 ``d*q``, and Q6_K ``d*(sc*q)`` (its
scales are per 16, so ``v = sc*q`` carries them and ``S`` is the super-block's ``d``).

An integer wider than 4 bits is written in base 16 (:func:`planes`): ``v = u0 + 16*u1 + ... + 16^(P-1)*t``
with unsigned low digits and a top digit that is signed (-8..7) when ``v`` can be negative.  Each digit
is one plane of 4-bit weights whose scale is ``S*16^p``; the planes sit side by side along the columns
and the activations are repeated once per plane, so one kernel call multiplies the GGUF's own integers:
P = 1 for the 4-bit types, 2 for Q5_* and Q8_0, 4 for Q6_K.  Powers of two scale exactly in bfloat16,
so the only rounding is the kernel's: ``S`` (and ``8*S + Z``) to bfloat16, as for Q4_1 since the start.

:func:`dequantized` is the ``gguf`` package's own dequantization: what transformers loaded, and what the
tests check every type against.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["TYPES", "GROUP", "integer_form", "planes", "dequantized", "planes_dequantized"]

#: The GGUF types run on the int4 kernel.
TYPES = ("Q4_0", "Q4_1", "Q4_K", "Q5_0", "Q5_1", "Q5_K", "Q6_K", "Q8_0")
GROUP = 32
_BLOCK_BYTES = {"Q4_0": 18, "Q4_1": 20, "Q5_0": 22, "Q5_1": 24, "Q8_0": 34, "Q4_K": 144, "Q5_K": 176, "Q6_K": 210}

Form = tuple[np.ndarray, np.ndarray, "np.ndarray | None"]


def _shape(tensor: Any) -> tuple[int, int]:
    """(rows N, columns K) of a 2-D GGUF tensor (GGUF lists the contiguous dimension first)."""
    return int(tensor.shape[1]), int(tensor.shape[0])


def _half(raw: np.ndarray, at: int) -> np.ndarray:
    return raw[:, at:at + 2].copy().view(np.float16).astype(np.float32)[:, 0]


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """[blocks, 32] from 16 bytes each: the 16 low nibbles, then the 16 high ones (ggml's 32-blocks)."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int32)


def _fifth_bits(qh: np.ndarray) -> np.ndarray:
    """[blocks, 32] 0/1: bit i of each block's 32-bit ``qh`` is element i's fifth bit."""
    word = qh.copy().view(np.uint32)[:, 0]
    return ((word[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int32)


def _k_scales(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K/Q5_K's 12 bytes -> eight 6-bit scales and eight 6-bit mins per super-block."""
    lo, hi, mixed = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    sc = np.concatenate([lo & 0x3F, (mixed & 0x0F) | ((lo >> 2) & 0x30)], axis=1)
    mn = np.concatenate([hi & 0x3F, (mixed >> 4) | ((hi >> 2) & 0x30)], axis=1)
    return sc.astype(np.float32), mn.astype(np.float32)


def _low_high(qs: np.ndarray, chunk: int) -> np.ndarray:
    """[blocks, ...] from bytes in runs of ``chunk``: each run gives its low nibbles, then its high ones."""
    b = qs.shape[0]
    return ((qs.reshape(b, -1, 1, chunk) >> np.array([0, 4], np.uint8).reshape(1, 1, 2, 1)) & 0x0F).reshape(b, -1)


def integer_form(tensor: Any) -> Form | None:
    """(v [N, K] int32, S [N, K/32] float32, Z [N, K/32] float32 or None) with ``w = S*v + Z`` per group of
    32 columns, or None for a type outside :data:`TYPES` (floats among them) or not 2-D."""
    kind = tensor.tensor_type.name
    size = _BLOCK_BYTES.get(kind)
    if size is None or len(tensor.shape) != 2:
        return None
    n, k = _shape(tensor)
    raw = np.asarray(tensor.data).view(np.uint8).reshape(-1, size)
    v, s, z = _DECODERS[kind](raw)
    groups = (n, k // GROUP)
    return v.reshape(n, k), s.reshape(groups), None if z is None else z.reshape(groups)


def _q4_0(raw):
    return _nibbles(raw[:, 2:]) - 8, _half(raw, 0), None


def _q4_1(raw):
    return _nibbles(raw[:, 4:]), _half(raw, 0), _half(raw, 2)


def _q5_0(raw):
    return (_nibbles(raw[:, 6:]) | (_fifth_bits(raw[:, 2:6]) << 4)) - 16, _half(raw, 0), None


def _q5_1(raw):
    return _nibbles(raw[:, 8:]) | (_fifth_bits(raw[:, 4:8]) << 4), _half(raw, 0), _half(raw, 2)


def _q8_0(raw):
    return raw[:, 2:].copy().view(np.int8).astype(np.int32), _half(raw, 0), None


def _q4_k(raw):
    sc, mn = _k_scales(raw[:, 4:16])
    d, dmin = _half(raw, 0)[:, None], _half(raw, 2)[:, None]
    return _low_high(raw[:, 16:], 32).astype(np.int32), d * sc, -(dmin * mn)


def _q5_k(raw):
    sc, mn = _k_scales(raw[:, 4:16])
    d, dmin = _half(raw, 0)[:, None], _half(raw, 2)[:, None]
    b = raw.shape[0]
    fifth = ((raw[:, 16:48].reshape(b, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1).reshape(b, -1)
    return (_low_high(raw[:, 48:], 32) | (fifth << 4)).astype(np.int32), d * sc, -(dmin * mn)


def _q6_k(raw):
    b = raw.shape[0]
    low = _low_high(raw[:, :128], 64)
    high = ((raw[:, 128:192].reshape(b, -1, 1, 32) >> np.array([0, 2, 4, 6], np.uint8).reshape(1, 1, 4, 1)) & 3).reshape(b, -1)
    q = (low | (high << 4)).astype(np.int32) - 32
    scales = raw[:, 192:208].copy().view(np.int8).astype(np.int32)      # one per 16 weights
    v = (q.reshape(b, 16, 16) * scales[:, :, None]).reshape(b, -1)
    return v, np.repeat(_half(raw, 208)[:, None], 256 // GROUP, axis=1), None


_DECODERS = {"Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q5_1": _q5_1, "Q8_0": _q8_0, "Q4_K": _q4_k,
             "Q5_K": _q5_k, "Q6_K": _q6_k}


def planes(v: np.ndarray, scale: np.ndarray, offset: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(digits [N, P*K] int32 in 0..15, scales [N, P*K/32], zeros [N, P*K/32]) with, for every column k,
    ``S*v + Z == sum over planes p of (digit - 8) * scale + zero`` at column ``p*K + k``: P planes side
    by side, the fewest whose top digit fits (unsigned 0..15 where ``v`` is never negative, else -8..7)."""
    n, k = v.shape
    never_negative = bool(v.min() >= 0)
    count = 1
    while True:
        top = v >> (4 * (count - 1))
        if (never_negative and top.max() <= 15) or (top.min() >= -8 and top.max() <= 7):
            break
        count += 1
    digits, scales, zeros = [], [], []
    for p in range(count):
        plane_scale = scale * np.float32(16 ** p)
        last = p == count - 1
        signed = last and not (never_negative and (v >> (4 * p)).max() <= 15)
        digit = (v >> (4 * p)) if last else ((v >> (4 * p)) & 15)
        digits.append(digit + 8 if signed else digit)
        zero = np.zeros_like(plane_scale) if signed else 8 * plane_scale
        if p == 0 and offset is not None:
            zero = zero + offset
        scales.append(plane_scale)
        zeros.append(zero)
    return (np.concatenate(digits, axis=1).astype(np.int32), np.concatenate(scales, axis=1),
            np.concatenate(zeros, axis=1))


def planes_dequantized(digits: np.ndarray, scales: np.ndarray, zeros: np.ndarray, columns: int) -> np.ndarray:
    """[N, K] float64: what the kernel's formula makes of :func:`planes`' output, the planes summed
    (float64, so checking the decomposition adds no rounding of its own)."""
    n = digits.shape[0]
    per_group = (digits.reshape(n, -1, GROUP) - 8) * scales[..., None].astype(np.float64) + \
        zeros[..., None].astype(np.float64)
    return per_group.reshape(n, -1, columns).sum(axis=1)


def dequantized(tensor: Any) -> np.ndarray:
    """[N, K] float32: the ``gguf`` package's own dequantization (any type it knows)."""
    from gguf.quants import dequantize

    n, k = _shape(tensor)
    return np.asarray(dequantize(np.asarray(tensor.data), tensor.tensor_type), dtype=np.float32).reshape(n, k)
