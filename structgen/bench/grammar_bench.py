"""Two small benchmarks for the core engine, with peers in the same run.

``structgen bench grammar``: compile a Lark grammar (default ``grammars/json.lark``)
and time the token masks while stepping through real JSON documents (MaskBench's
valid instances), for structgen and llguidance (same grammar text), single thread.

``structgen bench decode``: tokens/s of SmolLM2 with and without a constraint,
greedy, same prompt; the ratio is the constraint's overhead.
"""
from __future__ import annotations

import gzip
import json
import random
import time
from pathlib import Path

import numpy as np



def _percentiles(xs) -> dict:
    a = np.asarray(xs, dtype=float)
    if not len(a):
        return {}
    return {"p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
            "p99": float(np.percentile(a, 99)), "max": float(a.max()), "mean": float(a.mean()), "n": int(len(a))}


def load_documents(n: int, seed: int = 0, data: Path | None = None) -> list[str]:
    from .data_paths import data_path

    path = data_path("maskbench-dev.jsonl.gz", data)
    docs = []
    for line in gzip.open(path):
        r = json.loads(line)
        docs.extend(json.dumps(t["data"], ensure_ascii=False) for t in r["tests"] if t["valid"])
    random.Random(seed).shuffle(docs)
    return docs[:n]


def _clear_structgen_caches() -> None:
    from ..engine import lexer, walks

    lexer._cores.clear()
    walks.clear_caches()


def bench_grammar(grammar_path: str | Path, *, tokenizer: str = "deepseek", n_docs: int = 100, seed: int = 0,
                  engines: tuple[str, ...] = ("structgen", "llguidance"), start: str = "start",
                  indenter: str | None = None, texts: list[str] | None = None,
                  syncode_python: str | None = None) -> dict:
    """Compile time (cold caches) and per-token mask time over real texts (``texts``; default
    MaskBench's valid JSON documents).  ``grammar_path`` may name a corpus of
    :mod:`structgen.bench.lark_corpora` (``python``, ``lark``): its grammar, start, indenter and
    real files.  ``syncode`` runs SynCode's grammar of the same language in SynCode's virtualenv
    (:mod:`structgen.bench.syncode_peer`)."""
    from tokenizers import Tokenizer

    from ..compiler import GrammarCompiler
    from ..engine.matcher import Matcher
    from ..tokenizer import deepseek_tokenizer_path, load_tokenizer_info
    from .lark_corpora import CORPORA

    from ..shipped import shipped_grammar

    corpus = CORPORA.get(str(grammar_path))
    named = shipped_grammar(str(grammar_path)) if corpus is None else None
    if corpus is not None:
        grammar_path, start, indenter = corpus.grammar, corpus.start, corpus.indenter
        texts = corpus.parsed_texts(n_docs, seed) if texts is None else texts
        if "syncode" in engines and corpus.name == "python":  # the same texts for every engine
            texts = [without_module_docstring(t) for t in texts]
    elif named is not None:
        grammar_path, start, indenter = named.path, named.start, named.indenter
    text = Path(grammar_path).read_text()
    info = load_tokenizer_info(tokenizer)
    tok_json = deepseek_tokenizer_path() if tokenizer == "deepseek" else None
    hf = Tokenizer.from_file(str(tok_json)) if tok_json else None
    if hf is None:
        raise ValueError("bench grammar needs a tokenizer.json tokenizer (use --tokenizer deepseek)")
    docs = load_documents(n_docs, seed) if texts is None else texts
    encoded = [hf.encode(d, add_special_tokens=False).ids for d in docs]
    results: dict = {}
    if "structgen" in engines:
        t0 = time.perf_counter()
        comp = GrammarCompiler(info)
        comp.compile_lark('start: "a"')  # one-off per process: Lark builds its own meta-grammar parser
        setup = time.perf_counter() - t0
        _clear_structgen_caches()
        comp.clear_cache()
        t0 = time.perf_counter()
        g = comp.compile_lark(grammar_path, start=start, indenter=indenter)
        compile_s = time.perf_counter() - t0
        m = Matcher(g)
        m.next_token_mask()
        ttfm = time.perf_counter() - t0
        per_doc = []
        rejected = 0
        for ids in encoded:
            m.reset()
            times = []
            per_doc.append(times)
            for t in ids:
                t1 = time.perf_counter()
                m.next_token_mask()
                times.append((time.perf_counter() - t1) * 1e6)
                if not m.accept_token(t):
                    rejected += 1
                    break
        results["structgen"] = {"setup_s": setup, "compile_ms": compile_s * 1e3, "ttfm_ms": ttfm * 1e3,
                                "tbm_us": _percentiles([x for d in per_doc for x in d]), "per_doc_us": per_doc,
                                "rejected_docs": rejected, "docs": len(encoded),
                                "peak_rss_mb": _peak_rss_mb()}
    if "syncode" in engines:
        results["syncode"] = _bench_syncode(str(corpus.name if corpus else named.name if named else grammar_path),
                                            encoded, tok_json, syncode_python)
    if "llguidance" in engines:
        try:
            import llguidance
            import llguidance.numpy as llnp
        except ImportError:
            results["llguidance"] = {"skipped": "not installed"}
        else:
            t0 = time.perf_counter()
            lltok = llguidance.LLTokenizer(tok_json.read_text())
            setup = time.perf_counter() - t0
            t0 = time.perf_counter()
            grammar = llguidance.grammar_from("lark", text)
            m0 = llguidance.LLMatcher(lltok, grammar, log_level=0)
            compile_s = time.perf_counter() - t0
            bm = llnp.allocate_token_bitmask(1, lltok.vocab_size)
            llnp.fill_next_token_bitmask(m0, bm, 0)
            ttfm = time.perf_counter() - t0
            error = m0.get_error() if hasattr(m0, "get_error") else None
            if error or m0.is_error():
                results["llguidance"] = {"skipped": f"grammar refused: {str(error).splitlines()[0][:160]}"}
                return results
            times = []
            rejected = 0
            for ids in encoded:
                mm = m0.deep_copy()
                for t in ids:
                    t1 = time.perf_counter()
                    llnp.fill_next_token_bitmask(mm, bm, 0)
                    times.append(time.perf_counter() - t1)
                    if not mm.consume_token(t):
                        rejected += 1
                        break
            results["llguidance"] = {"setup_s": setup, "compile_ms": compile_s * 1e3, "ttfm_ms": ttfm * 1e3,
                                     "tbm_us": _percentiles(np.array(times) * 1e6), "rejected_docs": rejected,
                                     "docs": len(encoded)}
    return results


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _bench_syncode(language: str, encoded: list[list[int]], tok_json: Path, python: str | None) -> dict:
    from .syncode_peer import SYNCODE_GRAMMARS, run_syncode

    if language not in SYNCODE_GRAMMARS:
        return {"skipped": f"SynCode has no grammar for {language!r} (it has: {', '.join(SYNCODE_GRAMMARS)})"}
    r = run_syncode(encoded, tok_json, grammar=SYNCODE_GRAMMARS[language], python=python)
    if "per_doc_us" in r:
        r["tbm_us"] = _percentiles([x for d in r["per_doc_us"] for x in d])
    return r


