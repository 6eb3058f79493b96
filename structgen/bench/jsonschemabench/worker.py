"""The supervised worker's side: the model and every engine in one process, one call per (schema,
engine): compile, then generate and score."""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Sequence

from ..._cache import use_cold_regex_cache
from ..gen_engines import GenEngine, GenOutput, get_gen_engine_class
from .data import OUTPUT_CHARS_KEPT, WARMUP_SCHEMA, build_prompt
from .scoring import score_output


# --------------------------------------------------------------------------- the worker


def _short(e: BaseException, limit: int = 500) -> str:
    s = f"{type(e).__name__}: {e}"
    return s if len(s) <= limit else s[: limit - 3] + "..."


def make_jsb_handler(model: Any, engines: Sequence[str | type[GenEngine]], *, max_tokens: int,
                     max_prompt_tokens: int | None, warmup: bool = True,
                     format: str = "assert") -> tuple[Callable[[dict], dict], dict]:
    """Set every engine up on ``model``; returns ``(handler, info)``.

    ``handler(request)``: ``{"op": "compile", "engine", "id", "schema"}`` ->
    ``{"status": "ok"|"compile_error"|"compile_crash", "compile_s", "error"}``;
    ``{"op": "generate", "engine", "id", "schema"}`` -> the generation record
    (:func:`_generation_record`).  ``info``: versions, set-up times and
    ``setup_errors`` (engine -> message) for engines that could not be set up.  ``format``: how
    structgen's engines compile ``format`` and how every output is scored (peers keep their own).
    """
    ready: dict[str, GenEngine] = {}
    info: dict[str, Any] = {"model": getattr(model, "name", "?"), "setup_s": {}, "setup_errors": {}, "versions": {}}
    for e in engines:
        cls = get_gen_engine_class(e)
        t0 = time.perf_counter()
        try:
            eng = cls()
            eng.format = format
            eng.setup(model)
            if warmup:
                _warm_up(eng, model)
        except Exception as err:  # noqa: BLE001 - reported, the engine is skipped
            info["setup_errors"][cls.name] = _short(err, 300)
            continue
        ready[cls.name] = eng
        info["setup_s"][cls.name] = time.perf_counter() - t0
        info["versions"][cls.name] = cls.version()
    handles: dict[tuple[str, str], Any] = {}
    prompts: dict[str, tuple[str, list[int], bool]] = {}

    def prompt_for(case_id: str, schema: Any):
        p = prompts.get(case_id)
        if p is None:
            if len(prompts) > 16:
                prompts.clear()
            p = prompts[case_id] = build_prompt(model, schema, max_prompt_tokens)
        return p

    def handler(req: dict) -> dict:
        eng = ready[req["engine"]]
        key = (req["engine"], req["id"])
        if req["op"] == "compile":
            handles.pop(key, None)
            t0 = time.perf_counter()
            try:
                h = eng.compile(req["schema"])
            except MemoryError as err:
                return {"status": "compile_crash", "error": "out of memory " + _short(err)}
            except eng.compile_error_types as err:
                return {"status": "compile_error", "error": _short(err)}
            except Exception as err:  # noqa: BLE001 - an engine bug, not a refusal
                return {"status": "compile_crash", "error": _short(err)}
            dt = time.perf_counter() - t0
            handles[key] = h
            return {"status": "ok", "compile_s": dt, "error": None}
        if req["op"] == "generate":
            if key not in handles:  # a fresh worker after a restart: compile again (untimed)
                handles[key] = eng.compile(req["schema"])
            h = handles.pop(key)
            text, ids, truncated = prompt_for(req["id"], req["schema"])
            try:
                out = eng.generate(model, text, ids, h, max_tokens=max_tokens)
            except MemoryError as err:
                return {"status": "crash", "error": "out of memory " + _short(err)}
            rec = _generation_record(out, req["schema"], extract=not eng.constrained, format=format)
            rec["prompt_truncated"] = truncated
            return rec
        raise ValueError(f"unknown op {req['op']!r}")

    return handler, info


def _warm_up(eng: GenEngine, model: Any) -> None:
    """Compile a small schema and generate a few tokens: one-time costs (JIT, lazy tables,
    first forward pass) land in the set-up instead of the first schema."""
    h = eng.compile(WARMUP_SCHEMA)
    ids = model.encode(model.chat_prompt("Say hi."))
    eng.generate(model, model.chat_prompt("Say hi."), ids, h, max_tokens=8)


def _generation_record(out: GenOutput, schema: Any, *, extract: bool, format: str = "assert") -> dict:
    """Score one generation and turn its timings into the record's fields."""
    sc = score_output(out.text, schema, extract=extract, format=format)
    if out.finish == "error":
        status = "gen_error"
    else:
        status = "valid" if sc["valid"] else "invalid"
    tpot = (out.t_end - out.t_first) / (out.n_tokens - 1) if out.n_tokens >= 2 else None
    return {
        "status": status,
        "finish": out.finish,
        "unterminated": out.finish == "length",
        "error": out.error,
        **sc,
        "gen_ttft_s": out.t_first - out.t_start,
        "tpot_s": tpot,
        "gen_s": out.t_end - out.t_start,
        "prefill_s": out.prefill_s,
        "mask_s": out.mask_s,
        "n_tokens": out.n_tokens,
        "forward_passes": out.forward_passes,
        "forced_tokens": out.forced_tokens,
        "prompt_tokens": out.prompt_tokens,
        "output": out.text[:OUTPUT_CHARS_KEPT],
    }


def make_jsb_worker(model_spec: str | None, engines: Sequence[str | type[GenEngine]], max_tokens: int,
                    max_prompt_tokens: int | None, warmup: bool = True, fresh_regex_cache: bool = True,
                    format: str = "assert"):
    """Worker factory (runs in the child): one torch thread, load the model, set the engines up."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if fresh_regex_cache:
        use_cold_regex_cache()
    try:  # transformers' loading bars would create a multiprocessing lock a killed worker leaks
        import threading

        from tqdm import tqdm

        tqdm.set_lock(threading.RLock())
    except ImportError:  # pragma: no cover
        pass
    t0 = time.perf_counter()
    import torch

    torch.set_num_threads(1)
    from ...models import load_model

    model = load_model(model_spec, quantized=False)  # the dense weights: the q4 engine makes its own twin
    t1 = time.perf_counter()
    handler, info = make_jsb_handler(model, engines, max_tokens=max_tokens, max_prompt_tokens=max_prompt_tokens,
                                     warmup=warmup, format=format)
    info["model_load_s"] = t1 - t0
    info["torch_threads"] = torch.get_num_threads()
    info["torch"] = torch.__version__
    return handler, info
