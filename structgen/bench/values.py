"""``structgen bench values``: are the values the model writes inside the format the right ones?

Valid JSON is the constraint's promise; what users need is the *right* values.  This benchmark
gives the model short texts that state a record (:mod:`structgen.bench.values_cases`: contacts,
order lines, events, books, flight bookings, tool calls; seeded, general, every value literally
in the text) and scores the record each engine extracts against the one the text states.

Metrics, per engine (and per kind):

* **field acc** -- correct expected leaf values / expected leaf values, pooled over all cases
  (micro average).  A leaf is a scalar of the expected record; an array of scalars counts one
  leaf per expected element.  Correct means equal after light normalisation: strings compared
  case-insensitively with runs of whitespace collapsed and ends stripped (dates are strings and
  compare the same way: ``2025-03-14`` only); numbers numerically (``3 == 3.0``, but the string
  ``"3"`` is not the number 3); booleans by value.  Arrays of scalars (authors, speakers, cc) are
  compared as multisets (order ignored); arrays of objects (flight segments) element-wise in
  order.  A missing field, a ``null``, or an output that is not JSON scores 0 for those leaves.
* **spurious** -- values for fields the text does not state (a schema property the expected
  record lacks, given a non-empty value: not ``null``, ``""``, ``[]`` or ``{}``), plus array
  elements beyond the expected length.  An absent field "should be absent or null": leaving it out
  or writing ``null``/empty costs nothing; filling it in (e.g. from a distractor sentence) is
  counted here, not in field acc.
* **invented keys** -- keys the schema does not define (allowed where ``additionalProperties``
  is left open, as in real schemas), counted at every depth.
* **exact** -- share of cases where every expected leaf is right, nothing is spurious and no key
  is invented.
* **valid** -- share of outputs that validate against the schema (``jsonschema``, ``format``
  asserted, as ``generate_json`` checks).  For the unconstrained baseline the first JSON value of
  the reply is taken (code fences looked into first); the constrained engines' whole output must
  parse, so an output cut at ``max_tokens`` scores 0 and is invalid.
* **s/case** -- generation wall time per case (prompt submitted -> last token), compile left out
  for everyone (structgen's compile is warmed by the prompt probe below; peers compile before the
  clock starts, their compile time is in the JSON as ``compile_s``); **ttft** -- time to the first
  output token.

Engines (``--engines``, comma-separated):

* ``structgen`` -- ``structgen.generate_json(model, schema, request, max_tokens=...)`` with its
  defaults, as a user calls it; ``source=case.text`` is passed when ``generate_json`` accepts a
  ``source`` keyword (grounded extraction).  Variants add ``-`` options: ``structgen-noground``
  (no ``source=``), ``structgen-prompt=full`` (``schema_prompt="full"``; any value; only when
  ``generate_json`` accepts ``schema_prompt``), ``structgen-awrs`` / ``structgen-smc``
  (``sampler=``, seeded per case; sequence samplers draw at temperature 1.0, slow), combinable:
  ``structgen-noground-prompt=compact``.
* ``unconstrained`` -- the same model and the same chat prompt as ``structgen`` (captured from
  ``generate_json`` itself), no constraint, greedy, through structgen's decoding loop.
* ``llguidance``, ``xgrammar``, ``outlines-core``, ``llamacpp`` -- the peers of
  :mod:`structgen.bench.gen_engines` (the first three in structgen's own decoding loop
  :func:`~structgen.bench.gen_engines.run_common_loop`, same model object, greedy; llama.cpp in its
  own loop on the same GGUF, when ``llama_cpp`` is importable).  Their prompt is what their users
  send: the request, then ``Respond with a JSON object that follows this JSON Schema:`` and the
  schema as JSON.  ``<engine>@structgen-prompt`` runs a peer (or ``unconstrained``) on structgen's
  prompt instead, to compare the constraint alone; ``<engine>@peer-prompt`` the other way.

The prompt probe: before timing a case, ``generate_json`` is called on a recording copy of the
model whose forward pass refuses to run and with ``max_tokens=1``; it compiles (and caches) the
grammar and encodes the exact prompt text it would send, which the recorder keeps.  That is how
the baselines get structgen's prompt whatever ``generate_json`` puts in it.
"""
from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import math
import sys
import time
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

