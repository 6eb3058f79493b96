"""ChatStructgen: LangChain's standard unit tests, then real generations on the tiny random Llama.

No mocks: every test below runs the model through structgen's grammar engine.
The tiny model's words are gibberish, but everything the grammar decides (JSON
shape, tool names, argument types, termination) is checked for real.
"""
from __future__ import annotations

import json
from typing import Literal

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_tests")

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_tests.unit_tests import ChatModelUnitTests  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402
from typing_extensions import Annotated, TypedDict  # noqa: E402

from structgen.integrations.langchain import ChatStructgen  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread(one_torch_thread):
    """One torch thread for this module's tiny-model runs (see conftest.one_torch_thread)."""
    yield


class TestChatStructgenStandard(ChatModelUnitTests):
    """langchain-tests' own unit suite (construction, standard params, bind_tools, with_structured_output)."""

    _tiny = None

    @pytest.fixture(autouse=True)
    def _use_tiny_model(self, tiny_model):
        # properties cannot take fixtures: hand the session's tiny model to chat_model_params
        type(self)._tiny = tiny_model

    @property
    def chat_model_class(self) -> type[ChatStructgen]:
        return ChatStructgen

    @property
    def chat_model_params(self) -> dict:
        return {"model": self._tiny}

    @property
    def standard_chat_model_params(self) -> dict:
        # a local model has no API key; every other standard parameter is accepted
        params = super().standard_chat_model_params
        params.pop("api_key", None)
        return params

    @property
    def has_tool_calling(self) -> bool:
        return True

    @property
    def has_tool_choice(self) -> bool:
        return True

    @property
    def has_structured_output(self) -> bool:
        return True

    @property
    def supports_json_mode(self) -> bool:
        return True

    @property
    def returns_usage_metadata(self) -> bool:
        return True


# -- real generations on the tiny model -------------------------------------------------------------
class Person(BaseModel):
    """A person."""

    name: str = Field(description="Full name", max_length=12)
    age: int = Field(ge=0, le=120)
    role: Literal["engineer", "doctor", "artist"]


class CityTD(TypedDict):
    """A city and its population."""

    city: Annotated[str, ..., "The city's name"]
    population: int


CITY_SCHEMA = {
    "title": "City",
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 10}, "big": {"type": "boolean"}},
    "required": ["city", "big"],
}


