"""Tessera replicas behind SMG: which routing keeps an agent fleet's prefix cache (issue 22 item 2).

For each workload (every agent its own long system prompt; all agents one shared prompt) and each
setup (one replica alone; N replicas behind `smg launch` with `cache_aware`, `round_robin`, and
`consistent_hashing` keyed by `X-SMG-Routing-Key`), starts fresh replicas (cold caches), runs K
agents x T turns concurrently (each turn appends the model's reply and a ~250-word observation, as
an agent loop does) with streamed requests, and reports: the token-weighted prefix-cache hit rate
from turn 2 (`cached_tokens / prompt_tokens`), median and p90 time to first token from turn 2, the
requests each replica served (SMG's `x-smg-routed-worker-id`), and mean TTFT per turn for a plot.

    python scripts/bench_cluster.py --tessera BIN --smg SMG [--replicas 3] [--agents 4] [--turns 5]
                                    [--json out.json] [--svg out.svg]

Standard library only. Everything binds to 127.0.0.1.
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request

WORDS = ("the build step compiled every crate and the linker wrote the binary while the tests "
         "checked each module against its reference and reported timings for the slow ones").split()


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def system_prompt(name):
    return (f"You are {name}, an agent that keeps a software project healthy. " + " ".join(
        f"Rule {i}: when {name} is asked about area {i}, check the files first, answer in one short "
        f"sentence, and name the file you read." for i in range(40)))


def observation(agent, turn):
    words = [WORDS[(agent * 7 + turn * 13 + i) % len(WORDS)] for i in range(250)]
    return f"Tool result for step {turn}: " + " ".join(words)


class Process:
    """A child process with its output in a log file; killed on close."""

    def __init__(self, args, log_dir, name):
        self.log_path = os.path.join(log_dir, f"{name}.log")
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(args, stdout=self.log, stderr=self.log)

    def output(self):
        with open(self.log_path, errors="replace") as log:
            return log.read()

    def close(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


def wait_until(what, probe, seconds, process):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.process.poll() is not None:
            raise SystemExit(f"bench_cluster: {what}: the process exited:\n{process.output()[-2000:]}")
        try:
            if probe():
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"bench_cluster: {what} within {seconds} s:\n{process.output()[-2000:]}")


def get(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def start_replicas(args, count, log_dir):
    replicas = []
    for i in range(count):
        port = free_port()
        process = Process([args.tessera, "--threads", str(args.threads), "serve", "--model", "smollm2",
                           "--port", str(port), "--served-model-name", "tessera", "--kv-cache-tokens", str(args.kv_cache_tokens)],
                          log_dir, f"replica-{i}-{port}")
        replicas.append((process, f"http://127.0.0.1:{port}"))
    for process, url in replicas:
        wait_until("a replica did not start", lambda: "ok" in get(f"{url}/health"), 600, process)
    return replicas


def start_smg(args, policy, replicas, log_dir):
    port = free_port()
    urls = [url for _, url in replicas]
    command = [args.smg, "launch", "--host", "127.0.0.1", "--port", str(port), "--worker-urls", *urls,
               "--policy", policy, "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
               "--disable-retries", "--load-monitor-interval", "2", "--log-level", "warn", *args.smg_args]
    process = Process(command, log_dir, f"smg-{policy}")
    base = f"http://127.0.0.1:{port}"
    wait_until("SMG did not register every replica",
               lambda: all(url in get(f"{base}/workers") for url in urls) and "tessera" in get(f"{base}/v1/models"),
               120, process)
    return process, base


def stream_turn(base, messages, agent, max_tokens):
    """One streamed chat request: (reply text, ttft seconds, usage, routed worker)."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=600)
    body = {"model": "tessera", "messages": messages, "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    started = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", json.dumps(body),
                 {"Content-Type": "application/json", "X-SMG-Routing-Key": f"agent-{agent}"})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(f"status {response.status}: {response.read()[:300]!r}")
    worker = response.getheader("x-smg-routed-worker-id") or base
    text, ttft, usage = "", None, None
    while True:
        line = response.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices", []):
            piece = choice.get("delta", {}).get("content") or ""
            if piece and ttft is None:
                ttft = time.perf_counter() - started
            text += piece
    conn.close()
    if usage is None:
        raise RuntimeError("no usage chunk")
    return text, ttft if ttft is not None else time.perf_counter() - started, usage, worker


