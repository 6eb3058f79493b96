"""StructgenLogitsProcessor: transformers' generate() under a structgen grammar.

The reference is structgen's own loop (generate_constrained): for greedy
decoding on the same prompt and constraint, generate() with the processor must
choose exactly the same tokens, then EOS.
"""
from __future__ import annotations

import json
import re

import jsonschema
import pytest
import torch
from transformers import LogitsProcessorList

from structgen.api import compiler_for
from structgen.runtime.loop import generate_constrained
from structgen.engine.matcher import Matcher
from structgen.errors import GenerationError
from structgen.integrations.transformers import (StructgenLogitsProcessor, grammar_logits_processor,
                                                 json_logits_processor, regex_logits_processor)

ITEM = {
    "type": "object",
    "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 999},
                   "kind": {"enum": ["book", "pen"]},
                   "tag": {"type": "string", "maxLength": 6}},
    "required": ["id", "kind", "tag"],
    "additionalProperties": False,
}
FLAG = {"type": "object", "properties": {"ok": {"type": "boolean"}, "level": {"enum": ["low", "high"]}},
        "required": ["ok", "level"], "additionalProperties": False}
DATE = r"20\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d)"


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread(one_torch_thread):
    """One torch thread for this module's tiny-model runs (see conftest.one_torch_thread)."""
    yield


def _prompt(model, text: str) -> list[int]:
    return model.encode(model.chat_prompt(text))


def _hf_generate(model, prompts: list[list[int]], proc, max_new_tokens: int, **kw) -> list[list[int]]:
    """generate() on left-padded prompts; the generated ids of each row, cut at the first EOS (kept)."""
    pad = model.hf_model.generation_config.pad_token_id
    width = max(map(len, prompts))
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    out = model.hf_model.generate(ids, attention_mask=mask, logits_processor=LogitsProcessorList([proc]),
                                  max_new_tokens=max_new_tokens, **kw)
    rows = []
    eos = set(model.info.eos_ids)
    for r in out[:, width:].tolist():
        cut = next((i for i, t in enumerate(r) if t in eos), len(r))
        rows.append(r[: cut + 1])
    return rows


def _loop(model, prompt: list[int], grammar, max_tokens: int) -> list[int]:
    """structgen's loop; with the EOS generate() emits after it (EOS chosen, or the only token left)."""
    res = generate_constrained(model, prompt, Matcher(grammar), max_tokens=max_tokens)
    return res.token_ids + [model.info.eos_ids[0]]


@pytest.mark.parametrize("kind", ["json", "regex"])
def test_greedy_generate_matches_structgen_loop(tiny_model, kind):
    comp = compiler_for(tiny_model)
    grammar = comp.compile_json_schema(ITEM, whitespace="compact") if kind == "json" else comp.compile_regex(DATE)
    prompt = _prompt(tiny_model, "Give me one item.")
    proc = StructgenLogitsProcessor(grammar, tiny_model)
    (row,) = _hf_generate(tiny_model, [prompt], proc, 60, do_sample=False)
    assert row == _loop(tiny_model, prompt, grammar, 60)
    text = tiny_model.decode(row[:-1])
    assert proc.is_complete() and proc.output_text() == text
    if kind == "json":
        jsonschema.validate(json.loads(text), ITEM)
    else:
        assert re.fullmatch(DATE, text)


def test_batch_rows_with_different_schemas(tiny_model):
    """Two rows, two schemas, prompts of different lengths (left padding): each row is valid for its own
    schema, and a row that finishes first only gets EOS (then padding) while the other goes on."""
    prompts = [_prompt(tiny_model, "An item, please."), _prompt(tiny_model, "A flag for the report, please.")]
    assert len(prompts[0]) != len(prompts[1])
    proc = json_logits_processor(tiny_model, [ITEM, FLAG])
    rows = _hf_generate(tiny_model, prompts, proc, 60, do_sample=False)
    for row, schema in zip(rows, [ITEM, FLAG]):
        assert row[-1] in tiny_model.info.eos_ids
        jsonschema.validate(json.loads(tiny_model.decode(row[:-1])), schema)
    assert len(rows[0]) != len(rows[1])  # one row padded after its EOS while the other continued
    # unpadded, a row is exactly what structgen's loop produces for it
    comp = compiler_for(tiny_model)
    solo = _hf_generate(tiny_model, [prompts[1]], json_logits_processor(tiny_model, FLAG), 60, do_sample=False)
    assert solo[0] == _loop(tiny_model, prompts[1], comp.compile_json_schema(FLAG, whitespace="compact"), 60)


