"""The output layer as 8-bit weights (fbgemm's int8 GEMM), the hidden dimensions that carry outliers in fp32.

With the 4-bit layers on torch's int4 kernel (``gguf_q4``), the fp32 output layer (vocabulary x hidden:
113 MB for SmolLM2-135M, read whole at every forward pass) became a third of a decoding step; llama.cpp
multiplies the GGUF's Q8_0 output weights with 8-bit activations.  ``install`` runs it through torch's
dynamic int8 linear (``quantized::linear_dynamic``: int8 weights per output row, each activation row
rounded to 8 bits over its own range, int32 sums): 28 MB per pass; alone, 10 ms -> 0.9 ms here.

One rounding step per row is the problem: the final hidden state of a transformer has a few dimensions
10-50x larger than the rest ("massive activations", the same dimensions whatever the input), and they
would set that step for all.  Those ``OUTLIER_DIMS`` dimensions stay fp32 (a 49,152 x 32 matrix-vector
product beside the int8 one); which they are is found once per model, on a forward pass over a fixed,
spread-out set of token ids (no text or tokenizer needed).  Measured against the dense fp32 model on 300
held-out tokens: KL 0.00037 nats and top-1 agreement 0.997 (the 4-bit layers alone: 0.00022, 0.990);
without the fp32 dimensions, KL 0.0037.

Instruction sets: without VNNI (AVX2, and AVX-512 before Cascade Lake) fbgemm multiplies u8 x s8 pairs
into 16-bit sums (``vpmaddubsw``) that saturate at 32,767 when both products of a pair are large: there
the logits were 8x further from the dense model's (KL 0.0017 against 0.00025, max logit error 3.4).
``saturates()`` finds out once per process with a product whose pairs overflow, and on such a kernel the
output layer stays fp32 (``install`` returns False).  Activations rounded to 7 bits (``reduce_range``),
whose pair sums fit, were tried: KL 0.00085, but top-1 agreement with the dense model 0.938 on the
accuracy text where the fp32 output layer keeps 1.0 (forced AVX-512 without VNNI, EPYC), so an AVX2
machine pays the fp32 output layer's time for the same answers.  A VNNI kernel keeps all 8 bits.

Rows are quantized and multiplied one at a time, so a token's logits are the same whatever the number of
tokens in the pass (``row_invariant``): speculative decoding stays token-identical to plain decoding.
"""
from __future__ import annotations

import functools
import types
from pathlib import Path
import warnings
from typing import Any

import torch

__all__ = ["install", "available", "OUTLIER_DIMS", "is_installed", "is_installed_on", "saturates"]

#: Hidden dimensions of the output layer's input computed in fp32.
OUTLIER_DIMS = 32
#: Token ids fed once to find them: this many, spread over the vocabulary.
CALIBRATION_TOKENS = 128
_MARK = "_structgen_int8_output"


def available() -> bool:
    """Whether this torch build has the quantized int8 linear kernels."""
    try:
        return hasattr(torch.ops.quantized, "linear_dynamic") and hasattr(torch.ops.quantized, "linear_prepack")
    except (AttributeError, RuntimeError):  # pragma: no cover - a torch built without quantized ops
        return False


