"""The official `anthropic` Python client against a running `tessera serve` (its /v1/messages).

Runs every tool_choice (none, auto, any, a named tool, a `browser_*` family, an allowed list through
`x_tessera_tool_choice`, any with `disable_parallel_tool_use`), with `messages.create` and
`messages.stream`, and checks what comes back: each tool_use names an allowed tool and its input
validates against the tool's schema (with `jsonschema`, independently of Tessera's automaton); `none`
never calls; stop_reason is `tool_use` exactly when there are calls; usage carries
`cache_read_input_tokens`. Then a two-turn tool loop (turn 2 reuses turn 1's prompt and reply from
the prefix cache, through the tool_use block sent back), `count_tokens`, stop sequences, system
blocks with `cache_control`, and the refusals (no max_tokens, images, thinking) as Anthropic-shaped
400s. Exits non-zero listing every failure.

    python scripts/anthropic_client_check.py http://127.0.0.1:8080
"""

import sys
from concurrent.futures import ThreadPoolExecutor

import anthropic
import jsonschema

TOOLS = [
    {"name": "get_weather", "description": "Current weather for a city.",
     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
                      "required": ["city"], "additionalProperties": False}},
    {"name": "browser_open", "description": "Open a web page.",
     "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"], "additionalProperties": False}},
    {"name": "browser_search", "description": "Search the web.",
     "input_schema": {"type": "object", "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"}},
                      "required": ["query"], "additionalProperties": False}},
    {"name": "shell_run", "description": "Run a shell command.",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}, "timeout_s": {"type": "number"}},
                      "required": ["command"], "additionalProperties": False}},
]
SCHEMAS = {tool["name"]: tool["input_schema"] for tool in TOOLS}
ALL = sorted(SCHEMAS)

# (label, tool_choice, extra body, names a call may use, whether a call is required, most calls)
MODES = [
    ("none", {"type": "none"}, {}, [], False, 0),
    ("auto", {"type": "auto"}, {}, ALL, False, None),
    ("any", {"type": "any"}, {}, ALL, True, None),
    ("any, one call", {"type": "any", "disable_parallel_tool_use": True}, {}, ALL, True, 1),
    ("named", {"type": "tool", "name": "get_weather"}, {}, ["get_weather"], True, 1),
    ("family", {"type": "tool", "name": "browser_*"}, {}, ["browser_open", "browser_search"], True, None),
    ("allowed", {"type": "any"}, {"x_tessera_tool_choice": {"type": "allowed_tools", "mode": "required",
        "tools": [{"type": "function", "name": "shell_run"}, {"type": "function", "name": "get_weather"}]}},
     ["get_weather", "shell_run"], True, None),
]
# Greedy decoding: `temperature` is a Messages API field that anthropic 2.x's `create` no longer takes.
GREEDY = {"temperature": 0}
PROMPTS = [
    "What is the weather in Paris right now?",
    "Search the web for the Rust borrow checker.",
    "List the files in the current directory.",
]


def check_message(message, allowed, required, most, failures, where):
    calls = [block for block in message.content if block.type == "tool_use"]
    if not allowed and calls:
        failures.append(f"{where}: tool_choice none made a call {calls}")
    if required and not calls and message.stop_reason != "max_tokens":
        failures.append(f"{where}: a call was required, got none (stop_reason {message.stop_reason})")
    if most is not None and len(calls) > most:
        failures.append(f"{where}: {len(calls)} calls, at most {most} allowed")
    if calls and message.stop_reason not in ("tool_use", "max_tokens"):
        failures.append(f"{where}: stop_reason {message.stop_reason} with calls")
    if not calls and message.stop_reason == "tool_use":
        failures.append(f"{where}: stop_reason tool_use without a call")
    for index, block in enumerate(calls):
        if block.name not in allowed:
            failures.append(f"{where}: called {block.name}, allowed {allowed}")
            continue
        if not block.id.startswith("toolu_"):
            failures.append(f"{where}: tool_use id {block.id}")
        cut = message.stop_reason == "max_tokens" and index == len(calls) - 1
        if not cut:
            try:
                jsonschema.validate(block.input, SCHEMAS[block.name])
            except jsonschema.ValidationError as error:
                failures.append(f"{where}: input does not validate: {error.message}: {block.input}")
    usage = message.usage
    if usage.cache_read_input_tokens is None or usage.input_tokens is None or not usage.output_tokens:
        failures.append(f"{where}: usage incomplete: {usage}")


