"""``TokenizerInfo``, the exact bytes of every token id, and how it is read from a tokenizer's
description (``tokenizer.json``, a plain vocabulary, a transformers tokenizer, a GGUF)."""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import StructgenError, UnsupportedFeature
from .token_bytes import _BYTE_FALLBACK_RE, _byte_level_bytes, _sentencepiece_bytes

# Bump when the way token bytes are derived changes: invalidates on-disk caches.
_CACHE_VERSION = 1


@dataclass(frozen=True, eq=False)
class TokenizerInfo:
    """Exact bytes of every token id, plus the ids a grammar must treat specially.

    ``token_bytes[i]`` is what id ``i`` adds to the output text (``b""`` for
    special/control/unused/padding ids); ``len(token_bytes) == vocab_size``,
    which is the width of the model's logits (it may exceed the tokenizer's
    own size when the model pads its embedding matrix).  ``special_ids`` are
    never allowed by a grammar; ``eos_ids`` end generation (they are in
    ``special_ids`` too -- the matcher sets their bits itself, only when the
    constraint can end).  Invariant: an id is special iff its bytes are empty.
    """

    token_bytes: list[bytes]
    vocab_size: int
    special_ids: frozenset[int]
    eos_ids: tuple[int, ...]
    name: str = ""

    def __post_init__(self) -> None:
        if len(self.token_bytes) != self.vocab_size:
            raise StructgenError(
                f"TokenizerInfo {self.name!r}: {len(self.token_bytes)} token byte strings "
                f"for vocab_size {self.vocab_size}"
            )
        for i in self.special_ids:
            if not 0 <= i < self.vocab_size:
                raise StructgenError(f"TokenizerInfo {self.name!r}: special id {i} out of range")
            if self.token_bytes[i]:
                raise StructgenError(f"TokenizerInfo {self.name!r}: special id {i} has bytes")
        for i in self.eos_ids:
            if not 0 <= i < self.vocab_size:
                raise StructgenError(f"TokenizerInfo {self.name!r}: EOS id {i} out of range")
        # Invariant the engine relies on: special <=> no bytes.  A non-special
        # empty token would let a grammar loop forever without progress.
        n_empty = sum(1 for b in self.token_bytes if not b)
        if n_empty != len(self.special_ids):
            raise StructgenError(
                f"TokenizerInfo {self.name!r}: {n_empty} ids have no bytes but "
                f"{len(self.special_ids)} are special; every empty id must be special"
            )

    # ----------------------------------------------------------------- queries

    def fingerprint(self) -> str:
        """sha256 over the vocabulary bytes, special ids and EOS ids: a cache key for compiled grammars."""
        return self._fingerprint

    @cached_property
    def _fingerprint(self) -> str:
        h = hashlib.sha256()
        h.update(f"structgen-tokenizer-v{_CACHE_VERSION}:{self.vocab_size}\n".encode())
        for b in self.token_bytes:
            h.update(len(b).to_bytes(4, "little"))
            h.update(b)
        h.update(b"special:" + ",".join(map(str, sorted(self.special_ids))).encode())
        h.update(b"eos:" + ",".join(map(str, self.eos_ids)).encode())
        return h.hexdigest()

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Concatenated bytes of ``ids`` (special ids contribute nothing)."""
        tb = self.token_bytes
        return b"".join([tb[i] for i in ids])

    def invalid_utf8_ids(self) -> list[int]:
        """Ids whose bytes are not valid UTF-8 on their own (partial characters, lone bytes)."""
        out = []
        for i, b in enumerate(self.token_bytes):
            try:
                b.decode("utf-8")
            except UnicodeDecodeError:
                out.append(i)
        return out

    def first_bytes(self) -> frozenset[int]:
        """Byte values that start at least one (non-special) token."""
        return frozenset(b[0] for i, b in enumerate(self.token_bytes) if b and i not in self.special_ids)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (for pickling into caches without pinning this class's layout)."""
        return {
            "version": _CACHE_VERSION,
            "token_bytes": self.token_bytes,
            "vocab_size": self.vocab_size,
            "special_ids": sorted(self.special_ids),
            "eos_ids": list(self.eos_ids),
            "name": self.name,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TokenizerInfo":
        """Inverse of ``to_dict``; raises ``StructgenError`` on data from another cache version."""
        if data.get("version") != _CACHE_VERSION:
            raise StructgenError(f"TokenizerInfo data version {data.get('version')!r} != {_CACHE_VERSION}")
        return cls(
            list(data["token_bytes"]),
            int(data["vocab_size"]),
            frozenset(data["special_ids"]),
            tuple(data["eos_ids"]),
            str(data.get("name", "")),
        )

    def __repr__(self) -> str:
        return (
            f"TokenizerInfo(name={self.name!r}, vocab_size={self.vocab_size}, "
            f"special={len(self.special_ids)}, eos_ids={self.eos_ids})"
        )

    # ----------------------------------------------------------------- builders

    @classmethod
    def from_huggingface(
        cls,
        hf_tokenizer: Any,
        *,
        vocab_size: int | None = None,
        model_config: Any = None,
        generation_config: Any = None,
        name: str | None = None,
    ) -> "TokenizerInfo":
        """Build from a transformers tokenizer (fast/``TokenizersBackend``) or a ``tokenizers.Tokenizer``.

        ``vocab_size``: width of the model's logits; defaults to
        ``model_config.vocab_size`` when given, else the tokenizer's size
        (the larger of the two wins -- the table must cover every logit).
        EOS ids come from the tokenizer, ``model_config.eos_token_id`` and
        ``generation_config.eos_token_id`` (each may be an int or a list).
        """
        backend = getattr(hf_tokenizer, "backend_tokenizer", None)
        if backend is None and hasattr(hf_tokenizer, "to_str"):
            backend = hf_tokenizer  # a raw tokenizers.Tokenizer
        extra_special: set[int] = set()
        eos: list[int] = []
        if backend is not hf_tokenizer:
            extra_special.update(int(i) for i in (getattr(hf_tokenizer, "all_special_ids", None) or []))
            _extend_ids(eos, getattr(hf_tokenizer, "eos_token_id", None))
        for cfg in (model_config, generation_config):
            if cfg is not None:
                _extend_ids(eos, getattr(cfg, "eos_token_id", None))
        if vocab_size is None and model_config is not None:
            cfg_v = getattr(model_config, "vocab_size", None)
            if isinstance(cfg_v, int):
                vocab_size = cfg_v
        if name is None:
            name = str(getattr(hf_tokenizer, "name_or_path", "") or "")
        if backend is None:
            return _from_plain_vocab(hf_tokenizer, vocab_size, extra_special, eos, name)
        tok_json = json.loads(backend.to_str())
        return _from_tokenizer_json_dict(tok_json, vocab_size, extra_special, eos, name)

    @classmethod
    def from_tokenizer_json(
        cls, path: str | os.PathLike[str], *, vocab_size: int | None = None, name: str | None = None
    ) -> "TokenizerInfo":
        """Build from a ``tokenizer.json`` file (no transformers needed).

        ``tokenizer_config.json`` / ``special_tokens_map.json`` / ``config.json``
        / ``generation_config.json`` next to it, when present, supply the EOS
        token, extra special tokens and the model's logits width.
        """
        p = Path(path)
        tok_json = json.loads(p.read_text(encoding="utf-8"))
        folder = p.parent
        content_to_id = {a["content"]: int(a["id"]) for a in tok_json.get("added_tokens", [])}
        vocab_map = tok_json.get("model", {}).get("vocab")
        eos: list[int] = []
        extra_special: set[int] = set()

        def tok_id(t: Any) -> int | None:
            if isinstance(t, dict):
                t = t.get("content")
            if not isinstance(t, str):
                return None
            if t in content_to_id:
                return content_to_id[t]
            if isinstance(vocab_map, dict):
                return vocab_map.get(t)
            return None

        for fname in ("tokenizer_config.json", "special_tokens_map.json"):
            f = folder / fname
            if f.is_file():
                cfg = json.loads(f.read_text(encoding="utf-8"))
                eid = tok_id(cfg.get("eos_token"))
                if eid is not None and eid not in eos:
                    eos.append(eid)
                for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
                    i = tok_id(cfg.get(key))
                    if i is not None:
                        extra_special.add(i)
        for fname in ("config.json", "generation_config.json"):
            f = folder / fname
            if f.is_file():
                cfg = json.loads(f.read_text(encoding="utf-8"))
                _extend_ids(eos, cfg.get("eos_token_id"))
                if vocab_size is None and fname == "config.json" and isinstance(cfg.get("vocab_size"), int):
                    vocab_size = cfg["vocab_size"]
        return _from_tokenizer_json_dict(tok_json, vocab_size, extra_special, eos, name or str(p))

    @classmethod
    def from_gguf(
        cls, path: str | os.PathLike[str], *, vocab_size: int | None = None, name: str | None = None
    ) -> "TokenizerInfo":
        """Build from a GGUF file's metadata (``tokenizer.ggml.*``), read with the ``gguf`` package.

        Token types follow llama.cpp: NORMAL=1, UNKNOWN=2, CONTROL=3,
        USER_DEFINED=4, UNUSED=5, BYTE=6.  CONTROL/UNKNOWN/UNUSED are special.
        ``gpt2`` vocabularies decode NORMAL tokens through the byte map;
        ``llama`` (SentencePiece) ones unescape ``▁`` and read ``<0xNN>`` BYTE
        tokens; USER_DEFINED tokens are their raw text, as llama.cpp does.
        """
        from .gguf_file import reader as gguf_reader  # local: only this path needs gguf

        reader = gguf_reader(path)
        fields = reader.fields

        def scalar(key: str) -> Any:
            f = fields.get(key)
            if f is None:
                return None
            return f.contents()

        def str_array(key: str) -> list[str]:
            f = fields[key]
            return [bytes(f.parts[i]).decode("utf-8", errors="surrogateescape") for i in f.data]

        if "tokenizer.ggml.tokens" not in fields:
            raise StructgenError(f"{path}: GGUF file has no tokenizer.ggml.tokens")
        model = scalar("tokenizer.ggml.model") or "llama"
        tokens = str_array("tokenizer.ggml.tokens")
        tf = fields.get("tokenizer.ggml.token_type")
        types = [int(tf.parts[i][0]) for i in tf.data] if tf is not None else [1] * len(tokens)
        arch = scalar("general.architecture")
        if vocab_size is None and arch is not None:
            v = scalar(f"{arch}.vocab_size")
            if isinstance(v, int):
                vocab_size = v
        eos: list[int] = []
        for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
            _extend_ids(eos, scalar(key))

        n = len(tokens)
        vocab_size = max(vocab_size or 0, n)
        out: list[bytes] = [b""] * vocab_size
        special: set[int] = set(range(n, vocab_size))
        if model == "gpt2":
            for i, (s, t) in enumerate(zip(tokens, types)):
                if t in (2, 3, 5):
                    special.add(i)
                elif t == 4:
                    out[i] = s.encode("utf-8", errors="surrogateescape")
                else:
                    b = _byte_level_bytes(s)
                    if b is None:
                        special.add(i)  # unknown text: never allow what we cannot reproduce
                    else:
                        out[i] = b
        elif model in ("llama", "t5"):
            for i, (s, t) in enumerate(zip(tokens, types)):
                if t in (2, 3, 5):
                    special.add(i)
                elif t == 6:
                    out[i] = _sentencepiece_bytes(s, byte_fallback=True)
                else:
                    out[i] = s.replace("▁", " ").encode("utf-8", errors="surrogateescape")
        else:
            raise UnsupportedFeature(f"GGUF tokenizer model {model!r} is not supported (gpt2, llama, t5 are)")
        for i in eos:
            if 0 <= i < vocab_size:
                special.add(i)
                out[i] = b""
        for i in special:
            out[i] = b""
        special.update(i for i, b in enumerate(out) if not b)
        eos_t = tuple(i for i in eos if 0 <= i < vocab_size)
        return cls(out, vocab_size, frozenset(special), eos_t, name or Path(path).name)


# --------------------------------------------------------------------------- helpers


def _extend_ids(acc: list[int], ids: Any) -> None:
    """Append an int or a list of ints to ``acc`` keeping first-seen order, no duplicates."""
    if ids is None:
        return
    if isinstance(ids, (list, tuple, set, frozenset)):
        for i in ids:
            _extend_ids(acc, i)
        return
    try:
        i = int(ids)
    except (TypeError, ValueError):
        return
    if i >= 0 and i not in acc:
        acc.append(i)


def _decoder_types(node: Any) -> set[str]:
    """All component types of a (possibly nested Sequence) tokenizers component."""
    out: set[str] = set()
    if isinstance(node, dict):
        t = node.get("type")
        if isinstance(t, str):
            out.add(t)
        for key in ("decoders", "pretokenizers", "normalizers"):
            for sub in node.get(key) or []:
                out |= _decoder_types(sub)
        if t == "Replace":
            pat = node.get("pattern", {})
            if isinstance(pat, dict) and pat.get("String") == "▁":
                out.add("Replace▁")
    return out


def _from_tokenizer_json_dict(
    tok_json: Mapping[str, Any],
    vocab_size: int | None,
    extra_special: set[int],
    eos: list[int],
    name: str,
) -> TokenizerInfo:
    model = tok_json.get("model") or {}
    mtype = model.get("type")
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        pieces: dict[int, str] = {int(i): s for s, i in vocab.items()}
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...]
        pieces = {i: (p[0] if isinstance(p, (list, tuple)) else p) for i, p in enumerate(vocab)}
    else:
        raise UnsupportedFeature(f"{name}: tokenizer model {mtype!r} has no readable vocabulary")

    kinds = _decoder_types(tok_json.get("decoder")) | _decoder_types(tok_json.get("pre_tokenizer"))
    byte_fallback = bool(model.get("byte_fallback")) or "ByteFallback" in kinds
    if "ByteLevel" in kinds:
        scheme = "byte_level"
    elif "Metaspace" in kinds or "Replace▁" in kinds or mtype == "Unigram":
        scheme = "sentencepiece"
    elif mtype == "WordPiece" or "WordPiece" in kinds:
        raise UnsupportedFeature(
            f"{name}: WordPiece vocabularies are not supported (a token's bytes depend on its neighbours)"
        )
    else:
        scheme = "raw"

    added = {int(a["id"]): a for a in tok_json.get("added_tokens", [])}
    n = max([*pieces.keys(), *added.keys(), -1]) + 1
    if vocab_size is None:
        vocab_size = n
    vocab_size = max(vocab_size, n)

    out: list[bytes] = [b""] * vocab_size
    special: set[int] = set(range(n, vocab_size)) | {i for i in extra_special if 0 <= i < vocab_size}
    unk = model.get("unk_token")
    if isinstance(unk, str) and isinstance(vocab, dict) and unk in vocab:
        special.add(int(vocab[unk]))
    unk_id = model.get("unk_id")
    if isinstance(unk_id, int):
        special.add(unk_id)

    for i in range(n):
        a = added.get(i)
        if a is not None:
            if a.get("special"):
                special.add(i)
            else:
                out[i] = a["content"].encode("utf-8")
            continue
        s = pieces.get(i)
        if s is None:
            special.add(i)  # a hole in the id space
            continue
        if scheme == "byte_level":
            b = _byte_level_bytes(s)
            if b is None:
                special.add(i)  # text we cannot reproduce exactly: never allow it
                continue
            out[i] = b
        elif scheme == "sentencepiece":
            out[i] = _sentencepiece_bytes(s, byte_fallback)
        else:
            out[i] = s.encode("utf-8")
    for i in eos:
        if 0 <= i < vocab_size:
            special.add(i)
    for i in special:
        out[i] = b""
    special.update(i for i, b in enumerate(out) if not b)  # e.g. an empty added token
    eos_t = tuple(i for i in eos if 0 <= i < vocab_size)
    return TokenizerInfo(out, vocab_size, frozenset(special), eos_t, name)


