"""Load test for `tessera serve`: N concurrent streaming clients x M requests
each, sharing a long system prompt (the way agent sessions share their
instructions and tool schemas). Half the clients send tools (tool_choice
auto). Reports errors, throughput and client-side TTFT percentiles, then
waits for the server to go idle and checks /metrics: no running or waiting
request and no referenced KV block (the pool is back to baseline).

    python scripts/load_test.py http://127.0.0.1:8080 [--clients 32] [--requests 10]
Exit status 1 on any error or leak.
"""

import argparse
import json
import statistics
import threading
import time
import urllib.request

from openai import OpenAI

import prometheus

SYSTEM = ("You are a careful assistant for a software team. Answer in one or two short sentences. "
          + " ".join(f"Rule {i}: keep answers about topic {i} brief and factual." for i in range(40)))
TOOLS = [
    {"type": "function", "function": {"name": "file_read", "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {"name": "shell_run", "description": "Run a command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
]


def metrics(base):
    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as response:
        return prometheus.parse(response.read().decode())


def client_run(client, index, requests, max_tokens, results, errors):
    for turn in range(requests):
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": f"Client {index}, question {turn}: what is {index} plus {turn}?"}]
        extra = {"tools": TOOLS, "tool_choice": "auto"} if index % 2 else {}
        started = time.perf_counter()
        first = None
        usage = None
        try:
            stream = client.chat.completions.create(
                model="tessera", messages=messages, max_tokens=max_tokens, temperature=0.7, seed=index * 100 + turn,
                stream=True, stream_options={"include_usage": True}, extra_headers={"X-Session-Id": f"load-{index}"},
                **extra)
            for chunk in stream:
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices:
                    delta = choice.delta
                    if first is None and (delta.content or delta.tool_calls):
                        first = time.perf_counter() - started
            if usage is None:
                raise RuntimeError("no usage chunk")
            results.append({"ttft": first if first is not None else time.perf_counter() - started,
                            "total": time.perf_counter() - started,
                            "completion_tokens": usage.completion_tokens,
                            "prompt_tokens": usage.prompt_tokens,
                            "cached_tokens": usage.prompt_tokens_details.cached_tokens})
        except Exception as error:  # every failure is counted and printed, none is fatal mid-run
            errors.append(f"client {index} request {turn}: {error!r}")


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("base", nargs="?", default="http://127.0.0.1:8080")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--json", help="write the summary here")
    args = parser.parse_args()
    client = OpenAI(base_url=f"{args.base}/v1", api_key="unused", max_retries=0, timeout=900)
    before = metrics(args.base)
    results, errors = [], []
    threads = [threading.Thread(target=client_run, args=(client, i, args.requests, args.max_tokens, results, errors))
               for i in range(args.clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    deadline = time.time() + 60
    after = metrics(args.base)
    while (after["tessera_requests_running"] or after["tessera_requests_waiting"]) and time.time() < deadline:
        time.sleep(0.2)
        after = metrics(args.base)
    leaks = []
    for name in ("tessera_requests_running", "tessera_requests_waiting", "tessera_kv_blocks_used"):
        if after[name] != 0:
            leaks.append(f"{name} = {after[name]} after the run")
    blocks = after["tessera_kv_blocks_free"] + after["tessera_kv_blocks_cached"] + after["tessera_kv_blocks_pinned"]
    if blocks != after["tessera_kv_blocks_total"]:
        leaks.append("free + cached + pinned != total blocks")
    if after["tessera_kv_blocks_pinned"] > after["tessera_kv_blocks_total"] / 4:
        leaks.append("session pins hold more than a quarter of the pool")
    ttfts = [r["ttft"] for r in results]
    generated = sum(r["completion_tokens"] for r in results)
    prompt = sum(r["prompt_tokens"] for r in results)
    cached = sum(r["cached_tokens"] for r in results)
    summary = {
        "clients": args.clients, "requests_per_client": args.requests, "ok": len(results), "errors": len(errors),
        "elapsed_s": round(elapsed, 1), "requests_per_s": round(len(results) / elapsed, 2),
        "generated_tokens_per_s": round(generated / elapsed, 1),
        "ttft_p50_s": round(percentile(ttfts, 0.5), 3) if ttfts else None,
        "ttft_p99_s": round(percentile(ttfts, 0.99), 3) if ttfts else None,
        "cached_prompt_fraction": round(cached / prompt, 3) if prompt else None,
        "preemptions": after["tessera_preemptions_total"] - before["tessera_preemptions_total"],
        "cancelled": after["tessera_requests_cancelled_total"] - before["tessera_requests_cancelled_total"],
        "sessions_pinned": after["tessera_sessions_pinned"], "kv_blocks_pinned": after["tessera_kv_blocks_pinned"],
        "leaks": leaks,
    }
    print(json.dumps(summary, indent=1))
    for error in errors[:20]:
        print("ERROR", error)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(summary, out, indent=1)
    raise SystemExit(1 if errors or leaks else 0)


if __name__ == "__main__":
    main()
