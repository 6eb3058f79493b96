"""Benchmarks: MaskBench (mask speed and correctness) with peer-engine adapters,
and JSONSchemaBench end to end (a real model generating under each engine).

* :mod:`structgen.bench.maskbench` -- the MaskBench protocol and runner
  (``structgen bench mask``);
* :mod:`structgen.bench.engines` -- adapters: structgen, llguidance, xgrammar,
  outlines-core;
* :mod:`structgen.bench.jsonschemabench` -- end-to-end generation runner
  (``structgen bench jsonschemabench``): coverage, compliance, TTFT/TPOT, overhead;
* :mod:`structgen.bench.gen_engines` -- its engines: structgen, unconstrained,
  the peers in structgen's decoding loop, llama.cpp;
* :mod:`structgen.bench.watchdog` -- supervised worker processes (timeouts, crashes);
* :mod:`structgen.bench.tokenizers` -- tokenizer presets (deepseek, smollm2) and token bytes;
* :mod:`structgen.bench.report` -- summaries, tables, ratios, CDF plots.

Importing this package is cheap: engines are imported inside worker processes.
"""
from __future__ import annotations

from .engines import ENGINES, MaskEngine, engine_available
from .maskbench import MaskBenchConfig, MaskBenchResult, run_maskbench, run_schema
from .watchdog import Worker

__all__ = [
    "ENGINES",
    "MaskEngine",
    "engine_available",
    "MaskBenchConfig",
    "MaskBenchResult",
    "run_maskbench",
    "run_schema",
    "Worker",
]
