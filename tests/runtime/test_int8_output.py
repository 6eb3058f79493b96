"""The output layer on int8 weights with its outlier dimensions in fp32 (``runtime.int8_output``)."""
from __future__ import annotations

import copy

import pytest
import torch

from structgen.runtime import fast_linear, gguf_q4, int8_output


def test_the_default_model_runs_its_output_layer_int8_and_fast_linear_keeps_it(smol):
    assert int8_output.is_installed(smol.hf_model)
    head = smol.hf_model.get_output_embeddings()
    before = head.forward
    fast_linear.install(smol.hf_model)  # what load_model(fast_linear=True) does after gguf_q4
    assert head.forward == before and not getattr(head, "_structgen_skinny", False)


def test_the_outlier_dimensions_are_the_large_ones(smol_dense):
    """Found on spread-out token ids, they are the dimensions a real text makes large: the rounding step
    of the int8 part is set by the rest."""
    dims = int8_output.outlier_dims(smol_dense.hf_model)
    assert dims.numel() == int8_output.OUTLIER_DIMS and torch.equal(dims, dims.sort().values)
    caught = []
    head = smol_dense.hf_model.get_output_embeddings()
    hook = head.register_forward_pre_hook(lambda _m, args: caught.append(args[0][0].detach()))
    ids = smol_dense.encode('{"name": "Ada Lovelace", "born": 1815} She wrote the first program for a machine.')
    with torch.no_grad():
        smol_dense.hf_model(torch.tensor([ids]))
    hook.remove()
    peak = caught[0].abs().amax(0)
    rest = torch.ones_like(peak, dtype=torch.bool)
    rest[dims] = False
    assert peak[dims].median() > 2.5 * peak[rest].median()
    assert set(peak.argsort(descending=True)[:5].tolist()) <= set(dims.tolist())


def _next_token_logits(hf_model, ids):
    with torch.no_grad():
        return hf_model(torch.tensor([ids])).logits[0].float()


def test_logits_stay_as_close_to_fp32_as_the_4bit_layers_alone(smol_dense, smol):
    """Over a text's positions: mean KL to the dense fp32 model and top-1 agreement, with the int8 output
    layer and without it (the 4-bit layers alone); the int8 layer may add little on top."""
    ids = smol_dense.encode("Structured generation constrains a language model to a grammar. The JSON value "
                            '{"city": "Kyoto", "population": 1463723, "tags": ["temple", "garden"]} is one. '
                            "Each step masks the tokens the grammar cannot take, then samples the rest.")
    dense = _next_token_logits(smol_dense.hf_model, ids)
    without = copy.deepcopy(smol.hf_model)
    head = without.get_output_embeddings()
    del head.forward  # the class's fp32 forward back
    q4_only = _next_token_logits(without, ids)
    both = _next_token_logits(smol.hf_model, ids)

    def kl(p_logits, q_logits):
        lp, lq = p_logits.log_softmax(-1), q_logits.log_softmax(-1)
        return float((lp.exp() * (lp - lq)).sum(-1).mean())

    assert kl(dense, both) < max(3 * kl(dense, q4_only), 1e-3)
    agree = float((dense.argmax(-1) == both.argmax(-1)).float().mean())
    assert agree >= 0.95, agree


def test_it_can_be_turned_off(smol_dense, monkeypatch, tmp_path):
    from structgen.models import smollm2_gguf_path

    monkeypatch.setenv("STRUCTGEN_INT8_OUTPUT", "0")
    hf = copy.deepcopy(smol_dense.hf_model)
    gguf_q4.install(hf, smollm2_gguf_path(), tmp_path / "q4.pkl")
    assert gguf_q4.is_installed(hf) and not int8_output.is_installed(hf)
    assert getattr(hf.get_output_embeddings(), "_structgen_padded", False)  # row-invariant fp32 instead
