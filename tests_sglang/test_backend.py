"""structgen as SGLang's grammar backend, through SGLang's own grammar code (see conftest.py)."""
from __future__ import annotations

import json
from concurrent.futures import Future

import jsonschema
import pytest
import torch

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "tags": {"type": "array", "items": {"type": "string", "maxLength": 6},
                                                    "uniqueItems": True, "maxItems": 3},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "tags", "age"], "additionalProperties": False}

LARK = """
start: "The answer is " NUMBER "."
NUMBER: /[1-9][0-9]{0,2}/
"""
GBNF = 'root ::= "yes" | "no"'
STRUCTURAL_TAG = json.dumps({
    "type": "structural_tag",
    "structures": [{"begin": "<weather>", "schema": {"type": "object", "properties": {"city": {"type": "string"}},
                                                     "required": ["city"]}, "end": "</weather>"}],
    "triggers": ["<weather>"]})


def _grammar(backend, key):
    """A request's grammar as SGLang's GrammarManager gets it: compiled on the backend's pool
    (a Future), a pristine copy cached, the request given a copy."""
    value, hit = backend.get_cached_or_future_value(key, False)
    if isinstance(value, Future):
        value = value.result()
        backend.set_cache(key, value.copy())
    return value


def _decode(model, grammars, prompts, max_new_tokens=96, temperature=1.0, seed=0):
    """Sample every request together, masked by SGLang's batch path; the output texts."""
    from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo

    from structgen.runtime.kv_cache import KVCacheModel

    gen = torch.Generator().manual_seed(seed)
    tok = model.hf_tokenizer
    caches = [KVCacheModel(model.hf_model) for _ in grammars]
    logits = [c.forward(tok(model.chat_prompt(p))["input_ids"], logits_to_keep=1)[-1] for c, p in zip(caches, prompts)]
    outs = [[] for _ in grammars]
    batch = SamplingBatchInfo.__new__(SamplingBatchInfo)
    batch.grammars, batch.vocab_size, batch.device = grammars, model.info.vocab_size, "cpu"
    batch.temperatures = torch.ones(len(grammars), 1)
    for _ in range(max_new_tokens):
        live = [i for i, g in enumerate(grammars) if not g.is_terminated()]
        if not live:
            break
        batch.update_regex_vocab_mask()
        rows = torch.stack(logits).clone()
        batch.grammar_mask.apply(rows)
        for i in live:
            if temperature == 0:
                t = int(rows[i].argmax())
            else:
                t = int(torch.multinomial(torch.softmax(rows[i] / temperature, -1), 1, generator=gen))
            grammars[i].accept_token(t)  # SGLang's scheduler: a ValueError here aborts the request
            outs[i].append(t)
            if not grammars[i].is_terminated():
                logits[i] = caches[i].forward([t])[-1]
    eos = set(grammars[0].served.stop_token_ids) if hasattr(grammars[0], "served") else set()
    return [tok.decode([t for t in o if t not in eos]) for o in outs]


def test_the_plugin_loader_registers_the_backend():
    """SGLang's own plugin loader finds structgen's entry point and makes the name a choice."""
    from importlib.metadata import entry_points

    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES

    assert "structgen" in {ep.name for ep in entry_points(group="sglang.srt.plugins")}
    load_plugins()
    assert "structgen" in GRAMMAR_BACKEND_CHOICES
    assert "structgen" in GRAMMAR_BACKEND_REGISTRY


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_json_schema_requests_at_temperature_one_are_valid(model, backend, seed):
    grammars = [_grammar(backend, ("json", json.dumps(SCHEMA))) for _ in range(3)]
    prompts = ["Describe a cat as JSON.", "Give a person as JSON.", "A JSON record of a city."]
    for text in _decode(model, grammars, prompts, max_new_tokens=120, seed=seed):
        jsonschema.validate(json.loads(text), SCHEMA)


