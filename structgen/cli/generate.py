"""``structgen generate``: text under a JSON Schema, a regular expression or a Lark grammar, with a
local model.  The constraint is checked before the model loads."""
from __future__ import annotations

import argparse
import sys

from ..sampler_methods import METHODS as SAMPLER_METHODS
from .common import offline

__all__ = ["add_generate"]


def add_generate(sub) -> None:
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
    p.add_argument("--hmm", default=None, help="the HMM for --sampler decog (made by `structgen hmm distill`); "
                   "--sampler twisted-smc distils its own when none is given")
    p.add_argument("--particles", type=int, default=8, help="SMC particles (with --sampler smc or twisted-smc)")
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
        from ..grammar.json_schema import normalize_schema_input
        from ..grammar.json_schema.input import check_schema

        schema = normalize_schema_input(args.schema)
        check_schema(schema)
        if args.registry:
            from ..grammar.json_schema.documents import as_registry
            from ..grammar.json_schema.input import read_schema_file

            args.registry_docs = read_schema_file(args.registry)
            as_registry(args.registry_docs)  # a bad entry is said now, naming its URI
        return schema
    if args.regex:
        from ..grammar.regex import compile_regex

        compile_regex(args.regex)
        return None
    from ..grammar.lark import lark_to_ir, load_lark_text
    from ..shipped import shipped_grammar

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

    from ..errors import InvalidArgument

    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidArgument(f"--source {path}: {e.strerror or e}") from None


def _run_generate(args) -> int:
    import json as _json

    offline()
    from ..errors import StructgenError

    try:
        schema = _checked_constraint(args)  # a bad schema, regex or grammar is said before the model loads
        from ..api import generate_grammar, generate_json, generate_regex
        from ..decoding_options import DecodingOptions
        from ..models import load_model

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
