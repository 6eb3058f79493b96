"""The package's public names: listed by ``dir(structgen)`` before first use, and all importable."""
from __future__ import annotations

import importlib

import structgen


def test_dir_lists_the_lazy_public_api():
    names = dir(structgen)
    for name in ("generate_json", "generate_regex", "generate_grammar", "generate_structural_tag",
                 "generate_sparql", "generate_chain", "sample", "load_model", "GrammarCompiler", "Matcher",
                 "DecodingOptions", "StructgenError", "GrammarError", "SchemaError", "InvalidArgument",
                 "GenerationError"):
        assert name in names and name in structgen.__all__, name


def test_every_name_in_all_resolves():
    mod = importlib.import_module("structgen")
    for name in structgen.__all__:
        assert getattr(mod, name) is not None, name
