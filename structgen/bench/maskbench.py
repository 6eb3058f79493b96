"""MaskBench: correctness and speed of token-mask engines on real JSON Schemas.

The protocol (``../shared/data/README.md``, the one JSONSchemaBench's authors
use) is implemented by :func:`run_schema`:

* time the compile of the schema (**TTFM**, time to first mask);
* for each test instance: reset the matcher, tokenize
  ``json.dumps(data, indent=None, ensure_ascii=False)`` without special
  tokens, and for each token time "fill the full-vocabulary mask, then commit
  the token" (one **TBM** sample, time between masks);
* a *valid* instance passes when every token is allowed by the mask and
  accepted, and the matcher allows EOS at the end; an *invalid* instance
  passes when it is rejected somewhere (a token not allowed / not accepted, or
  no EOS at the end);
* a schema is ``pass`` when it compiles and every instance is classified
  right; otherwise ``compile_error``, ``timeout``, ``crash`` (the engine raised
  an unexpected exception, or its process died), ``invalidation_error`` (an
  invalid instance accepted -- the worst kind) or ``validation_error`` (a
  valid instance rejected), in that order of precedence.

:func:`run_maskbench` runs the protocol for several engines, each schema in a
supervised worker process (:mod:`structgen.bench.watchdog`) so a hang or a
crash is recorded rather than fatal, writes per-schema JSONL (resumable),
and reports with :mod:`structgen.bench.report`.
"""
from __future__ import annotations

import functools
import gc
import json
import random
import sys
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from .._cache import use_cold_regex_cache
from .data_paths import data_path, read_jsonl
from .engines import (
    ENGINES,
    MaskEngine,
    get_engine_class,
    usable_engines,
    mask_bit,
)
from .watchdog import Worker, WorkerSetupError

__all__ = [
    "STATUSES",
    "DEFAULT_ENGINES",
    "default_data_path",
    "load_maskbench",
    "sample_records",
    "run_schema",
    "make_mask_worker",
    "MaskBenchConfig",
    "MaskBenchResult",
    "run_maskbench",
    "read_results",
]

#: Per-schema outcomes, in report order.
STATUSES = ("pass", "compile_error", "timeout", "validation_error", "invalidation_error", "crash")
DEFAULT_ENGINES = ("structgen", "llguidance", "xgrammar", "outlines-core")
MAX_FAILURES_KEPT = 5

#: Compiled and run once in each new worker, so one-time costs (JIT, lazy
#: tables) land in the set-up time instead of the first schema's TTFM.
WARMUP_RECORD = {
    "id": "__warmup__",
    "schema": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "n": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["name"],
    },
    "tests": [
        {"data": {"name": "warm-up é", "n": 12, "tags": ["a", "b"]}, "valid": True, "description": "warm-up"},
        {"data": {"n": 1}, "valid": False, "description": "warm-up"},
    ],
}


# --------------------------------------------------------------------------- data


def repo_root() -> Path:
    """The repository folder holding the ``structgen`` package."""
    return Path(__file__).resolve().parents[2]


def default_data_path() -> Path:
    """``maskbench-dev.jsonl.gz`` in the data folders (:mod:`structgen.bench.data_paths`)."""
    return data_path("maskbench-dev.jsonl.gz")


def load_maskbench(path: str | Path | None = None) -> list[dict]:
    """All records (``id``, ``schema``, ``tests``, ``meta``) of a MaskBench JSONL(.gz) file."""
    return list(read_jsonl("maskbench-dev.jsonl.gz", path))


def sample_records(records: Sequence[dict], n: int | None, seed: int = 0) -> list[dict]:
    """A reproducible random sample of ``n`` records (all of them when ``n`` is None or too big)."""
    if n is None or n >= len(records):
        return list(records)
    return random.Random(seed).sample(list(records), n)


# --------------------------------------------------------------------------- the protocol


def _short(e: BaseException, limit: int = 500) -> str:
    s = f"{type(e).__name__}: {e}"
    return s if len(s) <= limit else s[: limit - 3] + "..."


