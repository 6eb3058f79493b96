"""JSON Schema Test Suite coverage, per keyword file (as the JSONSchemaBench paper reports it).

A group (one schema with its instances) is *handled exactly* when the schema
compiles and every valid instance is accepted and every invalid one rejected.
A compile failure must be a structgen error (an explicit refusal); an invalid
instance accepted is an *invalidation* — the one outcome that must never happen.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import StructgenError, UnsatisfiableSchema
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


#: the suite's other documents are served here in its own runner (``remotes/``)
REMOTES_BASE = "http://localhost:1234/"

#: a compile error that says the schema admits no value, in each engine's words
_EMPTY_LANGUAGE = re.compile(r"no JSON value satisfies|Unsatisfiable schema|cannot accept any value", re.I)


def suite_remotes(suite_dir: Path | str | None = None) -> dict[str, Any]:
    """The suite's ``remotes/`` documents by the URI its tests name them with (a registry)."""
    root = suite_folder(suite_dir) / "remotes"
    return {REMOTES_BASE + p.relative_to(root).as_posix(): json.loads(p.read_text())
            for p in sorted(root.rglob("*.json"))}


def run_test_suite(compiler, suite_dir: Path | str | None = None, *, draft: str = "draft2020-12",
                   files: list[str] | None = None, progress: bool = False, format: str = "annotate") -> SuiteReport:
    """Run every group of the suite's ``tests/<draft>/*.json`` (optional/ excluded), with the
    suite's remote documents as the registry and ``format`` read as the suite reads it
    (``"annotate"``, the spec's default) unless told otherwise."""
    from ..engine.matcher import Matcher

    root = suite_folder(suite_dir) / "tests" / draft
    registry = suite_remotes(suite_dir)
    paths = sorted(root.glob("*.json"))
    if files:
        paths = [p for p in paths if p.stem in files]
    report = SuiteReport()
    it = paths
    if progress:
        from tqdm import tqdm

        it = tqdm(paths, desc=f"test suite (format={format})", unit="file")
    for path in it:
        for i, group in enumerate(json.loads(path.read_text())):
            report.groups.append(_run_group(compiler, Matcher, path.stem, i, group, format, registry))
    return report


def _run_group(compiler, Matcher, file: str, index: int, group: dict, format: str, registry) -> GroupResult:
    desc = group.get("description", "")
    try:
        g = compiler.compile_json_schema(group["schema"], whitespace="flexible", property_order="any",
                                         format=format, registry=registry)
    except StructgenError as e:
        if isinstance(e, UnsatisfiableSchema) and not any(t["valid"] for t in group["tests"]):
            # the language is empty and every instance is invalid: refusing to compile is exact
            return GroupResult(file, index, desc, "exact", "empty language")
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


def formats_table(reports: dict[str, SuiteReport]) -> str:
    """Per keyword file, the groups handled exactly under each ``format`` reading, and the
    groups that accepted an invalid instance (must be 0)."""
    modes = list(reports)
    per = {m: r.by_file() for m, r in reports.items()}
    files = sorted({f for rows in per.values() for f in rows})
    head = ["keyword file", "groups"] + [f"exact, format={m}" for m in modes] + \
        [f"invalid accepted, {m}" for m in modes]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    tot = {m: [0, 0] for m in modes}
    n = 0
    for f in files:
        groups = next(per[m][f]["groups"] for m in modes if f in per[m])
        n += groups
        for m in modes:
            r = per[m].get(f, {})
            tot[m][0] += r.get("exact", 0)
            tot[m][1] += r.get("invalidation_error", 0) + r.get("crash", 0)
        cells = [str(per[m].get(f, {}).get("exact", 0)) for m in modes] + \
            [str(per[m].get(f, {}).get("invalidation_error", 0)) for m in modes]
        lines.append(f"| {f} | {groups} | " + " | ".join(cells) + " |")
    lines.append(f"| **total** | {n} | " + " | ".join(f"{tot[m][0]} ({100 * tot[m][0] / max(n, 1):.1f}%)"
                                                    for m in modes)
                 + " | " + " | ".join(str(tot[m][1]) for m in modes) + " |")
    return "\n".join(lines)


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


def handled_exactly(rec: dict) -> bool:
    """A MaskBench record of a suite group handled exactly: it passed, or the engine refused the
    schema as admitting no value (in its own words) and the group has no valid instance."""
    if rec.get("status") == "pass":
        return True
    return (rec.get("status") == "compile_error" and rec.get("n_valid", 1) == 0
            and bool(_EMPTY_LANGUAGE.search(rec.get("error") or "")))


def engines_table(results: dict[str, dict[str, dict]]) -> str:
    """Per keyword file, groups each engine handles exactly (``handled_exactly``), and per engine the invalid instances it let through."""
    from .report import md_table

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
            k = sum(1 for rid in ids if handled_exactly(results[e].get(rid, {})))
            totals[e] += k
            cells.append(str(k))
        rows.append([f, str(len(ids))] + cells)
    rows.append(["**total**", str(n_total)] + [f"{totals[e]} ({100 * totals[e] / max(n_total, 1):.1f}%)"
                                               for e in engines])
    inval = [f"{e}: {sum(1 for r in results[e].values() if r.get('status') == 'invalidation_error')}" for e in engines]
    return (md_table(["keyword file", "groups"] + engines, rows)
            + "\n\ngroups with an invalid instance accepted -- " + ", ".join(inval))
