"""``structgen bench startup``: how long a user waits for the first output, in a new environment (cold)
and in every later process (warm).

Each figure is a child process that imports structgen, calls ``load_model()`` and then ``generate_json``
on a small schema, timing the three (and counting numba compiles).  *Cold*: empty structgen and numba
caches, as a new virtualenv has (the GGUF is converted, tries and automata built, kernels loaded or
compiled); *warm*: the same caches again.  Beside them, in the same run: the cold start with the
kernels compiled on this machine (``STRUCTGEN_SHIPPED_KERNELS=0``: what every fresh install paid before
the shipped kernels), and transformers alone loading the same converted model (import, ``from_pretrained``,
tokenizer): the floor structgen's warm load stands on.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

__all__ = ["run_startup", "format_startup_table"]

_STRUCTGEN_CHILD = r"""
import json, time
t0 = time.perf_counter()
from structgen.automata.kernel_cache import count_compiles
compiles = count_compiles()
import structgen
from structgen import generate_json, load_model
t1 = time.perf_counter()
model = load_model()
t2 = time.perf_counter()
schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
          "age": {"type": "integer", "minimum": 0}}, "required": ["name", "age"]}
value = generate_json(model, schema, "Invent a person.", max_tokens=40)
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load_model": t2 - t1, "first_output": t3 - t2, "total": t3 - t0,
                  "compiles": len(compiles), "value": value}))
"""

_TRANSFORMERS_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
t1 = time.perf_counter()
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
tok = AutoTokenizer.from_pretrained(sys.argv[1])
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load_model": t2 - t1, "first_output": None, "total": t2 - t0,
                  "compiles": None, "value": None}))
"""


def _child(script: str, env: dict[str, str], args: tuple[str, ...] = (), timeout: float = 900) -> dict:
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                         timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"startup child failed (exit {out.returncode}): {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _env(cache: Path, numba_cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STRUCTGEN_SHIPPED_KERNELS", "NUMBA_BOUNDSCHECK")}
    env.update(STRUCTGEN_CACHE=str(cache), NUMBA_CACHE_DIR=str(numba_cache), HF_HUB_OFFLINE="1", **extra)
    return env


def run_startup(*, warm_repeats: int = 3, baseline: bool = True,
                echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Cold once (and, with ``baseline``, cold with the kernels compiled here), then ``warm_repeats`` warm
    processes of structgen and of transformers alone; medians of the warm runs."""
    rows: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="structgen-startup-") as tmp:
        root = Path(tmp)
        if baseline:
            echo("cold, kernels compiled on this machine (STRUCTGEN_SHIPPED_KERNELS=0) ...")
            rows["cold, kernels compiled here (before)"] = [_child(_STRUCTGEN_CHILD, _env(
                root / "b-cache", root / "b-numba", STRUCTGEN_SHIPPED_KERNELS="0"))]
            shutil.rmtree(root / "b-cache", ignore_errors=True)
            shutil.rmtree(root / "b-numba", ignore_errors=True)
        echo("cold: empty caches, as in a new virtualenv ...")
        env = _env(root / "cache", root / "numba")
        rows["cold (new environment)"] = [_child(_STRUCTGEN_CHILD, env)]
        echo(f"warm: {warm_repeats} more processes ...")
        rows["warm (every later process)"] = [_child(_STRUCTGEN_CHILD, env) for _ in range(warm_repeats)]
        folder = next((root / "cache" / "models").glob("*-float32"))
        rows["transformers alone, warm (same model)"] = [
            _child(_TRANSFORMERS_CHILD, env, (str(folder),)) for _ in range(warm_repeats)]
    table = []
    for name, runs in rows.items():
        med = {k: (statistics.median(r[k] for r in runs) if runs[0][k] is not None else None)
               for k in ("import", "load_model", "first_output", "total", "compiles")}
        table.append({"run": name, "processes": len(runs), **med, "value": runs[0]["value"]})
    return {"rows": table}


def format_startup_table(result: dict) -> str:
    def f(v, fmt="{:.1f}"):
        return "-" if v is None else fmt.format(v)

    lines = ["| run | processes | import s | load_model s | first output s | total s | numba compiles |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        lines.append(f"| {r['run']} | {r['processes']} | {f(r['import'])} | {f(r['load_model'])} | "
                     f"{f(r['first_output'])} | {f(r['total'])} | {f(r['compiles'], '{:.0f}')} |")
    return "\n".join(lines)
