"""GrammarCompiler: the one place that joins front ends (grammar/) and the engine.

One compiler per tokenizer: it owns the vocabulary trie (built once, cached on
disk) and a cache of compiled grammars keyed by their source, so serving many
requests with the same schema compiles it once.
"""
from __future__ import annotations

import json
import queue
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from .engine.compiled import CompiledGrammar
from .engine.counted import use_string_automata
from .errors import GrammarError, SchemaError
from .engine.lexer_kernels import warm_up_lexer_kernels
from .engine.trie import TokenTrie, warm_up_kernels
from .engine.walks import warm_up_walk_kernels
from .grammar.fsa import difference_literals
from .grammar.fsa_kernels import warm_up_fsa_kernels
from .grammar.ir import GrammarIR, Repeat, Sym
from .grammar.lark import lark_to_ir, load_lark_text
from .grammar.json_strings import class_string_dfa, string_dfa
from .grammar.regex import compile_regex

# bounded JSON strings are masked from counted walks over these automata (structgen.engine.counted)
use_string_automata(string_dfa, class_string_dfa)

#: compiled grammars kept for reuse; each holds its parser states and up to MASK_CACHE_ENTRIES masks
GRAMMAR_CACHE_ENTRIES = 64
DEEP_STACK_BYTES = 512 * 1024 * 1024
DEEP_RECURSION_LIMIT = 100_000


class _DeepRunner:
    """One long-lived thread with a large stack that runs compiles: deeply nested schemas
    recurse deeply, and starting a 512 MiB-stack thread per compile cost ~0.3 ms."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _loop(self) -> None:
        import sys

        while True:
            fn, box, done = self._jobs.get()
            old = sys.getrecursionlimit()
            sys.setrecursionlimit(max(old, DEEP_RECURSION_LIMIT))
            try:
                box["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                box["error"] = e
            finally:
                sys.setrecursionlimit(old)
                done.set()
                del fn, box, done  # this frame waits for the next job: it must not keep this one's result alive

    def run(self, fn) -> dict:
        """``{"value": ...}`` or ``{"error": exception}``."""
        if threading.current_thread() is self._thread:  # a compile inside a compile: already deep
            box = {}
            try:
                box["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - re-raised by run_deep
                box["error"] = e
            return box
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                prev = threading.stack_size()
                try:
                    threading.stack_size(DEEP_STACK_BYTES)
                    self._thread = threading.Thread(target=self._loop, name="structgen-compile", daemon=True)
                    self._thread.start()
                finally:
                    threading.stack_size(prev)
        box: dict = {}
        done = threading.Event()
        self._jobs.put((fn, box, done))
        done.wait()
        return box


_deep_runner = _DeepRunner()


def run_deep(fn):
    """Run ``fn`` on the compile thread, whose stack is large: deeply nested schemas recurse deeply.

    Errors propagate to the caller; a schema never crashes the process with a
    RecursionError at Python's default limit."""
    box = _deep_runner.run(fn)
    if "error" in box:
        err = box["error"]
        if isinstance(err, RecursionError):
            raise SchemaError("schema nested too deeply to compile") from err
        raise err
    return box["value"]


def _warm_up_string_automata(trie: TokenTrie) -> None:
    """Build the string automata that schemas share (chunk terminals and their depth classes,
    the counted walk of the vocabulary, every string ``format``) as part of the per-tokenizer
    set-up, instead of inside the first schema that needs them (an ``ipv6`` or ``email``
    automaton takes 50-100 ms to build)."""
    from .engine.counted import counted_strings
    from .engine.walks import CANON_MIN_STATES
    from .grammar.formats import FORMAT_REGEXES
    from .grammar.json_strings import CHUNK_CHARS, chunk_terminals, string_dfa, tail_terminal

    depth = trie.max_depth + 1
    first, chunk = chunk_terminals()
    for d in (first, chunk, tail_terminal(0, CHUNK_CHARS - 1, True), tail_terminal(1, CHUNK_CHARS - 1, True),
              tail_terminal(0, CHUNK_CHARS - 1, False)):
        if d.n_states >= CANON_MIN_STATES:
            d.depth_classes(depth)
    counted_strings(trie)
    for fmt in FORMAT_REGEXES:
        string_dfa(formats=(fmt,))