def test_regex_lark_gbnf_and_structural_tags_in_one_batch(model, backend):
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammar

    from structgen.integrations.sglang_backend import StructgenSGLangGrammar

    keys = [("regex", r"(red|green|blue)-[0-9]{2}"), ("ebnf", LARK), ("ebnf", GBNF),
            ("structural_tag", STRUCTURAL_TAG)]
    grammars = [_grammar(backend, k) for k in keys]
    assert isinstance(grammars[2], XGrammarGrammar)  # GBNF goes to SGLang's XGrammar backend
    assert all(isinstance(g, StructgenSGLangGrammar) for i, g in enumerate(grammars) if i != 2)
    prompts = ["Pick a colour code.", "What is six times seven?", "Is the sky blue?", "Weather in Paris?"]
    texts = _decode(model, grammars, prompts, max_new_tokens=64, temperature=0.0)
    import re

    assert re.fullmatch(r"(red|green|blue)-[0-9]{2}", texts[0]), texts[0]
    assert re.fullmatch(r"The answer is [1-9][0-9]{0,2}\.", texts[1]), texts[1]
    assert texts[2].strip() in ("yes", "no"), texts[2]
    for call in re.findall(r"<weather>(.*?)</weather>", texts[3], re.S):  # free text, or a valid call
        assert isinstance(json.loads(call)["city"], str)
    assert texts[3].count("<weather>") == texts[3].count("</weather>")


@pytest.mark.parametrize("seed", [0, 1])
def test_the_budget_guard_finishes_json_within_max_new_tokens(model, backend, seed):
    """With the budget the plugin hands over, a request sampled at temperature 1 closes its JSON
    within max_new_tokens instead of being cut off."""
    schema = {"type": "object", "properties": {"story": {"type": "string"},
                                               "words": {"type": "array", "items": {"type": "string"}}},
              "required": ["story", "words"]}
    grammars = [_grammar(backend, ("json", json.dumps(schema))) for _ in range(2)]
    for g in grammars:
        g.set_budget(24)
    texts = _decode(model, grammars, ["Tell a long story as JSON.", "List many words as JSON."],
                    max_new_tokens=24, seed=seed)
    assert all(g.is_terminated() for g in grammars)
    for text in texts:
        jsonschema.validate(json.loads(text), schema)


def test_an_invalid_schema_is_sglang_s_invalid_grammar_with_structgen_s_message(backend):
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject

    g = _grammar(backend, ("json", json.dumps({"type": "object", "properties": {"a": {"type": "strin"}}})))
    assert isinstance(g, InvalidGrammarObject)
    assert "/properties/a" in g.error_message and "strin" in g.error_message


class _Request:
    """The attributes of SGLang's scheduler request (``schedule_batch.Req``) that ``GrammarManager``
    reads and writes.  ``Req`` itself cannot be imported on a CPU-only machine: its module loads
    torchvision's CUDA operators."""

    def __init__(self, sampling_params):
        self.rid, self.origin_input_ids, self.require_reasoning = "r", [1, 2, 3], False
        self.sampling_params, self.grammar, self.grammar_key = sampling_params, None, None
        self.finished_reason = None

    def finished(self) -> bool:
        return self.finished_reason is not None

    def set_finish_with_abort(self, message: str) -> None:
        self.finished_reason = message


def _request(max_new_tokens, schema):
    from sglang.srt.sampling.sampling_params import SamplingParams

    return _Request(SamplingParams(max_new_tokens=max_new_tokens, json_schema=json.dumps(schema)))


def _grammar_manager(backend):
    from sglang.srt.constrained.grammar_manager import GrammarManager

    gm = GrammarManager.__new__(GrammarManager)
    gm.grammar_backend, gm.grammar_queue = backend, []
    gm._enable_strict_thinking = False
    return gm


def test_grammar_manager_gives_the_request_its_budget(backend):
    """SGLang's GrammarManager attaches the grammar; the plugin then gives it max_new_tokens, and a
    budget no valid output fits aborts the request naming the smallest one that does."""
    gm = _grammar_manager(backend)
    schema = {"type": "object", "properties": {"id": {"type": "string", "minLength": 20}}, "required": ["id"]}
    _grammar(backend, ("json", json.dumps(schema)))  # compiled and cached, as GrammarManager does
    ok = _request(64, schema)
    gm.process_req_with_grammar(ok)  # a cache hit: SGLang copies the cached grammar
    assert ok.grammar.served.max_tokens == 64 and not ok.finished()
    short = _request(5, schema)
    gm.process_req_with_grammar(short)
    assert short.finished() and "max_new_tokens=5" in short.finished_reason
