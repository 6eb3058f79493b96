"""``run_jsonschemabench``: the (schema, engine) pairs in turn through the worker, resumable."""
from __future__ import annotations

import functools
import json
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..engines import usable_engines
from ..gen_engines import GenEngine, get_gen_engine_class
from ..maskbench import read_results
from ..watchdog import Worker, WorkerSetupError
from .data import COMPILE_FAILURES, DEFAULT_ENGINES, default_data_path, load_jsonschemabench, sample_cases
from .worker import _short, make_jsb_handler, make_jsb_worker
from .tables import format_dataset_table, format_markdown, format_overall_table, plot_coverage, summarize


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
        from ...models import DEFAULT_MODEL_NAME

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
        from ..watchdog import CallResult

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

    engines, skipped = usable_engines(
        cfg.engines, get_gen_engine_class, echo,
        hint=lambda cls: " (pip install 'structgen[llamacpp]'; compiles llama.cpp for ~9 minutes)"
        if cls.name.startswith("llamacpp") else "")

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
    from ..gen_engines import GEN_ENGINES

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
            from ...models import load_model

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