def _common_ratio(a: dict, b: dict) -> str:
    """a / b over the steps both engines masked: each text up to where either stopped (SynCode's
    grammars are not structgen's, and it stops at the first text its grammar refuses)."""
    pairs = [(da[:n], db[:n]) for da, db in zip(a["per_doc_us"], b["per_doc_us"]) for n in [min(len(da), len(db))]]
    both = sum(o == "accepted" for o in b["outcomes"])
    pa = _percentiles([x for da, _ in pairs for x in da])
    pb = _percentiles([x for _, db in pairs for x in db])
    if not pa:
        return "no step masked by both"
    return (f"over the {pa['n']} steps both masked ({both} of {len(pairs)} texts whole): TBM p50 "
            f"{pa['p50'] / pb['p50']:.3g}x, p99 {pa['p99'] / pb['p99']:.3g}x, max {pa['max'] / pb['max']:.3g}x, "
            f"mean {pa['mean'] / pb['mean']:.3g}x")


def without_module_docstring(text: str) -> str:
    """``text`` less its module docstring: SynCode 0.4.16's Python grammar refuses a string statement
    at module level followed by a newline, so it would stop at the first line of almost every real
    module."""
    import ast

    body = ast.parse(text).body
    first = body[0] if body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return text
    lines = text.splitlines(keepends=True)
    return "".join(lines[:first.lineno - 1] + lines[first.end_lineno:]).lstrip("\n")


def _stopped(r: dict) -> str:
    return f" ({r['stopped_docs']} stopped at the time budget)" if r.get("stopped_docs") else ""


def format_grammar_table(results: dict) -> str:
    lines = ["| engine | compile ms | compile+first mask ms | TBM p50 µs | p90 | p99 | max | mean | steps | "
             "docs rejected | peak RSS MB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in results.items():
        if "skipped" in r:
            lines.append(f"| {name} | skipped: {r['skipped']} |||||||||")
            continue
        t = r["tbm_us"]
        label = name
        if name == "syncode":
            label = f"syncode ({r['grammar']}, {r['mode']}{', store cached' if r['store_cached'] else ''})"
        rss = f"{r['peak_rss_mb']:.0f}" if "peak_rss_mb" in r else "--"
        lines.append(f"| {label} | {r['compile_ms']:.1f} | {r['ttfm_ms']:.1f} | {t['p50']:.1f} | {t['p90']:.1f} | "
                     f"{t['p99']:.1f} | {t['max']:.0f} | {t['mean']:.1f} | {t['n']} | "
                     f"{r['rejected_docs']} of {r['docs']}{_stopped(r)} | {rss} |")
    if "structgen" in results and "llguidance" in results and "tbm_us" in results.get("llguidance", {}):
        a, b = results["structgen"], results["llguidance"]
        lines.append("")
        lines.append(f"structgen / llguidance: TBM p50 {a['tbm_us']['p50'] / b['tbm_us']['p50']:.2f}x, "
                     f"p99 {a['tbm_us']['p99'] / b['tbm_us']['p99']:.2f}x, "
                     f"compile {a['ttfm_ms'] / b['ttfm_ms']:.2f}x")
    if "per_doc_us" in results.get("structgen", {}) and "per_doc_us" in results.get("syncode", {}):
        lines.append("")
        lines.append("structgen / syncode " + _common_ratio(results["structgen"], results["syncode"]))
    return "\n".join(lines)
