"""``structgen kg serve`` (a graph as a SPARQL endpoint) and ``structgen bench kgqa`` (the knowledge-graph
benchmark)."""
from __future__ import annotations

import argparse

from .common import offline

__all__ = ["add_bench_kgqa", "add_kg"]


def add_kg(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kg", help="knowledge graphs: serve one as a SPARQL endpoint")
    kg_sub = p.add_subparsers(dest="kg_command", metavar="COMMAND")
    kg_sub.required = True
    s = kg_sub.add_parser("serve", help="serve a graph (countries, umls, or a .ttl/.nt file) at http://HOST:PORT/sparql")
    s.add_argument("graph", help="countries, umls, or a Turtle / N-Triples file")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8890)
    s.set_defaults(func=_serve)


def _serve(args) -> int:
    from pathlib import Path

    from ..kg import KnowledgeGraph, load_kg
    from ..kg.serve import serve_graph

    kg = KnowledgeGraph.from_file(args.graph) if Path(args.graph).is_file() else load_kg(args.graph)
    serve_graph(kg, args.host, args.port, block=True)
    return 0


def add_bench_kgqa(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser("kgqa", help="knowledge-graph QA: SPARQL and chains unconstrained / grammar / graph",
                             description="Random constrained queries and chains checked against the graph; a seeded "
                                         "question set with gold answers answered by SmolLM2 writing SPARQL "
                                         "(no constraint, grammar, grammar+graph) and reasoning chains (format, "
                                         "graph); the index and masks on a synthetic graph of 10^6 triples. "
                                         "Writes kgqa.json, questions.json, sparql.json and chains.json.")
    p.add_argument("--graph", default="countries", help="countries or umls (default countries)")
    p.add_argument("--parts", default="soundness,sparql,chain,scale")
    p.add_argument("--questions", type=int, default=300, help="questions made from the graph (default 300)")
    p.add_argument("--limit", type=int, default=None, help="ask only the first N questions")
    p.add_argument("--soundness-n", type=int, default=1000, help="random queries and chains (default 1000 each)")
    p.add_argument("--scale-triples", type=int, default=1_000_000)
    p.add_argument("--scale-entities", type=int, default=100_000)
    p.add_argument("--model", default=None, help="model folder, .gguf file or transformers id (default: SmolLM2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="bench-out/kgqa")
    p.set_defaults(func=_run)


def _run(args) -> int:
    offline()
    from ..bench.kgqa import run_kgqa_bench

    run_kgqa_bench(graph=args.graph, parts=tuple(args.parts.split(",")), questions=args.questions, limit=args.limit,
                   soundness_n=args.soundness_n, scale_triples=args.scale_triples,
                   scale_entities=args.scale_entities, seed=args.seed, out_dir=args.output, model=args.model)
    print(f"wrote {args.output}/kgqa.json")
    return 0
