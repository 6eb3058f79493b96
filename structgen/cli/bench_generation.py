"""``structgen bench jsonschemabench | values | real-schemas | decode | samplers``: benchmarks that
decode with a model."""
from __future__ import annotations

import argparse
from pathlib import Path
import sys

from .common import command_line, offline

__all__ = ["add_bench_jsonschemabench", "add_bench_values", "add_bench_real_schemas", "add_bench_decode",
           "add_bench_samplers"]

JSB_QUICK = {"per_dataset": 1, "max_tokens": 48, "max_prompt_tokens": 512, "compile_timeout": 10.0,
             "gen_timeout": 120.0, "engines": "structgen,unconstrained"}
JSB_DEFAULT = {"per_dataset": 5, "max_tokens": 512, "max_prompt_tokens": 2048, "compile_timeout": 60.0,
               "gen_timeout": 300.0}


def add_bench_jsonschemabench(bench_sub: argparse._SubParsersAction) -> None:
    from ..bench.jsonschemabench import DEFAULT_ENGINES

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
    offline()
    from ..bench.jsonschemabench import DEFAULT_ENGINES, JSBConfig, run_jsonschemabench

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
        from ..models import DEFAULT_MODEL_NAME

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
        command=command_line(args),
        format=args.format,
    )
    try:
        res = run_jsonschemabench(cfg)
    except (FileNotFoundError, ValueError) as e:
        print(f"structgen bench jsonschemabench: {e}", file=sys.stderr)
        return 2
    return 0 if res.summaries else 1


def add_bench_values(bench_sub) -> None:
    from ..bench.values import DEFAULT_ENGINES, DEFAULT_OUT

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
    from ..bench.values import run_values_cli

    return run_values_cli(args)


def add_bench_real_schemas(bench_sub) -> None:
    from ..bench.real_schemas import DEFAULT_MAX_TOKENS, DEFAULT_SAMPLE, DEFAULT_TIMEOUT

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
    from ..bench.real_schemas import run_real_schemas_cli

    return run_real_schemas_cli(args)


def add_bench_decode(bench_sub) -> None:
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


def _run_bench_decode(args) -> int:
    import json as _json

    from ..bench.decode import format_decode_tables, run_decode_bench

    res = run_decode_bench(n_tokens=args.tokens, repeats=args.repeats,
                           threads=[int(t) for t in str(args.threads).split(",") if t],
                           batches=tuple(int(b) for b in str(args.batches).split(",") if b),
                           quantized=not args.no_quantized)
    print(format_decode_tables(res))
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(_json.dumps(res, indent=1))
    return 0 if all(r.get("identical", True) for r in res["decode"]) else 1


def add_bench_samplers(bench_sub) -> None:
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
    p.add_argument("--parts", default="toy,real,jsb", help="toy, real, jsb, unlikely (comma-separated)")
    p.add_argument("--unlikely-count", type=int, default=4, help="unlikely languages drawn (default 4)")
    p.add_argument("--unlikely-samples", type=int, default=4000, help="samples per sampler on them (default 4000)")
    p.add_argument("--unlikely-particles", type=int, default=16,
                   help="SMC particles on them; twisted SMC gets a quarter (default 16)")
    p.add_argument("--unlikely-seed", type=int, default=None, help="the languages' seed (default --seed)")
    p.add_argument("--no-canonical", dest="canonical", action="store_false",
                   help="SmolLM2 parts over every tokenization (the target before canonical filtering)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="bench-out/samplers")
    p.set_defaults(func=_run_bench_samplers)


def _run_bench_samplers(args) -> int:
    from ..bench.samplers import run_samplers_bench

    run_samplers_bench(toy_samples=args.toy_samples, real_samples=args.real_samples, jsb_schemas=args.schemas,
                       particles=args.particles, real_particles=args.real_particles, seed=args.seed,
                       out_dir=args.output, parts=tuple(args.parts.split(",")), unlikely_count=args.unlikely_count,
                       unlikely_samples=args.unlikely_samples, unlikely_particles=args.unlikely_particles,
                       unlikely_seed=args.unlikely_seed, canonical=args.canonical)
    print(f"wrote {args.output}/samplers.json and {args.output}/samplers-tv.png")
    return 0