def test_sampling_and_beam_search_stay_valid(tiny_model):
    prompt = _prompt(tiny_model, "Give me one item.")
    torch.manual_seed(1)
    (row,) = _hf_generate(tiny_model, [prompt], json_logits_processor(tiny_model, ITEM), 60, do_sample=True,
                          temperature=1.5, top_k=0, top_p=1.0)
    jsonschema.validate(json.loads(tiny_model.decode(row[:-1])), ITEM)
    # beams reorder rows between steps: the processor re-syncs each row's matcher from input_ids
    (beam,) = _hf_generate(tiny_model, [prompt], regex_logits_processor(tiny_model, DATE), 30, do_sample=False,
                           num_beams=3)
    assert re.fullmatch(DATE, tiny_model.decode(beam[:-1]))


def test_lark_grammar_processor(tiny_model):
    grammar = 'start: "SELECT " NAME " FROM " NAME ";"\nNAME: /[a-z]{1,8}/'
    (row,) = _hf_generate(tiny_model, [_prompt(tiny_model, "A query.")], grammar_logits_processor(tiny_model, grammar),
                          40, do_sample=False)
    assert re.fullmatch(r"SELECT [a-z]{1,8} FROM [a-z]{1,8};", tiny_model.decode(row[:-1]))


def test_processor_checks_its_inputs(tiny_model, deepseek_info):
    comp = compiler_for(tiny_model)
    g = comp.compile_regex("a+")
    with pytest.raises(ValueError, match="vocabulary"):
        StructgenLogitsProcessor(g, deepseek_info)
    with pytest.raises(TypeError):
        StructgenLogitsProcessor(g, object())
    proc = StructgenLogitsProcessor([g, g], tiny_model)
    with pytest.raises(ValueError, match="2 grammars for a batch of 1"):
        proc(torch.tensor([[1, 2, 3]]), torch.zeros(1, tiny_model.info.vocab_size))
    # a token the grammar rejects (the mask was bypassed) is an error, not silently ignored
    proc = StructgenLogitsProcessor(g, tiny_model)
    scores = proc(torch.tensor([[1, 2]]), torch.zeros(1, tiny_model.info.vocab_size))
    a = tiny_model.encode("a")[0]
    assert scores[0, a] == 0 and torch.isinf(scores[0, tiny_model.encode("b")[0]])
    with pytest.raises(GenerationError, match="not allowed"):
        proc(torch.tensor([[1, 2, tiny_model.encode("b")[0]]]), torch.zeros(1, tiny_model.info.vocab_size))
    # padded logits (wider than the vocabulary) are masked too
    proc = StructgenLogitsProcessor(g, tiny_model)
    wide = proc(torch.tensor([[1, 2]]), torch.zeros(1, tiny_model.info.vocab_size + 64))
    assert torch.isinf(wide[0, tiny_model.info.vocab_size:]).all()


@pytest.mark.slow
def test_real_smollm2_generate_matches_structgen_loop():
    from structgen.models import load_model

    model = load_model()
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                               "country": {"type": "string", "maxLength": 20}},
              "required": ["city", "country"], "additionalProperties": False}
    grammar = compiler_for(model).compile_json_schema(schema, whitespace="compact")
    prompt = _prompt(model, "Name the capital of France and its country as JSON.")
    (row,) = _hf_generate(model, [prompt], StructgenLogitsProcessor(grammar, model), 40, do_sample=False)
    assert row == _loop(model, prompt, grammar, 40)
    value = json.loads(model.decode(row[:-1]))
    jsonschema.validate(value, schema)
