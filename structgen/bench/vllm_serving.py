"""``structgen bench vllm``: the same JSON Schema requests through vLLM's OpenAI-compatible server
with each structured-output backend, one backend after the other, in one run.

For each backend a server is started (from vLLM's own virtualenv, ``make test-vllm`` makes it)
on 127.0.0.1 with ``--structured-outputs-config.backend NAME``; a JSONSchemaBench sample is sent
as chat requests with ``response_format: json_schema``, ``--concurrency`` at a time, streamed, so
time to first token is measured.  Per backend: requests served (a refusal is HTTP 400), valid
outputs (``jsonschema`` with format assertion), request throughput, output tokens/s, TTFT; and
over the schemas *every* backend served, each request's decode speed, so backends are compared on
the same work.  The server runs the model; this process only sends requests and scores them.

``cases="checks"`` sends MaskBench schemas whose structgen grammar has checks at value boundaries
(``uniqueItems``, ``oneOf``, ``dependentSchemas`` ... the ones where a dead end can end a request),
each ``samples`` times, at ``temperature`` (1.0 there: the model's own choices, not one greedy path;
no per-request seed, which vLLM's CPU build cannot serve): "failed in engine" counts the requests a
backend ended with an error.
"""
from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from .jsonschemabench import load_jsonschemabench, sample_cases, score_output

__all__ = ["run_vllm_bench", "summarize", "totals", "BACKENDS"]

BACKENDS = ("structgen", "xgrammar", "guidance")
PROMPT = "Write one JSON value that follows this JSON Schema. Output only the JSON.\n{schema}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """vLLM's OpenAI-compatible server in a subprocess, with one structured-output backend."""

    def __init__(self, python: str, model: str, backend: str, log: Path, max_model_len: int = 4096):
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", "127.0.0.1",
               "--port", str(self.port), "--dtype", "float32", "--enforce-eager", "--served-model-name", "m",
               "--max-model-len", str(max_model_len), "--structured-outputs-config.backend", backend]
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2"), HF_HUB_OFFLINE="1")
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)

    def wait_ready(self, timeout: float = 300) -> float:
        t0 = time.time()
        while True:
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=5) as r:
                    if r.status == 200:
                        return time.time() - t0
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() - t0 > timeout:
                raise RuntimeError(f"vLLM server did not start; its log ({self.log}):\n" + self.log.read_text()[-3000:])
            time.sleep(0.5)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _stream_request(base: str, schema: Any, max_tokens: int, temperature: float = 0.0) -> dict:
    """One streamed chat request: status, text, output tokens, TTFT and latency (s)."""
    body = {"model": "m", "max_tokens": max_tokens, "temperature": temperature, "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": PROMPT.format(schema=json.dumps(schema)[:3000])}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}}
    req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    ttft, parts, tokens, finish, rid = None, [], 0, None, None
    try:
        with urllib.request.urlopen(req, timeout=900) as r:
            for line in r:
                line = line.strip()
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                rid = rid or chunk.get("id")
                if isinstance(chunk.get("error"), dict):  # a streamed request refused after its headers
                    err = chunk["error"]
                    return {"status": int(err.get("code") or 500), "error": str(err.get("message"))[:300],
                            "request_id": rid}
                for c in chunk.get("choices") or []:
                    piece = (c.get("delta") or {}).get("content")
                    if piece:
                        ttft = ttft if ttft is not None else time.perf_counter() - t0
                        parts.append(piece)
                    finish = c.get("finish_reason") or finish
                if chunk.get("usage"):
                    tokens = chunk["usage"].get("completion_tokens", tokens)
    except urllib.error.HTTPError as e:
        return {"status": e.code, "error": e.read().decode("utf-8", "replace")[:300]}
    except OSError as e:
        return {"status": 0, "error": f"{type(e).__name__}: {e}"[:300]}
    return {"status": 200, "text": "".join(parts), "tokens": tokens, "ttft_s": ttft,
            "latency_s": time.perf_counter() - t0, "finish": finish, "request_id": rid}


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def check_cases(n: int, samples: int, seed: int = 0, max_schema_chars: int = 3000) -> list[dict]:
    """``n`` MaskBench dev schemas (shuffled by ``seed``) that name a keyword structgen checks at value
    boundaries and whose grammar has such checks, each ``samples`` times (cases ``{"id", "dataset",
    "schema", "seed"}``, ``seed`` numbering the repeats)."""
    import itertools
    import random

    from ..compiler import GrammarCompiler
    from ..tokenizer import load_tokenizer_info
    from .dead_ends import check_heavy_rows, grammar_with_checks

    comp = GrammarCompiler(load_tokenizer_info("smollm2"), cache_size=4, compile_timeout=20)
    picked = list(itertools.islice((r for r in check_heavy_rows(random.Random(seed), max_schema_chars)
                                    if grammar_with_checks(comp, r["schema"]) is not None), n))
    return [{"id": f"{r['id']}#{k}", "dataset": "maskbench-checks", "schema": r["schema"], "seed": k}
            for k in range(samples) for r in picked]


