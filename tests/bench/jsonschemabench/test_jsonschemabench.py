"""JSONSchemaBench end-to-end harness: scoring, prompts, sampling, runner, resume.

Fast: a tiny random Llama with the real SmolLM2 tokenizer (``tiny_model``),
in-process (no worker), a fixed slice of three small schemas; toy engines that
are wrong on purpose must be scored as failing.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from structgen.bench import jsonschemabench as jsb
from structgen.bench.engines import CompileError, MaskEngine
from structgen.bench.gen_engines import (
    GEN_ENGINES,
    GenEngine,
    MaskEngineMatcher,
    StructgenGen,
    UnconstrainedGen,
    get_gen_engine_class,
)

from fixed_string_matcher import FixedStringMatcher

# --------------------------------------------------------------------------- the slice
# Three small schemas in JSONSchemaBench's record format, two datasets.

SLICE = [
    {"dataset": "Toy_a", "unique_id": "Toy_a/obj",
     "json_schema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
                     "required": ["a", "b"], "additionalProperties": False}},
    {"dataset": "Toy_a", "unique_id": "Toy_a/enum", "json_schema": {"enum": ["red", "green", 3]}},
    {"dataset": "Toy_b", "unique_id": "Toy_b/arr",
     "json_schema": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}},
]
MAX_TOKENS = 24


# --------------------------------------------------------------------------- toy engines


class _FixedTextEngine(GenEngine):
    """Always emits ``text`` (then EOS) through the common loop."""

    text = ""

    def compile(self, schema):
        return self.text

    def matcher(self, model, handle):
        return FixedStringMatcher(model.info, handle), None


class WrongJSONEngine(_FixedTextEngine):
    """Claims every schema, emits broken JSON."""

    name = "toy-wrong-json"
    text = '{"a": 1'


class SchemaInvalidEngine(_FixedTextEngine):
    """Claims every schema, emits JSON that none of the slice's schemas accepts."""

    name = "toy-schema-invalid"
    text = '{"zzz": "q"}'


class RefusingEngine(GenEngine):
    """Refuses every schema."""

    name = "toy-refuse"

    def compile(self, schema):
        raise CompileError("toy engine refuses everything")


class CrashingCompileEngine(GenEngine):
    """Raises an unexpected exception: a crash, not a refusal; not declared either."""

    name = "toy-crash"

    def compile(self, schema):
        raise RuntimeError("boom")


class CountingStructgen(StructgenGen):
    """structgen, counting generations (to see what a resumed run re-runs)."""

    name = "structgen"
    calls = 0

    def generate(self, *a, **kw):
        type(self).calls += 1
        return super().generate(*a, **kw)


# --------------------------------------------------------------------------- pure parts


def test_extract_json_from_free_text():
    assert jsb.extract_json('Sure! ```json\n{"a": [1, 2]}\n``` hope it helps') == (True, {"a": [1, 2]})
    assert jsb.extract_json('Here: {"a": 1} and then {"b": 2}') == (True, {"a": 1})
    assert jsb.extract_json('text {not json} then [1, {"x": null}] end') == (True, [1, {"x": None}])
    assert jsb.extract_json("  42  ") == (True, 42)
    assert jsb.extract_json('```\n{"unterminated": \n') == (False, None)
    assert jsb.extract_json("no json here") == (False, None)


def test_score_output_strict_vs_extracted_and_format_assertion():
    schema = {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}, "required": ["d"]}
    assert jsb.score_output('{"d": "2024-02-29"}', schema)["valid"] is True
    bad = jsb.score_output('{"d": "2024-02-30"}', schema)  # format is asserted
    assert bad["json_ok"] is True and bad["valid"] is False and "/d" in bad["validation_error"]
    assert jsb.score_output('{"d": "2024-02-30"}', schema, format="annotate")["valid"] is True  # or not
    prose = 'Answer: {"d": "2024-02-29"}'
    assert jsb.score_output(prose, schema)["json_ok"] is False  # constrained output must be the JSON itself
    assert jsb.score_output(prose, schema, extract=True)["valid"] is True
    assert jsb.score_output('{"d": 1', schema)["validation_error"] == "not JSON"
    broken = {"type": "string", "pattern": "(?<!x"}  # jsonschema cannot evaluate it: never counted valid
    assert jsb.score_output('"abc"', broken)["valid"] is False


