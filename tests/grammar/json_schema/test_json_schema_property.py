"""Property-based: instances that hypothesis-jsonschema generates for real MaskBench
schemas are accepted; mutated instances that jsonschema rejects are rejected too."""
from __future__ import annotations

import copy
import gzip
import json
import random
import time
from pathlib import Path

import jsonschema
import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import StructgenError

MASKBENCH = Path(__file__).resolve().parents[4] / "shared" / "data" / "maskbench-dev.jsonl.gz"
hypothesis_jsonschema = pytest.importorskip("hypothesis_jsonschema")


def _key_order(schema) -> dict[str, int]:
    """Property names in order of first appearance (structgen's property order policy)."""
    order: dict[str, int] = {}

    def walk(s):
        if isinstance(s, dict):
            for k in (s.get("properties") or {}) if isinstance(s.get("properties"), dict) else {}:
                order.setdefault(k, len(order))
            for v in s.values():
                walk(v)
        elif isinstance(s, list):
            for v in s:
                walk(v)
    walk(schema)
    return order


def _reorder(value, order):
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: order.get(k, len(order)))
        return {k: _reorder(value[k], order) for k in keys}
    if isinstance(value, list):
        return [_reorder(v, order) for v in value]
    return value


def _mutations(value, rng: random.Random):
    """Small edits: swap a scalar's type, drop a key, add a key, break an array."""
    out = []
    paths = []

    def walk(v, path):
        paths.append(path)
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, path + [k])
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, path + [i])
    walk(value, [])
    for path in rng.sample(paths, min(6, len(paths))):
        for repl in (None, 12345, "zz-not-expected", [], {}, True, -1.5):
            v = copy.deepcopy(value)
            if not path:
                out.append(repl)
                continue
            cur = v
            for p in path[:-1]:
                cur = cur[p]
            cur[path[-1]] = repl
            out.append(v)
        if path:
            v = copy.deepcopy(value)
            cur = v
            for p in path[:-1]:
                cur = cur[p]
            if isinstance(cur, dict):
                del cur[path[-1]]
                out.append(v)
    return out


@pytest.mark.skipif(not MASKBENCH.exists(), reason="MaskBench not found beside the repo")
def test_generated_instances(smol_info):
    from hypothesis import HealthCheck, given, settings

    rows = [json.loads(line) for line in gzip.open(MASKBENCH)]
    rng = random.Random(99)
    comp = GrammarCompiler(smol_info)
    checked = accepted = invalid_checked = 0
    invalidations = []
    small = [r for r in rows if len(json.dumps(r["schema"])) < 1500 and "$ref" not in json.dumps(r["schema"])]
    deadline = time.perf_counter() + 90  # time-boxed: hypothesis can be slow on some schemas
    for r in rng.sample(small, 60):
        if time.perf_counter() > deadline:
            break
        schema = r["schema"]
        try:
            g = comp.compile_json_schema(schema)
            strategy = hypothesis_jsonschema.from_schema(schema)
        except (StructgenError, Exception):  # noqa: BLE001 - unsupported by either side: skip
            continue
        validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(
            schema, format_checker=jsonschema.FormatChecker())
        order = _key_order(schema)
        samples = []

        @settings(max_examples=5, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(strategy)
        def collect(x):
            samples.append(x)

        try:
            collect()
        except Exception:  # noqa: BLE001 - hypothesis could not generate for this schema
            continue
        m = Matcher(g)
        for x in samples:
            if not validator.is_valid(x):
                continue
            text = json.dumps(_reorder(x, order), ensure_ascii=False)
            m.reset()
            checked += 1
            accepted += bool(m.accept_string(text) and m.is_accepting())
            for bad in _mutations(x, rng):
                if validator.is_valid(bad):
                    continue
                invalid_checked += 1
                m.reset()
                if m.accept_string(json.dumps(_reorder(bad, order), ensure_ascii=False)) and m.is_accepting():
                    invalidations.append((r["id"], bad))
    print(f"valid instances: {accepted}/{checked} accepted; invalid mutations checked: {invalid_checked}")
    assert checked >= 20 and invalid_checked >= 50
    assert not invalidations, invalidations[:3]
    assert accepted >= 0.9 * checked
