"""The soak's checks (scripts/soak.py): whether each response is complete and
obeys its request, and whether the server ended where it started.

Standard library only.
"""

import json

# After the first third of a server's life (pool and caches warm), RSS may
# still grow by this much; more is a leak.
RSS_WARM_GROWTH_MIB = 24


def read_stream(response):
    """The chunks of an SSE response, and whether `[DONE]` closed it."""
    chunks = []
    while True:
        line = response.readline()
        if not line:
            return chunks, False
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            return chunks, True
        chunks.append(json.loads(data))


def assemble_chat(chunks):
    """A streamed chat answer as one message, its finish reasons and usage."""
    content, calls, finishes, usage = "", {}, [], None
    for chunk in chunks:
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices", []):
            delta = choice.get("delta", {})
            content += delta.get("content") or ""
            for part in delta.get("tool_calls") or []:
                call = calls.setdefault(part["index"], {"function": {"name": "", "arguments": ""}})
                function = part.get("function", {})
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                finishes.append(choice["finish_reason"])
    message = {"content": content, "tool_calls": [calls[i] for i in sorted(calls)] or None}
    return message, finishes, usage


def check_usage(usage):
    if not usage:
        return "no usage"
    if usage["prompt_tokens"] <= 0 or usage["total_tokens"] != usage["prompt_tokens"] + usage["completion_tokens"]:
        return f"inconsistent usage {usage}"
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    if not 0 <= cached <= usage["prompt_tokens"]:
        return f"cached tokens out of range {usage}"
    return None


def check_call(call, allowed, schemas):
    name = call["function"]["name"]
    if name not in allowed:
        return f"called {name!r}, allowed {allowed}"
    try:
        arguments = json.loads(call["function"]["arguments"])
    except ValueError:
        return f"arguments of {name} are not JSON: {call['function']['arguments']!r}"
    schema = schemas[name]
    if not isinstance(arguments, dict) or set(arguments) - set(schema["properties"]) \
            or set(schema["required"]) - set(arguments):
        return f"arguments of {name} break its schema: {arguments!r}"
    for key, value in arguments.items():
        limit = schema["properties"][key]["maxLength"]
        if not isinstance(value, str) or len(value) > limit:
            return f"{name}.{key} is not a string of at most {limit} characters: {value!r}"
    return None


def check_chat(message, finish, usage, allowed, required, response_format, schemas):
    """None when a chat answer is complete and obeys its request, else why not."""
    if finish not in ("stop", "length", "tool_calls"):
        return f"finish reason {finish!r}"
    problem = check_usage(usage)
    if problem:
        return problem
    calls = message.get("tool_calls") or []
    if required and not calls:
        return f"a call was required, none came (finish {finish})"
    if calls and not allowed:
        return "a call came with tool_choice none"
    if (finish == "tool_calls") != bool(calls) and finish != "length":
        return f"finish reason {finish} with {len(calls)} calls"
    for call in calls:
        problem = check_call(call, allowed, schemas)
        if problem:
            return problem
    if response_format:
        try:
            value = json.loads(message.get("content") or "")
        except ValueError:
            return f"response format: not JSON (finish {finish}): {message.get('content')!r}"
        if not isinstance(value, dict) or set(value) != {"answer", "confident"}:
            return f"response format: wrong keys {value!r}"
    return None


def pool_problems(values):
    problems = [f"{name} = {values[name]} at the end" for name in (
        "tessera_requests_running", "tessera_requests_waiting", "tessera_kv_blocks_used") if values[name] != 0]
    held = values["tessera_kv_blocks_free"] + values["tessera_kv_blocks_cached"] + values["tessera_kv_blocks_pinned"]
    if held != values["tessera_kv_blocks_total"]:
        problems.append("free + cached + pinned blocks != the pool's blocks")
    if values["tessera_kv_blocks_pinned"] > values["tessera_kv_blocks_total"] / 4:
        problems.append("session pins hold more than a quarter of the pool")
    return problems


def counter_problems(start, end, tally):
    """The second life's engine counters against what its clients saw."""
    finished = end["finished"] - start["finished"]
    cancelled = end["cancelled"] - start["cancelled"]
    failed = end["failed"] - start["failed"]
    complete, dropped = tally.total("complete", life=2), tally.total("dropped", life=2)
    problems = []
    if failed:
        problems.append(f"{failed:.0f} requests failed in the engine")
    if not complete <= finished <= complete + dropped:
        problems.append(f"the engine finished {finished:.0f} requests; clients got {complete} complete, dropped {dropped}")
    if finished + cancelled > complete + dropped:
        problems.append(f"the engine saw {finished + cancelled:.0f} requests end; clients sent {complete + dropped}")
    return problems


def restart_problems(restart):
    problems = []
    if restart["exit_code"] != 0:
        problems.append(f"the server exited {restart['exit_code']} on SIGTERM")
    if restart["saved_blocks"] == 0 or restart["restored_blocks"] != restart["saved_blocks"]:
        problems.append(f"saved {restart['saved_blocks']} blocks, restored {restart['restored_blocks']}")
    if not any(probe["cached_tokens"] * 2 >= probe["prompt_tokens"] for probe in restart["probes"]):
        problems.append(f"no probe after the restart had half its prompt cached: {restart['probes']}")
    return problems


def rss_summary(life):
    samples = [rss for _, rss in life["rss"]]
    end = life.get("rss_end") or (samples[-1] if samples else life["rss_start"])
    third = samples[len(samples) // 3] if samples else life["rss_start"]
    # The kernel's peak (the process's whole life) catches what the 2 s samples miss.
    peak = max(samples + [end, life.get("rss_peak", 0)])
    return {"life": life["life"], "start": mib(life["rss_start"]), "after_a_third": mib(third),
            "max": mib(peak), "end": mib(end)}


def rss_problems(lives, pool_bytes):
    problems = []
    for life in lives:
        summary = rss_summary(life)
        if summary["max"] - summary["start"] > mib(pool_bytes):
            problems.append(f"life {life['life']}: RSS grew {summary['max'] - summary['start']:.0f} MiB, more than the"
                            f" KV pool ({mib(pool_bytes):.0f} MiB)")
        if summary["end"] - summary["after_a_third"] > RSS_WARM_GROWTH_MIB:
            problems.append(f"life {life['life']}: RSS grew {summary['end'] - summary['after_a_third']:.0f} MiB after"
                            f" warming up (allowed {RSS_WARM_GROWTH_MIB} MiB): a leak")
    return problems


def mib(value):
    return round(value / 2**20, 1)
