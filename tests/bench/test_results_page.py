"""BENCHMARKS.md is generated from the committed result files (``benchmarks/results/*.json``) by
``python -m structgen.bench.results_page``: the committed page is what they generate, it fits in two screens,
every headline row has its command and a ratio computed from its figures, and a malformed result file is
refused with a message naming the file and the field."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from structgen.bench import results_page as rp

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "BENCHMARKS.md"
HISTORY = ROOT / "docs" / "benchmarks-history.md"


def _headline_rows(text: str) -> list[list[str]]:
    """The headline table's data rows, split into cells (``\\|`` inside a cell kept)."""
    lines = text.split("## Headline", 1)[1].split("\n## ", 1)[0].splitlines()
    rows = [ln for ln in lines if ln.startswith("| ") and not ln.startswith("| what ")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in rows]


def _numbers(cell: str) -> list[float]:
    return [float(x.replace(",", "")) for x in re.findall(r"(?<![\w.])[-+]?\d[\d,]*\.?\d*(?:e[-+]?\d+)?", cell)]


# --------------------------------------------------------------------------------------- the committed page

def test_the_committed_page_is_what_the_result_files_generate(capsys):
    assert rp.main(["--check"]) == 0, capsys.readouterr().err


def test_the_page_fits_in_two_screens_and_the_history_is_trimmed():
    assert PAGE.read_text(encoding="utf-8").count("\n") <= 300
    assert HISTORY.read_text(encoding="utf-8").count("\n") <= 400


def test_every_headline_row_has_a_command_and_one_line():
    rows = _headline_rows(PAGE.read_text(encoding="utf-8"))
    results = rp.load_results()
    assert len(rows) == sum(len(d["headline"]) for _, d in results)
    assert 0 < len(rows) <= rp.MAX_HEADLINE_ROWS
    for row in rows:
        assert len(row) == 6, row
        assert re.fullmatch(r"`(structgen|make|python|OMP_NUM_THREADS=\S+ structgen) [^`]+`", row[5]), row
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row[4]), row
    for path, d in results:
        assert d["command"].strip(), path


def test_ratios_are_computed_from_the_figures_and_consistent_with_them():
    rows = _headline_rows(PAGE.read_text(encoding="utf-8"))
    entries = [h for _, d in rp.load_results() for h in d["headline"]]
    checked = 0
    for row, h in zip(rows, entries):
        assert "ratio" not in h and "difference" not in h
        assert row[3] == rp.fmt_compare(h)
        if h.get("peer") is None:
            assert row[3] == "--"
            continue
        s, p = _numbers(row[1]), _numbers(row[2].removeprefix(h["peer"]))
        shown = _numbers(row[3].replace("**", ""))
        assert len(s) == len(p) == len(shown), row
        for a, b, c in zip(s, p, shown):
            expected = a - b if h.get("compare", "ratio") == "difference" else a / b
            assert c == pytest.approx(expected, rel=0.02, abs=0.051), row
        bold = row[3].startswith("**")
        assert bold == rp.structgen_better(h), row
        checked += 1
    assert checked >= 15


def test_links_from_the_page_reach_headings_and_files():
    from test_docs import _anchors, links

    bad = []
    for target in links(PAGE):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = ROOT / path if path else PAGE
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            bad.append(f"{target}: no such heading")
    assert not bad, bad


def test_plots_exist_and_are_small():
    plots = [p for _, d in rp.load_results() for p in d.get("plots", [])]
    assert plots
    for p in plots:
        f = ROOT / p["file"]
        assert f.exists() and f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f
        assert f.stat().st_size < 100_000, f


