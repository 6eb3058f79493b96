"""A GGUF model's quantized linear layers run as quantized weights (torch's int4 CPU kernel): the default speed.

``load_model`` dequantizes the GGUF to fp32, which holds the quantized weights exactly but streams 540 MB
of weights through every forward pass of SmolLM2-135M: on a 2-core CPU that memory traffic is most
of a decoding step.  llama.cpp instead multiplies the quantized blocks directly.  ``install`` does the
same with torch's ``_weight_int4pack_mm_for_cpu``, the block formats read by ``gguf_blocks``: Q4_0,
Q4_1 and Q4_K are that kernel's groups of 32 already; Q5_0, Q5_1, Q5_K, Q8_0 (two 4-bit planes) and
Q6_K (four) are their own integers written in base 16, so nothing is re-quantized and a Q4_K_M file
(Q4_K with Q5_0, Q6_K and Q8_0) runs whole.  The kernel is fast only with bfloat16 activations and
scales, so logits move by ~1e-2 and a greedy argmax near a tie can flip against the dense fp32 path.
``load_model`` uses it by default for a GGUF with quantized tensors (``quantized="auto"``: 1.7-2x
faster a step on AVX2 and AVX-512 machines alike); ``quantized=False`` keeps the dense fp32 path,
bit-reproducible against a plain transformers forward.  The output layer goes to int8 weights
(``int8_output``).  The kernel computes each row the same whatever the number of rows; the other
layers that are not (attention, an fp32 output layer) are made so by ``row_invariant``, so speculative
decoding stays token-identical to plain decoding on this path too.

Which GGUF tensor feeds which layer is checked, not assumed: a layer is switched only when the
GGUF tensor, dequantized, equals the loaded fp32 weight exactly up to a permutation of its rows
(transformers permutes the rows of q/k projections when it reads llama GGUFs).
"""
from __future__ import annotations

import os
import re
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import StructgenError
from . import gguf_blocks

__all__ = ["install", "is_installed", "available"]

_MARK = "_structgen_q4"
GROUP = gguf_blocks.GROUP
# transformers' llama-family module names -> GGUF tensor names
_MODULES = re.compile(r"(?:^|\.)layers\.(\d+)\.(?:self_attn|mlp)\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)$")
_GGUF_NAMES = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
               "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}


def available() -> bool:
    """Whether this torch build has the int4 CPU kernel."""
    return hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu") and \
        hasattr(torch.ops.aten, "_convert_weight_to_int4pack_for_cpu")


def _row_order(loaded: np.ndarray, gguf: np.ndarray) -> np.ndarray | None:
    """``order`` with ``gguf[order] == loaded`` exactly, or None when the rows are not the same set."""
    if loaded.shape != gguf.shape:
        return None
    if np.array_equal(loaded, gguf):
        return np.arange(len(gguf))
    where = {gguf[i].tobytes(): i for i in range(len(gguf))}
    order = [where.get(loaded[i].tobytes()) for i in range(len(loaded))]
    return None if any(i is None for i in order) else np.asarray(order)


def _q4_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    packed, scale_zero = self._structgen_q4_weights
    k = x.shape[-1]
    rows = x.reshape(-1, k).to(torch.bfloat16)
    planes = scale_zero.shape[0] * GROUP // k
    if planes > 1:  # a type wider than 4 bits: its base-16 digits side by side (gguf_blocks.planes)
        rows = rows.repeat(1, planes)
    out = torch.ops.aten._weight_int4pack_mm_for_cpu(rows, packed, GROUP, scale_zero).to(x.dtype)
    if self.bias is not None:
        out = out + self.bias
    return out.reshape(*x.shape[:-1], out.shape[-1])


def _packed_layer(tensor: Any, loaded: np.ndarray) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(packed int4 digits, bf16 scales and zeros) when ``tensor``, dequantized as ``gguf`` does, is
    ``loaded`` up to a row permutation, else None."""
    form = gguf_blocks.integer_form(tensor)
    if form is None:
        return None
    v, scale, offset = form
    if v.shape[0] % 16 or v.shape[1] % (2 * GROUP):  # the kernel packs 16 rows and 64 columns at a time
        return None
    order = _row_order(loaded, gguf_blocks.dequantized(tensor))
    if order is None:
        return None
    digits, scales, zeros = gguf_blocks.planes(v[order], scale[order], None if offset is None else offset[order])
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(torch.from_numpy(np.ascontiguousarray(digits)), 2)
    scale_zero = torch.from_numpy(np.stack([scales, zeros], -1)).transpose(0, 1).contiguous().to(torch.bfloat16)
    return packed, scale_zero


def _layers_from_gguf(hf_model: Any, gguf_path: str | Path) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{module name: (packed int4 digits, bf16 scales and zeros)} for every linear layer of ``hf_model``
    whose weight is, exactly and up to a row permutation, a quantized tensor of ``gguf_path`` of a type
    in ``gguf_blocks.TYPES``."""
    from ..tokenizer.gguf_file import reader

    tensors = {t.name: t for t in reader(gguf_path).tensors}
    layers = {}
    for name, module in hf_model.named_modules():
        hit = _MODULES.search(name)
        if not hit or not isinstance(module, torch.nn.Linear) or getattr(module, _MARK, False):
            continue
        tensor = tensors.get(f"blk.{hit.group(1)}.{_GGUF_NAMES[hit.group(2)]}.weight")
        weights = _packed_layer(tensor, module.weight.detach().float().numpy()) if tensor is not None else None
        if weights is not None:
            layers[name] = weights
    return layers


