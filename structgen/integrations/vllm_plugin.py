"""The ``vllm.general_plugins`` entry point: makes ``structured_outputs_config.backend="structgen"``
(``--structured-outputs-config.backend structgen``) a vLLM structured-output backend.

vLLM 0.32 keeps its backend list closed (``ecosystem.md`` section 4): the config types the name as
a ``Literal``, the front end validates each request per backend name, and the engine builds the
backend with an if/elif.  vLLM runs general plugins in every process before any of these is
used, so :func:`register` widens the ``Literal`` and wraps the two functions, for the name
``"structgen"`` only.  Those internals change between vLLM releases, so the plugin installs itself
only on the versions it was tested with, and says so in the log otherwise.
"""
from __future__ import annotations

import json
import logging
import os
from typing import Any, Literal, get_args

__all__ = ["register", "TESTED_VLLM", "BACKEND_NAME"]

logger = logging.getLogger(__name__)

BACKEND_NAME = "structgen"
#: vLLM versions whose plug-in points the plugin was tested against (``make test-vllm``)
TESTED_VLLM = ("0.32.",)
#: set to 1 to install on an untested vLLM anyway
FORCE_ENV = "STRUCTGEN_VLLM_UNTESTED"

_installed = False


def register() -> None:
    """Install the backend (vLLM calls this in every process; repeated calls do nothing)."""
    global _installed
    if _installed:
        return
    import vllm

    version = getattr(vllm, "__version__", "unknown")
    if not version.startswith(TESTED_VLLM) and os.environ.get(FORCE_ENV) != "1":
        logger.error("structgen: vLLM %s is untested (tested: %s); the 'structgen' structured-output backend "
                     "is NOT installed. Set %s=1 to install it anyway.", version, ", ".join(TESTED_VLLM), FORCE_ENV)
        return
    _widen_config_literal()
    _wrap_request_validation()
    _wrap_backend_selection()
    _installed = True


def _widen_config_literal() -> None:
    """Accept "structgen" where the config (and its command-line flag) types the backend name."""
    from pydantic.dataclasses import rebuild_dataclass
    from vllm.config import structured_outputs as so

    names = get_args(so.StructuredOutputsBackend)
    if BACKEND_NAME in names:
        return
    widened = Literal[(*names, BACKEND_NAME)]  # type: ignore[valid-type]
    so.StructuredOutputsBackend = widened
    so.StructuredOutputsConfig.__annotations__["backend"] = widened
    for f in (getattr(so.StructuredOutputsConfig, "__dataclass_fields__", {}) or {}).values():
        if f.name == "backend":
            f.type = widened
    rebuild_dataclass(so.StructuredOutputsConfig, force=True)


def _wrap_request_validation() -> None:
    """Requests for the "structgen" backend are checked by structgen in the front end, so a bad
    schema or grammar is an HTTP 400 there, never an engine error."""
    from vllm.sampling_params import SamplingParams

    original = SamplingParams._validate_structured_outputs

    def _validate_structured_outputs(self, model_config, structured_outputs_config, tokenizer):
        if structured_outputs_config is None or self.structured_outputs is None \
                or structured_outputs_config.backend != BACKEND_NAME:
            return original(self, model_config, structured_outputs_config, tokenizer)
        validate_request(self, tokenizer)

    SamplingParams._validate_structured_outputs = _validate_structured_outputs


def validate_request(params: Any, tokenizer: Any) -> None:
    """Check a request's constraint (raises ``VLLMValidationError``, HTTP 400, with structgen's
    message naming the JSON pointer or grammar position)."""
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import check_json_nesting
    from vllm.v1.structured_output.request import get_structured_output_key

    from ..errors import StructgenError
    from .vllm_backend import delegated

    so = params.structured_outputs
    if tokenizer is None:
        raise VLLMValidationError("structured outputs need a tokenizer (not with skip_tokenizer_init)")
    if so._backend and so._backend != BACKEND_NAME:
        raise VLLMValidationError(f"request-level backend selection is not supported: the request names "
                                  f"{so._backend!r}, the server runs {BACKEND_NAME!r}")
    so._backend = BACKEND_NAME
    for name in ("grammar", "json", "structural_tag"):
        value = getattr(so, name, None)
        if isinstance(value, str) and not value.strip():
            raise VLLMValidationError(f"structured_outputs.{name} cannot be an empty string")
    if isinstance(so.choice, list) and not so.choice:
        raise VLLMValidationError("structured_outputs.choice cannot be an empty list")
    if so.json_object is False:
        raise VLLMValidationError("structured_outputs.json_object must be True if set")
    check_json_nesting(so.json)
    check_json_nesting(so.structural_tag, structural_tag=True)
    try:
        kind, spec = get_structured_output_key(so)
    except ValueError as e:
        raise VLLMValidationError(str(e)) from e
    if delegated(kind, spec):
        from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

        validate_xgrammar_grammar(params)
        so._backend = BACKEND_NAME  # still this backend: it hands the request to XGrammar itself
        return
    try:
        check_constraint(kind, spec)
        needed = tokens_needed(kind, spec, tokenizer, params.max_tokens)
    except StructgenError as e:
        raise VLLMValidationError(f"structgen refuses the {kind.name.lower()} constraint: {e}") from e
    except (ValueError, TypeError) as e:  # malformed JSON text or choice list
        raise VLLMValidationError(f"invalid {kind.name.lower()} constraint: {e}") from e
    if needed:
        raise VLLMValidationError(f"max_tokens={params.max_tokens} is too small for the {kind.name.lower()} "
                                  f"constraint: no valid output fits; the smallest budget that fits is {needed} tokens",
                                  parameter="max_tokens", value=params.max_tokens)


