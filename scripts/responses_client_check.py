"""The official `openai` Python client's Responses API against a running `tessera serve`.

Runs every tool_choice (none, auto, required, a named function, a `browser_*` family, an
allowed_tools set), with `responses.create` and `responses.stream`, and checks what comes back: each
function_call names an allowed tool and its arguments validate against the tool's schema (with
`jsonschema`); `none` never calls; usage carries `input_tokens_details.cached_tokens`. Then a tool loop
over `previous_response_id` (each turn reuses the previous turn's prompt and reply from the prefix
cache), an unknown id (a 400 naming `previous_response_id`), `text.format` json_schema and
`instructions`. Exits non-zero listing every failure.

    python scripts/responses_client_check.py http://127.0.0.1:8080/v1
"""

import json
import sys
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai
from openai import OpenAI

TOOLS = [
    {"type": "function", "name": "get_weather", "description": "Current weather for a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
                    "required": ["city"], "additionalProperties": False}},
    {"type": "function", "name": "browser_open", "description": "Open a web page.",
     "parameters": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"], "additionalProperties": False}},
    {"type": "function", "name": "browser_search", "description": "Search the web.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"}},
                    "required": ["query"], "additionalProperties": False}},
    {"type": "function", "name": "shell_run", "description": "Run a shell command.",
     "parameters": {"type": "object", "properties": {"command": {"type": "string"}, "timeout_s": {"type": "number"}},
                    "required": ["command"], "additionalProperties": False}},
]
SCHEMAS = {tool["name"]: tool["parameters"] for tool in TOOLS}
ALL = sorted(SCHEMAS)

# (label, tool_choice, names a call may use, whether a call is required)
MODES = [
    ("none", "none", [], False),
    ("auto", "auto", ALL, False),
    ("required", "required", ALL, True),
    ("named", {"type": "function", "name": "get_weather"}, ["get_weather"], True),
    ("family", {"type": "function", "name": "browser_*"}, ["browser_open", "browser_search"], True),
    ("allowed", {"type": "allowed_tools", "mode": "required", "tools": [
        {"type": "function", "name": "shell_run"}, {"type": "function", "name": "get_weather"}]},
     ["get_weather", "shell_run"], True),
]
PROMPTS = [
    "What is the weather in Paris right now?",
    "Search the web for the Rust borrow checker.",
    "List the files in the current directory.",
]


def check_response(response, allowed, required, failures, where):
    calls = [item for item in response.output if item.type == "function_call"]
    cut = response.status == "incomplete"
    if cut and response.incomplete_details.reason != "max_output_tokens":
        failures.append(f"{where}: incomplete for {response.incomplete_details}")
    if not allowed and calls:
        failures.append(f"{where}: tool_choice none made a call {calls}")
    if required and not calls and not cut:
        failures.append(f"{where}: a call was required, got none ({response.status})")
    for index, call in enumerate(calls):
        if call.name not in allowed:
            failures.append(f"{where}: called {call.name}, allowed {allowed}")
            continue
        if cut and index == len(calls) - 1:
            continue
        try:
            jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])
        except (json.JSONDecodeError, jsonschema.ValidationError) as error:
            failures.append(f"{where}: arguments do not validate: {error}: {call.arguments}")
    details = response.usage.input_tokens_details if response.usage else None
    if details is None or details.cached_tokens is None:
        failures.append(f"{where}: usage has no cached_tokens: {response.usage}")


def streamed(client, body):
    """The final response of a stream, and the event types in order (a response cut by
    max_output_tokens ends with response.incomplete, which get_final_response refuses)."""
    names, last = [], None
    with client.responses.stream(**body) as stream:
        for event in stream:
            names.append(event.type)
            if event.type in ("response.completed", "response.incomplete"):
                last = event.response
    return last, names


def run_case(client, case, failures):
    label, choice, allowed, required, i, prompt, stream = case
    where = f"{label} / prompt {i} / {'stream' if stream else 'create'}"
    body = dict(model="tessera", input=prompt, tools=TOOLS, tool_choice=choice, parallel_tool_calls=False,
                temperature=0, max_output_tokens=96)
    if stream:
        response, names = streamed(client, body)
        if names[:1] != ["response.created"] or response is None:
            failures.append(f"{where}: event sequence {names}")
            return
    else:
        response = client.responses.create(**body)
    check_response(response, allowed, required, failures, where)


def tool_loop(client, failures):
    """Three turns over previous_response_id: each turn's prompt reuses the previous turn's prompt
    and reply from the cache, up to the last whole block (16 tokens)."""
    body = dict(model="tessera", instructions="You are a weather assistant.", tools=TOOLS,
                tool_choice={"type": "function", "name": "get_weather"}, temperature=0, max_output_tokens=64)
    previous = client.responses.create(input="Weather in Lima?", **body)
    for turn, city in enumerate(["Quito", "Bogota"], start=2):
        calls = [item for item in previous.output if item.type == "function_call"]
        if not calls:
            failures.append(f"tool loop turn {turn - 1}: no call: {previous}")
            return
        items = [{"type": "function_call_output", "call_id": calls[0].call_id, "output": "{\"temp_c\": 19}"},
                 {"role": "user", "content": f"And in {city}?"}]
        with client.responses.stream(input=items, previous_response_id=previous.id, **body) as stream:
            response = stream.get_final_response()
        reused = response.usage.input_tokens_details.cached_tokens
        before = previous.usage.input_tokens + previous.usage.output_tokens
        if reused + 16 <= before:
            failures.append(f"tool loop turn {turn}: reused {reused} of the previous turn's {before} tokens")
        print(f"tool loop turn {turn}: prompt {response.usage.input_tokens}, {reused} from the cache "
              f"(previous prompt and reply: {before})")
        previous = response
    try:
        client.responses.create(input="x", previous_response_id="resp_unknown", **body)
        failures.append("an unknown previous_response_id was accepted")
    except openai.BadRequestError as error:
        if (error.body or {}).get("param") != "previous_response_id":
            failures.append(f"unknown previous_response_id: {error}")


def json_format(client, failures):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    response = client.responses.create(model="tessera", input="Invent a person.", temperature=0,
                                       max_output_tokens=80,
                                       text={"format": {"type": "json_schema", "name": "person", "schema": schema}})
    try:
        jsonschema.validate(json.loads(response.output_text), schema)
    except (json.JSONDecodeError, jsonschema.ValidationError) as error:
        failures.append(f"json_schema text format: {error}: {response.output_text!r}")


def main():
    base_url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080/v1"
    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=600)
    failures = []
    cases = [(*mode, i, prompt, stream) for mode in MODES for i, prompt in enumerate(PROMPTS)
             for stream in (False, True)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda case: run_case(client, case, failures), cases))
    tool_loop(client, failures)
    json_format(client, failures)
    print(f"{len(cases)} tool_choice runs, previous_response_id loop, json_schema: {len(failures)} failures")
    for failure in failures:
        print("FAIL", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