def test_sample_cases_is_reproducible_and_interleaved():
    recs = [{"dataset": ds, "unique_id": f"{ds}/{i:02d}", "json_schema": {}} for ds in ("B", "A") for i in range(10)]
    a = jsb.sample_cases(recs, 3, seed=0)
    assert a == jsb.sample_cases(recs, 3, seed=0)
    assert [c["dataset"] for c in a] == ["A", "B"] * 3
    assert a != jsb.sample_cases(recs, 3, seed=1)
    assert len(jsb.sample_cases(recs, None)) == 20
    assert [c["dataset"] for c in jsb.sample_cases(recs, 2, datasets=["B"])] == ["B", "B"]
    with pytest.raises(ValueError, match="unknown dataset"):
        jsb.sample_cases(recs, 2, datasets=["C"])


def test_summaries_definitions():
    def r(i, ds, status, declared, valid, tpot, unterminated=False):
        return {"id": i, "dataset": ds, "status": status, "declared": declared, "valid": valid, "tpot_s": tpot,
                "unterminated": unterminated, "compile_s": 0.01 if declared else None, "ttft_s": 1.0}

    recs = {
        "unconstrained": [r("1", "A", "invalid", True, False, 0.1, True), r("2", "A", "valid", True, True, 0.1),
                          r("3", "B", "invalid", True, False, 0.2), r("4", "B", "invalid", True, False, 0.1)],
        "eng": [r("1", "A", "valid", True, True, 0.12), r("2", "A", "invalid", True, False, 0.15, True),
                r("3", "B", "compile_error", False, False, None), r("4", "B", "valid", True, True, 0.3)],
    }
    meta = {"unconstrained": (False, "unconstrained"), "eng": (True, "unconstrained")}
    s = {x["engine"]: x for x in jsb.summarize(recs, meta=meta)}
    e = s["eng"]
    assert (e["declared"], e["valid"], e["n"]) == (3, 2, 4)
    assert e["declared_pct"] == 75.0 and e["empirical_pct"] == 50.0
    assert e["compliance_pct"] == pytest.approx(200 / 3)
    assert e["unterminated"] == 1
    assert e["overhead"] == pytest.approx(1.5)  # median of 1.2, 1.5, 3.0 (schema 3 did not compile)
    assert s["unconstrained"]["empirical_pct"] == 25.0 and s["unconstrained"]["overhead"] is None
    by = {(x["dataset"], x["engine"]): x for x in jsb.summarize(recs, meta=meta, by_dataset=True)}
    assert by[("B", "eng")]["compliance_pct"] == 100.0 and by[("B", "eng")]["declared"] == 1
    assert by[("A", "eng")]["overhead"] == pytest.approx(1.35)
    table = jsb.format_overall_table(list(s.values()))
    assert "eng" in table and "75.0" in table and "1.50x" in table


class _FakeMaskEngine(MaskEngine):
    """Allows tokens 5 and 40; its EOS (id 7) is allowed when ``eos_ok``."""

    name = "fake"
    vocab_size = 50
    eos_token_ids = [7]

    def __init__(self):
        self.eos_ok = False
        self.committed = []

    def reset(self):
        self.committed = []

    def fill_mask(self, bitmask):
        bitmask[:] = 0
        for t in (5, 40) + ((7,) if self.eos_ok else ()):
            bitmask[0, t >> 5] |= np.int32(1 << (t & 31))

    def commit(self, token):
        self.committed.append(token)
        return token in (5, 40)


def test_mask_engine_matcher_copies_bits_and_maps_eos():
    eng = _FakeMaskEngine()
    m = MaskEngineMatcher(eng, loop_eos_ids=[33, 63])  # the loop's EOS ids differ from the engine's
    bm = torch.full((1, 3), -1, dtype=torch.int32)  # a wider vocabulary than the engine's (96 > 50)
    m.fill_next_token_bitmask(bm, 0)
    allowed = {t for t in range(96) if (int(bm[0, t >> 5]) >> (t & 31)) & 1}
    assert allowed == {5, 40}
    assert not m.is_accepting() and not m.accept_token(33)
    eng.eos_ok = True
    m.fill_next_token_bitmask(bm, 0)
    allowed = {t for t in range(96) if (int(bm[0, t >> 5]) >> (t & 31)) & 1}
    assert allowed == {5, 40, 33, 63}  # the engine's EOS bit (7) is moved to the loop's EOS ids
    assert m.accept_token(40) and eng.committed == [40]
    assert not m.accept_token(6)
    assert m.is_accepting() and m.accept_token(63) and m.is_terminated()


def test_engine_registry_and_cli():
    from structgen.cli import build_parser

    assert set(jsb.DEFAULT_ENGINES) <= set(GEN_ENGINES)
    assert get_gen_engine_class("llama.cpp").name == "llamacpp"
    assert get_gen_engine_class("llamacpp").baseline == "llamacpp-unconstrained"
    with pytest.raises(ValueError):
        get_gen_engine_class("nope")
    args = build_parser().parse_args(["bench", "jsonschemabench", "--quick", "--engines", "structgen"])
    assert args.quick and args.func.__name__ == "_run_bench_jsonschemabench"


