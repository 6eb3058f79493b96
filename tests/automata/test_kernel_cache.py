"""The numba kernels shipped for x86-64-v3 (structgen/_kernels, built by ``structgen kernels build``:
``make setup`` and the wheel's build): a fresh process loads them instead of compiling, bounds-checked
builds and the off switch never do, and they are what the build says they are."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from structgen.automata import kernel_cache
from structgen.automata.kernel_cache import BASELINE_CPU, SHIPPED, shipped_files

_CHILD = r"""
import json, sys
from structgen.automata.kernel_cache import count_compiles, shipped_kernels_usable
compiled = count_compiles()
from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.tokenizer import load_tokenizer_info
comp = GrammarCompiler(load_tokenizer_info("smollm2"))
g = comp.compile_json_schema({"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                              "age": {"type": "integer", "minimum": 0}}, "required": ["name", "age"]},
                             whitespace="spaced", members="named", plain_integers=True)
m = Matcher(g)
ok = m.accept_string('{"name": "Ada", "age": 36}') and m.is_accepting()
print(json.dumps({"usable": shipped_kernels_usable(), "compiled": compiled, "ok": ok}))
"""


#: one small kernel, called with the signature the trie gives it (shipped)
_SMALL_CHILD = r"""
import json
import numpy as np
from structgen.automata.kernel_cache import count_compiles, shipped_kernels_usable
compiled = count_compiles()
from structgen.engine.trie import _subtree_ends
ok = list(_subtree_ends(np.array([0, 1, 2, 1], dtype=np.int32))) == [4, 3, 3, 4]
print(json.dumps({"usable": shipped_kernels_usable(), "compiled": compiled, "ok": ok}))
"""


def _child(tmp_path, script: str = _CHILD, **env) -> dict:
    """Run ``script`` as a new install would: empty numba and structgen caches (the converted model shared)."""
    from structgen._cache import cache_root

    cache = tmp_path / "structgen"
    cache.mkdir(exist_ok=True)
    if (cache_root() / "models").is_dir() and not (cache / "models").exists():
        (cache / "models").symlink_to(cache_root() / "models", target_is_directory=True)
    full = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "STRUCTGEN_CACHE": str(cache),
            "HF_HUB_OFFLINE": "1", **env}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=full, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


needs_shipped = pytest.mark.skipif(not shipped_files(), reason="no shipped kernels: run `structgen kernels build`")


@needs_shipped
def test_a_fresh_process_compiles_nothing_before_its_first_masks(tmp_path):
    """An empty numba cache (a new virtualenv): the compiler's warm-ups, a schema and its masks run on the
    shipped kernels (before them, ~40 s of compiling)."""
    if not kernel_cache.shipped_kernels_usable():
        pytest.skip("this CPU lacks an x86-64-v3 feature, or numba differs from the build's")
    r = _child(tmp_path)
    assert r["usable"] and r["ok"]
    assert r["compiled"] == []


@needs_shipped
@pytest.mark.parametrize("env", [{"NUMBA_BOUNDSCHECK": "1"}, {"STRUCTGEN_SHIPPED_KERNELS": "0"}])
def test_bounds_checked_builds_and_the_switch_never_load_them(tmp_path, env):
    """A bounds-checked build must run code compiled with the checks (the shipped code has none)."""
    assert _child(tmp_path, _SMALL_CHILD)["compiled"] == [] or not kernel_cache.shipped_kernels_usable()
    r = _child(tmp_path, _SMALL_CHILD, **env)
    assert not r["usable"] and r["ok"]
    assert r["compiled"]  # compiled here, as before the shipped kernels


@needs_shipped
def test_the_shipped_kernels_are_built_for_the_baseline_and_this_numba():
    import numba

    meta = json.loads((SHIPPED / "target.json").read_text())
    assert meta["cpu"] == BASELINE_CPU and meta["features"] == "" and meta["numba"] == numba.__version__
    # one index per kernel module the build reached, each with its code files beside it
    modules = {p.parent.relative_to(SHIPPED).as_posix() for p in shipped_files()}
    assert {"automata/subset_kernels", "engine/lexer_kernels", "engine/trie"} <= modules


def test_a_cpu_without_every_v3_feature_does_not_use_them(monkeypatch, tmp_path):
    import llvmlite.binding as ll
    import numba

    folder = tmp_path / "_kernels"
    folder.mkdir()
    (folder / "target.json").write_text(json.dumps({"triple": ll.get_process_triple(), "cpu": BASELINE_CPU,
                                                    "features": "", "numba": numba.__version__,
                                                    "python": list(sys.version_info[:2])}))
    monkeypatch.setattr(kernel_cache, "SHIPPED", folder)
    monkeypatch.delenv("STRUCTGEN_SHIPPED_KERNELS", raising=False)
    have = dict(ll.get_host_cpu_features())
    kernel_cache._shipped_target.cache_clear()
    try:
        monkeypatch.setattr(ll, "get_host_cpu_features", lambda: {**have, **{f: True for f in kernel_cache._V3_FEATURES}})
        assert kernel_cache._shipped_target() == (ll.get_process_triple(), BASELINE_CPU, "")
        kernel_cache._shipped_target.cache_clear()
        monkeypatch.setattr(ll, "get_host_cpu_features", lambda: {**have, "avx2": False})
        assert kernel_cache._shipped_target() is None
        kernel_cache._shipped_target.cache_clear()
        monkeypatch.setattr(ll, "get_host_cpu_features", lambda: {**have, **{f: True for f in kernel_cache._V3_FEATURES}})
        (folder / "target.json").write_text(json.dumps({"triple": ll.get_process_triple(), "cpu": BASELINE_CPU,
                                                        "features": "", "numba": "0.0.1",
                                                        "python": list(sys.version_info[:2])}))
        assert kernel_cache._shipped_target() is None  # another numba: its cache format may differ
    finally:
        kernel_cache._shipped_target.cache_clear()
