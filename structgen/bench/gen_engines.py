"""Generation engines for the end-to-end benchmark (``structgen bench jsonschemabench``).

Each engine turns (model, prompt, schema) into text.  Life cycle, driven by
:mod:`structgen.bench.jsonschemabench`::

    engine.setup(model)                                  # once per worker (untimed)
    handle = engine.compile(schema)                      # timed: compile time
    out = engine.generate(model, prompt_text, prompt_ids, handle, max_tokens=...)

**One decoding loop for everyone.**  Every engine except llama.cpp runs
through structgen's own KV-cache loop (:func:`structgen.runtime.loop.generate_constrained`
/ :func:`~structgen.runtime.loop.generate_unconstrained`): same model object,
same prompt ids, greedy decoding, same ``max_tokens``, one forward pass per
token.  Only the matcher differs:

* ``structgen`` -- structgen as users call it (:func:`structgen.generate_json`):
  ``whitespace="compact"`` and the finish-within-budget guard
  (:class:`structgen.runtime.BudgetGuard`), which is only reachable through this loop;
* ``structgen-noguard`` -- the same grammar without the guard (what the
  transformers ``LogitsProcessor`` integration gives), to isolate the guard's effect;
* ``llguidance`` / ``xgrammar`` / ``outlines-core`` -- the MaskBench adapters of
  :mod:`structgen.bench.engines` (JSONSchemaBench settings) behind a small
  matcher shim (:class:`MaskEngineMatcher`);
* ``unconstrained`` -- no matcher: the baseline for overhead and compliance.

``llamacpp`` / ``llamacpp-unconstrained`` run llama.cpp's own loop
(``llama-cpp-python``, optional extra ``structgen[llamacpp]``) on the same GGUF
file, with llama.cpp's JSON-Schema-to-GBNF grammar: the engine a CPU user
would otherwise pick.  Different weights arithmetic (quantized Q4_1 kernels
vs our dequantized fp32) means its outputs and speeds are compared with its
own unconstrained baseline, not with ours.

Timing, for every engine the same way: ``t_start`` just before the prompt is
submitted to the loop, ``t_first`` when the first output token is sampled
(measured as the start of the next forward pass; the end when there is none),
``t_end`` when the loop returns.  TPOT = ``(t_end - t_first) / (n_tokens - 1)``
where ``n_tokens`` counts every sampled token including the final EOS.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any, Sequence

import numpy as np

from .engines import (CompileError, MaskEngine, _dist_version, get_engine_class, lookup_engine, mask_bit,
                      modules_available)

__all__ = [
    "GenEngine",
    "GenOutput",
    "MaskEngineMatcher",
    "StructgenGen",
    "StructgenNoGuardGen",
    "StructgenSpeculativeGen",
    "StructgenTorchLinearGen",
    "UnconstrainedGen",
    "PeerGen",
    "LLGuidanceGen",
    "XGrammarGen",
    "OutlinesCoreGen",
    "LlamaCppGen",
    "LlamaCppUnconstrainedGen",
    "GEN_ENGINES",
    "get_gen_engine_class",
    "run_common_loop",
]


@dataclasses.dataclass
class GenOutput:
    """One generation: text and timings (absolute ``perf_counter`` seconds).

    ``finish``: ``eos`` (EOS sampled), ``terminated`` (the constraint could not
    continue), ``length`` (``max_tokens`` reached: unterminated) or ``error``
    (the engine stopped with an error, ``error`` says why).
    """

    text: str
    finish: str
    n_tokens: int
    t_start: float
    t_first: float
    t_end: float
    prompt_tokens: int = 0
    prefill_s: float | None = None
    mask_s: float | None = None
    error: str | None = None
    forward_passes: int | None = None  # structgen's loop: forward passes after the prefill
    forced_tokens: int | None = None  # tokens kept from grammar-forced drafts

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# --------------------------------------------------------------------------- the common loop


class _TimedForward:
    """A transparent proxy of a transformers model that records when each forward pass starts."""

    def __init__(self, hf_model: Any) -> None:
        self._hf = hf_model
        self.calls: list[float] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(time.perf_counter())
        return self._hf(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hf, name)


def _with_hf_model(model: Any, hf_model: Any) -> Any:
    if dataclasses.is_dataclass(model):
        return dataclasses.replace(model, hf_model=hf_model)
    import types

    return types.SimpleNamespace(info=model.info, hf_model=hf_model)


def run_common_loop(model: Any, prompt_ids: Sequence[int], matcher: Any | None, *, max_tokens: int,
                    budget_guard: Any = None, speculative: bool = False, no_repeat_ngram: int = 0) -> GenOutput:
    """Greedy decoding through structgen's loop; ``matcher=None`` is unconstrained.

    A ``GenerationError`` (``max_tokens`` reached, no token allowed, a token
    rejected) is not raised: it becomes ``finish="length"`` or ``"error"``
    with the partial text.
    """
    from ..runtime.drafts import Drafter
    from ..runtime.loop import generate_constrained, generate_unconstrained
    from ..errors import GenerationError

    proxy = _TimedForward(model.hf_model)
    m = _with_hf_model(model, proxy)
    t_start = time.perf_counter()
    try:
        drafter = Drafter(model) if speculative else None  # the real model's tokenizer, not the proxy's view
        if matcher is None:
            res = generate_unconstrained(m, prompt_ids, max_tokens=max_tokens, speculative=drafter or False)
        else:
            res = generate_constrained(m, prompt_ids, matcher, max_tokens=max_tokens, budget_guard=budget_guard,
                                       speculative=drafter or False, no_repeat_ngram=no_repeat_ngram)
        t_end = time.perf_counter()
        spec = res.extra.get("speculation", {})
        out = GenOutput(text=res.text, finish=res.finish_reason, n_tokens=int(res.steps), t_start=t_start,
                        t_first=0.0, t_end=t_end, prompt_tokens=len(prompt_ids), prefill_s=res.prefill_seconds,
                        mask_s=res.mask_seconds if matcher is not None else None,
                        forward_passes=res.forward_passes - 1, forced_tokens=spec.get("accepted", {}).get("forced", 0))
    except GenerationError as e:
        t_end = time.perf_counter()
        msg = str(e)
        at_cap = e.reason == "max_tokens"
        n = e.num_tokens if e.num_tokens is not None else max(len(proxy.calls) - 1, 0)
        prefill = (proxy.calls[1] if len(proxy.calls) > 1 else t_end) - t_start if proxy.calls else None
        out = GenOutput(text=getattr(e, "partial", "") or "", finish="length" if at_cap else "error", n_tokens=n,
                        t_start=t_start, t_first=0.0, t_end=t_end, prompt_tokens=len(prompt_ids), prefill_s=prefill,
                        error=None if at_cap else msg)
    out.t_first = proxy.calls[1] if len(proxy.calls) > 1 else out.t_end
    return out


# --------------------------------------------------------------------------- engines


class GenEngine:
    """Base class (see the module docstring).

    ``constrained``: False for the baselines.  ``baseline``: the engine whose
    TPOT is the denominator of this engine's overhead.  ``settings``: one line
    for the report.  ``compile_error_types``: exceptions of :meth:`compile`
    that mean "refused" (any other exception is a crash).  ``format``: how structgen's engines
    read JSON Schema's ``format`` ("assert" or "annotate"); peers keep their own reading.
    """

    name: str = "engine"
    format: str = "assert"
    constrained: bool = True
    baseline: str = "unconstrained"
    speculative: bool = False  # structgen's loop only: drafts verified in one forward pass
    no_repeat_ngram: int = 0  # structgen's loop only: generate_json's n-gram guard (0: off)
    modules: tuple[str, ...] = ()
    dist: str | None = None
    settings: str = ""
    compile_error_types: tuple[type[BaseException], ...] = (CompileError,)

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return modules_available(cls.modules)

    @classmethod
    def version(cls) -> str:
        return _dist_version(cls.dist) if cls.dist else "-"

    def setup(self, model: Any) -> None:
        pass

    def compile(self, schema: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def matcher(self, model: Any, handle: Any) -> tuple[Any, Any]:
        """(matcher, budget guard or None) for one generation; used by the default :meth:`generate`."""
        raise NotImplementedError  # pragma: no cover

    def generate(self, model: Any, prompt_text: str, prompt_ids: Sequence[int], handle: Any, *,
                 max_tokens: int) -> GenOutput:
        matcher, guard = self.matcher(model, handle)
        return run_common_loop(model, prompt_ids, matcher, max_tokens=max_tokens, budget_guard=guard,
                               speculative=self.speculative, no_repeat_ngram=self.no_repeat_ngram)


class UnconstrainedGen(GenEngine):
    """No constraint: the model's own output (JSON extracted from it afterwards)."""

    name = "unconstrained"
    constrained = False
    baseline = "unconstrained"
    settings = "no constraint; the first JSON value of the reply (code fences stripped) is scored"

    def compile(self, schema: Any) -> Any:
        return None

    def generate(self, model, prompt_text, prompt_ids, handle, *, max_tokens):
        return run_common_loop(model, prompt_ids, None, max_tokens=max_tokens)