def _from_plain_vocab(
    hf_tokenizer: Any, vocab_size: int | None, extra_special: set[int], eos: list[int], name: str
) -> TokenizerInfo:
    """Fallback for tokenizers without a ``tokenizers`` backend: guess the scheme from the vocabulary."""
    vocab: dict[str, int] = hf_tokenizer.get_vocab()
    strings = list(vocab)
    sp = sum("▁" in s for s in strings) > len(strings) // 10
    byte_fallback = any(_BYTE_FALLBACK_RE.fullmatch(s) for s in strings)
    byte_level = not sp and all(_byte_level_bytes(s) is not None for s in strings[:1000])
    added = getattr(hf_tokenizer, "added_tokens_decoder", {}) or {}
    fake = {
        "model": {"type": "BPE", "vocab": vocab, "byte_fallback": byte_fallback},
        "decoder": {"type": "ByteLevel"} if byte_level else ({"type": "Metaspace"} if sp else None),
        "added_tokens": [
            {"id": int(i), "content": str(getattr(t, "content", t)), "special": bool(getattr(t, "special", True))}
            for i, t in added.items()
        ],
    }
    return _from_tokenizer_json_dict(fake, vocab_size, extra_special, eos, name)


# --------------------------------------------------------------------------- bundled tokenizers
