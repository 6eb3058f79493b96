"""The functions most users call: generate_json, generate_regex, generate_grammar.

Each compiles the constraint once per (model tokenizer, constraint) — the
compiler is cached on the model — runs the decoding runtime (``structgen.runtime``) with the
finish-within-budget guard, and checks the result before returning it: a
JSON output is parsed and validated with ``jsonschema`` (format assertion on),
so nothing invalid is ever returned as if it were valid.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from .compiler import GrammarCompiler, compiler_for
from .engine.compiled import CompiledGrammar
from .engine.matcher import Matcher
from .decoding_options import DEFAULT_MAX_TOKENS, DecodingOptions
from .errors import GenerationError, InvalidArgument
from .deadlines import DEFAULT_TIMEOUT, deadline_after
from .models import resolve_model
from .runtime.prompts import SCHEMA_PROMPTS, request_prompt, schema_prompt, task_prompt

__all__ = ["generate_json", "generate_regex", "generate_grammar", "generate_structural_tag", "sample", "compiler_for",
           "resolve_model", "schema_prompt", "task_prompt", "reasoning_spec", "DEFAULT_MAX_TOKENS", "DecodingOptions"]


#: generate_json's no_repeat_ngram: on SmolLM2-135M it ends the loops that greedy decoding falls into
#: under a grammar (an email "john-john-john...", a tree nesting to the budget) and leaves the values
#: benchmark's field accuracy as it was (0.642 -> 0.647 and 0.645 -> 0.640 on two seeds of 30 cases)
JSON_NO_REPEAT_NGRAM = 8


def sample(model: Any, prompt: str, *, schema: Any = None, regex: str | None = None, grammar: Any = None,
           n: int = 1, method: str = "masked", particles: int = 8, temperature: float = 1.0,
           max_tokens: int = 256, seed: int | None = None, chat: bool = True, system: str | None = None,
           start: str = "start", estimator: str = "two-pass", whitespace: str = "compact", hmm: Any = None,
           prune: int | float | None = None, canonical: Any = "auto", ess_warning: float | None = 0.1):
    """``structgen.sample``: draw ``n`` outputs under one constraint with a sequence sampler.

    ``model``: a loaded ``Model``, a path or name, or None for the embedded SmolLM2 (resolved here,
    at the top level: the runtime takes a loaded model).  The other arguments are those of
    :func:`structgen.runtime.sampling.draw.sample`: ``canonical`` (default ``"auto"``) draws only the
    tokenizer's own tokenization of each text; ``ess_warning`` is the share of the weighted samples
    below which a low effective sample size warns (``LowEffectiveSampleSize``).  The result is a list
    of samples with the weighted set's ``ess`` and ``log_evidence``."""
    from .runtime.sampling.draw import sample as draw_sample

    return draw_sample(resolve_model(model), prompt, schema=schema, regex=regex, grammar=grammar, n=n,
                       method=method, particles=particles, temperature=temperature, max_tokens=max_tokens,
                       seed=seed, chat=chat, system=system, start=start, estimator=estimator,
                       whitespace=whitespace, hmm=hmm, prune=prune, canonical=canonical, ess_warning=ess_warning)


def _run(model, grammar: CompiledGrammar, prompt_text: str, opts: DecodingOptions):
    """Decode one output (see :func:`_run_tokens`) and return its ``GenerationResult``."""
    result = None
    for result in _run_tokens(model, grammar, prompt_text, opts):
        pass
    return result


