"""The fuzz campaign: a seeded slice finds nothing, and every kind of finding is recorded."""
from __future__ import annotations

import json

import pytest

from structgen.bench.fuzz import FAILURES, check_case, format_fuzz_table, run_fuzz
from structgen.bench.fuzz_cases import KINDS, make_case


def test_cases_are_a_pure_function_of_seed_and_index():
    a = [make_case(3, i, KINDS, None) for i in range(12)]
    assert a == [make_case(3, i, KINDS, None) for i in range(12)]
    assert {c["kind"] for c in a} == {"schema-random", "regex", "lark"}  # no MaskBench rows: random schemas
    assert a != [make_case(4, i, KINDS, None) for i in range(12)]


@pytest.mark.minutes
def test_a_seeded_slice_finds_nothing(tmp_path):
    """The CI slice: every kind, run in the supervised worker."""
    summary = run_fuzz(n=120, seed=7, output=tmp_path, progress=False)
    assert summary["failures"] == 0, [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()
                                      if json.loads(line)["status"] in FAILURES]
    assert summary["counts"].get("ok", 0) > 40
    assert "| all | 120 |" in format_fuzz_table(summary)
    again = run_fuzz(n=120, seed=7, output=tmp_path, progress=False)  # resumed: nothing is run twice
    assert again["counts"] == summary["counts"]
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 120


@pytest.fixture(scope="module")
def checker():
    from structgen.bench.fuzz import _Checker

    return _Checker("smollm2")


@pytest.mark.minutes  # a minute of set-up: the checker compiles its cases
def test_the_checks_catch_what_they_are_for(checker, monkeypatch):
    ok = check_case({"id": "x", "kind": "regex", "source": r"(ab|c)[0-9]{1,3}"}, checker)
    assert ok["status"] == "ok" and ok["brute_forced"] >= 2
    refused = check_case({"id": "y", "kind": "regex", "source": "[z-a]"}, checker)
    assert refused["status"] == "refused" and "GrammarError" in refused["detail"]
    # an instance the schema admits but the engine refuses is reported (here: a wrong instance list)
    case = {"id": "z", "kind": "schema-mutation", "source": {"type": "integer", "maximum": 3}, "instances": [2, 9]}
    assert check_case(case, checker)["status"] == "ok"
    import jsonschema

    class Never:  # a reference that calls every instance invalid: the engine's acceptance is then reported
        FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER

        def __init__(self, schema, format_checker=None):
            pass

        def is_valid(self, data):
            return False

    monkeypatch.setattr(jsonschema.validators, "validator_for", lambda schema, *a, **k: Never)
    assert check_case({**case, "id": "z2"}, checker)["status"] == "invalid_accepted"


def test_numbers_are_judged_exactly(checker):
    """A walk on this case ends in 353665185143435180477.0: a multiple of 7 and an integer in JSON
    Schema, though not once Python reads it as a float; the checker asks again with exact numbers."""
    case = make_case(0, 6385, KINDS, None)
    assert case["source"] == {"type": "integer", "minimum": 0, "multipleOf": 7}
    assert check_case(case, checker)["status"] == "ok"


def test_drawing_instances_leaves_the_schema_as_it_was():
    """hypothesis-jsonschema rewrites the schema it is given; the fuzzer judged four MaskBench
    mutations by the rewritten schema (a draft-04 ``$ref``'s ignored sibling merged in) and
    reported structgen's correct verdicts as failures."""
    import copy

    import pytest

    pytest.importorskip("hypothesis_jsonschema")
    from structgen.bench.fuzz import hypothesis_instances

    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {"d": {"type": "array", "items": {"$ref": "#/definitions/T", "type": "integer"}}},
              "definitions": {"T": {"type": "object", "properties": {"id": {"type": "string"}}}}}
    before = copy.deepcopy(schema)
    hypothesis_instances(schema, seed=1)
    assert schema == before


def test_an_enum_number_in_any_positional_spelling(checker):
    """Found by the 10,000-case campaign (schema-mutation-0-4612): an enum value holding 1e-09
    refused the instance written 0.000000001, the same JSON number."""
    case = {"id": "enum-spelling", "kind": "schema-mutation",
            "source": {"allOf": [{"enum": [{"allOf": [{"foo": "bar", "maxProperties": 1e-09},
                                                      {"type": "array", "items": {"type": "null"}, "maxItems": 1}]}]},
                                 {"not": False}]},
            "instances": [{"foo": "bar"}]}
    assert check_case(case, checker)["status"] == "ok"


def test_an_instance_is_judged_as_the_number_its_text_spells(checker):
    """Found by the seed-29 campaign (schema-random-29-8473): hypothesis drew the float
    5.439717815225837e16, exactly 54397178152258368, a multiple of 7; written positionally from its
    shortest digits it is 54397178152258370, which is not, and the engine rightly refused that text.
    The harness now asks jsonschema about the value the text spells."""
    case = {"id": "float-spelling", "kind": "schema-random",
            "source": {"not": {"not": {"type": "integer", "minimum": 2.5, "multipleOf": 7}}},
            "instances": [5.439717815225837e16, 14, 15]}
    assert check_case(case, checker)["status"] == "ok"


def test_drawing_instances_stops_even_when_the_first_alarm_is_swallowed(monkeypatch):
    """The fuzz campaign's one unreproduced hang printed the harness's own time-out alarm escaping from
    inside hypothesis: a one-shot alarm that hypothesis (or a strategy) catches leaves the draw
    unbounded.  Past its budget the alarm fires again until the draw gives up."""
    import time

    import pytest

    pytest.importorskip("hypothesis_jsonschema")
    import hypothesis.strategies as st
    import hypothesis_jsonschema

    def slow_value():
        try:
            time.sleep(10)
        except Exception:  # noqa: BLE001 - swallows the first alarm, as a catch-all inside a strategy would
            pass
        time.sleep(10)
        return 1

    monkeypatch.setattr(hypothesis_jsonschema, "from_schema", lambda schema: st.builds(slow_value))
    from structgen.bench.fuzz import hypothesis_instances

    t0 = time.monotonic()
    assert hypothesis_instances({"type": "integer"}, seed=1, budget_s=0.3) == []
    assert time.monotonic() - t0 < 10  # a one-shot alarm: 10 s in the second sleep, more on replays
