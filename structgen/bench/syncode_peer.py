"""SynCode as a peer in ``structgen bench grammar``, run in its own virtualenv.

SynCode (0.4.16) pins ``transformers==4.53.2``, older than structgen's, so it is installed in
``.venv-syncode`` (``make syncode-venv``: the pinned CPU torch first, then syncode) and driven
through :mod:`structgen.bench.syncode_worker`, a script that imports nothing of structgen. The
parent tokenizes the texts, so both engines step through the same token ids.

SynCode parses with its *own* grammars (``python``, ``json``, ...): its Python grammar is a
simplified Python 3 (no ``match``, no walrus, no ``rb''`` strings), so a text it refuses is
reported as refused, and ratios are given over the steps both engines masked. Its default
mode (``grammar_mask``) over-approximates: its masks may allow tokens no valid text continues with.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

WORKER = Path(__file__).with_name("syncode_worker.py")
DEFAULT_PYTHON = ".venv-syncode/bin/python"

# structgen's corpus or shipped grammar -> the SynCode grammar of the same language
SYNCODE_GRAMMARS = {"python": "python", "json": "json"}


def syncode_python(python: str | os.PathLike | None = None) -> Path | None:
    """The Python of SynCode's virtualenv: ``python``, ``$STRUCTGEN_SYNCODE_PYTHON`` or
    ``.venv-syncode/bin/python``; None when it does not exist."""
    path = Path(python or os.environ.get("STRUCTGEN_SYNCODE_PYTHON") or DEFAULT_PYTHON)
    return path if path.exists() else None


def default_cache() -> Path:
    """Where SynCode keeps its mask stores (minutes to build per grammar, tokenizer and mode)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "structgen" / "syncode"


def run_syncode(texts: list[list[int]], tokenizer_file: str | os.PathLike, *, grammar: str = "python",
                mode: str = "grammar_mask", python: str | os.PathLike | None = None,
                cache: str | os.PathLike | None = None, seconds_per_text: float | None = 30.0,
                timeout: float = 3 * 3600) -> dict:
    """Step SynCode through ``texts`` (token ids) and time each mask, each text for at most
    ``seconds_per_text`` (its steps grow with the prefix); ``{"skipped": why}`` when SynCode's
    virtualenv is missing or its worker fails."""
    exe = syncode_python(python)
    if exe is None:
        return {"skipped": f"SynCode's virtualenv not found ({python or DEFAULT_PYTHON}): make syncode-venv"}
    cache_dir = Path(cache) if cache else default_cache()
    cache_dir.mkdir(parents=True, exist_ok=True)
    request = {"tokenizer_file": str(tokenizer_file), "grammar": grammar, "mode": mode,
               "indent": grammar == "python", "texts": texts, "seconds_per_text": seconds_per_text,
               "cache": str(cache_dir) + os.sep}  # SynCode joins paths by string concatenation
    with tempfile.TemporaryDirectory() as tmp:
        request["output"] = os.path.join(tmp, "result.json")
        proc = subprocess.run([str(exe), str(WORKER)], input=json.dumps(request), capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return {"skipped": f"SynCode's worker failed: {tail[:200]}"}
        with open(request["output"]) as f:
            out = json.load(f)
    docs = out["docs"]
    return {"compile_ms": out["build_s"] * 1e3, "ttfm_ms": out["build_s"] * 1e3 + out["first_mask_ms"],
            "store_cached": out["store_cached"], "per_doc_us": [d["tbm_us"] for d in docs],
            "outcomes": [d["outcome"] for d in docs],
            "rejected_docs": sum(d["outcome"].startswith(("token", "parse")) for d in docs),
            "stopped_docs": sum(d["outcome"].startswith("stopped") for d in docs), "docs": len(docs),
            "peak_rss_mb": out["peak_rss_mb"], "mode": mode, "grammar": f"SynCode's {grammar}"}