def _run_tokens(model, grammar: CompiledGrammar, prompt_text: str, opts: DecodingOptions) -> Iterator:
    """Decode one output: yields each token id once it is final, then the ``GenerationResult``.

    The runtime's loop (greedy by default; ``speculative``: drafts verified in one forward pass, the
    same output) yields tokens as they come; with ``sampler``, a distribution-correcting sampler
    (``structgen.runtime.sampling``) draws the whole output first, then its tokens come at once."""
    from .runtime.budget import BudgetGuard
    from .runtime.loop import Decoding, make_drafter
    from .runtime.sampling import MaskedSampler

    deadline = deadline_after(opts.timeout)
    ids = model.encode(prompt_text)
    if opts.sampler is None or opts.sampler == "greedy":
        matcher = Matcher(grammar)
        decoding = Decoding(model, ids, matcher, max_tokens=opts.max_tokens,
                            sampler=MaskedSampler(temperature=opts.temperature or 0.0, top_p=opts.top_p,
                                                  top_k=opts.top_k, seed=opts.seed),
                            budget_guard=BudgetGuard(matcher), drafter=make_drafter(model, opts.speculative),
                            deadline=deadline, no_repeat_ngram=opts.no_repeat_ngram or 0)
        yield from decoding
        result = decoding.result()
        result.extra.setdefault("prompt", prompt_text)
        yield result
        return
    from .runtime.sampling.draw import generate_with_sampler

    result = generate_with_sampler(model, grammar, ids, max_tokens=opts.max_tokens, temperature=opts.temperature,
                                   top_p=opts.top_p, top_k=opts.top_k, seed=opts.seed, sampler=opts.sampler,
                                   particles=opts.particles, hmm=opts.hmm, deadline=deadline)
    result.extra.setdefault("prompt", prompt_text)
    yield from result.token_ids
    yield result


def _run_many(model, grammar: CompiledGrammar, prompt_texts: list[str], opts: DecodingOptions) -> list:
    """Decode one output per prompt; each entry is a ``GenerationResult`` or the exception its row raised.

    The runtime's loop runs the prompts as one batch (``structgen.runtime.batch``: one forward pass
    for every row, per-row matchers and speculation); row ``i`` samples with ``seed + i``.  A
    distribution-correcting ``sampler`` draws for each prompt in turn."""
    from .runtime.batch import run_batch
    from .runtime.budget import BudgetGuard
    from .runtime.drafts import Drafter
    from .runtime.loop import Decoding
    from .runtime.sampling import MaskedSampler

    deadline = deadline_after(opts.timeout)  # one clock for the whole batch
    seed = opts.seed

    if opts.sampler is not None and opts.sampler != "greedy":
        out: list = []
        for i, text in enumerate(prompt_texts):
            try:
                out.append(_run(model, grammar, text, opts.replace(seed=None if seed is None else seed + i)))
            except GenerationError as e:
                out.append(e)
        return out

    # Speculation pays while a wider forward pass costs about the same: up to ~8 rows of input here
    # (fast_linear's GEMM; `structgen bench decode`), i.e. 2 rows with 3 drafts each.  Measured on
    # 4 rows: 29.7 tokens/s with one draft a row, 33.3 without; on 16: 37.8 with 3, 47 without.
    drafts = 3 if len(prompt_texts) <= 2 else 0
    speculative = opts.speculative and drafts > 0

    def row(i: int, ids: list[int]):
        def make(kv):
            matcher = Matcher(grammar)
            smp = MaskedSampler(temperature=opts.temperature or 0.0, top_p=opts.top_p, top_k=opts.top_k,
                                seed=None if seed is None else seed + i)
            return Decoding(model, ids, matcher, max_tokens=opts.max_tokens, sampler=smp,
                            budget_guard=BudgetGuard(matcher),
                            drafter=Drafter(model, max_draft=drafts) if speculative else None, kv=kv,
                            deadline=deadline, no_repeat_ngram=opts.no_repeat_ngram or 0)
        return make

    pad = model.info.eos_ids[0] if model.info.eos_ids else 0
    results = run_batch(model.hf_model, [row(i, model.encode(t)) for i, t in enumerate(prompt_texts)], pad_id=pad)
    for r, text in zip(results, prompt_texts):
        if not isinstance(r, BaseException):
            r.extra.setdefault("prompt", text)
    return results


def _batch_outputs(results: list, finish, return_exceptions: bool) -> list:
    """``finish(result)`` for each row; a row's error is raised (naming the row) unless
    ``return_exceptions``, which puts it in the list instead."""
    out = []
    for i, r in enumerate(results):
        try:
            if isinstance(r, BaseException):
                raise r
            out.append(finish(r))
        except GenerationError as e:
            if not return_exceptions:
                raise GenerationError(f"prompt {i}: {e}", partial=getattr(e, "partial", ""),
                                      reason=getattr(e, "reason", "error"), num_tokens=getattr(e, "num_tokens", None)) from e
            out.append(e)
    return out