from .values_cases import SCHEMAS, Case, make_cases
from .values_scoring import count_invented, is_valid, parse_output, score_record  # noqa: F401 - re-exported

__all__ = ["DEFAULT_ENGINES", "EngineSpec", "parse_engine", "score_record", "count_invented", "peer_prompt",
           "run_values", "format_table", "format_kind_table", "summarize"]

DEFAULT_ENGINES = ("structgen", "unconstrained", "llguidance", "xgrammar", "llamacpp")
DEFAULT_OUT = "bench-out/values/results.json"
PEER_INSTRUCTION = "Respond with a JSON object that follows this JSON Schema:"
OUTPUT_CHARS_KEPT = 2000


# --------------------------------------------------------------------------- engines


@dataclasses.dataclass
class EngineSpec:
    """An engine of this benchmark: ``family`` ``structgen`` (``generate_json`` with ``options``),
    ``unconstrained`` or ``peer`` (``gen_class`` from :mod:`structgen.bench.gen_engines`);
    ``prompt``: ``"structgen"`` (what ``generate_json`` sends) or ``"peer"`` (:func:`peer_prompt`)."""

    name: str
    family: str
    prompt: str
    ground: bool = True
    options: dict = dataclasses.field(default_factory=dict)
    gen_name: str | None = None


def parse_engine(name: str) -> EngineSpec:
    """An :class:`EngineSpec` from its name (see the module docstring); ``ValueError`` if unknown."""
    base, _, suffix = name.strip().partition("@")
    prompt_override = None
    if suffix:
        if suffix not in ("structgen-prompt", "peer-prompt"):
            raise ValueError(f"{name!r}: the part after @ is structgen-prompt or peer-prompt")
        prompt_override = suffix.split("-")[0]
    if base == "structgen" or base.startswith("structgen-"):
        if suffix:
            raise ValueError(f"{name!r}: structgen sends its own prompt; use structgen-prompt=<mode> instead")
        spec = EngineSpec(name=name, family="structgen", prompt="structgen")
        rest = base[len("structgen"):]
        for tok in filter(None, rest.split("-")):
            if tok == "noground":
                spec.ground = False
            elif tok in ("awrs", "smc", "masked", "asap"):
                spec.options["sampler"] = tok
            elif tok.startswith("prompt="):
                spec.options["schema_prompt"] = tok[len("prompt="):]
            else:
                raise ValueError(f"{name!r}: unknown structgen option {tok!r} (noground, awrs, smc, prompt=MODE)")
        return spec
    if base in ("unconstrained", "none"):
        return EngineSpec(name=name, family="unconstrained", prompt=prompt_override or "structgen",
                          gen_name="unconstrained")
    from .gen_engines import get_gen_engine_class

    try:
        cls = get_gen_engine_class(base)
    except Exception as e:  # noqa: BLE001 - unknown name
        raise ValueError(f"unknown engine {name!r}: {e}") from None
    if cls.name.startswith("structgen") or not cls.constrained:
        raise ValueError(f"{name!r}: not an engine of this benchmark (structgen[-options], unconstrained, "
                         "llguidance, xgrammar, outlines-core, llamacpp)")
    return EngineSpec(name=name, family="peer", prompt=prompt_override or "peer", gen_name=cls.name)


def generate_json_params() -> set[str]:
    from ..api import generate_json

    return set(inspect.signature(generate_json).parameters)


def peer_prompt(model: Any, case: Case) -> str:
    """What a peer's user sends: the request, then the schema as JSON (one chat turn)."""
    return model.chat_prompt(f"{case.request}\n\n{PEER_INSTRUCTION}\n{json.dumps(case.schema)}")


class _ProbeStop(Exception):
    """Raised by the recording model's forward pass: the probe never runs the model."""


class _NoForward:
    def __init__(self, hf_model: Any) -> None:
        self._hf = hf_model

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise _ProbeStop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hf, name)


