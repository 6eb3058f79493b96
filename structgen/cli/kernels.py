"""``structgen kernels build|status``: the numba kernels compiled once for every x86-64-v3 CPU and
shipped with structgen (:mod:`structgen.automata.kernel_cache`), so a fresh install reaches its first
output without ~40 s of compiling."""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["add_kernels"]


def add_kernels(sub) -> None:
    p = sub.add_parser("kernels", help="the numba kernels shipped for x86-64-v3 CPUs: build them, or say where they are")
    ksub = p.add_subparsers(dest="kernels_command", metavar="ACTION")
    ksub.required = True
    b = ksub.add_parser("build", help="compile the kernels a first request reaches into structgen/_kernels "
                                      "(about a minute; make setup and the wheel's build run it)")
    b.set_defaults(func=_run_build)
    w = ksub.add_parser("_workload", help=argparse.SUPPRESS)
    w.set_defaults(func=_run_workload)
    s = ksub.add_parser("status", help="are the shipped kernels here, and usable on this CPU?")
    s.set_defaults(func=_run_status)


def _run_build(args) -> int:
    from ..automata.kernel_cache import SHIPPED, build_environment, shipped_files

    t0 = time.perf_counter()
    print(f"structgen: compiling the kernels for x86-64-v3 into {SHIPPED} (about a minute)", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="structgen-kernels-") as cache:
        rc = subprocess.call([sys.executable, "-m", "structgen.cli", "kernels", "_workload"],
                             env=build_environment(Path(cache)))
    if rc:
        print(f"structgen: the kernel build failed (exit {rc})", file=sys.stderr)
        return rc
    files = shipped_files()
    size = sum(f.stat().st_size for f in files)
    print(f"structgen: {len(files)} kernel files, {size / 1e6:.1f} MB, in {time.perf_counter() - t0:.0f} s",
          file=sys.stderr)
    return 0


def _run_workload(args) -> int:
    """In the build's child process: compile what a first request reaches, then record the target."""
    from ..automata.kernel_cache import write_target

    _compile_first_requests()
    write_target()
    return 0


def _compile_first_requests() -> None:
    """The compiler's warm-ups on the default tokenizer, then the shipped schemas (with generate_json's
    policies, and grounded in a source text), the shipped grammars and a few regexes, each stepped
    through a few masks as the decoding loop steps them."""
    import numpy as np

    from ..compiler import GrammarCompiler
    from ..engine.matcher import Matcher
    from ..shipped import schema_file, shipped_grammar_names, shipped_schema_names
    from ..tokenizer import load_tokenizer_info
    import json

    comp = GrammarCompiler(load_tokenizer_info("smollm2"))
    source = "Marie Curie, 42, lives at 12 Rue Lhomond in Paris and speaks French and Polish (marie@example.org)."
    grammars = []
    for name in shipped_schema_names():
        schema = json.loads(schema_file(name).read_text())
        grammars.append(comp.compile_json_schema(schema))
        grammars.append(comp.compile_json_schema(schema, whitespace="spaced", members="named", plain_integers=True))
        grammars.append(comp.compile_json_schema(schema, whitespace="spaced", members="named", plain_integers=True,
                                                 source=source))
    for name in shipped_grammar_names():
        grammars.append(comp.compile_lark(name))
    for rx in (r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])", r"[A-Z][a-z]+( [A-Z][a-z]+)*",
               r"\d+(\.\d+)?", r"(yes|no|maybe)"):
        grammars.append(comp.compile_regex(rx))
    words = np.zeros((1, (comp.tokenizer.vocab_size + 31) // 32), dtype=np.int32)
    for g in grammars:
        m = Matcher(g)
        for _ in range(8):
            m.fill_next_token_bitmask(words)
            allowed = np.flatnonzero(m.next_token_mask())
            if allowed.size == 0 or not m.accept_token(int(allowed[len(allowed) // 2])):
                break


def _run_status(args) -> int:
    from ..automata.kernel_cache import SHIPPED, shipped_files, shipped_kernels_usable

    files = shipped_files()
    print(f"{len(files)} shipped kernel files in {SHIPPED}; "
          f"{'usable' if shipped_kernels_usable() else 'not usable'} on this CPU and numba")
    return 0
