"""JSONSchemaBench, end to end: a real model generates under each engine's constraint.

For a sample of schemas from each dataset of ``../shared/data/jsonschemabench-dev.jsonl.gz``
(fields ``dataset``, ``unique_id``, ``json_schema``), the model (default: the
embedded SmolLM2-135M-Instruct; any transformers model by path) is prompted
with the schema -- its chat template around :func:`structgen.api.schema_prompt`,
exactly what :func:`structgen.generate_json` sends -- and generates greedily
under each engine (:mod:`structgen.bench.gen_engines`), all through the same
decoding loop.  Per engine and per dataset we report, with the JSONSchemaBench
paper's definitions:

* **declared coverage**: fraction of schemas the engine compiles;
* **empirical coverage**: fraction where it compiles *and* the output is JSON
  that validates against the schema (``jsonschema`` with format assertion, as
  :func:`structgen.grammar.json_schema.make_validator` does everywhere);
* **compliance** = empirical / declared;
* **unterminated**: generations that hit ``max_tokens`` before finishing;
* **compile time**; **TTFT** = compile + prefill + first token (from the
  schema being submitted to the first output token); **TPOT** = time per
  output token after the first; **overhead** = the median over schemas of
  TPOT / the baseline's TPOT on the same schema (same prompt, same model).

The unconstrained model is the baseline: its reply is scored by extracting
the first top-level JSON value (code fences stripped).

Robustness: a supervised worker process (:mod:`structgen.bench.watchdog`)
holds the model and every engine; each (schema, engine) runs as two calls
with their own time limits (compile, then generate + score), so a hang or a
crash is recorded and the run goes on.  Results are appended to one JSONL per
engine in the output folder; a rerun skips the (schema, engine) pairs already
there.  Schemas run one after the other and, for each, every engine in turn,
so a paired comparison never spans a long stretch of a noisy machine.
"""
from __future__ import annotations

import functools
import gzip
import json
import math
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .._cache import use_cold_regex_cache
from .gen_engines import GenEngine, GenOutput, get_gen_engine_class
from .data_paths import data_path
from .maskbench import read_results, sample_records
from .watchdog import Worker, WorkerSetupError

__all__ = [
    "DEFAULT_ENGINES",
    "STATUSES",
    "default_data_path",
    "load_jsonschemabench",
    "sample_cases",
    "build_prompt",
    "extract_json",
    "score_output",
    "JSBConfig",
    "JSBResult",
    "make_jsb_handler",
    "make_jsb_worker",
    "run_jsonschemabench",
    "summarize",
    "format_overall_table",
    "format_dataset_table",
    "format_markdown",
    "plot_coverage",
]

DEFAULT_ENGINES = ("structgen", "structgen-speculative", "unconstrained", "llguidance", "xgrammar", "outlines-core",
                   "llamacpp", "llamacpp-unconstrained")
#: Per (schema, engine) outcomes.  The first four compiled (declared coverage).
STATUSES = ("valid", "invalid", "gen_error", "timeout", "crash", "compile_error", "compile_timeout", "compile_crash")
COMPILE_FAILURES = ("compile_error", "compile_timeout", "compile_crash")
OUTPUT_CHARS_KEPT = 4000
WARMUP_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
                 "required": ["name", "n"]}


# --------------------------------------------------------------------------- data


def default_data_path() -> Path:
    """``jsonschemabench-dev.jsonl.gz`` in the data folders (:mod:`structgen.bench.data_paths`)."""
    return data_path("jsonschemabench-dev.jsonl.gz")


