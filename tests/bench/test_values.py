"""``structgen bench values``: the seeded cases keep the benchmark's contract, the scorer scores as
documented, and the runner returns its result structure (tiny random model, no real generation)."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from structgen.bench.values import EngineSpec, parse_engine, run_values
from structgen.bench.values_scoring import count_invented, score_record, values_equal
from structgen.bench.values_cases import KINDS, SCHEMAS, make_cases
from structgen.grammar.json_schema import make_validator


def _leaves(v, schema=None):
    """(leaf value, its schema) pairs of a record."""
    schema = schema or {}
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _leaves(x, (schema.get("properties") or {}).get(k))
    elif isinstance(v, list):
        for x in v:
            yield from _leaves(x, schema.get("items"))
    else:
        yield v, schema


# --------------------------------------------------------------------------- the cases


def test_cases_are_deterministic_per_seed():
    a = [c.to_dict() for c in make_cases(12, seed=3)]
    b = [c.to_dict() for c in make_cases(12, seed=3)]
    assert a == b
    assert [c.to_dict() for c in make_cases(6, seed=3)] == a[:6]  # a prefix: case i depends on (seed, i)


def test_different_seeds_give_different_cases():
    a = make_cases(12, seed=1)
    b = make_cases(12, seed=2)
    assert [c.text for c in a] != [c.text for c in b]
    assert len({c.text for c in a} & {c.text for c in b}) == 0


def test_every_kind_in_a_sample_of_30_and_in_every_block_of_six():
    for seed in (0, 1, 7):
        cases = make_cases(30, seed)
        assert set(Counter(c.kind for c in cases)) == set(KINDS)
        for k in range(0, 30, 6):
            assert {c.kind for c in cases[k:k + 6]} == set(KINDS)


@pytest.mark.parametrize("seed", [0, 1, 2, 11, 12345])
def test_contract_values_in_text_records_valid_short_texts(seed):
    validators = {}
    for c in make_cases(60, seed):
        assert c.schema is SCHEMAS[c.schema_name]
        assert c.text in c.request
        assert len(c.text.split()) < 150
        v = validators.setdefault(c.schema_name, make_validator(c.schema))
        assert not list(v.iter_errors(c.expected)), (c.id, c.expected)
        low = c.text.casefold()
        for x, sub in _leaves(c.expected, c.schema):
            if isinstance(x, bool):
                continue
            if isinstance(x, str) and "enum" in sub:  # enum values are written as prose writes them
                assert x.casefold() in low, (c.id, x, c.text)
            elif isinstance(x, str):  # the contract: every free string is a span of the text, as is
                assert x in c.text, (c.id, x, c.text)
            else:  # numbers written in digits
                forms = [str(x)] + ([f"{x:.2f}"] if isinstance(x, float) else [])
                assert any(re.search(r"(?<![0-9.])" + re.escape(f) + r"(?![0-9])", c.text) for f in forms), \
                    (c.id, x, c.text)


def test_optional_fields_vary():
    present = Counter()
    cases = [c for c in make_cases(120, 5) if c.kind == "contact"]
    for c in cases:
        present.update(list(c.expected))
    assert present["name"] == present["email"] == len(cases)  # required
    for k in ("phone", "company", "job_title", "address"):
        assert 0 < present[k] < len(cases)


# --------------------------------------------------------------------------- the scorer


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"}, "n": {"type": "integer"}, "price": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "legs": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"},
                                                                           "b": {"type": "string"}}}},
        "addr": {"type": "object", "properties": {"city": {"type": "string"}}},
        "note": {"type": "string"},
    },
}
EXP = {"name": "Maria Lopez", "n": 3, "price": 12.5, "tags": ["x", "y"], "legs": [{"a": "LIS", "b": "CDG"},
                                                                                  {"a": "CDG", "b": "LIS"}],
       "addr": {"city": "Lyon"}}


def test_values_equal_normalisation():
    assert values_equal("  maria   LOPEZ ", "Maria Lopez")
    assert not values_equal("Maria Lopes", "Maria Lopez")
    assert values_equal(3.0, 3) and values_equal(12.50, 12.5)
    assert not values_equal("3", 3) and not values_equal(True, 1) and not values_equal(1, True)
    assert values_equal("2025-03-14", "2025-03-14") and not values_equal("2025-3-14", "2025-03-14")
    assert not values_equal(None, "x")


def test_score_exact_record():
    out = json.loads(json.dumps(EXP))
    out["name"] = "maria  lopez"
    out["tags"] = ["y", "x"]  # scalar arrays: a multiset
    out["note"] = None  # an absent field written as null costs nothing
    s = score_record(out, EXP, SCHEMA)
    assert (s["fields_correct"], s["fields_total"]) == (10, 10)
    assert s["field_acc"] == 1.0 and s["exact"] and s["spurious"] == 0 and s["invented"] == 0


def test_score_wrong_missing_spurious_invented():
    out = {"name": "Maria", "n": "3", "price": 12.5, "tags": ["x", "x", "z"],
           "legs": [{"a": "CDG", "b": "LIS"}], "note": "from a distractor", "extra": 1}
    s = score_record(out, EXP, SCHEMA)
    # name wrong, n a string, price right, tags: x right / y missing, legs in order: both of leg 0 wrong,
    # leg 1 missing, addr missing
    assert s["fields_total"] == 10
    assert s["fields_correct"] == 2
    assert s["spurious"] == 1 + 1  # note; one array element beyond the expected two
    assert s["invented"] == 1
    assert not s["exact"]
    paths = {w["path"] for w in s["wrong"]}
    assert {"/name", "/n", "/tags", "/legs/0/a", "/legs/1/a", "/addr/city"} <= paths


def test_score_not_json_and_not_an_object():
    s = score_record(None, EXP, SCHEMA, parsed=False)
    assert s["fields_correct"] == 0 and s["fields_total"] == 10 and not s["exact"]
    s = score_record([1, 2], EXP, SCHEMA)
    assert s["fields_correct"] == 0 and not s["exact"]


def test_count_invented_at_depth():
    v = {"addr": {"city": "x", "zip": "1"}, "legs": [{"a": "x", "gate": 3}], "foo": {"bar": 1}}
    assert count_invented(v, SCHEMA) == 3


def test_parse_engine():
    assert parse_engine("structgen") == EngineSpec("structgen", "structgen", "structgen")
    s = parse_engine("structgen-noground-prompt=compact")
    assert (s.ground, s.options) == (False, {"schema_prompt": "compact"})
    assert parse_engine("structgen-smc").options == {"sampler": "smc"}
    assert parse_engine("unconstrained").prompt == "structgen"
    assert parse_engine("llguidance").prompt == "peer"
    assert parse_engine("xgrammar@structgen-prompt").prompt == "structgen"
    assert parse_engine("unconstrained@peer-prompt").prompt == "peer"
    for bad in ("structgen-bogus", "nope", "structgen@peer-prompt", "llguidance@x"):
        with pytest.raises(ValueError):
            parse_engine(bad)


# --------------------------------------------------------------------------- the runner


def test_runner_on_tiny_model(tiny_model, one_torch_thread, tmp_path):
    out = tmp_path / "values.json"
    res = run_values(model=tiny_model, cases=2, seed=0, engines=["structgen", "unconstrained"], max_tokens=96,
                     out=out, progress=False)
    assert [s["engine"] for s in res["summaries"]] == ["structgen", "unconstrained"]
    for s in res["summaries"]:
        assert s["cases"] == 2
        assert 0.0 <= s["field_acc"] <= 1.0 and s["fields_total"] > 0
        for k in ("exact_rate", "valid_rate", "invented_keys", "spurious_values", "mean_s"):
            assert k in s
    assert res["summaries"][0]["valid_rate"] == 1.0, [(r["status"], r["error"]) for r in res["records"]]
    assert len(res["records"]) == 4 and {r["kind"] for r in res["records"]} == {c.kind for c in make_cases(2, 0)}
    assert {r["kind"] for r in res["by_kind"]} == {c.kind for c in make_cases(2, 0)}
    assert "field acc" in res["table"] and "structgen" in res["kind_table"]
    saved = json.loads(out.read_text())
    assert saved["meta"]["seed"] == 0 and len(saved["records"]) == 4 and len(saved["cases"]) == 2
    assert set(saved["meta"]["generate_json_keywords"]) == {"source", "schema_prompt"}


def test_runner_reports_unavailable_engines(tiny_model, one_torch_thread):
    res = run_values(model=tiny_model, cases=1, seed=4, engines=["structgen", "llamacpp"], max_tokens=96, out=None,
                     progress=False)
    assert "llamacpp" in res["unavailable"]  # not installed, or the tiny model has no GGUF file
    assert [s["engine"] for s in res["summaries"]] == ["structgen"]
