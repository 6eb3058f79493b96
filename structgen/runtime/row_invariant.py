"""A forward pass whose result for a token does not depend on how many tokens the pass holds.

Speculative decoding feeds k tokens in one pass where plain decoding feeds them one at a time; the
two are token-identical only if each token's logits come out bit for bit the same.  Two kernels
break that on this CPU: scaled-dot-product attention over k queries (a causal block) rounds
differently from k single-query calls, and a BLAS GEMM picks its micro-kernel by the number of
columns (1-3 columns round one way, 4-11 another).  In fp32 the differences are ~1e-5 and no test
has seen them flip a token; with bfloat16 activations (``gguf_q4``) a 1e-7 difference moves an
activation across a bf16 rounding boundary and grows to ~0.2 in the logits, enough to change a
greedy choice.  ``install`` removes both causes for single sequences:

- attention runs each query of a multi-token pass as its own single-query call over the keys
  before it: the very call plain decoding makes for that token (batches with their 4-D masks keep
  transformers' SDPA path).  The prompt is the exception: a pass over an empty cache computes its
  first rows (all of them, or the ``prompt_rows(n)`` the caller names, drafts after them) as one
  causal block, the call plain decoding makes for the same prompt; row by row, a 1,000-token prompt
  took 30,000 attention calls (seconds, minutes for a schema of several thousand tokens);
- the listed linear layers pad their rows to a multiple of 4, so every row takes the 4-column
  micro-kernel whatever the pass size.

Cost, measured by ``structgen bench decode`` (q4 rows): a few hundred microseconds a pass.
"""
from __future__ import annotations

import contextvars
import types
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

import torch

__all__ = ["install", "prompt_rows", "ATTENTION", "ROW_QUANTUM"]

ATTENTION = "structgen_rowwise"
#: Rows are padded to a multiple of this (the GEMM micro-kernel width that gives every row one rounding).
ROW_QUANTUM = 4
_registered = False


_PROMPT_ROWS: contextvars.ContextVar[int | None] = contextvars.ContextVar("structgen_prompt_rows", default=None)


@contextmanager
def prompt_rows(n: int) -> Iterator[None]:
    """In the block, a pass holds ``n`` tokens of the prompt and then drafts: those prompt tokens are
    one causal block (over the cache before them too: a long prompt is fed in chunks), each draft its
    own single-query call (as when fed after the prompt)."""
    token = _PROMPT_ROWS.set(n)
    try:
        yield
    finally:
        _PROMPT_ROWS.reset(token)


def _rowwise_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attention_mask: torch.Tensor | None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    b, _, q, _ = query.shape
    length = key.shape[2]
    if b != 1 or q == 1 or not _plain_causal(attention_mask, q, length):
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    kwargs.pop("is_causal", None)
    past = length - q
    head = 0
    parts = []
    n = _PROMPT_ROWS.get()
    if n is not None:  # a prompt (or a chunk of one) and drafts after it: the prompt as one block
        head = max(0, min(n, q))
    elif past == 0:  # a prompt alone: the one block plain decoding runs too
        head = q
    if head and past == 0:
        # contiguous copies: the same layout whether drafts follow the prompt in this pass or not
        block = [t[:, :, :head].contiguous() for t in (query, key, value)]
        parts.append(sdpa_attention_forward(module, *block, None, is_causal=True, **kwargs)[0])
    elif head:  # a later chunk of a long prompt: one block over the chunks before it and itself
        block = [query[:, :, :head].contiguous()] + [t[:, :, :past + head].contiguous() for t in (key, value)]
        causal = torch.ones(head, past + head, dtype=torch.bool, device=query.device).tril(past)
        parts.append(sdpa_attention_forward(module, *block, causal[None, None], is_causal=False, **kwargs)[0])
    parts += [sdpa_attention_forward(module, query[:, :, i:i + 1], key[:, :, :past + i + 1], value[:, :, :past + i + 1],
                                     None, is_causal=False, **kwargs)[0] for i in range(head, q)]
    return (parts[0] if len(parts) == 1 else torch.cat(parts, 1)), None


def _plain_causal(mask: torch.Tensor | None, q: int, length: int) -> bool:
    """Whether ``mask`` is the causal pattern of one sequence's new tokens after its cached ones."""
    if mask is None:
        return True
    m = mask[0, 0] if mask.dim() == 4 else mask
    if m.shape[-2:] != (q, length):
        return False
    allowed = m if m.dtype == torch.bool else m == 0
    return bool(torch.equal(allowed, torch.ones(q, length, dtype=torch.bool).tril(length - q)))


def _padded_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    if torch.is_grad_enabled() or x.device.type != "cpu":
        return torch.nn.functional.linear(x, self.weight, self.bias)
    rows = x.numel() // x.shape[-1]
    x2 = x.reshape(rows, x.shape[-1]).to(self.weight.dtype)
    pad = -rows % ROW_QUANTUM
    if pad:
        x2 = torch.cat((x2, x2[:1].expand(pad, -1)))
    out = torch.mm(self.weight, x2.t())[:, :rows].t()
    if self.bias is not None:
        out = out + self.bias
    return out.reshape(*x.shape[:-1], out.shape[-1]).to(x.dtype)


def install(hf_model: Any, linears: Iterable[torch.nn.Linear]) -> None:
    """Row-invariant attention for ``hf_model`` and padded rows for ``linears`` (the layers whose
    kernel is not row-invariant by itself)."""
    global _registered
    from transformers import AttentionInterface

    if not _registered:
        AttentionInterface.register(ATTENTION, _rowwise_attention)
        _registered = True
    hf_model.set_attn_implementation(ATTENTION)
    for layer in linears:
        layer.forward = types.MethodType(_padded_forward, layer)
        layer._structgen_skinny = False  # fast_linear must not put its own path back
        layer._structgen_padded = True
