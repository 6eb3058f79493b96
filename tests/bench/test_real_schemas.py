"""``structgen bench real-schemas``: the seeded sampler, the outcome classifier, the tables, and one
end-to-end run on two small real schemas with the tiny random model."""
from __future__ import annotations

import json

import pytest

from structgen.bench import real_schemas as rs
from structgen.errors import (
    CompileLimitExceeded,
    GenerationError,
    InvalidArgument,
    SchemaError,
    UnsatisfiableSchema,
    UnsupportedFeature,
)


def _records(n_a: int = 30, n_b: int = 10) -> list[dict]:
    recs = [{"dataset": "JsonSchemaStore", "unique_id": f"JsonSchemaStore/s{i:03d}", "json_schema": {"type": "integer"}}
            for i in range(n_a)]
    recs += [{"dataset": "Github_ultra", "unique_id": f"Github_ultra/u{i:03d}", "json_schema": {"type": "string"}}
             for i in range(n_b)]
    return recs


# --------------------------------------------------------------------------- sampler


def test_sample_is_deterministic_per_seed_and_proportional():
    recs = _records()
    a = [r["unique_id"] for r in rs.sample_records(recs, 12, seed=3)]
    assert a == [r["unique_id"] for r in rs.sample_records(list(reversed(recs)), 12, seed=3)]
    assert a != [r["unique_id"] for r in rs.sample_records(recs, 12, seed=4)]
    assert len(set(a)) == 12
    by = [i.split("/")[0] for i in a]
    assert by.count("JsonSchemaStore") == 9 and by.count("Github_ultra") == 3  # 30:10
    assert "Github_ultra" in by[:4]  # interleaved, not one dataset after the other


def test_sample_quotas_real_split_and_bounds():
    assert rs._quotas({"JsonSchemaStore": 348, "Github_ultra": 116}, 60) == {"JsonSchemaStore": 45, "Github_ultra": 15}
    assert sum(rs._quotas({"a": 7, "b": 3}, 5).values()) == 5
    assert len(rs.sample_records(_records(3, 2), 100, seed=0)) == 5  # never more than there is
    assert rs.sample_records(_records(), 0, seed=0) == []


# --------------------------------------------------------------------------- classifier


@pytest.mark.parametrize("exc, phase, outcome", [
    (UnsupportedFeature("not supported", pointer="#/x", keyword="if"), "compile", "refused"),
    (UnsatisfiableSchema("no value", pointer="#/y"), "compile", "refused"),
    (SchemaError("bad schema"), "compile", "refused"),
    (CompileLimitExceeded("compile stopped after 60 s", limit="timeout"), "compile", "refused"),
    (InvalidArgument("bad argument"), "other", "refused"),
    (GenerationError("the prompt and max_tokens together exceed the model's context: 900 prompt tokens + "
                     "max_tokens=256 > 1024 positions; shorten the prompt or lower max_tokens",
                     reason="context", num_tokens=0), "decode", "context"),
    (GenerationError("budget ran out", partial='{"a": ', reason="max_tokens", num_tokens=256), "decode",
     "generation_error"),
    (GenerationError("timed out", reason="timeout"), "decode", "generation_error"),
    (GenerationError("nothing allowed", reason="no_token"), "decode", "generation_error"),
    (UnsupportedFeature("late"), "decode", "generation_error"),
    (KeyError("boom"), "compile", "foreign"),
    (RecursionError("too deep"), "decode", "foreign"),
    (IndexError("index out of range in self"), "decode", "foreign"),
])
def test_classifier_maps_each_exception_kind(exc, phase, outcome):
    got = rs.classify_exception(exc, phase)
    assert got["outcome"] == outcome
    assert got["error_class"] == type(exc).__name__
    assert got["message"] == str(exc)
    if outcome == "generation_error" and isinstance(exc, GenerationError):
        assert got["reason"] == exc.reason and got["output_tokens"] == exc.num_tokens
    if outcome == "context":
        assert got["prompt_tokens"] == 900 and got["context_length"] == 1024
    if outcome == "foreign":
        assert type(exc).__name__ in got["traceback"]


def test_classifier_reads_the_phase_from_the_traceback():
    def _run_tokens():
        raise GenerationError("x", reason="max_tokens")

    def compile_json_schema():
        raise UnsupportedFeature("no")

    for fn, phase in ((_run_tokens, "decode"), (compile_json_schema, "compile")):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            assert rs.classify_exception(e)["phase"] == phase


