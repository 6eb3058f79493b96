"""MaskBench harness: protocol, classification, watchdog, runner, peers.

Fast and offline: toy engines over a byte-level toy tokenizer run in-process
or in spawned workers; the installed peer engines run in-process on a small
embedded slice with the DeepSeek-V4 tokenizer (skipped when not installed).
"""
from __future__ import annotations

import json
import os
import signal
import time

import numpy as np
import pytest

from structgen.bench import report
from structgen.bench.engines import ENGINES, PEER_ENGINES, CompileError, MaskEngine, engine_available, mask_bit
from structgen.bench.maskbench import (
    MaskBenchConfig,
    read_results,
    run_maskbench,
    run_schema,
    sample_records,
)
from structgen.bench.watchdog import Worker, WorkerSetupError

# --------------------------------------------------------------------------- data slice
# A handful of MaskBench-style records (schemas every peer supports), chosen by hand.

SLICE = [
    {
        "id": "obj",
        "schema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        "tests": [
            {"data": {"a": 1, "b": "x"}, "valid": True, "description": "ok"},
            {"data": {"a": -20, "b": "héllo 世界 \"q\" \\ \n"}, "valid": True, "description": "escapes, non-ASCII"},
            {"data": {"a": "1", "b": "x"}, "valid": False, "description": "wrong type"},
            {"data": {"a": 1}, "valid": False, "description": "missing b (rejected only at the end)"},
            {"data": {"a": 1, "b": "x", "c": 2}, "valid": False, "description": "extra property"},
        ],
    },
    {
        "id": "enum",
        "schema": {"enum": ["red", "green", 3]},
        "tests": [
            {"data": "green", "valid": True, "description": "ok"},
            {"data": 3, "valid": True, "description": "ok"},
            {"data": "blue", "valid": False, "description": "not in enum"},
            {"data": "gree", "valid": False, "description": "prefix of a member"},
        ],
    },
    {
        "id": "array",
        "schema": {"type": "array", "items": {"type": "boolean"}},
        "tests": [
            {"data": [True, False, True], "valid": True, "description": "ok"},
            {"data": [], "valid": True, "description": "empty"},
            {"data": [True, None], "valid": False, "description": "null item"},
        ],
    },
    {
        "id": "no-tests",
        "schema": {"type": "object", "properties": {"n": {"type": "number"}}},
        "tests": [],
    },
]

N_VALID = sum(t["valid"] for r in SLICE for t in r["tests"])
N_INVALID = sum(not t["valid"] for r in SLICE for t in r["tests"])


# --------------------------------------------------------------------------- toy tokenizer + engines
# Module-level so spawned workers can unpickle them (the test folder is on sys.path).

EOS = 256


class ByteTokenizer:
    """One token per UTF-8 byte (ids 0..255) and EOS = 256."""

    eos_token_id = EOS

    def __len__(self) -> int:
        return 257

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", "replace")


class ByteTokenizerSpec:
    label = "bytes"

    def load(self) -> ByteTokenizer:
        return ByteTokenizer()


class _ToyBase(MaskEngine):
    modules = ()

    def setup(self, tokenizer) -> None:
        self.vocab_size = len(tokenizer)
        self.eos_token_ids = [EOS]

    def compile(self, schema) -> None:
        self.schema = schema

    def reset(self) -> None:
        pass

    def commit(self, token: int) -> bool:
        return True


class AllowAllEngine(_ToyBase):
    """Wrong: every token (EOS included) is always allowed."""

    name = "toy-allow-all"

    def fill_mask(self, bitmask) -> None:
        bitmask[0, :] = -1


class AllowNothingEngine(_ToyBase):
    """Wrong: no token is ever allowed."""

    name = "toy-allow-nothing"

    def fill_mask(self, bitmask) -> None:
        bitmask[0, :] = 0