def run_case(client, case, failures):
    label, choice, extra, allowed, required, most, i, prompt, streamed = case
    where = f"{label} / prompt {i} / {'stream' if streamed else 'create'}"
    body = dict(model="tessera", max_tokens=96, tools=TOOLS, tool_choice=choice,
                messages=[{"role": "user", "content": prompt}], extra_body={**GREEDY, **extra})
    if streamed:
        with client.messages.stream(**body) as stream:
            names = [event.type for event in stream]
            message = stream.get_final_message()
        if names[:1] != ["message_start"] or names[-1:] != ["message_stop"]:
            failures.append(f"{where}: event sequence {names}")
    else:
        message = client.messages.create(**body)
    check_message(message, allowed, required, most, failures, where)


def tool_loop(client, failures):
    """Turn 2 sends turn 1's reply back (as the SDK returned it) with a tool result: its prompt
    must reuse turn 1's prompt and reply from the cache, up to the last whole block (16 tokens)."""
    system = [{"type": "text", "text": "You are a weather assistant.", "cache_control": {"type": "ephemeral"}}]
    messages = [{"role": "user", "content": "Weather in Lima?"}]
    body = dict(model="tessera", max_tokens=64, system=system, tools=TOOLS, extra_body=GREEDY,
                tool_choice={"type": "tool", "name": "get_weather"})
    first = client.messages.create(messages=messages, **body)
    calls = [block for block in first.content if block.type == "tool_use"]
    if first.stop_reason != "tool_use" or not calls:
        failures.append(f"tool loop: turn 1 made no call: {first}")
        return
    messages.append({"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]})
    messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": calls[0].id, "content": "{\"temp_c\": 19}"},
        {"type": "text", "text": "And in Quito?"}]})
    second = client.messages.create(messages=messages, **body)
    first_prompt = first.usage.input_tokens + first.usage.cache_read_input_tokens
    reused = second.usage.cache_read_input_tokens
    if reused + 16 <= first_prompt + first.usage.output_tokens:
        failures.append(f"tool loop: turn 2 reused {reused} tokens of turn 1's {first_prompt} prompt "
                        f"and {first.usage.output_tokens} reply tokens")
    counted = client.messages.count_tokens(model="tessera", messages=messages, system=system, tools=TOOLS,
                                           tool_choice=body["tool_choice"])
    if counted.input_tokens != second.usage.input_tokens + second.usage.cache_read_input_tokens:
        failures.append(f"count_tokens {counted.input_tokens} != turn 2's prompt {second.usage}")
    print(f"tool loop: turn 1 prompt {first_prompt} + reply {first.usage.output_tokens}; "
          f"turn 2 read {reused} of {second.usage.input_tokens + reused} from the cache")


def stop_sequences(client, failures):
    message = client.messages.create(model="tessera", max_tokens=40, extra_body=GREEDY, stop_sequences=[" "],
                                     messages=[{"role": "user", "content": "Describe the sea in two sentences."}])
    if message.stop_reason != "stop_sequence" or message.stop_sequence != " ":
        failures.append(f"stop sequence: {message.stop_reason} {message.stop_sequence!r}")
    text = "".join(block.text for block in message.content if block.type == "text")
    if " " in text:
        failures.append(f"stop sequence: text runs past it: {text!r}")


def refusals(client, failures):
    """Each is a 400 in Anthropic's shape whose message names the field."""
    user = [{"role": "user", "content": "hi"}]
    cases = [
        ("max_tokens", dict(messages=user)),
        ("messages[0].content[0]", dict(max_tokens=8, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}])),
        ("thinking", dict(max_tokens=8, messages=user, thinking={"type": "enabled", "budget_tokens": 1024})),
        ("tools[0].type", dict(max_tokens=8, messages=user, tools=[{"type": "bash_20250124", "name": "bash"}])),
    ]
    for field, body in cases:
        try:
            client.messages.create(model="tessera", **body) if "max_tokens" in body else \
                client.post("/v1/messages", cast_to=object, body={"model": "tessera", **body})
            failures.append(f"refusal of {field}: accepted")
        except anthropic.BadRequestError as error:
            kind = (error.body or {}).get("error", {}).get("type")
            if kind != "invalid_request_error" or field not in str(error):
                failures.append(f"refusal of {field}: {kind}: {error}")


def main():
    base_url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
    client = anthropic.Anthropic(base_url=base_url, api_key="unused", max_retries=0, timeout=600)
    failures = []
    cases = [(*mode, i, prompt, streamed) for mode in MODES for i, prompt in enumerate(PROMPTS)
             for streamed in (False, True)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda case: run_case(client, case, failures), cases))
    tool_loop(client, failures)
    stop_sequences(client, failures)
    refusals(client, failures)
    print(f"{len(cases)} tool_choice runs, tool loop, count_tokens, stop sequences, refusals: "
          f"{len(failures)} failures")
    for failure in failures:
        print("FAIL", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