def _recording_model(model: Any, seen: list[str]) -> Any:
    """A shallow copy of ``model`` (same compiler cache, same tokenizer) whose ``encode`` records
    its texts and whose forward pass raises :class:`_ProbeStop`."""
    cls = type(model)

    def encode(self, text, *args, **kwargs):
        seen.append(text)
        return cls.encode(self, text, *args, **kwargs)

    rec = copy.copy(model)
    rec.__class__ = type(f"Recording{cls.__name__}", (cls,), {"encode": encode})
    try:
        rec.hf_model = _NoForward(model.hf_model)
    except Exception:  # noqa: BLE001 - a frozen model class: set it anyway
        object.__setattr__(rec, "hf_model", _NoForward(model.hf_model))
    return rec


def _assistant_tail(model: Any) -> str:
    marker = "\x00MARK\x00"
    text = model.chat_prompt(marker)
    return text.split(marker, 1)[1] if marker in text else ""


def structgen_kwargs(spec: EngineSpec, case: Case, params: set[str], max_tokens: int) -> dict:
    """The keywords ``generate_json`` gets for ``spec`` on ``case``."""
    kw: dict[str, Any] = {"max_tokens": max_tokens}
    if spec.ground and "source" in params:
        kw["source"] = case.text
    kw.update(spec.options)
    if spec.options.get("sampler"):
        kw["seed"] = zlib.crc32(case.id.encode())
    return kw


def probe_prompt(model: Any, case: Case, kwargs: dict) -> str | None:
    """The prompt text ``generate_json(model, case.schema, case.request, **kwargs)`` sends (the
    grammar compiled and cached on the way); None when it could not be captured."""
    from ..api import generate_json

    from ..compiler import compiler_for

    compiler_for(model)  # made on the model itself first, so the copy shares its cache
    seen: list[str] = []
    rec = _recording_model(model, seen)
    kw = {k: v for k, v in kwargs.items() if k not in ("sampler", "seed", "particles")}
    kw["max_tokens"] = 1
    try:
        generate_json(rec, case.schema, case.request, **kw)
    except _ProbeStop:
        pass
    except Exception:  # noqa: BLE001 - the budget guard refusing max_tokens=1 is the usual way out
        pass
    if not seen:
        return None
    tail = _assistant_tail(model)
    ending = [t for t in seen if tail and t.endswith(tail)]
    return (ending or seen)[-1]


# --------------------------------------------------------------------------- one case


def _short(e: BaseException, limit: int = 400) -> str:
    s = f"{type(e).__name__}: {e}"
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _record(case: Case, spec: EngineSpec, *, text: str, parsed: bool, value: Any, status: str, finish: str | None,
            error: str | None, wall_s: float | None, ttft_s: float | None, n_tokens: int | None,
            compile_s: float | None = None, prompt_tokens: int | None = None) -> dict:
    sc = score_record(value, case.expected, case.schema, parsed=parsed)
    valid, verr = is_valid(value, case.schema) if parsed else (False, "not JSON")
    return {
        "case": case.id, "kind": case.kind, "schema": case.schema_name, "engine": spec.name, "status": status,
        "finish": finish, "error": error, "json_ok": parsed, "valid": valid, "validation_error": verr,
        **sc, "wall_s": wall_s, "ttft_s": ttft_s, "compile_s": compile_s, "n_tokens": n_tokens,
        "prompt_tokens": prompt_tokens, "output": (text or "")[:OUTPUT_CHARS_KEPT],
    }


