"""The fast metaschema walk never calls a schema valid that jsonschema rejects."""
from __future__ import annotations

import copy
import glob
import gzip
import json
import random
from pathlib import Path

import pytest

from structgen.errors import SchemaError
from structgen.grammar.json_schema import check_schema, validator_for as _validator_for
from structgen.grammar.metaschema import fast_metaschema_ok

DATA = Path(__file__).resolve().parents[4] / "shared" / "data"
WRONG_VALUES = [-1, 1.5, "x", True, None, [], {}, ["a", "a"], [1], {"a": 1}, 0, "integer", ["string"], 2.0]
KEYWORDS = ["type", "required", "minLength", "items", "properties", "enum", "exclusiveMaximum", "$defs",
            "additionalProperties", "allOf", "$anchor", "dependentRequired", "dependencies", "multipleOf",
            "prefixItems", "$schema", "definitions", "not", "pattern"]


def _mutate(schema, rng: random.Random):
    """Put a wrong-typed value under a random (or a well-known) keyword of a random subschema."""
    schema = copy.deepcopy(schema)
    nodes = []

    def collect(x):
        if isinstance(x, dict):
            if x:
                nodes.append(x)
            for v in x.values():
                collect(v)
        elif isinstance(x, list):
            for v in x:
                collect(v)

    collect(schema)
    if nodes:
        node = rng.choice(nodes)
        key = rng.choice(KEYWORDS) if rng.random() < 0.4 else rng.choice(list(node))
        node[key] = rng.choice(WRONG_VALUES)
    return schema


def _schemas() -> list:
    out = []
    if (DATA / "maskbench-dev.jsonl.gz").exists():
        rows = [json.loads(line)["schema"] for line in gzip.open(DATA / "maskbench-dev.jsonl.gz")]
        out += random.Random(7).sample(rows, 120)
    for f in sorted(glob.glob(str(DATA / "json-schema-test-suite/tests/draft2020-12/*.json")))[:20]:
        out += [g["schema"] for g in json.load(open(f))]
    return out


def test_fast_check_agrees_with_jsonschema():
    schemas = _schemas()
    if not schemas:
        pytest.skip("../shared/data not present")
    rng = random.Random(0)
    validators: dict = {}
    said_ok = 0
    for s in schemas:
        for variant in [s] + [_mutate(s, rng) for _ in range(2)]:
            cls = _validator_for(variant)
            uri = cls.META_SCHEMA.get("$id") or cls.META_SCHEMA.get("id") or ""
            fast = fast_metaschema_ok(variant, uri)
            meta = validators.setdefault(cls, cls(cls.META_SCHEMA))
            if fast:
                said_ok += 1
                assert meta.is_valid(variant), json.dumps(variant)[:300]
    assert said_ok > len(schemas) * 0.9  # the fast path is actually taken on real schemas


@pytest.mark.parametrize("schema, pointer", [
    ({"type": "object", "properties": {"a": {"type": "strin"}}}, "#/properties/a/type"),
    ({"type": "object", "required": ["a", "a"]}, "#/required"),
    ({"items": {"minLength": -1}}, "#/items/minLength"),
    ({"$schema": ["not", "a", "uri"]}, "#/$schema"),
])
def test_invalid_schema_reports_pointer(schema, pointer):
    with pytest.raises(SchemaError) as e:
        check_schema(schema)
    assert e.value.pointer == pointer


def test_boolean_exclusive_maximum_without_schema_uri_is_accepted():
    check_schema({"type": "number", "maximum": 3, "exclusiveMaximum": True})  # draft-04 spelling
