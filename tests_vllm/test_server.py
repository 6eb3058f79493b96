"""The OpenAI-compatible server with ``--structured-outputs-config.backend structgen`` on 127.0.0.1."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import jsonschema
import pytest

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["city", "population"],
          "properties": {"city": {"type": "string", "maxLength": 24}, "population": {"type": "integer", "minimum": 0}}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


@pytest.fixture(scope="module")
def server(model_folder, tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_folder,
           "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager",
           "--max-model-len", "2048", "--served-model-name", "smollm2",
           "--structured-outputs-config.backend", "structgen",
           # named and "required" tool choices are structured outputs, but vLLM 0.32 serves them only
           # with a tool parser, which it builds only with auto tool choice on
           "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 240
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("vLLM server did not start:\n" + log.read_text()[-4000:])
            time.sleep(1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _chat(base: str, schema) -> tuple[int, dict]:
    return _post(base + "/v1/chat/completions", {
        "model": "smollm2", "max_tokens": 100, "temperature": 0.7,
        "messages": [{"role": "user", "content": "Give a city and its population as JSON."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}}})


def test_json_schema_response_format_bad_schema_400_then_still_serving(server):
    status, body = _chat(server, SCHEMA)
    assert status == 200, body
    jsonschema.validate(json.loads(body["choices"][0]["message"]["content"]), SCHEMA)

    status, body = _chat(server, {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 2}}, "required": ["n"]})
    assert status == 400, body
    assert "structgen" in json.dumps(body)

    status, body = _chat(server, {"type": "strnig"})
    assert status == 400, body

    status, body = _chat(server, SCHEMA)  # the server keeps serving
    assert status == 200, body
    jsonschema.validate(json.loads(body["choices"][0]["message"]["content"]), SCHEMA)


def test_a_budget_no_output_fits_is_a_400_naming_the_smallest(server):
    status, body = _post(server + "/v1/chat/completions", {
        "model": "smollm2", "max_tokens": 4,
        "messages": [{"role": "user", "content": "Give a city and its population as JSON."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA}}})
    assert status == 400, body
    assert "smallest budget that fits is" in json.dumps(body), body


# ``strict``: vLLM 0.32 pins a tool's argument schema only for strict tools (or --tool-strict-level
# parameter); otherwise its structural tag lets the arguments be any JSON
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city now", "strict": True,
    "parameters": {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
                   "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 24},
                                  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The local time in a time zone", "strict": True,
    "parameters": {"type": "object", "additionalProperties": False, "required": ["zone"],
                   "properties": {"zone": {"type": "string", "pattern": "^[A-Z][a-z]+/[A-Z][a-z]+$"}}}}}


def _tool_calls(server: str, tool_choice, seed: int) -> list[dict]:
    status, body = _post(server + "/v1/chat/completions", {
        "model": "smollm2", "max_tokens": 120, "temperature": 1.0, "seed": seed,
        "messages": [{"role": "user", "content": "What is the weather in Oslo, and the time in Tokyo?"}],
        "tools": [WEATHER, TIME], "tool_choice": tool_choice})
    assert status == 200, body
    choice = body["choices"][0]
    assert choice["finish_reason"] in ("stop", "tool_calls"), choice  # within the budget, not cut
    return choice["message"]["tool_calls"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tool_calls_through_the_server_are_valid(server, seed):
    """tool_choice "required" and a named function become structural tags (vLLM's hermes format)
    that vLLM hands the structgen backend: every call names a tool and its arguments validate,
    sampled at temperature 1."""
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, TIME)}
    named = _tool_calls(server, {"type": "function", "function": {"name": "get_time"}}, seed)
    assert len(named) == 1 and named[0]["function"]["name"] == "get_time", named
    jsonschema.validate(json.loads(named[0]["function"]["arguments"]), by_name["get_time"])
    required = _tool_calls(server, "required", seed)
    assert required, "tool_choice='required' returned no tool call"
    for call in required:
        assert call["function"]["name"] in by_name, call
        jsonschema.validate(json.loads(call["function"]["arguments"]), by_name[call["function"]["name"]])
