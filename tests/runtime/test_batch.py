"""Batches: one forward pass for many rows, each row decoding as it would alone."""
from __future__ import annotations

import json

import jsonschema
import pytest
import torch

from structgen.api import generate_json, generate_regex
from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import GenerationError
from structgen.runtime.batch import BatchForward, RowCache, run_batch
from structgen.runtime.budget import BudgetGuard
from structgen.runtime.kv_cache import KVCacheModel
from structgen.runtime.loop import Decoding, generate_constrained, make_drafter
from structgen.runtime.sampling import MaskedSampler

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                           "kind": {"enum": ["alpha", "beta"]}, "n": {"type": "integer"}},
          "required": ["name", "kind", "n"], "additionalProperties": False}
USERS = ["Invent a thing.", "Describe a small blue bird in a few words, please.", "x", "Name one beta item and a count."]


def test_rows_with_ragged_prompts_and_holes_see_what_they_would_alone(tiny_model):
    """Two rows through one BatchForward (different prompt lengths, one rolled back) give the logits
    each gets from its own KV cache."""
    a, b = [1, 5, 9, 200, 31, 77], [1, 8]
    batch = BatchForward(tiny_model.hf_model, 2)
    ra, rb = RowCache(batch, 0), RowCache(batch, 1)
    out: dict = {}

    def row_a():
        out["a1"] = ra.forward(a)
        out["a2"] = ra.forward([40, 41, 42])
        ra.crop(len(a) + 1)  # 41 and 42 rejected: holes
        out["a3"] = ra.forward([43])
        batch.leave(0)

    def row_b():
        out["b1"] = rb.forward(b)
        out["b2"] = rb.forward([50])
        out["b3"] = rb.forward([51, 52])
        batch.leave(1)

    import threading

    ts = [threading.Thread(target=row_a), threading.Thread(target=row_b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    solo = KVCacheModel(tiny_model.hf_model)
    ref_a1, ref_a2 = solo.forward(a), solo.forward([40, 41, 42])
    solo.crop(len(a) + 1)
    ref_a3 = solo.forward([43])
    solo = KVCacheModel(tiny_model.hf_model)
    ref_b1, ref_b2, ref_b3 = solo.forward(b), solo.forward([50]), solo.forward([51, 52])
    for got, ref in ((out["a1"], ref_a1), (out["a2"], ref_a2), (out["a3"], ref_a3),
                     (out["b1"], ref_b1), (out["b2"], ref_b2), (out["b3"], ref_b3)):
        assert got.shape == ref.shape
        torch.testing.assert_close(got, ref, atol=2e-4, rtol=1e-4)


@pytest.mark.parametrize("speculative", [False, True])
def test_batch_rows_equal_single_prompts_under_greedy(tiny_model, smol_info, speculative):
    g = GrammarCompiler(smol_info).compile_json_schema(SCHEMA, whitespace="compact")
    prompts = [tiny_model.encode(tiny_model.chat_prompt(u)) for u in USERS]
    singles = []
    for p in prompts:
        m = Matcher(g)
        singles.append(generate_constrained(tiny_model, p, m, max_tokens=40, budget_guard=BudgetGuard(m),
                                            speculative=speculative))

    def make(p):
        def f(kv):
            m = Matcher(g)
            return Decoding(tiny_model, p, m, max_tokens=40, sampler=MaskedSampler(), budget_guard=BudgetGuard(m),
                            drafter=make_drafter(tiny_model, speculative), kv=kv)
        return f

    rows = run_batch(tiny_model.hf_model, [make(p) for p in prompts])
    assert [r.token_ids for r in rows] == [s.token_ids for s in singles]
    stats = run_batch.last_stats
    assert stats["forward_passes"] <= max(s.forward_passes for s in singles)  # lockstep: one pass per step


def test_generate_json_with_prompts_returns_one_valid_value_per_prompt(tiny_model):
    values = generate_json(tiny_model, SCHEMA, prompts=USERS, max_tokens=40)
    assert len(values) == len(USERS)
    for v, u in zip(values, USERS):
        jsonschema.validate(v, SCHEMA)
        assert v == generate_json(tiny_model, SCHEMA, u, max_tokens=40)
    pairs = generate_json(tiny_model, SCHEMA, prompts=USERS[:2], max_tokens=40, return_result=True)
    assert json.loads(pairs[1][1].text) == pairs[1][0]


def test_a_failing_row_is_named_or_returned(tiny_model):
    with pytest.raises(GenerationError, match="prompt 0"):
        generate_json(tiny_model, SCHEMA, prompts=USERS[:2], max_tokens=5)
    out = generate_json(tiny_model, SCHEMA, prompts=USERS[:2], max_tokens=5, return_exceptions=True)
    assert all(isinstance(e, GenerationError) for e in out)
    with pytest.raises(ValueError):
        generate_json(tiny_model, SCHEMA, "one", prompts=["two"])


def test_regex_batch_with_seeds_is_reproducible(tiny_model):
    kw = dict(prompts=["a", "bb", "ccc"], max_tokens=12, temperature=1.0, seed=3)
    first = generate_regex(tiny_model, r"[a-c]{2,5}-(x|y)", **kw)
    assert first == generate_regex(tiny_model, r"[a-c]{2,5}-(x|y)", **kw)
    assert all(len(t) >= 4 for t in first)


@pytest.mark.slow
@pytest.mark.minutes  # 25 s on the real model
def test_batch_equals_single_prompts_on_the_real_model(smol, smol_dense):
    """Token for token on the dense weights; on the 4-bit default (bf16 activations round differently
    in a padded batch) every row valid."""
    from pathlib import Path

    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "person.json").read_text())
    users = ["Invent a person.", "A French painter.", "A Japanese engineer who speaks three languages."]
    batch = generate_json(smol_dense, schema, prompts=users, max_tokens=60)
    assert batch == [generate_json(smol_dense, schema, u, max_tokens=60) for u in users]
    for value in generate_json(smol, schema, prompts=users, max_tokens=60):
        jsonschema.validate(value, schema)