def run_structgen(model: Any, case: Case, spec: EngineSpec, params: set[str], max_tokens: int) -> dict:
    """``generate_json`` as a user calls it (after the prompt probe warmed its compile)."""
    from ..api import generate_json
    from ..errors import GenerationError

    kw = structgen_kwargs(spec, case, params, max_tokens)
    probe_prompt(model, case, kw)  # compiles (cached) outside the clock
    t0 = time.perf_counter()
    try:
        value, result = generate_json(model, case.schema, case.request, return_result=True, **kw)
    except GenerationError as e:
        wall = time.perf_counter() - t0
        partial = getattr(e, "partial", "") or ""
        return _record(case, spec, text=partial, parsed=False, value=None, status="gen_error",
                       finish=getattr(e, "reason", "error"), error=_short(e), wall_s=wall, ttft_s=None,
                       n_tokens=getattr(e, "num_tokens", None))
    wall = time.perf_counter() - t0
    decode = getattr(result, "decode_seconds", None)
    ttft = wall - decode if decode else None
    text = getattr(result, "text", None) or json.dumps(value)
    if hasattr(value, "model_dump"):  # pragma: no cover - a Pydantic schema is never passed here
        value = value.model_dump()
    return _record(case, spec, text=text, parsed=True, value=value, status="ok",
                   finish=getattr(result, "finish_reason", None), error=None, wall_s=wall, ttft_s=ttft,
                   n_tokens=getattr(result, "num_tokens", None), prompt_tokens=getattr(result, "prompt_tokens", None))


def run_gen_engine(model: Any, case: Case, spec: EngineSpec, eng: Any, prompt_text: str, max_tokens: int) -> dict:
    """A :mod:`~structgen.bench.gen_engines` engine (peer or unconstrained) on ``prompt_text``."""
    t0 = time.perf_counter()
    try:
        handle = eng.compile(case.schema)
    except Exception as e:  # noqa: BLE001 - a refusal or a crash: no output
        return _record(case, spec, text="", parsed=False, value=None, status="compile_error", finish=None,
                       error=_short(e), wall_s=None, ttft_s=None, n_tokens=0)
    compile_s = time.perf_counter() - t0
    ids = model.encode(prompt_text)
    try:
        out = eng.generate(model, prompt_text, ids, handle, max_tokens=max_tokens)
    except Exception as e:  # noqa: BLE001 - an engine failure at run time
        return _record(case, spec, text="", parsed=False, value=None, status="gen_error", finish="error",
                       error=_short(e), wall_s=time.perf_counter() - t0 - compile_s, ttft_s=None, n_tokens=None,
                       compile_s=compile_s)
    parsed, value = parse_output(out.text, extract=not eng.constrained)
    status = "gen_error" if out.finish == "error" else "ok"
    return _record(case, spec, text=out.text, parsed=parsed, value=value, status=status, finish=out.finish,
                   error=out.error, wall_s=out.t_end - out.t_start, ttft_s=out.t_first - out.t_start,
                   n_tokens=out.n_tokens, compile_s=compile_s, prompt_tokens=out.prompt_tokens)


# --------------------------------------------------------------------------- summaries and tables


