"""GrammarCompiler: the one place that joins front ends (grammar/) and the engine.

One compiler per tokenizer: it owns the vocabulary trie (built once, cached on
disk) and a cache of compiled grammars keyed by their source, so serving many
requests with the same schema compiles it once.
"""
from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterable

from .engine.compiled import CompiledGrammar
from .engine.counted import use_string_automata
from .engine.exact_masks import warm_up as warm_up_exact_masks
from .engine.lazy_patterns import warm_up as warm_up_lazy_patterns
from .errors import CompileLimitExceeded, GrammarError, InvalidArgument, SchemaError, UnsatisfiableSchema, \
    UnsupportedFeature
from .shipped import shipped_grammar
from .engine.lexer_kernels import warm_up_lexer_kernels
from .engine.trie import TokenTrie, warm_up_kernels
from .engine.untracked import freeze_long_lived
from .engine.walks import warm_up_walk_kernels
from .automata.fsa import difference_literals, nfa_tables, warm_up_fsa_kernels
from .grammar.ir import GrammarIR, Repeat, Sym
from .grammar.indenter import resolve_indenter
from .grammar.lark import lark_to_ir, load_lark_text
from .grammar.json_strings import class_string_dfa, string_dfa
from .automata.lazy_dfa import warm_up_lazy_dfa
from .engine.lazy_regex import LazyRegexGrammar
from .grammar.lookaround import has_lookaround
from .grammar.regex import build_nfa, compile_regex, counted_class_dfa, parse as parse_regex
from .byte_lru import budget_bytes, reserve_budget
from .malloc_trim import trim_after

# bounded JSON strings are masked from counted walks over these automata (structgen.engine.counted)
use_string_automata(string_dfa, class_string_dfa)

#: compiled grammars kept for reuse; each holds its parser states (their masks, walks and lexer
#: cores live in the engine's process-wide caches, bounded by bytes: structgen.byte_lru)
GRAMMAR_CACHE_ENTRIES = 64
#: A regex constraint whose DFA has more states than this is tracked by a lazy DFA (states made as
#: masks reach them) instead of eager tables.
EAGER_REGEX_STATES = 2048
#: ... and at most this many bytes of them (their automata and lexer cores; the newest always stays)
GRAMMAR_CACHE_BYTES = 128 << 20
reserve_budget("compiler.grammars", GRAMMAR_CACHE_BYTES)  # scaled by structgen.set_cache_budget
DEEP_STACK_BYTES = 512 * 1024 * 1024
DEEP_RECURSION_LIMIT = 100_000


#: Default bounds of one compile (``GrammarCompiler(compile_timeout=..., compile_max_memory=...)``).
COMPILE_TIMEOUT_S = 60.0
COMPILE_MAX_MEMORY = 4 << 30  # bytes of resident memory the process may grow by during one compile
_POLL_S = 0.02
_RESEND_S = 0.5  # a cancellation not acted on within this is sent again


class _Cancelled(BaseException):
    """Raised inside the compile thread to stop a compile past its bounds (never escapes structgen)."""


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