class StructgenGen(GenEngine):
    """structgen as ``generate_json`` compiles and decodes (its whitespace, member and integer policies,
    the finish-within-budget guard, the n-gram guard), with the benchmark's prompt (the schema's JSON:
    every engine gets the same one)."""

    name = "structgen"
    settings = 'generate_json defaults: whitespace="spaced", members="named", finish-within-budget guard'
    guard = True
    whitespace = "spaced"
    members = "named"

    @property
    def no_repeat_ngram(self) -> int:
        from ..api import JSON_NO_REPEAT_NGRAM

        return JSON_NO_REPEAT_NGRAM

    @classmethod
    def version(cls) -> str:
        v = _dist_version("structgen")
        return v if v != "unknown" else "dev"

    def setup(self, model: Any) -> None:
        from ..compiler import compiler_for
        from ..errors import StructgenError

        self.compile_error_types = (StructgenError,)
        self.compiler = compiler_for(model)

    def compile(self, schema: Any) -> Any:
        return self.compiler.compile_json_schema(schema, whitespace=self.whitespace, format=self.format,
                                                 members=self.members, plain_integers=True)

    def matcher(self, model, handle):
        from ..runtime.budget import BudgetGuard
        from ..engine.matcher import Matcher

        m = Matcher(handle)
        return m, (BudgetGuard(m) if self.guard else None)