def run_agents(base, workload, agents, turns, max_tokens):
    records, errors = [], []

    def agent_loop(agent):
        system = system_prompt("Atlas") if workload == "shared" else system_prompt(f"Agent-{agent}")
        messages = [{"role": "system", "content": system},
                    {"role": "user", "content": f"Task {agent}: find why the nightly build is slow."}]
        for turn in range(1, turns + 1):
            try:
                reply, ttft, usage, worker = stream_turn(base, messages, agent, max_tokens)
            except Exception as error:  # counted and reported, never fatal mid-run
                errors.append(f"agent {agent} turn {turn}: {error!r}")
                return
            records.append({"agent": agent, "turn": turn, "ttft": ttft, "worker": worker,
                            "prompt": usage["prompt_tokens"],
                            "cached": usage["prompt_tokens_details"]["cached_tokens"]})
            messages += [{"role": "assistant", "content": reply},
                         {"role": "user", "content": observation(agent, turn)}]

    threads = [threading.Thread(target=agent_loop, args=(agent,)) for agent in range(agents)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return records, errors


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None


def summarize(records, errors, turns):
    later = [r for r in records if r["turn"] >= 2]
    per_worker = {}
    for record in records:
        per_worker[record["worker"]] = per_worker.get(record["worker"], 0) + 1
    counts = list(per_worker.values())
    return {
        "requests": len(records), "errors": errors,
        "hit_rate_from_turn_2": round(sum(r["cached"] for r in later) / max(1, sum(r["prompt"] for r in later)), 3),
        "ttft_median_s": round(statistics.median([r["ttft"] for r in later]), 3) if later else None,
        "ttft_p90_s": round(percentile([r["ttft"] for r in later], 0.9), 3) if later else None,
        "requests_per_replica": sorted(counts, reverse=True),
        "max_over_mean": round(max(counts) / statistics.mean(counts), 2) if counts else None,
        "ttft_per_turn_s": [round(statistics.mean([r["ttft"] for r in records if r["turn"] == t]), 3)
                            for t in range(1, turns + 1) if any(r["turn"] == t for r in records)],
    }


def run_setup(args, workload, setup, log_dir):
    single = setup == "single"
    replicas = start_replicas(args, 1 if single else args.replicas, log_dir)
    gateway = None
    try:
        if single:
            base = replicas[0][1]
        else:
            gateway, base = start_smg(args, setup, replicas, log_dir)
        records, errors = run_agents(base, workload, args.agents, args.turns, args.max_tokens)
        summary = summarize(records, errors, args.turns)
        if not single:
            summary["requests_per_replica"] += [0] * (args.replicas - len(summary["requests_per_replica"]))
            counts = summary["requests_per_replica"]
            summary["max_over_mean"] = round(max(counts) / statistics.mean(counts), 2)
        return summary
    finally:
        if gateway:
            gateway.close()
        for process, _ in replicas:
            process.close()


def svg_plot(results, turns):
    """Mean TTFT per turn, one line per setup, one panel per workload."""
    colors = {"single": "#444", "cache_aware": "#1b7837", "round_robin": "#c51b7d", "consistent_hashing": "#2166ac"}
    width, height, pad = 420, 260, 45
    panels = []
    for p, (workload, setups) in enumerate(results.items()):
        top = max(max(s["ttft_per_turn_s"] or [0]) for s in setups.values()) or 1
        x0 = p * (width + 20)
        lines = [f'<text x="{x0 + pad}" y="18" font-size="13">{workload} system prompt(s): mean TTFT per turn</text>',
                 f'<line x1="{x0 + pad}" y1="{height - pad}" x2="{x0 + width - 10}" y2="{height - pad}" stroke="black"/>',
                 f'<line x1="{x0 + pad}" y1="30" x2="{x0 + pad}" y2="{height - pad}" stroke="black"/>',
                 f'<text x="{x0 + 5}" y="36" font-size="10">{top:.1f} s</text>',
                 f'<text x="{x0 + 5}" y="{height - pad}" font-size="10">0</text>']
        for t in range(1, turns + 1):
            x = x0 + pad + (t - 1) * (width - pad - 20) / max(1, turns - 1)
            lines.append(f'<text x="{x - 3}" y="{height - pad + 14}" font-size="10">{t}</text>')
        for i, (setup, summary) in enumerate(setups.items()):
            points = " ".join(
                f"{x0 + pad + (t) * (width - pad - 20) / max(1, turns - 1):.1f},"
                f"{height - pad - value / top * (height - pad - 35):.1f}"
                for t, value in enumerate(summary["ttft_per_turn_s"]))
            color = colors.get(setup, "#999")
            lines.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{points}"/>')
            lines.append(f'<text x="{x0 + width - 150}" y="{45 + 14 * i}" font-size="11" fill="{color}">{setup}</text>')
        lines.append(f'<text x="{x0 + width / 2 - 10}" y="{height - 8}" font-size="11">turn</text>')
        panels.append("\n".join(lines))
    total = len(results) * (width + 20)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="{height}" '
            f'font-family="sans-serif">\n' + "\n".join(panels) + "\n</svg>\n")


