"""``structgen bench memory``: does a long-running process stay bounded over MaskBench's dev split?

One process does MaskBench's work (compile each schema, mask and check every test instance:
:func:`structgen.bench.maskbench.run_schema`) for every schema of the split, ``passes`` times, and
records its resident set after each schema.  Caches fill during the first pass up to their byte
bounds (``structgen.set_cache_budget``); a process that is bounded adds nothing on the next pass,
where every schema comes back.  Reported per pass: the resident set at its start, end and peak,
its mean per eighth of the split, and the growth over the pass; the caches' bytes at the end.
``--output`` gets the samples as JSON and a plot.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from .maskbench import current_rss_mb, load_maskbench, make_mask_worker, sample_records

__all__ = ["run_memory", "format_memory_table"]


def run_memory(*, passes: int = 2, sample: int | None = None, seed: int = 0, tokenizer: str = "deepseek",
               data: str | Path | None = None, cache_mb: float | None = None, output: str | Path | None = None,
               progress: bool = True) -> dict:
    """The run of the module docstring; returns the summary (and writes it under ``output``)."""
    from ..byte_lru import cache_budget, cache_stats, set_cache_budget
    from .tokenizers import resolve_tokenizer

    if passes < 1:
        raise ValueError("passes must be at least 1")
    if cache_mb is not None:
        set_cache_budget(int(cache_mb * 2**20))
    records = sample_records(load_maskbench(data), sample, seed)
    handler, info = make_mask_worker("structgen", resolve_tokenizer(tokenizer))
    rss_ready = current_rss_mb()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=passes * len(records), desc="memory", unit="schema")
    rss: list[list[float]] = []
    status: dict[str, int] = {}
    t0 = time.perf_counter()
    for _ in range(passes):
        row = []
        for r in records:
            res = handler(r)
            status[res["status"]] = status.get(res["status"], 0) + 1
            row.append(res["rss_now_mb"])
            if bar is not None:
                bar.update(1)
                bar.set_postfix(rss_mb=f"{row[-1]:.0f}")
        rss.append(row)
    if bar is not None:
        bar.close()
    summary = {
        "schemas": len(records), "passes": passes, "tokenizer": tokenizer, "wall_s": round(time.perf_counter() - t0, 1),
        "cache_budget_mb": round(cache_budget() / 2**20), "rss_ready_mb": round(rss_ready),
        "status": status, "per_pass": [_pass_summary(row) for row in rss],
        "caches_mb": {k: round(v["bytes"] / 2**20, 1) for k, v in cache_stats().items()},
    }
    if output is not None:
        out = Path(output)
        out.mkdir(parents=True, exist_ok=True)
        (out / "memory.json").write_text(json.dumps({"summary": summary, "rss_mb": rss}, indent=1))
        _plot(rss, summary, out / "memory-rss.png")
    return summary


def _pass_summary(row: list[float]) -> dict[str, Any]:
    n = len(row)
    eighth = max(1, n // 8)
    means = [sum(row[i:i + eighth]) / len(row[i:i + eighth]) for i in range(0, eighth * 8, eighth) if row[i:i + eighth]]
    return {"first_mb": round(row[0]), "last_mb": round(row[-1]), "peak_mb": round(max(row)),
            "eighths_mb": [round(m) for m in means], "growth_mb": round(row[-1] - row[0])}


def _plot(rss: list[list[float]], summary: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # plots are optional
        return
    fig, ax = plt.subplots(figsize=(9, 4))
    n = summary["schemas"]
    for p, row in enumerate(rss):
        ax.plot(range(p * n, p * n + len(row)), row, lw=0.8, label=f"pass {p + 1}")
    ax.axhline(summary["rss_ready_mb"] + summary["cache_budget_mb"], color="grey", ls="--", lw=0.8,
               label="ready + cache budget")
    ax.set_xlabel("schemas done")
    ax.set_ylabel("resident set (MB)")
    ax.set_title(f"structgen over {n} MaskBench schemas x {len(rss)} passes (cache budget "
                 f"{summary['cache_budget_mb']} MB)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def format_memory_table(s: dict) -> str:
    lines = [f"{s['schemas']} schemas x {s['passes']} passes, tokenizer {s['tokenizer']}, cache budget "
             f"{s['cache_budget_mb']} MB, ready at {s['rss_ready_mb']} MB, {s['wall_s']} s; status {s['status']}",
             "",
             "pass  first MB  last MB  peak MB  growth MB  mean per eighth of the split (MB)",
             "----  --------  -------  -------  ---------  ---------------------------------"]
    for i, p in enumerate(s["per_pass"], 1):
        lines.append(f"{i:>4}  {p['first_mb']:>8}  {p['last_mb']:>7}  {p['peak_mb']:>7}  {p['growth_mb']:>+9}  "
                     + " ".join(str(m) for m in p["eighths_mb"]))
    lines.append("")
    lines.append("caches at the end (MB): " + ", ".join(f"{k} {v}" for k, v in sorted(s["caches_mb"].items())))
    return "\n".join(lines)