def generate_json(model, schema: Any, prompt: str | None = None, *, max_tokens: int = DEFAULT_MAX_TOKENS,
                  temperature: float | None = None, top_p: float = 1.0, top_k: int = 0, seed: int | None = None,
                  whitespace: str = "spaced", strict: bool = False, lenient: bool = False,
                  system: str | None = None, chat: bool = True, return_result: bool = False,
                  sampler: str | None = None, particles: int = 8, speculative: bool = True,
                  prompts: list[str | None] | None = None, return_exceptions: bool = False, hmm: Any = None,
                  reasoning: bool = False, think_start: str = "<think>", think_end: str = "</think>",
                  timeout: float | None = DEFAULT_TIMEOUT, stream: bool = False, format: str = "assert",
                  registry: Any = None, schema_prompt: str = "auto", source: str | None = None,
                  grounded: bool | str = True, members: str = "named", no_repeat_ngram: int | None = None) -> Any:
    """Generate one JSON value that satisfies ``schema`` and return it parsed.

    ``schema``: a dict, JSON text, or a Pydantic model class (then an instance
    is returned).  ``prompt``: the user's request; when None, one is built from
    the schema.  ``whitespace="spaced"`` (the default) writes JSON as ``json.dumps`` does (one blank
    after each ``,`` and ``:``, nowhere else): the spacing models have read most, which measured
    better values than ``"compact"`` (no blanks); both make runaway whitespace impossible, and
    ``"flexible"`` allows up to 16 blanks anywhere.  The output is validated with ``jsonschema``;
    ``GenerationError`` is raised (with ``.partial``) if generation cannot
    finish or, in ``lenient`` mode, if the result does not validate.

    ``sampler``: None decodes with the runtime's loop (greedy unless ``temperature`` > 0, with
    the finish-within-budget guard); ``"masked"``, ``"asap"``, ``"awrs"`` or ``"smc"`` (with
    ``particles``) return one output drawn from that sampler's approximation of the model's own
    distribution restricted to the schema, at ``temperature`` 1.0 unless given
    (``structgen.sample`` draws many).  ``"decog"`` (with ``hmm=``, an HMM distilled from the
    model or its path) gives the model the request alone, without the schema, and lets the HMM
    steer every token towards outputs that finish the format (a schema without recursion).

    ``speculative`` (default True): tokens the grammar forces and tokens the prompt suggests are
    drafted and checked in one forward pass; a draft is kept only where plain decoding would have
    picked the same token, so the output is the same as with ``speculative=False`` (greedy, or the
    same seed when sampling), in fewer forward passes.

    ``prompts``: a list of requests decoded as one batch (one forward pass for all rows, each row
    with its own matcher; speculation per row in batches of up to 2, where a wider forward pass
    still costs about the same; row ``i`` samples with ``seed + i``); a list of values is
    returned (of ``(value, result)`` pairs with ``return_result``).  Under greedy decoding row ``i``
    is what ``prompt=prompts[i]`` gives on the dense weights (``load_model(quantized=False)``); on
    4-bit weights a padded batch rounds its bf16 activations differently, so a near-tie may go the
    other way (every row is still valid).  A row that fails raises ``GenerationError`` naming it, or,
    with ``return_exceptions=True``, stands in the list as its exception.

    ``reasoning=True``: think first, then the JSON.  The output is free text up to ``think_end``
    (it opens with ``think_start`` unless the prompt already ends with it), up to two blanks or
    newlines, then the JSON (a structural tag: ``structgen.grammar.structural_tag``).  The value
    returned is the JSON's; with ``return_result`` the result's ``text`` is the JSON text and
    ``reasoning`` the thinking text (``extra["raw_text"]``: the whole output).  A schema that needs
    checks at value boundaries (``uniqueItems``, ``not``, ...) needs ``lenient=True`` here.

    ``format="assert"`` (default): a known ``format`` (date-time, email, uuid, ...) constrains the
    string; ``"annotate"`` reads it as the JSON Schema spec's default does, as an annotation.
    ``registry``: other documents the schema's ``$ref``s name, a ``referencing.Registry`` or a
    mapping of URI to schema (the draft meta-schemas are always known; nothing is fetched unless the
    registry's own retriever fetches).

    ``timeout`` (seconds, default 300; None for no limit): a ceiling on the call's decoding (a
    batch shares it).  Past it ``GenerationError`` (``reason="timeout"``) says where the time went
    and which checks at value boundaries the search was trying to satisfy.

    ``stream=True`` returns an iterator of :class:`~structgen.streaming.StreamEvent` instead: the
    new text and token ids of each step and ``partial``, the value written so far (a partial
    dict/list whose every part is a prefix of the final value); the last event (``done``) carries
    the validated ``value`` and the ``result``.  Decoding happens as the iterator is read.

    ``schema_prompt``: what the model is told of the schema (docs/json-schema.md shows each):
    ``"auto"`` (default) and ``"compact"`` add a short description of the fields (names, types,
    enums, bounds, required, short descriptions as context), shrunk to fit beside the request and
    the output in the context; ``"full"`` adds the schema's JSON text; ``"none"`` sends the request
    alone (the grammar still enforces every key and type).  With ``return_result`` the prompt sent
    is ``result.extra["prompt"]``.

    ``source``: the text the values come from (grounded extraction).  It is added to the request
    unless the request already holds it, and with ``grounded=True`` (default) every string value
    must be a span of it (enum and const values, keys and fields marked ``"x-grounded": false``
    excepted; a field no span can satisfy, e.g. an email the text lacks, is left free) and every
    number one the text writes (where one meets the field's bounds): values cannot be made up.
    ``grounded="strings"`` grounds strings alone; ``grounded=False`` only adds the text.
    With ``return_result``, ``result.extra["grounding"]`` lists the grounded pointers and those left
    free, with why.

    ``no_repeat_ngram`` (default 8): a token that would repeat an 8-token sequence of the output
    is chosen only where the grammar allows nothing else, which ends the loops greedy decoding of
    a small model falls into (0: off).

    ``members="named"`` (default): an object whose schema names its members holds only those (the
    output is still valid; a map-like or free-form object stays open); ``"any"``: every member the
    schema allows, as the spec reads it.  Integers are written as integer literals (``5``, not
    ``5.0``).  ``strict=True`` closes every object, free-form ones too.
    """
    from .grammar.json_schema import normalize_schema_input

    opts = DecodingOptions(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed,
                           sampler=sampler, particles=particles, hmm=hmm, speculative=speculative, timeout=timeout,
                           no_repeat_ngram=JSON_NO_REPEAT_NGRAM if no_repeat_ngram is None else no_repeat_ngram)
    _check_choice("schema_prompt", schema_prompt, SCHEMA_PROMPTS)
    _check_choice("members", members, ("named", "any"))
    _check_choice("grounded", grounded, (True, False, "strings"))
    if source is not None and not isinstance(source, str):
        raise InvalidArgument(f"source must be the text the values come from (a str), not {type(source).__name__}")
    model = resolve_model(model)
    pyd = schema if isinstance(schema, type) and hasattr(schema, "model_validate") else None
    schema_dict = normalize_schema_input(schema)
    if reasoning and sampler == "decog":
        raise InvalidArgument("reasoning=True does not combine with sampler='decog'")
    if reasoning and (registry is not None or format != "assert"):
        raise InvalidArgument("reasoning=True compiles the schema inside a structural tag, which takes neither "
                              "registry= nor format='annotate'")
    def compile_schema(stated_members: bool = True):
        return compiler_for(model).compile_json_schema(
            schema_dict, whitespace=whitespace, strict=strict, lenient=lenient, format=format, registry=registry,
            source=source if grounded is not False else None, ground_numbers=grounded is True, members=members,
            plain_integers=True, stated_members=stated_members)

    grammar = None if reasoning else compile_schema()
    if grammar is not None and source is not None and grounded is not False and not _fits(grammar, max_tokens):
        grammar = compile_schema(stated_members=False)  # the members a text states are a preference, never a failure

    def prompt_text(request: str | None) -> str:
        request = with_source(request, source)
        # Deco-G: the prompt carries the task only; the HMM carries the format
        mode = "none" if sampler == "decog" else schema_prompt
        length = model.context_length
        user = request_prompt(schema_dict, request, mode, lambda t: len(model.encode(t)),
                              None if length is None else length - max_tokens - 32, source)
        return model.chat_prompt(user, system=system) if chat else user

    validator = None
    if reasoning:
        texts = [prompt_text(p) for p in (prompts if prompts is not None else [prompt])]
        grammar, validator = _reasoning_grammar(model, schema_dict, texts, think_start, think_end,
                                                whitespace=whitespace, strict=strict, lenient=lenient,
                                                members=members, plain_integers=True)

    def finish(result):
        if reasoning:
            result = _split_reasoning(result, think_start, think_end)
        elif source is not None and getattr(grammar, "grounding", None) is not None:
            result.extra.setdefault("grounding", grammar.grounding)
        value = _json_value(grammar, result, pyd, validator)
        return (value, result) if return_result else value

    if prompts is not None:
        if prompt is not None:
            raise InvalidArgument("give prompt= or prompts=, not both")
        if stream:
            raise InvalidArgument("stream=True takes one prompt, not prompts=")
        return _batch_outputs(_run_many(model, grammar, [prompt_text(p) for p in prompts], opts), finish,
                              return_exceptions)
    return _single(model, grammar, prompt_text(prompt), finish, stream, json_partial=True,
                   json_after=think_end.encode() if reasoning else None, opts=opts)


