"""``structgen bench batch-masks``: a batch's bitmask rows filled with 1..N threads, peers beside.

A batch of matchers over different MaskBench schemas, each walked to a random reachable state,
is filled with :func:`structgen.engine.batch_masks.fill_next_token_bitmasks`: *cold* (the mask
caches emptied first, so rows are trie walks in ``nogil`` numba kernels) and *warm* (every row a
cache hit).  Rows are checked equal across thread counts.

Peers fill the same schemas after the same tokens, in the same run: llguidance with its parallel
fill (``fill_next_token_bitmask_par`` over an ``LLExecutor`` of N threads) and XGrammar with its
``BatchGrammarMatcher(max_threads=N)``.  A peer's "cold" fill is the first one after its matchers
were rebuilt at their states (llguidance keeps no mask cache; XGrammar's is made at compile time),
its "warm" fill the one right after.  Where a peer refuses a token of the walk (its JSON differs),
its matcher stays where it stopped; the table says how many walks it took whole.
"""
from __future__ import annotations

import json
import random
import statistics
import time
from typing import Any, Callable

import numpy as np

__all__ = ["run_batch_masks_bench", "PEERS"]

PEERS = ("llguidance", "xgrammar")


def _walks(compiler, records, rows: int, seed: int, peers: dict) -> tuple[list, list[dict], list[list[int]]]:
    """Matchers at random reachable states over the first ``rows`` schemas every engine compiles,
    the schemas, and the tokens each walk took."""
    from ..engine.matcher import Matcher
    from ..errors import StructgenError
    from .fuzz import mask_ids

    rng = random.Random(seed)
    matchers, schemas, walks = [], [], []
    for r in records:
        if len(matchers) == rows:
            break
        try:
            g = compiler.compile_json_schema(r["schema"], property_order="any")
        except StructgenError:
            continue
        if not all(p.compiles(r["schema"]) for p in peers.values()):
            continue
        m = Matcher(g)
        taken: list[int] = []
        for _ in range(rng.randrange(2, 24)):
            ids = [t for t in mask_ids(m, g.vocab_size).tolist() if t not in g.eos_ids]
            if not ids:
                break
            t = rng.choice(ids)
            if not m.accept_token(t):
                break
            taken.append(t)
        matchers.append(m)
        schemas.append(r["schema"])
        walks.append(taken)
    return matchers, schemas, walks


def _clear_caches(matchers) -> None:
    from ..engine import exact_masks, walks
    from ..engine.compiled import MASKS

    MASKS.discard_where(lambda k: True)
    exact_masks.CANDIDATES.discard_where(lambda k: True)
    exact_masks.CORNERED.discard_where(lambda k: True)
    walks.clear_caches()
    for m in matchers:
        m._exact = None


class _Peer:
    """A peer's matchers replayed along structgen's walks: ``fresh``, ``take`` and ``broken`` per peer."""

    def build(self, schemas, walks) -> tuple[list, int]:
        """Matchers at the walks' states (each stops where the peer refuses a token), and how many
        walks were taken whole."""
        ms, whole = [], 0
        for schema, w in zip(schemas, walks):
            m = self.fresh(schema)
            k = 0
            while k < len(w) and self.take(m, w[k]):
                k += 1
            if self.broken(m):  # replay the part it took on a fresh one
                m = self.fresh(schema)
                for t in w[:k]:
                    self.take(m, t)
            whole += k == len(w)
            ms.append(m)
        return ms, whole


