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
from typing import Any

from .compiler import GrammarCompiler
from .engine.compiled import CompiledGrammar
from .engine.matcher import Matcher
from .errors import GenerationError

DEFAULT_MAX_TOKENS = 512


def compiler_for(model) -> GrammarCompiler:
    """The (cached) GrammarCompiler for a model's tokenizer."""
    comp = getattr(model, "_structgen_compiler", None)
    if comp is None or comp.tokenizer is not model.info:
        comp = GrammarCompiler(model.info)
        object.__setattr__(model, "_structgen_compiler", comp)
    return comp


def resolve_model(model):
    """A structgen Model: the embedded SmolLM2 for None, ``load_model(path)`` for a path."""
    if model is None or isinstance(model, str):
        from .models import load_model

        return load_model(model)
    return model


def _run(model, grammar: CompiledGrammar, prompt_text: str, *, max_tokens: int, temperature: float | None,
         top_p: float, top_k: int, seed: int | None, sampler: str | None = None, particles: int = 8,
         speculative: bool = True):
    """Decode one output: the runtime's loop (greedy by default; ``speculative``: drafts verified in
    one forward pass, the same output) or, with ``sampler``, one draw from a distribution-correcting
    sampler (``structgen.runtime.sampling``)."""
    from .runtime.budget import BudgetGuard
    from .runtime.loop import generate_constrained

    ids = model.encode(prompt_text)
    if sampler is None or sampler == "greedy":
        matcher = Matcher(grammar)
        return generate_constrained(model, ids, matcher, max_tokens=max_tokens, temperature=temperature or 0.0,
                                    top_p=top_p, top_k=top_k, seed=seed, budget_guard=BudgetGuard(matcher),
                                    speculative=speculative)
    from .runtime.sampling.draw import generate_with_sampler

    return generate_with_sampler(model, grammar, ids, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                 top_k=top_k, seed=seed, sampler=sampler, particles=particles)


def schema_prompt(schema: dict, user: str | None = None) -> str:
    """The user turn: the request (or one built from the schema's title and
    description when there is none), then the schema the answer must follow."""
    if not user:
        parts = []
        if isinstance(schema, dict):
            if schema.get("title"):
                parts.append(f"Create an example {schema['title']}.")
            if schema.get("description"):
                parts.append(str(schema["description"]))
        user = " ".join(parts) or "Create an example value."
    return f"{user}\n\nReply with JSON only, following this JSON Schema:\n{json.dumps(schema)}"


def generate_json(model, schema: Any, prompt: str | None = None, *, max_tokens: int = DEFAULT_MAX_TOKENS,
                  temperature: float | None = None, top_p: float = 1.0, top_k: int = 0, seed: int | None = None,
                  whitespace: str = "compact", strict: bool = False, lenient: bool = False,
                  system: str | None = None, chat: bool = True, return_result: bool = False,
                  sampler: str | None = None, particles: int = 8, speculative: bool = True) -> Any:
    """Generate one JSON value that satisfies ``schema`` and return it parsed.

    ``schema``: a dict, JSON text, or a Pydantic model class (then an instance
    is returned).  ``prompt``: the user's request; when None, one is built from
    the schema.  ``whitespace="compact"`` (the default) makes runaway
    whitespace impossible.  The output is validated with ``jsonschema``;
    ``GenerationError`` is raised (with ``.partial``) if generation cannot
    finish or, in ``lenient`` mode, if the result does not validate.

    ``sampler``: None decodes with the runtime's loop (greedy unless ``temperature`` > 0, with
    the finish-within-budget guard); ``"masked"``, ``"asap"``, ``"awrs"`` or ``"smc"`` (with
    ``particles``) return one output drawn from that sampler's approximation of the model's own
    distribution restricted to the schema, at ``temperature`` 1.0 unless given
    (``structgen.sample`` draws many).

    ``speculative`` (default True): tokens the grammar forces and tokens the prompt suggests are
    drafted and checked in one forward pass; a draft is kept only where plain decoding would have
    picked the same token, so the output is the same as with ``speculative=False`` (greedy, or the
    same seed when sampling), in fewer forward passes.
    """
    from .grammar.json_schema import normalize_schema_input

    model = resolve_model(model)
    pyd = schema if isinstance(schema, type) and hasattr(schema, "model_validate") else None
    schema_dict = normalize_schema_input(schema)
    grammar = compiler_for(model).compile_json_schema(schema_dict, whitespace=whitespace, strict=strict,
                                                      lenient=lenient)
    user = schema_prompt(schema_dict, prompt)
    text = model.chat_prompt(user, system=system) if chat else user
    result = _run(model, grammar, text, max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                  seed=seed, sampler=sampler, particles=particles, speculative=speculative)
    try:
        value = json.loads(result.text)
    except json.JSONDecodeError as e:  # pragma: no cover - the grammar makes this impossible
        raise GenerationError(f"output is not JSON: {e}", partial=result.text) from None
    errors = sorted(grammar.validator.iter_errors(value), key=lambda e: list(e.path)) if grammar.validator else []
    if errors:
        err = errors[0]
        ptr = "/" + "/".join(str(p) for p in err.path)
        raise GenerationError(f"output does not validate at {ptr}: {err.message}", partial=result.text)
    if pyd is not None:
        value = pyd.model_validate(value)
    if return_result:
        return value, result
    return value


def generate_regex(model, pattern: str, prompt: str, *, max_tokens: int = DEFAULT_MAX_TOKENS,
                   temperature: float | None = None, top_p: float = 1.0, top_k: int = 0, seed: int | None = None,
                   system: str | None = None, chat: bool = True, sampler: str | None = None,
                   particles: int = 8, speculative: bool = True) -> str:
    """Generate text that fully matches ``pattern`` (Python regex syntax); ``speculative`` as in
    :func:`generate_json`."""
    model = resolve_model(model)
    grammar = compiler_for(model).compile_regex(pattern)
    text = model.chat_prompt(prompt, system=system) if chat else prompt
    result = _run(model, grammar, text, max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                  seed=seed, sampler=sampler, particles=particles, speculative=speculative)
    if re.fullmatch(pattern, result.text) is None:  # pragma: no cover - guaranteed by construction
        raise GenerationError("output does not match the pattern", partial=result.text)
    return result.text


def generate_grammar(model, grammar: str | Path, prompt: str, *, start: str = "start",
                     max_tokens: int = DEFAULT_MAX_TOKENS, temperature: float | None = None, top_p: float = 1.0,
                     top_k: int = 0, seed: int | None = None, system: str | None = None, chat: bool = True,
                     sampler: str | None = None, particles: int = 8, speculative: bool = True) -> str:
    """Generate text in the language of a Lark grammar (text or a ``.lark`` path); ``speculative`` as
    in :func:`generate_json`."""
    model = resolve_model(model)
    compiled = compiler_for(model).compile_lark(grammar, start=start)
    text = model.chat_prompt(prompt, system=system) if chat else prompt
    result = _run(model, compiled, text, max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                  seed=seed, sampler=sampler, particles=particles, speculative=speculative)
    return result.text
