"""Token-mask engines behind one small interface, for the benchmarks.

Every adapter follows the same life cycle, driven by
:func:`structgen.bench.maskbench.run_schema`::

    engine.setup(hf_tokenizer)          # once per worker process (timed: "set-up")
    engine.compile(schema)              # once per schema (timed: TTFM)
    engine.reset()                      # before each test instance (untimed)
    engine.fill_mask(bitmask)           # \\ one TBM sample: fill the full-vocabulary
    engine.commit(token) -> bool        # /  mask, then commit the token
    engine.final_check(bitmask, view)   # at the end: is EOS allowed? (untimed)

Bitmasks are int32 ``[1, ceil(vocab_size/32)]`` (bit ``t % 32`` of word
``t // 32``), allocated by :meth:`MaskEngine.allocate_bitmask`; the harness
reads bits through a numpy view, outside the timed region.

Adapters: ``structgen`` (this project), ``llguidance``, ``xgrammar`` and
``outlines-core``.  Each is single-threaded.  Peers are optional: their
module is imported only inside the worker, and :func:`engine_available` says
(without importing) whether it is installed.
"""
from __future__ import annotations

import importlib.util
import json
from importlib import metadata
from typing import Any, Sequence

import numpy as np

__all__ = [
    "MaskEngine",
    "CompileError",
    "StructgenEngine",
    "LLGuidanceEngine",
    "XGrammarEngine",
    "OutlinesCoreEngine",
    "ENGINES",
    "PEER_ENGINES",
    "get_engine_class",
    "engine_available",
    "mask_bit",
]


class CompileError(Exception):
    """An engine reported that it cannot compile the schema (not a crash)."""


def mask_bit(view: np.ndarray, token: int) -> bool:
    """Is bit ``token`` set in row 0 of an int32 bitmask (numpy view)?"""
    w = token >> 5
    if token < 0 or w >= view.shape[-1]:
        return False
    return bool((int(view[0, w]) >> (token & 31)) & 1)


def _dist_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def modules_available(modules: Sequence[str]) -> tuple[bool, str]:
    """(all importable?, reason when not) without importing them (``find_spec`` only): an
    engine's availability is decided in the parent process, which must not load the engine."""
    for mod in modules:
        try:
            if importlib.util.find_spec(mod) is None:
                return False, f"module {mod!r} is not installed"
        except (ImportError, ValueError) as e:  # a parent package fails to import
            return False, f"module {mod!r} cannot be imported: {e!r}"
    return True, ""