def test_context_message_from_any_exception_counts_as_context():
    got = rs.classify_exception(RuntimeError("the prompt alone exceed the model's context: 2000 prompt tokens + "
                                             "max_tokens=256 > 1024 positions"), "decode")
    assert got["outcome"] == "context" and "traceback" in got


def test_second_opinion():
    schema = {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}, "required": ["d"]}
    assert rs.second_opinion(schema, {"d": "2024-01-31"}) == ("valid", None)
    verdict, why = rs.second_opinion(schema, {"d": "yesterday"})
    assert verdict == "invalid" and "/d" in why
    assert rs.second_opinion(schema, {})[0] == "invalid"
    assert rs.second_opinion({"type": "string", "pattern": "\\p{L}+("}, "a")[0] == "error"


# --------------------------------------------------------------------------- tables


def _row(ds, outcome, t, prompt=None, **kw):
    return {"id": f"{ds}/x", "dataset": ds, "outcome": outcome, "wall_seconds": t, "prompt_tokens": prompt, **kw}


def test_summary_table_on_hand_made_records():
    rows = [_row("JsonSchemaStore", "ok", 1.0, 300, second_opinion="valid"),
            _row("JsonSchemaStore", "ok", 3.0, 500, second_opinion="invalid"),
            _row("JsonSchemaStore", "refused", 0.5, error_class="UnsupportedFeature"),
            _row("JsonSchemaStore", "generation_error", 9.0, 700, reason="max_tokens"),
            _row("Github_ultra", "context", 0.2, 1900),
            _row("Github_ultra", "foreign", 0.1)]
    text = rs.summary_table(rows)
    lines = text.splitlines()
    assert lines[0].split()[:7] == ["dataset", "n", "ok", "refused", "context", "generation_error", "foreign"]
    store = next(line for line in lines if line.startswith("JsonSchemaStore")).split()
    assert store[1:7] == ["4", "2", "1", "0", "1", "0"]
    assert store[7] == "50.0" and store[8] == "1"  # valid%, disagreements
    assert store[-1] == "700"
    ultra = next(line for line in lines if line.startswith("Github_ultra")).split()
    assert ultra[1:7] == ["2", "0", "0", "1", "0", "1"] and ultra[-1] == "1900"
    total = next(line for line in lines if line.startswith("all")).split()
    assert total[1] == "6" and total[-1] == "1900"
    assert "max_tokens 1" in text and "UnsupportedFeature 1" in text


def test_compile_table_on_hand_made_records():
    rows = [{"id": "a", "dataset": "A", "outcome": "compiled", "compile_seconds": 0.1},
            {"id": "b", "dataset": "A", "outcome": "refused", "error_class": "SchemaError", "compile_seconds": 0.2},
            {"id": "c", "dataset": "B", "outcome": "foreign", "compile_seconds": 2.0}]
    text = rs.compile_table(rows)
    total = next(line for line in text.splitlines() if line.startswith("all")).split()
    assert total[1:5] == ["3", "1", "1", "1"] and total[-1] == "2.000"
    assert "SchemaError 1" in text


# --------------------------------------------------------------------------- end to end


def test_end_to_end_two_small_real_schemas(tiny_model, tmp_path):
    from structgen.bench.data_paths import DataNotFound

    try:
        records = rs.load_records()
    except DataNotFound as e:
        pytest.skip(str(e))
    small = sorted((r for r in records if isinstance(r["json_schema"], dict)),
                   key=lambda r: (len(json.dumps(r["json_schema"])), r["unique_id"]))[:2]
    out = tmp_path / "r.json"
    rows = rs.run_real_schemas(tiny_model, small, max_tokens=48, timeout=60, out=out, progress=False)
    assert [r["id"] for r in rows] == [r["unique_id"] for r in small]
    for r in rows:
        assert r["outcome"] in rs.OUTCOMES and r["outcome"] != "foreign", r
        assert r["wall_seconds"] >= 0
        if r["outcome"] == "ok":
            assert r["second_opinion"] != "invalid", r
            assert r["prompt_tokens"] > 0 and r["schema_described"] is not None
    assert json.loads(out.read_text())["records"] == rows
    assert "all" in rs.summary_table(rows)
