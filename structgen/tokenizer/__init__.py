"""TokenizerInfo: the exact bytes every token id contributes to the output.

A grammar constrains *bytes*; a model emits *token ids*.  The bridge must be
exact, byte for byte, or the engine will allow tokens that break the
constraint (or forbid ones that satisfy it).  ``tokenizer.decode([id])`` is
not exact: byte-level BPE vocabularies hold tokens that are only part of a
UTF-8 character (SmolLM2 has over 300), and ``decode`` turns those into
U+FFFD.  So we rebuild each token's bytes from the vocabulary strings
themselves:

* byte-level BPE (GPT-2 style): each character of a token string stands for one
  byte through GPT-2's byte<->unicode table; invert it;
* SentencePiece-style (Metaspace / ``Replace("▁", " ")`` decoders): ``▁`` is a
  space, and with byte fallback ``<0xNN>`` is the single byte ``NN``;
* added tokens: special ones (control tokens) have no text -- ``b""`` and listed
  in ``special_ids``; non-special added tokens are plain text, their content's
  UTF-8 (the tokenizer matches them on the raw text).

Ids with no text at all (special/control tokens, unknown/unused tokens, holes
in the vocabulary, and padding rows of the logits beyond the tokenizer) get
``b""`` and go into ``special_ids``: a grammar must never allow them.  EOS ids
are special too; the matcher allows them (from ``eos_ids``), and only when
the constraint can end.

Building the table takes a second or more for large vocabularies (and ~5 s
through the ``gguf`` reader), so ``load_tokenizer_info`` caches it on disk.
"""
from __future__ import annotations

from .cache import load_tokenizer_info
from .sources import SMOLLM2_GGUF_NAME, deepseek_tokenizer_path, smollm2_gguf_path
from .table import TokenizerInfo
from .token_bytes import bytes_to_unicode

__all__ = [
    "TokenizerInfo",
    "load_tokenizer_info",
    "smollm2_gguf_path",
    "deepseek_tokenizer_path",
    "bytes_to_unicode",
    "SMOLLM2_GGUF_NAME",
]
