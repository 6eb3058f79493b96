"""``structgen bench load``: many threads driving matchers for minutes, watching memory.

A server keeps one compiler for hours while requests compile and step matchers on many threads.
This run does that on a small scale: ``threads`` workers share one ``GrammarCompiler`` and loop
until the time is up, each picking a constraint (MaskBench dev schemas, a regex, ``json.lark``),
walking it with random tokens its masks allow (every allowed token must be accepted) and, every few walks, compiling a schema it has not seen (a MaskBench
schema with one bound changed) so the caches keep filling and evicting.  The main thread samples
the resident set every second.  Reported: matcher steps and walks per second, mismatches, and the
resident set after warm-up (the first fifth of the run), at the end and its peak, with the
growth between and the least-squares slope over the rest of the run.  ``--output`` gets the
samples as JSON and a plot.
"""
from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from .fuzz import mask_ids
from .maskbench import current_rss_mb, default_data_path

__all__ = ["run_load", "format_load_table"]

REGEXES = [r"[A-Z][a-z]{2,12}( [A-Z][a-z]{2,12}){0,3}", r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z",
           r"(GET|POST|PUT|DELETE) /[a-z0-9/_-]{1,40}( HTTP/1\.[01])?"]


def _schemas(n: int, data: Path | None) -> list[Any]:
    from .fuzz_cases import load_maskbench_rows

    path = data or default_data_path()
    if not path.exists():
        return [{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": k}},
                 "required": ["a"]} for k in range(5, 5 + n)]
    rows = load_maskbench_rows(path)
    return [json.loads(r["schema"]) if isinstance(r["schema"], str) else r["schema"] for r in rows[:n]]


def _variant(schema: Any, k: int) -> Any:
    """The schema with a bound that differs per ``k``: a new grammar for the compiler."""
    return {"allOf": [schema, {"maxProperties": 50 + k} if isinstance(schema, dict) and
                       schema.get("type") == "object" else {"not": {"const": f"load-{k}"}}]}


def run_load(*, seconds: float = 300.0, threads: int = 4, schemas: int = 40, tokenizer: str = "smollm2",
             data: str | Path | None = None, seed: int = 0, output: str | Path | None = None,
             progress: bool = True) -> dict:
    """The run of the module docstring; returns the summary (and writes it under ``output``)."""
    from ..compiler import GrammarCompiler
    from ..engine.matcher import Matcher
    from ..errors import StructgenError
    from ..tokenizer import load_tokenizer_info

    info = load_tokenizer_info(tokenizer)
    compiler = GrammarCompiler(info)
    constraints = []
    for s in _schemas(schemas, Path(data) if data else None):
        try:
            constraints.append(("schema", s, compiler.compile_json_schema(s)))
        except StructgenError:
            continue
    for rx in REGEXES:
        constraints.append(("regex", rx, compiler.compile_regex(rx)))
    constraints.append(("lark", "json", compiler.compile_lark("json")))
    eos = set(info.eos_ids)
    stop = threading.Event()
    lock = threading.Lock()
    totals = {"steps": 0, "walks": 0, "completed": 0, "compiles": 0, "refused": 0, "mismatches": 0, "errors": 0}
    problems: list[str] = []
    variant_counter = iter(range(10**9))

    def worker(w: int) -> None:
        rng = random.Random(seed * 1000 + w)
        steps = walks = completed = compiles = refused = mismatches = errors = 0
        try:
            while not stop.is_set():
                kind, src, g = rng.choice(constraints)
                if walks % 8 == 7 and kind == "schema":
                    with lock:
                        k = next(variant_counter)
                    try:
                        g = compiler.compile_json_schema(_variant(src, k))
                        compiles += 1
                    except StructgenError:
                        refused += 1
                m = Matcher(g)
                walks += 1
                for _ in range(64):
                    allowed = mask_ids(m, info.vocab_size)
                    if not len(allowed):
                        break
                    t = int(allowed[rng.randrange(len(allowed))])
                    if t in eos:
                        completed += 1
                        break
                    if not m.accept_token(t):
                        mismatches += 1
                        with lock:
                            problems.append(f"{kind}: token {t} allowed but refused")
                        break
                    steps += 1
        except Exception as e:  # noqa: BLE001 - any exception under load is a finding
            errors += 1
            with lock:
                problems.append(f"worker {w}: {type(e).__name__}: {e}"[:300])
        with lock:
            for key, v in (("steps", steps), ("walks", walks), ("completed", completed), ("compiles", compiles),
                           ("refused", refused), ("mismatches", mismatches), ("errors", errors)):
                totals[key] += v

    pool = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(threads)]
    t0 = time.perf_counter()
    samples: list[tuple[float, float]] = [(0.0, current_rss_mb())]
    for th in pool:
        th.start()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=int(seconds), desc="load", unit="s")
    while (now := time.perf_counter() - t0) < seconds:
        time.sleep(min(1.0, seconds - now))
        samples.append((time.perf_counter() - t0, current_rss_mb()))
        if bar is not None:
            bar.update(int(samples[-1][0]) - bar.n)
            bar.set_postfix(rss_mb=f"{samples[-1][1]:.0f}")
    stop.set()
    for th in pool:
        th.join()
    wall = time.perf_counter() - t0
    if bar is not None:
        bar.close()
    summary = _summarize(samples, totals, wall, threads, len(constraints), tokenizer)
    summary["problems"] = problems[:20]
    if output:
        out = Path(output)
        out.mkdir(parents=True, exist_ok=True)
        (out / "load.json").write_text(json.dumps({**summary, "samples": samples}, indent=1))
        _plot(samples, summary, out / "load-rss.png")
    return summary


