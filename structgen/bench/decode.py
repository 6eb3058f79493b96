"""``structgen bench decode``: SmolLM2 tokens/s for each decoding option, in one run.

Two tables.  **Forward pass**: the milliseconds of one forward over k new tokens (k = 1, 2, 4, 8) after
a 300-token context, with torch's ``F.linear`` and with ``fast_linear`` (``W @ x.T``), at each thread
count asked for: what a multi-token step costs, which decides how much drafting can pay.  **Decoding**:
greedy tokens/s of plain decoding (one token per forward pass), jump-forward (grammar-forced drafts
only) and full speculation (forced + prompt lookup), unconstrained and under constraints, every
configuration on the same prompt; outputs are compared with plain decoding's (they must be identical)
and the tokens accepted per forward pass and the forced fraction (output tokens that came from a kept
forced draft) are reported.  Medians over ``repeats``.  **Batches**: output tokens/s over a whole
``generate_json(prompts=[...])`` call for batch sizes 1, 4 and 16, plain and speculative.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Any

PROMPT = ("List three European capitals as JSON: an array of objects with name, country and population.")
SCHEMA = {"type": "array", "minItems": 3, "maxItems": 3, "items": {
    "type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
                                     "country": {"type": "string", "maxLength": 40},
                                     "population": {"type": "integer", "minimum": 0}},
    "required": ["name", "country", "population"], "additionalProperties": False}}
MODES = ("plain", "jump-forward", "speculative")


def forward_costs(model: Any, threads: list[int], ks=(1, 2, 4, 8), repeats: int = 7,
                  quantized: Any = None) -> list[dict]:
    """Median ms of one forward over k new tokens, per thread count and linear path (and on
    ``quantized``, the ``load_model(quantized=True)`` twin, when given)."""
    from ..runtime import fast_linear

    rows = []
    for fast in (False, True):
        with fast_linear.using(model.hf_model, fast):
            for th in threads:
                rows.append({"linear": "fast_linear" if fast else "F.linear", "threads": th,
                             **_forward_ms(model, th, ks, repeats)})
    for th in threads if quantized is not None else ():
        rows.append({"linear": "q4 (int4 kernel)", "threads": th, **_forward_ms(quantized, th, ks, repeats)})
    return rows


def _forward_ms(model: Any, threads: int, ks, repeats: int) -> dict[str, float]:
    import torch

    from ..runtime.kv_cache import KVCacheModel

    torch.set_num_threads(threads)
    kv = KVCacheModel(model.hf_model)
    kv.forward(list(range(1000, 1300)), logits_to_keep=1)
    row = {}
    for k in ks:
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            kv.forward(list(range(2000, 2000 + k)))
            ts.append(time.perf_counter() - t0)
            kv.crop(300)
        row[f"k={k}"] = 1e3 * statistics.median(ts)
    return row


def _constraints(model: Any) -> dict[str, Any]:
    from ..compiler import compiler_for

    comp = compiler_for(model)
    return {"unconstrained": None,
            "json.lark": comp.compile_lark("json"),
            "schema": comp.compile_json_schema(SCHEMA, whitespace="compact")}


def decode_speeds(model: Any, *, n_tokens: int, repeats: int, threads: int,
                  baseline: dict[str, float] | None = None) -> list[dict]:
    """Greedy tokens/s per (constraint, mode); outputs checked against plain decoding's.  ``baseline``:
    plain tokens/s per constraint that ``vs plain`` divides by (default: this run's plain rows)."""
    import torch

    from ..runtime.prompts import schema_prompt
    from ..engine.matcher import Matcher
    from ..errors import GenerationError
    from ..runtime.budget import BudgetGuard
    from ..runtime.drafts import Drafter
    from ..runtime.loop import generate_constrained, generate_unconstrained

    torch.set_num_threads(threads)
    prompt = model.encode(model.chat_prompt(schema_prompt(SCHEMA, PROMPT)))
    drafters = {"plain": False, "jump-forward": Drafter(model, lookup=False), "speculative": Drafter(model)}
    rows = []
    for cname, grammar in _constraints(model).items():
        reference = None
        for mode in MODES:
            if cname == "unconstrained" and mode == "jump-forward":
                continue  # nothing is forced without a grammar
            speeds, passes, outs, forced, err = [], [], [], [], None
            for _ in range(repeats):
                try:
                    if grammar is None:
                        r = generate_unconstrained(model, prompt, max_tokens=n_tokens, stop_at_eos=False,
                                                   speculative=drafters[mode])
                    else:
                        m = Matcher(grammar)
                        r = generate_constrained(model, prompt, m, max_tokens=n_tokens, budget_guard=BudgetGuard(m),
                                                 speculative=drafters[mode])
                except GenerationError as e:
                    err = str(e)[:80]
                    break
                speeds.append(r.num_tokens / max(r.decode_seconds, 1e-9))
                passes.append(r.num_tokens / max(r.forward_passes - 1, 1))  # the prefill pass left out
                spec = r.extra.get("speculation", {})
                forced.append(spec.get("accepted", {}).get("forced", 0) / max(r.num_tokens, 1))
                outs.append(r.token_ids)
            if err:
                rows.append({"constraint": cname, "mode": mode, "error": err})
                continue
            if mode == "plain":
                reference = outs[0]
            rows.append({"constraint": cname, "mode": mode, "weights": "q4" if getattr(model, "quantized", False)
                         else "fp32", "threads": threads, "tokens": len(outs[0]),
                         "tokens_per_s": statistics.median(speeds), "ms_per_token": 1e3 / statistics.median(speeds),
                         "tokens_per_forward": statistics.median(passes), "forced_fraction": statistics.median(forced),
                         "identical": all(o == reference for o in outs)})
    base = {r["constraint"]: r["tokens_per_s"] for r in rows if r.get("mode") == "plain" and "error" not in r}
    if baseline is not None:  # speed-ups against another run's plain rows (fp32 for the q4 twin)
        base = baseline
    for r in rows:
        if "error" not in r and r["constraint"] in base:
            r["speedup"] = r["tokens_per_s"] / base[r["constraint"]]
    return rows


BATCH_REQUESTS = ["a person from Lisbon", "a chemist born in 1867", "a footballer from Brazil", "a Roman emperor",
                  "a jazz pianist", "a Mars rover engineer", "a novelist from Lagos", "a chess champion",
                  "a cellist from Seoul", "a botanist", "a pilot from Quebec", "a marathon runner",
                  "a baker in Vienna", "an astronaut", "a poet from Chile", "a glacier scientist"]
BATCH_SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
                                                 "born": {"type": "integer", "minimum": 0, "maximum": 2100},
                                                 "city": {"type": "string", "maxLength": 40}},
                "required": ["name", "born", "city"], "additionalProperties": False}