def _mean(xs: Sequence[float | None]) -> float | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def summarize(name: str, records: Sequence[dict]) -> dict:
    """One row: pooled field accuracy, rates, counts, mean times."""
    n = len(records)
    correct = sum(r["fields_correct"] for r in records)
    total = sum(r["fields_total"] for r in records)
    return {
        "engine": name,
        "cases": n,
        "fields_correct": correct,
        "fields_total": total,
        "field_acc": correct / total if total else None,
        "exact_rate": sum(r["exact"] for r in records) / n if n else None,
        "valid_rate": sum(r["valid"] for r in records) / n if n else None,
        "json_rate": sum(r["json_ok"] for r in records) / n if n else None,
        "invented_keys": sum(r["invented"] for r in records),
        "spurious_values": sum(r["spurious"] for r in records),
        "errors": sum(r["status"] != "ok" for r in records),
        "unterminated": sum(r["finish"] in ("length", "max_tokens") for r in records),
        "mean_s": _mean([r["wall_s"] for r in records]),
        "mean_ttft_s": _mean([r["ttft_s"] for r in records]),
        "mean_tokens": _mean([r["n_tokens"] for r in records]),
        "mean_compile_s": _mean([r["compile_s"] for r in records]),
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _sec(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def format_table(summaries: Sequence[dict], unavailable: dict[str, str] | None = None) -> str:
    """One row per engine (``cut``: outputs stopped at ``max_tokens``; ``errors``: compile or
    generation errors), then the engines that could not run."""
    from .report import format_text_table

    head = ["engine", "cases", "field acc", "exact", "valid", "invented keys", "spurious", "cut", "errors",
            "s/case", "ttft s"]
    rows = [[s["engine"], str(s["cases"]), f"{_pct(s['field_acc'])} ({s['fields_correct']}/{s['fields_total']})",
             _pct(s["exact_rate"]), _pct(s["valid_rate"]), str(s["invented_keys"]), str(s["spurious_values"]),
             str(s["unterminated"]), str(s["errors"]), _sec(s["mean_s"]), _sec(s["mean_ttft_s"])]
            for s in summaries]
    out = format_text_table(head, rows)
    for name, why in (unavailable or {}).items():
        out += f"\n{name}: unavailable ({why})"
    return out


def format_kind_table(by_kind: Sequence[dict], engines: Sequence[str]) -> str:
    """Kinds by engines: field acc (exact cases / cases)."""
    from .report import format_text_table

    cell = {(r["kind"], r["engine"]): r for r in by_kind}
    kinds = sorted({r["kind"] for r in by_kind})
    rows = []
    for k in kinds:
        row = [k]
        for e in engines:
            r = cell.get((k, e))
            row.append("-" if r is None else
                       f"{_pct(r['field_acc'])} ({round(r['exact_rate'] * r['cases'])}/{r['cases']})")
        rows.append(row)
    return format_text_table(["kind: field acc (exact)"] + list(engines), rows)


# --------------------------------------------------------------------------- the runner


def _setup_gen(spec: EngineSpec, model: Any) -> Any:
    from .gen_engines import get_gen_engine_class

    cls = get_gen_engine_class(spec.gen_name)
    ok, why = cls.available()
    if not ok:
        raise RuntimeError(why)
    eng = cls()
    eng.setup(model)
    return eng


def run_values(*, model: Any = None, model_path: str | None = None, cases: int = 6, seed: int = 0,
               engines: Sequence[str] = DEFAULT_ENGINES, max_tokens: int = 256, out: str | Path | None = DEFAULT_OUT,
               progress: bool = True, command: str | None = None,
               log: Callable[[str], None] | None = None) -> dict:
    """Run the benchmark; returns the results (also written as JSON to ``out`` unless None):
    ``meta``, ``summaries``, ``by_kind``, ``unavailable``, ``table``, ``kind_table``, ``cases``,
    ``records``.  ``model``: a loaded model (else ``load_model(model_path)``)."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    specs = [parse_engine(e) for e in engines]
    if len({s.name for s in specs}) != len(specs):
        raise ValueError("an engine is named twice")
    t_start = time.perf_counter()
    if model is None:
        from ..models import load_model

        model = load_model(model_path)
    params = generate_json_params()
    all_cases = make_cases(cases, seed)

    unavailable: dict[str, str] = {}
    ready: dict[str, Any] = {}
    versions: dict[str, str] = {}
    notes: dict[str, str] = {}
    from .. import __version__ as sg_version

    for s in specs:
        if s.family == "structgen":
            missing = [k for k in s.options if k not in params]
            if missing:
                unavailable[s.name] = f"generate_json has no {', '.join(k + '=' for k in missing)} keyword"
                continue
            if not s.ground and "source" not in params:
                notes[s.name] = "generate_json has no source= keyword: the same as structgen"
            versions[s.name] = sg_version
            ready[s.name] = None
            continue
        try:
            ready[s.name] = _setup_gen(s, model)
            versions[s.name] = type(ready[s.name]).version()
        except Exception as e:  # noqa: BLE001 - reported, the engine is skipped
            unavailable[s.name] = _short(e, 200)
    active = [s for s in specs if s.name in ready]
    if not active:
        raise RuntimeError("no engine available: " + "; ".join(f"{k}: {v}" for k, v in unavailable.items()))

    default_sg = EngineSpec(name="structgen", family="structgen", prompt="structgen")
    records: list[dict] = []
    for i, case in enumerate(all_cases):
        sg_prompt = None
        for s in active:
            if s.family == "structgen":
                rec = run_structgen(model, case, s, params, max_tokens)
            else:
                if s.prompt == "structgen":
                    if sg_prompt is None:
                        sg_prompt = probe_prompt(model, case, structgen_kwargs(default_sg, case, params, max_tokens))
                        if sg_prompt is None:  # pragma: no cover - generate_json never encoded a prompt
                            from ..runtime.prompts import schema_prompt

                            sg_prompt = model.chat_prompt(schema_prompt(case.schema, case.request))
                    prompt_text = sg_prompt
                else:
                    prompt_text = peer_prompt(model, case)
                rec = run_gen_engine(model, case, s, ready[s.name], prompt_text, max_tokens)
            rec["prompt"] = s.prompt
            records.append(rec)
            if progress:
                log(f"[{i + 1}/{len(all_cases)}] {case.id:<24} {s.name:<22} fields {rec['fields_correct']}/"
                    f"{rec['fields_total']} {'exact' if rec['exact'] else '     '} "
                    f"{'valid' if rec['valid'] else 'INVALID'} {rec['status']}/{rec['finish']} "
                    f"{(rec['wall_s'] or 0):.1f}s")

    names = [s.name for s in active]
    by_engine: dict[str, list[dict]] = defaultdict(list)
    by_ek: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in records:
        by_engine[r["engine"]].append(r)
        by_ek[(r["kind"], r["engine"])].append(r)
    summaries = [summarize(n, by_engine[n]) for n in names]
    for s in summaries:
        spec = next(x for x in active if x.name == s["engine"])
        s["prompt"] = spec.prompt
        s["version"] = versions.get(s["engine"], "")
        if s["engine"] in notes:
            s["note"] = notes[s["engine"]]
    by_kind = [{"kind": k, **summarize(e, rs)} for (k, e), rs in sorted(by_ek.items())]
    table = format_table(summaries, unavailable)
    if notes:
        table += "".join(f"\n{k}: {v}" for k, v in notes.items())
    kind_table = format_kind_table(by_kind, names)
    meta = {
        "benchmark": "values", "seed": seed, "cases": cases, "max_tokens": max_tokens,
        "model": getattr(model, "name", str(model_path)), "quantized": getattr(model, "quantized", None),
        "engines": [s.name for s in specs], "versions": versions,
        "generate_json_keywords": {"source": "source" in params, "schema_prompt": "schema_prompt" in params},
        "peer_instruction": PEER_INSTRUCTION, "command": command, "wall_s": time.perf_counter() - t_start,
    }
    try:
        import torch

        meta["torch_threads"] = torch.get_num_threads()
    except Exception:  # noqa: BLE001 # pragma: no cover
        pass
    result = {
        "meta": meta, "summaries": summaries, "by_kind": by_kind, "unavailable": unavailable,
        "table": table, "kind_table": kind_table,
        "schemas": {c.schema_name: SCHEMAS[c.schema_name] for c in all_cases},
        "cases": [{k: v for k, v in c.to_dict().items() if k != "schema"} for c in all_cases],
        "records": records,
    }
    if out is not None:
        p = Path(out)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(result, indent=1, ensure_ascii=False, default=str), encoding="utf-8")
        result["out"] = str(p)
    return result


def run_values_cli(args: Any) -> int:
    """``structgen bench values`` (the parsed arguments of :mod:`structgen.cli`)."""
    import os
    import shlex

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    engines = [e for e in args.engines.split(",") if e.strip()]
    try:
        res = run_values(model_path=args.model, cases=args.cases, seed=args.seed, engines=engines,
                         max_tokens=args.max_tokens, out=args.out, progress=not args.no_progress,
                         command=" ".join(shlex.quote(a) for a in sys.argv))
    except (ValueError, RuntimeError) as e:
        print(f"structgen bench values: {e}", file=sys.stderr)
        return 2
    print(res["table"])
    print()
    print(res["kind_table"])
    if res.get("out"):
        print(f"\nresults: {res['out']}")
    return 0
