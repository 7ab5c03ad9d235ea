"""Tessera replicas behind SMG (the Shepherd Model Gateway), driven by the official `openai` client.

Waits until SMG has registered every replica, then runs the client check of
`openai_client_check.py` through SMG: every tool-choice mode, plain and
streamed, in the forms SMG's validation passes (a family travels in
`x_tessera_tool_choice` beside `"tool_choice": "required"`; an allowed set is
flat), each request with an `X-SMG-Routing-Key`. Then checks what SMG and the
replicas saw: SMG read each replica's load from `GET /v1/loads`, the routing
keys became sessions on the replicas, and the replicas answered every request.

    python scripts/smg_check.py http://127.0.0.1:SMG_PORT http://127.0.0.1:REPLICA_1 [...]
"""

import json
import sys
import time
import urllib.request

from openai import OpenAI

import openai_client_check as check
import prometheus

# The modes as they pass SMG's validation: (label, tool_choice, extension, names allowed, required).
GATEWAY_MODES = [
    ("none", "none", None, [], False),
    ("auto", "auto", None, check.ALL, False),
    ("required", "required", None, check.ALL, True),
    ("named", {"type": "function", "function": {"name": "get_weather"}}, None, ["get_weather"], True),
    ("family", "required", {"type": "allowed_tools", "mode": "required",
                            "tools": [{"type": "function", "name": "browser_*"}]},
     ["browser_open", "browser_search"], True),
    ("allowed", {"type": "allowed_tools", "mode": "required", "tools": [
        {"type": "function", "name": "shell_run"}, {"type": "function", "name": "get_weather"}]},
     None, ["get_weather", "shell_run"], True),
]


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def wait_for(what, probe, seconds):
    deadline = time.time() + seconds
    while True:
        try:
            result = probe()
            if result:
                return result
        except OSError:
            pass
        if time.time() > deadline:
            raise SystemExit(f"smg_check: {what} within {seconds} s")
        time.sleep(0.5)


def replica_loads(gateway, replicas):
    """SMG's view of each replica's load, once it has polled them all."""
    loads = json.loads(get(f"{gateway}/get_loads"))["loads"]
    seen = {entry.get("worker", "").rstrip("/"): entry for entry in loads}
    return seen if all(seen.get(url, {}).get("max_total_num_tokens") for url in replicas) else None


def main():
    gateway, replicas = sys.argv[1].rstrip("/"), [url.rstrip("/") for url in sys.argv[2:]]
    wait_for("SMG never listed the model", lambda: "tessera" in get(f"{gateway}/v1/models"), 180)
    client = OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0, timeout=600)
    before = [prometheus.parse(get(f"{url}/metrics")) for url in replicas]
    failures = []
    modes = [(label, choice, allowed, required) for label, choice, _, allowed, required in GATEWAY_MODES]
    extensions = {label: extension for label, _, extension, _, _ in GATEWAY_MODES}

    def extra_for(label, prompt_index):
        extra = {"extra_headers": {"X-SMG-Routing-Key": f"agent-{prompt_index}"}}
        if extensions[label] is not None:
            extra["extra_body"] = {"x_tessera_tool_choice": extensions[label]}
        return extra

    runs, cut = check.run_all(client, modes, failures, extra_for)
    loads = wait_for("SMG never read every replica's /v1/loads", lambda: replica_loads(gateway, replicas), 60)
    after = [prometheus.parse(get(f"{url}/metrics")) for url in replicas]
    served = sum(a["tessera_requests_finished_total"] - b["tessera_requests_finished_total"]
                 for a, b in zip(after, before))
    # The tool-choice runs, the README example, the json_schema response and the completion.
    if served != runs + 3:
        failures.append(f"the replicas finished {served:.0f} requests; SMG was sent {runs + 3}")
    if sum(a["tessera_sessions_pinned"] for a in after) < 1:
        failures.append("no X-SMG-Routing-Key became a session on a replica")
    for url in replicas:
        print(f"{url}: SMG's load view {json.dumps(loads[url])}")
    check.report(runs, cut, failures, "README example, json_schema, completion, models, loads, sessions, through SMG")


if __name__ == "__main__":
    main()