def _resident_bytes() -> int | None:
    """The process's resident memory (Linux ``/proc``); None where it cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


try:
    _PAGE = os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
    _PAGE = 4096


class _DeepRunner:
    """One long-lived thread with a large stack that runs compiles: deeply nested schemas
    recurse deeply, and starting a 512 MiB-stack thread per compile cost ~0.3 ms.

    The caller waits for its job while watching the clock and the process's resident memory; a job
    past its bounds is stopped by raising :class:`_Cancelled` in the compile thread (delivered at the
    next Python bytecode, so within a numba kernel's run at worst), which unwinds the compile and
    leaves the thread serving the next job."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._state = threading.Lock()  # guards which job runs, against a late cancellation
        self._running: object | None = None

    def _loop(self) -> None:
        import sys

        while True:
            box = done = None
            try:
                fn, box, done = self._jobs.get()
                old = sys.getrecursionlimit()
                sys.setrecursionlimit(max(old, DEEP_RECURSION_LIMIT))
                with self._state:
                    self._running = box
                try:
                    box["value"] = fn()
                except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                    box["error"] = e
                finally:
                    with self._state:
                        self._running = None
                        _set_async_exc(threading.get_ident(), None)  # a cancellation that came too late
                    sys.setrecursionlimit(old)
                    done.set()
            except _Cancelled:  # delivered between the job's end and the clearing above
                if box is not None and done is not None and not done.is_set():
                    box.setdefault("error", _Cancelled())
                    done.set()
            finally:
                fn = box = done = None  # this frame waits for the next job: it must not keep this one's result

    def run(self, fn, *, timeout: float | None = None, max_memory: int | None = None) -> dict:
        """``{"value": ...}`` or ``{"error": exception}``; ``{"limit": "timeout" | "memory", ...}`` when
        the job was stopped at its bounds."""
        if threading.current_thread() is self._thread:  # a compile inside a compile: already deep and bounded
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
            thread = self._thread
            box: dict = {}
            done = threading.Event()
            start_rss = _resident_bytes()
            t0 = time.monotonic()
            self._jobs.put((fn, box, done))
            try:
                return self._wait(thread, box, done, t0, start_rss, timeout, max_memory)
            finally:
                # a big compile's freed temporaries (and what the caches evicted to make room for
                # its results) stay in the compile thread's malloc arena unless given back
                end_rss = _resident_bytes()
                trim_after(time.monotonic() - t0, None if end_rss is None or start_rss is None else end_rss - start_rss)

    def _cancel(self, thread, box: dict) -> bool:
        """Raise :class:`_Cancelled` in the compile thread if it still runs ``box``'s job."""
        with self._state:
            if self._running is box:
                _set_async_exc(thread.ident, _Cancelled)
                return True
            return False

    def _wait(self, thread, box: dict, done: threading.Event, t0: float, start_rss: int | None,
              timeout: float | None, max_memory: int | None) -> dict:
        """Wait for the job in ``box``, stopping it past ``timeout`` or ``max_memory``."""
        if timeout is None and max_memory is None:
            done.wait()
            return box
        if max_memory is None:
            start_rss = None
        while not done.wait(_POLL_S):
            limit = None
            if timeout is not None and time.monotonic() - t0 > timeout:
                limit = "timeout"
            elif start_rss is not None:
                rss = _resident_bytes()
                if rss is not None and rss - start_rss > max_memory:
                    limit = "memory"
            if limit is not None:
                cancelled = self._cancel(thread, box)
                # sent again while the job still runs: code that catches every exception (a garbage
                # collector callback of another library, "Exception ignored in ...") can swallow one
                while cancelled and not done.wait(_RESEND_S):
                    self._cancel(thread, box)
                done.wait()
                # the exception may surface wrapped (raised inside a numba dispatcher's Python
                # callback it comes back as SystemError): any error of a cancelled job is the cancellation;
                # a job that finished anyway (in a C call, or in code that swallowed the exception)
                # still ran past its bound, which the caller is told alike
                if cancelled:
                    import gc

                    box.clear()
                    gc.collect()  # what the stopped compile built goes now, not at some later collection
                    box["limit"] = limit
                    box["seconds"] = time.monotonic() - t0
                return box
        return box


_deep_runner = _DeepRunner()


def run_deep(fn, *, timeout: float | None = None, max_memory: int | None = None):
    """Run ``fn`` on the compile thread, whose stack is large: deeply nested schemas recurse deeply.

    Errors propagate to the caller; a schema never crashes the process with a RecursionError at
    Python's default limit.  ``timeout`` (seconds) and ``max_memory`` (bytes the process's resident
    memory may grow by) bound the run: past either, the compile is stopped and
    ``CompileLimitExceeded`` raised.  The runner's lock makes compiles one at a time."""
    box = _deep_runner.run(fn, timeout=timeout, max_memory=max_memory)
    if "limit" in box:
        if box["limit"] == "timeout":
            raise CompileLimitExceeded(f"compile stopped after {box['seconds']:.1f} s: over its time bound of "
                                       f"{timeout:g} s (raise compile_timeout / timeout=, or simplify the constraint)",
                                       limit="timeout")
        raise CompileLimitExceeded(f"compile stopped after {box['seconds']:.1f} s: the process grew by more than "
                                   f"{max_memory / 2**20:.0f} MiB (raise compile_max_memory / max_memory=, or "
                                   "simplify the constraint)", limit="memory")
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

    def __init__(self, tokenizer, *, cache_size: int = GRAMMAR_CACHE_ENTRIES,
                 compile_timeout: float | None = COMPILE_TIMEOUT_S, compile_max_memory: int | None = COMPILE_MAX_MEMORY):
        """``compile_timeout`` (seconds) and ``compile_max_memory`` (bytes the process's resident memory
        may grow by during one compile) bound every ``compile_*`` call (None: unbounded); a call's own
        ``timeout=`` / ``max_memory=`` override them.  Past a bound, ``CompileLimitExceeded``."""
        self.compile_timeout, self.compile_max_memory = compile_timeout, compile_max_memory
        self.tokenizer = tokenizer
        fp = tokenizer.fingerprint() if hasattr(tokenizer, "fingerprint") else None
        self.trie = TokenTrie.cached(tokenizer.token_bytes, frozenset(tokenizer.special_ids), tokenizer.vocab_size,
                                     fingerprint=fp)
        warm_up_kernels(self.trie)
        warm_up_fsa_kernels()
        warm_up_lexer_kernels()
        warm_up_walk_kernels()
        warm_up_lazy_dfa(self.trie)
        _warm_up_string_automata(self.trie)
        warm_up_exact_masks(self.trie)
        warm_up_lazy_patterns(self.trie)
        self._cache: OrderedDict[tuple, CompiledGrammar] = OrderedDict()
        self._sizes: dict[tuple, int] = {}  # bytes of each cached grammar, as last weighed
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._warm_up_schema_path()
        freeze_long_lived()  # the kernels and modules just loaded stay out of every later full collection

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
        self.clear_cache()

    def clear_cache(self) -> None:
        """Forget every compiled grammar this compiler keeps (cold-start measurements)."""
        with self._lock:
            self._cache.clear()
            self._sizes.clear()

    def _cached(self, key: tuple, build) -> CompiledGrammar:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        g = build()
        with self._lock:
            # bounded by count and by bytes: one schema with megabyte automata and lexer cores weighs
            # more than 60 small ones.  A grammar is weighed when it comes in, and the one before it
            # again (its lexers grow as it is used, and it has usually been used since)
            if self._cache:
                prev = next(reversed(self._cache))
                self._sizes[prev] = self._cache[prev].nbytes()
            self._cache[key] = g
            self._sizes[key] = g.nbytes()
            total = sum(self._sizes.values())
            while len(self._cache) > 1 and (len(self._cache) > self._cache_size or total > budget_bytes("compiler.grammars")):
                old, _ = self._cache.popitem(last=False)
                total -= self._sizes.pop(old)
        return g

    def _bounded(self, job, timeout: float | None, max_memory: int | None):
        """``job()`` on the compile thread within this call's bounds (the compiler's by default)."""
        return run_deep(job, timeout=self.compile_timeout if timeout is None else timeout,
                        max_memory=self.compile_max_memory if max_memory is None else max_memory)

    def compile_ir(self, ir: GrammarIR, *, kind: str = "grammar", validator=None, timeout: float | None = None,
                   max_memory: int | None = None) -> CompiledGrammar:
        return self._bounded(lambda: CompiledGrammar(ir, self.tokenizer, self.trie, kind=kind, validator=validator),
                             timeout, max_memory)

    def compile_regex(self, pattern: str, *, timeout: float | None = None,
                      max_memory: int | None = None) -> CompiledGrammar:
        """The whole output must match ``pattern`` (Python ``re.fullmatch`` semantics)."""

        def build():
            lazy = self._lazy_regex(pattern)
            if lazy is not None:
                return lazy
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

        return self._bounded(lambda: self._cached(("regex", pattern), build), timeout, max_memory)

    def _lazy_regex(self, pattern: str) -> LazyRegexGrammar | None:
        """A lazy-DFA grammar for a pattern whose DFA has over :data:`EAGER_REGEX_STATES` states
        (``[ab]*a[ab]{22}``: 2**23), None for the others, which get the eager tables (and their
        walk caches).  Patterns with lookarounds and whole-string counted classes keep their
        dedicated eager constructions; a pattern the NFA builder refuses is left to the eager path
        to report."""
        if has_lookaround(parse_regex(pattern)):
            return None
        try:
            tables = nfa_tables(build_nfa(pattern))
        except (GrammarError, UnsupportedFeature):
            return None
        if not len(tables.start):
            return None
        grammar = LazyRegexGrammar(tables, self.tokenizer, self.trie, source=pattern)
        if grammar.dfa.explore(EAGER_REGEX_STATES) or counted_class_dfa(pattern) is not None:
            return None  # (the counted class is built only for the few patterns past the exploration)
        return grammar

    def compile_lark(self, grammar: str | Path, *, start: str | list[str] | None = None, indenter=None,
                     reserve_keywords: bool | None = None, soft_keywords: Iterable[str] | None = None,
                     timeout: float | None = None, max_memory: int | None = None) -> CompiledGrammar:
        """A Lark grammar given as text, as a path to a ``.lark`` file (relative ``%import`` statements
        resolve beside it) or as the name of a shipped grammar (``"json"``, ``"sql"``, ``"sparql"``,
        ``"arithmetic"``, and lark's ``"python"`` and ``"lark"``: ``structgen.shipped``), which also
        brings its start rule and indenter.  ``start``: a rule or a list of rules (any of them;
        default ``"start"``, or the shipped grammar's).  ``indenter``:
        ``"python"``, an :class:`~structgen.grammar.indenter.IndenterConfig` or a dict of its
        fields, for grammars whose ``%declare``-d indent / dedent come from lark's ``Indenter``.
        ``reserve_keywords``: a string terminal wins over a regex terminal of its priority that
        matches the same text (lark's basic lexer: ``as`` is never a ``NAME``); on by default with
        ``indenter="python"``, since Python's keywords are reserved and lark's contextual lexer
        would let ``as = 1`` through.  ``soft_keywords``: words not reserved, read as a keyword or
        a name wherever the grammar allows either (default with ``indenter="python"``: Python's
        soft keywords, ``keyword.softkwlist``: ``_ = 2`` and ``match = re.match(...)`` are Python)."""
        named = shipped_grammar(grammar) if isinstance(grammar, str) else None
        if named is not None:
            grammar = named.path
            start = named.start if start is None else start
            indenter = named.indenter if indenter is None else indenter
        start = "start" if start is None else start
        text, source = load_lark_text(grammar)
        cfg = resolve_indenter(indenter)
        python = isinstance(indenter, str) and indenter.lower() == "python"
        if reserve_keywords is None:
            reserve_keywords = python
        if soft_keywords is None:
            import keyword

            soft_keywords = keyword.softkwlist if python else ()
        soft = tuple(sorted(soft_keywords))
        starts = start if isinstance(start, str) else tuple(start)
        return self._bounded(lambda: self._cached(
            ("lark", text, source, starts, cfg, reserve_keywords, soft),
            lambda: self.compile_ir(lark_to_ir(text, start=start, source=source, indenter=cfg,
                                               reserve_keywords=reserve_keywords, soft_keywords=soft),
                                    kind="lark")),
            timeout, max_memory)

    def compile_json_schema(self, schema: Any, *, whitespace: str = "flexible", strict: bool = False,
                            lenient: bool = False, max_whitespace: int | None = None,
                            property_order: str = "schema", format: str = "assert", registry: Any = None,
                            timeout: float | None = None, max_memory: int | None = None,
                            source: str | None = None, ground_numbers: bool = False, members: str = "any",
                            plain_integers: bool = False, stated_members: bool = True) -> CompiledGrammar:
        """A JSON Schema (dict, JSON text, or Pydantic model class); see ``structgen.grammar.json_schema``.

        ``property_order="schema"`` (default) emits defined properties in definition order, then
        additional ones: deterministic and short for generation.  ``"any"`` accepts members in
        any order -- for checking or completing JSON written elsewhere (MaskBench instances).
        ``format="assert"`` (default) makes known formats (date-time, email, uuid, ...) constrain
        strings; ``"annotate"`` reads ``format`` as the spec's default does, as an annotation.
        ``registry``: the other documents ``$ref`` may name -- a ``referencing.Registry`` (whose
        retriever, if any, may fetch) or a mapping of URI to schema; the draft meta-schemas are
        always known, and nothing else is fetched.
        ``timeout`` / ``max_memory``: this call's bounds (see :class:`GrammarCompiler`).
        ``source``: grounded extraction -- string values must be spans of this text (not enum/const
        literals, keys, or fields marked ``"x-grounded": false``); see ``structgen.grammar.grounding``;
        with it, ``stated_members`` (default on) writes the optional members the text plainly states.
        ``members="any"`` (default: the spec's language) or ``"named"`` (what ``generate_json`` uses:
        objects that name members hold only those; ``strict=True`` closes every object) and
        ``plain_integers`` (integers without ``.0``): generation policies that keep every output valid
        and narrow only what the generator may write."""
        from .grammar.json_schema import SchemaOptions, schema_to_ir, normalize_schema_input
        from .grammar.json_schema.documents import registry_key

        if property_order not in ("schema", "any"):
            raise InvalidArgument(f"property_order must be 'schema' or 'any', not {property_order!r}")
        if format not in ("assert", "annotate"):
            raise InvalidArgument(f"format must be 'assert' or 'annotate', not {format!r}")
        opts = SchemaOptions(whitespace=whitespace, strict=strict, lenient=lenient, max_whitespace=max_whitespace,
                             property_order=property_order, format=format, registry=registry,
                             source=source, ground_numbers=ground_numbers, members=members,
                             stated_members=stated_members,
                             plain_integers=plain_integers)
        reg_key = registry_key(registry)

        def build(schema):
            ir, validator = schema_to_ir(schema, opts)
            try:
                return self.compile_ir(ir, kind="json", validator=validator)
            except GrammarError as e:
                if "derives no string" in str(e):  # e.g. required keys that every oneOf branch also requires
                    raise UnsatisfiableSchema("no JSON value satisfies this schema (its constraints contradict each other)",
                                      pointer="#") from None
                raise

        def job():
            # parsing, the cache key and the compile all recurse as deep as the schema: all on the compile thread
            doc = normalize_schema_input(schema)
            return self._cached(("json", json.dumps(doc, sort_keys=True), opts, reg_key), lambda: build(doc))

        return self._bounded(job, timeout, max_memory)

    def compile_structural_tag(self, spec: Any, *, whitespace: str = "flexible", strict: bool = False,
                               lenient: bool = False, timeout: float | None = None,
                               max_memory: int | None = None, members: str = "any",
                               plain_integers: bool = False) -> CompiledGrammar:
        """A structural tag (XGrammar's format, as a dict or JSON text): free text until a trigger, then
        the segment it selects (JSON Schema, regex, Lark, text) up to its end string, and so on; see
        ``structgen.grammar.structural_tag``.  ``whitespace`` / ``strict`` / ``lenient``: how embedded
        JSON Schemas compile (``lenient``: schemas needing checks at value boundaries compile without
        them; validate the segments afterwards); ``members`` / ``plain_integers``: generation policies,
        as in :meth:`compile_json_schema`.  Bad specs raise ``GrammarError`` /
        ``UnsupportedFeature`` / ``SchemaError`` naming the spec's JSON path."""
        from .grammar.structural_tag import StructuralTagOptions, load_structural_tag, spec_key, structural_tag_to_ir

        opts = StructuralTagOptions(whitespace=whitespace, strict=strict, lenient=lenient, members=members,
                                    plain_integers=plain_integers)

        def job():
            doc = load_structural_tag(spec)
            return self._cached(("structural_tag", spec_key(doc), opts), lambda: self.compile_ir(
                structural_tag_to_ir(doc, opts), kind="structural_tag"))

        return self._bounded(job, timeout, max_memory)

    def compile_builtin_json(self, **kw) -> CompiledGrammar:
        """Any JSON value (``grammars/json.lark`` semantics, via the schema ``{}``)."""
        return self.compile_json_schema({}, **kw)


def compiler_for(model) -> GrammarCompiler:
    """The (cached) GrammarCompiler for a model's tokenizer (kept on the model object)."""
    comp = getattr(model, "_structgen_compiler", None)
    if comp is None or comp.tokenizer is not model.info:
        comp = GrammarCompiler(model.info)
        object.__setattr__(model, "_structgen_compiler", comp)
    return comp