def _summarize(samples, totals, wall, threads, n_constraints, tokenizer) -> dict:
    ts = np.array([s[0] for s in samples])
    rss = np.array([s[1] for s in samples])
    warm = ts >= ts[-1] / 5
    base = float(rss[warm][0]) if warm.any() else float(rss[0])
    slope = float(np.polyfit(ts[warm] / 60, rss[warm], 1)[0]) if warm.sum() >= 3 else 0.0
    return {"seconds": wall, "threads": threads, "constraints": n_constraints, "tokenizer": tokenizer, **totals,
            "steps_per_s": totals["steps"] / wall, "walks_per_s": totals["walks"] / wall,
            "rss_start_mb": float(rss[0]), "rss_after_warmup_mb": base, "rss_end_mb": float(rss[-1]),
            "rss_peak_mb": float(rss.max()), "growth_after_warmup_mb": float(rss[-1]) - base,
            "slope_mb_per_min": slope}


def _plot(samples, summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.plot([s[0] / 60 for s in samples], [s[1] for s in samples], lw=1.5)
    ax.axvline(samples[-1][0] / 300, color="grey", ls=":", lw=1)  # end of warm-up (a fifth of the run)
    ax.set_xlabel("minutes")
    ax.set_ylabel("resident set (MB)")
    ax.set_title(f"structgen bench load: {summary['threads']} threads, {summary['steps_per_s']:,.0f} matcher steps/s")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def format_load_table(s: dict) -> str:
    rows = [("threads", s["threads"]), ("constraints", s["constraints"]), ("seconds", f"{s['seconds']:.0f}"),
            ("matcher steps", f"{s['steps']:,}"), ("steps/s", f"{s['steps_per_s']:,.0f}"),
            ("walks (completed)", f"{s['walks']:,} ({s['completed']:,})"),
            ("compiles under load (refused)", f"{s['compiles']} ({s['refused']})"),
            ("mask/accept mismatches", s["mismatches"]), ("exceptions", s["errors"]),
            ("RSS start / after warm-up / end / peak (MB)",
             f"{s['rss_start_mb']:.0f} / {s['rss_after_warmup_mb']:.0f} / {s['rss_end_mb']:.0f} / {s['rss_peak_mb']:.0f}"),
            ("growth after warm-up (MB)", f"{s['growth_after_warmup_mb']:+.0f}"),
            ("slope after warm-up (MB/min)", f"{s['slope_mb_per_min']:+.1f}")]
    return "\n".join(["| measure | value |", "|---|---:|"] + [f"| {k} | {v} |" for k, v in rows])