class MaskEngine:
    """Base class of the benchmark adapters (see the module docstring).

    Subclasses set ``name``, ``modules`` (import names that must be installed),
    ``dist`` (the distribution whose version is reported) and, after
    :meth:`setup`, ``vocab_size`` and ``eos_token_ids``.

    ``compile_error_types``: exceptions from :meth:`compile` that mean
    "this engine refuses the schema" (classified ``compile_error``); any other
    exception is an engine bug (``crash``).  Peers signal refusals with plain
    exceptions, so it defaults to ``Exception``.

    ``options``: compile options from the run's configuration (``MaskBenchConfig.engine_options``);
    an adapter reads those it knows and ignores the rest.
    """

    name: str = "engine"
    options: dict = {}
    modules: tuple[str, ...] = ()
    dist: str | None = None
    compile_error_types: tuple[type[BaseException], ...] = (Exception,)

    vocab_size: int = 0
    eos_token_ids: Sequence[int] = ()

    # -- availability / identity (called in the parent, must not import the engine)
    @classmethod
    def available(cls) -> tuple[bool, str]:
        """(installed?, reason when not); uses ``find_spec`` only."""
        return modules_available(cls.modules)

    @classmethod
    def version(cls) -> str:
        return _dist_version(cls.dist) if cls.dist else "unknown"

    # -- life cycle -----------------------------------------------------------------
    def setup(self, tokenizer: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def compile(self, schema: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def reset(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def fill_mask(self, bitmask: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def commit(self, token: int) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def allocate_bitmask(self) -> tuple[Any, np.ndarray]:
        """(what :meth:`fill_mask` writes into, a numpy view of the same memory)."""
        bm = np.full((1, (self.vocab_size + 31) // 32), -1, dtype=np.int32)
        return bm, bm

    def final_check(self, bitmask: Any, view: np.ndarray) -> tuple[bool, str | None]:
        """After the last token: (may the output end here?, optional note).

        Default: fill the mask and look for an EOS bit -- the one check every
        engine supports the same way.
        """
        self.fill_mask(bitmask)
        return any(mask_bit(view, e) for e in self.eos_token_ids), None


# --------------------------------------------------------------------------- structgen


class StructgenEngine(MaskEngine):
    """structgen's own engine, through the public Matcher contract."""

    name = "structgen"
    modules = ("structgen.tokenizer", "structgen.compiler", "structgen.engine.matcher", "structgen.runtime.masks")
    dist = None

    @classmethod
    def version(cls) -> str:
        try:
            return _dist_version("structgen")
        except Exception:  # noqa: BLE001
            return "dev"

    def setup(self, tokenizer: Any) -> None:
        from structgen.compiler import GrammarCompiler
        from structgen.errors import StructgenError
        from structgen.tokenizer import TokenizerInfo

        self.compile_error_types = (StructgenError,)
        self.info = TokenizerInfo.from_huggingface(tokenizer)
        self.compiler = GrammarCompiler(self.info)
        self.vocab_size = int(self.info.vocab_size)
        eos = getattr(self.info, "eos_ids", None)
        if not eos:
            eos = [tokenizer.eos_token_id] if getattr(tokenizer, "eos_token_id", None) is not None else []
        self.eos_token_ids = [int(e) for e in eos]
        self.m: Any = None

    def allocate_bitmask(self) -> tuple[Any, np.ndarray]:
        from structgen.runtime.masks import allocate_token_bitmask

        bm = allocate_token_bitmask(1, self.vocab_size)
        view = bm if isinstance(bm, np.ndarray) else bm.numpy()  # CPU torch shares memory
        return bm, view

    def compile(self, schema: Any) -> None:
        from structgen.engine.matcher import Matcher

        # MaskBench instances list keys in any order (json.dumps of real data): accept them all
        opts = {k: v for k, v in self.options.items() if k in ("format", "registry")}
        grammar = self.compiler.compile_json_schema(schema, whitespace="flexible", property_order="any", **opts)
        self.m = Matcher(grammar)

    def reset(self) -> None:
        self.m.reset()

    def fill_mask(self, bitmask: Any) -> None:
        self.m.fill_next_token_bitmask(bitmask, index=0)

    def commit(self, token: int) -> bool:
        return bool(self.m.accept_token(token))

    def final_check(self, bitmask: Any, view: np.ndarray) -> tuple[bool, str | None]:
        self.fill_mask(bitmask)
        eos_bit = any(mask_bit(view, e) for e in self.eos_token_ids)
        accepting = bool(self.m.is_accepting())
        note = None
        if eos_bit != accepting:
            note = f"EOS bit {'set' if eos_bit else 'clear'} but is_accepting() is {accepting}"
        return eos_bit and accepting, note


# --------------------------------------------------------------------------- llguidance


class LLGuidanceEngine(MaskEngine):
    """llguidance: ``LLMatcher`` over ``grammar_from("json_schema", ...)``, default JSON options."""

    name = "llguidance"
    modules = ("llguidance",)
    dist = "llguidance"

    def setup(self, tokenizer: Any) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.numpy

        self._llg = llguidance
        self._fill = llguidance.numpy.fill_next_token_bitmask
        try:
            self.tok = llguidance.hf.from_tokenizer(tokenizer)
        except ValueError:  # not a "fast" tokenizer class: go through its JSON
            self.tok = llguidance.LLTokenizer(tokenizer.backend_tokenizer.to_str())
        self.vocab_size = int(self.tok.vocab_size)
        self.eos_token_ids = list(getattr(self.tok, "eos_tokens", None) or [self.tok.eos_token])

    def compile(self, schema: Any) -> None:
        grammar = self._llg.grammar_from("json_schema", json.dumps(schema))
        m = self._llg.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise CompileError(m.get_error())
        self.m0 = m
        self.m = m

    def reset(self) -> None:
        # A rejected token leaves an LLMatcher in a sticky error state, so each
        # instance starts from a copy of the freshly compiled matcher.
        self.m = self.m0.deep_copy()

    def fill_mask(self, bitmask: Any) -> None:
        self._fill(self.m, bitmask, 0)

    def commit(self, token: int) -> bool:
        return bool(self.m.consume_token(token))


# --------------------------------------------------------------------------- xgrammar


class XGrammarEngine(MaskEngine):
    """XGrammar with the JSONSchemaBench settings: ``any_whitespace=True, strict_mode=False``,
    ``GrammarCompiler(max_threads=1)``."""

    name = "xgrammar"
    modules = ("xgrammar",)
    dist = "xgrammar"

    def setup(self, tokenizer: Any) -> None:
        import xgrammar as xgr

        self._xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer))
        self.compiler = xgr.GrammarCompiler(info, max_threads=1)
        self.vocab_size = int(info.vocab_size)
        self.eos_token_ids = [int(t) for t in info.stop_token_ids]

    def compile(self, schema: Any) -> None:
        cg = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=True, strict_mode=False)
        self.m = self._xgr.GrammarMatcher(cg)

    def reset(self) -> None:
        self.m.reset()

    def fill_mask(self, bitmask: Any) -> None:
        self.m.fill_next_token_bitmask(bitmask, 0)

    def commit(self, token: int) -> bool:
        return bool(self.m.accept_token(token))


# --------------------------------------------------------------------------- outlines-core


class OutlinesCoreEngine(MaskEngine):
    """outlines-core: schema -> regex (``build_regex_from_schema``, default whitespace)
    -> ``Index`` over a ``Vocabulary`` of exact token bytes -> ``Guide``.

    The index is built eagerly over the whole regex DFA, so compile time can
    explode for large schemas: the per-schema timeout is what bounds it.
    """

    name = "outlines-core"
    modules = ("outlines_core",)
    dist = "outlines_core"

    def setup(self, tokenizer: Any) -> None:
        import outlines_core
        from outlines_core.json_schema import build_regex_from_schema
        from outlines_core.kernels.numpy import fill_next_token_bitmask

        from .tokenizers import token_bytes_map

        self._oc = outlines_core
        self._regex = build_regex_from_schema
        self._fill = fill_next_token_bitmask
        eos = tokenizer.eos_token_id
        if eos is None:
            raise ValueError("outlines-core needs an EOS token id")
        by_id, _special = token_bytes_map(tokenizer)
        vocab: dict[bytes, list[int]] = {}
        for i, b in by_id.items():
            if i != eos and b:
                vocab.setdefault(b, []).append(i)
        self.vocabulary = outlines_core.Vocabulary(int(eos), vocab)
        self.vocab_size = max(len(tokenizer), max(by_id) + 1, int(eos) + 1)
        self.eos_token_ids = [int(eos)]

    def compile(self, schema: Any) -> None:
        rx = self._regex(json.dumps(schema))
        self.index = self._oc.Index(rx, self.vocabulary)
        self.guide = self._oc.Guide(self.index)

    def reset(self) -> None:
        self.guide.reset()

    def fill_mask(self, bitmask: Any) -> None:
        self._fill(self.guide, bitmask)

    def commit(self, token: int) -> bool:
        try:
            self.guide.advance(token, return_tokens=False)
        except (ValueError, RuntimeError, KeyError):
            return False
        return True


ENGINES: dict[str, type[MaskEngine]] = {
    "structgen": StructgenEngine,
    "llguidance": LLGuidanceEngine,
    "xgrammar": XGrammarEngine,
    "outlines-core": OutlinesCoreEngine,
}
PEER_ENGINES = ("llguidance", "xgrammar", "outlines-core")
_ALIASES = {"llg": "llguidance", "xgr": "xgrammar", "outlines": "outlines-core", "outlines_core": "outlines-core"}


def lookup_engine(engine, registry: dict, aliases: dict):
    """A class from a registry by name or alias (case-insensitive), or a class as is."""
    if isinstance(engine, type):
        return engine
    key = aliases.get(engine.lower(), engine.lower())
    try:
        return registry[key]
    except KeyError:
        raise ValueError(f"unknown engine {engine!r}; known: {', '.join(registry)}") from None


def usable_engines(names, get_class, echo, hint=lambda cls: "") -> tuple[list[type], dict[str, str]]:
    """The engine classes of ``names`` that exist and are installed, each once, in order, and
    ``{name: why}`` for the others (each said through ``echo``; ``hint(cls)``: how to install it)."""
    engines: list[type] = []
    skipped: dict[str, str] = {}
    for e in names:
        try:
            cls = get_class(e)
        except ValueError as err:
            skipped[str(e)] = str(err)
            echo(f"skipping engine {e!r}: {err}")
            continue
        ok, why = cls.available()
        if not ok:
            skipped[cls.name] = why
            echo(f"skipping engine {cls.name!r}: {why}{hint(cls)}")
            continue
        if cls not in engines:
            engines.append(cls)
    return engines, skipped


def get_engine_class(engine: str | type[MaskEngine]) -> type[MaskEngine]:
    """An adapter class from its name (or alias: llg, xgr, outlines), or a class as is."""
    return lookup_engine(engine, ENGINES, _ALIASES)


def engine_available(engine: str | type[MaskEngine]) -> tuple[bool, str]:
    """(installed?, reason) without importing the engine."""
    return get_engine_class(engine).available()