def test_the_generator_imports_neither_torch_nor_matplotlib():
    code = ("import sys, structgen.bench.results_page as rp; rp.generate(); "
            "assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# --------------------------------------------------------------------------------------- malformed files

@pytest.fixture
def results_copy(tmp_path) -> Path:
    d = tmp_path / "results"
    shutil.copytree(rp.RESULTS_DIR, d)
    return d


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("change, field, problem", [
    (lambda d: d.pop("command"), "'command'", "missing"),
    (lambda d: d["headline"][0].update(better="up"), "'headline[0].better'", "expected 'lower' or 'higher'"),
    (lambda d: d["headline"][0].update(ratio=2.0), "'headline[0].ratio'", "computed from the values, not stored"),
    (lambda d: d["headline"][0].update(structgen="fast"), "'headline[0].structgen'", "expected a number"),
    (lambda d: d["headline"][0].update(peer_value=[1, 2, 3]), "'headline[0].peer_value'", "3 values"),
    (lambda d: d["tables"][0]["rows"][0].pop(), "'tables[0].rows[0]'", "cells for"),
    (lambda d: d.update(date="yesterday"), "'date'", "YYYY-MM-DD"),
    (lambda d: d.update(colour="red"), "'colour'", "unknown field"),
    (lambda d: d["headline"][0]["structgen"].update(column="p42"), "'headline[0].structgen.column'", "no column 'p42'"),
    (lambda d: d["headline"][0]["structgen"].update(row="nobody"), "'headline[0].structgen.row'", "0 rows"),
    (lambda d: d["headline"][0]["structgen"].update(column="engine"), "'headline[0].structgen'", "not a number"),
])
def test_a_malformed_result_file_is_refused_naming_the_file_and_field(results_copy, capsys, change, field, problem):
    target = results_copy / "maskbench.json"
    _edit(target, change)
    with pytest.raises(rp.ResultFileError) as info:
        rp.load_results(results_copy)
    message = str(info.value)
    assert "maskbench.json" in message and field in message and problem in message, message
    assert rp.main(["--results", str(results_copy), "--check"]) == 2
    err = capsys.readouterr().err
    assert "maskbench.json" in err and field in err


def test_a_file_that_is_not_json_is_named(results_copy):
    (results_copy / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(rp.ResultFileError, match=r"broken\.json: field '\(JSON\)': not valid JSON"):
        rp.load_results(results_copy)


def test_check_fails_when_the_page_was_edited_by_hand(tmp_path, capsys):
    page = tmp_path / "BENCHMARKS.md"
    page.write_text(PAGE.read_text(encoding="utf-8").replace("| 398 |", "| 399 |", 1), encoding="utf-8")
    assert rp.main(["--check", "--page", str(page)]) == 1
    assert "is not what benchmarks/results/ generates" in capsys.readouterr().err


# --------------------------------------------------------------------------------------- figures and recording

def test_headline_figures_are_read_from_the_tables():
    _, d = next((p, d) for p, d in rp.load_results() if p.stem == "maskbench")
    raw = json.loads((rp.RESULTS_DIR / "maskbench.json").read_text(encoding="utf-8"))
    assert isinstance(raw["headline"][0]["structgen"], dict)  # a reference, not a copy of the figure
    rows = {r[0]: r for r in d["tables"][0]["rows"]}
    p99 = d["tables"][0]["columns"].index("p99")
    assert d["headline"][0]["structgen"] == [rows["structgen, run 1"][p99], rows["structgen, run 2"][p99]]


def test_ratios_and_differences():
    h = {"what": "p99", "structgen": [571, 590], "peer": "llg", "peer_value": [287, 222], "unit": "µs", "better": "lower"}
    assert rp.compare(h) == pytest.approx([571 / 287, 590 / 222])
    assert rp.fmt_compare(h) == "1.99x / 2.66x" and rp.structgen_better(h) is False
    h = {"what": "acc", "structgen": 63.4, "peer": "x", "peer_value": 16.9, "unit": "%", "better": "higher",
         "compare": "difference"}
    assert rp.fmt_compare(h) == "**+46.5 points**"
    assert rp.fmt_compare({"what": "n", "structgen": 0, "peer": None, "unit": "", "better": "lower"}) == "--"
    assert [rp.fmt_number(v) for v in (1828, 4.5, 100.0, 0.0048, 12345.6, 0.9999)] == \
        ["1,828", "4.5", "100.0", "0.0048", "12,345.6", "0.9999"]


def test_record_result_writes_a_valid_file_and_keeps_what_it_is_not_given(tmp_path):
    shutil.copy(rp.RESULTS_DIR / "maskbench.json", tmp_path / "maskbench.json")
    table = json.loads((tmp_path / "maskbench.json").read_text(encoding="utf-8"))["tables"][0]
    p99 = table["columns"].index("p99")
    table["rows"][0][p99] = 123
    path = rp.record_result("maskbench", command="structgen bench mask --quick", date="2026-12-04",
                            machine="a laptop", tables=[table], results_dir=tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["command"] == "structgen bench mask --quick" and data["tables"] == [table]
    assert data["title"].startswith("MaskBench") and data["plots"]  # kept
    (_, d), = rp.load_results(tmp_path)
    assert d["headline"][0]["structgen"][0] == 123  # the headline follows its table
    with pytest.raises(rp.ResultFileError, match=r"'headline\[0\].structgen.column': no column 'p99'"):
        rp.record_result("maskbench", command="c", date="2026-12-04", machine="m",
                         tables=[{"columns": ["engine, run"], "rows": []}], results_dir=tmp_path)
    with pytest.raises(rp.ResultFileError, match="'date'"):
        rp.record_result("maskbench", command="c", date="today", machine="m", results_dir=tmp_path)
    new = rp.record_result("new-topic", command="structgen bench x", date="2026-12-04", machine="m",
                           results_dir=tmp_path)
    assert rp.validate(json.loads(new.read_text(encoding="utf-8")), new)["title"] == "new-topic"


def test_summary_tables_from_the_benchmarks_own_output(tmp_path):
    mask = {"meta": {"command": ".venv/bin/structgen bench mask --quick"},
            "summaries": [{"engine": "structgen", "counts": {"pass": 9}, "ttfm_ms": {"p50": 1.234},
                           "tbm_us": {"p50": 5.0, "p90": 9.0, "p99": 50.0, "p99.9": 90.0, "mean": 7.0},
                           "peak_rss_mb": 500.4}]}
    (tmp_path / "summary.json").write_text(json.dumps(mask))
    command, table = rp.summary_table(tmp_path / "summary.json")
    assert command == "structgen bench mask --quick"
    assert table["rows"] == [["structgen", 9, 1.23, 5.0, 9.0, 50.0, 90.0, 7.0, 500]]
    values = {"meta": {"command": "structgen bench values --cases 2"},
              "summaries": [{"engine": "structgen", "cases": 2, "field_acc": 0.5, "valid_rate": 1.0,
                             "invented_keys": 0, "mean_s": 1.5}]}
    (tmp_path / "values.json").write_text(json.dumps(values))
    assert rp.summary_table(tmp_path / "values.json")[1]["rows"] == [["structgen", 2, 50.0, 100.0, 0, 1.5]]
    (tmp_path / "other.json").write_text(json.dumps({"meta": {}, "summaries": [{"engine": "x"}]}))
    with pytest.raises(rp.ResultFileError, match="other.json"):
        rp.summary_table(tmp_path / "other.json")


def test_importing_two_runs_of_the_mask_bench_updates_table_and_headline(results_copy, tmp_path):
    def summary(run: int, p99s: dict) -> Path:
        sums = [{"engine": e, "counts": {"pass": 398}, "ttfm_ms": {"p50": 2.0},
                 "tbm_us": {"p50": 5.0, "p90": 50.0, "p99": p99, "p99.9": 900.0, "mean": 20.0}, "peak_rss_mb": 600.0}
                for e, p99 in p99s.items()]
        path = tmp_path / f"summary-{run}.json"
        path.write_text(json.dumps({"meta": {"command": "structgen bench mask --sample 400 --seed 0"},
                                    "summaries": sums}))
        return path

    page = tmp_path / "BENCHMARKS.md"
    a, b = summary(1, {"structgen": 300.0, "llguidance": 200.0}), summary(2, {"structgen": 100.0, "llguidance": 400.0})
    assert rp.main(["--results", str(results_copy), "--page", str(page), "--no-plots", "--topic", "maskbench",
                    "--date", "2026-12-04", "--machine", "a laptop", "--import-summary", str(a), str(b)]) == 0
    text = page.read_text(encoding="utf-8")
    assert "| structgen, run 2 | 398 | 2.0 | 5.0 | 50.0 | 100.0 | 900.0 | 20.0 | 600 |" in text
    row = next(r for r in _headline_rows(text) if "TBM p99" in r[0])
    assert row[1:4] == ["300.0 / 100.0 µs", "llguidance 200.0 / 400.0 µs", "1.50x / 0.25x"]


def test_plots_are_drawn_from_the_tables(tmp_path):
    pytest.importorskip("matplotlib")
    _, d = next((p, d) for p, d in rp.load_results() if d.get("plots"))
    for p in d["plots"]:
        labels, names, values = rp.plot_data(d, p)
        assert labels and names and all(len(v) == len(names) for v in values)
        out = rp.draw_plot(d, p, root=tmp_path)
        assert out.stat().st_size < 100_000
