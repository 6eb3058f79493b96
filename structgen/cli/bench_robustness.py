"""``structgen bench fuzz | load | memory | startup``: the engine's promises under generated inputs, many
threads and long runs, and the wait for a first output."""
from __future__ import annotations

__all__ = ["add_bench_fuzz", "add_bench_load", "add_bench_memory", "add_bench_startup"]


def add_bench_fuzz(bench_sub) -> None:
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
    from ..bench.fuzz import format_fuzz_table, run_fuzz

    summary = run_fuzz(n=args.n, seed=args.seed, kinds=tuple(k for k in args.kinds.split(",") if k),
                       output=args.output, tokenizer=args.tokenizer, timeout=args.timeout,
                       progress=not args.no_progress)
    print(format_fuzz_table(summary))
    print(f"results: {args.output}/results.jsonl, reproducers: {args.output}/reproducers/")
    return 0 if summary["failures"] == 0 else 1


def add_bench_load(bench_sub) -> None:
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
    from ..bench.load import format_load_table, run_load

    s = run_load(seconds=args.seconds, threads=args.threads, schemas=args.schemas, tokenizer=args.tokenizer,
                 seed=args.seed, output=args.output)
    print(format_load_table(s))
    for p in s["problems"]:
        print("problem:", p)
    print(f"samples and plot: {args.output}/load.json, {args.output}/load-rss.png")
    return 0 if s["mismatches"] == 0 and s["errors"] == 0 else 1


def add_bench_memory(bench_sub) -> None:
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
    from ..bench.memory import format_memory_table, run_memory

    s = run_memory(passes=args.passes, sample=args.sample, seed=args.seed, tokenizer=args.tokenizer, data=args.data,
                   cache_mb=args.cache_mb, output=args.output)
    print(format_memory_table(s))
    print(f"samples and plot: {args.output}/memory.json, {args.output}/memory-rss.png")
    return 0


def add_bench_startup(bench_sub) -> None:
    p = bench_sub.add_parser("startup", help="the first output in a new environment (cold) and in later processes (warm)",
                             description="Child processes import structgen, load_model() and generate_json a small "
                                         "schema, timing each: cold (empty structgen and numba caches, as a new "
                                         "virtualenv), warm (the same caches again), the cold start with the kernels "
                                         "compiled here instead of the shipped ones, and transformers alone loading "
                                         "the same converted model.")
    p.add_argument("--warm-repeats", type=int, default=3, help="warm processes, medians reported (default 3)")
    p.add_argument("--no-baseline", action="store_true", help="skip the cold start with kernels compiled here (~60 s)")
    p.add_argument("--json", default=None, help="also write the rows here")
    p.set_defaults(func=_run_bench_startup)


def _run_bench_startup(args) -> int:
    import json

    from ..bench.startup import format_startup_table, run_startup

    result = run_startup(warm_repeats=args.warm_repeats, baseline=not args.no_baseline)
    print(format_startup_table(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return 0
