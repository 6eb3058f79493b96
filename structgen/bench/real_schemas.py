"""``structgen bench real-schemas``: ``generate_json`` end to end on real configuration schemas.

JSONSchemaBench's ``JsonSchemaStore`` (348 schemas of real configuration files) and ``Github_ultra``
(116 of the largest GitHub schemas) are run through ``structgen.generate_json(model, schema,
max_tokens=256, return_result=True, timeout=...)`` exactly as a user would call it: no prompt (the
request is built from the schema's title and description), the default ``schema_prompt="auto"``,
the default whitespace, members and grounding.  Each schema ends in one outcome (:data:`OUTCOMES`):

``ok``
    a value came back (``generate_json`` validated it); it is validated again here with stock
    ``jsonschema`` and its ``FormatChecker`` as a second opinion, and a disagreement is flagged
    (``second_opinion``: ``"valid"``, ``"invalid"`` (a disagreement) or ``"error"`` (the stock
    validator could not read the schema, e.g. an ECMA-262 ``\\p{..}`` pattern)).
``refused``
    a ``StructgenError`` other than ``GenerationError`` while compiling (``UnsupportedFeature``,
    ``UnsatisfiableSchema``, ``SchemaError``, ``CompileLimitExceeded``, ...): class and message kept.
``context``
    an error saying the prompt plus ``max_tokens`` does not fit the model's context
    (``structgen.runtime.loop.check_context``: ``GenerationError(reason="context")``).
``generation_error``
    a ``GenerationError`` after decoding started (budget, timeout, dead end, ...): ``reason`` kept.
``foreign``
    any exception that is not a ``StructgenError``: a bug; the traceback's last lines are kept.

``--compile-only`` compiles every schema of the two datasets with what ``generate_json`` compiles
(:data:`GENERATE_JSON_COMPILE_KWARGS`) and reports compiled / refused / foreign and compile times.
"""
from __future__ import annotations

import json
import math
import random
import re
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

__all__ = ["DATASETS", "OUTCOMES", "GENERATE_JSON_COMPILE_KWARGS", "load_records", "sample_records",
           "classify_exception", "run_one", "run_real_schemas", "run_compile_only", "summary_table",
           "compile_table", "run_real_schemas_cli"]

DATASETS = ("JsonSchemaStore", "Github_ultra")
OUTCOMES = ("ok", "refused", "context", "generation_error", "foreign")
DEFAULT_SAMPLE = 60
DEFAULT_MAX_TOKENS = 256
DEFAULT_TIMEOUT = 120.0
#: what ``generate_json``'s defaults compile (structgen/api.py: whitespace="spaced", strict=False,
#: lenient=False, format="assert", registry=None, source=None (no source text), ground_numbers=
#: (grounded is True) -> True, members="named", plain_integers=True)
GENERATE_JSON_COMPILE_KWARGS = dict(whitespace="spaced", strict=False, lenient=False, format="assert", registry=None,
                                    source=None, ground_numbers=True, members="named", plain_integers=True)
_CONTEXT_RE = re.compile(r"exceeds? the model's context")
_PROMPT_TOKENS_RE = re.compile(r"(\d+) prompt tokens \+ max_tokens=(\d+) > (\d+) positions")
TEXT_KEPT = 600
TRACEBACK_LINES = 8


# --------------------------------------------------------------------------- data and sample


def load_records(path: str | Path | None = None, datasets: Sequence[str] = DATASETS) -> list[dict]:
    """The JSONSchemaBench records of ``datasets`` (from the shared data folder unless ``path``),
    sorted by dataset then id."""
    from .jsonschemabench.data import load_jsonschemabench

    wanted = set(datasets)
    recs = [r for r in load_jsonschemabench(path) if r["dataset"] in wanted]
    return sorted(recs, key=lambda r: (r["dataset"], r["unique_id"]))


def _quotas(sizes: dict[str, int], n: int) -> dict[str, int]:
    """``n`` split across the datasets in proportion to their sizes (largest remainder, ties by name)."""
    total = sum(sizes.values())
    n = min(n, total)
    if total == 0 or n <= 0:
        return {k: 0 for k in sizes}
    exact = {k: n * s / total for k, s in sizes.items()}
    out = {k: min(sizes[k], math.floor(v)) for k, v in exact.items()}
    for k in sorted(sizes, key=lambda k: (-(exact[k] - math.floor(exact[k])), k)):
        if sum(out.values()) >= n:
            break
        if out[k] < sizes[k]:
            out[k] += 1
    return out


