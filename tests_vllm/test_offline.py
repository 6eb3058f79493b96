"""Offline ``LLM`` requests of every kind structgen serves, on SmolLM2 with n-gram speculation."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import jsonschema
import lark
import pytest

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "tags"],
          "properties": {"name": {"type": "string", "maxLength": 20},
                         "tags": {"type": "array", "items": {"type": "string", "maxLength": 10},
                                  "uniqueItems": True, "minItems": 2, "maxItems": 3}}}
REGEX = r"[A-Z][a-z]{2,8} [0-9]{2}"
CHOICES = ["yes", "no", "maybe"]
GRAMMAR = 'start: "(" NUM ("+" NUM)? ("+" NUM)? ")"\nNUM: /[0-9]{1,3}/\n'
MASKBENCH = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "maskbench-dev.jsonl.gz"


def _run(llm, prompts, so, n=1, max_tokens=80, temperature=0.0):
    """Greedy by default: SmolLM2 sampled at T=1 can ramble until max_tokens (nested objects,
    blank lines), which would test the model, not the backend."""
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=max_tokens, temperature=temperature, n=n, seed=1, structured_outputs=so)
    return [o for r in llm.generate(prompts, params, use_tqdm=False) for o in r.outputs]


def _texts(outputs):
    assert all(o.finish_reason == "stop" for o in outputs), [(o.finish_reason, o.text) for o in outputs]
    return [o.text for o in outputs]


def test_json_schema_with_unique_items(llm):
    from vllm.sampling_params import StructuredOutputsParams

    outs = _run(llm, ["Name a user and two tags as JSON."], StructuredOutputsParams(json=SCHEMA))
    for text in _texts(outs):
        jsonschema.validate(json.loads(text), SCHEMA)


def test_json_object_regex_choice_and_lark(llm):
    from vllm.sampling_params import StructuredOutputsParams as P

    for text in _texts(_run(llm, ["Some JSON:"] * 2, P(json_object=True), max_tokens=160)):
        assert isinstance(json.loads(text), dict)
    for text in _texts(_run(llm, ["A name and a number:"] * 3, P(regex=REGEX))):
        assert re.fullmatch(REGEX, text), text
    for text in _texts(_run(llm, ["Yes or no?"] * 3, P(choice=CHOICES))):
        assert text in CHOICES
    parser = lark.Lark(GRAMMAR)
    for text in _texts(_run(llm, ["A sum:"] * 3, P(grammar=GRAMMAR))):
        parser.parse(text)


def test_repetitive_prompt_drives_the_ngram_drafts(llm, monkeypatch):
    """A prompt full of the output's own text makes the n-gram proposer draft, so drafts are
    pruned (validate_tokens) and rejected ones rolled back, all through structgen's matcher."""
    from vllm.sampling_params import StructuredOutputsParams

    from structgen.integrations.vllm_backend import StructgenGrammar

    calls = {"validate_tokens": [], "rollback": []}
    for name in calls:
        original = getattr(StructgenGrammar, name)

        def counted(self, arg, _original=original, _name=name):
            calls[_name].append(arg)
            return _original(self, arg)

        monkeypatch.setattr(StructgenGrammar, name, counted)
    example = json.dumps({"name": "ann", "tags": ["a", "b"]})
    prompt = f"Copy this JSON exactly: {example} {example} {example}\n"
    outs = _run(llm, [prompt] * 2, StructuredOutputsParams(json=SCHEMA), temperature=0.0)
    for text in _texts(outs):
        jsonschema.validate(json.loads(text), SCHEMA)
    assert any(len(d) > 0 for d in calls["validate_tokens"]), "no draft reached structgen"
    assert any(n > 0 for n in calls["rollback"]), "no draft was rolled back"


def _schemas_with_checks(n: int) -> list[dict]:
    """MaskBench schemas whose structgen grammar needs checks at value boundaries (uniqueItems of
    free items, required keys of large objects, overlapping oneOf...), smallest first."""
    from structgen.compiler import GrammarCompiler
    from structgen.errors import StructgenError
    from structgen.tokenizer import load_tokenizer_info

    if not MASKBENCH.exists():
        pytest.skip(f"MaskBench data not found at {MASKBENCH}")
    comp = GrammarCompiler(load_tokenizer_info("smollm2"))
    records = [json.loads(line) for line in gzip.open(MASKBENCH, "rt")]
    records.sort(key=lambda r: (len(json.dumps(r["schema"])), r["id"]))
    found = []
    for r in records:
        try:
            g = comp.compile_json_schema(r["schema"])
        except StructgenError:
            continue
        if g.checks:
            found.append(r["schema"])
            if len(found) == n:
                break
    return found