class _LLGuidance(_Peer):
    """llguidance 1.9: ``LLMatcher`` per schema, ``fill_next_token_bitmask_par`` over an executor."""

    name = "llguidance"

    def __init__(self, hf_tokenizer: Any):
        import llguidance
        import llguidance.hf
        import llguidance.numpy

        self.llg = llguidance
        self.fill = llguidance.numpy.fill_next_token_bitmask_par
        self.tok = llguidance.hf.from_tokenizer(hf_tokenizer)
        self.grammars: dict[str, Any] = {}
        self.executors: dict[int, Any] = {}

    def compiles(self, schema) -> bool:
        key = json.dumps(schema, sort_keys=True)
        g = self.llg.grammar_from("json_schema", json.dumps(schema))
        ok = not self.llg.LLMatcher(self.tok, g, log_level=0).is_error()
        if ok:
            self.grammars[key] = g
        return ok

    def fresh(self, schema):
        return self.llg.LLMatcher(self.tok, self.grammars[json.dumps(schema, sort_keys=True)], log_level=0)

    def take(self, m, token: int) -> bool:
        return bool(m.consume_token(token))

    def broken(self, m) -> bool:
        return bool(m.is_error())  # a refused token leaves an LLMatcher in an error state

    def run(self, ms, bitmask: np.ndarray, threads: int) -> None:
        ex = self.executors.get(threads)
        if ex is None:
            ex = self.executors[threads] = self.llg.LLExecutor(threads)
        self.fill(ex, [(m, i) for i, m in enumerate(ms)], bitmask)


class _XGrammar(_Peer):
    """XGrammar: ``GrammarMatcher`` per schema (JSONSchemaBench settings), ``BatchGrammarMatcher``."""

    name = "xgrammar"

    def __init__(self, hf_tokenizer: Any):
        import torch
        import xgrammar as xgr

        self.xgr, self.torch = xgr, torch
        info = xgr.TokenizerInfo.from_huggingface(hf_tokenizer, vocab_size=len(hf_tokenizer))
        self.compiler = xgr.GrammarCompiler(info, max_threads=1)
        self.compiled: dict[str, Any] = {}
        self.batchers: dict[int, Any] = {}

    def compiles(self, schema) -> bool:
        try:
            cg = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=True, strict_mode=False)
        except Exception:  # noqa: BLE001 - a peer's refusal, whatever it raises
            return False
        self.compiled[json.dumps(schema, sort_keys=True)] = cg
        return True

    def fresh(self, schema):
        return self.xgr.GrammarMatcher(self.compiled[json.dumps(schema, sort_keys=True)])

    def take(self, m, token: int) -> bool:
        return bool(m.accept_token(token))

    def broken(self, m) -> bool:
        return False

    def run(self, ms, bitmask: np.ndarray, threads: int) -> None:
        b = self.batchers.get(threads)
        if b is None:
            b = self.batchers[threads] = self.xgr.BatchGrammarMatcher(max_threads=threads)
        b.batch_fill_next_token_bitmask(ms, self.torch.from_numpy(bitmask))


_PEER_CLASSES = {"llguidance": _LLGuidance, "xgrammar": _XGrammar}


def _peer(name: str, hf_tokenizer: Any):
    if name not in _PEER_CLASSES:
        raise ValueError(f"unknown batch-masks peer {name!r} (known: {', '.join(PEERS)})")
    return _PEER_CLASSES[name](hf_tokenizer)


def _cold_then_warm(prepare: Callable[[], tuple], fill: Callable, repeats: int,
                    check: Callable | None = None) -> dict:
    """Median times of a cold fill (right after ``prepare()``) and of the warm one after it, in ms;
    ``prepare`` returns the matchers and the bitmask, ``fill(matchers, bitmask)`` fills it, and
    ``check(bitmask)``, untimed, looks at the rows filled."""
    cold, warm = [], []
    for _ in range(repeats):
        ms, bm = prepare()
        for times in (cold, warm):
            t0 = time.perf_counter()
            fill(ms, bm)
            times.append(time.perf_counter() - t0)
        if check is not None:
            check(bm)
    return {"cold_ms": 1e3 * statistics.median(cold), "warm_ms": 1e3 * statistics.median(warm)}


