"""Length bounds counted by the mask (``structgen.engine.char_bounds``) where a pattern's or format's
product with ``maxLength`` is too large for one automaton.

The reference is the same schema compiled with the automaton limit raised, so that the product is
built and the masks are exact with no check: along random walks the two masks must be equal, and
walks over the mask with no rollback must never reach a state where nothing is allowed."""
from __future__ import annotations

import json
import random
import zlib

import jsonschema
import numpy as np
import pytest

import structgen.automata.fsa as fsa
from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from engine_helpers import masks_agree_along_walks

WORDS = r"^(?:\S+\s+){0,9}\S+$"  # ten words: with maxLength 120, a 68,000-state product
DOTTED = r'^[^\.\s\\/:\*\?"<>\|\x01-\x1f]{1,32}(\.[^\.\s\\/:\*\?"<>\|\x01-\x1f]{1,32}){1,7}$'  # winget's ids

CASES = {
    "words, 10..120 characters, the whole output": {"type": "string", "pattern": WORDS, "minLength": 10,
                                                    "maxLength": 120},
    "dotted identifier in an object": {"type": "object", "properties": {"id": {"type": "string", "pattern": DOTTED,
                                                                               "maxLength": 128}},
                                       "required": ["id"], "additionalProperties": False},
    "email items": {"type": "array", "items": {"type": "string", "format": "email", "maxLength": 255},
                    "minItems": 1, "maxItems": 2},
}


def _ids(words: np.ndarray, vocab: int) -> np.ndarray:
    return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab])


def _walk_token(rng: random.Random, ids: np.ndarray, eos: tuple, tb: list, long_first: bool) -> int:
    """A token of the mask, drawn so that strings grow long (the bounds are what is tested)."""
    pick = [int(t) for t in ids if t not in eos]
    if not pick:
        return int(ids[0])
    if long_first and rng.random() < 0.7:
        pick.sort(key=lambda t: -len(tb[t]))
        pick = pick[:50]
    return rng.choice(pick)


@pytest.mark.parametrize("name", list(CASES))
def test_counted_masks_equal_the_exact_product(smol_info, monkeypatch, name):
    schema = CASES[name]
    counted = GrammarCompiler(smol_info).compile_json_schema(schema)
    assert counted.char_bounds, "the product should be over the automaton limit (the case tests nothing)"
    monkeypatch.setattr(fsa, "MAX_DFA_STATES", 1_000_000)
    exact = GrammarCompiler(smol_info).compile_json_schema(schema)
    assert not exact.char_bounds and not exact.checks
    tb = smol_info.token_bytes
    steps = masks_agree_along_walks(
        counted, exact, random.Random(zlib.crc32(name.encode())),
        lambda rng, ids, walk: _walk_token(rng, ids, counted.eos_ids, tb, walk % 2 == 0), walks=8, steps=160)
    assert steps > 60


@pytest.mark.parametrize("name", list(CASES))
def test_no_dead_end_without_rollback(smol_info, name):
    schema = CASES[name]
    g = GrammarCompiler(smol_info).compile_json_schema(schema)
    tb = smol_info.token_bytes
    rng = random.Random(7)
    finished = 0
    for _ in range(8):
        m = Matcher(g)
        for _ in range(300):
            ids = _ids(m.next_token_mask(), g.vocab_size)
            assert len(ids), f"dead end after {m.output_bytes()!r}"
            t = _walk_token(rng, ids, g.eos_ids if rng.random() < 0.97 else (), tb, True)
            assert m.accept_token(t)
            if m.is_terminated():
                jsonschema.validate(json.loads(m.output_bytes()), schema,
                                    format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
                finished += 1
                break
    assert finished >= 4


def test_strings_reach_the_bound(smol_info):
    """Counting does not cut strings short: walks that keep writing end exactly at maxLength."""
    schema = CASES["dotted identifier in an object"]
    g = GrammarCompiler(smol_info).compile_json_schema(schema)
    rng = random.Random(3)
    lengths = []
    for _ in range(4):
        m = Matcher(g)
        while not m.is_terminated():
            ids = _ids(m.next_token_mask(), g.vocab_size)
            t = _walk_token(rng, ids, g.eos_ids, smol_info.token_bytes, True)
            assert m.accept_token(t)
        lengths.append(len(json.loads(m.output_bytes())["id"]))
    assert max(lengths) == 128
