"""What a user gets from `pip install structgen-*.whl`: run from outside the checkout, in a
virtualenv that holds only the built wheel and its dependencies (make test-wheel).

Each line printed is one capability working from the installed package: a JSON Schema answer on the
embedded SmolLM2 model, a shipped grammar by name (and lark's python.lark with its indenter), the
example schemas as package data, a SPARQL query decoded under a knowledge graph and run on it, and
structgen's vLLM plugin entry point."""
from __future__ import annotations

import json
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

import jsonschema

import structgen
from structgen import generate_grammar, generate_json, generate_sparql, load_model
from structgen.shipped import schema_file, shipped_grammar_names

CHECKOUT = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else None

where = Path(structgen.__file__).resolve()
assert "site-packages" in where.parts, f"structgen imported from {where}, not from an installed wheel"
assert CHECKOUT is None or where.parent != CHECKOUT / "structgen", f"structgen imported from the checkout: {where}"
print(f"structgen {structgen.__version__} from {where.parent}")

from structgen.automata.kernel_cache import count_compiles, shipped_files, shipped_kernels_usable  # noqa: E402

compiled = count_compiles()
t0 = time.perf_counter()
model = load_model()
person = json.loads(schema_file("person").read_text())
value = generate_json(model, person, "Invent a person.", max_tokens=96)
jsonschema.validate(value, person)
print(f"generate_json(person.json): {value} ({time.perf_counter() - t0:.1f} s from load_model)")
assert shipped_files(), "the wheel holds no shipped kernels (structgen kernels build before pip wheel)"
if shipped_kernels_usable():  # an x86-64-v3 CPU and the numba the kernels were built with
    assert not compiled, f"the first generate_json compiled {len(compiled)} kernels: {compiled[:8]}"
    print(f"shipped kernels: {len(shipped_files())} files, nothing compiled before the first output")
else:
    print(f"shipped kernels not usable here; {len(compiled)} kernels compiled")

names = shipped_grammar_names()
assert {"json", "sql", "sparql", "arithmetic", "python", "lark"} <= set(names), names
expr = generate_grammar(model, "arithmetic", "Write an arithmetic expression that equals 10.", max_tokens=24)
print(f"generate_grammar('arithmetic'): {expr!r}")
python = structgen.GrammarCompiler(model.info).compile_lark("python")  # lark's python.lark, its indenter
m = structgen.Matcher(python)
assert m.accept_string("for _ in range(3):\n    print(_)\n") and m.is_accepting()
print("compile_lark('python'): lark's python.lark with its indenter accepts a loop")

from structgen.kg import load_kg  # noqa: E402 - the kg extra

kg = load_kg("countries")
r = generate_sparql(model, "What is the capital of Germany?", kg)
print(f"generate_sparql: {r.query!r} -> {r.answers[:3]}")

plugins = {ep.name: ep for ep in entry_points(group="vllm.general_plugins")}
assert "structgen" in plugins, sorted(plugins)
register = plugins["structgen"].load()
assert callable(register)
print(f"vLLM plugin entry point: {plugins['structgen'].value}")
print("wheel smoke: ok")
