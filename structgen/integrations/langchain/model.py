"""``ChatStructgen``, the LangChain chat model: one call's plan, generation, streaming, tools and
structured output."""
from __future__ import annotations

import codecs
import json
import os
import re
import threading
import uuid
from operator import itemgetter
from typing import Any, Callable, Iterator, Literal, Mapping, Optional, Sequence, Union

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.output_parsers.openai_tools import JsonOutputKeyToolsParser, PydanticToolsParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from ...deadlines import DEFAULT_TIMEOUT
from ...decoding_options import DEFAULT_MAX_TOKENS, OPTION_NAMES, DecodingOptions
from ...sampler_methods import METHODS
from ..tools import normalize_tool, parse_tool_call, tool_call_schema, tools_instruction
from .messages import (_is_pydantic_class, _schema_dict, _schema_name, _to_chat, _with_instruction, _with_source,
                       _longest_partial_stop)
from .parser import StructgenOutputParser

_CALL_KWARGS = frozenset(OPTION_NAMES)
# kwargs that LangChain itself may route to _generate/_stream, and that we set through bind()
_INTERNAL_KWARGS = frozenset({"response_format", "tools", "tool_choice", "model", "stream",
                              "ls_structured_output_format", "source"})
_STRUCTURED_METHODS = ("json_schema", "function_calling", "json_mode")
_TOOL_CALL_PREFIX = re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"arguments"\s*:\s*')


# -- the generation plan for one call --------------------------------------------------------------
class _Plan:
    """Everything one call needs: prompt ids, the grammar (if any), sampling settings, and the outcome."""

    def __init__(self) -> None:
        self.mode = "text"  # "text" | "json" | "tools" (forced call) | "auto" (text or call)
        self.prompt_ids: list[int] = []
        self.grammar: Any = None
        self.tools: list[dict[str, Any]] = []
        self.stops: list[str] = []
        self.opts = DecodingOptions()
        # outcome
        self.token_ids: list[int] = []
        self.finish_reason = "stop"
        self.is_tool_call = False
        self.call_id = f"call_{uuid.uuid4().hex[:24]}"


