"""``structgen bench``: the group; each benchmark's parser lives with its kind (``bench_masks``,
``bench_generation``, ``bench_robustness``, ``hmm``, ``serve``, ``kg``)."""
from __future__ import annotations

import argparse

from .bench_generation import (add_bench_decode, add_bench_jsonschemabench, add_bench_real_schemas,
                               add_bench_samplers, add_bench_values)
from .bench_masks import add_bench_grammar, add_bench_mask, add_bench_test_suite
from .bench_robustness import add_bench_fuzz, add_bench_load, add_bench_memory, add_bench_startup
from .hmm import add_bench_decog
from .kg import add_bench_kgqa
from .serve import add_bench_batch_masks, add_bench_gpu_masks, add_bench_vllm

__all__ = ["add_bench"]


def add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (mask speed/correctness, end-to-end generation, ...)",
                       description="Benchmarks. Subcommands: mask (MaskBench), jsonschemabench (end to end "
                                   "with a real model), test-suite, grammar, decode, samplers, decog, kgqa, vllm, fuzz, load, memory, values, real-schemas, page.")
    bench_sub = p.add_subparsers(dest="bench_command", metavar="BENCHMARK")
    bench_sub.required = True
    # the order of `structgen bench --help`
    add_bench_mask(bench_sub)
    add_bench_test_suite(bench_sub)
    add_bench_grammar(bench_sub)  # grammar, regex, dead-ends
    add_bench_decode(bench_sub)
    add_bench_jsonschemabench(bench_sub)
    add_bench_samplers(bench_sub)
    add_bench_fuzz(bench_sub)
    add_bench_load(bench_sub)
    add_bench_memory(bench_sub)
    add_bench_startup(bench_sub)
    add_bench_values(bench_sub)
    add_bench_real_schemas(bench_sub)
    add_bench_decog(bench_sub)
    add_bench_vllm(bench_sub)
    add_bench_batch_masks(bench_sub)
    add_bench_gpu_masks(bench_sub)
    add_bench_kgqa(bench_sub)
    add_bench_page(bench_sub)


def add_bench_page(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser("page", help="BENCHMARKS.md and its plots, generated from benchmarks/results/*.json",
                             description="Regenerate BENCHMARKS.md (the headline table and a section per topic) "
                                         "and its plots from the committed result files; --check only compares.")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when BENCHMARKS.md is stale")
    p.add_argument("--no-plots", action="store_true", help="leave the plots as they are")
    p.set_defaults(func=_run_bench_page)


def _run_bench_page(args: argparse.Namespace) -> int:
    from ..bench.results_page import main

    return main(["--check"] * args.check + ["--no-plots"] * args.no_plots)