class GrammarCompiler:
    """Compiles regexes, Lark grammars and JSON Schemas for one tokenizer."""

    def __init__(self, tokenizer, *, cache_size: int = GRAMMAR_CACHE_ENTRIES):
        self.tokenizer = tokenizer
        fp = tokenizer.fingerprint() if hasattr(tokenizer, "fingerprint") else None
        self.trie = TokenTrie.cached(tokenizer.token_bytes, frozenset(tokenizer.special_ids), tokenizer.vocab_size,
                                     fingerprint=fp)
        warm_up_kernels(self.trie)
        warm_up_fsa_kernels()
        warm_up_lexer_kernels()
        warm_up_walk_kernels()
        _warm_up_string_automata(self.trie)
        self._cache: OrderedDict[tuple, CompiledGrammar] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._warm_up_schema_path()

    def _warm_up_schema_path(self) -> None:
        """Compile and mask one small schema now, so the kernels only a schema compile or a
        bounded string's first mask reach (rule trimming, counted-string lockstep) are loaded
        -- or, on a fresh install, compiled -- here rather than inside a user's first request."""
        from .engine.matcher import Matcher

        g = self.compile_json_schema({"type": "object", "properties": {"a": {"type": "string", "maxLength": 20}}},
                                     whitespace="compact")
        m = Matcher(g)
        m.accept_string('{"a":"x')
        m.next_token_mask()
        with self._lock:
            self._cache.clear()

    def _cached(self, key: tuple, build) -> CompiledGrammar:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        g = build()
        with self._lock:
            self._cache[key] = g
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return g

    def compile_ir(self, ir: GrammarIR, *, kind: str = "grammar", validator=None) -> CompiledGrammar:
        return CompiledGrammar(ir, self.tokenizer, self.trie, kind=kind, validator=validator)

    def compile_regex(self, pattern: str) -> CompiledGrammar:
        """The whole output must match ``pattern`` (Python ``re.fullmatch`` semantics)."""

        def build():
            dfa = compile_regex(pattern)
            ir = GrammarIR(rules={}, terminals={}, start="start", source=pattern)
            if dfa.accepts_empty():
                dfa = difference_literals(dfa, [b""])
                body = Repeat(Sym("REGEX"), 0, 1) if not dfa.is_empty() else Repeat(Sym("REGEX"), 0, 0)
            else:
                body = Sym("REGEX")
            if not dfa.is_empty():
                ir.add_terminal("REGEX", dfa)
            ir.rules["start"] = body
            return self.compile_ir(ir, kind="regex")

        return self._cached(("regex", pattern), build)

    def compile_lark(self, grammar: str | Path, *, start: str = "start") -> CompiledGrammar:
        """A Lark grammar given as text or as a path to a ``.lark`` file."""
        text, source = load_lark_text(grammar)
        return self._cached(("lark", text, start),
                            lambda: self.compile_ir(lark_to_ir(text, start=start, source=source), kind="lark"))

    def compile_json_schema(self, schema: Any, *, whitespace: str = "flexible", strict: bool = False,
                            lenient: bool = False, max_whitespace: int | None = None,
                            property_order: str = "schema") -> CompiledGrammar:
        """A JSON Schema (dict, JSON text, or Pydantic model class); see ``structgen.grammar.json_schema``.

        ``property_order="schema"`` (default) emits defined properties in definition order, then
        additional ones: deterministic and short for generation.  ``"any"`` accepts members in
        any order -- for checking or completing JSON written elsewhere (MaskBench instances)."""
        from .grammar.json_schema import SchemaOptions, schema_to_ir, normalize_schema_input

        if property_order not in ("schema", "any"):
            raise ValueError(f"property_order must be 'schema' or 'any', not {property_order!r}")
        opts = SchemaOptions(whitespace=whitespace, strict=strict, lenient=lenient, max_whitespace=max_whitespace,
                             property_order=property_order)

        def build(schema):
            ir, validator = schema_to_ir(schema, opts)
            try:
                return self.compile_ir(ir, kind="json", validator=validator)
            except GrammarError as e:
                if "derives no string" in str(e):  # e.g. required keys that every oneOf branch also requires
                    raise SchemaError("no JSON value satisfies this schema (its constraints contradict each other)",
                                      pointer="#") from None
                raise

        def job():
            # parsing, the cache key and the compile all recurse as deep as the schema: all on the compile thread
            doc = normalize_schema_input(schema)
            return self._cached(("json", json.dumps(doc, sort_keys=True), opts), lambda: build(doc))

        return run_deep(job)

    def compile_builtin_json(self, **kw) -> CompiledGrammar:
        """Any JSON value (``grammars/json.lark`` semantics, via the schema ``{}``)."""
        return self.compile_json_schema({}, **kw)
