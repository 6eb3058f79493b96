"""JSONSchemaBench's data and prompts: the JSONL of schemas, a seeded sample per dataset, the prompt
the model sees (``generate_json``'s), and the engines and statuses every part shares."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from ..data_paths import data_path, read_jsonl
from ..maskbench import sample_records


DEFAULT_ENGINES = ("structgen", "structgen-speculative", "unconstrained", "llguidance", "xgrammar", "outlines-core",
                   "llamacpp", "llamacpp-unconstrained")
#: Per (schema, engine) outcomes.  The first four compiled (declared coverage).
STATUSES = ("valid", "invalid", "gen_error", "timeout", "crash", "compile_error", "compile_timeout", "compile_crash")
COMPILE_FAILURES = ("compile_error", "compile_timeout", "compile_crash")
OUTPUT_CHARS_KEPT = 4000
WARMUP_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
                 "required": ["name", "n"]}


# --------------------------------------------------------------------------- data


def default_data_path() -> Path:
    """``jsonschemabench-dev.jsonl.gz`` in the data folders (:mod:`structgen.bench.data_paths`)."""
    return data_path("jsonschemabench-dev.jsonl.gz")


def load_jsonschemabench(path: str | Path | None = None) -> list[dict]:
    """All records (``dataset``, ``unique_id``, ``json_schema``); a string schema is parsed."""
    out = []
    for r in read_jsonl("jsonschemabench-dev.jsonl.gz", path):
        if isinstance(r.get("json_schema"), str):
            try:
                r["json_schema"] = json.loads(r["json_schema"])
            except json.JSONDecodeError:
                pass  # kept as text: every engine will refuse it
        out.append(r)
    return out


def sample_cases(records: Sequence[dict], per_dataset: int | None, seed: int = 0,
                 datasets: Sequence[str] | None = None) -> list[dict]:
    """``per_dataset`` random records of each dataset (all when None), as cases
    ``{"id", "dataset", "schema"}``, interleaved: the first case of every dataset
    (in name order), then the second of each, ... -- so an interrupted run has
    covered every dataset evenly."""
    by: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by[r["dataset"]].append(r)
    wanted = set(datasets) if datasets else None
    if wanted is not None:
        unknown = wanted - set(by)
        if unknown:
            raise ValueError(f"unknown dataset(s) {sorted(unknown)}; known: {sorted(by)}")
    columns = []
    for ds in sorted(by):
        if wanted is not None and ds not in wanted:
            continue
        group = sorted(by[ds], key=lambda r: r["unique_id"])
        columns.append(sorted(sample_records(group, per_dataset, seed), key=lambda r: r["unique_id"]))
    cases = []
    for k in range(max((len(c) for c in columns), default=0)):
        for col in columns:
            if k < len(col):
                r = col[k]
                cases.append({"id": r["unique_id"], "dataset": r["dataset"], "schema": r["json_schema"]})
    return cases


TRUNCATION_NOTE = " ... (schema truncated)"


def build_prompt(model: Any, schema: Any, max_prompt_tokens: int | None) -> tuple[str, list[int], bool]:
    """(prompt text, its token ids, truncated?) -- what ``generate_json`` sends.

    When the prompt exceeds ``max_prompt_tokens``, the schema's JSON text in
    it is cut (the constraint still uses the whole schema) to the longest
    prefix that fits, followed by :data:`TRUNCATION_NOTE`.
    """
    from ...runtime.prompts import schema_prompt

    user = schema_prompt(schema if isinstance(schema, dict) else {})
    if not isinstance(schema, dict):
        user = user.rsplit("\n", 1)[0] + "\n" + json.dumps(schema)
    text = model.chat_prompt(user)
    ids = model.encode(text)
    if not max_prompt_tokens or len(ids) <= max_prompt_tokens:
        return text, ids, False
    sj = json.dumps(schema)
    head = user[: len(user) - len(sj)] if user.endswith(sj) else user
    body = sj if user.endswith(sj) else ""

    def make(k: int) -> tuple[str, list[int]]:
        t = model.chat_prompt(head + body[:k] + TRUNCATION_NOTE)
        return t, model.encode(t)

    lo, hi = 0, min(len(body), max_prompt_tokens * 8)  # a token is rarely more than 8 characters
    best = make(0)
    if len(best[1]) > max_prompt_tokens:
        return best[0], best[1], True  # even without the schema it does not fit: keep the shortest
    while lo < hi:
        mid = (lo + hi + 1) // 2
        t, i = make(mid)
        if len(i) <= max_prompt_tokens:
            lo, best = mid, (t, i)
        else:
            hi = mid - 1
    return best[0], best[1], True