class ChatStructgen(BaseChatModel):
    """LangChain chat model running a local transformers causal LM through structgen.

    ``model``: a ``structgen.Model`` (``structgen.load_model(...)``), a path or
    hub id for ``load_model`` (a transformers folder or a ``.gguf``), or None
    for the embedded SmolLM2-135M-Instruct.  A path or None is loaded on first
    use (once per ``ChatStructgen`` instance), so constructing is free.
    """

    model: Any = None
    """A ``structgen.Model``, a path/hub id for ``structgen.load_model``, or None (embedded SmolLM2)."""
    dtype: str = "float32"
    """dtype used when this class loads the model (float32 keeps greedy decoding reproducible)."""
    max_tokens: Optional[int] = Field(default=None, ge=1)
    """Most tokens generated per answer (default 512). Structured answers finish within it."""
    temperature: float = Field(default=0.0, ge=0.0)
    """0 is greedy decoding."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0)
    seed: Optional[int] = None
    """Seed for sampling (temperature > 0): the same seed gives the same answer."""
    stop: Optional[list[str]] = None
    """Stop sequences for free-text answers."""
    timeout: Optional[float] = Field(default=DEFAULT_TIMEOUT, gt=0)
    """Wall-clock limit in seconds for one generation (``GenerationError`` with ``reason="timeout"``
    beyond it, as in ``generate_json``); None for no limit."""
    max_retries: int = Field(default=0, ge=0)
    """Accepted for LangChain's standard parameters; unused (a local model has no transient failures)."""
    streaming: bool = False
    """Whether invoke() streams internally (callbacks see every token)."""
    schema_in_prompt: bool = True
    """Describe the schema / tools in the prompt (appended to the last user message)."""
    schema_prompt: Literal["auto", "full", "compact", "none"] = "auto"
    """How a ``json_schema`` response format is described (as ``generate_json``'s ``schema_prompt``):
    "auto"/"compact" a short field list that fits the context, "full" the schema's JSON, "none" nothing."""
    source: Optional[str] = None
    """Grounded extraction (as ``generate_json``'s ``source``): the text structured answers come from,
    added to the last user message unless it holds it; their string values are spans of it (set per
    call with ``.bind(source=text)`` or ``invoke(..., source=text)``)."""
    grounded: bool = True
    """Whether ``source`` constrains string values (False: it is only added to the prompt)."""
    sampler: Optional[Literal[METHODS]] = None
    """Structured answers drawn by a distribution-correcting sampler (``structgen.sample``) at
    ``temperature`` (1.0 when 0) instead of the decoding loop; free text is unaffected."""
    particles: int = Field(default=8, ge=1)
    """SMC particles (``sampler="smc"``)."""
    hmm: Optional[Any] = None
    """The HMM for ``sampler="decog"`` (an ``HMM`` or the path of one from ``structgen hmm distill``);
    with it, set ``schema_in_prompt=False``: the HMM carries the format, the prompt the task."""
    no_repeat_ngram: Optional[int] = Field(default=None, ge=0)
    """A token that would repeat an n-gram of the answer only where the grammar allows nothing else
    (as ``generate_json``'s; None: 8 for structured answers, off for free text)."""
    speculative: bool = True
    """Draft grammar-forced and prompt-lookup tokens and verify them in one forward pass (the same
    tokens as without, in fewer forward passes); False decodes one token per forward pass."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", protected_namespaces=())

    _loaded: Any = PrivateAttr(default=None)
    _load_lock: Any = PrivateAttr(default_factory=threading.Lock)

    @field_validator("model", mode="before")
    @classmethod
    def _check_model(cls, v: Any) -> Any:
        if v is None or isinstance(v, str):
            return v
        if isinstance(v, os.PathLike):
            return os.fspath(v)
        if hasattr(v, "hf_model") and hasattr(v, "info") and hasattr(v, "hf_tokenizer"):
            return v
        raise ValueError(f"model must be a structgen Model, a path or None, got {type(v).__name__}")

    # -- identity --------------------------------------------------------------------------------
    @property
    def _llm_type(self) -> str:
        return "structgen"

    def _model_label(self) -> str:
        m = self.model
        if m is None:
            from ...models import DEFAULT_MODEL_NAME

            return DEFAULT_MODEL_NAME
        if isinstance(m, str):
            return os.path.basename(os.path.normpath(m)) if os.path.exists(m) else m
        return str(getattr(m, "name", type(m).__name__))

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model_name": self._model_label(),
            "max_tokens": self.max_tokens or DEFAULT_MAX_TOKENS,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "seed": self.seed,
        }

    def _get_ls_params(self, stop: Optional[list[str]] = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "structgen"
        params["ls_model_name"] = kwargs["model"] if isinstance(kwargs.get("model"), str) else self._model_label()
        stops = stop if stop is not None else self.stop
        if stops:
            params["ls_stop"] = list(stops)
        return params

    # -- the model -------------------------------------------------------------------------------
    def get_model(self) -> Any:
        """The structgen ``Model`` (loaded on first call when ``model`` is a path or None)."""
        if not isinstance(self.model, (str, type(None))):
            return self.model
        if self._loaded is None:
            with self._load_lock:
                if self._loaded is None:
                    from ...models import load_model

                    self._loaded = load_model(self.model, dtype=self.dtype)
        return self._loaded

    # -- planning ----------------------------------------------------------------------------------
    def _plan(self, messages: list[BaseMessage], stop: Optional[list[str]], kwargs: dict[str, Any]) -> _Plan:
        unknown = set(kwargs) - _CALL_KWARGS - _INTERNAL_KWARGS
        if unknown:
            raise ValueError(f"ChatStructgen got unsupported keyword arguments {sorted(unknown)}; "
                             f"supported per call: {sorted(_CALL_KWARGS)}")
        if kwargs.get("model") not in (None, self.model, self._model_label()):
            raise ValueError(f"ChatStructgen runs {self._model_label()!r}; it cannot switch to model="
                             f"{kwargs['model']!r} per call (create another ChatStructgen)")
        p = _Plan()
        settings = {name: kwargs.get(name, getattr(self, name)) for name in OPTION_NAMES}
        if settings["max_tokens"] is None:
            settings["max_tokens"] = DEFAULT_MAX_TOKENS
        p.opts = DecodingOptions(**settings)  # InvalidArgument (a ValueError) names a bad setting
        p.stops = list(stop if stop is not None else (self.stop or []))

        model = self.get_model()
        chat = _to_chat(messages)
        response_format = kwargs.get("response_format")
        tools = kwargs.get("tools")
        tool_choice = kwargs.get("tool_choice")
        instruction = None
        if response_format is not None and tools:
            raise ValueError("response_format and tools cannot be combined in one call")
        if response_format is not None:
            schema, strict = self._response_format_schema(response_format)
            if schema is not None:
                from ...compiler import compiler_for

                p.mode = "json"
                source = kwargs.get("source", self.source)
                if source is not None:
                    chat = _with_source(chat, source)
                p.grammar = compiler_for(model).compile_json_schema(
                    schema, whitespace="spaced", strict=strict, members="named", plain_integers=True,
                    source=source if self.grounded else None)
                # JSON mode: the caller's prompt describes the fields (LangChain's convention)
                instruction = (self._schema_instruction(model, chat, schema, p.opts.max_tokens, source)
                               if response_format.get("type") == "json_schema" else "Answer with a single JSON object.")
        elif tools:
            from ...compiler import compiler_for

            p.tools = [normalize_tool(t) for t in tools]
            choice = _normalize_tool_choice(tool_choice, p.tools)
            if choice != "none":
                only = choice if choice not in (None, "any") else None
                p.mode = "auto" if choice is None else "tools"
                p.grammar = compiler_for(model).compile_json_schema(tool_call_schema(p.tools, only=only),
                                                                     whitespace="compact")
                shown = [t for t in p.tools if only is None or t["name"] == only]
                instruction = tools_instruction(shown, choice=only, optional=p.mode == "auto")
        if instruction and self.schema_in_prompt:
            chat = _with_instruction(chat, instruction)
        p.prompt_ids = model.encode(self._render(model, chat))
        if not p.prompt_ids:
            raise ValueError("the prompt is empty")
        return p

    def _schema_instruction(self, model: Any, chat: list[dict[str, str]], schema: Any, max_tokens: int,
                            source: str | None = None) -> str | None:
        """What the prompt says of a ``json_schema`` response format under ``schema_prompt``."""
        from ...runtime.prompts import schema_instruction

        room = model.context_length
        if room is not None:
            room -= max_tokens + len(model.encode(self._render(model, chat))) + 32
        return schema_instruction(schema, self.schema_prompt, lambda t: len(model.encode(t)), room, source)

    @staticmethod
    def _response_format_schema(rf: Any) -> tuple[Optional[dict], bool]:
        if not isinstance(rf, Mapping):
            raise ValueError(f"response_format must be a dict, got {type(rf).__name__}")
        kind = rf.get("type")
        if kind == "json_schema":
            js = rf.get("json_schema")
            if not isinstance(js, Mapping) or "schema" not in js:
                raise ValueError("response_format type 'json_schema' needs json_schema.schema")
            return _schema_dict(js["schema"]), bool(js.get("strict") or False)
        if kind == "json_object":
            if rf.get("schema") is not None:  # structgen's extension: an object under this schema
                return _schema_dict(rf["schema"]), bool(rf.get("strict") or False)
            return {"type": "object"}, False
        if kind == "text":
            return None, False
        raise ValueError(f"unknown response_format type {kind!r} (json_schema, json_object or text)")

    @staticmethod
    def _render(model: Any, chat: list[dict[str, str]]) -> str:
        from ...runtime.prompts import render_chat

        return render_chat(model.hf_tokenizer, chat)

    # -- decoding ----------------------------------------------------------------------------------
    def _tokens(self, model: Any, p: _Plan) -> Iterator[int]:
        """Yield generated token ids from structgen's decoding runtime (``structgen.runtime.Decoding``:
        mask, budget guard, sample, accept or draw again), free text and the auto tool mode included."""
        from ...engine.matcher import Matcher
        from ...runtime import BudgetGuard, Decoding
        from ...deadlines import deadline_after
        from ...runtime.loop import make_drafter
        from ...runtime.sampling import MaskedSampler

        if p.opts.sampler is not None and p.grammar is not None and p.mode in ("json", "tools"):
            yield from self._sampled_tokens(model, p)
            return
        matcher = Matcher(p.grammar) if p.grammar is not None else None
        sampler = MaskedSampler(temperature=p.opts.temperature or 0.0, top_p=p.opts.top_p, top_k=p.opts.top_k, seed=p.opts.seed)
        deadline = deadline_after(p.opts.timeout)
        decoding = Decoding(model, p.prompt_ids, matcher, max_tokens=p.opts.max_tokens, sampler=sampler,
                            budget_guard=BudgetGuard(matcher) if matcher is not None else None,
                            optional=p.mode == "auto", deadline=deadline,
                            drafter=make_drafter(model, p.opts.speculative), no_repeat_ngram=self._no_repeat_ngram(p))
        p.is_tool_call = p.mode == "tools"
        for t in decoding:
            if not p.token_ids and p.mode == "auto":
                p.is_tool_call = decoding.matcher is not None  # the first token chose the call
            p.token_ids.append(t)
            yield t
        p.finish_reason = "length" if decoding.finish_reason == "length" else "stop"

    @staticmethod
    def _no_repeat_ngram(p: _Plan) -> int:
        """The plan's setting, or the entry points' default: generate_json's for structured answers
        (``structgen.api.JSON_NO_REPEAT_NGRAM``), off for free text."""
        from ...api import JSON_NO_REPEAT_NGRAM

        if p.opts.no_repeat_ngram is not None:
            return p.opts.no_repeat_ngram
        return JSON_NO_REPEAT_NGRAM if p.mode in ("json", "tools") else 0

    def _sampled_tokens(self, model: Any, p: _Plan) -> Iterator[int]:
        """A structured answer drawn by ``p.opts.sampler`` (``structgen.runtime.sampling``)."""
        from ...deadlines import deadline_after
        from ...runtime.sampling.draw import generate_with_sampler

        temperature = p.opts.temperature or None  # 0 means the sampler's own 1.0
        result = generate_with_sampler(model, p.grammar, p.prompt_ids, max_tokens=p.opts.max_tokens, temperature=temperature,
                              top_p=p.opts.top_p, top_k=p.opts.top_k, seed=p.opts.seed, sampler=p.opts.sampler, particles=p.opts.particles,
                              hmm=p.opts.hmm, deadline=deadline_after(p.opts.timeout))
        p.is_tool_call = p.mode == "tools"
        for t in result.token_ids:
            p.token_ids.append(t)
            yield t
        p.finish_reason = "stop"

    def _pieces(self, model: Any, p: _Plan) -> Iterator[str]:
        """Yield text deltas (UTF-8 decoded incrementally; free text cut at a stop sequence)."""
        dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        token_bytes = model.info.token_bytes
        text = ""
        sent = 0
        tokens = self._tokens(model, p)
        try:
            for t in tokens:
                text += dec.decode(token_bytes[t])
                if p.stops and not p.is_tool_call and p.mode != "json":
                    hits = [i for i in (text.find(s, max(0, sent - len(s))) for s in p.stops if s) if i >= 0]
                    if hits:
                        cut = min(hits)
                        if cut > sent:
                            yield text[sent:cut]
                        p.finish_reason = "stop"
                        return
                    safe = len(text) - _longest_partial_stop(text, p.stops)
                else:
                    safe = len(text)
                if safe > sent:
                    yield text[sent:safe]
                    sent = safe
            text += dec.decode(b"", final=True)
            if len(text) > sent:
                yield text[sent:]
        finally:
            tokens.close()

    def _usage(self, p: _Plan) -> UsageMetadata:
        n_in, n_out = len(p.prompt_ids), len(p.token_ids)
        return UsageMetadata(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out)

    def _metadata(self, p: _Plan) -> dict[str, Any]:
        return {"model_name": self._model_label(), "model_provider": "structgen",
                "finish_reason": "tool_calls" if p.is_tool_call else p.finish_reason}

    def _tool_call(self, p: _Plan, text: str) -> tuple[list[dict], list[dict]]:
        """(tool_calls, invalid_tool_calls) from the text of a call."""
        try:
            name, args = parse_tool_call(text)
        except ValueError as e:
            return [], [{"name": None, "args": text, "id": p.call_id, "error": str(e), "type": "invalid_tool_call"}]
        tool = next((t for t in p.tools if t["name"] == name), None)
        if tool is None:
            return [], [{"name": name, "args": json.dumps(args), "id": p.call_id, "error": f"unknown tool {name!r}",
                         "type": "invalid_tool_call"}]
        import jsonschema

        schema = tool["parameters"]
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        err = jsonschema.exceptions.best_match(cls(schema).iter_errors(args))
        if err is not None:
            return [], [{"name": name, "args": json.dumps(args), "id": p.call_id, "error": err.message,
                         "type": "invalid_tool_call"}]
        return [{"name": name, "args": args, "id": p.call_id, "type": "tool_call"}], []

    # -- BaseChatModel hooks -----------------------------------------------------------------------
    def _generate(self, messages: list[BaseMessage], stop: Optional[list[str]] = None,
                  run_manager: Optional[CallbackManagerForLLMRun] = None, **kwargs: Any) -> ChatResult:
        model = self.get_model()
        p = self._plan(messages, stop, kwargs)
        text = "".join(self._pieces(model, p))
        if p.is_tool_call:
            calls, invalid = self._tool_call(p, text)
            message = AIMessage(content="", tool_calls=calls, invalid_tool_calls=invalid,
                                response_metadata=self._metadata(p), usage_metadata=self._usage(p))
        else:
            message = AIMessage(content=text, response_metadata=self._metadata(p), usage_metadata=self._usage(p))
        info = {"finish_reason": message.response_metadata["finish_reason"]}
        return ChatResult(generations=[ChatGeneration(message=message, generation_info=info)],
                          llm_output={"model_name": self._model_label(), "token_usage": dict(self._usage(p))})

    def _stream(self, messages: list[BaseMessage], stop: Optional[list[str]] = None,
                run_manager: Optional[CallbackManagerForLLMRun] = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        model = self.get_model()
        p = self._plan(messages, stop, kwargs)
        text = ""
        name_sent = False
        args_start = 0
        args_sent = 0
        for piece in self._pieces(model, p):
            if not p.is_tool_call:
                chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece))
            else:
                # stream the call as tool_call_chunks: the name once known, then argument text deltas
                # (the last character is held back: it may be the call object's closing brace)
                text += piece
                tcc = []
                if not name_sent:
                    mt = _TOOL_CALL_PREFIX.match(text)
                    if mt:
                        name_sent = True
                        args_start = mt.end()
                        tcc.append({"name": json.loads(mt.group(1)), "args": "", "id": p.call_id, "index": 0,
                                    "type": "tool_call_chunk"})
                if name_sent:
                    upto = len(text) - 1  # absolute index; the last character is held back
                    if upto > args_start + args_sent:
                        delta = text[args_start + args_sent:upto]
                        args_sent += len(delta)
                        tcc.append({"name": None, "args": delta, "id": None, "index": 0, "type": "tool_call_chunk"})
                chunk = ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=tcc))
            if run_manager:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk
        tcc = []
        if p.is_tool_call:
            body = text.rstrip()
            if not name_sent or not body.endswith("}"):  # cannot happen under the grammar; report it as is
                tcc.append({"name": None, "args": text, "id": p.call_id, "index": 0, "type": "tool_call_chunk"})
            else:
                rest = body[args_start + args_sent:-1].rstrip()
                if rest:
                    tcc.append({"name": None, "args": rest, "id": None, "index": 0, "type": "tool_call_chunk"})
        last = ChatGenerationChunk(
            message=AIMessageChunk(content="", tool_call_chunks=tcc, response_metadata=self._metadata(p),
                                   usage_metadata=self._usage(p), chunk_position="last"),
            generation_info={"finish_reason": self._metadata(p)["finish_reason"]},
        )
        if run_manager:
            run_manager.on_llm_new_token(last.text, chunk=last)
        yield last

    # -- tools and structured output ---------------------------------------------------------------
    def bind_tools(self, tools: Sequence[Union[dict[str, Any], type, Callable, Any]], *,
                   tool_choice: Optional[Union[str, bool, dict]] = None, strict: Optional[bool] = None,
                   parallel_tool_calls: Optional[bool] = None, **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools (Pydantic classes, functions, ``BaseTool``s or OpenAI tool dicts).

        ``tool_choice``: None/"auto" (the model decides: a call or text),
        "any"/"required"/True (a call to some tool), a tool name or
        ``{"type": "function", "function": {"name": ...}}`` (that tool),
        "none" (no call).  ``strict``: None/True close every argument object
        that does not declare ``additionalProperties`` (no invented arguments),
        False keeps the schemas as written.  One call per answer
        (``parallel_tool_calls`` is accepted, but a single call is always
        generated).  Each call's arguments are generated under the tool's
        schema, so they always validate against it.
        """
        self._check_bind_kwargs(kwargs)
        formatted = [convert_to_openai_tool(t) for t in tools]
        normalized = [normalize_tool(t) for t in formatted]
        if not normalized:
            raise ValueError("bind_tools needs at least one tool")
        choice = _normalize_tool_choice(tool_choice, normalized)
        bound: dict[str, Any] = {"tools": formatted, **kwargs}
        if choice is not None:
            bound["tool_choice"] = choice
        if strict is not False:
            bound["tools"] = [_closed_tool(t) for t in formatted]
        return self.bind(**bound)

    def with_structured_output(self, schema: Optional[Union[dict[str, Any], type]] = None, *,
                               method: Literal["json_schema", "function_calling", "json_mode"] = "json_schema",
                               include_raw: bool = False, strict: Optional[bool] = None,
                               **kwargs: Any) -> Runnable[LanguageModelInput, Any]:
        """A runnable whose output is ``schema``'s validated value, generated under its grammar.

        ``schema``: a Pydantic class (an instance is returned), a TypedDict or a
        JSON Schema / OpenAI function dict (a dict is returned).  ``method``:
        "json_schema" (default: the answer is the JSON value), "function_calling"
        (a forced call of a tool named after the schema), "json_mode" (a JSON
        object, under ``schema``'s grammar when one is given; the prompt should
        describe the fields).  ``strict``: None/True close object schemas that
        do not declare ``additionalProperties``; False keeps the schema as
        written.  ``include_raw=True`` returns ``{"raw": AIMessage, "parsed":
        value | None, "parsing_error": Exception | None}``; parse failures
        otherwise raise ``OutputParserException``.  Unknown keyword arguments
        raise ``ValueError``.  The model itself is never modified.
        """
        if kwargs:
            raise ValueError(f"with_structured_output got unsupported arguments {sorted(kwargs)}")
        if method not in _STRUCTURED_METHODS:
            raise ValueError(f"method must be one of {_STRUCTURED_METHODS}, got {method!r}")
        if schema is None and method != "json_mode":
            raise ValueError(f"method={method!r} needs a schema")
        is_pyd = _is_pydantic_class(schema)
        close = strict is not False  # objects without "additionalProperties" are closed unless strict=False
        ls_format = {"kwargs": {"method": method, "strict": strict}, "schema": schema}
        llm: Runnable
        parser: Runnable
        rf: dict[str, Any]
        if method == "function_calling":
            tool = convert_to_openai_tool(schema, strict=strict)
            name = tool["function"]["name"]
            llm = self.bind_tools([tool], tool_choice=name, strict=close, ls_structured_output_format=ls_format)
            parser = (PydanticToolsParser(tools=[schema], first_tool_only=True) if is_pyd
                      else JsonOutputKeyToolsParser(key_name=name, first_tool_only=True))
        elif method == "json_mode":
            rf = {"type": "json_object"}
            sd = _schema_dict(schema) if schema is not None else None
            if sd is not None:  # structgen's extension: JSON mode under the schema's grammar
                rf["schema"] = sd
                rf["strict"] = close
            llm = self.bind(response_format=rf, ls_structured_output_format=ls_format)
            parser = StructgenOutputParser(pydantic_object=schema if is_pyd else None,
                                           json_schema=sd if not is_pyd else None)
        else:
            sd = _schema_dict(schema)
            rf = {"type": "json_schema",
                  "json_schema": {"name": _schema_name(schema, sd), "schema": sd, "strict": close}}
            llm = self.bind(response_format=rf, ls_structured_output_format=ls_format)
            parser = StructgenOutputParser(pydantic_object=schema if is_pyd else None, json_schema=sd)
        if include_raw:
            parser_assign = RunnablePassthrough.assign(parsed=itemgetter("raw") | parser,
                                                       parsing_error=lambda _: None)
            parser_none = RunnablePassthrough.assign(parsed=lambda _: None)
            parser_with_fallback = parser_assign.with_fallbacks([parser_none], exception_key="parsing_error")
            return RunnableMap(raw=llm) | parser_with_fallback
        return llm | parser

    @staticmethod
    def _check_bind_kwargs(kwargs: Mapping[str, Any]) -> None:
        unknown = set(kwargs) - _CALL_KWARGS - {"ls_structured_output_format"}
        if unknown:
            raise ValueError(f"unsupported keyword arguments {sorted(unknown)}; "
                             f"supported: {sorted(_CALL_KWARGS)}")


# -- tool_choice -----------------------------------------------------------------------------------
def _normalize_tool_choice(choice: Any, tools: list[dict[str, Any]]) -> Any:
    names = [t["name"] for t in tools]
    if choice is None or choice == "auto":
        return None
    if choice is True or choice in ("any", "required"):
        return "any"
    if choice is False or choice == "none":
        return "none"
    if isinstance(choice, Mapping):
        fn = choice.get("function") if isinstance(choice.get("function"), Mapping) else choice
        choice = fn.get("name")
    if isinstance(choice, str):
        if choice not in names:
            raise ValueError(f"tool_choice {choice!r} is not one of the tools {names}")
        return choice
    raise ValueError(f"unsupported tool_choice {choice!r}")


def _closed_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """Close the tool's argument objects: each object schema without "additionalProperties" gets ``false``."""

    def close(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: (v if k in ("const", "enum", "default", "examples") else close(v)) for k, v in node.items()}
            is_object = out.get("type") == "object" or ("type" not in out and isinstance(out.get("properties"), dict))
            if is_object and "additionalProperties" not in out:
                out["additionalProperties"] = False
            return out
        if isinstance(node, list):
            return [close(v) for v in node]
        return node

    return close(tool)

