"""JSON Schema Test Suite coverage, per keyword file (as the JSONSchemaBench paper reports it).

A group (one schema with its instances) is *handled exactly* when the schema
compiles and every valid instance is accepted and every invalid one rejected.
A compile failure must be a structgen error (an explicit refusal); an invalid
instance accepted is an *invalidation* — the one outcome that must never happen.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import StructgenError
from .data_paths import data_path



def suite_folder(suite_dir: Path | str | None = None) -> Path:
    """The suite's checkout: ``suite_dir``, or ``json-schema-test-suite`` in the data folders."""
    return data_path("json-schema-test-suite", suite_dir, flag="--suite")


@dataclass
class GroupResult:
    file: str
    index: int
    description: str
    status: str  # exact | compile_error | validation_error | invalidation_error | crash
    detail: str = ""


@dataclass
class SuiteReport:
    groups: list[GroupResult] = field(default_factory=list)

    def by_file(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for g in self.groups:
            row = out.setdefault(g.file, {"groups": 0, "exact": 0, "compile_error": 0, "validation_error": 0,
                                          "invalidation_error": 0, "crash": 0})
            row["groups"] += 1
            row[g.status] += 1
        return out

    def exact_ids(self) -> set[str]:
        return {f"{g.file}#{g.index}" for g in self.groups if g.status == "exact"}

    def table(self) -> str:
        rows = self.by_file()
        lines = ["| keyword file | groups | exact | refused | valid rejected | invalid accepted | crash |",
                 "|---|---:|---:|---:|---:|---:|---:|"]
        tot = {k: 0 for k in ("groups", "exact", "compile_error", "validation_error", "invalidation_error", "crash")}
        for f in sorted(rows):
            r = rows[f]
            for k in tot:
                tot[k] += r[k]
            lines.append(f"| {f} | {r['groups']} | {r['exact']} | {r['compile_error']} | {r['validation_error']} "
                         f"| {r['invalidation_error']} | {r['crash']} |")
        lines.append(f"| **total** | {tot['groups']} | {tot['exact']} ({100 * tot['exact'] / max(tot['groups'], 1):.1f}%)"
                     f" | {tot['compile_error']} | {tot['validation_error']} | {tot['invalidation_error']} "
                     f"| {tot['crash']} |")
        return "\n".join(lines)


def run_test_suite(compiler, suite_dir: Path | str | None = None, *, draft: str = "draft2020-12",
                   files: list[str] | None = None, progress: bool = False) -> SuiteReport:
    """Run every group of the suite's ``tests/<draft>/*.json`` (optional/ excluded)."""
    from ..engine.matcher import Matcher

    root = suite_folder(suite_dir) / "tests" / draft
    paths = sorted(root.glob("*.json"))
    if files:
        paths = [p for p in paths if p.stem in files]
    report = SuiteReport()
    it = paths
    if progress:
        from tqdm import tqdm

        it = tqdm(paths, desc="test suite", unit="file")
    for path in it:
        for i, group in enumerate(json.loads(path.read_text())):
            report.groups.append(_run_group(compiler, Matcher, path.stem, i, group))
    return report


def _run_group(compiler, Matcher, file: str, index: int, group: dict) -> GroupResult:
    desc = group.get("description", "")
    try:
        g = compiler.compile_json_schema(group["schema"], whitespace="flexible", property_order="any")
    except StructgenError as e:
        return GroupResult(file, index, desc, "compile_error", f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 - a crash is a finding, reported not raised
        return GroupResult(file, index, desc, "crash", f"{type(e).__name__}: {e}")
    m = Matcher(g)
    for t in group["tests"]:
        m.reset()
        try:
            data = json.dumps(t["data"], ensure_ascii=False).encode("utf-8")
        except ValueError:
            continue
        ok = m.accept_bytes(data) and m.is_accepting()
        if t["valid"] and not ok:
            return GroupResult(file, index, desc, "validation_error", t.get("description", ""))
        if not t["valid"] and ok:
            return GroupResult(file, index, desc, "invalidation_error", t.get("description", ""))
    return GroupResult(file, index, desc, "exact")


def suite_records(suite_dir: Path | str | None = None, *, draft: str = "draft2020-12") -> list[dict]:
    """The suite's groups as MaskBench records (``id`` = ``file#index``), so every engine
    adapter of ``structgen bench mask`` can be scored on them with the same harness."""
    root = suite_folder(suite_dir) / "tests" / draft
    out = []
    for path in sorted(root.glob("*.json")):
        for i, group in enumerate(json.loads(path.read_text())):
            tests = []
            for t in group["tests"]:
                try:
                    json.dumps(t["data"], ensure_ascii=False)
                except ValueError:
                    continue
                tests.append({"data": t["data"], "valid": t["valid"], "description": t.get("description", "")})
            out.append({"id": f"{path.stem}#{i}", "schema": group["schema"], "tests": tests})
    return out


def engines_table(results: dict[str, dict[str, dict]]) -> str:
    """Per keyword file, groups each engine handles exactly (MaskBench status ``pass``),
    and per engine the invalid instances it let through."""
    from .report import _md_table

    engines = list(results)
    files = sorted({rid.split("#")[0] for r in results.values() for rid in r})
    rows = []
    totals = {e: 0 for e in engines}
    n_total = 0
    for f in files:
        ids = sorted({rid for r in results.values() for rid in r if rid.split("#")[0] == f})
        n_total += len(ids)
        cells = []
        for e in engines:
            k = sum(1 for rid in ids if results[e].get(rid, {}).get("status") == "pass")
            totals[e] += k
            cells.append(str(k))
        rows.append([f, str(len(ids))] + cells)
    rows.append(["**total**", str(n_total)] + [f"{totals[e]} ({100 * totals[e] / max(n_total, 1):.1f}%)"
                                               for e in engines])
    inval = [f"{e}: {sum(1 for r in results[e].values() if r.get('status') == 'invalidation_error')}" for e in engines]
    return (_md_table(["keyword file", "groups"] + engines, rows)
            + "\n\ngroups with an invalid instance accepted -- " + ", ".join(inval))
