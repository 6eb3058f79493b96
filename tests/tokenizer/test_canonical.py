"""The canonical-tokenization filter (structgen/tokenizer/canonical.py) against the tokenizer's own
``encode``: on random texts, ``encode(text)`` is accepted at every step, and it is the only
tokenization of the text the filter accepts."""
from __future__ import annotations

import random

import numpy as np
import pytest

from canonical_texts import TokenIndex, accepted_tokenizations, has_exotic_space, random_text
from structgen.errors import UnsupportedFeature
from structgen.tokenizer.canonical import CanonicalFilter


@pytest.fixture(scope="module")
def smol(smol_info, smol_hf_tokenizer):
    backend = smol_hf_tokenizer.backend_tokenizer

    def encode(texts):
        return [e.ids for e in backend.encode_batch(list(texts), add_special_tokens=False)]

    filt = CanonicalFilter.from_tokenizer_json(backend.to_str(), smol_info.token_bytes, smol_info.eos_ids,
                                               hf_encode=encode)
    return filt, encode, smol_info, TokenIndex(smol_info.token_bytes)


def _check(smol, texts):
    filt, encode, info, index = smol
    rejected, other = [], []
    for text, ids in zip(texts, encode(texts)):
        if filt.first_rejection(ids) is not None:
            rejected.append(text)
            continue
        acc = accepted_tokenizations(filt, index, text.encode())
        if acc != [ids]:
            other.append(text)
    return rejected, other


def _toks(smol, *pieces: str) -> list[int]:
    filt, encode, info, _ = smol
    by = {b: i for i, b in enumerate(info.token_bytes) if b}
    return [by[p.encode()] for p in pieces]


def test_bpe_splits_are_refused(smol):
    filt, encode, *_ = smol
    assert encode(["red cat"])[0] == _toks(smol, "red", " cat")
    assert filt.accepts(_toks(smol, "red", " cat"))
    assert not filt.accepts(_toks(smol, "red", " c", "at"))
    assert not filt.accepts(_toks(smol, "red", " ", "cat"))
    assert filt.first_rejection(_toks(smol, "red", " c", "at")) == 2


def test_pre_token_boundaries(smol):
    filt, encode, *_ = smol
    # "it's": the contraction is its own pre-token, whatever BPE could merge
    assert filt.accepts(encode(["it's"])[0])
    # a whitespace run before text leaves its last space to the word; before the end it keeps it
    assert filt.accepts(encode(["a  b"])[0]) and filt.accepts(encode(["a  "])[0])
    two = _toks(smol, "a", "  ")
    assert filt.accepts(two)  # "a  " at the end
    s = filt.start
    for t in two:
        s = filt.advance(s, t)
    assert not filt.allowed(s)[_toks(smol, "b")[0]]  # "  " then "b" would be "a", " ", " b"
    # "\t\n" before text: "\t" and "\n" are pre-tokens of their own only before a non-space
    ids = encode([" \t\nx"])[0]
    assert filt.accepts(ids)


def test_the_flag_decides_the_end(smol):
    filt, encode, *_ = smol
    ids = encode(["x  \n"])[0]  # the run at the end is one pre-token
    assert filt.accepts(ids)
    ids2 = encode(["x  \ny"])[0]  # before text the run splits differently
    assert filt.accepts(ids2)
    assert ids2[: len(ids)] != ids or len(ids2) == len(ids) + 1


def test_masks_are_bool_vectors_and_eos_follows_the_flag(smol):
    filt, *_ = smol
    m = filt.allowed(filt.start)
    assert m.dtype == np.bool_ and m.shape == (filt.vocab_size,)
    assert not m[list(filt.eos_ids)].any()
    assert filt.can_end(filt.start)


@pytest.mark.parametrize("seed", [0, 1])
def test_random_texts(smol, seed):
    rng = random.Random(seed)
    texts = [t for t in (random_text(rng) for _ in range(80)) if not has_exotic_space(t)]
    rejected, other = _check(smol, texts)
    assert not rejected and not other, (rejected[:3], other[:3])


@pytest.mark.slow
@pytest.mark.minutes  # ~70 ms a text: `make test-slow`
def test_ten_thousand_random_texts(smol):
    """10,000 random texts: exact on every one without a non-ASCII whitespace character; the one
    known gap (such a character split across two tokens where the pre-tokenizer's verdict depends on
    how the character completes: U+00A0 after a whitespace run) is counted: 78 of the 676 texts that
    hold one on this seed (0.8% of all texts), bounded here at 15% of them."""
    rng = random.Random(1234)
    texts = [random_text(rng) for _ in range(10_000)]
    plain = [t for t in texts if not has_exotic_space(t)]
    rejected, other = _check(smol, plain)
    assert not rejected and not other, (len(rejected), len(other), rejected[:3], other[:3])
    exotic = [t for t in texts if has_exotic_space(t)]
    rej2, other2 = _check(smol, exotic)
    assert len(rej2) + len(other2) <= 0.15 * len(exotic)


def test_sentencepiece_is_refused():
    tok = {"model": {"type": "Unigram", "vocab": [["a", 0.0]]}, "pre_tokenizer": {"type": "Metaspace"}}
    with pytest.raises(UnsupportedFeature):
        CanonicalFilter.from_tokenizer_json(tok, [b"a"], use_cache=False)


def toy_filter():
    """The toy harness's vocabulary ("0", "1", "00", "11", EOS) as a BPE with merges 0+0, 1+1."""
    tok = {"model": {"type": "BPE", "vocab": {"0": 0, "1": 1, "00": 2, "11": 3}, "merges": ["0 0", "1 1"]},
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}, "normalizer": None}
    return CanonicalFilter.from_tokenizer_json(tok, [b"0", b"1", b"00", b"11", b""], (4,), use_cache=False)


def test_toy_bpe():
    f = toy_filter()
    assert f.accepts([2, 0]) and not f.accepts([0, 2]) and not f.accepts([0, 0])  # "000" = 00|0
    assert f.accepts([1, 2, 0, 1]) and not f.accepts([1, 0, 2, 1])  # "10001" = 1|00|0|1
