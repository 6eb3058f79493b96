"""Summaries (coverage, compliance, TTFT, TPOT, overhead against the baseline), tables and the
coverage plot."""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Callable, Sequence

from ..gen_engines import get_gen_engine_class
from ..report import format_number, format_text_table, md_table
from .data import STATUSES


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
    return format_number(v, nd)


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

    return format_text_table(_OVERALL_HEAD, [_overall_row(s) for s in summaries])


def format_dataset_table(by_dataset: Sequence[dict]) -> str:
    """Plain-text table, one row per (dataset, engine)."""

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
    lines.append(md_table(_OVERALL_HEAD, [_overall_row(s) for s in summaries]))
    head, rows = _pivot(by_dataset, summaries, "empirical_pct")
    lines += ["", "Empirical coverage (%) per dataset:", "", md_table(head, rows)]
    head, rows = _pivot(by_dataset, summaries, "declared_pct")
    lines += ["", "Declared coverage (%) per dataset:", "", md_table(head, rows)]
    lines += ["", "Per dataset:", "", md_table(_DATASET_HEAD, [_dataset_row(s) for s in by_dataset])]
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
