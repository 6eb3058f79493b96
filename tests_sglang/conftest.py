"""SGLang tests: run in their own virtualenv by ``make test-sglang``.

SGLang's server needs CUDA kernels (sglang-kernel, flashinfer) that do not run on a CPU-only machine,
so these tests drive SGLang's own grammar code instead of its HTTP server: the plugin loader and the
backend registry, ``GrammarManager`` (how the scheduler attaches a compiled grammar to a request),
and ``SamplingBatchInfo.update_regex_vocab_mask`` / ``GrammarMask.apply`` (how a batch's logits are
masked), around the real SmolLM2 sampling at temperature 1."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def model():
    import torch

    from structgen import load_model

    torch.manual_seed(0)
    return load_model()


@pytest.fixture(scope="session")
def backend(model):
    """structgen's backend as SGLang builds it: through the registry the plugin filled."""
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY

    from structgen.integrations import sglang_plugin

    sglang_plugin.register()
    eos = {int(model.hf_tokenizer.eos_token_id)}
    return GRAMMAR_BACKEND_REGISTRY["structgen"](None, model.hf_tokenizer, model.info.vocab_size, eos)