# --------------------------------------------------------------------------- with a model


@pytest.fixture()
def cfg(tmp_path, tiny_model, one_torch_thread):
    return jsb.JSBConfig(records=SLICE, model_obj=tiny_model, isolate=False, per_dataset=None,
                         max_tokens=MAX_TOKENS, max_prompt_tokens=256, output=tmp_path / "out", progress=False,
                         plot=False, warmup=False)


def test_prompt_is_generate_json_prompt_and_is_capped(tiny_model):
    from structgen.api import schema_prompt

    schema = SLICE[0]["json_schema"]
    text, ids, cut = jsb.build_prompt(tiny_model, schema, 1000)
    assert text == tiny_model.chat_prompt(schema_prompt(schema)) and not cut
    assert ids == tiny_model.encode(text)
    big = {"type": "object", "properties": {f"field_{i}": {"type": "string", "description": "x " * 20}
                                            for i in range(60)}}
    text, ids, cut = jsb.build_prompt(tiny_model, big, 300)
    assert cut and len(ids) <= 300 and len(ids) > 250  # the longest prefix that fits
    assert jsb.data.TRUNCATION_NOTE in text and text.endswith(tiny_model.chat_prompt("x")[-30:])


def test_structgen_engine_is_generate_json(tiny_model, one_torch_thread):
    """The benchmark's structgen engine produces exactly what users get from generate_json given the
    benchmark's prompt (the schema's JSON, which every engine gets: schema_prompt="full")."""
    from structgen.api import generate_json

    schema = SLICE[0]["json_schema"]
    value, res = generate_json(tiny_model, schema, max_tokens=MAX_TOKENS, return_result=True, schema_prompt="full",
                               speculative=False)
    handler, info = jsb.make_jsb_handler(tiny_model, ["structgen"], max_tokens=MAX_TOKENS, max_prompt_tokens=None,
                                         warmup=False)
    assert not info["setup_errors"]
    assert handler({"op": "compile", "engine": "structgen", "id": "x", "schema": schema})["status"] == "ok"
    rec = handler({"op": "generate", "engine": "structgen", "id": "x", "schema": schema})
    assert rec["output"] == res.text and json.loads(rec["output"]) == value
    assert rec["status"] == "valid" and rec["finish"] in ("eos", "terminated")
    assert rec["n_tokens"] == res.steps and rec["tpot_s"] > 0 and rec["gen_ttft_s"] > 0


def test_run_scores_engines_and_wrong_toys_fail(cfg):
    cfg.engines = ["structgen", "unconstrained", WrongJSONEngine, SchemaInvalidEngine, RefusingEngine,
                   CrashingCompileEngine, "not-an-engine"]
    cfg.plot = True
    res = jsb.run_jsonschemabench(cfg, echo=lambda s: None)
    s = {x["engine"]: x for x in res.summaries}
    assert "not-an-engine" in res.skipped
    # structgen (with the guard) compiles the slice and always finishes valid, even from a random model
    assert s["structgen"]["declared"] == 3 and s["structgen"]["valid"] == 3
    assert s["structgen"]["unterminated"] == 0 and s["structgen"]["compliance_pct"] == 100.0
    assert s["structgen"]["overhead"] is not None and s["structgen"]["n_paired"] >= 1
    # the baseline: always "declared", scored by extraction; unterminated iff it hit the cap
    un = res.records["unconstrained"]
    assert all(r["declared"] for r in un) and s["unconstrained"]["compile_p50_ms"] is None
    assert all(r["unterminated"] == (r["finish"] == "length") for r in un)
    assert all(r["n_tokens"] <= MAX_TOKENS for r in un)
    # deliberately wrong engines are scored as failing
    for bad in ("toy-wrong-json", "toy-schema-invalid"):
        assert (s[bad]["declared"], s[bad]["valid"], s[bad]["compliance_pct"]) == (3, 0, 0.0)
    assert all(r["status"] == "invalid" and not r["json_ok"] for r in res.records["toy-wrong-json"])
    assert all(r["json_ok"] and r["validation_error"] for r in res.records["toy-schema-invalid"])
    for refuse, status in (("toy-refuse", "compile_error"), ("toy-crash", "compile_crash")):
        assert (s[refuse]["declared"], s[refuse]["valid"], s[refuse]["compliance_pct"]) == (0, 0, None)
        assert {r["status"] for r in res.records[refuse]} == {status}
    # per-dataset breakdown and files
    by = {(x["dataset"], x["engine"]) for x in res.by_dataset}
    assert ("Toy_a", "structgen") in by and ("Toy_b", "toy-refuse") in by
    md = (cfg.output / "summary.md").read_text()
    assert "| structgen | 3 | 100.0 | 100.0 | 100.0 | 0 |" in md and "Empirical coverage" in md
    assert (cfg.output / "jsonschemabench.png").stat().st_size > 1000
    lines = (cfg.output / "toy-wrong-json.jsonl").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["output"] == WrongJSONEngine.text