def _time_structgen(matchers, words: int, n: int, repeats: int, ref: dict) -> dict:
    from ..engine.batch_masks import fill_next_token_bitmasks

    def prepare():
        _clear_caches(matchers)
        return matchers, np.zeros((len(matchers), words), dtype=np.int32)

    def same_rows(bm):
        if not np.array_equal(ref.setdefault(len(matchers), bm.copy()), bm):
            raise AssertionError(f"rows filled with {n} threads differ from those filled first")

    return _cold_then_warm(prepare, lambda ms, bm: fill_next_token_bitmasks(ms, bm, threads=n), repeats, same_rows)


def _time_peer(peer, schemas, walks, words: int, n: int, repeats: int) -> dict:
    whole = []

    def prepare():
        ms, taken = peer.build(schemas, walks)
        whole.append(taken)
        return ms, np.zeros((len(ms), words), dtype=np.int32)

    out = _cold_then_warm(prepare, lambda ms, bm: peer.run(ms, bm, n), repeats)
    return {**out, "whole": whole[-1]}


def run_batch_masks_bench(*, rows: list[int] | int = 64, threads: list[int] | None = None, repeats: int = 5,
                          seed: int = 0, peers: tuple[str, ...] = PEERS,
                          echo: Callable[[str], None] = print) -> dict:
    """Time batch fills for each row count and thread count; returns the figures per engine."""
    from ..compiler import GrammarCompiler
    from ..tokenizer import load_tokenizer_info
    from .maskbench import load_maskbench, sample_records
    from .tokenizers import resolve_tokenizer

    row_counts = [rows] if isinstance(rows, int) else list(rows)
    threads = threads or [1, 2]
    info = load_tokenizer_info("deepseek")
    peer_objs = {}
    if peers:
        hf = resolve_tokenizer("deepseek").load()
        peer_objs = {p: _peer(p, hf) for p in peers}
    most = max(row_counts)
    compiler = GrammarCompiler(info, cache_size=most + 8)
    matchers, schemas, walks = _walks(compiler, sample_records(load_maskbench(), most * 3, seed), most, seed,
                                      peer_objs)
    words = (info.vocab_size + 31) // 32
    out: dict = {"vocab": info.vocab_size, "rows": {}}
    ref: dict = {}
    for r in row_counts:
        r = min(r, len(matchers))
        res: dict = {"structgen": {}}
        for n in threads:
            res["structgen"][n] = _time_structgen(matchers[:r], words, n, repeats, ref)
        for p, peer in peer_objs.items():
            res[p] = {n: _time_peer(peer, schemas[:r], walks[:r], words, n, repeats) for n in threads}
        out["rows"][r] = res
    echo(format_batch_table(out, threads, repeats, tuple(peer_objs)))
    return out


def format_batch_table(out: dict, threads: list[int], repeats: int, peers: tuple[str, ...]) -> str:
    """The bench's table: per row count, engine and thread count, the fills and their ratios."""
    lines = [f"batch masks: MaskBench schemas every engine compiles, at random reachable states; DeepSeek-V4 "
             f"vocabulary ({out['vocab']:,}); median of {repeats}",
             "| rows | engine | threads | cold fill (ms) | cold speed-up | warm fill (ms) | warm speed-up | "
             "cold / llguidance | warm / llguidance | walks taken whole |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r, res in out["rows"].items():
        for engine, per in res.items():
            one = per[threads[0]]
            for n in threads:
                f = per[n]
                ll = res.get("llguidance", {}).get(n)
                rc = f"{f['cold_ms'] / ll['cold_ms']:.2f}x" if ll and "llguidance" in peers else "--"
                rw = f"{f['warm_ms'] / ll['warm_ms']:.2f}x" if ll and "llguidance" in peers else "--"
                whole = f"{f['whole']}/{r}" if "whole" in f else "--"
                lines.append(f"| {r} | {engine} | {n} | {f['cold_ms']:.2f} | {one['cold_ms'] / f['cold_ms']:.2f}x | "
                             f"{f['warm_ms']:.3f} | {one['warm_ms'] / f['warm_ms']:.2f}x | {rc} | {rw} | {whole} |")
    return "\n".join(lines)
