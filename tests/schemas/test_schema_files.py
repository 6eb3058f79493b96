"""The example JSON Schemas shipped as package data (``structgen/schemas/*.json``, what
``structgen generate --schema NAME`` and the examples use): each is a valid schema with a title and a
description, and jsonschema and structgen's compiled automaton agree on instances of each; the
checkout's ``schemas/`` is the package's folder."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import structgen
from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.shipped import schema_file, shipped_schema_names

FOLDER = Path(structgen.__file__).resolve().parent / "schemas"

_INVOICE = {"invoice_number": "INV-0042", "date": "2024-05-01", "customer": {"name": "ACME", "country": "FR"},
            "items": [{"description": "bolts", "quantity": 3, "unit_price": 1.5}], "paid": False}

#: per shipped schema: valid instances, and invalid ones (each breaks one rule of the schema)
SAMPLES = {
    "person": ([{"name": "Marie Curie", "age": 42, "email": "marie@example.org", "languages": ["fr", "pl"]},
                {"name": "A", "age": 0, "email": "a@b.co"}],
               [{"name": "Marie", "age": -1, "email": "m@example.org"},  # minimum
                {"name": "Marie", "age": 42},  # required
                {"name": "Marie", "age": 42, "email": "m@example.org", "languages": ["fr", "fr"]},  # uniqueItems
                {"name": "Marie", "age": 42, "email": "m@example.org", "nickname": "M"}]),  # additionalProperties
    "invoice": ([_INVOICE],
                [{**_INVOICE, "invoice_number": "INV-42"},  # pattern
                 {**_INVOICE, "items": []}]),  # minItems
    "tree": ([{"name": "/", "children": [{"name": "etc"}, {"name": "home", "children": [{"name": "ada"}]}]}],
             [{"name": "/", "children": [{"title": "etc"}]},  # a child without its name, through $ref
              {"children": []}]),
    "function_call": ([{"tool": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
                       {"tool": "send_email", "arguments": {"to": "a@example.org", "subject": "hi", "urgent": True}}],
                      [{"tool": "get_weather", "arguments": {"to": "a@example.org", "subject": "hi"}},  # oneOf mixed
                       {"tool": "book_flight", "arguments": {}}]),  # no branch
}


def _schema(name: str) -> dict:
    return json.loads(schema_file(name).read_text())


def test_every_file_is_a_shipped_schema_with_samples():
    files = sorted(p.stem for p in FOLDER.glob("*.json"))
    assert files == shipped_schema_names()
    assert sorted(SAMPLES) == files, "give a new schema its samples here"


def test_the_checkout_folder_is_the_package_folder():
    link = Path(__file__).resolve().parents[2] / "schemas"
    if not link.exists():
        pytest.skip("not a checkout")
    assert link.resolve() == FOLDER


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_valid_schema_that_says_what_it_is(name):
    schema = _schema(name)
    jsonschema.validators.validator_for(schema).check_schema(schema)
    assert schema.get("title") and schema.get("description")  # shown to the model by schema_prompt


@pytest.fixture(scope="module")
def compiler(smol_info):
    return GrammarCompiler(smol_info)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_jsonschema_and_the_automaton_agree_on_the_samples(name, compiler):
    schema = _schema(name)
    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    grammar = compiler.compile_json_schema(schema)
    good, bad = SAMPLES[name]
    for instance, expected in [(i, True) for i in good] + [(i, False) for i in bad]:
        m = Matcher(grammar)
        accepted = m.accept_string(json.dumps(instance)) and m.is_accepting()
        assert (validator.is_valid(instance), accepted) == (expected, expected), (name, instance)
