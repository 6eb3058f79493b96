"""Every numba kernel stays inside its arrays (run with numba's bounds checking on).

Kernels are compiled without bounds checks for speed, so an out-of-range
write would corrupt memory silently; this runs a workload touching each of
them in a subprocess with NUMBA_BOUNDSCHECK=1 (an IndexError fails it)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import random
    from structgen.tokenizer import load_tokenizer_info
    from structgen.compiler import GrammarCompiler
    from structgen.engine.matcher import Matcher
    comp = GrammarCompiler(load_tokenizer_info("smollm2"))
    schemas = [
        {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(300)}},
        {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 500}},
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "^[a-z]+$"}},
         "additionalProperties": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "number"}]}},
        {"type": "string", "format": "date-time"},
    ]
    rng = random.Random(0)
    for s in schemas:
        g = comp.compile_json_schema(s)
        for _ in range(3):
            m = Matcher(g)
            for _ in range(25):
                words = m.next_token_mask()
                allowed = [t for t in range(g.vocab_size) if words[t >> 5] >> (t & 31) & 1 and t not in g.eos_ids]
                if not allowed:
                    break
                m.accept_token(rng.choice(allowed))
    g = comp.compile_regex(r"(\\d{3}-){2}[a-z]{1,40}")
    Matcher(g).next_token_mask()
    g.lexers.lexers[0].core.dfas[0].depth_classes(129)
    print("ok")
""")


@pytest.mark.minutes
def test_kernels_stay_in_bounds(tmp_path):
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "numba"), HF_HUB_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