def run_schema(
    engine: MaskEngine,
    encode: Callable[[str], list[int]],
    record: dict,
    *,
    bitmask: tuple[Any, Any] | None = None,
    clock: Callable[[], int] = time.perf_counter_ns,
    decode: Callable[[list[int]], str] | None = None,
) -> dict:
    """Run the MaskBench protocol for one schema on a set-up ``engine``, in this process.

    ``encode(text)`` tokenizes without special tokens; ``bitmask`` is the pair
    from :meth:`MaskEngine.allocate_bitmask` (allocated here when omitted).
    Returns a JSON-ready dict: ``id``, ``status`` (see :data:`STATUSES`),
    ``error``, ``ttfm_ms``, ``tbm_ns`` (one sample per token, nanoseconds),
    ``n_tests``/``n_valid``/``n_invalid``, ``valid_rejected``,
    ``invalid_accepted``, ``inconsistent`` (tests where a token the mask allowed was refused at
    commit: a serving engine ends such a request with an error), ``n_tokens`` and up to 5 ``failures`` (with the
    token and the text before it when ``decode`` is given).
    """
    tests = record.get("tests") or []
    res: dict[str, Any] = {
        "id": record["id"],
        "status": None,
        "error": None,
        "ttfm_ms": None,
        "n_tests": len(tests),
        "n_valid": sum(1 for t in tests if t.get("valid")),
        "n_invalid": sum(1 for t in tests if not t.get("valid")),
        "valid_rejected": 0,
        "invalid_accepted": 0,
        "inconsistent": 0,
        "n_tokens": 0,
        "failures": [],
        "notes": [],
        "tbm_ns": [],
    }
    t0 = clock()
    try:
        engine.compile(record["schema"])
    except MemoryError as e:
        res.update(status="crash", error="compile: out of memory " + _short(e))
        return res
    except engine.compile_error_types as e:
        res.update(status="compile_error", error=_short(e))
        return res
    except Exception as e:  # noqa: BLE001 - an engine bug, not a refusal
        res.update(status="crash", error="compile: " + _short(e))
        return res
    res["ttfm_ms"] = (clock() - t0) / 1e6

    if bitmask is None:
        bitmask = engine.allocate_bitmask()
    bm, view = bitmask
    fill, commit = engine.fill_mask, engine.commit
    tbm: list[int] = res["tbm_ns"]
    failures: list[dict] = res["failures"]

    for i, test in enumerate(tests):
        valid = bool(test.get("valid"))
        text = json.dumps(test["data"], indent=None, ensure_ascii=False)
        tokens = encode(text)
        accepted = True
        reason = None
        k = -1
        try:
            engine.reset()
            for k, tok in enumerate(tokens):
                a = clock()
                fill(bm)
                b = clock()
                if not mask_bit(view, tok):
                    tbm.append(b - a)
                    accepted, reason = False, "token not allowed by the mask"
                    break
                c = clock()
                ok = commit(tok)
                d = clock()
                tbm.append(b - a + d - c)
                if not ok:
                    accepted, reason = False, "token allowed by the mask but not accepted"
                    res["inconsistent"] += 1
                    break
            if accepted:
                accepted, note = engine.final_check(bm, view)
                if note:
                    res["notes"].append(f"test #{i}: {note}")
                if not accepted:
                    reason, k = "EOS not allowed at the end", len(tokens)
        except MemoryError as e:
            res.update(status="crash", error=f"test #{i}: out of memory " + _short(e))
            break
        except Exception as e:  # noqa: BLE001
            res.update(status="crash", error=f"test #{i}: " + _short(e))
            break
        if accepted == valid:
            continue
        if valid:
            res["valid_rejected"] += 1
        else:
            res["invalid_accepted"] += 1
            reason = "invalid instance accepted"
        if len(failures) < MAX_FAILURES_KEPT:
            fail = {
                "test": i,
                "valid": valid,
                "reason": reason,
                "token_index": k,
                "token": tokens[k] if 0 <= k < len(tokens) else None,
                "n_tokens": len(tokens),
                "description": str(test.get("description", ""))[:200],
            }
            if decode is not None and valid:
                try:
                    fail["before"] = decode(tokens[max(0, k - 12):max(k, 0)])[-60:]
                    if 0 <= k < len(tokens):
                        fail["token_text"] = decode([tokens[k]])
                except Exception:  # noqa: BLE001 - diagnostics only
                    pass
            failures.append(fail)

    res["n_tokens"] = len(tbm)
    if res["status"] is None:
        if res["invalid_accepted"]:
            res["status"] = "invalidation_error"
        elif res["valid_rejected"]:
            res["status"] = "validation_error"
        else:
            res["status"] = "pass"
    if res["status"] != "pass" and res["error"] is None and failures:
        f = failures[0]
        res["error"] = f"test #{f['test']} ({'valid' if f['valid'] else 'invalid'}): {f['reason']}"
    return res