def targets(results):
    """Issue 22's targets, each (what, met) on the figures of this run."""
    out = []
    own = results.get("own", {})
    if {"single", "round_robin"} <= own.keys():
        for setup in ("cache_aware", "consistent_hashing"):
            if setup in own:
                gap = own["single"]["hit_rate_from_turn_2"] - own[setup]["hit_rate_from_turn_2"]
                out.append((f"own prompts, {setup}: hit rate from turn 2 within 2 points of one replica"
                            f" ({gap * 100:+.1f} points below)", gap <= 0.02))
                ratio = own["round_robin"]["ttft_median_s"] / max(1e-9, own[setup]["ttft_median_s"])
                out.append((f"own prompts, {setup}: median TTFT {ratio:.2f}x better than round_robin (target 2x)",
                            ratio >= 2))
    shared = {setup: summary for setup, summary in results.get("shared", {}).items() if setup != "single"}
    if shared:
        passing = [setup for setup, summary in shared.items()
                   if summary["max_over_mean"] <= 1.5 and summary["hit_rate_from_turn_2"] >= 0.8]
        out.append(("shared prompt: no replica over 1.5x the mean requests with hit rate >= 0.8, under "
                    + (", ".join(passing) if passing else "no setup"), bool(passing)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tessera", required=True)
    parser.add_argument("--smg", required=True)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="kernel threads per replica")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--kv-cache-tokens", type=int, default=16384)
    parser.add_argument("--setups", default="single,cache_aware,round_robin,consistent_hashing")
    parser.add_argument("--workloads", default="own,shared")
    parser.add_argument("--smg-args", default="", help="extra `smg launch` arguments, space-separated")
    parser.add_argument("--json")
    parser.add_argument("--svg")
    args = parser.parse_args()
    args.smg_args = args.smg_args.split()
    log_dir = tempfile.mkdtemp(prefix="tessera-cluster.")
    print(f"bench_cluster: {args.replicas} replicas x {args.threads} thread(s), {args.agents} agents x "
          f"{args.turns} turns; logs in {log_dir}", flush=True)
    results = {}
    for workload in args.workloads.split(","):
        results[workload] = {}
        for setup in args.setups.split(","):
            started = time.time()
            summary = run_setup(args, workload, setup, log_dir)
            results[workload][setup] = summary
            print(f"{workload:>6} {setup:<18} hit rate from turn 2 {summary['hit_rate_from_turn_2']:.3f}  "
                  f"TTFT median {summary['ttft_median_s']} s p90 {summary['ttft_p90_s']} s  "
                  f"per replica {summary['requests_per_replica']} (max/mean {summary['max_over_mean']})  "
                  f"errors {len(summary['errors'])}  [{time.time() - started:.0f} s]", flush=True)
    met = targets(results)
    for what, ok in met:
        print(f"{'MET ' if ok else 'MISSED'}  {what}")
    report = {"replicas": args.replicas, "agents": args.agents, "turns": args.turns, "threads": args.threads,
              "smg_args": args.smg_args, "results": results, "targets": [{"what": w, "met": ok} for w, ok in met]}
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1)
    if args.svg:
        with open(args.svg, "w") as out:
            out.write(svg_plot(results, args.turns))
    failed = any(summary["errors"] for setups in results.values() for summary in setups.values())
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