class EnumEngine(_ToyBase):
    """Correct for ``enum`` schemas: the output must be json.dumps of a member."""

    name = "toy-enum"
    compile_error_types = (CompileError,)

    def compile(self, schema) -> None:
        if "enum" not in schema:
            raise CompileError("only enum schemas")
        self.members = [json.dumps(v, ensure_ascii=False).encode() for v in schema["enum"]]
        self.out = b""

    def reset(self) -> None:
        self.out = b""

    def fill_mask(self, bitmask) -> None:
        bitmask[0, :] = 0
        for m in self.members:
            if m.startswith(self.out):
                t = m[len(self.out)] if len(m) > len(self.out) else EOS
                bitmask[0, t >> 5] |= np.int32(np.uint32(1 << (t & 31)).view(np.int32))

    def commit(self, token: int) -> bool:
        nxt = self.out + bytes([token])
        if any(m.startswith(nxt) for m in self.members):
            self.out = nxt
            return True
        return False


class CommitRefusesEngine(AllowAllEngine):
    """Inconsistent: the mask allows everything, commit refuses everything."""

    name = "toy-commit-refuses"

    def commit(self, token: int) -> bool:
        return False


class BuggyCompileEngine(_ToyBase):
    """compile raises an error that is not one of its declared refusals -> crash."""

    name = "toy-buggy-compile"
    compile_error_types = (CompileError,)

    def compile(self, schema) -> None:
        raise KeyError("oops")

    def fill_mask(self, bitmask) -> None:  # pragma: no cover
        bitmask[0, :] = -1


class RaisingMaskEngine(AllowAllEngine):
    name = "toy-raising-mask"

    def fill_mask(self, bitmask) -> None:
        raise RuntimeError("mask exploded")


class HangOrCrashEngine(AllowAllEngine):
    """Hangs on schemas titled 'hang', dies (os._exit / SIGSEGV) on 'exit' / 'segv'."""

    name = "toy-hang-or-crash"

    def compile(self, schema) -> None:
        title = schema.get("title")
        if title == "hang":
            while True:
                time.sleep(0.05)
        if title == "exit":
            os._exit(7)
        if title == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        self.schema = schema


class SetupFailsEngine(AllowAllEngine):
    name = "toy-setup-fails"

    def setup(self, tokenizer) -> None:
        raise RuntimeError("no tokenizer for me")


def _run(engine_cls, records=SLICE):
    eng = engine_cls()
    tok = ByteTokenizer()
    eng.setup(tok)
    return {r["id"]: run_schema(eng, lambda s: tok.encode(s), r, decode=tok.decode) for r in records}


# --------------------------------------------------------------------------- protocol + classification


def test_allow_all_engine_is_caught_by_invalid_instances():
    res = _run(AllowAllEngine)
    assert res["obj"]["status"] == "invalidation_error"
    assert res["obj"]["invalid_accepted"] == 3 and res["obj"]["valid_rejected"] == 0
    assert res["enum"]["status"] == "invalidation_error" and res["enum"]["invalid_accepted"] == 2
    assert res["array"]["invalid_accepted"] == 1
    assert res["no-tests"]["status"] == "pass"  # nothing to catch it with
    assert sum(r["invalid_accepted"] for r in res.values()) == N_INVALID
    # one TBM sample per token of every instance (none rejected early)
    n_tok = sum(len(json.dumps(t["data"], ensure_ascii=False).encode()) for r in SLICE for t in r["tests"])
    assert sum(r["n_tokens"] for r in res.values()) == n_tok
    assert all(x > 0 for r in res.values() for x in r["tbm_ns"])
    s = report.summarize_engine("toy", list(res.values()), [])
    assert s["counts"]["invalidation_error"] == 3 and s["counts"]["pass"] == 1
    assert s["pass_pct"] == 25.0 and s["invalid_accepted_tests"] == N_INVALID


def test_allow_nothing_engine_is_caught_by_valid_instances():
    res = _run(AllowNothingEngine)
    for rid in ("obj", "enum", "array"):
        assert res[rid]["status"] == "validation_error"
        assert res[rid]["invalid_accepted"] == 0
        # rejected at the first token: one sample per instance
        assert res[rid]["n_tokens"] == len(SLICE[[r["id"] for r in SLICE].index(rid)]["tests"])
    assert sum(r["valid_rejected"] for r in res.values()) == N_VALID
    f = res["obj"]["failures"][0]
    assert f["valid"] and f["token_index"] == 0 and f["reason"] == "token not allowed by the mask"
    assert res["obj"]["error"].startswith("test #0 (valid)")


