"""BENCHMARKS.md from the benchmarks' committed result files, so that no figure is copied by hand.

``python -m structgen.bench.results_page`` reads ``benchmarks/results/*.json`` (one file per topic:
the latest run's command, date, machine, small tables, headline entries and notes), writes
``BENCHMARKS.md`` and the plots the files ask for (PNGs under ``docs/img/``).  ``--check`` writes
nothing and exits 1 when ``BENCHMARKS.md`` differs from what would be generated (the tests run it).

A result file (``benchmarks/results/<slug>.json``)::

    {
      "title": "MaskBench: JSON Schema masks, DeepSeek-V4 tokenizer",   # the section heading
      "order": 30,                                  # place on the page (ascending)
      "command": "structgen bench mask ...",        # the command of the latest run, as typed
      "date": "2026-12-02", "stop": "thirty-fifth stop, `68b279b`",
      "machine": "2-vCPU AMD EPYC, shared",
      "tables": [{"title": "...", "command": "...", "columns": ["engine", ...], "rows": [["structgen", 1.5, ...]]}],
      "headline": [{"what": "TBM p99", "structgen": {"row": "structgen", "column": "p99"},
                    "peer": "llguidance", "peer_value": {"row": "llguidance", "column": "p99"},
                    "unit": "µs", "better": "lower", "compare": "ratio", "command": "..."}],
      "notes": ["one to three short lines: measured causes"],
      "commands": ["further commands of the section"], "short": "MaskBench 400",   # the headline's link text
      "history": "maskbench-over-stops",            # an anchor of docs/benchmarks-history.md
      "plots": [{"file": "docs/img/x.png", "kind": "bars", "table": 0, "label_column": "engine",
                 "columns": ["p50", "p99"], "title": "...", "ylabel": "µs", "log": true}]
    }

Headline ratios (``compare: "ratio"``: structgen / peer) and differences (``"difference"``:
structgen - peer) are computed here, never stored: a stored ``ratio`` is an error.  A headline value
is a reference to a table's cells (``{"table": 0, "row": LABEL or [LABELS], "column": NAME}``, rows
matched by their first cell: a figure is written once, in its table), or a number where the figure
is in no table; a list (one figure per run of the same command) gives the ratio per run.  A malformed file
raises :class:`ResultFileError` naming the file and the field.  A headline entry may name its own
``command`` and ``run`` (date) where it comes from another run than the section's.

Benchmarks can write their result file with :func:`record_result` (``summary_table`` turns the
``summary.json`` of ``structgen bench mask`` / ``test-suite`` and the JSON of ``structgen bench
values`` into a table).  Torch-free; matplotlib is imported only to draw plots.
"""
from __future__ import annotations

import argparse
import difflib
import json
import math
import re
import sys
from pathlib import Path
from typing import Any, Iterable

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "benchmarks" / "results"
INTRO_FILE = ROOT / "benchmarks" / "intro.md"
PAGE = ROOT / "BENCHMARKS.md"
MAX_HEADLINE_ROWS = 25

_REQUIRED = {"title": str, "order": (int, float), "command": str, "date": str, "machine": str,
             "tables": list, "headline": list, "notes": list}
_OPTIONAL = {"stop": str, "commands": list, "plots": list, "history": str, "short": str}
_HEADLINE_REQUIRED = {"what": str, "unit": str, "better": str}
_HEADLINE_OPTIONAL = {"peer": (str, type(None)), "compare": str, "command": str, "run": str}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


class ResultFileError(ValueError):
    """A result file that the page cannot be made from: the message names the file and the field."""

    def __init__(self, path: Path | str, field: str, problem: str):
        self.path, self.field, self.problem = Path(path), field, problem
        super().__init__(f"{_rel(self.path)}: field {field!r}: {problem}")