def test_schemas_needing_value_checks_never_end_a_request_with_an_error(llm):
    """vLLM ends a request with an error when accept_tokens refuses a sampled token: structgen's
    masks run the checks, so every request finishes (and what finishes validates)."""
    from vllm.sampling_params import StructuredOutputsParams

    schemas = _schemas_with_checks(8)
    assert len(schemas) == 8
    for schema in schemas:
        outs = _run(llm, ["Write a JSON value for this schema: " + json.dumps(schema)[:400]] * 2,
                    StructuredOutputsParams(json=schema), max_tokens=160)
        for o in outs:
            assert o.finish_reason in ("stop", "length"), (o.finish_reason, o.text)
            if o.finish_reason == "stop":
                jsonschema.validate(json.loads(o.text), schema)


def test_short_unique_items_sampled_never_meet_a_dead_end(llm):
    """Two-letter unique items sampled at temperature 1: a string one letter short of its maxLength
    whose only completion repeats an earlier item used to leave no token allowed, ending the
    request with an error (vLLM cannot take tokens back); the mask now looks one token ahead."""
    from vllm.sampling_params import StructuredOutputsParams

    schema = {"type": "array", "uniqueItems": True, "minItems": 4, "maxItems": 4,  # 3 earlier items never use up
              "items": {"type": "string", "minLength": 2, "maxLength": 2, "pattern": "^[a-e]*$"}}  # a first letter
    outs = _run(llm, ["Four two-letter words of the letters a to e, as a JSON array:"], StructuredOutputsParams(json=schema),
                n=16, max_tokens=60, temperature=1.0)
    assert len(outs) == 16
    for o in outs:
        assert o.finish_reason in ("stop", "length"), (o.finish_reason, o.text)
        if o.finish_reason == "stop":
            jsonschema.validate(json.loads(o.text), schema)


def test_structural_tags_served_by_structgen(llm, monkeypatch):
    """STRUCTURAL_TAG requests compile with structgen (XGrammar's semantics: at_least_one opens the
    output with a tag); the legacy format too; an unsupported shape is refused with its JSON path."""
    from vllm.sampling_params import StructuredOutputsParams

    from structgen.integrations import vllm_backend

    served = []
    original = vllm_backend.compile_request
    monkeypatch.setattr(vllm_backend, "compile_request", lambda *a: served.append(a[1].name) or original(*a))
    user = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}}, "required": ["name"],
            "additionalProperties": False}
    tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f>"],
           "tags": [{"begin": "<f>", "content": {"type": "json_schema", "json_schema": user}, "end": "</f>"}],
           "at_least_one": True, "stop_after_first": True}}
    legacy = {"structures": [{"begin": "<f>", "schema": user, "end": "</f>"}], "triggers": ["<f>"]}
    for spec in (tag, legacy):
        out = _run(llm, ["Call f with a user:"], StructuredOutputsParams(structural_tag=json.dumps(spec)),
                   max_tokens=160)[0]
        assert out.finish_reason in ("stop", "length"), (out.finish_reason, out.text)
        assert spec is legacy or out.text.startswith("<f>{"), out.text
        for body in re.findall(r"<f>(.*?)</f>", out.text, re.S):
            jsonschema.validate(json.loads(body), user)
    # each request compiles in the front end (the budget check) and in the backend: all structgen
    assert len(served) >= 2 and set(served) == {"STRUCTURAL_TAG"}, served
    bad = {"type": "structural_tag", "format": {"type": "tag", "begin": "<f>", "end": "</f>",
                                                "content": {"type": "token", "token": 1}}}
    with pytest.raises(Exception, match="/format/content/type"):
        _run(llm, ["x"], StructuredOutputsParams(structural_tag=json.dumps(bad)), max_tokens=8)


RAMBLE = {"type": "object", "additionalProperties": False, "required": ["items"],
          "properties": {"items": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                                              "required": ["name", "note"],
                                                              "properties": {"name": {"type": "string"},
                                                                             "note": {"type": "string"}}}}}}


def test_the_budget_guard_finishes_every_request_within_max_tokens(llm):
    """vLLM hands structgen the request's max_tokens: where the budget is near, the mask keeps only
    tokens after which the output can still finish, so a model that would ramble (open arrays of
    open strings, sampled at T=1) still ends valid within the budget, as in structgen's own loop."""
    from vllm.sampling_params import StructuredOutputsParams

    outs = _run(llm, ["List twenty products with a long note about each, as JSON."], StructuredOutputsParams(json=RAMBLE),
                n=8, max_tokens=48, temperature=1.0)
    for o in outs:
        assert o.finish_reason == "stop" and len(o.token_ids) <= 48, (o.finish_reason, o.text)
        jsonschema.validate(json.loads(o.text), RAMBLE)


def test_a_budget_no_output_fits_is_refused_before_the_engine(llm):
    """max_tokens below the shortest valid output: refused with the smallest budget that fits."""
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams

    schema = {"type": "object", "required": ["a_rather_long_property_name"],
              "properties": {"a_rather_long_property_name": {"type": "integer"}}}
    with pytest.raises(Exception, match="smallest budget that fits is"):
        llm.generate(["x"], SamplingParams(max_tokens=3, structured_outputs=StructuredOutputsParams(json=schema)),
                     use_tqdm=False)
