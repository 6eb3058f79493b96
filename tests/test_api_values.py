"""What generate_json writes inside the format: the prompt it builds (schema_prompt), the members it
writes (members="named"), integers as ints, values grounded in a source text (source=)."""
from __future__ import annotations

import json

import pytest

from structgen import generate_json
from structgen.errors import InvalidArgument
from structgen.runtime.prompts import request_prompt, schema_instruction
from structgen.runtime.schema_text import describe_schema, fit_description

PERSON = {"title": "Person", "description": "A contact.", "type": "object",
          "properties": {"name": {"type": "string", "description": "The person's first name", "maxLength": 20},
                         "age": {"type": "integer", "minimum": 0, "maximum": 130},
                         "email": {"type": "string", "format": "email"},
                         "role": {"enum": ["engineer", "doctor", "teacher"]},
                         "address": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}}},
          "required": ["name", "age"]}


def _huge_schema(n: int = 400) -> dict:
    """An object of ``n`` documented fields: its JSON text alone is longer than an 8k context."""
    props = {f"setting_{i}": {"type": "string", "maxLength": 10,
                              "description": f"What setting number {i} of the tool does, in a long sentence that "
                                             f"explains its default, its history and when to change it."}
             for i in range(n)}
    return {"type": "object", "properties": props, "required": ["setting_0"]}


def test_the_description_names_fields_types_bounds_and_puts_descriptions_as_context():
    text = describe_schema(PERSON)
    assert "- name (string, at most 20 characters, required): The person's first name" in text
    assert "- age (integer, at least 0, at most 130, required)" in text
    assert 'one of "engineer", "doctor", "teacher"' in text and "format email" in text
    assert "  - city (string" in text  # nested fields under their parent
    assert "(A contact)" in text.splitlines()[0]  # the root's description is context in the header
    assert '"title"' not in text and '"type"' not in text  # no JSON Schema keywords to copy


def test_descriptions_shrink_to_the_budget_and_vanish_when_nothing_fits():
    count = len  # characters stand in for tokens
    big = _huge_schema(60)
    full = describe_schema(big)
    shrunk = fit_description(big, count, len(full) // 3)
    assert shrunk is not None and len(shrunk) <= len(full) // 3 and "setting_0" in shrunk
    assert fit_description(big, count, 5) is None
    assert schema_instruction(big, "compact", count, room=0) is None
    assert json.dumps(big) in schema_instruction(big, "full", count, room=0)  # "full" is what the user asked


def test_request_prompt_modes(smol_info):
    assert request_prompt(PERSON, "Find Ada.", "none", len) == "Find Ada."
    assert request_prompt(PERSON, "Find Ada.", "compact", len).startswith("Find Ada.\n\nReply with a JSON object")
    assert '"properties"' in request_prompt(PERSON, "Find Ada.", "full", len)


def test_a_schema_larger_than_the_context_compiles_and_generates(tiny_model):
    schema = _huge_schema()
    assert len(tiny_model.encode(json.dumps(schema))) > 8192
    value, result = generate_json(tiny_model, schema, "Configure the tool.", max_tokens=40, return_result=True)
    assert "setting_0" in value
    assert len(tiny_model.encode(result.extra["prompt"])) + 40 <= tiny_model.context_length


def test_no_invented_members_by_default_and_open_objects_on_request(tiny_model):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}}
    for seed in range(6):
        value = generate_json(tiny_model, schema, "Anything.", max_tokens=30, temperature=1.0, seed=seed)
        assert set(value) <= {"a", "b"}, value
    extra = [generate_json(tiny_model, schema, "Anything.", max_tokens=30, temperature=1.0, seed=seed,
                           members="any") for seed in range(6)]
    assert any(set(v) - {"a", "b"} for v in extra), extra  # the random model does invent keys when let


def test_integers_come_back_as_ints(tiny_model):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "m": {"type": "array", "items": {"type": "integer"}}},
              "required": ["n", "m"]}
    for seed in range(5):
        value = generate_json(tiny_model, schema, "Numbers.", max_tokens=40, temperature=1.0, seed=seed)
        assert type(value["n"]) is int and all(type(x) is int for x in value["m"]), value


def test_grounded_string_values_are_spans_of_the_source(tiny_model):
    source = "Invoice 7731 from Acme Robotics, Lyon. Contact: Jeanne Moreau <jeanne@acme.fr>, paid in full."
    schema = {"type": "object", "properties": {"company": {"type": "string"}, "contact": {"type": "string"},
                                               "status": {"enum": ["paid", "open"]}, "note": {"type": "string", "x-grounded": False}},
              "required": ["company", "contact", "status"]}
    for seed in range(5):
        value, result = generate_json(tiny_model, schema, "Extract the invoice.", source=source, max_tokens=60,
                                      temperature=1.0, seed=seed, return_result=True)
        assert value["company"] in source and value["contact"] in source, value
        assert value["company"].strip() and value["contact"].strip()
        assert source in result.extra["prompt"]  # the text the values come from is in the request


