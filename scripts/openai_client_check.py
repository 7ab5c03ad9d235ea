"""The official `openai` Python client against a running `tessera serve`.

Runs every tool-choice mode (none, auto, required, a named function, a `prefix*` family and an
allowed-tools list), streamed and not, and checks what comes back: the calls parse, name an allowed
tool and validate against their schema (with `jsonschema`, independently of Tessera's automaton);
`none` never calls; usage carries `cached_tokens`. Also runs the README's example unchanged, a JSON
schema response format and a plain completion. Exits non-zero listing every failure.

    python scripts/openai_client_check.py http://127.0.0.1:8080/v1
"""

import json
import sys
from concurrent.futures import ThreadPoolExecutor

import jsonschema
from openai import OpenAI

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
                       "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "browser_open", "description": "Open a web page.",
        "parameters": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "browser_search", "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"}},
                       "required": ["query"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "shell_run", "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}, "timeout_s": {"type": "number"}},
                       "required": ["command"], "additionalProperties": False}}},
]
SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
ALL = sorted(SCHEMAS)

# (label, tool_choice, names a call may use, whether a call is required)
MODES = [
    ("none", "none", [], False),
    ("auto", "auto", ALL, False),
    ("required", "required", ALL, True),
    ("named", {"type": "function", "function": {"name": "get_weather"}}, ["get_weather"], True),
    ("family", {"type": "function", "function": {"name": "browser_*"}}, ["browser_open", "browser_search"], True),
    ("allowed", {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
        {"type": "function", "function": {"name": "shell_run"}}, {"type": "function", "function": {"name": "get_weather"}}]}},
     ["get_weather", "shell_run"], True),
]
PROMPTS = [
    "What is the weather in Paris right now?",
    "Search the web for the Rust borrow checker.",
    "List the files in the current directory.",
]


def check_call(name, arguments, allowed, failures, where):
    if name not in allowed:
        failures.append(f"{where}: called {name}, allowed {allowed}")
        return
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as error:
        failures.append(f"{where}: arguments do not parse ({error}): {arguments!r}")
        return
    try:
        jsonschema.validate(parsed, SCHEMAS[name])
    except jsonschema.ValidationError as error:
        failures.append(f"{where}: arguments do not validate: {error.message}: {arguments}")


def check_response(calls, finish, allowed, required, failures, where):
    """`calls` = [(name, arguments)]."""
    if not allowed and calls:
        failures.append(f"{where}: tool_choice none made a call {calls}")
    if required and not calls:
        failures.append(f"{where}: a call was required, got none (finish {finish})")
    for index, (name, arguments) in enumerate(calls):
        if finish == "length" and index == len(calls) - 1:
            # Cut by max_tokens: the name must still be allowed; the arguments are a prefix.
            if name not in allowed:
                failures.append(f"{where}: a cut call names {name}")
            continue
        check_call(name, arguments, allowed, failures, where)
    if calls and finish not in ("tool_calls", "length"):
        failures.append(f"{where}: finish_reason {finish} with calls")


def run_plain(client, prompt, choice, allowed, required, failures, where, **extra):
    reply = client.chat.completions.create(
        model="tessera", messages=[{"role": "user", "content": prompt}], tools=TOOLS, tool_choice=choice,
        parallel_tool_calls=False, temperature=0, max_tokens=96, **extra)
    choice0 = reply.choices[0]
    calls = [(c.function.name, c.function.arguments) for c in (choice0.message.tool_calls or [])]
    check_response(calls, choice0.finish_reason, allowed, required, failures, where)
    if reply.usage.prompt_tokens_details is None or reply.usage.prompt_tokens_details.cached_tokens is None:
        failures.append(f"{where}: usage has no cached_tokens")
    return choice0.finish_reason


def run_streamed(client, prompt, choice, allowed, required, failures, where, **extra):
    stream = client.chat.completions.create(
        model="tessera", messages=[{"role": "user", "content": prompt}], tools=TOOLS, tool_choice=choice,
        parallel_tool_calls=False, temperature=0, max_tokens=96, stream=True,
        stream_options={"include_usage": True}, **extra)
    calls, finish, usage = {}, None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice0 in chunk.choices:
            for delta in choice0.delta.tool_calls or []:
                entry = calls.setdefault(delta.index, ["", ""])
                if delta.function and delta.function.name:
                    entry[0] += delta.function.name
                if delta.function and delta.function.arguments:
                    entry[1] += delta.function.arguments
            finish = choice0.finish_reason or finish
    ordered = [tuple(calls[i]) for i in sorted(calls)]
    check_response(ordered, finish, allowed, required, failures, where)
    if usage is None or usage.prompt_tokens_details is None:
        failures.append(f"{where}: no usage chunk with prompt_tokens_details")
    return finish


def readme_example(client, failures):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
              "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    reply = client.chat.completions.create(model="tessera", tool_choice="required", tools=tools,
        messages=[{"role": "user", "content": "Weather in Paris?"}])
    calls = reply.choices[0].message.tool_calls or []
    if not calls or calls[0].function.name != "get_weather":
        failures.append(f"README example: {reply}")


def extras(client, failures):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    reply = client.chat.completions.create(
        model="tessera", messages=[{"role": "user", "content": "Invent a person."}], temperature=0, max_tokens=80,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema}})
    try:
        jsonschema.validate(json.loads(reply.choices[0].message.content), schema)
    except (json.JSONDecodeError, jsonschema.ValidationError) as error:
        failures.append(f"json_schema response: {error}: {reply.choices[0].message.content!r}")
    completion = client.completions.create(model="tessera", prompt="One, two, three,", max_tokens=5, temperature=0)
    if completion.usage.completion_tokens != 5 or not completion.choices[0].text:
        failures.append(f"completion: {completion}")
    models = client.models.list()
    if not models.data:
        failures.append("models: empty")


def run_all(client, modes, failures, extra_for=lambda label, i: {}):
    """Every mode x prompt, plain and streamed, from concurrent clients (the
    server batches them, as it would real users); then the README example and
    the extras. Returns how many tool-choice runs there were and how many were
    cut by max_tokens."""
    cases = [(label, choice, allowed, required, i, prompt, streamed)
             for label, choice, allowed, required in modes
             for i, prompt in enumerate(PROMPTS)
             for streamed in (False, True)]

    def run_case(case):
        label, choice, allowed, required, i, prompt, streamed = case
        where = f"{label} / prompt {i} / {'stream' if streamed else 'plain'}"
        run = run_streamed if streamed else run_plain
        return run(client, prompt, choice, allowed, required, failures, where, **extra_for(label, i))

    with ThreadPoolExecutor(max_workers=8) as pool:
        finishes = list(pool.map(run_case, cases))
    readme_example(client, failures)
    extras(client, failures)
    return len(finishes), finishes.count("length")


def report(runs, cut, failures, what="README example, json_schema, completion, models"):
    print(f"{runs} tool-choice runs ({cut} cut by max_tokens), {what}: {len(failures)} failures")
    for failure in failures:
        print("FAIL", failure)
    sys.exit(1 if failures else 0)


def main():
    base_url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080/v1"
    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=600)
    failures = []
    runs, cut = run_all(client, MODES, failures)
    report(runs, cut, failures)


if __name__ == "__main__":
    main()
