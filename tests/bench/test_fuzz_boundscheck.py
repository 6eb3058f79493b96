"""A fuzz slice with numba's bounds checking on: every kernel is recompiled (a fresh numba cache)
with ``NUMBA_BOUNDSCHECK=1``, so an out-of-range index in a kernel raises IndexError -- which the
fuzzer records as a foreign exception -- instead of reading whatever lies beside the array."""
import json
import os
import subprocess
import sys

import pytest

from structgen.bench.fuzz import FAILURES

SCRIPT = """
import json, sys
from structgen.bench.fuzz import run_fuzz
s = run_fuzz(n=int(sys.argv[1]), seed=11, output=sys.argv[2], progress=False, in_process=True)
print(json.dumps(s))
"""


@pytest.mark.minutes
def test_a_slice_with_bounds_checking(tmp_path):
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", SCRIPT, "40", str(tmp_path / "fuzz")], env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    results = [json.loads(line) for line in (tmp_path / "fuzz" / "results.jsonl").read_text().splitlines()]
    assert summary["failures"] == 0, [r for r in results if r["status"] in FAILURES]
    assert summary["counts"].get("ok", 0) > 10
