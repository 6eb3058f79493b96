"""``structgen bench vllm | batch-masks | gpu-masks``: the serving benchmarks (vLLM's server per
structured-output backend, a batch's mask rows over threads, mask application on a GPU)."""
from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_bench_vllm", "add_bench_batch_masks", "add_bench_gpu_masks"]


def add_bench_batch_masks(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser("batch-masks", help="a batch's bitmask rows filled with 1..N threads (cold and warm)",
                             formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--rows", default="64,256", help="row counts, comma-separated")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--peers", default="llguidance,xgrammar", help="peers filled in the same run ('' for none)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_run_batch_masks)


def _run_batch_masks(args) -> int:
    from ..bench.batch_masks import run_batch_masks_bench

    run_batch_masks_bench(rows=[int(r) for r in args.rows.split(",")], threads=[int(t) for t in args.threads.split(",")],
                          repeats=args.repeats, seed=args.seed, peers=tuple(p for p in args.peers.split(",") if p))
    return 0


def add_bench_gpu_masks(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser("gpu-masks", help="bitmask application on a CUDA GPU: structgen's kernels against XGrammar's",
                             formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--batches", default="1,64,512,4096")
    p.add_argument("--vocab", type=int, default=128_000)
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--density", type=float, default=0.5, help="share of tokens allowed in the random masks")
    p.add_argument("--reps", type=int, default=100)
    p.set_defaults(func=_run_gpu_masks)


def _run_gpu_masks(args) -> int:
    from ..bench.gpu_masks import run_gpu_masks_bench

    run_gpu_masks_bench(batches=tuple(int(b) for b in args.batches.split(",")), vocab=args.vocab,
                        dtypes=tuple(args.dtypes.split(",")), density=args.density, reps=args.reps)
    return 0


def add_bench_vllm(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser("vllm", help="JSONSchemaBench requests through vLLM's server per structured-output backend",
                             description="Starts vLLM's OpenAI-compatible server once per backend (structgen, xgrammar, "
                                         "guidance) from vLLM's own virtualenv and sends the same JSONSchemaBench "
                                         "requests, N at a time: requests served and valid, req/s, output tok/s, "
                                         "TTFT, and decode speed on the schemas every backend served.",
                             formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--python", default=".venv-vllm/bin/python", help="the Python of vLLM's virtualenv (make test-vllm)")
    p.add_argument("--model", default=None, help="a transformers model folder (default: the embedded SmolLM2's)")
    p.add_argument("--backends", default="structgen,xgrammar,guidance")
    p.add_argument("--per-dataset", type=int, default=6, help="schemas sampled from each JSONSchemaBench dataset")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--data", default=None, help="JSONSchemaBench JSONL(.gz) (default ../shared/data/...)")
    p.add_argument("--cases", choices=("jsonschemabench", "checks"), default="jsonschemabench",
                   help="JSONSchemaBench schemas, or check-heavy MaskBench schemas (uniqueItems, oneOf, ...) sampled")
    p.add_argument("--schemas", type=int, default=50, help="with --cases checks: how many schemas")
    p.add_argument("--samples", type=int, default=4, help="with --cases checks: requests per schema, one seed each")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--same-as", default=None, metavar="VLLM_JSON",
                   help="with --cases checks: the requests of an earlier run (its vllm.json), for a before/after")
    p.add_argument("--output", default="bench-out/vllm")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from ..bench.vllm_serving import run_vllm_bench
    from ..errors import StructgenError

    python = Path(args.python)
    if not python.exists():
        raise StructgenError(f"no vLLM virtualenv at {python}: run `make test-vllm` once, or pass --python")
    model = args.model
    if model is None:
        from ..models import default_model_folder

        model = str(default_model_folder())
    run_vllm_bench(python=str(python), model=model, backends=args.backends.split(","), per_dataset=args.per_dataset,
                   seed=args.seed, concurrency=args.concurrency, max_tokens=args.max_tokens,
                   out_dir=Path(args.output), data=args.data, cases=args.cases, schemas=args.schemas,
                   samples=args.samples, temperature=args.temperature,
                   same_as=Path(args.same_as) if args.same_as else None)
    return 0
