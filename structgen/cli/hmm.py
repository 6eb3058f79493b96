"""``structgen hmm distill`` (an HMM for Deco-G, distilled from a model's outputs for a task) and
``structgen bench decog``."""
from __future__ import annotations

import argparse
import sys

from .common import offline

__all__ = ["add_hmm", "add_bench_decog"]


def add_hmm(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hmm", help="HMMs for Deco-G (sampler='decog'): distill one from a model",
                       description="Hidden Markov models that look ahead over a format for the 'decog' sampler.")
    hmm_sub = p.add_subparsers(dest="hmm_command", metavar="ACTION")
    hmm_sub.required = True
    d = hmm_sub.add_parser("distill", help="sample the model's outputs for the task's prompts, fit an HMM by EM",
                           description="Samples --samples outputs per prompt from the model (the task's prompts, "
                                       "without format instructions: the HMM carries the format), then fits an "
                                       "HMM with --hidden states by EM and saves it (.npz). Use it with "
                                       "generate_json(..., sampler='decog', hmm=PATH).")
    d.add_argument("--prompts", required=True, help="text file, one prompt a line")
    d.add_argument("--hidden", type=int, default=64, help="hidden states (default 64)")
    d.add_argument("--output", required=True, help="where to save the HMM (.npz)")
    d.add_argument("--model", default=None, help="model folder, .gguf file or transformers id (default: SmolLM2)")
    d.add_argument("--samples", type=int, default=64, help="samples per prompt (default 64)")
    d.add_argument("--max-tokens", type=int, default=48, help="tokens per sample at most (default 48)")
    d.add_argument("--temperature", type=float, default=1.0)
    d.add_argument("--iterations", type=int, default=30, help="EM iterations at most (default 30)")
    d.add_argument("--batch", type=int, default=32, help="samples decoded together (default 32)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--no-chat", dest="chat", action="store_false", help="prompts as raw text, not a chat turn")
    d.add_argument("--quantized", action=argparse.BooleanOptionalAction, default=None,
                   help="sample with the GGUF's 4-bit weights (default: as load_model decides, on for a 4-bit GGUF)")
    d.set_defaults(func=_run_distill)


def _run_distill(args) -> int:
    offline()
    from ..errors import StructgenError
    from ..models import load_model
    from ..runtime.sampling.hmm_distill import distill_hmm, read_prompts

    try:
        prompts = read_prompts(args.prompts)
        model = load_model(args.model, quantized="auto" if args.quantized is None else args.quantized)
        hmm = distill_hmm(model, prompts, hidden=args.hidden, samples_per_prompt=args.samples,
                          max_tokens=args.max_tokens, temperature=args.temperature, iterations=args.iterations,
                          batch=args.batch, seed=args.seed, chat=args.chat, echo=print)
        path = hmm.save(args.output)
    except (StructgenError, ValueError, OSError) as e:
        print(f"structgen hmm distill: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"saved {path} (emissions {hmm.emission_bytes / 2**20:.1f} MiB)")
    return 0


def add_bench_decog(bench_sub) -> None:
    p = bench_sub.add_parser("decog", help="Deco-G: exact verification, TV against masking on SmolLM2, a task, speed",
                             description="The exact HMM-as-LM experiment; on SmolLM2 a finite language (exact TV to "
                                         "the model's distribution restricted to it, masking against Deco-G with an "
                                         "HMM distilled from the model); short answers with the prompt holding only "
                                         "the question; the step cost against a forward pass for several H. Writes "
                                         "decog.json and decog-tv.png.")
    p.add_argument("--parts", default="exact,finite,task,speed")
    p.add_argument("--hidden", type=int, default=64, help="hidden states of the task's HMM (default 64)")
    p.add_argument("--finite-hidden", default="16,64", help="HMM sizes for the finite language (default 16,64)")
    p.add_argument("--samples", type=int, default=1024, help="model samples to distil the finite part's HMM from")
    p.add_argument("--task-samples", type=int, default=64, help="model samples per question for the task's HMM")
    p.add_argument("--hidden-sizes", default="32,64,128,256", help="H values timed in the speed part")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="bench-out/decog")
    p.set_defaults(func=_run_bench_decog)


def _run_bench_decog(args) -> int:
    offline()
    from ..bench.decog import run_decog_bench

    run_decog_bench(parts=tuple(args.parts.split(",")), hidden=args.hidden, samples=args.samples,
                    finite_hidden=tuple(int(h) for h in args.finite_hidden.split(",")),
                    task_samples=args.task_samples, hidden_sizes=tuple(int(h) for h in args.hidden_sizes.split(",")),
                    seed=args.seed, out_dir=args.output)
    print(f"wrote {args.output}/decog.json and {args.output}/decog-tv.png")
    return 0
