"""The ``structgen`` command line.

::

    structgen generate --schema person "Invent a person."
    structgen bench mask [--quick] [--engines structgen,llguidance,...] [--tokenizer deepseek] ...
    structgen bench jsonschemabench [--quick] [--engines ...] [--model PATH] [--per-dataset N] ...

Layout: one module per command group -- ``generate``, ``bench`` (the group, whose benchmarks live in
``bench_masks``, ``bench_generation`` and ``bench_robustness``), ``hmm`` (and ``bench decog``), ``kg``
(and ``bench kgqa``), ``kernels`` (the shipped numba kernels), ``serve`` (``bench vllm``, ``batch-masks``, ``gpu-masks``); ``common`` holds what
they share.  Each group has an ``add_<command>`` function that registers its parser and sets
``func`` (called with the parsed args, returns an exit code); a new command is a module with such a
function, called from :func:`build_parser`.  Heavy imports happen inside the ``_run_...``
functions, so ``structgen --help`` stays fast.

During development run it as ``python -m structgen.cli ...``; installed, the ``structgen`` console
script calls :func:`main`.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from .bench import add_bench
from .generate import add_generate
from .hmm import add_hmm
from .kernels import add_kernels
from .kg import add_kg

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``structgen`` argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="structgen",
        description="Structured generation: JSON Schema / regex / Lark grammars compiled to token automata.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    add_bench(sub)
    add_generate(sub)
    add_hmm(sub)
    add_kernels(sub)
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
