"""The functions most users call (``structgen.api``), on the tiny random Llama with the real
SmolLM2 tokenizer: outputs validate, Pydantic classes come back as instances, errors are
structgen's or ValueError with the reason."""
from __future__ import annotations

import json
import re

import jsonschema
import pytest

from structgen.api import compiler_for, generate_json, generate_regex, resolve_model, schema_prompt
from structgen.errors import GenerationError, StructgenError

SCHEMA = {"title": "Point", "description": "A point on a grid.", "type": "object",
          "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 9}, "ok": {"type": "boolean"}},
          "required": ["x", "ok"]}


def test_schema_prompt_names_the_request_and_the_schema():
    p = schema_prompt(SCHEMA)
    assert p.startswith("Create an example Point. A point on a grid.") and '"required": ["x", "ok"]' in p
    assert schema_prompt(SCHEMA, "Give me one.").startswith("Give me one.")


def test_generate_json_validates_and_reuses_the_compiler(tiny_model):
    value, result = generate_json(tiny_model, SCHEMA, max_tokens=40, return_result=True)
    jsonschema.validate(value, SCHEMA)
    assert result.finish_reason in ("eos", "terminated") and result.num_tokens <= 40
    assert compiler_for(tiny_model) is compiler_for(tiny_model)


def test_pydantic_in_pydantic_out(tiny_model):
    pydantic = pytest.importorskip("pydantic")

    class Point(pydantic.BaseModel):
        x: int
        ok: bool

    p = generate_json(tiny_model, Point, "A point.", max_tokens=40)
    assert isinstance(p, Point)


def test_generate_regex_and_samplers(tiny_model):
    out = generate_regex(tiny_model, r"(yes|no), [0-9]{2}", "Answer.", max_tokens=20)
    assert re.fullmatch(r"(yes|no), [0-9]{2}", out)
    out = generate_regex(tiny_model, r"(yes|no)", "Answer.", sampler="smc", particles=3, seed=1, max_tokens=8)
    assert out in ("yes", "no")
    with pytest.raises(ValueError, match="top_p"):
        generate_regex(tiny_model, r"(yes|no)", "Answer.", sampler="awrs", top_p=0.5)


def test_an_impossible_budget_is_a_generation_error(tiny_model):
    with pytest.raises(GenerationError) as e:
        generate_json(tiny_model, SCHEMA, max_tokens=3)
    assert e.value.reason == "budget" and "max_tokens=3" in str(e.value)


def test_bad_schemas_are_structgen_errors(tiny_model):
    with pytest.raises(StructgenError):
        generate_json(tiny_model, {"type": "object", "properties": {"a": {"minimum": "x"}}})


def test_resolve_model_passes_models_through(tiny_model):
    assert resolve_model(tiny_model) is tiny_model


BACKREFERENCE = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^([a-z]+)-\\1$"}},
                 "required": ["code"]}


def test_a_timeout_ends_generation_with_an_error_naming_the_check(tiny_model):
    """A backreference is a check at the value's end (no automaton holds it): past ``timeout`` the
    error says so, for every way of decoding (the loop, a batch, a sampler)."""
    from structgen.engine.matcher import Matcher

    grammar = compiler_for(tiny_model).compile_json_schema(BACKREFERENCE)
    said = Matcher(grammar).describe_checks()
    assert "#/properties/code" in said and "^([a-z]+)-\\\\1$" in said, said
    for kw in ({}, {"prompts": ["a", "b"]}, {"sampler": "awrs"}):
        with pytest.raises(GenerationError, match="timeout") as e:
            generate_json(tiny_model, BACKREFERENCE, max_tokens=30, timeout=1e-6, **kw)
        assert e.value.reason == "timeout", kw


def test_timeout_must_be_positive(tiny_model):
    from structgen.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="timeout"):
        generate_json(tiny_model, SCHEMA, timeout=0)


def test_a_schema_path_is_read_and_a_missing_one_named(tiny_model, tmp_path):
    from structgen.errors import SchemaError

    f = tmp_path / "point.json"
    f.write_text(json.dumps(SCHEMA))
    for given in (f, str(f)):
        assert set(generate_json(tiny_model, given, max_tokens=40)) >= set(SCHEMA.get("required", []))
    with pytest.raises(SchemaError, match="nope.json not found"):
        generate_json(tiny_model, "schemas/nope.json")


def test_a_prompt_past_the_context_fails_before_prefill(tiny_model):
    """The tiny model holds 1,024 positions: the prompt and max_tokens must fit in them."""
    long_prompt = "Tell me more. " * 400
    with pytest.raises(GenerationError, match="exceed the model's context") as e:
        generate_json(tiny_model, SCHEMA, long_prompt, max_tokens=40)
    assert e.value.reason == "context" and "1024" in str(e.value)


def test_bad_decoding_arguments_are_structgen_errors(tiny_model):
    from structgen.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="temperature"):
        generate_json(tiny_model, SCHEMA, temperature=-1)
    with pytest.raises(InvalidArgument, match="sampl"):
        generate_json(tiny_model, SCHEMA, sampler="nope")