def cases_like(previous: Path) -> list[dict]:
    """The requests of an earlier ``--cases checks`` run (its ``vllm.json``), in its order: the same
    schemas and repeats, so a change is measured on the very requests it was measured on before."""
    from .fuzz_cases import load_maskbench_rows
    from .maskbench import default_data_path

    ids = json.loads(Path(previous).read_text())["ids"]
    rows = {r["id"]: r for r in load_maskbench_rows(default_data_path())}
    out = []
    for i in ids:
        sid, _, k = i.rpartition("#")
        if sid not in rows:
            raise ValueError(f"{previous}: {sid!r} is not a MaskBench dev schema")
        out.append({"id": i, "dataset": "maskbench-checks", "schema": rows[sid]["schema"], "seed": int(k)})
    return out


def run_backend(python: str, model: str, backend: str, cases: list[dict], *, concurrency: int, max_tokens: int,
                out_dir: Path, echo: Callable[[str], None] = print, temperature: float = 0.0) -> dict:
    """Start a server with ``backend``, send every case, score, stop.  Returns the backend's
    records and totals."""
    server = Server(python, model, backend, out_dir / f"server-{backend}.log")
    try:
        start_s = server.wait_ready()
        echo(f"{backend}: server ready in {start_s:.0f} s")
        _stream_request(server.base, {"type": "object"}, 8)  # a warm-up request (compiles kernels)
        records: list[dict] = [{} for _ in cases]
        done = [0]
        lock = threading.Lock()
        # each request as it completes (the server log names failures by request id; a run stopped
        # early still says which schemas they were)
        progress = out_dir / f"requests-{backend}.jsonl"
        progress.write_text("")

        def one(i: int) -> None:
            # no per-request seed: vLLM's CPU build fails a batch whose request carries one ("CPU Generator
            # does not use offset"); at temperature 1 the repeats differ anyway
            res = _stream_request(server.base, cases[i]["schema"], max_tokens, temperature)
            if res["status"] == 200:
                res.update(score_output(res["text"], cases[i]["schema"]))
            res["id"] = cases[i]["id"]
            records[i] = res
            with lock:
                with progress.open("a") as f:
                    f.write(json.dumps({k: v for k, v in res.items() if k != "text"} | {"tail": res.get("text", "")[-80:]})
                            + "\n")
                done[0] += 1
                if done[0] % 16 == 0 or done[0] == len(cases):
                    echo(f"{backend}: {done[0]}/{len(cases)} requests")

        t0 = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(one, range(len(cases))))
        wall = time.perf_counter() - t0
    finally:
        server.stop()
    return {"backend": backend, "server_start_s": start_s, "wall_s": wall, "records": records,
            **totals(records, wall)}


def totals(records: list[dict], wall: float) -> dict:
    """A backend's counts and speeds over its records.  A request answered 200 whose stream ended
    without a finish reason failed inside the engine (vLLM ends a request when its backend refuses
    a sampled token): an error, like a 5xx."""
    served = [r for r in records if r.get("status") == 200 and r.get("finish") is not None]
    ttfts = [r["ttft_s"] for r in served if r.get("ttft_s") is not None]
    return {"n": len(records), "served": len(served),
            "refused": sum(1 for r in records if r.get("status") == 400),
            "errors": len(records) - len(served) - sum(1 for r in records if r.get("status") == 400),
            "valid": sum(1 for r in served if r.get("valid")),
            "finished": sum(1 for r in served if r.get("finish") == "stop"),
            "finished_valid": sum(1 for r in served if r.get("finish") == "stop" and r.get("valid")),
            "req_per_s": len(served) / wall if wall else None,
            "out_tok_per_s": sum(r.get("tokens", 0) for r in served) / wall if wall else None,
            "ttft_p50_s": _pct(ttfts, 0.5), "ttft_p90_s": _pct(ttfts, 0.9)}


def _decode_speed(r: dict) -> float | None:
    """A served request's output tokens per second after its first token."""
    if not r.get("tokens") or r.get("ttft_s") is None or r["latency_s"] <= r["ttft_s"]:
        return None
    return (r["tokens"] - 1) / (r["latency_s"] - r["ttft_s"])


