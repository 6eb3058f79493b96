"""Speculative decoding: drafts verified in one forward pass give exactly plain decoding's output."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.runtime.budget import BudgetGuard
from structgen.runtime.drafts import Drafter, PromptLookup, forced_token_encoder
from structgen.runtime.loop import Decoding, generate_constrained, generate_unconstrained

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "kind": {"enum": ["alpha", "beta", "gamma"]},
                                           "tags": {"type": "array", "items": {"const": "fixed-tag"}, "maxItems": 3},
                                           "n": {"type": "integer"}},
          "required": ["name", "kind", "tags", "n"], "additionalProperties": False}
REGEX = r"(id|ID)-[0-9]{3}: (accepted|rejected) by reviewer-[a-c]"
LARK = r"""
start: "SELECT " cols " FROM " NAME ";"
cols: NAME (", " NAME)*
NAME: /[a-z]{1,8}/
"""


@pytest.fixture(scope="module")
def compiler(smol_info):
    return GrammarCompiler(smol_info)


@pytest.fixture(scope="module")
def grammars(compiler):
    return {"schema": compiler.compile_json_schema(SCHEMA, whitespace="compact"),
            "regex": compiler.compile_regex(REGEX), "lark": compiler.compile_lark(LARK)}


@pytest.fixture()
def prompt(tiny_model):
    # the prompt holds the schema's words, so prompt lookup has something to find
    return tiny_model.encode(tiny_model.chat_prompt("Reply with JSON: " + json.dumps(SCHEMA) + " " + REGEX))


def _run(model, prompt, grammar, speculative, **kw):
    m = Matcher(grammar)
    return generate_constrained(model, prompt, m, budget_guard=BudgetGuard(m), speculative=speculative, **kw)


@pytest.mark.parametrize("kind", ["schema", "regex", "lark"])
@pytest.mark.parametrize("drafter", ["default", "forced", "lookup"])
def test_greedy_output_is_identical_with_and_without_speculation(tiny_model, prompt, grammars, kind, drafter):
    spec = {"default": True, "forced": Drafter(tiny_model, lookup=False),
            "lookup": Drafter(tiny_model, forced=False, max_draft=4)}[drafter]
    plain = _run(tiny_model, prompt, grammars[kind], False, max_tokens=80)
    fast = _run(tiny_model, prompt, grammars[kind], spec, max_tokens=80)
    assert fast.token_ids == plain.token_ids and fast.finish_reason == plain.finish_reason
    assert fast.forward_passes <= plain.forward_passes
    stats = fast.extra["speculation"]
    assert sum(stats["accepted"].values()) <= sum(stats["drafted"].values())
    assert fast.forward_passes + sum(stats["accepted"].values()) == plain.forward_passes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_seeded_sample_is_identical_with_and_without_speculation(tiny_model, prompt, grammars, seed):
    """Verification runs the plain step on each row, drawing from the same generator in the same order."""
    kw = dict(max_tokens=80, temperature=1.0, top_p=0.9, seed=seed)
    assert (_run(tiny_model, prompt, grammars["schema"], True, **kw).token_ids
            == _run(tiny_model, prompt, grammars["schema"], False, **kw).token_ids)


def test_sampling_distribution_is_unchanged_chi_square(tiny_model, compiler):
    """Different seeds for the two arms: their output frequencies over a small language agree (chi^2)."""
    grammar = compiler.compile_regex(r"(a|b|ab|ba)(c|d)?x")
    prompt = tiny_model.encode("pick")
    n = 300
    counts: dict[str, list[int]] = {}
    for arm, (spec, base) in enumerate(((True, 0), (False, 10_000))):
        for i in range(n):
            r = _run(tiny_model, prompt, grammar, spec, max_tokens=8, temperature=1.0, seed=base + i)
            counts.setdefault(r.text, [0, 0])[arm] += 1
    table = np.array([c for c in counts.values()], dtype=float)
    table = table[table.sum(axis=1) >= 5]  # pool rare outcomes out of the test, as chi^2 needs
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True) / table.sum()
    chi2 = float(((table - expected) ** 2 / expected).sum())
    dof = table.shape[0] - 1
    assert dof >= 3
    # p > 0.001: the critical value of chi^2 at dof <= 20 is below 3 dof + 20
    assert chi2 < 3 * dof + 20, (chi2, dof, counts)


@pytest.mark.parametrize("kind", ["schema", "lark"])
def test_tight_budgets_still_finish_and_match_plain_decoding(tiny_model, prompt, grammars, kind):
    g = grammars[kind]
    need = BudgetGuard(Matcher(g)).tokens_needed(1)
    for budget in range(need, need + 6):
        plain = _run(tiny_model, prompt, g, False, max_tokens=budget)
        fast = _run(tiny_model, prompt, g, True, max_tokens=budget)
        assert fast.token_ids == plain.token_ids
        assert fast.num_tokens + 1 <= budget  # EOS included
        m = Matcher(g)
        assert all(m.accept_token(t) for t in fast.token_ids) and m.is_accepting()


@pytest.fixture()
def following_model(tiny_model):
    """The tiny model pushed towards the canonical tokens of one JSON text: greedy writes exactly
    those tokens, so forced drafts are kept."""
    target = '{"name":"Ada","kind":"beta","tags":["fixed-tag","fixed-tag"],"n":7}'
    ids = tiny_model.encode(target)
    lm_head = tiny_model.hf_model.get_output_embeddings()

    def boost(_module, _inp, out):
        out = out.clone()
        out[..., ids] += 1000.0
        out[..., tiny_model.info.eos_ids[0]] += 500.0
        return out

    handle = lm_head.register_forward_hook(boost)
    yield tiny_model, target
    handle.remove()


def test_forced_drafts_are_kept_when_the_model_writes_them(following_model, prompt, grammars):
    model, target = following_model
    plain = _run(model, prompt, grammars["schema"], False, max_tokens=80)
    fast = _run(model, prompt, grammars["schema"], Drafter(model, lookup=False), max_tokens=80)
    assert fast.token_ids == plain.token_ids
    assert '"kind":"beta","tags":["fixed-tag"' in fast.text  # what the boosted tokens spell
    stats = fast.extra["speculation"]
    assert stats["accepted"]["forced"] >= 8  # keys, punctuation, the const item
    assert fast.forward_passes <= plain.forward_passes - 8


def test_unconstrained_decoding_with_prompt_lookup_is_unchanged(tiny_model, prompt):
    plain = generate_unconstrained(tiny_model, prompt, max_tokens=40, stop_at_eos=False)
    fast = generate_unconstrained(tiny_model, prompt, max_tokens=40, stop_at_eos=False, speculative=True)
    assert fast.token_ids == plain.token_ids and fast.finish_reason == "length"


def test_streamed_tokens_equal_the_result(tiny_model, prompt, grammars):
    m = Matcher(grammars["schema"])
    d = Decoding(tiny_model, prompt, m, max_tokens=80, budget_guard=BudgetGuard(m), drafter=Drafter(tiny_model))
    streamed = list(d)
    assert streamed == d.result().token_ids


def test_prompt_lookup_proposes_what_followed_the_last_ngram():
    lookup = PromptLookup(max_ngram=3)
    ctx = [5, 6, 7, 8, 9, 1, 2, 6, 7]
    assert lookup.propose(ctx, 3) == [8, 9, 1]
    assert lookup.propose([1, 2, 3], 2) == []
    assert lookup.propose([4, 4], 2) == [4]  # the most recent earlier occurrence, cut at the context's end
    with pytest.raises(ValueError):
        PromptLookup(max_ngram=0)


def test_forced_tokens_back_off_where_a_longer_token_may_follow(tiny_model, compiler):
    """After a key the grammar forces ``"`` and then ``:``; SmolLM2 has ``":`` as one token, so a
    draft must not end in a lone ``"``."""
    g = compiler.compile_json_schema({"type": "object", "properties": {"key": {"type": "integer"}},
                                      "required": ["key"], "additionalProperties": False}, whitespace="compact")
    m = Matcher(g)
    drafter = Drafter(tiny_model, lookup=False)
    assert m.forced_continuation() == b'{"key":'
    draft, sources = drafter.propose(m, [1], 8)
    tb = tiny_model.info.token_bytes
    assert b"".join(tb[t] for t in draft) == b'{"key":'[:sum(len(tb[t]) for t in draft)]
    assert sources == ["forced"] * len(draft)
    assert m.forced_continuation() == b'{"key":'  # the matcher's state is unchanged
    m2 = Matcher(g)
    assert m2.accept_string('{"key"')
    d2, _ = drafter.propose(m2, [1], 8)
    assert [tb[t] for t in d2] != [b'"'] or not d2


