"""``structgen bench batch-masks``: filling a batch's bitmask rows with 1..N threads.

A batch of matchers over different MaskBench schemas, each walked to a random reachable state,
is filled with :func:`structgen.engine.batch_masks.fill_next_token_bitmasks`: *cold* (the mask
caches emptied first, so rows are trie walks in ``nogil`` numba kernels) and *warm* (every row a
cache hit).  Rows are checked equal across thread counts.
"""
from __future__ import annotations

import random
import statistics
import time
from typing import Callable

import numpy as np

__all__ = ["run_batch_masks_bench"]


def _batch(compiler, records, rows: int, seed: int):
    from ..engine.matcher import Matcher
    from ..errors import StructgenError
    from .fuzz import mask_ids

    rng = random.Random(seed)
    grammars = []
    for r in records:
        try:
            grammars.append(compiler.compile_json_schema(r["schema"], property_order="any"))
        except StructgenError:
            continue
        if len(grammars) == rows:
            break
    matchers = []
    for g in grammars:
        m = Matcher(g)
        for _ in range(rng.randrange(2, 24)):
            ids = [t for t in mask_ids(m, g.vocab_size).tolist() if t not in g.eos_ids]
            if not ids or not m.accept_token(rng.choice(ids)):
                break
        matchers.append(m)
    return matchers


def _clear_caches() -> None:
    from ..engine import exact_masks, walks
    from ..engine.compiled import MASKS

    MASKS.discard_where(lambda k: True)
    exact_masks.CANDIDATES.discard_where(lambda k: True)
    walks.clear_caches()


def run_batch_masks_bench(*, rows: int = 64, threads: list[int] | None = None, repeats: int = 5, seed: int = 0,
                          echo: Callable[[str], None] = print) -> dict:
    from ..compiler import GrammarCompiler
    from ..engine.batch_masks import fill_next_token_bitmasks
    from ..tokenizer import load_tokenizer_info
    from .maskbench import load_maskbench, sample_records

    threads = threads or [1, 2]
    info = load_tokenizer_info("deepseek")
    compiler = GrammarCompiler(info, cache_size=rows + 8)
    matchers = _batch(compiler, sample_records(load_maskbench(), rows * 2, seed), rows, seed)
    words = (info.vocab_size + 31) // 32
    ref = None
    out = {"rows": len(matchers), "vocab": info.vocab_size, "threads": {}}
    for n in threads:
        cold, warm = [], []
        for _ in range(repeats):
            bm = np.zeros((len(matchers), words), dtype=np.int32)
            _clear_caches()
            for m in matchers:
                m._exact = None
            t0 = time.perf_counter()
            fill_next_token_bitmasks(matchers, bm, threads=n)
            cold.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            fill_next_token_bitmasks(matchers, bm, threads=n)
            warm.append(time.perf_counter() - t0)
            if ref is None:
                ref = bm.copy()
            elif not np.array_equal(ref, bm):
                raise AssertionError(f"rows filled with {n} threads differ from 1 thread's")
        out["threads"][n] = {"cold_ms": 1e3 * statistics.median(cold), "warm_ms": 1e3 * statistics.median(warm)}
    base = out["threads"][threads[0]]
    echo(f"batch masks: {out['rows']} rows (MaskBench schemas at random states), DeepSeek-V4 vocabulary, "
         f"median of {repeats}")
    echo("| threads | cold fill (ms) | speed-up | warm fill (ms) | speed-up |")
    echo("|---:|---:|---:|---:|---:|")
    for n, r in out["threads"].items():
        echo(f"| {n} | {r['cold_ms']:.1f} | {base['cold_ms'] / r['cold_ms']:.2f}x | {r['warm_ms']:.2f} | "
             f"{base['warm_ms'] / r['warm_ms']:.2f}x |")
    return out