class StructgenNoGuardGen(StructgenGen):
    """The same grammar without the guard (like the transformers LogitsProcessor integration)."""

    name = "structgen-noguard"
    settings = 'whitespace="compact", no budget guard, no n-gram guard (as StructgenLogitsProcessor)'
    guard = False
    whitespace = "compact"
    members = "any"
    no_repeat_ngram = 0


class StructgenSpeculativeGen(StructgenGen):
    """``generate_json`` as it runs now: the same matcher and guard, grammar-forced and prompt-lookup
    drafts verified in one forward pass (token-identical to ``structgen``)."""

    name = "structgen-speculative"
    settings = 'generate_json defaults (speculative=True): spaced whitespace, budget guard, drafts verified'
    speculative = True


class StructgenQuantizedGen(StructgenSpeculativeGen):
    """``generate_json`` as users get it: ``load_model()`` runs a GGUF's 4-bit layers as 4-bit weights
    (bf16 activations), like llama.cpp; outputs may differ from the dense fp32 engines at near-ties.
    Also named ``structgen-default``."""

    name = "structgen-speculative-q4"
    settings = "generate_json and load_model() defaults (a 4-bit GGUF runs as int4 weights, bf16 activations)"

    def setup(self, model: Any) -> None:
        super().setup(model)
        from ..models import quantized_copy

        self.quantized_model = quantized_copy(model)

    def generate(self, model, prompt_text, prompt_ids, handle, *, max_tokens):
        return super().generate(self.quantized_model, prompt_text, prompt_ids, handle, max_tokens=max_tokens)


class StructgenTorchLinearGen(StructgenGen):
    """The loop as the last stop shipped it: one token per forward pass through torch's ``F.linear``
    (``fast_linear`` taken off the model for the call)."""

    name = "structgen-torch-linear"
    settings = 'whitespace="compact", budget guard, one token per forward, F.linear (the previous loop)'

    def generate(self, model, prompt_text, prompt_ids, handle, *, max_tokens):
        from ..runtime import fast_linear

        with fast_linear.using(model.hf_model, fast=False):
            return super().generate(model, prompt_text, prompt_ids, handle, max_tokens=max_tokens)