def _fits(grammar: CompiledGrammar, max_tokens: int) -> bool:
    """Does some output of ``grammar`` fit ``max_tokens`` as the budget guard counts it?"""
    from .runtime.budget import BudgetGuard

    return BudgetGuard(Matcher(grammar)).tokens_needed(max_tokens) == 0


def with_source(request: str | None, source: str | None) -> str | None:
    """The request with the source text after it, unless it already holds it."""
    if not source or (request and source in request):
        return request
    return f"{request or 'Extract the data from this text.'}\n\nText:\n{source}"


def _check_choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise InvalidArgument(f"{name} must be one of {', '.join(map(repr, choices))}, not {value!r}")


def _single(model, grammar: CompiledGrammar, prompt_text: str, finish, stream: bool, *, json_partial: bool = False,
            json_after: bytes | None = None, opts: DecodingOptions) -> Any:
    """One prompt: ``finish(result)``, or with ``stream`` the events of its decoding."""
    if not stream:
        return finish(_run(model, grammar, prompt_text, opts))
    from .streaming import stream_events

    return stream_events(_run_tokens(model, grammar, prompt_text, opts), model.info.token_bytes, finish,
                         json_partial=json_partial, json_after=json_after)


def _json_value(grammar: CompiledGrammar, result, pyd, validator=None) -> Any:
    """The parsed output, validated with jsonschema (and the Pydantic class when there is one);
    ``validator``: instead of the grammar's."""
    try:
        value = json.loads(result.text)
    except json.JSONDecodeError as e:  # pragma: no cover - the grammar makes this impossible
        raise GenerationError(f"output is not JSON: {e}", partial=result.text) from None
    validator = validator if validator is not None else grammar.validator
    try:
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path)) if validator else []
    except Exception as e:  # noqa: BLE001 - e.g. a reference jsonschema cannot resolve: never returned unchecked
        raise GenerationError(f"the final validation of the output could not run ({type(e).__name__}: {e}); "
                              "the output is not returned unchecked", partial=result.text) from None
    if errors:
        err = errors[0]
        ptr = "/" + "/".join(str(p) for p in err.path)
        raise GenerationError(f"output does not validate at {ptr}: {err.message}", partial=result.text)
    if pyd is not None:
        value = pyd.model_validate(value)
    return value