def sample_records(records: Sequence[dict], n: int, seed: int = 0) -> list[dict]:
    """``n`` records drawn with ``random.Random(seed)`` across the datasets in proportion to their
    sizes, interleaved (so an interrupted run has seen every dataset in proportion)."""
    by: dict[str, list[dict]] = {}
    for r in sorted(records, key=lambda r: (r["dataset"], r["unique_id"])):
        by.setdefault(r["dataset"], []).append(r)
    quotas = _quotas({k: len(v) for k, v in by.items()}, n)
    rng = random.Random(seed)
    columns = {k: rng.sample(by[k], quotas[k]) for k in sorted(by)}
    out: list[dict] = []
    # interleave by position in proportion: order every pick by its fraction through its column
    keyed = [((i + 0.5) / len(col), k, i) for k, col in columns.items() for i in range(len(col))]
    for _, k, i in sorted(keyed):
        out.append(columns[k][i])
    return out


# --------------------------------------------------------------------------- outcomes


def _phase(exc: BaseException) -> str:
    """Where ``exc`` was raised: ``"compile"`` (inside compile_json_schema), ``"decode"`` (inside
    the decoding loop) or ``"other"`` (building the prompt, checking arguments, ...)."""
    names = {f.f_code.co_name for f, _ in traceback.walk_tb(exc.__traceback__)}
    if names & {"_run_tokens", "_run", "_run_many"}:
        return "decode"
    if "compile_json_schema" in names:
        return "compile"
    return "other"


def _tail(exc: BaseException, lines: int = TRACEBACK_LINES) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return "\n".join(text.rstrip().splitlines()[-lines:])


def classify_exception(exc: BaseException, phase: str | None = None) -> dict:
    """The outcome of a ``generate_json`` call that raised ``exc``: ``{"outcome", "error_class",
    "message", ...}`` (``reason`` for a generation error, ``traceback`` for a foreign one).
    ``phase`` (``"compile"``, ``"decode"``, ``"other"``): where it was raised; None reads it from
    the traceback."""
    from ..errors import GenerationError, StructgenError

    phase = phase or _phase(exc)
    msg = str(exc)
    out: dict[str, Any] = {"error_class": type(exc).__name__, "message": msg[:2000], "phase": phase}
    if getattr(exc, "reason", None) == "context" or _CONTEXT_RE.search(msg):
        out["outcome"] = "context"
        m = _PROMPT_TOKENS_RE.search(msg)
        if m:
            out["prompt_tokens"] = int(m.group(1))
            out["context_length"] = int(m.group(3))
        if not isinstance(exc, StructgenError):
            out["traceback"] = _tail(exc)
        return out
    if isinstance(exc, GenerationError):
        out.update(outcome="generation_error", reason=exc.reason, output_tokens=exc.num_tokens,
                   partial=(exc.partial or "")[:TEXT_KEPT])
        return out
    if isinstance(exc, StructgenError):
        if phase == "decode":  # not a compile refusal: an error of the decoding itself
            out.update(outcome="generation_error", reason=type(exc).__name__)
        else:
            out["outcome"] = "refused"
        return out
    out.update(outcome="foreign", traceback=_tail(exc))
    return out


def second_opinion(schema: Any, value: Any) -> tuple[str, str | None]:
    """Stock ``jsonschema`` (the schema's own draft, 2020-12 when it names none) with its
    ``FormatChecker``: ``("valid", None)``, ``("invalid", message)`` or ``("error", message)``."""
    import jsonschema
    from jsonschema.validators import validator_for

    try:
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        errors = sorted(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value),
                        key=lambda e: list(e.absolute_path))
    except Exception as e:  # noqa: BLE001 - an unreadable schema for the stock validator is no verdict
        return "error", f"{type(e).__name__}: {e}"[:500]
    if not errors:
        return "valid", None
    err = errors[0]
    ptr = "/" + "/".join(str(p) for p in err.absolute_path)
    return "invalid", f"at {ptr}: {err.message}"[:500]


def _prompt_tokens_of(model: Any, schema: Any, max_tokens: int) -> int | None:
    """Tokens of the prompt ``generate_json`` sends by default (for rows without a result)."""
    try:
        from ..grammar.json_schema import normalize_schema_input
        from ..runtime.prompts import request_prompt

        sd = normalize_schema_input(schema)
        length = model.context_length
        user = request_prompt(sd, None, "auto", lambda t: len(model.encode(t)),
                              None if length is None else length - max_tokens - 32)
        return len(model.encode(model.chat_prompt(user)))
    except Exception:  # noqa: BLE001 - a statistic only
        return None


def _described(model: Any, schema: Any, prompt: str | None) -> bool | None:
    """Whether the prompt sent describes the schema (``"auto"`` leaves the description out when even
    the field names do not fit beside the request and the output)."""
    if prompt is None or not isinstance(schema, dict):
        return None
    from ..runtime.prompts import task_prompt

    return prompt != model.chat_prompt(task_prompt(schema))


