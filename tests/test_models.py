"""load_model on small local folders (fast) and on the real SmolLM2 (slow)."""
from __future__ import annotations

import time

import pytest
import torch

from structgen.errors import ModelNotFound
from structgen.models import Model, load_model


def _save_tiny(tmp_path, smol_hf_tokenizer, vocab_size: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                      bos_token_id=1, eos_token_id=[2, 0], tie_word_embeddings=True)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(str(tmp_path))
    smol_hf_tokenizer.save_pretrained(str(tmp_path))
    return tmp_path


def test_load_local_folder_with_padded_logits(tmp_path, smol_hf_tokenizer, smol_info):
    folder = _save_tiny(tmp_path, smol_hf_tokenizer, vocab_size=49152 + 64)
    m = load_model(str(folder))
    assert isinstance(m, Model) and m.hf_model.dtype == torch.float32
    assert m.info.vocab_size == 49216 == m.hf_model.get_output_embeddings().weight.shape[0]
    assert m.info.token_bytes[:49152] == smol_info.token_bytes
    assert set(range(49152, 49216)) <= m.info.special_ids
    assert m.info.eos_ids == (2, 0)  # tokenizer's <|im_end|>, then the config's extra EOS
    prompt = m.chat_prompt("Hi", system="Be brief.")
    assert prompt.startswith("<|im_start|>system\nBe brief.<|im_end|>")
    assert prompt.endswith("<|im_start|>assistant\n")
    ids = m.encode(prompt)
    assert ids[0] == 1 and m.decode(ids[1:3]) == "system\n"


def test_load_local_folder_bf16(tmp_path, smol_hf_tokenizer):
    folder = _save_tiny(tmp_path, smol_hf_tokenizer, vocab_size=49152)
    m = load_model(str(folder), dtype="bfloat16")
    assert m.hf_model.dtype == torch.bfloat16 and m.dtype == torch.bfloat16


def test_chat_prompt_without_template(tiny_model):
    class NoTemplate:
        chat_template = None

    m = Model(tiny_model.hf_model, NoTemplate(), tiny_model.info, "x")
    assert m.chat_prompt("question") == "question\n"
    assert m.chat_prompt("question", system="sys") == "sys\n\nquestion\n"


def test_missing_model_raises():
    with pytest.raises(ModelNotFound):
        load_model("/nonexistent/structgen-model-folder")


@pytest.mark.slow
def test_default_model_cached_load_is_fast(tmp_path, monkeypatch):
    """First load converts the GGUF into the cache; the next reads safetensors."""
    load_model()  # make sure the default cache exists (slow the very first time)
    t = time.perf_counter()
    m = load_model()
    assert time.perf_counter() - t < 5.0
    assert m.name == "SmolLM2-135M-Instruct" and m.info.vocab_size == 49152
    assert m.info.eos_ids == (2,)
    assert m.chat_prompt("hi").endswith("<|im_start|>assistant\n")


def test_the_conversion_cache_is_keyed_by_the_gguf_content(tmp_path):
    """Two environments installing the same GGUF (two paths, two mtimes) share one conversion."""
    from structgen.models import _source_key

    a, b, c = tmp_path / "a" / "m.gguf", tmp_path / "b" / "m.gguf", tmp_path / "c.gguf"
    for p, data in ((a, b"GGUF same bytes"), (b, b"GGUF same bytes"), (c, b"GGUF other bytes")):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    assert _source_key(a) == _source_key(b) != _source_key(c)
    assert _source_key(a).startswith("sha256:")


def test_the_thread_default_leaves_a_core_free_and_can_be_set(monkeypatch):
    import os

    from structgen.errors import StructgenError
    from structgen.models import default_torch_threads

    monkeypatch.delenv("STRUCTGEN_TORCH_THREADS", raising=False)
    assert default_torch_threads() == max(1, len(os.sched_getaffinity(0)) - 1)
    monkeypatch.setenv("STRUCTGEN_TORCH_THREADS", "3")
    assert default_torch_threads() == 3
    monkeypatch.setenv("STRUCTGEN_TORCH_THREADS", "auto")
    assert default_torch_threads() is None
    monkeypatch.setenv("STRUCTGEN_TORCH_THREADS", "many")
    with pytest.raises(StructgenError, match="STRUCTGEN_TORCH_THREADS"):
        default_torch_threads()