def _encoder(tokenizer: Any) -> Callable[[str], list[int]]:
    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    return encode


class GcPauses:
    """A ``gc.callbacks`` hook summing the garbage collector's pauses: a Python engine's full
    collections land inside whichever compile or mask is running, so the report says how much
    of the measured time they were (``gc_ms`` and ``gc_full`` per schema)."""

    def __init__(self) -> None:
        self.total_ns = 0
        self.full = 0
        self._start = 0

    def reset(self) -> None:
        self.total_ns = 0
        self.full = 0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter_ns()
        else:
            self.total_ns += time.perf_counter_ns() - self._start
            self.full += info.get("generation") == 2


def current_rss_mb() -> float:
    """This process's resident set now, in MB (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def make_mask_worker(engine: str | type[MaskEngine], tokenizer_spec: Any, warmup: bool = True,
                     options: dict | None = None):
    """Worker factory (runs in the child): load the tokenizer, set the engine up once.

    Returns ``(handler, info)``; ``handler(record)`` runs :func:`run_schema`;
    ``info`` has ``tokenizer_load_s`` (transformers tokenizer),
    ``engine_setup_s`` (the engine's own tokenizer preprocessing),
    ``warmup_s``, ``version``, ``vocab_size`` and ``eos_token_ids``.
    """
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    # compile times are measured cold: no regex automaton saved on disk by an earlier run
    use_cold_regex_cache()
    cls = get_engine_class(engine)
    t0 = time.perf_counter()
    tok = tokenizer_spec.load()
    t1 = time.perf_counter()
    eng = cls()
    eng.options = dict(options or {})
    eng.setup(tok)
    bitmask = eng.allocate_bitmask()
    t2 = time.perf_counter()
    encode = _encoder(tok)
    info: dict[str, Any] = {
        "engine": cls.name,
        "version": cls.version(),
        "tokenizer": getattr(tokenizer_spec, "label", str(tokenizer_spec)),
        "tokenizer_load_s": t1 - t0,
        "engine_setup_s": t2 - t1,
        "vocab_size": int(eng.vocab_size),
        "eos_token_ids": [int(e) for e in eng.eos_token_ids],
    }
    if warmup:
        w = run_schema(eng, encode, WARMUP_RECORD, bitmask=bitmask)
        info["warmup_status"] = w["status"]
    info["warmup_s"] = time.perf_counter() - t2
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    # what a server does once it is up (vLLM, SGLang): the libraries and tokenizer loaded so far
    # are permanent, so a full garbage collection does not rescan them in the middle of a
    # compile or a mask (same for every engine)
    gc.collect()
    gc.freeze()

    decode = getattr(tok, "decode", None)
    pauses = GcPauses()
    gc.callbacks.append(pauses)

    def handler(record: dict) -> dict:
        pauses.reset()
        res = run_schema(eng, encode, record, bitmask=bitmask, decode=decode)
        res["gc_ms"], res["gc_full"] = round(pauses.total_ns / 1e6, 3), pauses.full
        res["rss_now_mb"] = current_rss_mb()  # resident now (the peak is a high-water mark: it cannot fall)
        return res

    return handler, info


# --------------------------------------------------------------------------- the runner


@dataclass
class MaskBenchConfig:
    """Options of :func:`run_maskbench` (the CLI's ``structgen bench mask`` flags).

    ``records`` / ``tokenizer_spec`` let tests pass inline data and a toy
    tokenizer instead of ``data`` / ``tokenizer``.
    """

    data: str | Path | None = None
    tokenizer: str = "deepseek"
    engines: Sequence[str | type[MaskEngine]] = DEFAULT_ENGINES
    sample: int | None = None
    seed: int = 0
    timeout: float = 60.0
    output: str | Path | None = None
    resume: bool = True
    mem_limit_gb: float | None = 16.0
    progress: bool = True
    plot: bool = True
    warmup: bool = True
    start_timeout: float = 600.0
    context: str = "spawn"
    records: list[dict] | None = None
    tokenizer_spec: Any = None
    command: str | None = None
    #: compile options the engines that know them read (structgen: ``format``, ``registry``)
    engine_options: dict = field(default_factory=dict)


@dataclass
class MaskBenchResult:
    """What :func:`run_maskbench` produced: per-engine summaries, texts and files."""

    summaries: list[dict]
    ratios: list[dict]
    table: str
    ratio_table: str
    output_dir: Path
    files: dict[str, Path] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    records: dict[str, list[dict]] = field(default_factory=dict)
    wall_s: float = 0.0


def read_results(path: str | Path) -> dict[str, dict]:
    """Per-schema records of one engine's JSONL, by schema id (last line wins)."""
    out: dict[str, dict] = {}
    p = Path(path)
    if not p.is_file():
        return out
    with p.open(encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by an interrupted run
            if "id" in rec:
                out[rec["id"]] = rec
    return out


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def _failed_record(rid: str, status: str, error: str | None, wall_s: float) -> dict:
    return {
        "id": rid, "status": status, "error": error, "ttfm_ms": None, "n_tests": None,
        "valid_rejected": 0, "invalid_accepted": 0, "inconsistent": 0, "n_tokens": 0, "failures": [], "notes": [],
        "tbm_ns": [], "wall_s": wall_s,
    }


def run_maskbench(cfg: MaskBenchConfig, *, echo: Callable[[str], None] = print) -> MaskBenchResult:
    """Run MaskBench for ``cfg.engines`` and report (table to ``echo``, files to the output folder)."""
    from . import report

    t_start = time.perf_counter()
    records = cfg.records if cfg.records is not None else load_maskbench(cfg.data)
    chosen = sample_records(records, cfg.sample, cfg.seed)
    ids = [r["id"] for r in chosen]

    if cfg.tokenizer_spec is not None:
        spec = cfg.tokenizer_spec
    else:
        from .tokenizers import resolve_tokenizer

        spec = resolve_tokenizer(cfg.tokenizer)
    label = getattr(spec, "label", None) or str(cfg.tokenizer)
    out_dir = Path(cfg.output) if cfg.output is not None else Path("bench-out") / "mask" / label
    out_dir.mkdir(parents=True, exist_ok=True)

    engines, skipped = usable_engines(cfg.engines, get_engine_class, echo)

    echo(f"MaskBench: {len(chosen)} of {len(records)} schemas (seed {cfg.seed}), tokenizer {label}, "
         f"timeout {cfg.timeout:g}s, engines: {', '.join(c.name for c in engines) or 'none'}")

    all_records: dict[str, list[dict]] = {}
    setups_this_run: dict[str, list[dict]] = {}
    for cls in engines:
        jsonl = out_dir / f"{cls.name}.jsonl"
        setup_file = out_dir / f"{cls.name}.setup.jsonl"
        if not cfg.resume:
            for p in (jsonl, setup_file):
                if p.exists():
                    p.unlink()
        done = read_results(jsonl)
        todo = [r for r in chosen if r["id"] not in done]
        setups_this_run[cls.name] = []
        if done and len(todo) < len(chosen):
            echo(f"{cls.name}: {len(chosen) - len(todo)} schemas already in {jsonl}, {len(todo)} to run")
        if todo:
            ok = _run_engine(cls, spec, todo, cfg, jsonl, setup_file, done, setups_this_run[cls.name], echo)
            if not ok and not any(i in done for i in ids):
                skipped[cls.name] = "worker set-up failed"
                continue
        all_records[cls.name] = [done[i] for i in ids if i in done]

    summaries = []
    for cls in engines:
        if cls.name not in all_records:
            continue
        setups = setups_this_run.get(cls.name) or _read_jsonl(out_dir / f"{cls.name}.setup.jsonl")[-1:]
        summaries.append(report.summarize_engine(cls.name, all_records[cls.name], setups, version=cls.version()))

    ratios = report.ratio_rows(summaries)
    table = report.format_table(summaries)
    ratio_table = report.format_ratios(ratios)
    wall = time.perf_counter() - t_start
    echo("")
    echo(table)
    if ratio_table:
        echo("")
        echo(ratio_table)
    files: dict[str, Path] = {f"{s['engine']}.jsonl": out_dir / f"{s['engine']}.jsonl" for s in summaries}
    meta = {
        "command": cfg.command,
        "data": str(cfg.data or (default_data_path() if cfg.records is None else "<inline>")),
        "n_records": len(records),
        "sample": cfg.sample,
        "seed": cfg.seed,
        "n_schemas": len(chosen),
        "tokenizer": label,
        "timeout_s": cfg.timeout,
        "wall_s": wall,
        "skipped": skipped,
    }
    md = report.format_markdown(summaries, ratios, meta)
    files["summary.md"] = out_dir / "summary.md"
    files["summary.md"].write_text(md, encoding="utf-8")
    files["summary.json"] = out_dir / "summary.json"
    files["summary.json"].write_text(json.dumps({"meta": meta, "summaries": summaries, "ratios": ratios},
                                                indent=2, default=str), encoding="utf-8")
    if cfg.plot and summaries:
        try:
            files["maskbench.png"] = report.plot_cdfs(out_dir / "maskbench.png", all_records, title=f"MaskBench ({label}, {len(chosen)} schemas)")
        except ImportError as e:
            echo(f"(no plot: {e})")
    echo("")
    echo(f"wrote {', '.join(str(p) for p in files.values())} ({wall:.1f}s)")
    return MaskBenchResult(summaries, ratios, table, ratio_table, out_dir, files, skipped, all_records, wall)


def _run_engine(cls, spec, todo, cfg, jsonl, setup_file, done, setups_out, echo) -> bool:
    """Run ``todo`` schemas for one engine; append results to ``jsonl`` and ``done``."""
    factory = functools.partial(make_mask_worker, cls, spec, cfg.warmup, cfg.engine_options)
    worker = Worker(factory, mem_limit_gb=cfg.mem_limit_gb, start_timeout=cfg.start_timeout, context=cfg.context,
                    log_path=str(jsonl.with_suffix(".worker.log")))
    bar = None
    try:
        try:
            info = worker.start()
        except WorkerSetupError as e:
            echo(f"skipping engine {cls.name!r}: worker set-up failed: {str(e).strip().splitlines()[-1] if str(e).strip() else e}")
            return False
        echo(_setup_line(cls.name, info))
        seen = 0
        counts = {s: 0 for s in STATUSES}
        try:
            from tqdm import tqdm

            bar = tqdm(total=len(todo), desc=cls.name, unit="schema", disable=not cfg.progress,
                       dynamic_ncols=True, file=sys.stderr)
            write = tqdm.write
        except ImportError:  # pragma: no cover
            write = echo
        with jsonl.open("a", encoding="utf-8") as out, setup_file.open("a", encoding="utf-8") as sf:
            for rec in todo:
                try:
                    r = worker.call(rec, cfg.timeout)
                except WorkerSetupError as e:
                    write(f"{cls.name}: worker could not be restarted ({str(e).strip()[-300:]}); stopping this engine")
                    break
                while seen < len(worker.setups):
                    s = dict(worker.setups[seen])
                    setups_out.append(s)
                    sf.write(json.dumps(s) + "\n")
                    sf.flush()
                    if seen > 0:
                        write(f"{cls.name}: new worker after a timeout/crash ({_setup_line(cls.name, s, short=True)})")
                    seen += 1
                if r.status == "ok":
                    row = dict(r.value)
                else:
                    status = "timeout" if r.status == "timeout" else "crash"
                    err = r.error or ""
                    if r.status == "error":  # the harness itself raised: keep the last line
                        err = "harness: " + (err.strip().splitlines() or ["?"])[-1]
                    row = _failed_record(rec["id"], status, err, r.wall_s)
                row["engine"] = cls.name
                row["wall_s"] = round(r.wall_s, 6)
                row["rss_mb"] = r.rss_mb
                done[rec["id"]] = row
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                out.flush()
                counts[row["status"]] = counts.get(row["status"], 0) + 1
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix({k: v for k, v in counts.items() if v}, refresh=False)
                if row["status"] in ("timeout", "crash") and cfg.progress is False:
                    echo(f"{cls.name}: {rec['id']}: {row['status']} ({row['error']})")
        return True
    finally:
        if bar is not None:
            bar.close()
        worker.stop()


def _setup_line(name: str, info: dict, short: bool = False) -> str:
    core = (f"tokenizer load {info.get('tokenizer_load_s', 0):.2f}s, engine set-up {info.get('engine_setup_s', 0):.2f}s, "
            f"warm-up {info.get('warmup_s', 0):.2f}s ({info.get('warmup_status', 'skipped')})")
    if short:
        return core
    return (f"{name} {info.get('version', '?')}: worker ready in {info.get('start_s', 0):.1f}s ({core}; "
            f"vocab {info.get('vocab_size')}, EOS {info.get('eos_token_ids')}, RSS {info.get('rss_mb', 0):.0f} MB)")


def iter_engines() -> Iterable[str]:
    """Names of the known engines."""
    return iter(ENGINES)