def run_vllm_bench(*, python: str, model: str, backends: list[str], per_dataset: int, seed: int, concurrency: int,
                   max_tokens: int, out_dir: Path, data: str | None = None,
                   echo: Callable[[str], None] = print, cases: str = "jsonschemabench", schemas: int = 50,
                   samples: int = 4, temperature: float = 0.0, same_as: Path | None = None) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    if cases == "checks":
        todo = cases_like(same_as) if same_as is not None else check_cases(schemas, samples, seed)
        echo(f"{len(todo)} requests: {len(todo) // max(samples, 1)} check-heavy MaskBench schemas x {samples} seeds, "
             f"temperature {temperature}, {concurrency} concurrent, max_tokens {max_tokens}, backends {', '.join(backends)}")
    else:
        todo = sample_cases(load_jsonschemabench(data), per_dataset, seed)
        echo(f"{len(todo)} JSONSchemaBench schemas ({per_dataset} per dataset, seed {seed}), "
             f"{concurrency} concurrent requests, max_tokens {max_tokens}, backends {', '.join(backends)}")
    results = [run_backend(python, model, b, todo, concurrency=concurrency, max_tokens=max_tokens,
                           out_dir=out_dir, echo=echo, temperature=temperature) for b in backends]
    return summarize(results, todo, per_dataset=per_dataset, seed=seed, concurrency=concurrency,
                     max_tokens=max_tokens, model=model, out_dir=out_dir, echo=echo, cases_from=cases,
                     temperature=temperature)


def summarize(results: list[dict], cases: list[dict], *, out_dir: Path, echo: Callable[[str], None] = print,
              **settings) -> dict:
    """Common-schema figures, ``vllm.json`` and ``summary.md`` from every backend's results."""
    common = [i for i in range(len(cases))
              if all(res["records"][i].get("status") == 200 and res["records"][i].get("finish") is not None
                     for res in results)]
    for res in results:
        speeds = [s for i in common if (s := _decode_speed(res["records"][i])) is not None]
        res["common"] = len(common)
        res["common_valid"] = sum(1 for i in common if res["records"][i].get("valid"))
        res["common_decode_tok_s_p50"] = statistics.median(speeds) if speeds else None
        res["common_latency_s_p50"] = _pct([res["records"][i]["latency_s"] for i in common], 0.5)
    summary = {"cases": len(cases), **settings,
               "backends": [{k: v for k, v in r.items() if k != "records"} for r in results]}
    (out_dir / "vllm.json").write_text(json.dumps({**summary, "ids": [c["id"] for c in cases],
                                                   "records": {r["backend"]: r["records"] for r in results}},
                                                  indent=1, default=str))
    (out_dir / "summary.md").write_text(report(summary))
    echo(report(summary))
    return summary


def _f(v: Any, nd: int = 2) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def report(summary: dict) -> str:
    rows = summary["backends"]
    what = ("check-heavy MaskBench requests" if summary.get("cases_from") == "checks" else "JSONSchemaBench schemas")
    how = f"temperature {summary['temperature']}" if summary.get("temperature") else "greedy"
    lines = [f"vLLM serving: {summary['cases']} {what}, {summary['concurrency']} concurrent, "
             f"max_tokens {summary['max_tokens']}, {how}", "",
             "| backend | served | refused | failed in engine | valid % (all) | finished | valid of finished | req/s | out tok/s "
             "| TTFT p50 / p90 (s) | common: valid | decode tok/s p50 | latency p50 (s) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['backend']} | {r['served']}/{r['n']} | {r['refused']} | {r['errors']} | "
                     f"{100 * r['valid'] / r['n']:.1f} | {r['finished']} | {r['finished_valid']}/{r['finished']} | "
                     f"{_f(r['req_per_s'], 3)} | {_f(r['out_tok_per_s'], 1)} | "
                     f"{_f(r['ttft_p50_s'])} / {_f(r['ttft_p90_s'])} | {r['common_valid']}/{r['common']} | "
                     f"{_f(r['common_decode_tok_s_p50'], 1)} | {_f(r['common_latency_s_p50'])} |")
    base = next((r for r in rows if r["backend"] == "structgen"), None)
    if base is not None:
        lines += ["", "Ratios (structgen / peer, same run; on the schemas every backend served):", ""]
        for r in rows:
            if r is base or not r["common_decode_tok_s_p50"] or not base["common_decode_tok_s_p50"]:
                continue
            lines.append(f"- / {r['backend']}: decode tok/s {base['common_decode_tok_s_p50'] / r['common_decode_tok_s_p50']:.2f}x, "
                         f"req/s (all served) {base['req_per_s'] / r['req_per_s']:.2f}x, "
                         f"valid outputs {base['valid']} vs {r['valid']}")
    return "\n".join(lines) + "\n"