_CACHE_FORMAT = 3  # 3: planes of the wider types beside the 4-bit ones


def _cached_layers(path: Path, hf_model: Any) -> dict[str, tuple[torch.Tensor, torch.Tensor]] | None:
    """The layers a previous load packed from the same GGUF (the file name carries the GGUF's digest and
    torch's version, whose int4 packing may change), or None when absent or not this model's shapes."""
    from .._cache import pickle_load_or_none

    data = pickle_load_or_none(path)
    if not isinstance(data, dict) or data.get("format") != _CACHE_FORMAT or not isinstance(data.get("layers"), dict):
        return None  # ({} is a remembered "no quantized layer")
    modules = dict(hf_model.named_modules())
    layers = {}
    for name, entry in data["layers"].items():
        module = modules.get(name)
        if not isinstance(entry, tuple) or len(entry) != 2:
            return None
        packed, scale_zero = entry
        if not isinstance(module, torch.nn.Linear) or getattr(module, _MARK, False):
            return None
        n, k = module.weight.shape
        if scale_zero.ndim != 3 or scale_zero.shape[1:] != (n, 2) or (scale_zero.shape[0] * GROUP) % k:
            return None
        layers[name] = (torch.from_numpy(packed), torch.from_numpy(scale_zero).view(torch.bfloat16))
    if layers and not _packing_agrees(modules, layers):
        return None  # packed for another layout (the file name now carries the CPU capability too)
    return layers


def _packing_agrees(modules: dict, layers: dict) -> bool:
    """Whether the first cached layer multiplies as its fp32 weight does (within bf16 rounding): the
    int4 packing's layout depends on the CPU capability, and a file packed for another one reads back
    without an error and multiplies garbage."""
    name = next(iter(layers))
    module = modules[name]
    weight = module.weight.detach().float()
    x = torch.linspace(-1.0, 1.0, weight.shape[1]).reshape(1, -1)
    want = x @ weight.t()
    probe = types.SimpleNamespace(_structgen_q4_weights=layers[name], bias=None)
    got = _q4_forward(probe, x).float()
    return bool((got - want).abs().max() <= 0.05 * want.abs().max() + 1e-3)


def install(hf_model: Any, gguf_path: str | Path, cache_file: Path | None = None) -> int:
    """Switch ``hf_model``'s linear layers whose weights are quantized tensors of ``gguf_path`` (Q4_0,
    Q4_1, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0) to the int4 kernel; returns how many.
    ``cache_file``: where the packed layers are kept between loads (packing reads the whole GGUF,
    ~8 s here; reading them back takes well under one).  Raises ``StructgenError`` when the kernel is
    missing or no layer matches (the model was not loaded from that GGUF, or its tensors are floats)."""
    if not available():
        raise StructgenError(f"quantized=True needs torch's int4 CPU kernel; torch {torch.__version__} lacks it")
    layers = _cached_layers(cache_file, hf_model) if cache_file is not None else None
    if layers is None:
        layers = _layers_from_gguf(hf_model, gguf_path)
        if cache_file is not None:
            from .._cache import atomic_pickle_dump

            atomic_pickle_dump({"format": _CACHE_FORMAT, "layers": {
                name: (packed.numpy(), scale_zero.view(torch.int16).numpy()) for name, (packed, scale_zero) in
                layers.items()}}, cache_file)
    if not layers:
        raise StructgenError(f"quantized=True: no linear layer of the model matches a quantized tensor of "
                             f"{gguf_path} (types run quantized: {', '.join(gguf_blocks.TYPES)})")
    modules = dict(hf_model.named_modules())
    for name, weights in layers.items():
        module = modules[name]
        module._structgen_q4_weights = weights
        module.forward = types.MethodType(_q4_forward, module)
        setattr(module, _MARK, True)
    from . import int8_output, row_invariant

    if os.environ.get("STRUCTGEN_INT8_OUTPUT", "1") != "0":
        int8_output.install(hf_model, None if cache_file is None else
                            cache_file.with_name(cache_file.stem + "-outliers.pkl"))
    row_invariant.install(hf_model, [m for m in hf_model.modules() if isinstance(m, torch.nn.Linear)
                                     and not getattr(m, _MARK, False) and not int8_output.is_installed_on(m)])
    return len(layers)


def is_installed(hf_model: Any) -> bool:
    return any(getattr(m, _MARK, False) for m in hf_model.modules())
