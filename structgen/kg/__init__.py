"""Knowledge-graph constraints: SPARQL that always runs on the graph, and reasoning chains made only
of the graph's facts (``docs/architecture.md``, "Knowledge-graph constraints")."""
from .datasets import load_kg
from .graph import KnowledgeGraph, KnowledgeGraphError
from .generate import ChainResult, SparqlResult, generate_chain, generate_sparql
from .terms import Term

__all__ = ["KnowledgeGraph", "KnowledgeGraphError", "Term", "load_kg", "generate_sparql", "generate_chain",
           "SparqlResult", "ChainResult"]
