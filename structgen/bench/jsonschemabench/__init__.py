"""JSONSchemaBench, end to end: a real model generates under each engine's constraint.

For a sample of schemas from each dataset of ``../shared/data/jsonschemabench-dev.jsonl.gz``
(fields ``dataset``, ``unique_id``, ``json_schema``), the model (default: the
embedded SmolLM2-135M-Instruct; any transformers model by path) is prompted
with the schema -- its chat template around :func:`structgen.api.schema_prompt`,
exactly what :func:`structgen.generate_json` sends -- and generates greedily
under each engine (:mod:`structgen.bench.gen_engines`), all through the same
decoding loop.  Per engine and per dataset we report, with the JSONSchemaBench
paper's definitions:

* **declared coverage**: fraction of schemas the engine compiles;
* **empirical coverage**: fraction where it compiles *and* the output is JSON
  that validates against the schema (``jsonschema`` with format assertion, as
  :func:`structgen.grammar.json_schema.make_validator` does everywhere);
* **compliance** = empirical / declared;
* **unterminated**: generations that hit ``max_tokens`` before finishing;
* **compile time**; **TTFT** = compile + prefill + first token (from the
  schema being submitted to the first output token); **TPOT** = time per
  output token after the first; **overhead** = the median over schemas of
  TPOT / the baseline's TPOT on the same schema (same prompt, same model).

The unconstrained model is the baseline: its reply is scored by extracting
the first top-level JSON value (code fences stripped).

Robustness: a supervised worker process (:mod:`structgen.bench.watchdog`)
holds the model and every engine; each (schema, engine) runs as two calls
with their own time limits (compile, then generate + score), so a hang or a
crash is recorded and the run goes on.  Results are appended to one JSONL per
engine in the output folder; a rerun skips the (schema, engine) pairs already
there.  Schemas run one after the other and, for each, every engine in turn,
so a paired comparison never spans a long stretch of a noisy machine.
"""
from __future__ import annotations

from .data import DEFAULT_ENGINES, STATUSES, build_prompt, default_data_path, load_jsonschemabench, sample_cases
from .scoring import extract_json, score_output
from .worker import make_jsb_handler, make_jsb_worker
from .runner import JSBConfig, JSBResult, run_jsonschemabench
from .tables import format_dataset_table, format_markdown, format_overall_table, plot_coverage, summarize

__all__ = [
    "DEFAULT_ENGINES",
    "STATUSES",
    "default_data_path",
    "load_jsonschemabench",
    "sample_cases",
    "build_prompt",
    "extract_json",
    "score_output",
    "JSBConfig",
    "JSBResult",
    "make_jsb_handler",
    "make_jsb_worker",
    "run_jsonschemabench",
    "summarize",
    "format_overall_table",
    "format_dataset_table",
    "format_markdown",
    "plot_coverage",
]