def test_bad_policy_values_are_named(tiny_model):
    with pytest.raises(InvalidArgument, match="schema_prompt"):
        generate_json(tiny_model, PERSON, "x", schema_prompt="short")
    with pytest.raises(InvalidArgument, match="members"):
        generate_json(tiny_model, PERSON, "x", members="closed")
    with pytest.raises(InvalidArgument, match="source"):
        generate_json(tiny_model, PERSON, "x", source=b"bytes")


def test_repeated_ngrams_are_a_last_resort_and_forced_tokens_are_untouched():
    import torch

    from structgen.runtime.loop import REPEAT_PENALTY, penalize_repeated_ngrams

    tokens = [5, 6, 7, 8, 5, 6, 7]  # 5 6 7 was followed by 8: writing 8 again repeats "5 6 7 8"
    logits = torch.zeros(10)
    penalize_repeated_ngrams(logits, tokens, 4)
    assert logits[8] == -REPEAT_PENALTY and int(logits.argmax()) != 8
    forced = torch.full((10,), float("-inf"))
    forced[8] = 1.0  # the grammar allows 8 alone: the repeat is the language's
    penalize_repeated_ngrams(forced, tokens, 4)
    assert forced[8] == 1.0
    fresh = torch.zeros(10)
    penalize_repeated_ngrams(fresh, [1, 2, 3, 4], 4)
    assert torch.equal(fresh, torch.zeros(10))


def test_no_repeat_ngram_ends_a_loop_the_greedy_model_falls_into(smol):
    """The demo's tree on SmolLM2: without the guard it nests "src/src.json" to the token budget."""
    tree = json.loads((__import__("pathlib").Path(__file__).parents[1] / "structgen/schemas/tree.json").read_text())
    prompt = "Describe a small project folder with a src folder containing two files."
    _, looped = generate_json(smol, tree, prompt, max_tokens=200, no_repeat_ngram=0, return_result=True)
    _, guarded = generate_json(smol, tree, prompt, max_tokens=200, return_result=True)
    assert looped.text.count("src/src.json") > 8
    assert guarded.text.count("src/src.json") <= 3 and guarded.num_tokens < looped.num_tokens


def test_spaced_whitespace_writes_as_json_dumps_does(tiny_model):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "boolean"}}},
              "required": ["a", "b"]}
    _, result = generate_json(tiny_model, schema, "x", max_tokens=80, temperature=1.0, seed=3, return_result=True)
    assert result.text == json.dumps(json.loads(result.text))


def test_grounded_numbers_are_numbers_the_source_writes(tiny_model):
    source = "Table for 4 at 19:30 on 2026-05-02, booked by Ana Ruiz; deposit 1,250.50 euros."
    schema = {"type": "object", "properties": {"guests": {"type": "integer", "minimum": 1, "maximum": 20},
                                               "deposit": {"type": "number"}, "rooms": {"type": "integer", "minimum": 3000}},
              "required": ["guests", "deposit", "rooms"]}
    for seed in range(4):
        value, result = generate_json(tiny_model, schema, "Extract the booking.", source=source, max_tokens=80,
                                      temperature=1.0, seed=seed, return_result=True)
        assert value["guests"] in (4, 19, 2, 5) and value["deposit"] in (4, 19, 30, 2026, 5, 2, 1250.5), value
    assert "/properties/rooms" in str(result.extra["grounding"]["fell_back"])  # no number of the text is >= 3000


def test_an_enums_values_the_source_names_are_listed_first():
    """A small model tends to write the first value listed (USD for a text that says JPY)."""
    schema = {"type": "object", "properties": {"currency": {"enum": ["USD", "EUR", "JPY"]},
                                               "ship": {"enum": ["standard", "express"]}}}
    text = describe_schema(schema, source="Paid 300 jpy; it goes by Express delivery. Not EURO.")
    assert '- currency (one of "JPY", "USD", "EUR")' in text  # "EURO" is not the word "EUR"
    assert '- ship (one of "express", "standard")' in text
    assert '"USD", "EUR", "JPY"' in describe_schema(schema)  # no source: the schema's order


def test_stated_members_never_make_a_grounded_request_fail_for_its_budget(tiny_model):
    """Writing the members a text states lengthens the shortest output; where that no longer fits
    max_tokens, generate_json compiles without them instead of failing."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                               "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}},
              "required": ["name"]}
    src = "Ada bought item KIT-1482."
    value = generate_json(tiny_model, schema, "Extract.", source=src, max_tokens=14)
    assert set(value) <= {"name", "sku"} and value["name"] in src