def test_forced_encoder_cuts_an_incomplete_utf8_tail(tiny_model):
    enc = forced_token_encoder(tiny_model)
    whole = enc("é".encode())
    assert enc("é".encode() + b"\xe2\x82") == whole  # the first two bytes of a 3-byte character


@pytest.mark.minutes
@pytest.mark.slow
def test_greedy_identity_on_the_real_model(smol):
    """The example schema, regex and grammar files and JSONSchemaBench dev schemas on SmolLM2."""
    import gzip
    import itertools
    from pathlib import Path

    from structgen.api import compiler_for, schema_prompt

    root = Path(__file__).resolve().parents[2]
    comp = compiler_for(smol)
    cases = []
    for path in sorted((root / "schemas").glob("*.json")):
        schema = json.loads(path.read_text())
        cases.append((comp.compile_json_schema(schema), schema_prompt(schema, None)))
    cases.append((comp.compile_regex(r"\d{4}-\d{2}-\d{2}"), "When did the Berlin wall fall? Answer with a date."))
    cases.append((comp.compile_lark(root / "grammars" / "sql.lark"), "Names of users older than 30, as SQL."))
    data = root.parent / "shared" / "data" / "jsonschemabench-dev.jsonl.gz"
    if data.exists():
        with gzip.open(data, "rt") as f:
            rows = [json.loads(line) for line in itertools.islice(f, 0, 400, 134)]
        for row in rows:
            schema = row["json_schema"]
            try:
                g = comp.compile_json_schema(schema)
            except Exception:  # noqa: BLE001 - a schema structgen refuses is not what this test is about
                continue
            cases.append((g, schema_prompt(schema, None)[:2000]))
    kept = 0
    for g, user in cases:
        ids = smol.encode(smol.chat_prompt(user))
        budget = max(40, BudgetGuard(Matcher(g)).tokens_needed(40))
        plain = _run(smol, ids, g, False, max_tokens=budget)
        fast = _run(smol, ids, g, True, max_tokens=budget)
        assert fast.token_ids == plain.token_ids, user[:80]
        kept += sum(fast.extra["speculation"]["accepted"].values())
    assert kept > 0 and not math.isnan(kept)