def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Get the current weather in a city."""
    return f"sunny in {city}"


class Add(BaseModel):
    """Add two small integers."""

    a: int = Field(ge=0, le=99)
    b: int = Field(ge=0, le=99)


SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string", "maxLength": 12}},
                       "required": ["query"]},
    },
}


@pytest.fixture
def llm(tiny_model):
    return ChatStructgen(model=tiny_model, max_tokens=48)


def _validate(schema: dict, value) -> None:
    import jsonschema

    jsonschema.validate(value, schema)


def test_invoke_free_text(llm):
    msg = llm.invoke([SystemMessage("Be brief."), HumanMessage("Say hello.")])
    assert isinstance(msg, AIMessage) and isinstance(msg.content, str)
    assert msg.response_metadata["model_name"] == "tiny-llama"
    assert msg.response_metadata["finish_reason"] in ("stop", "length")
    usage = msg.usage_metadata
    assert usage["input_tokens"] > 0 and 0 <= usage["output_tokens"] <= 48
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_stream_is_per_token_and_matches_invoke(llm):
    from langchain_core.callbacks import BaseCallbackHandler

    class Collect(BaseCallbackHandler):
        def __init__(self):
            self.tokens = []

        def on_llm_new_token(self, token, **kwargs):
            self.tokens.append(token)

    cb = Collect()
    small = llm.bind(max_tokens=12)
    chunks = list(small.stream("Count to three.", config={"callbacks": [cb]}))
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    assert len(chunks) > 3  # one chunk per token (plus the final usage chunk)
    text = "".join(c.content for c in chunks)
    assert text == small.invoke("Count to three.").content  # greedy: the same answer both ways
    assert "".join(cb.tokens) == text and len(cb.tokens) == len(chunks)
    assert chunks[-1].usage_metadata["output_tokens"] <= 12


def test_pydantic_structured_output_streams_partial_instances(llm):
    runnable = llm.with_structured_output(Person)
    chunks = list(runnable.stream("Invent a person."))
    final = runnable.invoke("Invent a person.")
    assert isinstance(final, Person) and chunks[-1] == final  # greedy: the same answer both ways
    assert len(chunks) >= 3 and all(isinstance(c, Person) for c in chunks)
    for c in chunks[:-1]:  # fields as far as they were written: each a prefix of the final field
        for name, v in c.__dict__.items():
            assert name in Person.model_fields
            assert v == getattr(final, name) or (isinstance(v, str) and getattr(final, name).startswith(v))


def test_stop_sequences_cut_free_text_in_invoke_and_stream(llm):
    full = llm.invoke("Write something.", max_tokens=24).content
    assert len(full) > 6
    stop = full[3:6]
    cut = full[: full.index(stop)]
    assert llm.invoke("Write something.", max_tokens=24, stop=[stop]).content == cut
    streamed = "".join(c.content for c in llm.stream("Write something.", max_tokens=24, stop=[stop]))
    assert streamed == cut


def test_batch_matches_single_calls(llm):
    prompts = ["First question?", "Second question?"]
    outs = llm.batch(prompts, max_tokens=8)
    assert [o.content for o in outs] == [llm.invoke(p, max_tokens=8).content for p in prompts]


def test_structured_output_pydantic_and_include_raw(llm):
    person = llm.with_structured_output(Person).invoke("Invent a person.")
    assert isinstance(person, Person)
    assert list(llm.with_structured_output(Person).stream("Invent a person."))[-1] == person  # validated last
    out = llm.with_structured_output(Person, include_raw=True).invoke("Invent a person.")
    assert set(out) == {"raw", "parsed", "parsing_error"}
    assert out["parsing_error"] is None and out["parsed"] == person
    assert isinstance(out["raw"], AIMessage)
    assert Person.model_validate_json(out["raw"].content) == person


def test_structured_output_dict_schema_and_typeddict(llm):
    city = llm.with_structured_output(CITY_SCHEMA).invoke("Name a city.")
    assert isinstance(city, dict) and set(city) == {"city", "big"}  # closed by default: no extra keys
    _validate(CITY_SCHEMA, city)
    # streaming a dict schema yields growing partial dicts, ending with the full value
    parts = list(llm.with_structured_output(CITY_SCHEMA).stream("Name a city."))
    assert parts and parts[-1] == city
    td = llm.with_structured_output(CityTD).invoke("Name a city.")
    assert isinstance(td, dict) and set(td) == {"city", "population"}
    assert isinstance(td["city"], str) and isinstance(td["population"], int)


def test_structured_output_json_mode_and_function_calling(llm):
    obj = llm.with_structured_output(None, method="json_mode").invoke("Answer in JSON.")
    assert isinstance(obj, dict)
    roomy = ChatStructgen(model=llm.model, max_tokens=96)  # the call wraps Person in {"name", "arguments"}
    out = roomy.with_structured_output(Person, method="function_calling", include_raw=True).invoke(
        "Invent a person.")
    assert isinstance(out["parsed"], Person) and out["parsing_error"] is None
    (call,) = out["raw"].tool_calls
    assert call["name"] == "Person" and Person.model_validate(call["args"]) == out["parsed"]


def test_with_structured_output_never_mutates_and_rejects_unknown_kwargs(llm):
    before = dict(llm.__dict__)
    llm.with_structured_output(Person)
    llm.with_structured_output(CITY_SCHEMA, include_raw=True, strict=True)
    llm.bind_tools([get_weather], tool_choice="any")
    assert llm.__dict__ == before
    with pytest.raises(ValueError, match="unsupported"):
        llm.with_structured_output(Person, tools=[get_weather])
    with pytest.raises(ValueError, match="method"):
        llm.with_structured_output(Person, method="xml")
    with pytest.raises(ValueError, match="unsupported"):
        llm.invoke("hi", frequency_penalty=1.0)
    with pytest.raises(ValueError, match="cannot switch"):
        llm.invoke("hi", model="some-other-model")
    with pytest.raises(ValueError, match="unsupported"):
        llm.bind_tools([get_weather], frequency_penalty=1.0)
    with pytest.raises(ValueError, match="not one of the tools"):
        llm.bind_tools([get_weather], tool_choice="nope")
    with pytest.raises(ValueError):
        ChatStructgen(model=llm.model, max_tokenz=3)  # typos in constructor arguments are errors too


def test_parse_failure_is_an_output_parser_exception(llm):
    from langchain_core.exceptions import OutputParserException
    from pydantic import field_validator

    class Picky(BaseModel):
        word: str = Field(max_length=5)

        @field_validator("word")
        @classmethod
        def never(cls, v):  # a rule JSON Schema cannot express, so the grammar cannot enforce it
            raise ValueError("no word is good enough")

    with pytest.raises(OutputParserException, match="does not validate"):
        llm.with_structured_output(Picky).invoke("A word?")
    out = llm.with_structured_output(Picky, include_raw=True).invoke("A word?")
    assert out["parsed"] is None and isinstance(out["parsing_error"], OutputParserException)
    assert json.loads(out["raw"].content).keys() == {"word"}


def _check_calls(msg, tools_by_name):
    assert isinstance(msg, AIMessage) and msg.content == "" and not msg.invalid_tool_calls
    assert len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    assert call["id"].startswith("call_") and call["type"] == "tool_call"
    schema = tools_by_name[call["name"]]
    _validate(schema, call["args"])
    return call


def test_bind_tools_any_gives_valid_calls(llm):
    from langchain_core.utils.function_calling import convert_to_openai_tool

    tools = [get_weather, Add, SEARCH_TOOL]
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in map(convert_to_openai_tool, tools)}
    bound = llm.bind_tools(tools, tool_choice="any", max_tokens=64)
    for prompt in ("What is the weather in Oslo?", "Add 2 and 3."):
        call = _check_calls(bound.invoke(prompt), by_name)
        assert set(call["args"]) <= set(by_name[call["name"]]["properties"])  # closed: no invented arguments
    forced = _check_calls(llm.bind_tools(tools, tool_choice="Add", max_tokens=64).invoke("Anything."), by_name)
    assert forced["name"] == "Add" and Add.model_validate(forced["args"])
    forced2 = llm.bind_tools(tools, tool_choice={"type": "function", "function": {"name": "search"}},
                             max_tokens=64).invoke("Anything.")
    assert _check_calls(forced2, by_name)["name"] == "search"


def test_bind_tools_stream_aggregates_to_the_same_call(llm):
    bound = llm.bind_tools([get_weather, Add], tool_choice="any", max_tokens=64)
    agg = None
    n = 0
    for chunk in bound.stream("Add 2 and 3."):
        agg = chunk if agg is None else agg + chunk
        n += 1
    assert n > 3
    (streamed,) = agg.tool_calls
    (invoked,) = bound.invoke("Add 2 and 3.").tool_calls
    assert (streamed["name"], streamed["args"]) == (invoked["name"], invoked["args"])
    assert agg.response_metadata["finish_reason"] == "tool_calls"


def test_tool_choice_auto_and_none(llm):
    auto = llm.bind_tools([Add], max_tokens=32).invoke("Add 2 and 3.")
    if auto.tool_calls:  # the model chose to call: then the call is valid
        _check_calls(auto, {"Add": Add.model_json_schema()})
    else:
        assert isinstance(auto.content, str)
    none = llm.bind_tools([Add], tool_choice="none", max_tokens=8).invoke("Add 2 and 3.")
    assert none.tool_calls == [] and none.response_metadata["finish_reason"] in ("stop", "length")


def test_conversation_with_tool_results_renders(llm):
    history = [
        HumanMessage("What is the weather in Oslo?"),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "call_1"}]),
        ToolMessage("sunny in Oslo", tool_call_id="call_1"),
    ]
    msg = llm.bind_tools([get_weather], max_tokens=8).invoke(history)
    assert isinstance(msg, AIMessage)


def test_chain_prompt_into_structured_output(llm):
    from langchain_core.prompts import ChatPromptTemplate

    prompt = ChatPromptTemplate.from_messages([("system", "Extract the person."), ("human", "{text}")])
    chain = prompt | llm.with_structured_output(Person)
    assert isinstance(chain.invoke({"text": "Ada, 36, engineer."}), Person)


def test_async_invoke_and_stream(llm):
    import asyncio

    async def go():
        msg = await llm.ainvoke("Hi", max_tokens=4)
        chunks = [c async for c in llm.astream("Hi", max_tokens=4)]
        return msg, chunks

    msg, chunks = asyncio.run(go())
    assert isinstance(msg, AIMessage) and msg.usage_metadata["output_tokens"] <= 4
    assert "".join(c.content for c in chunks) == msg.content


def test_same_tokens_as_structgen_loop(llm, tiny_model):
    """The chat model's decoding steps are generate_constrained's (mask, budget guard, greedy)."""
    from structgen.runtime import BudgetGuard
    from structgen.runtime.loop import generate_constrained
    from structgen.engine.matcher import Matcher

    rf = {"type": "json_schema", "json_schema": {"name": "City", "schema": CITY_SCHEMA, "strict": True}}
    plan = llm._plan([HumanMessage("Name a city.")], None, {"response_format": rf})
    ours = list(llm._tokens(tiny_model, plan))
    matcher = Matcher(plan.grammar)
    ref = generate_constrained(tiny_model, plan.prompt_ids, matcher, max_tokens=48,
                               budget_guard=BudgetGuard(matcher))
    assert ours == ref.token_ids


def test_errors(llm):
    from structgen.errors import GenerationError

    with pytest.raises(GenerationError, match="timeout") as e:
        llm.invoke("Hi", timeout=1e-9)
    assert e.value.reason == "timeout"
    tight = ChatStructgen(model=llm.model, max_tokens=3)
    with pytest.raises(GenerationError, match="max_tokens=3"):  # no valid Person fits in 3 tokens
        tight.with_structured_output(Person).invoke("Invent a person.")
    with pytest.raises(ValueError, match="text only"):
        llm.invoke([HumanMessage(content=[{"type": "image_url", "image_url": {"url": "x"}}])])


def test_missing_langchain_gives_install_hint(monkeypatch):
    import importlib
    import sys

    for name in [n for n in sys.modules if n == "langchain_core" or n.startswith("langchain_core.")]:
        monkeypatch.setitem(sys.modules, name, None)  # makes `import langchain_core...` fail
    monkeypatch.delitem(sys.modules, "structgen.integrations.langchain")
    with pytest.raises(ImportError, match=r"pip install 'structgen\[langchain\]'"):
        importlib.import_module("structgen.integrations.langchain")
    monkeypatch.undo()
    assert importlib.import_module("structgen.integrations.langchain").ChatStructgen is ChatStructgen


def test_pydantic_v1_class_and_json_mode_with_schema(llm):
    from pydantic.v1 import BaseModel as BaseModelV1

    class Joke(BaseModelV1):
        setup: str
        punchline: str

    roomy = ChatStructgen(model=llm.model, max_tokens=64)
    joke = roomy.with_structured_output(Joke).invoke("Tell me a joke.")
    assert isinstance(joke, Joke)
    # JSON mode with a schema: the prompt carries the instructions, the grammar still enforces the schema
    as_json = roomy.with_structured_output(Person, method="json_mode").invoke("A person as JSON: name, age, role.")
    assert isinstance(as_json, Person)


def test_message_content_blocks(llm):
    history = [
        HumanMessage([{"type": "text", "text": "Weather in "}, {"type": "text", "text": "Oslo?"}]),
        AIMessage([{"type": "text", "text": "Checking."},
                   {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}],
                  tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "call_1"}]),
        ToolMessage([{"type": "text", "text": "sunny"}], tool_call_id="call_1"),
    ]
    from structgen.integrations.langchain.messages import _to_chat

    chat = _to_chat(history)
    assert chat[0] == {"role": "user", "content": "Weather in Oslo?"}
    assert chat[1]["role"] == "assistant" and chat[1]["content"].startswith("Checking.\n{\"name\":\"get_weather\"")
    assert chat[2] == {"role": "tool", "content": "sunny"}
    assert isinstance(llm.invoke(history, max_tokens=4), AIMessage)


# -- the real embedded model ------------------------------------------------------------------------
@pytest.mark.slow
def test_structured_output_needing_value_checks_on_the_real_model(monkeypatch, smol):
    """An array of at least three unique short strings needs a check at the value boundary (the
    token closing a duplicate is cleared from the mask).  Asked to repeat a word, the real SmolLM2
    keeps writing it again, and a three-character item that repeats "yes" has no completion left
    but the cleared quote: a dead end.  The chat model decodes through structgen's runtime, which takes the
    last token back and draws again (before the renovation it raised), so a valid value comes back."""
    import jsonschema

    from structgen.engine.matcher import Matcher

    model = smol
    cleared = []
    mask = Matcher.next_token_mask

    def recording_mask(self):
        words = mask(self)
        if self.may_dead_end and (self.grammar.mask(*self._state) != words).any():
            cleared.append(self.output_bytes())  # tokens a check refuses, cleared from the mask
        return words

    monkeypatch.setattr(Matcher, "next_token_mask", recording_mask)
    schema = {"title": "Words", "type": "object", "required": ["words"], "additionalProperties": False,
              "properties": {"words": {"type": "array", "items": {"type": "string", "maxLength": 3},
                                       "minItems": 3, "maxItems": 5, "uniqueItems": True}}}
    llm = ChatStructgen(model=model, max_tokens=80)
    value = llm.with_structured_output(schema).invoke("Write the word 'yes' three times.")
    jsonschema.validate(value, schema)
    assert len(set(value["words"])) == len(value["words"]) >= 3
    assert cleared, "no check ever cleared a token: the test no longer exercises the checks"