def run_one(model: Any, record: dict, *, max_tokens: int = DEFAULT_MAX_TOKENS,
            timeout: float | None = DEFAULT_TIMEOUT) -> dict:
    """One schema through ``generate_json`` with its defaults; the record of its outcome."""
    import structgen

    schema = record["json_schema"]
    rec: dict[str, Any] = {"id": record["unique_id"], "dataset": record["dataset"], "prompt_mode": "auto",
                           "schema_chars": len(json.dumps(schema))}
    t0 = time.perf_counter()
    try:
        value, result = structgen.generate_json(model, schema, max_tokens=max_tokens, return_result=True,
                                                timeout=timeout)
    except Exception as e:  # noqa: BLE001 - every exception is classified
        rec["wall_seconds"] = round(time.perf_counter() - t0, 3)
        rec.update(classify_exception(e))
        if rec["outcome"] in ("generation_error", "foreign") and rec["phase"] == "decode":
            rec.setdefault("prompt_tokens", _prompt_tokens_of(model, schema, max_tokens))
        return rec
    rec["wall_seconds"] = round(time.perf_counter() - t0, 3)
    verdict, why = second_opinion(schema, value)
    prompt = result.extra.get("prompt")
    rec.update(outcome="ok", seconds=round(result.seconds, 3), prompt_tokens=result.prompt_tokens,
               output_tokens=result.num_tokens, finish_reason=result.finish_reason,
               schema_described=_described(model, schema, prompt), second_opinion=verdict,
               output=result.text[:TEXT_KEPT])
    if why:
        rec["second_opinion_message"] = why
    return rec


# --------------------------------------------------------------------------- runs


def _progress(enabled: bool, text: str) -> None:
    if enabled:
        print(text, file=sys.stderr, flush=True)


def _write(out: str | Path | None, payload: dict) -> None:
    if out:
        p = Path(out)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text(json.dumps(payload, indent=1, default=str))
        tmp.replace(p)


def run_real_schemas(model: Any, records: Sequence[dict], *, max_tokens: int = DEFAULT_MAX_TOKENS,
                     timeout: float | None = DEFAULT_TIMEOUT, out: str | Path | None = None,
                     progress: bool = True, settings: dict | None = None,
                     runner: Callable[..., dict] = run_one) -> list[dict]:
    """Every record through :func:`run_one`; the JSON file is rewritten after each schema."""
    rows: list[dict] = []
    for i, r in enumerate(records, 1):
        row = runner(model, r, max_tokens=max_tokens, timeout=timeout)
        rows.append(row)
        extra = row.get("reason") or row.get("error_class") or ""
        if row["outcome"] == "ok" and row.get("second_opinion") != "valid":
            extra = f"second opinion: {row.get('second_opinion')}"
        _progress(progress, f"[{i}/{len(records)}] {row['id']} {row['outcome']} {extra} "
                            f"{row['wall_seconds']:.1f}s prompt={row.get('prompt_tokens')} "
                            f"out={row.get('output_tokens')}")
        _write(out, {"settings": settings or {}, "records": rows})
    return rows


def run_compile_only(compiler: Any, records: Sequence[dict], *, out: str | Path | None = None,
                     progress: bool = True, settings: dict | None = None) -> list[dict]:
    """Compile every record's schema as ``generate_json`` does; ``compiled`` / ``refused`` / ``foreign``
    per schema with its compile time."""
    from ..errors import StructgenError
    from ..grammar.json_schema import normalize_schema_input

    rows: list[dict] = []
    for i, r in enumerate(records, 1):
        row: dict[str, Any] = {"id": r["unique_id"], "dataset": r["dataset"]}
        t0 = time.perf_counter()
        try:
            compiler.compile_json_schema(normalize_schema_input(r["json_schema"]), **GENERATE_JSON_COMPILE_KWARGS)
            row["outcome"] = "compiled"
        except StructgenError as e:
            row.update(outcome="refused", error_class=type(e).__name__, message=str(e)[:2000])
        except Exception as e:  # noqa: BLE001 - a bug: classified, not raised
            row.update(outcome="foreign", error_class=type(e).__name__, message=str(e)[:2000], traceback=_tail(e))
        row["compile_seconds"] = round(time.perf_counter() - t0, 4)
        rows.append(row)
        _progress(progress, f"[{i}/{len(records)}] {row['id']} {row['outcome']} {row.get('error_class', '')} "
                            f"{row['compile_seconds']:.2f}s")
        _write(out, {"settings": settings or {}, "records": rows})
    return rows