def batch_throughput(model: Any, *, sizes=(1, 4, 16), max_tokens: int = 48, threads: int = 2) -> list[dict]:
    """Output tokens/s over a whole batch of ``generate_json(prompts=...)``, plain and speculative."""
    import torch

    from ..api import generate_json

    torch.set_num_threads(threads)
    rows = []
    for size in sizes:
        reqs = [f"Describe {r}." for r in (BATCH_REQUESTS * 2)[:size]]
        for spec in (False, True):
            t0 = time.perf_counter()
            out = generate_json(model, BATCH_SCHEMA, prompts=reqs, max_tokens=max_tokens, speculative=spec,
                                return_result=True, return_exceptions=True)
            secs = time.perf_counter() - t0
            ok = [r for r in out if isinstance(r, tuple)]
            tokens = sum(r[1].num_tokens for r in ok)
            rows.append({"batch": size, "mode": "speculative" if spec else "plain", "threads": threads,
                         "valid": len(ok), "tokens": tokens, "seconds": secs, "tokens_per_s": tokens / secs})
    return rows


def run_decode_bench(*, n_tokens: int = 128, repeats: int = 3, threads: list[int] | None = None,
                     fast: bool = True, batches: tuple[int, ...] = (1, 4, 16), quantized: bool = True) -> dict:
    """The tables, as dicts (see the module docstring).  ``quantized``: also the
    ``load_model(quantized=True)`` twin (int4 weights), when torch has the kernel."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ..models import load_model, quantized_copy
    from ..runtime import gguf_q4

    threads = threads or [1, 2]
    model = load_model(fast_linear=fast, quantized=False)  # the dense rows; the q4 twin is made below
    q4 = quantized_copy(model) if quantized and gguf_q4.available() else None
    out: dict[str, Any] = {"forward": forward_costs(model, threads, quantized=q4), "decode": []}
    for th in threads:
        rows = decode_speeds(model, n_tokens=n_tokens, repeats=repeats, threads=th)
        out["decode"] += rows
        if q4 is not None:
            plain = {r["constraint"]: r["tokens_per_s"] for r in rows if r.get("mode") == "plain" and "error" not in r}
            out["decode"] += decode_speeds(q4, n_tokens=n_tokens, repeats=repeats, threads=th, baseline=plain)
    out["batch"] = batch_throughput(model, sizes=batches, threads=max(threads)) if batches else []
    return out


def format_decode_tables(res: dict) -> str:
    ks = [k for k in res["forward"][0] if k.startswith("k=")]
    lines = ["Forward pass over k new tokens after 300 (ms, median):", "",
             "| linear | threads | " + " | ".join(ks) + " | k=4 / k=1 |", "|---|---:|" + "---:|" * (len(ks) + 1)]
    for r in res["forward"]:
        lines.append(f"| {r['linear']} | {r['threads']} | " + " | ".join(f"{r[k]:.1f}" for k in ks)
                     + f" | {r['k=4'] / r['k=1']:.2f} |")
    lines += ["", "Greedy decoding (tokens/s, median; identical = same tokens as plain decoding):", "",
              "| constraint | mode | weights | threads | tokens | tokens/s | ms/token | vs fp32 plain "
              "| tokens/forward | forced | identical |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in res["decode"]:
        if "error" in r:
            lines.append(f"| {r['constraint']} | {r['mode']} | | | | error: {r['error']} | | | | | |")
            continue
        lines.append(f"| {r['constraint']} | {r['mode']} | {r['weights']} | {r['threads']} | {r['tokens']} | {r['tokens_per_s']:.1f} "
                     f"| {r['ms_per_token']:.1f} | {r.get('speedup', 1.0):.2f}x | {r['tokens_per_forward']:.2f} "
                     f"| {100 * r['forced_fraction']:.0f}% | {'yes' if r['identical'] else 'NO'} |")
    if res.get("batch"):
        lines += ["", "Batches: generate_json(prompts=[...]), output tokens/s over the whole batch:", "",
                  "| batch | mode | threads | valid | output tokens | seconds | tokens/s |",
                  "|---:|---|---:|---:|---:|---:|---:|"]
        for r in res["batch"]:
            lines.append(f"| {r['batch']} | {r['mode']} | {r['threads']} | {r['valid']}/{r['batch']} | {r['tokens']} "
                         f"| {r['seconds']:.1f} | {r['tokens_per_s']:.1f} |")
    return "\n".join(lines)
