"""Summaries, tables, ratios and plots for MaskBench results (and the table
helpers the JSONSchemaBench report shares: :func:`format_text_table`, ``md_table``).

Pure functions over the per-schema records written by
:mod:`structgen.bench.maskbench`; usable on a finished output folder too::

    from structgen.bench.maskbench import read_results
    from structgen.bench import report
    recs = list(read_results("bench-out/mask/deepseek/llguidance.jsonl").values())
    print(report.format_table([report.summarize_engine("llguidance", recs, [])]))
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = [
    "STATUS_COLUMNS",
    "summarize_engine",
    "format_text_table",
    "format_table",
    "ratio_rows",
    "format_ratios",
    "format_markdown",
    "plot_cdfs",
]

#: (record status, column label)
STATUS_COLUMNS = (
    ("pass", "pass"),
    ("compile_error", "compile err"),
    ("timeout", "timeout"),
    ("validation_error", "valid. err"),
    ("invalidation_error", "invalid. err"),
    ("crash", "crash"),
)

_TTFM_Q = (50, 90, 99)
_TBM_Q = (50, 90, 99, 99.9)


def _pct(values: np.ndarray, qs: Sequence[float]) -> list[float | None]:
    if values.size == 0:
        return [None] * len(qs)
    return [float(v) for v in np.percentile(values, qs)]


def summarize_engine(name: str, records: Sequence[dict], setups: Sequence[dict], *, version: str = "") -> dict:
    """One engine's row: status counts, TTFM (ms) and TBM (µs) percentiles, set-up, peak RSS.

    TTFM is over the schemas that compiled; TBM pools every token of every
    instance (the MaskBench convention).  ``setups`` are the worker set-up
    reports of this run (``engine_setup_s`` is the engine's tokenizer set-up).
    """
    n = len(records)
    counts = {s: 0 for s, _ in STATUS_COLUMNS}
    for r in records:
        counts[r.get("status", "crash")] = counts.get(r.get("status", "crash"), 0) + 1
    ttfm = np.array([r["ttfm_ms"] for r in records if r.get("ttfm_ms") is not None], dtype=np.float64)
    tbm_ns = [r.get("tbm_ns") or [] for r in records]
    tbm = np.concatenate([np.asarray(t, dtype=np.float64) for t in tbm_ns]) / 1e3 if any(tbm_ns) else np.zeros(0)
    rss = [r["rss_mb"] for r in records if r.get("rss_mb") is not None]
    rss += [s["rss_mb"] for s in setups if s.get("rss_mb") is not None]
    setup_s = [s["engine_setup_s"] for s in setups if s.get("engine_setup_s") is not None]
    tok_load = [s["tokenizer_load_s"] for s in setups if s.get("tokenizer_load_s") is not None]
    warm = [s["warmup_s"] for s in setups if s.get("warmup_s") is not None]
    tt = _pct(ttfm, _TTFM_Q)
    tb = _pct(tbm, _TBM_Q)
    return {
        "engine": name,
        "version": version or (setups[0].get("version", "") if setups else ""),
        "n_schemas": n,
        "counts": counts,
        "pass_pct": 100.0 * counts["pass"] / n if n else 0.0,
        "n_tests": sum(r.get("n_tests") or 0 for r in records),
        "valid_rejected_tests": sum(r.get("valid_rejected") or 0 for r in records),
        "invalid_accepted_tests": sum(r.get("invalid_accepted") or 0 for r in records),
        "both_error_kinds": sum(1 for r in records if r.get("valid_rejected") and r.get("invalid_accepted")),
        "inconsistent_tests": sum(r.get("inconsistent") or 0 for r in records),
        "n_compiled": int(ttfm.size),
        "ttfm_ms": {"p50": tt[0], "p90": tt[1], "p99": tt[2], "max": float(ttfm.max()) if ttfm.size else None,
                    "mean": float(ttfm.mean()) if ttfm.size else None},
        "n_tokens": int(tbm.size),
        "tbm_us": {"p50": tb[0], "p90": tb[1], "p99": tb[2], "p99.9": tb[3],
                   "max": float(tbm.max()) if tbm.size else None, "mean": float(tbm.mean()) if tbm.size else None},
        "setup_s": statistics.median(setup_s) if setup_s else None,
        "tokenizer_load_s": statistics.median(tok_load) if tok_load else None,
        "warmup_s": statistics.median(warm) if warm else None,
        "worker_starts": len(setups),
        "peak_rss_mb": max(rss) if rss else None,
        # garbage-collector pauses inside the measured compiles and masks (Python engines pay them)
        "gc_s": sum(r.get("gc_ms") or 0.0 for r in records) / 1e3 if any("gc_ms" in r for r in records) else None,
        "gc_full": sum(r.get("gc_full") or 0 for r in records) if any("gc_full" in r for r in records) else None,
    }


def format_number(v: Any, nd: int = 1) -> str:
    """A table cell: "-" for None, thousands separators, fewer decimals as numbers grow."""
    if v is None:
        return "-"
    if isinstance(v, float):
        if v >= 1000:
            return f"{v:,.0f}"
        if v >= 100:
            return f"{v:.0f}"
        return f"{v:.{nd}f}"
    return str(v)


_HEAD = (
    ["engine", "schemas",
     "TTFM p50", "p90", "p99", "max (ms)",
     "TBM p50", "p90", "p99", "p99.9", "max", "mean (µs)"]
    + [label for _, label in STATUS_COLUMNS]
    + ["pass %", "set-up s", "peak RSS MB", "GC s (full)"]
)


def _row(s: dict) -> list[str]:
    t, b = s["ttfm_ms"], s["tbm_us"]
    return (
        [s["engine"], str(s["n_schemas"]),
         format_number(t["p50"], 2), format_number(t["p90"], 2), format_number(t["p99"], 2), format_number(t["max"], 2),
         format_number(b["p50"]), format_number(b["p90"]), format_number(b["p99"]), format_number(b["p99.9"]), format_number(b["max"]), format_number(b["mean"])]
        + [str(s["counts"].get(k, 0)) for k, _ in STATUS_COLUMNS]
        + [f"{s['pass_pct']:.1f}", format_number(s["setup_s"], 2), format_number(s["peak_rss_mb"], 0),
           "-" if s.get("gc_s") is None else f"{s['gc_s']:.1f} ({s.get('gc_full') or 0})"]
    )


def format_text_table(head: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1) -> str:
    """Plain-text table: a header, a rule, the rows; the first ``left`` columns
    left-aligned, the others right-aligned."""
    all_rows = [list(head)] + [list(r) for r in rows]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(head))]
    lines = []
    for j, r in enumerate(all_rows):
        lines.append("  ".join(c.ljust(widths[i]) if i < left else c.rjust(widths[i]) for i, c in enumerate(r)))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_table(summaries: Sequence[dict]) -> str:
    """Plain-text table, one row per engine."""
    return format_text_table(_HEAD, [_row(s) for s in summaries])


_RATIO_METRICS = (
    ("TTFM p50", "ttfm_ms", "p50"),
    ("TTFM p99", "ttfm_ms", "p99"),
    ("TBM p50", "tbm_us", "p50"),
    ("TBM p99", "tbm_us", "p99"),
    ("TBM p99.9", "tbm_us", "p99.9"),
    ("TBM max", "tbm_us", "max"),
    ("TBM mean", "tbm_us", "mean"),
)


def ratio_rows(summaries: Sequence[dict], subject: str | None = None) -> list[dict]:
    """``subject / peer`` for each other engine of the same run (below 1: subject faster).

    ``subject`` defaults to ``structgen`` when present, else the first engine.
    """
    if len(summaries) < 2:
        return []
    by = {s["engine"]: s for s in summaries}
    if subject is None:
        subject = "structgen" if "structgen" in by else summaries[0]["engine"]
    me = by[subject]
    rows = []
    for s in summaries:
        if s["engine"] == subject:
            continue
        row: dict[str, Any] = {"subject": subject, "peer": s["engine"]}
        for label, group, key in _RATIO_METRICS:
            a, b = me[group][key], s[group][key]
            row[label] = (a / b) if (a is not None and b) else None
        row["pass % diff"] = me["pass_pct"] - s["pass_pct"]
        rows.append(row)
    return rows


def _fx(r: float | None) -> str:
    if r is None:
        return "-"
    return f"{r:.2f}x" if 0.1 <= r < 100 else f"{r:.2g}x"


def format_ratios(rows: Sequence[dict]) -> str:
    """Plain-text ratio table (``subject / peer``; x < 1 means the subject is faster)."""
    if not rows:
        return ""
    head = ["ratio"] + [m for m, _, _ in _RATIO_METRICS] + ["pass % diff"]
    body = []
    for r in rows:
        body.append([f"{r['subject']} / {r['peer']}"]
                    + [_fx(r[m]) for m, _, _ in _RATIO_METRICS]
                    + [f"{r['pass % diff']:+.1f}"])
    return format_text_table(head, body)


def md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def format_markdown(summaries: Sequence[dict], ratios: Sequence[dict], meta: dict) -> str:
    """The summary as a markdown document (run settings, table, ratios, details)."""
    lines = ["# MaskBench results", ""]
    if meta.get("command"):
        lines += [f"Command: `{meta['command']}`", ""]
    lines += [
        f"- data: `{meta.get('data')}` ({meta.get('n_schemas')} of {meta.get('n_records')} schemas, "
        f"sample {meta.get('sample')}, seed {meta.get('seed')})",
        f"- tokenizer: {meta.get('tokenizer')}; timeout {meta.get('timeout_s')} s per schema; "
        f"single-threaded engines; wall time {meta.get('wall_s', 0):.1f} s",
        "- versions: " + ", ".join(f"{s['engine']} {s['version']}" for s in summaries),
    ]
    if meta.get("skipped"):
        lines.append("- skipped: " + "; ".join(f"{k} ({v})" for k, v in meta["skipped"].items()))
    lines += ["", "TTFM in ms (over compiled schemas), TBM in µs (every token of every instance).", ""]
    lines.append(md_table(_HEAD, [_row(s) for s in summaries]))
    if ratios:
        lines += ["", "Ratios (subject / peer, same run; below 1 = subject faster):", ""]
        head = ["ratio"] + [m for m, _, _ in _RATIO_METRICS] + ["pass % diff"]
        body = [[f"{r['subject']} / {r['peer']}"]
                + [_fx(r[m]) for m, _, _ in _RATIO_METRICS]
                + [f"{r['pass % diff']:+.1f}"] for r in ratios]
        lines.append(md_table(head, body))
    lines += ["", "Details:", ""]
    for s in summaries:
        lines.append(
            f"- {s['engine']}: {s['n_tests']} test instances, {s['n_tokens']} tokens timed; "
            f"{s['valid_rejected_tests']} valid instances rejected, {s['invalid_accepted_tests']} invalid accepted "
            f"({s['both_error_kinds']} schemas with both); {s['inconsistent_tests']} inconsistent (a token the "
            f"mask allowed refused at commit); set-up {format_number(s['setup_s'], 2)} s engine + "
            f"{format_number(s['tokenizer_load_s'], 2)} s transformers tokenizer + {format_number(s['warmup_s'], 2)} s warm-up, "
            f"{s['worker_starts']} worker start(s)"
        )
    return "\n".join(lines) + "\n"


def plot_cdfs(path: str | Path, records_by_engine: dict[str, Sequence[dict]], *, title: str = "MaskBench") -> Path:
    """PNG with the CDFs of TTFM (ms) and TBM (µs) per engine, log x axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, recs in records_by_engine.items():
        ttfm = np.sort(np.array([r["ttfm_ms"] for r in recs if r.get("ttfm_ms") is not None], dtype=np.float64))
        parts = [np.asarray(r.get("tbm_ns") or [], dtype=np.float64) for r in recs]
        tbm = np.sort(np.concatenate(parts) / 1e3) if any(p.size for p in parts) else np.zeros(0)
        for ax, v in ((ax1, ttfm), (ax2, tbm)):
            if v.size:
                v = np.maximum(v, 1e-3)
                ax.plot(v, np.arange(1, v.size + 1) / v.size, label=f"{name} (n={v.size})", drawstyle="steps-post")
    ax1.set(xscale="log", xlabel="TTFM, time to first mask (ms)", ylabel="fraction of schemas", title="compile (TTFM)")
    ax2.set(xscale="log", xlabel="TBM, mask + commit per token (µs)", ylabel="fraction of tokens", title="per token (TBM)")
    for ax in (ax1, ax2):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    p = Path(path)
    fig.savefig(p, dpi=120)
    plt.close(fig)
    return p