_FRONT_END_COMPILERS: dict[int, Any] = {}


def tokens_needed(kind: Any, spec: str, tokenizer: Any, max_tokens: int | None) -> int:
    """0 when a valid output fits in ``max_tokens`` (or there is no budget), else the smallest
    budget that fits, as structgen's own loop computes it (``BudgetGuard.tokens_needed``).  The
    constraint is compiled with the tokenizer here, in the front end, so the answer is an HTTP 400
    before the request reaches the engine; the compiler is kept per tokenizer."""
    if max_tokens is None:
        return 0
    from ..compiler import GrammarCompiler
    from ..engine.matcher import Matcher
    from ..runtime.budget import BudgetGuard
    from ..tokenizer import TokenizerInfo
    from .vllm_backend import compile_request

    compiler = _FRONT_END_COMPILERS.get(id(tokenizer))
    if compiler is None:
        compiler = _FRONT_END_COMPILERS[id(tokenizer)] = GrammarCompiler(TokenizerInfo.from_huggingface(tokenizer))
    return BudgetGuard(Matcher(compile_request(compiler, kind, spec))).tokens_needed(max_tokens)


def check_constraint(kind: Any, spec: str) -> None:
    """Compile a constraint as far as needs no tokenizer (schema, regex or grammar to automata IR):
    what can be wrong with it is found here, in milliseconds."""
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions as Opt

    from ..errors import SchemaError
    from ..grammar.json_schema import SchemaOptions, normalize_schema_input, schema_to_ir
    from ..grammar.lark import lark_to_ir
    from ..grammar.regex import compile_regex
    from .vllm_backend import JSON_WHITESPACE, choice_pattern

    if kind == Opt.JSON:
        try:
            doc = json.loads(spec)
        except json.JSONDecodeError as e:
            raise SchemaError(f"the schema is not JSON: {e}", pointer="#") from None
        schema_to_ir(normalize_schema_input(doc), SchemaOptions(whitespace=JSON_WHITESPACE))
    elif kind == Opt.REGEX:
        compile_regex(spec)
    elif kind == Opt.CHOICE:
        choices = json.loads(spec)
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise TypeError("choice must be a list of strings")
        compile_regex(choice_pattern(choices))
    elif kind == Opt.GRAMMAR:
        lark_to_ir(spec)
    elif kind == Opt.STRUCTURAL_TAG:
        from ..grammar.structural_tag import StructuralTagOptions, structural_tag_to_ir

        structural_tag_to_ir(spec, StructuralTagOptions(whitespace=JSON_WHITESPACE))


def _wrap_backend_selection() -> None:
    """Build structgen's backend where the engine picks one by name."""
    from vllm.v1.structured_output import StructuredOutputManager

    original = StructuredOutputManager.grammar_init

    def grammar_init(self, request):
        so_req = request.structured_output_request
        if self.backend is None and so_req is not None and request.sampling_params is not None \
                and request.sampling_params.structured_outputs._backend == BACKEND_NAME:
            from .vllm_backend import StructgenBackend

            self.backend = StructgenBackend(self.vllm_config, tokenizer=self.tokenizer,
                                            vocab_size=self.vllm_config.model_config.get_vocab_size())
        return original(self, request)

    StructuredOutputManager.grammar_init = grammar_init
    original_create = StructuredOutputManager._create_grammar

    def _create_grammar(self, request):
        grammar = original_create(self, request)
        from .vllm_backend import StructgenGrammar

        if isinstance(grammar, StructgenGrammar) and request.sampling_params is not None:
            grammar.set_budget(request.sampling_params.max_tokens)  # the guard of structgen's own loop
        return grammar

    StructuredOutputManager._create_grammar = _create_grammar
