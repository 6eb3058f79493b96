"""The output layer on int8 weights with its outlier dimensions in fp32 (``runtime.int8_output``)."""
from __future__ import annotations

import copy

import torch

from structgen.runtime import fast_linear, gguf_q4, int8_output


def test_the_default_model_runs_its_output_layer_int8_and_fast_linear_keeps_it(smol):
    # int8 unless this CPU's kernel saturates its pair sums (no VNNI): then the fp32 layer
    assert int8_output.is_installed(smol.hf_model) is not int8_output.saturates()
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


# Its accuracy against the dense model, under every instruction set: test_accuracy_per_instruction_set.py


def test_it_can_be_turned_off(smol_dense, monkeypatch, tmp_path):
    from structgen.models import smollm2_gguf_path

    monkeypatch.setenv("STRUCTGEN_INT8_OUTPUT", "0")
    hf = copy.deepcopy(smol_dense.hf_model)
    gguf_q4.install(hf, smollm2_gguf_path(), tmp_path / "q4.pkl")
    assert gguf_q4.is_installed(hf) and not int8_output.is_installed(hf)
    assert getattr(hf.get_output_embeddings(), "_structgen_padded", False)  # row-invariant fp32 instead


def test_the_outlier_dimensions_are_found_once_and_read_back(smol_dense, monkeypatch, tmp_path):
    """Finding them runs the whole model (~0.6 s of every load before they were kept beside the 4-bit cache)."""
    if int8_output.saturates():
        return  # this CPU keeps the fp32 output layer: nothing to find
    first = copy.deepcopy(smol_dense.hf_model)
    assert int8_output.install(first, tmp_path / "outliers.pkl")
    assert (tmp_path / "outliers.pkl").exists()

    def no_forward(*a, **k):
        raise AssertionError("the outlier dimensions were searched again")

    monkeypatch.setattr(int8_output, "outlier_dims", no_forward)
    second = copy.deepcopy(smol_dense.hf_model)
    assert int8_output.install(second, tmp_path / "outliers.pkl")
    assert torch.equal(first.get_output_embeddings()._structgen_int8[3], second.get_output_embeddings()._structgen_int8[3])