def load_jsonschemabench(path: str | Path | None = None) -> list[dict]:
    """All records (``dataset``, ``unique_id``, ``json_schema``); a string schema is parsed."""
    p = data_path("jsonschemabench-dev.jsonl.gz", path)
    opener = gzip.open if p.suffix == ".gz" else open
    out = []
    with opener(p, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if isinstance(r.get("json_schema"), str):
                try:
                    r["json_schema"] = json.loads(r["json_schema"])
                except json.JSONDecodeError:
                    pass  # kept as text: every engine will refuse it
            out.append(r)
    return out


def sample_cases(records: Sequence[dict], per_dataset: int | None, seed: int = 0,
                 datasets: Sequence[str] | None = None) -> list[dict]:
    """``per_dataset`` random records of each dataset (all when None), as cases
    ``{"id", "dataset", "schema"}``, interleaved: the first case of every dataset
    (in name order), then the second of each, ... -- so an interrupted run has
    covered every dataset evenly."""
    by: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by[r["dataset"]].append(r)
    wanted = set(datasets) if datasets else None
    if wanted is not None:
        unknown = wanted - set(by)
        if unknown:
            raise ValueError(f"unknown dataset(s) {sorted(unknown)}; known: {sorted(by)}")
    columns = []
    for ds in sorted(by):
        if wanted is not None and ds not in wanted:
            continue
        group = sorted(by[ds], key=lambda r: r["unique_id"])
        columns.append(sorted(sample_records(group, per_dataset, seed), key=lambda r: r["unique_id"]))
    cases = []
    for k in range(max((len(c) for c in columns), default=0)):
        for col in columns:
            if k < len(col):
                r = col[k]
                cases.append({"id": r["unique_id"], "dataset": r["dataset"], "schema": r["json_schema"]})
    return cases


# --------------------------------------------------------------------------- prompt and scoring


TRUNCATION_NOTE = " ... (schema truncated)"


def build_prompt(model: Any, schema: Any, max_prompt_tokens: int | None) -> tuple[str, list[int], bool]:
    """(prompt text, its token ids, truncated?) -- what ``generate_json`` sends.

    When the prompt exceeds ``max_prompt_tokens``, the schema's JSON text in
    it is cut (the constraint still uses the whole schema) to the longest
    prefix that fits, followed by :data:`TRUNCATION_NOTE`.
    """
    from ..runtime.prompts import schema_prompt

    user = schema_prompt(schema if isinstance(schema, dict) else {})
    if not isinstance(schema, dict):
        user = user.rsplit("\n", 1)[0] + "\n" + json.dumps(schema)
    text = model.chat_prompt(user)
    ids = model.encode(text)
    if not max_prompt_tokens or len(ids) <= max_prompt_tokens:
        return text, ids, False
    sj = json.dumps(schema)
    head = user[: len(user) - len(sj)] if user.endswith(sj) else user
    body = sj if user.endswith(sj) else ""

    def make(k: int) -> tuple[str, list[int]]:
        t = model.chat_prompt(head + body[:k] + TRUNCATION_NOTE)
        return t, model.encode(t)

    lo, hi = 0, min(len(body), max_prompt_tokens * 8)  # a token is rarely more than 8 characters
    best = make(0)
    if len(best[1]) > max_prompt_tokens:
        return best[0], best[1], True  # even without the schema it does not fit: keep the shortest
    while lo < hi:
        mid = (lo + hi + 1) // 2
        t, i = make(mid)
        if len(i) <= max_prompt_tokens:
            lo, best = mid, (t, i)
        else:
            hi = mid - 1
    return best[0], best[1], True


_FENCE = re.compile(r"```(?:[A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.S)


def extract_json(text: str) -> tuple[bool, Any]:
    """(found?, value): the first top-level JSON value in a free-form reply.

    Code fences are looked into first (```json ... ```); otherwise the first
    ``{`` or ``[`` from which a complete JSON value parses; otherwise the whole
    reply, stripped (a bare scalar).
    """
    dec = json.JSONDecoder()
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for chunk in candidates:
        for i, ch in enumerate(chunk):
            if ch in "{[":
                try:
                    value, _ = dec.raw_decode(chunk, i)
                    return True, value
                except json.JSONDecodeError:
                    continue
        s = chunk.strip()
        if s:
            try:
                return True, json.loads(s)
            except json.JSONDecodeError:
                pass
    return False, None


_VALIDATORS: dict[str, Any] = {}


def _validator(schema: Any, format: str = "assert") -> Any:
    from ..grammar.json_schema import make_validator

    key = format + json.dumps(schema, sort_keys=True)
    v = _VALIDATORS.get(key)
    if v is None:
        if len(_VALIDATORS) > 64:
            _VALIDATORS.clear()
        v = _VALIDATORS[key] = make_validator(schema, format=format)
    return v


def score_output(text: str, schema: Any, *, extract: bool = False, format: str = "assert") -> dict:
    """``json_ok`` (the text is -- or, with ``extract``, contains -- one JSON value),
    ``valid`` (that value validates, format assertion on) and ``validation_error``.

    Constrained outputs are parsed strictly (``json.loads`` of the whole text);
    ``extract=True`` (the unconstrained baseline) uses :func:`extract_json`.
    """
    if extract:
        ok, value = extract_json(text)
    else:
        try:
            value, ok = json.loads(text), True
        except (json.JSONDecodeError, ValueError):
            ok, value = False, None
    if not ok:
        return {"json_ok": False, "valid": False, "validation_error": "not JSON"}
    if not isinstance(schema, (dict, bool)):
        return {"json_ok": True, "valid": False, "validation_error": "the schema is not a JSON object"}
    try:
        errors = list(_validator(schema, format).iter_errors(value))
    except Exception as e:  # noqa: BLE001 - a schema jsonschema cannot evaluate (bad regex, remote $ref)
        return {"json_ok": True, "valid": False, "validation_error": f"validator failed: {type(e).__name__}: {e}"[:300]}
    if errors:
        err = min(errors, key=lambda e: len(list(e.path)))
        ptr = "/" + "/".join(str(p) for p in err.path)
        return {"json_ok": True, "valid": False, "validation_error": f"at {ptr}: {err.message}"[:300]}
    return {"json_ok": True, "valid": True, "validation_error": None}


# --------------------------------------------------------------------------- the worker


def _short(e: BaseException, limit: int = 500) -> str:
    s = f"{type(e).__name__}: {e}"
    return s if len(s) <= limit else s[: limit - 3] + "..."


def make_jsb_handler(model: Any, engines: Sequence[str | type[GenEngine]], *, max_tokens: int,
                     max_prompt_tokens: int | None, warmup: bool = True,
                     format: str = "assert") -> tuple[Callable[[dict], dict], dict]:
    """Set every engine up on ``model``; returns ``(handler, info)``.

    ``handler(request)``: ``{"op": "compile", "engine", "id", "schema"}`` ->
    ``{"status": "ok"|"compile_error"|"compile_crash", "compile_s", "error"}``;
    ``{"op": "generate", "engine", "id", "schema"}`` -> the generation record
    (:func:`_generation_record`).  ``info``: versions, set-up times and
    ``setup_errors`` (engine -> message) for engines that could not be set up.  ``format``: how
    structgen's engines compile ``format`` and how every output is scored (peers keep their own).
    """
    ready: dict[str, GenEngine] = {}
    info: dict[str, Any] = {"model": getattr(model, "name", "?"), "setup_s": {}, "setup_errors": {}, "versions": {}}
    for e in engines:
        cls = get_gen_engine_class(e)
        t0 = time.perf_counter()
        try:
            eng = cls()
            eng.format = format
            eng.setup(model)
            if warmup:
                _warm_up(eng, model)
        except Exception as err:  # noqa: BLE001 - reported, the engine is skipped
            info["setup_errors"][cls.name] = _short(err, 300)
            continue
        ready[cls.name] = eng
        info["setup_s"][cls.name] = time.perf_counter() - t0
        info["versions"][cls.name] = cls.version()
    handles: dict[tuple[str, str], Any] = {}
    prompts: dict[str, tuple[str, list[int], bool]] = {}

    def prompt_for(case_id: str, schema: Any):
        p = prompts.get(case_id)
        if p is None:
            if len(prompts) > 16:
                prompts.clear()
            p = prompts[case_id] = build_prompt(model, schema, max_prompt_tokens)
        return p

    def handler(req: dict) -> dict:
        eng = ready[req["engine"]]
        key = (req["engine"], req["id"])
        if req["op"] == "compile":
            handles.pop(key, None)
            t0 = time.perf_counter()
            try:
                h = eng.compile(req["schema"])
            except MemoryError as err:
                return {"status": "compile_crash", "error": "out of memory " + _short(err)}
            except eng.compile_error_types as err:
                return {"status": "compile_error", "error": _short(err)}
            except Exception as err:  # noqa: BLE001 - an engine bug, not a refusal
                return {"status": "compile_crash", "error": _short(err)}
            dt = time.perf_counter() - t0
            handles[key] = h
            return {"status": "ok", "compile_s": dt, "error": None}
        if req["op"] == "generate":
            if key not in handles:  # a fresh worker after a restart: compile again (untimed)
                handles[key] = eng.compile(req["schema"])
            h = handles.pop(key)
            text, ids, truncated = prompt_for(req["id"], req["schema"])
            try:
                out = eng.generate(model, text, ids, h, max_tokens=max_tokens)
            except MemoryError as err:
                return {"status": "crash", "error": "out of memory " + _short(err)}
            rec = _generation_record(out, req["schema"], extract=not eng.constrained, format=format)
            rec["prompt_truncated"] = truncated
            return rec
        raise ValueError(f"unknown op {req['op']!r}")

    return handler, info


def _warm_up(eng: GenEngine, model: Any) -> None:
    """Compile a small schema and generate a few tokens: one-time costs (JIT, lazy tables,
    first forward pass) land in the set-up instead of the first schema."""
    h = eng.compile(WARMUP_SCHEMA)
    ids = model.encode(model.chat_prompt("Say hi."))
    eng.generate(model, model.chat_prompt("Say hi."), ids, h, max_tokens=8)


def _generation_record(out: GenOutput, schema: Any, *, extract: bool, format: str = "assert") -> dict:
    """Score one generation and turn its timings into the record's fields."""
    sc = score_output(out.text, schema, extract=extract, format=format)
    if out.finish == "error":
        status = "gen_error"
    else:
        status = "valid" if sc["valid"] else "invalid"
    tpot = (out.t_end - out.t_first) / (out.n_tokens - 1) if out.n_tokens >= 2 else None
    return {
        "status": status,
        "finish": out.finish,
        "unterminated": out.finish == "length",
        "error": out.error,
        **sc,
        "gen_ttft_s": out.t_first - out.t_start,
        "tpot_s": tpot,
        "gen_s": out.t_end - out.t_start,
        "prefill_s": out.prefill_s,
        "mask_s": out.mask_s,
        "n_tokens": out.n_tokens,
        "forward_passes": out.forward_passes,
        "forced_tokens": out.forced_tokens,
        "prompt_tokens": out.prompt_tokens,
        "output": out.text[:OUTPUT_CHARS_KEPT],
    }


def make_jsb_worker(model_spec: str | None, engines: Sequence[str | type[GenEngine]], max_tokens: int,
                    max_prompt_tokens: int | None, warmup: bool = True, fresh_regex_cache: bool = True,
                    format: str = "assert"):
    """Worker factory (runs in the child): one torch thread, load the model, set the engines up."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if fresh_regex_cache:
        use_cold_regex_cache()
    try:  # transformers' loading bars would create a multiprocessing lock a killed worker leaks
        import threading

        from tqdm import tqdm

        tqdm.set_lock(threading.RLock())
    except ImportError:  # pragma: no cover
        pass
    t0 = time.perf_counter()
    import torch

    torch.set_num_threads(1)
    from ..models import load_model

    model = load_model(model_spec, quantized=False)  # the dense weights: the q4 engine makes its own twin
    t1 = time.perf_counter()
    handler, info = make_jsb_handler(model, engines, max_tokens=max_tokens, max_prompt_tokens=max_prompt_tokens,
                                     warmup=warmup, format=format)
    info["model_load_s"] = t1 - t0
    info["torch_threads"] = torch.get_num_threads()
    info["torch"] = torch.__version__
    return handler, info


# --------------------------------------------------------------------------- the runner


@dataclass
class JSBConfig:
    """Options of :func:`run_jsonschemabench` (the CLI's flags).

    ``model_obj`` / ``records`` let tests pass a loaded model and inline data;
    ``isolate=False`` runs everything in this process (no time limits then).
    """

    data: str | Path | None = None
    model: str | None = None
    engines: Sequence[str | type[GenEngine]] = DEFAULT_ENGINES
    per_dataset: int | None = 5
    datasets: Sequence[str] | None = None
    seed: int = 0
    max_tokens: int = 512
    max_prompt_tokens: int | None = 2048
    compile_timeout: float = 60.0
    gen_timeout: float = 300.0
    output: str | Path | None = None
    resume: bool = True
    progress: bool = True
    plot: bool = True
    warmup: bool = True
    isolate: bool = True
    format: str = "assert"  # how structgen reads `format`, and how every output is scored
    fresh_regex_cache: bool = True
    mem_limit_gb: float | None = 16.0
    start_timeout: float = 900.0
    records: list[dict] | None = None
    model_obj: Any = None
    command: str | None = None


@dataclass
class JSBResult:
    """What :func:`run_jsonschemabench` produced."""

    summaries: list[dict]
    by_dataset: list[dict]
    table: str
    dataset_table: str
    output_dir: Path
    files: dict[str, Path] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    records: dict[str, list[dict]] = field(default_factory=dict)
    wall_s: float = 0.0


def _model_label(cfg: JSBConfig) -> str:
    if cfg.model_obj is not None:
        return str(getattr(cfg.model_obj, "name", "model"))
    if cfg.model is None:
        from ..models import DEFAULT_MODEL_NAME

        return DEFAULT_MODEL_NAME
    return Path(cfg.model).name or cfg.model


def _run_settings(cfg: JSBConfig, label: str) -> dict:
    """What must not change between a run and its resumption."""
    return {"model": label, "max_tokens": cfg.max_tokens, "max_prompt_tokens": cfg.max_prompt_tokens,
            "decoding": "greedy"}


def _failed(case: dict, engine: str, status: str, error: str | None, wall_s: float = 0.0, **extra) -> dict:
    rec = {"id": case["id"], "dataset": case["dataset"], "engine": engine, "status": status, "error": error,
           "declared": status not in COMPILE_FAILURES, "json_ok": False, "valid": False, "unterminated": False,
           "finish": None, "compile_s": None, "ttft_s": None, "tpot_s": None, "n_tokens": 0, "wall_s": wall_s}
    rec.update(extra)
    return rec


class _InProcess:
    """The worker interface, in this process (tests; no time limits)."""

    def __init__(self, handler, info):
        self.handler, self.info = handler, info
        self.setups = [info]

    def call(self, req, timeout):
        from .watchdog import CallResult

        t0 = time.perf_counter()
        try:
            return CallResult("ok", value=self.handler(req), wall_s=time.perf_counter() - t0)
        except Exception as e:  # noqa: BLE001
            return CallResult("error", error=_short(e), wall_s=time.perf_counter() - t0)

    def stop(self):
        pass


def _call_record(worker, case: dict, name: str, cfg: JSBConfig) -> dict:
    """Compile, then generate + score, one (schema, engine) pair; always returns a record."""
    req = {"op": "compile", "engine": name, "id": case["id"], "schema": case["schema"]}
    r = worker.call(req, cfg.compile_timeout)
    if r.status == "timeout":
        return _failed(case, name, "compile_timeout", f"no compile within {cfg.compile_timeout:g}s", r.wall_s)
    if r.status != "ok":
        err = r.error or ""
        if r.status == "error":
            err = "harness: " + (err.strip().splitlines() or ["?"])[-1]
        return _failed(case, name, "compile_crash", err, r.wall_s)
    c = r.value
    if c["status"] != "ok":
        return _failed(case, name, c["status"], c.get("error"), r.wall_s)
    compile_s = c["compile_s"]
    req = dict(req, op="generate")
    g = worker.call(req, cfg.gen_timeout)
    wall = r.wall_s + g.wall_s
    if g.status == "timeout":
        return _failed(case, name, "timeout", f"no result within {cfg.gen_timeout:g}s", wall, compile_s=compile_s)
    if g.status != "ok":
        err = g.error or ""
        if g.status == "error":
            err = "harness: " + (err.strip().splitlines() or ["?"])[-1]
        return _failed(case, name, "crash", err, wall, compile_s=compile_s)
    v = g.value
    if v.get("status") == "crash":
        return _failed(case, name, "crash", v.get("error"), wall, compile_s=compile_s)
    rec = {"id": case["id"], "dataset": case["dataset"], "engine": name, "declared": True, "compile_s": compile_s}
    rec.update(v)
    rec["ttft_s"] = compile_s + v["gen_ttft_s"]
    rec["wall_s"] = round(wall, 6)
    rec["rss_mb"] = g.rss_mb
    return rec


def run_jsonschemabench(cfg: JSBConfig, *, echo: Callable[[str], None] = print) -> JSBResult:
    """Run the benchmark for ``cfg.engines`` and report (tables to ``echo``, files to the output folder)."""
    t_start = time.perf_counter()
    records = cfg.records if cfg.records is not None else load_jsonschemabench(cfg.data)
    cases = sample_cases(records, cfg.per_dataset, cfg.seed, cfg.datasets)
    ids = [c["id"] for c in cases]
    label = _model_label(cfg)
    out_dir = Path(cfg.output) if cfg.output is not None else Path("bench-out") / "jsonschemabench" / label
    out_dir.mkdir(parents=True, exist_ok=True)

    engines: list[type[GenEngine]] = []
    skipped: dict[str, str] = {}
    for e in cfg.engines:
        try:
            cls = get_gen_engine_class(e)
        except ValueError as err:
            skipped[str(e)] = str(err)
            echo(f"skipping engine {e!r}: {err}")
            continue
        ok, why = cls.available()
        if not ok:
            hint = " (pip install 'structgen[llamacpp]'; compiles llama.cpp for ~9 minutes)" \
                if cls.name.startswith("llamacpp") else ""
            skipped[cls.name] = why
            echo(f"skipping engine {cls.name!r}: {why}{hint}")
            continue
        if cls not in engines:
            engines.append(cls)

    settings = _run_settings(cfg, label)
    cfg_file = out_dir / "run-settings.json"
    if not cfg.resume:
        for cls in engines:
            p = out_dir / f"{cls.name}.jsonl"
            if p.exists():
                p.unlink()
    if cfg_file.is_file() and cfg.resume:
        old = json.loads(cfg_file.read_text(encoding="utf-8"))
        if old != settings and any(out_dir.glob("*.jsonl")):
            raise ValueError(f"{out_dir} holds results made with other settings ({old}, now {settings}): "
                             "pass --fresh to discard them or choose another --output")
    cfg_file.write_text(json.dumps(settings, indent=2), encoding="utf-8")

    echo(f"JSONSchemaBench: {len(cases)} schemas ({cfg.per_dataset if cfg.per_dataset is not None else 'all'} per "
         f"dataset, seed {cfg.seed}, {len({c['dataset'] for c in cases})} datasets), model {label}, greedy, "
         f"max_tokens {cfg.max_tokens}, prompt <= {cfg.max_prompt_tokens} tokens; "
         f"engines: {', '.join(c.name for c in engines) or 'none'}")

    done: dict[str, dict[str, dict]] = {cls.name: read_results(out_dir / f"{cls.name}.jsonl") for cls in engines}
    todo = [(c, cls.name) for c in cases for cls in engines if c["id"] not in done[cls.name]]
    n_done = len(cases) * len(engines) - len(todo)
    if n_done and todo:
        echo(f"resuming: {n_done} (schema, engine) pairs already in {out_dir}, {len(todo)} to run")
    info: dict[str, Any] = {}
    if todo:
        need = [cls for cls in engines if any(n == cls.name for _, n in todo)]
        info = _run_pairs(cfg, need, todo, out_dir, done, skipped, echo)

    # engines with results in the folder but not selected this time are reported too
    from .gen_engines import GEN_ENGINES

    names = [cls.name for cls in engines if cls.name not in skipped or done.get(cls.name)]
    for p in sorted(out_dir.glob("*.jsonl")):
        n = p.stem
        if n not in names and n in GEN_ENGINES:
            recs = read_results(p)
            if any(i in recs for i in ids):
                done[n] = recs
                names.append(n)
    order = list(GEN_ENGINES)
    first = list(names)
    names.sort(key=lambda n: (order.index(n) if n in order else len(order), first.index(n)))
    all_records = {n: [done[n][i] for i in ids if i in done[n]] for n in names}
    all_records = {n: r for n, r in all_records.items() if r}
    emeta = {cls.name: (cls.constrained, cls.baseline) for cls in engines}
    versions = {n: (cls.version() if (cls := _class_of(n, engines)) else "") for n in all_records}
    versions.update(info.get("versions", {}))
    summaries = summarize(all_records, versions=versions, meta=emeta)
    by_dataset = summarize(all_records, versions=versions, by_dataset=True, meta=emeta)
    table = format_overall_table(summaries)
    dtable = format_dataset_table(by_dataset)
    wall = time.perf_counter() - t_start
    echo("")
    echo(table)
    echo("")
    echo(dtable)
    meta = {
        "command": cfg.command,
        "data": str(cfg.data or (default_data_path() if cfg.records is None else "<inline>")),
        "n_records": len(records),
        "per_dataset": cfg.per_dataset,
        "seed": cfg.seed,
        "n_schemas": len(cases),
        "datasets": sorted({c["dataset"] for c in cases}),
        **settings,
        "compile_timeout_s": cfg.compile_timeout,
        "gen_timeout_s": cfg.gen_timeout,
        "wall_s": wall,
        "skipped": skipped,
        "settings": {n: cls.settings for n in all_records if (cls := _class_of(n, engines))},
        "worker": {k: v for k, v in info.items() if k in ("model_load_s", "setup_s", "torch", "torch_threads")},
        "python": sys.version.split()[0],
    }
    files: dict[str, Path] = {f"{n}.jsonl": out_dir / f"{n}.jsonl" for n in all_records}
    files["summary.md"] = out_dir / "summary.md"
    files["summary.md"].write_text(format_markdown(summaries, by_dataset, meta), encoding="utf-8")
    files["summary.json"] = out_dir / "summary.json"
    files["summary.json"].write_text(json.dumps({"meta": meta, "summaries": summaries, "by_dataset": by_dataset},
                                                indent=2, default=str), encoding="utf-8")
    if cfg.plot and summaries:
        try:
            files["jsonschemabench.png"] = plot_coverage(out_dir / "jsonschemabench.png", by_dataset, summaries,
                                                         title=f"JSONSchemaBench end to end ({label}, "
                                                               f"{len(cases)} schemas, max_tokens {cfg.max_tokens})")
        except ImportError as e:
            echo(f"(no plot: {e})")
    echo("")
    echo(f"wrote {', '.join(str(p) for p in files.values())} ({wall:.1f}s)")
    return JSBResult(summaries, by_dataset, table, dtable, out_dir, files, skipped, all_records, wall)


def _class_of(name: str, engines: Sequence[type[GenEngine]]) -> type[GenEngine] | None:
    for cls in engines:
        if cls.name == name:
            return cls
    try:
        return get_gen_engine_class(name)
    except ValueError:
        return None


def _run_pairs(cfg: JSBConfig, engines: list[type[GenEngine]], todo: list[tuple[dict, str]], out_dir: Path,
               done: dict[str, dict[str, dict]], skipped: dict[str, str], echo) -> dict:
    """Run the (case, engine) pairs of ``todo``, appending each record to its engine's JSONL."""
    if cfg.isolate:
        factory = functools.partial(make_jsb_worker, cfg.model, list(engines), cfg.max_tokens,
                                    cfg.max_prompt_tokens, cfg.warmup, cfg.fresh_regex_cache, cfg.format)
        worker: Any = Worker(factory, mem_limit_gb=cfg.mem_limit_gb, start_timeout=cfg.start_timeout,
                             log_path=str(out_dir / "worker.log"))
        try:
            info = worker.start()
        except WorkerSetupError as e:
            last = str(e).strip().splitlines()[-1] if str(e).strip() else str(e)
            echo(f"the benchmark worker could not start: {last}")
            for c in engines:
                skipped[c.name] = "worker set-up failed"
            return {}
    else:
        if cfg.model_obj is not None:
            model = cfg.model_obj
        else:
            from ..models import load_model

            model = load_model(cfg.model, quantized=False)  # the dense weights: the q4 engine makes its own twin
        handler, info = make_jsb_handler(model, engines, max_tokens=cfg.max_tokens,
                                         max_prompt_tokens=cfg.max_prompt_tokens, warmup=cfg.warmup,
                                         format=cfg.format)
        worker = _InProcess(handler, info)
    for name, why in info.get("setup_errors", {}).items():
        echo(f"skipping engine {name!r}: set-up failed: {why}")
        skipped[name] = f"set-up failed: {why}"
    if cfg.isolate:
        setup = ", ".join(f"{k} {v:.1f}s" for k, v in info.get("setup_s", {}).items())
        echo(f"worker ready in {info.get('start_s', 0):.1f}s (model {info.get('model_load_s', 0):.1f}s; "
             f"engine set-up + warm-up: {setup})")
    todo = [(c, n) for c, n in todo if n not in skipped]
    bar = None
    files: dict[str, Any] = {}
    try:
        write = echo
        if cfg.progress:
            try:
                import threading

                from tqdm import tqdm

                tqdm.set_lock(threading.RLock())  # not tqdm's multiprocessing lock: nothing to leak at exit
                bar = tqdm(total=len(todo), desc="jsonschemabench", unit="run", dynamic_ncols=True, file=sys.stderr)
                write = tqdm.write
            except ImportError:  # pragma: no cover
                pass
        counts: dict[str, int] = defaultdict(int)
        for case, name in todo:
            if bar is not None:
                bar.set_description(f"{case['dataset'][:16]} {name}", refresh=False)
            try:
                rec = _call_record(worker, case, name, cfg)
            except WorkerSetupError as e:
                write(f"the worker could not be restarted ({str(e).strip()[-300:]}); stopping")
                break
            done[name][case["id"]] = rec
            f = files.get(name)
            if f is None:
                f = files[name] = (out_dir / f"{name}.jsonl").open("a", encoding="utf-8")
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            f.flush()
            counts["valid" if rec["valid"] else rec["status"]] += 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(dict(counts), refresh=False)
            if rec["status"] in ("timeout", "crash", "compile_timeout", "compile_crash"):
                restart = " (the worker is restarted)" if cfg.isolate else ""
                write(f"{name}: {case['id']}: {rec['status']}: {rec['error']}{restart}")
    finally:
        if bar is not None:
            bar.close()
        for f in files.values():
            f.close()
        worker.stop()
    return info


# --------------------------------------------------------------------------- summaries


def _median(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return statistics.median(xs) if xs else None


def _group_summary(engine: str, recs: Sequence[dict], base: dict[str, dict] | None, *, constrained: bool,
                   baseline: str, version: str = "", dataset: str | None = None) -> dict:
    n = len(recs)
    declared = sum(1 for r in recs if r.get("declared"))
    valid = sum(1 for r in recs if r.get("valid"))
    ratios = []
    if base is not None:
        for r in recs:
            b = base.get(r["id"])
            if b is not None and r.get("tpot_s") and b.get("tpot_s"):
                ratios.append(r["tpot_s"] / b["tpot_s"])
    statuses = {s: sum(1 for r in recs if r.get("status") == s) for s in STATUSES}
    return {
        "engine": engine,
        "dataset": dataset,
        "version": version,
        "constrained": constrained,
        "baseline": baseline,
        "n": n,
        "declared": declared,
        "valid": valid,
        "declared_pct": 100.0 * declared / n if n else 0.0,
        "empirical_pct": 100.0 * valid / n if n else 0.0,
        "compliance_pct": 100.0 * valid / declared if declared else None,
        "json_ok": sum(1 for r in recs if r.get("json_ok")),
        "unterminated": sum(1 for r in recs if r.get("unterminated")),
        "statuses": statuses,
        "failures": statuses["gen_error"] + statuses["timeout"] + statuses["crash"],
        "compile_p50_ms": (lambda v: v * 1e3 if v is not None else None)(
            _median([r["compile_s"] for r in recs if r.get("compile_s") is not None])) if constrained else None,
        "ttft_p50_s": _median([r.get("ttft_s") for r in recs if r.get("ttft_s") is not None]),
        "tpot_p50_ms": (lambda v: v * 1e3 if v is not None else None)(
            _median([r.get("tpot_s") for r in recs if r.get("tpot_s")])),
        "overhead": _median(ratios) if ratios else None,
        "n_paired": len(ratios),
        "tokens_p50": _median([r.get("n_tokens") for r in recs if r.get("declared") and r.get("n_tokens")]),
        # structgen's loop: output tokens per forward pass after the prefill, and the share of output
        # tokens kept from grammar-forced drafts (summed over the engine's generations)
        "tokens_per_forward": _ratio(sum(r.get("n_tokens") or 0 for r in recs if r.get("forward_passes")),
                                     sum(r.get("forward_passes") or 0 for r in recs)),
        "forced_fraction": _ratio(sum(r.get("forced_tokens") or 0 for r in recs),
                                  sum(r.get("n_tokens") or 0 for r in recs if r.get("forward_passes"))),
        "prompt_truncated": sum(1 for r in recs if r.get("prompt_truncated")),
    }


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _engine_meta(name: str) -> tuple[bool, str, str]:
    """(constrained, baseline, version) of a registered engine; a constrained
    engine against ``unconstrained`` for any other name."""
    try:
        cls = get_gen_engine_class(name)
    except ValueError:
        return True, "unconstrained", ""
    return cls.constrained, cls.baseline, cls.version()


def summarize(records_by_engine: dict[str, Sequence[dict]], *, versions: dict[str, str] | None = None,
              by_dataset: bool = False, meta: dict[str, tuple[bool, str]] | None = None) -> list[dict]:
    """One summary per engine (or per dataset and engine, datasets in name order).

    ``meta``: engine -> (constrained, baseline engine) for engines that are
    not registered (tests' toy engines); registered ones know their own.
    """
    versions = versions or {}
    meta = meta or {}
    by_id = {n: {r["id"]: r for r in recs} for n, recs in records_by_engine.items()}
    out = []
    groups: list[tuple[str | None, Callable[[dict], bool]]] = [(None, lambda r: True)]
    if by_dataset:
        dss = sorted({r["dataset"] for recs in records_by_engine.values() for r in recs})
        groups = [(ds, (lambda d: lambda r: r["dataset"] == d)(ds)) for ds in dss]
    for ds, keep in groups:
        for name, recs in records_by_engine.items():
            constrained, baseline = meta[name] if name in meta else _engine_meta(name)[:2]
            sel = [r for r in recs if keep(r)]
            if not sel:
                continue
            base = by_id.get(baseline) if baseline != name else None
            out.append(_group_summary(name, sel, base, constrained=constrained, baseline=baseline,
                                      version=versions.get(name, ""), dataset=ds))
    return out


# --------------------------------------------------------------------------- tables


def _f(v: Any, nd: int = 1) -> str:
    from .report import _f as f

    return f(v, nd)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


_OVERALL_HEAD = ["engine", "schemas", "declared %", "empirical %", "compliance %", "unterminated",
                 "gen err/timeout/crash", "compile p50 ms", "TTFT p50 s", "TPOT p50 ms", "tokens/s", "overhead",
                 "tokens/forward", "forced %"]


def _overall_row(s: dict) -> list[str]:
    tps = 1e3 / s["tpot_p50_ms"] if s.get("tpot_p50_ms") else None
    forced = s.get("forced_fraction")
    return [s["engine"], str(s["n"]), _pct(s["declared_pct"]), _pct(s["empirical_pct"]), _pct(s["compliance_pct"]),
            str(s["unterminated"]), str(s["failures"]), _f(s["compile_p50_ms"], 1), _f(s["ttft_p50_s"], 2),
            _f(s["tpot_p50_ms"], 1), _f(tps, 1), _x(s["overhead"]) if s["constrained"] else "(baseline)",
            _f(s.get("tokens_per_forward"), 2), "-" if forced is None else f"{100 * forced:.0f}"]


_DATASET_HEAD = ["dataset", "engine", "n", "declared", "empirical", "compliance %", "unterm.",
                 "compile p50 ms", "TTFT p50 s", "TPOT p50 ms", "overhead"]


def _dataset_row(s: dict) -> list[str]:
    return [s["dataset"] or "all", s["engine"], str(s["n"]), f"{s['declared']}/{s['n']}", f"{s['valid']}/{s['n']}",
            _pct(s["compliance_pct"]), str(s["unterminated"]), _f(s["compile_p50_ms"], 1), _f(s["ttft_p50_s"], 2),
            _f(s["tpot_p50_ms"], 1), _x(s["overhead"]) if s["constrained"] else "-"]


def format_overall_table(summaries: Sequence[dict]) -> str:
    """Plain-text table, one row per engine."""
    from .report import format_text_table

    return format_text_table(_OVERALL_HEAD, [_overall_row(s) for s in summaries])


def format_dataset_table(by_dataset: Sequence[dict]) -> str:
    """Plain-text table, one row per (dataset, engine)."""
    from .report import format_text_table

    return format_text_table(_DATASET_HEAD, [_dataset_row(s) for s in by_dataset])


def _pivot(by_dataset: Sequence[dict], summaries: Sequence[dict], key: str) -> tuple[list[str], list[list[str]]]:
    engines = [s["engine"] for s in summaries]
    cell = {(s["dataset"], s["engine"]): s for s in by_dataset}
    head = ["dataset"] + engines
    rows = []
    for ds in sorted({s["dataset"] for s in by_dataset}):
        rows.append([ds] + [_pct(cell[(ds, e)][key]) if (ds, e) in cell else "-" for e in engines])
    rows.append(["**all**"] + [_pct(s[key]) for s in summaries])
    return head, rows


def format_markdown(summaries: Sequence[dict], by_dataset: Sequence[dict], meta: dict) -> str:
    """The run as a markdown document: settings, overall table, pivots, per-dataset table."""
    from .report import _md_table

    lines = ["# JSONSchemaBench end to end", ""]
    if meta.get("command"):
        lines += [f"Command: `{meta['command']}`", ""]
    lines += [
        f"- data: `{meta.get('data')}` ({meta.get('n_schemas')} schemas: {meta.get('per_dataset')} per dataset, "
        f"seed {meta.get('seed')}, {len(meta.get('datasets') or [])} datasets)",
        f"- model: {meta.get('model')}; greedy; max_tokens {meta.get('max_tokens')}; prompt capped at "
        f"{meta.get('max_prompt_tokens')} tokens (schema text cut, constraint whole); time limits: compile "
        f"{meta.get('compile_timeout_s')} s, generation {meta.get('gen_timeout_s')} s; wall time {meta.get('wall_s', 0):.0f} s",
        "- versions: " + ", ".join(f"{s['engine']} {s['version']}" for s in summaries),
    ]
    for n, st in (meta.get("settings") or {}).items():
        lines.append(f"- {n}: {st}")
    if meta.get("skipped"):
        lines.append("- skipped: " + "; ".join(f"{k} ({v})" for k, v in meta["skipped"].items()))
    lines += ["", "Declared = compiles; empirical = compiles and the output validates; compliance = empirical / "
              "declared; unterminated = stopped by max_tokens; TTFT = compile + prefill + first token; TPOT = per "
              "output token after the first; overhead = median over schemas of TPOT / the baseline's TPOT on the "
              "same schema.", ""]
    lines.append(_md_table(_OVERALL_HEAD, [_overall_row(s) for s in summaries]))
    head, rows = _pivot(by_dataset, summaries, "empirical_pct")
    lines += ["", "Empirical coverage (%) per dataset:", "", _md_table(head, rows)]
    head, rows = _pivot(by_dataset, summaries, "declared_pct")
    lines += ["", "Declared coverage (%) per dataset:", "", _md_table(head, rows)]
    lines += ["", "Per dataset:", "", _md_table(_DATASET_HEAD, [_dataset_row(s) for s in by_dataset])]
    trunc = max((s["prompt_truncated"] for s in summaries), default=0)
    if trunc:
        lines += ["", f"{trunc} schema(s) did not fit the prompt cap: their schema text was cut in the prompt."]
    return "\n".join(lines) + "\n"


def plot_coverage(path: str | Path, by_dataset: Sequence[dict], summaries: Sequence[dict], *,
                  title: str = "JSONSchemaBench") -> Path:
    """PNG: empirical coverage per dataset, one bar per engine (declared coverage as outline)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    engines = [s["engine"] for s in summaries]
    dss = sorted({s["dataset"] for s in by_dataset}) + ["all"]
    cell = {(s["dataset"], s["engine"]): s for s in by_dataset}
    cell.update({("all", s["engine"]): s for s in summaries})
    x = np.arange(len(dss))
    w = 0.8 / max(len(engines), 1)
    fig, ax = plt.subplots(figsize=(min(16.0, max(9.0, 0.15 * len(dss) * max(1, len(engines)) + 3)), 5.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, e in enumerate(engines):
        emp = [cell[(d, e)]["empirical_pct"] if (d, e) in cell else 0.0 for d in dss]
        dec = [cell[(d, e)]["declared_pct"] if (d, e) in cell else 0.0 for d in dss]
        pos = x - 0.4 + w * (k + 0.5)
        c = colors[k % len(colors)]
        ax.bar(pos, dec, w * 0.9, fill=False, edgecolor=c, linewidth=0.8)
        ax.bar(pos, emp, w * 0.9, color=c, label=e)
    ax.set_xticks(x)
    ax.set_xticklabels(dss, rotation=30, ha="right")
    ax.set_ylabel("schemas (%)")
    ax.set_ylim(0, 105)
    ax.set_title(title + "\nfilled: empirical coverage (output validates); outline: declared coverage (compiles)",
                 fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=min(len(engines), 4), loc="upper center", bbox_to_anchor=(0.5, -0.22))
    fig.tight_layout()
    p = Path(path)
    fig.savefig(p, dpi=120)
    plt.close(fig)
    return p