@functools.lru_cache(maxsize=1)
def saturates() -> bool:
    """Whether this process's int8 kernel saturates its pair sums at 16 bits (fbgemm without VNNI): a
    row of 64 activations that round to 255 times weights that round to 127 must give 64, not ~32."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        qweight = torch.quantize_per_channel(torch.ones(4, 64), torch.full((4,), 1 / 127, dtype=torch.double),
                                             torch.zeros(4, dtype=torch.long), 0, torch.qint8)
        packed = torch.ops.quantized.linear_prepack(qweight, None)
    out = torch.ops.quantized.linear_dynamic(torch.ones(1, 64), packed, False)
    return bool(out.min() < 60)


def outlier_dims(hf_model: Any, n: int = OUTLIER_DIMS) -> torch.Tensor:
    """The ``n`` dimensions of the output layer's input with the largest magnitude over a forward pass of
    ``CALIBRATION_TOKENS`` token ids spread evenly over the vocabulary (sorted)."""
    head = hf_model.get_output_embeddings()
    vocab = int(head.weight.shape[0])
    step = max(1, vocab // CALIBRATION_TOKENS)
    ids = list(range(step // 2, vocab, step))[:CALIBRATION_TOKENS]
    caught: list[torch.Tensor] = []
    hook = head.register_forward_pre_hook(lambda _m, args: caught.append(args[0].detach().reshape(-1, args[0].shape[-1])))
    try:
        with torch.no_grad():
            try:
                hf_model(input_ids=torch.tensor([ids]), use_cache=False, logits_to_keep=0)
            except TypeError:  # a model whose forward has no logits_to_keep
                caught.clear()
                hf_model(input_ids=torch.tensor([ids]), use_cache=False)
    finally:
        hook.remove()
    peak = caught[0].float().abs().amax(0)
    return peak.argsort(descending=True)[:n].sort().values


def _int8_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    packed, dense_cols, rest, outliers, seven_bits = self._structgen_int8
    k = x.shape[-1]
    x2 = x.reshape(-1, k).float()
    main, out = x2.index_select(1, rest), x2.index_select(1, outliers)
    rows = [torch.ops.quantized.linear_dynamic(main[i:i + 1], packed, seven_bits)[0] + torch.mv(dense_cols, out[i])
            for i in range(x2.shape[0])]
    logits = torch.stack(rows)
    if self.bias is not None:
        logits = logits + self.bias
    return logits.reshape(*x.shape[:-1], logits.shape[-1]).to(x.dtype)


def _cached_outlier_dims(hf_model: Any, cache_file: Path | None) -> torch.Tensor:
    """:func:`outlier_dims`, kept in ``cache_file`` (a forward pass of the whole model, ~0.6 s of every
    load): the caller keys the file by the model's weights, torch and the CPU's kernels."""
    from .._cache import atomic_pickle_dump, pickle_load_or_none

    if cache_file is not None:
        data = pickle_load_or_none(cache_file)
        if isinstance(data, dict) and data.get("n") == OUTLIER_DIMS and data.get("tokens") == CALIBRATION_TOKENS:
            return torch.tensor(data["dims"], dtype=torch.long)
    dims = outlier_dims(hf_model)
    if cache_file is not None:
        atomic_pickle_dump({"n": OUTLIER_DIMS, "tokens": CALIBRATION_TOKENS, "dims": dims.tolist()}, cache_file)
    return dims


def install(hf_model: Any, outliers_file: Path | None = None) -> bool:
    """Run ``hf_model``'s output layer as int8 weights with its outlier input dimensions in fp32; False
    (the model untouched) where torch lacks the kernels or the layer is not a plain ``nn.Linear``.
    ``outliers_file``: where the outlier dimensions are kept between loads."""
    head = hf_model.get_output_embeddings()
    if not available() or not isinstance(head, torch.nn.Linear) or getattr(head, _MARK, False):
        return False
    if saturates():  # 16-bit pair sums (no VNNI): the fp32 layer's answers over the int8 one's speed
        return False
    outliers = _cached_outlier_dims(hf_model, outliers_file)
    w = head.weight.detach().float()
    keep = torch.ones(w.shape[1], dtype=torch.bool)
    keep[outliers] = False
    rest = keep.nonzero()[:, 0]
    main = w.index_select(1, rest)
    scale = (main.abs().amax(1).clamp_min(1e-12) / 127).double()
    try:
        with warnings.catch_warnings():  # quantized tensors are deprecated in torch 2.13; the kernel is not
            warnings.simplefilter("ignore", UserWarning)
            qweight = torch.quantize_per_channel(main, scale, torch.zeros(w.shape[0], dtype=torch.long), 0, torch.qint8)
            packed = torch.ops.quantized.linear_prepack(qweight, None)
    except (RuntimeError, AttributeError):  # a torch whose quantized engine cannot take it: stay fp32
        return False
    head._structgen_int8 = (packed, w.index_select(1, outliers).contiguous(), rest, outliers, saturates())
    head.forward = types.MethodType(_int8_forward, head)
    setattr(head, _MARK, True)
    return True


def is_installed(hf_model: Any) -> bool:
    return is_installed_on(hf_model.get_output_embeddings())


def is_installed_on(layer: Any) -> bool:
    return bool(getattr(layer, _MARK, False))