class MaskEngineMatcher:
    """The decoding loop's matcher contract over a MaskBench adapter (:class:`MaskEngine`).

    The engine fills its own bitmask (its vocabulary size); the shim copies it
    into the loop's row, maps the engine's EOS ids onto the loop's (set iff
    the engine allows one of its own), and treats an accepted EOS as the end.
    """

    may_dead_end = False  # a peer's mask is all the loop sees

    def __init__(self, engine: MaskEngine, loop_eos_ids: Sequence[int]) -> None:
        self.engine = engine
        self.bm, self.view = engine.allocate_bitmask()
        self.engine_eos = [int(e) for e in engine.eos_token_ids]
        self.loop_eos = [int(e) for e in loop_eos_ids]
        self._eos_set = frozenset(self.loop_eos)
        self.eos_allowed = False
        self.done = False

    def reset(self) -> None:
        self.engine.reset()
        self.eos_allowed = False
        self.done = False

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> None:
        self.engine.fill_mask(self.bm)
        row = bitmask[index]
        out = (row.numpy() if hasattr(row, "numpy") else np.asarray(row)).view(np.uint32)
        src = np.asarray(self.view)[0].view(np.uint32)
        n = min(out.shape[0], src.shape[0])
        out[:n] = src[:n]
        out[n:] = 0
        self.eos_allowed = any(mask_bit(self.view, e) for e in self.engine_eos)
        for e in set(self.engine_eos) | self._eos_set:
            if (e >> 5) < out.shape[0]:
                out[e >> 5] &= np.uint32(~(1 << (e & 31)) & 0xFFFFFFFF)
        if self.eos_allowed:
            for e in self.loop_eos:
                if (e >> 5) < out.shape[0]:
                    out[e >> 5] |= np.uint32(1 << (e & 31))

    def accept_token(self, token_id: int) -> bool:
        if self.done:
            return False
        if token_id in self._eos_set:
            if self.eos_allowed:
                self.done = True
                return True
            return False
        return bool(self.engine.commit(int(token_id)))

    def is_accepting(self) -> bool:
        return self.eos_allowed

    def is_terminated(self) -> bool:
        return self.done


class PeerGen(GenEngine):
    """A peer mask engine (a :mod:`structgen.bench.engines` adapter) in the common loop."""

    adapter: str = ""

    def setup(self, model: Any) -> None:
        cls = get_engine_class(self.adapter)
        self.engine = cls()
        self.engine.setup(model.hf_tokenizer)
        self.compile_error_types = tuple(self.engine.compile_error_types)
        self.loop_eos = list(model.info.eos_ids)

    def compile(self, schema: Any) -> Any:
        self.engine.compile(schema)
        return self.engine  # the adapter holds the compiled state

    def matcher(self, model, handle):
        m = MaskEngineMatcher(handle, self.loop_eos)
        m.reset()
        return m, None


class LLGuidanceGen(PeerGen):
    name = adapter = "llguidance"
    modules, dist = ("llguidance",), "llguidance"
    settings = "LLMatcher over grammar_from('json_schema'), default JSON options"


class XGrammarGen(PeerGen):
    name = adapter = "xgrammar"
    modules, dist = ("xgrammar",), "xgrammar"
    settings = "compile_json_schema(any_whitespace=True, strict_mode=False), max_threads=1"


class OutlinesCoreGen(PeerGen):
    name = adapter = "outlines-core"
    modules, dist = ("outlines_core",), "outlines_core"
    settings = "build_regex_from_schema (default whitespace) -> Index -> Guide"


# --------------------------------------------------------------------------- llama.cpp