def _rel(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------------------- loading

def _type_name(t) -> str:
    ts = t if isinstance(t, tuple) else (t,)
    return " or ".join({str: "a string", int: "a number", float: "a number", list: "a list",
                        dict: "an object", type(None): "null"}[x] for x in ts)


def _check_type(path, field, value, t):
    if isinstance(value, bool) or not isinstance(value, t):
        raise ResultFileError(path, field, f"expected {_type_name(t)}, got {json.dumps(value)[:60]}")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_value(path, field, value):
    if _is_number(value):
        return
    if isinstance(value, list) and value and all(_is_number(v) for v in value):
        return
    raise ResultFileError(path, field, f"expected a number or a non-empty list of numbers, got {json.dumps(value)[:60]}")


def _label(cell) -> str:
    return str(cell).replace("**", "").replace("`", "").strip()


def resolve_value(path, field: str, value, tables: list) -> float | list:
    """A headline figure: a number, a list of numbers (one per run), or a reference to table cells,
    ``{"table": 0, "row": "structgen" | ["structgen, run 1", ...], "column": "p99"}`` (rows matched by
    their first cell), so that a figure in a table is written once."""
    if not isinstance(value, dict):
        _check_value(path, field, value)
        return value
    unknown = set(value) - {"table", "row", "column"}
    if unknown or "row" not in value or "column" not in value:
        raise ResultFileError(path, field, "a reference is {\"table\": N, \"row\": LABEL or [LABELS], \"column\": NAME}")
    t = value.get("table", 0)
    if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < len(tables):
        raise ResultFileError(path, f"{field}.table", f"no table {t!r}")
    table = tables[t]
    if value["column"] not in table["columns"]:
        raise ResultFileError(path, f"{field}.column", f"no column {value['column']!r} in tables[{t}]")
    k = table["columns"].index(value["column"])
    labels = value["row"] if isinstance(value["row"], list) else [value["row"]]
    out = []
    for label in labels:
        rows = [r for r in table["rows"] if r and _label(r[0]) == label]
        if len(rows) != 1:
            raise ResultFileError(path, f"{field}.row", f"{len(rows)} rows of tables[{t}] are labelled {label!r}")
        if not _is_number(rows[0][k]):
            raise ResultFileError(path, field, f"the cell ({label!r}, {value['column']!r}) is not a number")
        out.append(rows[0][k])
    return out if isinstance(value["row"], list) else out[0]


def resolved(data: dict, path: Path | str = "<result>") -> dict:
    """A copy of a validated result with its headline references replaced by the cells' figures."""
    data = json.loads(json.dumps(data))
    for i, h in enumerate(data["headline"]):
        for key in ("structgen", "peer_value"):
            if key in h:
                h[key] = resolve_value(path, f"headline[{i}].{key}", h[key], data["tables"])
    return data


def validate(data: Any, path: Path | str = "<result>") -> dict:
    """Check one result file's content; returns it, or raises :class:`ResultFileError`."""
    if not isinstance(data, dict):
        raise ResultFileError(path, "(top level)", "expected a JSON object")
    for key, t in _REQUIRED.items():
        if key not in data:
            raise ResultFileError(path, key, "missing")
        _check_type(path, key, data[key], t)
    for key, t in _OPTIONAL.items():
        if key in data:
            _check_type(path, key, data[key], t)
    unknown = set(data) - set(_REQUIRED) - set(_OPTIONAL)
    if unknown:
        raise ResultFileError(path, sorted(unknown)[0], "unknown field (known: "
                              + ", ".join(sorted({*_REQUIRED, *_OPTIONAL})) + ")")
    if not _DATE.fullmatch(data["date"]):
        raise ResultFileError(path, "date", f"expected YYYY-MM-DD, got {data['date']!r}")
    if "`" in data["title"] or "#" in data["title"]:
        raise ResultFileError(path, "title", "no backticks or '#' (the heading's anchor must be its plain text)")
    if not data["command"].strip():
        raise ResultFileError(path, "command", "empty")
    for i, note in enumerate(data["notes"]):
        _check_type(path, f"notes[{i}]", note, str)
    for i, c in enumerate(data.get("commands", [])):
        _check_type(path, f"commands[{i}]", c, str)
    for i, table in enumerate(data["tables"]):
        f = f"tables[{i}]"
        _check_type(path, f, table, dict)
        for key in ("columns", "rows"):
            if key not in table:
                raise ResultFileError(path, f"{f}.{key}", "missing")
            _check_type(path, f"{f}.{key}", table[key], list)
        for key in ("title", "command"):
            if key in table:
                _check_type(path, f"{f}.{key}", table[key], str)
        unknown = set(table) - {"title", "command", "columns", "rows"}
        if unknown:
            raise ResultFileError(path, f"{f}.{sorted(unknown)[0]}", "unknown field (known: title, command, columns, rows)")
        for j, row in enumerate(table["rows"]):
            _check_type(path, f"{f}.rows[{j}]", row, list)
            if len(row) != len(table["columns"]):
                raise ResultFileError(path, f"{f}.rows[{j}]",
                                      f"{len(row)} cells for {len(table['columns'])} columns")
            for k, cell in enumerate(row):
                if not (isinstance(cell, str) or _is_number(cell) or cell is None):
                    raise ResultFileError(path, f"{f}.rows[{j}][{k}]", "expected a string, a number or null")
    for i, h in enumerate(data["headline"]):
        f = f"headline[{i}]"
        _check_type(path, f, h, dict)
        if "ratio" in h or "difference" in h:
            raise ResultFileError(path, f"{f}.{'ratio' if 'ratio' in h else 'difference'}",
                                  "ratios and differences are computed from the values, not stored")
        for key, t in _HEADLINE_REQUIRED.items():
            if key not in h:
                raise ResultFileError(path, f"{f}.{key}", "missing")
            _check_type(path, f"{f}.{key}", h[key], t)
        for key, t in _HEADLINE_OPTIONAL.items():
            if key in h:
                _check_type(path, f"{f}.{key}", h[key], t)
        if "structgen" not in h:
            raise ResultFileError(path, f"{f}.structgen", "missing")
        sg = resolve_value(path, f"{f}.structgen", h["structgen"], data["tables"])
        if h["better"] not in ("lower", "higher"):
            raise ResultFileError(path, f"{f}.better", f"expected 'lower' or 'higher', got {h['better']!r}")
        compare = h.get("compare", "ratio")
        if compare not in ("ratio", "difference"):
            raise ResultFileError(path, f"{f}.compare", f"expected 'ratio' or 'difference', got {compare!r}")
        if h.get("peer") is not None:
            if "peer_value" not in h:
                raise ResultFileError(path, f"{f}.peer_value", "missing (a headline entry with a peer needs its value)")
            pv = resolve_value(path, f"{f}.peer_value", h["peer_value"], data["tables"])
            n_s, n_p = len(_as_list(sg)), len(_as_list(pv))
            if n_s != n_p:
                raise ResultFileError(path, f"{f}.peer_value", f"{n_p} values for structgen's {n_s}")
            if compare == "ratio" and any(v == 0 for v in _as_list(pv)):
                raise ResultFileError(path, f"{f}.peer_value", "0: no ratio (use \"compare\": \"difference\")")
        elif "peer_value" in h:
            raise ResultFileError(path, f"{f}.peer_value", "given without a peer")
        unknown = set(h) - set(_HEADLINE_REQUIRED) - set(_HEADLINE_OPTIONAL) - {"structgen", "peer_value"}
        if unknown:
            raise ResultFileError(path, f"{f}.{sorted(unknown)[0]}", "unknown field")
    for i, p in enumerate(data.get("plots", [])):
        f = f"plots[{i}]"
        _check_type(path, f, p, dict)
        for key in ("file", "kind", "title"):
            if key not in p:
                raise ResultFileError(path, f"{f}.{key}", "missing")
        if p["kind"] not in ("bars", "lines"):
            raise ResultFileError(path, f"{f}.kind", f"expected 'bars' or 'lines', got {p['kind']!r}")
        t = p.get("table", 0)
        if not isinstance(t, int) or not 0 <= t < len(data["tables"]):
            raise ResultFileError(path, f"{f}.table", f"no table {t!r}")
        cols = data["tables"][t]["columns"]
        for c in [p.get("label_column", cols[0]), *p.get("columns", [])]:
            if c not in cols:
                raise ResultFileError(path, f"{f}.columns", f"no column {c!r} in tables[{t}]")
    return data


def load_results(results_dir: Path = RESULTS_DIR) -> list[tuple[Path, dict]]:
    """Every result file, validated, in page order."""
    out = []
    files = sorted(Path(results_dir).glob("*.json"))
    if not files:
        raise ResultFileError(results_dir, "(folder)", "no result files (*.json)")
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ResultFileError(path, "(JSON)", f"not valid JSON: {e}") from None
        out.append((path, resolved(validate(data, path), path)))
    n = sum(len(d["headline"]) for _, d in out)
    if n > MAX_HEADLINE_ROWS:
        raise ResultFileError(results_dir, "headline", f"{n} headline entries over all files; at most {MAX_HEADLINE_ROWS}")
    return sorted(out, key=lambda pd: (pd[1]["order"], pd[0].stem))


# --------------------------------------------------------------------------------------- figures

def _as_list(v) -> list:
    return list(v) if isinstance(v, list) else [v]


def fmt_number(v) -> str:
    """A figure as the page writes it: thousands separated; a float keeps at least one decimal."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return f"{v:,}"
    if v.is_integer():
        return f"{int(v):,}" if abs(v) >= 1000 else f"{v:.1f}"
    if abs(v) >= 1000:
        return f"{v:,.1f}"
    s = f"{v:.4g}"
    return repr(v) if "e" in s else s


def _fmt_values(v, unit: str) -> str:
    text = " / ".join(fmt_number(x) for x in _as_list(v))
    return f"{text} {unit}".strip() if unit and unit != "%" else (text + unit if unit == "%" else text)


def compare(entry: dict) -> list[float] | None:
    """structgen / peer (``compare: ratio``) or structgen - peer (``difference``), per run; None without a peer."""
    if entry.get("peer") is None:
        return None
    s, p = _as_list(entry["structgen"]), _as_list(entry["peer_value"])
    if entry.get("compare", "ratio") == "difference":
        return [a - b for a, b in zip(s, p)]
    return [a / b for a, b in zip(s, p)]


def structgen_better(entry: dict) -> bool | None:
    """Whether structgen's figure beats the peer's in every run (None without a peer)."""
    c = compare(entry)
    if c is None:
        return None
    diff = entry.get("compare", "ratio") == "difference"
    pivot = 0.0 if diff else 1.0
    if entry["better"] == "lower":
        return all(x < pivot for x in c)
    return all(x > pivot for x in c)


def fmt_compare(entry: dict) -> str:
    c = compare(entry)
    if c is None:
        return "--"
    if entry.get("compare", "ratio") == "difference":
        unit = "points" if entry["unit"] == "%" else entry["unit"]
        floats = any(isinstance(x, float) for x in _as_list(entry["structgen"]) + _as_list(entry["peer_value"]))
        text = " / ".join(f"{x:+,.1f}" if floats else f"{int(x):+,}" for x in c) + (f" {unit}" if unit else "")
    else:
        text = " / ".join(f"{x:.2f}x" if x < 10 else f"{x:.1f}x" for x in c)
    return f"**{text}**" if structgen_better(entry) else text


# --------------------------------------------------------------------------------------- the page

def anchor(title: str) -> str:
    """GitHub's anchor of a heading (as tests/test_docs.py computes it)."""
    t = re.sub(r"`+", "", title)
    return re.sub(r"[^\w\- ]", "", t.lower()).replace(" ", "-")


def _cell(v) -> str:
    return fmt_number(v).replace("|", "\\|").replace("\n", " ")


def _table(table: dict) -> list[str]:
    cols = table["columns"]
    lines = ["| " + " | ".join(_cell(c) for c in cols) + " |"]
    aligns = []
    for k in range(len(cols)):
        numeric = any(_is_number(r[k]) for r in table["rows"]) and all(_is_number(r[k]) or r[k] in (None, "", "--")
                                                                       for r in table["rows"])
        aligns.append("---:" if numeric else "---")
    lines.append("|" + "|".join(aligns) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table["rows"]]
    return lines


def headline_rows(results: Iterable[tuple[Path, dict]]) -> list[str]:
    lines = ["| what | structgen | peer (same run) | structgen / peer | run | command |",
             "|---|---|---|---|---|---|"]
    for _, d in results:
        for h in d["headline"]:
            better = "lower better" if h["better"] == "lower" else "higher better"
            what = f"[{d.get('short', d['title'])}](#{anchor(d['title'])}): {h['what']} ({better})"
            sg = _fmt_values(h["structgen"], h["unit"])
            if h.get("peer") is None:
                peer = "--"
            else:
                peer = f"{h['peer']} {_fmt_values(h['peer_value'], h['unit'])}"
            cmd = h.get("command", d["command"])
            lines.append(f"| {what} | {sg} | {peer} | {fmt_compare(h)} | {h.get('run', d['date'])} | `{cmd}` |")
    return lines


def render(results: list[tuple[Path, dict]], intro: str) -> str:
    out = ["# Benchmarks", "", intro.strip(), "",
           "## Headline: each figure against its peer in the same run", "",
           "structgen / peer is computed from the figures (a ratio, or a difference for counts and percentages); "
           "**bold**: structgen is better in every run given; two values: two runs of the same command.", ""]
    out += headline_rows(results)
    for path, d in results:
        out += ["", f"## {d['title']}", ""]
        when = d["date"] + (f", {d['stop']}" if d.get("stop") else "")
        commands = "; ".join(f"`{c}`" for c in [d["command"], *d.get("commands", [])])
        line = f"{when}; {d['machine']}. {commands}; result file `{_rel(path)}`"
        if d.get("history"):
            line += f"; [earlier runs](docs/benchmarks-history.md#{d['history']})"
        out += [line + ".", ""]
        for table in d["tables"]:
            if table.get("title") or table.get("command"):
                head = table.get("title", "")
                if table.get("command"):
                    head = (head + "; " if head else "") + f"`{table['command']}`"
                out += [head + ":", ""]
            out += _table(table) + [""]
        for p in d.get("plots", []):
            out += [f"![{p['title']}]({p['file']})", ""]
        out += [f"- {n}" for n in d["notes"]]
        while out[-1] == "":
            out.pop()
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------- plots

def _leading_number(v) -> float | None:
    if _is_number(v):
        return float(v)
    if isinstance(v, str):
        m = re.match(r"\s*\**([-+]?[\d,]*\.?\d+(?:e[-+]?\d+)?)", v)
        if m:
            try:
                return float(m[1].replace(",", ""))
            except ValueError:
                return None
    return None


def _number_in(text: str) -> float | None:
    """The first number written in a column name ("TV after 30,000 samples" -> 30000.0)."""
    m = re.search(r"\d[\d,]*\.?\d*", str(text))
    return float(m[0].replace(",", "").rstrip(".")) if m else None


def plot_data(d: dict, p: dict) -> tuple[list[str], list[str], list[list[float | None]]]:
    """(series labels, column names, values) of a plot, read from its table."""
    table = d["tables"][p.get("table", 0)]
    cols = table["columns"]
    label_i = cols.index(p.get("label_column", cols[0]))
    names = p.get("columns") or [c for c in cols if c != cols[label_i]]
    idx = [cols.index(c) for c in names]
    rows = table["rows"]
    if p.get("rows"):
        rows = [r for r in rows if str(r[label_i]) in p["rows"]]
    labels = [str(r[label_i]).replace("**", "").replace("`", "") for r in rows]
    values = [[_leading_number(r[i]) for i in idx] for r in rows]
    return labels, names, values


def draw_plot(d: dict, p: dict, root: Path = ROOT) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, names, values = plot_data(d, p)
    fig, ax = plt.subplots(figsize=(7.5, 3.6), dpi=90)
    if p["kind"] == "bars":
        width = 0.8 / max(len(labels), 1)
        for i, (lab, vals) in enumerate(zip(labels, values)):
            xs = [k + i * width - 0.4 + width / 2 for k in range(len(names))]
            ax.bar(xs, [v if v is not None else 0 for v in vals], width, label=lab)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names)
    else:
        xs = [_number_in(n) for n in names]
        for lab, vals in zip(labels, values):
            pts = [(x, v) for x, v in zip(xs, vals) if x is not None and v is not None]
            ax.plot([a for a, _ in pts], [b for _, b in pts], marker="o", label=lab)
        ax.set_xscale("log")
        if p.get("xlabel"):
            ax.set_xlabel(p["xlabel"])
    if p.get("log"):
        ax.set_yscale("log")
    if p.get("ylabel"):
        ax.set_ylabel(p["ylabel"])
    ax.set_title(p["title"], fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = root / p["file"]
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", metadata={"Software": None})
    plt.close(fig)
    return out


# --------------------------------------------------------------------------------------- recording

def record_result(slug: str, *, command: str, date: str, machine: str, title: str | None = None,
                  stop: str | None = None, tables: list | None = None, headline: list | None = None,
                  notes: list | None = None, order: int | float | None = None,
                  results_dir: Path = RESULTS_DIR) -> Path:
    """Write (or update) ``<results_dir>/<slug>.json`` with a new latest run; fields not given keep
    the file's values (title, order, plots, history...).  Validated before it is written."""
    path = Path(results_dir) / f"{slug}.json"
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {
        "title": title or slug, "order": 100 if order is None else order, "tables": [], "headline": [], "notes": []}
    data.update({"command": command, "date": date, "machine": machine})
    for key, value in (("title", title), ("stop", stop), ("tables", tables), ("headline", headline),
                       ("notes", notes), ("order", order)):
        if value is not None:
            data[key] = value
    validate(data, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def summary_table(*summary_paths: Path | str) -> tuple[str, dict]:
    """(command, table) from a benchmark's own summary: ``structgen bench mask`` / ``test-suite``'s
    ``summary.json`` (meta + summaries with ``tbm_us``) or ``structgen bench values``' JSON (meta +
    summaries with ``field_acc``).  Several summaries are several runs of one command: rows are then
    labelled ``"<engine>, run <i>"``, run by run."""
    if not summary_paths:
        raise ValueError("summary_table needs at least one summary")
    commands, cols, rows = [], None, []
    for run, summary_path in enumerate(summary_paths, 1):
        path = Path(summary_path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ResultFileError(path, "(JSON)", f"not valid JSON: {e}") from None
        meta, sums = data.get("meta", {}), data.get("summaries")
        if not isinstance(sums, list) or not sums:
            raise ResultFileError(path, "summaries", "missing: not a summary this page knows")
        commands.append(str(meta.get("command", "")).replace(".venv/bin/", ""))
        suffix = f", run {run}" if len(summary_paths) > 1 else ""
        if "tbm_us" in sums[0]:
            cols = MASK_COLUMNS
            rows += [[s["engine"] + suffix, s.get("counts", {}).get("pass"), round(s["ttfm_ms"]["p50"], 2),
                      *(round(s["tbm_us"][k], 1) for k in ("p50", "p90", "p99", "p99.9", "mean")),
                      round(s["peak_rss_mb"]) if s.get("peak_rss_mb") is not None else None] for s in sums]
        elif "field_acc" in sums[0]:
            cols = VALUES_COLUMNS
            rows += [[s["engine"] + suffix, s["cases"], round(100 * s["field_acc"], 1), round(100 * s["valid_rate"], 1),
                      s["invented_keys"], round(s["mean_s"], 2)] for s in sums]
        else:
            raise ResultFileError(path, "summaries[0]", "neither tbm_us (mask, test-suite) nor field_acc (values)")
    return commands[0], {"columns": cols, "rows": rows}


MASK_COLUMNS = ["engine", "pass", "TTFM p50 ms", "TBM p50 µs", "p90", "p99", "p99.9", "mean", "peak RSS MB"]
VALUES_COLUMNS = ["engine", "cases", "field acc %", "valid %", "invented keys", "s/case"]


# --------------------------------------------------------------------------------------- main

def generate(results_dir: Path = RESULTS_DIR, intro_file: Path = INTRO_FILE) -> tuple[str, list[tuple[dict, dict]]]:
    results = load_results(results_dir)
    intro = Path(intro_file).read_text(encoding="utf-8") if Path(intro_file).exists() else ""
    plots = [(d, p) for _, d in results for p in d.get("plots", [])]
    return render(results, intro), plots


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m structgen.bench.results_page",
                                 description="Regenerate BENCHMARKS.md and its plots from benchmarks/results/*.json.")
    ap.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder of result files")
    ap.add_argument("--intro", type=Path, default=INTRO_FILE, help="text above the headline table")
    ap.add_argument("--page", type=Path, default=PAGE, help="the page to write (default BENCHMARKS.md)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when the page differs from what would be generated")
    ap.add_argument("--no-plots", action="store_true", help="do not draw the PNGs")
    ap.add_argument("--import-summary", type=Path, nargs="+", metavar="SUMMARY_JSON",
                    help="a benchmark's summary JSON (several: runs of one command) to record as TOPIC's first "
                         "table, then regenerate (with --topic, --date, --machine)")
    ap.add_argument("--topic", help="the result file's name (slug) for --import-summary")
    ap.add_argument("--date")
    ap.add_argument("--machine")
    args = ap.parse_args(argv)
    try:
        if args.import_summary:
            if not (args.topic and args.date and args.machine):
                ap.error("--import-summary needs --topic, --date and --machine")
            command, table = summary_table(*args.import_summary)
            path = Path(args.results) / f"{args.topic}.json"
            tables = None
            if path.exists():
                tables = json.loads(path.read_text(encoding="utf-8")).get("tables", [])
                tables = [table, *tables[1:]]
            record_result(args.topic, command=command, date=args.date, machine=args.machine,
                          tables=tables or [table], results_dir=args.results)
            print(f"recorded {_rel(path)} (check its headline entries and notes)")
        text, plots = generate(args.results, args.intro)
    except ResultFileError as e:
        print(f"results_page: {e}", file=sys.stderr)
        return 2
    lines = text.count("\n")
    if args.check:
        current = args.page.read_text(encoding="utf-8") if args.page.exists() else ""
        missing = [p["file"] for _, p in plots if not (ROOT / p["file"]).exists()]
        if current != text or missing:
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), str(args.page), "generated",
                                        lineterm="", n=1)
            sys.stderr.write("\n".join(list(diff)[:60]) + "\n")
            for m in missing:
                sys.stderr.write(f"missing plot {m}\n")
            print(f"results_page: {_rel(args.page)} is not what benchmarks/results/ generates; "
                  "run `python -m structgen.bench.results_page`", file=sys.stderr)
            return 1
        print(f"{_rel(args.page)} is up to date ({lines} lines)")
        return 0
    args.page.write_text(text, encoding="utf-8")
    drawn = [] if args.no_plots else [draw_plot(d, p) for d, p in plots]
    print(f"wrote {_rel(args.page)} ({lines} lines)" + "".join(f", {_rel(p)}" for p in drawn))
    return 0


if __name__ == "__main__":
    sys.exit(main())