def generate_regex(model, pattern: str, prompt: str | None = None, *, max_tokens: int = DEFAULT_MAX_TOKENS,
                   temperature: float | None = None, top_p: float = 1.0, top_k: int = 0, seed: int | None = None,
                   system: str | None = None, chat: bool = True, sampler: str | None = None,
                   particles: int = 8, speculative: bool = True, prompts: list[str] | None = None,
                   return_exceptions: bool = False, hmm: Any = None,
                   timeout: float | None = DEFAULT_TIMEOUT, stream: bool = False,
                   no_repeat_ngram: int | None = None) -> str | list:
    """Generate text that fully matches ``pattern`` (Python regex syntax); ``speculative``,
    ``prompts``, ``return_exceptions``, ``timeout`` and ``stream`` as in :func:`generate_json`."""
    opts = DecodingOptions(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed,
                           sampler=sampler, particles=particles, hmm=hmm, speculative=speculative, timeout=timeout,
                           no_repeat_ngram=no_repeat_ngram or 0)
    model = resolve_model(model)
    grammar = compiler_for(model).compile_regex(pattern)

    def finish(result) -> str:
        if re.fullmatch(pattern, result.text) is None:  # pragma: no cover - guaranteed by construction
            raise GenerationError("output does not match the pattern", partial=result.text)
        return result.text

    return _generate_text(model, grammar, prompt, prompts, finish, system=system, chat=chat,
                          return_exceptions=return_exceptions, opts=opts, stream=stream)