def test_invalidation_takes_precedence_and_both_kinds_are_counted():
    # An engine for the enum but with a member missing: rejects a valid one, and the
    # schema with an extra member accepts an invalid one.
    rec = {"id": "mix", "schema": {"enum": ["red", "blue"]}, "tests": [
        {"data": "red", "valid": True}, {"data": "green", "valid": True}, {"data": "blue", "valid": False}]}
    res = _run(EnumEngine, [rec])["mix"]
    assert res["valid_rejected"] == 1 and res["invalid_accepted"] == 1
    assert res["status"] == "invalidation_error"
    s = report.summarize_engine("toy", [res], [])
    assert s["both_error_kinds"] == 1


def test_correct_engine_passes_and_eos_is_required():
    res = _run(EnumEngine)
    assert res["enum"]["status"] == "pass"
    assert res["enum"]["valid_rejected"] == 0 and res["enum"]["invalid_accepted"] == 0
    assert res["enum"]["ttfm_ms"] is not None and res["enum"]["ttfm_ms"] >= 0
    # "gree" is only rejected by the final EOS check
    assert res["obj"]["status"] == "compile_error" and "only enum" in res["obj"]["error"]
    assert res["obj"]["ttfm_ms"] is None and res["obj"]["tbm_ns"] == []


def test_mask_and_commit_must_agree():
    res = _run(CommitRefusesEngine)
    assert res["enum"]["status"] == "validation_error"
    assert res["enum"]["failures"][0]["reason"] == "token allowed by the mask but not accepted"


def test_unexpected_exceptions_are_crashes():
    res = _run(BuggyCompileEngine)
    assert res["obj"]["status"] == "crash" and "KeyError" in res["obj"]["error"]
    res = _run(RaisingMaskEngine)
    assert res["obj"]["status"] == "crash" and "mask exploded" in res["obj"]["error"]
    assert res["no-tests"]["status"] == "pass"


def test_mask_bit_and_sampling():
    bm = np.zeros((1, 2), dtype=np.int32)
    bm[0, 1] = np.uint32(1 << 31).view(np.int32)
    assert mask_bit(bm, 63) and not mask_bit(bm, 62) and not mask_bit(bm, 64) and not mask_bit(bm, -1)
    recs = [{"id": str(i)} for i in range(20)]
    a, b = sample_records(recs, 5, 1), sample_records(recs, 5, 1)
    assert [r["id"] for r in a] == [r["id"] for r in b] and len(a) == 5
    assert len(sample_records(recs, None)) == 20 and len(sample_records(recs, 99)) == 20


# --------------------------------------------------------------------------- watchdog


def _echo_factory():
    def handler(req):
        if req == "hang":
            while True:
                time.sleep(0.05)
        if req == "exit":
            os._exit(5)
        if req == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        if req == "raise":
            raise ValueError("boom")
        return {"echo": req, "pid": os.getpid(), "rayon": os.environ.get("RAYON_NUM_THREADS")}

    return handler, {"hello": 1}


def _failing_factory():
    raise RuntimeError("cannot set up")


def test_watchdog_timeout_crash_and_reuse():
    with Worker(_echo_factory) as w:
        r1 = w.call("a", timeout=30)
        r2 = w.call("b", timeout=30)
        assert r1.status == r2.status == "ok"
        assert r1.value["pid"] == r2.value["pid"]  # reused
        assert r1.value["rayon"] == "1"  # single-threaded environment
        assert r1.rss_mb and r1.rss_mb > 0
        assert w.setups[0]["hello"] == 1 and w.setups[0]["start_s"] > 0

        t = w.call("hang", timeout=1.0)
        assert t.status == "timeout" and 0.9 < t.wall_s < 10
        assert not w.alive
        r3 = w.call("c", timeout=30)  # restarted
        assert r3.status == "ok" and r3.value["pid"] != r1.value["pid"]
        assert len(w.setups) == 2 and w.restarts == 1

        c = w.call("exit", timeout=30)
        assert c.status == "crash" and "exit code 5" in c.error
        s = w.call("segv", timeout=30)
        assert s.status == "crash" and "SIGSEGV" in s.error

        e = w.call("raise", timeout=30)
        assert e.status == "error" and "ValueError: boom" in e.error
        assert w.call("d", timeout=30).status == "ok"  # a handler exception keeps the worker