# --------------------------------------------------------------------------- tables


def _pct(xs: Iterable[float], q: float) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    k = min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))
    return xs[k]


def _fmt(x: Any, nd: int = 1) -> str:
    if x is None:
        return "-"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [list(map(str, header))] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths)))
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summary_table(rows: Sequence[dict]) -> str:
    """Outcome counts per dataset (and all), valid rate, second-opinion disagreements, median/p90
    wall time and the largest prompt."""
    groups = sorted({r["dataset"] for r in rows})
    header = ["dataset", "n", *OUTCOMES, "valid%", "disagree", "t50 s", "t90 s", "max prompt"]
    out = []
    for name, rs in [*[(g, [r for r in rows if r["dataset"] == g]) for g in groups], ("all", list(rows))]:
        c = Counter(r["outcome"] for r in rs)
        times = [r["wall_seconds"] for r in rs if r.get("wall_seconds") is not None]
        prompts = [r["prompt_tokens"] for r in rs if r.get("prompt_tokens") is not None]
        disagree = sum(1 for r in rs if r["outcome"] == "ok" and r.get("second_opinion") == "invalid")
        out.append([name, len(rs), *(c.get(o, 0) for o in OUTCOMES),
                    _fmt(100.0 * c.get("ok", 0) / len(rs)) if rs else "-", disagree,
                    _fmt(_pct(times, 0.5)), _fmt(_pct(times, 0.9)), max(prompts) if prompts else "-"])
    text = _table(header, out)
    reasons = Counter(r.get("reason") for r in rows if r["outcome"] == "generation_error")
    refusals = Counter(r.get("error_class") for r in rows if r["outcome"] == "refused")
    if reasons:
        text += "\ngeneration_error reasons: " + ", ".join(f"{k} {v}" for k, v in reasons.most_common())
    if refusals:
        text += "\nrefused by: " + ", ".join(f"{k} {v}" for k, v in refusals.most_common())
    unread = sum(1 for r in rows if r["outcome"] == "ok" and r.get("second_opinion") == "error")
    if unread:
        text += f"\nsecond opinion could not read {unread} schema(s) (not counted as disagreements)"
    return text


def compile_table(rows: Sequence[dict]) -> str:
    """Compiled / refused / foreign per dataset and compile time p50 / p90 / max."""
    groups = sorted({r["dataset"] for r in rows})
    header = ["dataset", "n", "compiled", "refused", "foreign", "p50 s", "p90 s", "max s"]
    out = []
    for name, rs in [*[(g, [r for r in rows if r["dataset"] == g]) for g in groups], ("all", list(rows))]:
        c = Counter(r["outcome"] for r in rs)
        t = [r["compile_seconds"] for r in rs]
        out.append([name, len(rs), c.get("compiled", 0), c.get("refused", 0), c.get("foreign", 0),
                    _fmt(_pct(t, 0.5), 3), _fmt(_pct(t, 0.9), 3), _fmt(max(t) if t else None, 3)])
    text = _table(header, out)
    refusals = Counter(r.get("error_class") for r in rows if r["outcome"] == "refused")
    if refusals:
        text += "\nrefused by: " + ", ".join(f"{k} {v}" for k, v in refusals.most_common())
    return text


# --------------------------------------------------------------------------- command line


def run_real_schemas_cli(args: Any) -> int:
    """``structgen bench real-schemas`` (the parsed arguments of :mod:`structgen.cli`)."""
    import os
    import shlex

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ..compiler import compiler_for
    from ..errors import StructgenError
    from ..models import load_model

    try:
        records = load_records(args.data)
        model = load_model(args.model)
    except StructgenError as e:
        print(f"structgen bench real-schemas: {e}", file=sys.stderr)
        return 2
    settings = {"command": " ".join(shlex.quote(a) for a in sys.argv), "model": model.name,
                "context_length": model.context_length, "datasets": list(DATASETS)}
    progress = not args.no_progress
    if args.compile_only:
        settings.update(mode="compile-only", compile_kwargs={k: v for k, v in GENERATE_JSON_COMPILE_KWARGS.items()})
        rows = run_compile_only(compiler_for(model), records, out=args.out, progress=progress, settings=settings)
        print(compile_table(rows))
    else:
        picked = sample_records(records, args.sample, args.seed)
        settings.update(mode="generate", sample=args.sample, seed=args.seed, max_tokens=args.max_tokens,
                        timeout=args.timeout)
        rows = run_real_schemas(model, picked, max_tokens=args.max_tokens, timeout=args.timeout, out=args.out,
                                progress=progress, settings=settings)
        print(summary_table(rows))
    if args.out:
        print(f"\nresults: {args.out}")
    return 0