def _generate_text(model, grammar: CompiledGrammar, prompt: str | None, prompts: list[str] | None, finish, *,
                   system: str | None, chat: bool, return_exceptions: bool, opts: DecodingOptions,
                   stream: bool = False) -> Any:
    """The regex and grammar entry points: one prompt, or a batch of them."""
    def text(p: str) -> str:
        return model.chat_prompt(p, system=system) if chat else p

    if prompts is not None:
        if prompt is not None:
            raise InvalidArgument("give prompt= or prompts=, not both")
        if stream:
            raise InvalidArgument("stream=True takes one prompt, not prompts=")
        return _batch_outputs(_run_many(model, grammar, [text(p) for p in prompts], opts), finish, return_exceptions)
    if prompt is None:
        raise InvalidArgument("a prompt is needed (or prompts= for a batch)")
    return _single(model, grammar, text(prompt), finish, stream, opts=opts)


def generate_grammar(model, grammar: str | Path, prompt: str | None = None, *, start: str | list[str] | None = None,
                     indenter: Any = None,
                     max_tokens: int = DEFAULT_MAX_TOKENS, temperature: float | None = None, top_p: float = 1.0,
                     top_k: int = 0, seed: int | None = None, system: str | None = None, chat: bool = True,
                     sampler: str | None = None, particles: int = 8, speculative: bool = True,
                     prompts: list[str] | None = None, return_exceptions: bool = False, hmm: Any = None,
                     timeout: float | None = DEFAULT_TIMEOUT, stream: bool = False,
                     no_repeat_ngram: int | None = None) -> str | list:
    """Generate text in the language of a Lark grammar (text, a ``.lark`` path, or a shipped grammar's
    name: ``"json"``, ``"sql"``, ``"sparql"``, ``"arithmetic"``, ``"python"``, ``"lark"``); ``speculative``,
    ``prompts``, ``return_exceptions``, ``timeout`` and ``stream`` as in :func:`generate_json`; ``start`` and ``indenter``
    as in :meth:`GrammarCompiler.compile_lark <structgen.compiler.GrammarCompiler.compile_lark>`
    (``indenter="python"`` with lark's ``python.lark``, start ``file_input``)."""
    opts = DecodingOptions(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed,
                           sampler=sampler, particles=particles, hmm=hmm, speculative=speculative, timeout=timeout,
                           no_repeat_ngram=no_repeat_ngram or 0)
    model = resolve_model(model)
    compiled = compiler_for(model).compile_lark(grammar, start=start, indenter=indenter)
    return _generate_text(model, compiled, prompt, prompts, lambda r: r.text, system=system, chat=chat,
                          return_exceptions=return_exceptions, opts=opts, stream=stream)