def test_watchdog_setup_failure():
    w = Worker(_failing_factory)
    with pytest.raises(WorkerSetupError, match="cannot set up"):
        w.start()
    assert not w.alive


# --------------------------------------------------------------------------- the runner (workers, files)


def test_run_maskbench_with_toy_engines(tmp_path):
    records = SLICE + [
        {"id": "hang", "schema": {"title": "hang"}, "tests": []},
        {"id": "exit", "schema": {"title": "exit"}, "tests": []},
        {"id": "segv", "schema": {"title": "segv"}, "tests": []},
    ]
    lines: list[str] = []
    cfg = MaskBenchConfig(
        records=records, tokenizer_spec=ByteTokenizerSpec(), output=tmp_path,
        engines=[HangOrCrashEngine, AllowNothingEngine, SetupFailsEngine, "no-such-engine"],
        timeout=2.0, progress=False, plot=True, mem_limit_gb=None, command="test",
    )
    res = run_maskbench(cfg, echo=lines.append)
    text = "\n".join(lines)
    assert "skipping engine 'no-such-engine'" in text
    assert "skipping engine 'toy-setup-fails'" in text and "no tokenizer for me" in text
    assert set(res.skipped) == {"no-such-engine", "toy-setup-fails"}

    by = {s["engine"]: s for s in res.summaries}
    assert set(by) == {"toy-hang-or-crash", "toy-allow-nothing"}
    hc = read_results(tmp_path / "toy-hang-or-crash.jsonl")
    assert hc["hang"]["status"] == "timeout"
    assert hc["exit"]["status"] == "crash" and "exit code 7" in hc["exit"]["error"]
    assert hc["segv"]["status"] == "crash" and "SIGSEGV" in hc["segv"]["error"]
    assert hc["obj"]["status"] == "invalidation_error"  # it allows everything otherwise
    c = by["toy-hang-or-crash"]["counts"]
    assert c == {"pass": 1, "compile_error": 0, "timeout": 1, "validation_error": 0,
                 "invalidation_error": 3, "crash": 2}
    assert by["toy-hang-or-crash"]["worker_starts"] == 3  # first, then lazily after the timeout and the exit
    an = by["toy-allow-nothing"]
    assert an["counts"]["validation_error"] == 3 and an["counts"]["pass"] == 4
    assert an["valid_rejected_tests"] == N_VALID and an["setup_s"] is not None
    assert an["peak_rss_mb"] > 0 and an["n_tokens"] == 12
    assert an["gc_s"] is not None and an["gc_s"] >= 0 and an["gc_full"] >= 0  # the workers' GC pauses
    assert all("gc_ms" in r for r in read_results(tmp_path / "toy-allow-nothing.jsonl").values())

    # table: one row per engine, plus ratios
    assert res.table.count("\n") == 3 and "toy-hang-or-crash" in res.table and "toy-allow-nothing" in res.table
    assert "toy-hang-or-crash / toy-allow-nothing" in res.ratio_table
    for name in ("summary.md", "summary.json", "maskbench.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert "| toy-allow-nothing |" in (tmp_path / "summary.md").read_text()

    # resumable: a second run computes nothing new
    lines.clear()
    cfg.engines = [AllowNothingEngine]
    res2 = run_maskbench(cfg, echo=lines.append)
    assert "already in" in "\n".join(lines) and "worker ready" not in "\n".join(lines)
    assert res2.summaries[0]["counts"] == an["counts"]
    assert len((tmp_path / "toy-allow-nothing.jsonl").read_text().splitlines()) == len(records)


def test_cli_parser_has_bench_mask():
    from structgen.cli import build_parser

    args = build_parser().parse_args(["bench", "mask", "--quick", "--engines", "structgen,llguidance"])
    assert args.quick and args.engines == "structgen,llguidance" and callable(args.func)
    with pytest.raises(SystemExit):
        build_parser().parse_args([])


# --------------------------------------------------------------------------- peers (in-process, real tokenizer)


@pytest.fixture(scope="module")
def deepseek():
    from structgen.bench.tokenizers import resolve_tokenizer

    try:
        spec = resolve_tokenizer("deepseek")
    except FileNotFoundError as e:
        pytest.skip(str(e))
    return spec.load()


@pytest.mark.parametrize("name", PEER_ENGINES)
def test_peer_engine_on_slice(name, deepseek):
    ok, why = engine_available(name)
    if not ok:
        pytest.skip(why)
    eng = ENGINES[name]()
    eng.setup(deepseek)
    assert eng.vocab_size >= len(deepseek) - 1 and eng.eos_token_ids == [deepseek.eos_token_id]
    bm = eng.allocate_bitmask()
    res = {r["id"]: run_schema(eng, lambda s: deepseek.encode(s, add_special_tokens=False), r, bitmask=bm,
                               decode=deepseek.decode) for r in SLICE}
    for rid, r in res.items():
        assert r["status"] == "pass", (rid, r["error"], r["failures"])
        assert r["ttfm_ms"] > 0
    assert sum(r["n_tokens"] for r in res.values()) > 40
    # the missing-property instance is only caught by the EOS check at the end
    assert res["obj"]["n_tests"] == 5


def test_token_bytes_roundtrip(deepseek):
    from structgen.bench.tokenizers import token_bytes_map

    by_id, special = token_bytes_map(deepseek)
    assert deepseek.eos_token_id in special and deepseek.eos_token_id not in by_id
    text = '{"b": "héllo 世界 \\"q\\" \\\\ \\n", "a": -20}'
    ids = deepseek.encode(text, add_special_tokens=False)
    assert b"".join(by_id[i] for i in ids) == text.encode()


def test_default_data_file_if_present():
    import gzip

    from structgen.bench.maskbench import default_data_path

    try:
        p = default_data_path()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    with gzip.open(p, "rt", encoding="utf-8") as f:
        first = json.loads(f.readline())
    assert {"id", "schema", "tests"} <= set(first)





def test_test_suite_records_and_engine_table(tmp_path):
    from structgen.bench.schema_suite import engines_table, suite_records

    suite = tmp_path / "tests" / "draft2020-12"
    suite.mkdir(parents=True)
    (suite / "minimum.json").write_text(json.dumps([
        {"description": "g0", "schema": {"minimum": 1}, "tests": [{"description": "t", "data": 2, "valid": True}]},
        {"description": "g1", "schema": {"minimum": 5}, "tests": [{"description": "t", "data": 1, "valid": False}]},
    ]))
    recs = suite_records(tmp_path)
    assert [r["id"] for r in recs] == ["minimum#0", "minimum#1"] and recs[1]["tests"][0]["valid"] is False
    table = engines_table({"a": {"minimum#0": {"status": "pass"}, "minimum#1": {"status": "invalidation_error"}},
                           "b": {"minimum#0": {"status": "pass"}, "minimum#1": {"status": "pass"}}})
    assert "| minimum | 2 | 1 | 2 |" in table and "a: 1, b: 0" in table


def test_gc_pauses_are_summed_per_schema():
    import gc

    from structgen.bench.maskbench import GcPauses

    pauses = GcPauses()
    gc.callbacks.append(pauses)
    try:
        gc.collect()
        gc.collect(0)
    finally:
        gc.callbacks.remove(pauses)
    assert pauses.full == 1 and pauses.total_ns > 0
    pauses.reset()
    assert pauses.full == 0 and pauses.total_ns == 0