def test_resume_skips_done_pairs_and_checks_settings(cfg):
    CountingStructgen.calls = 0
    cfg.engines = [CountingStructgen]
    first = jsb.run_jsonschemabench(cfg, echo=lambda s: None)
    assert CountingStructgen.calls == 3
    again = jsb.run_jsonschemabench(cfg, echo=lambda s: None)
    assert CountingStructgen.calls == 3  # nothing re-run
    assert again.summaries[0]["valid"] == first.summaries[0]["valid"] == 3
    # an interrupted run: drop one line, only that pair runs again
    p = cfg.output / "structgen.jsonl"
    lines = p.read_text().splitlines()
    p.write_text("\n".join(lines[:2]) + "\n" + lines[2][:20])  # a cut last line is ignored
    jsb.run_jsonschemabench(cfg, echo=lambda s: None)
    assert CountingStructgen.calls == 4
    cfg.max_tokens = MAX_TOKENS + 1  # other settings: refuse to mix results
    with pytest.raises(ValueError, match="other settings"):
        jsb.run_jsonschemabench(cfg, echo=lambda s: None)
    cfg.resume = False
    jsb.run_jsonschemabench(cfg, echo=lambda s: None)
    assert CountingStructgen.calls == 7


@pytest.mark.parametrize("name", ["llguidance", "xgrammar"])
def test_peer_engine_in_the_common_loop(name, tiny_model, one_torch_thread):
    cls = get_gen_engine_class(name)
    ok, why = cls.available()
    if not ok:
        pytest.skip(why)
    schema = {"enum": ["yes", "no"]}
    handler, info = jsb.make_jsb_handler(tiny_model, [name], max_tokens=8, max_prompt_tokens=None, warmup=False)
    assert not info["setup_errors"], info["setup_errors"]
    assert handler({"op": "compile", "engine": name, "id": "e", "schema": schema})["status"] == "ok"
    rec = handler({"op": "generate", "engine": name, "id": "e", "schema": schema})
    assert rec["status"] == "valid" and rec["finish"] == "eos", rec
    assert json.loads(rec["output"]) in ("yes", "no")
    assert handler({"op": "compile", "engine": name, "id": "bad",
                    "schema": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}})["status"] != "ok"


def test_unconstrained_engine_is_the_model_itself(tiny_model, one_torch_thread):
    from structgen.runtime.loop import generate_unconstrained

    ids = tiny_model.encode(tiny_model.chat_prompt("hi"))
    out = UnconstrainedGen().generate(tiny_model, "", ids, None, max_tokens=10)
    ref = generate_unconstrained(tiny_model, ids, max_tokens=10)
    assert out.text == ref.text and out.n_tokens == ref.steps
    assert out.t_start <= out.t_first <= out.t_end


def test_llamacpp_needs_a_gguf_model(tiny_model):
    """Not installed, or a model that was not loaded from a GGUF file: a clear set-up error, the engine skipped."""
    _, info = jsb.make_jsb_handler(tiny_model, ["llamacpp"], max_tokens=8, max_prompt_tokens=None, warmup=False)
    assert "llamacpp" in info["setup_errors"]


def test_llamacpp_engine_on_the_embedded_gguf():
    """llama.cpp's own loop with its JSON-Schema grammar (only where llama-cpp-python is installed)."""
    import types

    from structgen.errors import ModelNotFound
    from structgen.tokenizer import smollm2_gguf_path

    cls = get_gen_engine_class("llamacpp")
    ok, why = cls.available()
    if not ok:
        pytest.skip(why)
    try:
        gguf = smollm2_gguf_path()
    except ModelNotFound as e:
        pytest.skip(str(e))
    eng = cls()
    eng.n_ctx = 512
    eng.setup(types.SimpleNamespace(source=str(gguf), name="smollm2"))
    prompt = "<|im_start|>user\nIs the sky blue? Answer yes or no.<|im_end|>\n<|im_start|>assistant\n"
    out = eng.generate(None, prompt, None, eng.compile({"enum": ["yes", "no"]}), max_tokens=8)
    assert out.finish == "eos" and json.loads(out.text) in ("yes", "no")
    assert out.n_tokens >= 2 and out.t_start <= out.t_first <= out.t_end
