"""structgen: structured generation for language models.

Constraints (JSON Schema, regular expressions, Lark grammars) compile to token
automata; a Matcher tracks one output and fills token bitmasks; the decoding
loop never lets a token through that breaks the constraint.
"""
from __future__ import annotations

from .errors import (CompileLimitExceeded, GenerationError, GrammarError, InvalidArgument, ModelNotFound,
                     SchemaError, StructgenError, UnsatisfiableSchema, UnsupportedFeature)

__version__ = "0.1.0"

_LAZY = {
    "GrammarCompiler": ("structgen.compiler", "GrammarCompiler"),
    "CompiledGrammar": ("structgen.engine.compiled", "CompiledGrammar"),
    "Matcher": ("structgen.engine.matcher", "Matcher"),
    "TokenizerInfo": ("structgen.tokenizer", "TokenizerInfo"),
    "load_tokenizer_info": ("structgen.tokenizer", "load_tokenizer_info"),
    "load_model": ("structgen.models", "load_model"),
    "Model": ("structgen.models", "Model"),
    "DecodingOptions": ("structgen.decoding_options", "DecodingOptions"),
    "generate_json": ("structgen.api", "generate_json"),
    "generate_regex": ("structgen.api", "generate_regex"),
    "generate_grammar": ("structgen.api", "generate_grammar"),
    "generate_structural_tag": ("structgen.api", "generate_structural_tag"),
    "generate_sparql": ("structgen.kg.generate", "generate_sparql"),
    "generate_chain": ("structgen.kg.generate", "generate_chain"),
    "sample": ("structgen.api", "sample"),
    "allocate_token_bitmask": ("structgen.runtime.masks", "allocate_token_bitmask"),
    "apply_token_bitmask_inplace": ("structgen.runtime.masks", "apply_token_bitmask_inplace"),
    "fill_next_token_bitmasks": ("structgen.engine.batch_masks", "fill_next_token_bitmasks"),
    "set_cache_budget": ("structgen.byte_lru", "set_cache_budget"),
    "cache_stats": ("structgen.byte_lru", "cache_stats"),
}

__all__ = sorted(list(_LAZY) + ["StructgenError", "GrammarError", "SchemaError", "UnsatisfiableSchema",
                                "UnsupportedFeature",
                                "GenerationError", "InvalidArgument", "ModelNotFound", "CompileLimitExceeded", "__version__"])


def __getattr__(name: str):
    """Import heavy modules (torch, transformers) only when they are used."""
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(mod), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'structgen' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API too, not only what is imported yet: ``dir(structgen)`` and tab completion show
    ``generate_json`` before its first use."""
    return sorted(set(globals()) | set(__all__))
