"""How far the default model's logits are from the dense fp32 model's, printed as JSON: run by
``test_accuracy_per_instruction_set.py`` in a child process under each instruction set (the int8 and
int4 kernels pick their code path by CPU features, read once per process)."""
from __future__ import annotations

import copy
import json

import torch

TEXT = ("Structured generation constrains a language model to a grammar. The JSON value "
        '{"city": "Kyoto", "population": 1463723, "tags": ["temple", "garden"]} is one. '
        "Each step masks the tokens the grammar cannot take, then samples the rest.")
NEXT = "The capital of France is Paris. The capital of Germany is"


def _logits(hf_model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return hf_model(torch.tensor([ids])).logits[0].float()


def _kl(p_logits: torch.Tensor, q_logits: torch.Tensor) -> float:
    lp, lq = p_logits.log_softmax(-1), q_logits.log_softmax(-1)
    return float((lp.exp() * (lp - lq)).sum(-1).mean())


def measure(dense, quantized) -> dict:
    """KL to the dense model over TEXT's positions with the int8 output layer and with the 4-bit layers
    alone, top-1 agreement, and the largest logit difference after NEXT (with its bound)."""
    from structgen.runtime import int8_output

    ids = dense.encode(TEXT)
    d = _logits(dense.hf_model, ids)
    without = copy.deepcopy(quantized.hf_model)
    if int8_output.is_installed(quantized.hf_model):
        del without.get_output_embeddings().forward  # the class's fp32 forward back
    q4_only, both = _logits(without, ids), _logits(quantized.hf_model, ids)
    nxt = dense.encode(NEXT)
    a, b = _logits(dense.hf_model, nxt)[-1], _logits(quantized.hf_model, nxt)[-1]
    return {"kl_both": _kl(d, both), "kl_q4_only": _kl(d, q4_only),
            "top1": float((d.argmax(-1) == both.argmax(-1)).float().mean()),
            "top1_q4_only": float((d.argmax(-1) == q4_only.argmax(-1)).float().mean()),
            "next_max_diff": float((a - b).abs().max()), "next_bound": 0.05 * float(a.abs().max()),
            "next_argmax_same": bool(a.argmax() == b.argmax()),
            "int8_saturates": int8_output.saturates() if int8_output.available() else None,
            "int8_installed": int8_output.is_installed(quantized.hf_model)}


if __name__ == "__main__":
    from structgen.models import dense_copy, load_model

    model = load_model()
    print("RESULT " + json.dumps(measure(dense_copy(model), model)))