class LlamaCppGen(GenEngine):
    """llama.cpp (llama-cpp-python) on the same GGUF file, with its JSON-Schema grammar.

    Compile = ``LlamaGrammar.from_json_schema`` (schema -> GBNF, in Python) plus a
    trial ``llama_sampler_init_grammar`` (GBNF parse, C++), so a grammar llama.cpp
    cannot parse counts as not compiled.  Generation drives ``Llama.generate``
    (llama.cpp's sampler chain with the grammar sampler; greedy, no repeat
    penalty, KV cache reset so every run prefills the whole prompt).  Weight
    repacking is off (llama.cpp's ``--no-repack``; ``STRUCTGEN_LLAMACPP_REPACK=1``
    turns it back on): see :meth:`setup`.
    """

    name = "llamacpp"
    modules = ("llama_cpp",)
    dist = "llama_cpp_python"
    baseline = "llamacpp-unconstrained"
    settings = ("LlamaGrammar.from_json_schema (GBNF), Llama.generate greedy, n_threads=1, same GGUF, "
                "no weight repacking")
    compile_error_types = (Exception,)
    use_grammar = True
    n_ctx = 8192

    def setup(self, model: Any) -> None:
        import llama_cpp

        gguf = getattr(model, "source", "") or ""
        if not str(gguf).endswith(".gguf"):
            raise RuntimeError(f"llama.cpp needs a GGUF model file; {model.name!r} was loaded from {gguf!r}")
        self._llama_cpp = llama_cpp
        lc = llama_cpp.llama_cpp
        defaults = lc.llama_model_default_params
        repack = os.environ.get("STRUCTGEN_LLAMACPP_REPACK", "") == "1"

        def no_repack_defaults():
            # llama.cpp's ``--no-repack``: no "extra" weight buffers.  With them, a native
            # build on a CPU that reports AMX dies in ggml_backend_amx_mul_mat (SIGSEGV) on
            # the first multi-token batch when the VM does not grant the AMX tile state.
            params = defaults()
            params.use_extra_bufts = False
            return params

        if not repack:
            lc.llama_model_default_params = no_repack_defaults
        try:
            self.llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=self.n_ctx, n_threads=1, n_threads_batch=1,
                                       n_batch=512, seed=0, verbose=False)
        finally:
            lc.llama_model_default_params = defaults
        self.vocab = self.llm._model.vocab

    def compile(self, schema: Any) -> Any:
        if not self.use_grammar:
            return None
        from llama_cpp import LlamaGrammar

        g = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        lc = self._llama_cpp
        s = lc.llama_sampler_init_grammar(self.vocab, g._grammar.encode("utf-8"), g._root.encode("utf-8"))
        if not s:
            raise CompileError("llama.cpp could not parse the GBNF grammar generated from the schema")
        lc.llama_sampler_free(s)
        return g

    def generate(self, model, prompt_text, prompt_ids, handle, *, max_tokens):
        llm, lc = self.llm, self._llama_cpp
        ids = llm.tokenize(prompt_text.encode("utf-8"), add_bos=False, special=True)
        llm.reset()  # no prefix reuse between runs: every engine prefills its prompt
        out: list[int] = []
        finish, err = "length", None
        t_start = time.perf_counter()
        t_first = None
        try:
            for tok in llm.generate(ids, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0,
                                    reset=True, grammar=handle):
                if t_first is None:
                    t_first = time.perf_counter()
                if lc.llama_vocab_is_eog(self.vocab, tok):
                    finish = "eos"
                    break
                out.append(int(tok))
                if len(out) >= max_tokens:
                    break
        except Exception as e:  # noqa: BLE001 - a failed sampler / grammar at run time
            finish, err = "error", f"{type(e).__name__}: {e}"
        t_end = time.perf_counter()
        text = llm.detokenize(out).decode("utf-8", errors="replace")
        n = len(out) + (1 if finish == "eos" else 0)
        return GenOutput(text=text, finish=finish, n_tokens=n, t_start=t_start, t_first=t_first or t_end,
                         t_end=t_end, prompt_tokens=len(ids), error=err)


class LlamaCppUnconstrainedGen(LlamaCppGen):
    """llama.cpp without a grammar: the baseline of ``llamacpp``."""

    name = "llamacpp-unconstrained"
    constrained = False
    baseline = "llamacpp-unconstrained"
    settings = "Llama.generate greedy, no grammar, n_threads=1, same GGUF, no weight repacking"
    use_grammar = False


GEN_ENGINES: dict[str, type[GenEngine]] = {
    "structgen": StructgenGen,
    "unconstrained": UnconstrainedGen,
    "llguidance": LLGuidanceGen,
    "xgrammar": XGrammarGen,
    "outlines-core": OutlinesCoreGen,
    "llamacpp": LlamaCppGen,
    "llamacpp-unconstrained": LlamaCppUnconstrainedGen,
    "structgen-noguard": StructgenNoGuardGen,
    "structgen-speculative": StructgenSpeculativeGen,
    "structgen-torch-linear": StructgenTorchLinearGen,
    "structgen-speculative-q4": StructgenQuantizedGen,
}
_ALIASES = {"structgen-default": "structgen-speculative-q4", "llg": "llguidance", "xgr": "xgrammar", "outlines": "outlines-core", "outlines_core": "outlines-core",
            "llama.cpp": "llamacpp", "llama-cpp": "llamacpp", "none": "unconstrained"}


def get_gen_engine_class(engine: str | type[GenEngine]) -> type[GenEngine]:
    """An engine class from its name (or alias), or a class as is."""
    return lookup_engine(engine, GEN_ENGINES, _ALIASES)