def reasoning_spec(schema: Any, *, think_start: str | None = "<think>", think_end: str = "</think>") -> dict:
    """The structural tag of "think first, then the JSON": ``think_start`` (None: the prompt opened
    it), free text up to ``think_end``, up to two blanks or newlines, then a value of ``schema``."""
    if not think_end:
        raise InvalidArgument("think_end must not be empty")
    elements: list[dict] = [{"type": "const_string", "value": think_start}] if think_start else []
    elements += [{"type": "any_text"}, {"type": "const_string", "value": think_end},
                 {"type": "regex", "pattern": "[ \\n]{0,2}"}, {"type": "json_schema", "json_schema": schema}]
    return {"type": "structural_tag", "format": {"type": "sequence", "elements": elements}}


def _reasoning_grammar(model, schema: Any, prompt_texts: list[str], think_start: str, think_end: str, **opts):
    """The compiled reasoning grammar for these prompts and the schema's validator."""
    from .grammar.json_schema import make_validator

    opened = {bool(think_start) and t.rstrip().endswith(think_start.strip()) for t in prompt_texts}
    if len(opened) > 1:
        raise InvalidArgument(f"some prompts end with {think_start!r} and others do not: decode them in separate calls")
    spec = reasoning_spec(schema, think_start=None if opened.pop() else think_start, think_end=think_end)
    return compiler_for(model).compile_structural_tag(spec, **opts), make_validator(schema)


def _split_reasoning(result, think_start: str, think_end: str):
    """``result`` with ``text`` the JSON alone and ``reasoning`` the thinking text."""
    import dataclasses

    raw = result.text
    i = raw.find(think_end)  # the grammar keeps think_end out of the thinking text
    thinking = raw[:i] if i >= 0 else raw
    if think_start and thinking.startswith(think_start):
        thinking = thinking[len(think_start):]
    tail = raw[i + len(think_end):].lstrip(" \n") if i >= 0 else ""
    return dataclasses.replace(result, text=tail, text_bytes=tail.encode("utf-8"), reasoning=thinking,
                               extra={**result.extra, "raw_text": raw})


def generate_structural_tag(model, spec: Any, prompt: str | None = None, *, whitespace: str = "compact",
                            strict: bool = False, lenient: bool = False, max_tokens: int = DEFAULT_MAX_TOKENS,
                            temperature: float | None = None, top_p: float = 1.0, top_k: int = 0,
                            seed: int | None = None, system: str | None = None, chat: bool = True,
                            sampler: str | None = None, particles: int = 8, speculative: bool = True,
                            prompts: list[str] | None = None, return_exceptions: bool = False, hmm: Any = None,
                            timeout: float | None = DEFAULT_TIMEOUT, stream: bool = False,
                            no_repeat_ngram: int | None = None, members: str = "named"):
    """Generate text under a structural tag (XGrammar's format as a dict or JSON text: free text, and
    the segments its triggers select -- tool calls whose JSON follows each tool's schema, ...; see
    ``structgen.grammar.structural_tag``).  Returns a
    :class:`~structgen.structural_output.StructuralTagOutput`: ``text``, ``segments`` (each tag's
    begin, content, end, offsets and, for a JSON content, its parsed ``value``, validated with
    jsonschema) and the decoding ``result``.  ``whitespace`` / ``strict`` / ``lenient``: how the
    embedded JSON Schemas compile (as in :func:`generate_json`); ``speculative``, ``prompts``,
    ``return_exceptions``, ``timeout``, ``stream``, ``no_repeat_ngram`` and ``members`` as in
    :func:`generate_json` (integers are written as integers here too)."""
    from .grammar.structural_tag import load_structural_tag
    from .structural_output import StructuralTagOutput, read_segments

    _check_choice("members", members, ("named", "any"))

    opts = DecodingOptions(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed,
                           sampler=sampler, particles=particles, hmm=hmm, speculative=speculative, timeout=timeout,
                           no_repeat_ngram=no_repeat_ngram or 0)
    model = resolve_model(model)
    doc = load_structural_tag(spec)
    compiled = compiler_for(model).compile_structural_tag(doc, whitespace=whitespace, strict=strict, lenient=lenient,
                                                          members=members, plain_integers=True)

    def finish(result) -> StructuralTagOutput:
        return StructuralTagOutput(result.text, read_segments(doc, result.text), result)

    return _generate_text(model, compiled, prompt, prompts, finish, system=system, chat=chat,
                          return_exceptions=return_exceptions, opts=opts, stream=stream)
