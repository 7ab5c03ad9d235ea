#!/usr/bin/env python3
"""Soak test for `tessera serve` (issue 21): nothing lost, nothing leaked.

Starts the server with a small KV pool (evictions, preemptions), tight
admission limits (429s) and a persisted prefix cache, then drives it for
`--minutes` with agent-like sessions (long system prompts, growing histories,
tools on every turn) in a random mix of: plain and streamed chat requests with
every `tool_choice` mode (none, auto, required, one function, an allowed list,
a `fs_*` family) and JSON-schema response formats; plain and streamed
completions; clients that disconnect mid-stream or before a plain answer;
bursts past the admission limits. Half-way it sends SIGTERM while requests are
in flight, restarts the server on the same `--kv-cache-dir` and probes that
the restored cache serves hits.

Every response is checked to be complete (a finish reason, usage, `[DONE]` for
streams) and valid (tool calls name an allowed tool, arguments match the
tool's schema; JSON responses parse). At the end: the KV pool is back at
baseline (no running, waiting or referenced block), the server's counters
agree with the client's, no request failed, the log holds no panic, and the
server's RSS grew by no more than the KV pool's size (and by little once warm).

    python3 scripts/soak.py --bin target/release/tessera [--minutes 30] [--json out.json]

Standard library only. Exit status 1 when any check fails.
"""

import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import prometheus
from soak_checks import (assemble_chat, check_chat, check_usage, counter_problems, mib, pool_problems, read_stream,
                         restart_problems, rss_problems, rss_summary)


TOOLS = [
    {"type": "function", "function": {"name": "fs_read", "description": "Read a file of the project.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string", "maxLength": 80}},
                       "required": ["path"]}}},
    {"type": "function", "function": {"name": "fs_write", "description": "Write a file of the project.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string", "maxLength": 80},
                                                        "content": {"type": "string", "maxLength": 200}},
                       "required": ["path", "content"]}}},
    {"type": "function", "function": {"name": "shell_run", "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string", "maxLength": 120}},
                       "required": ["command"]}}},
    {"type": "function", "function": {"name": "browser_open", "description": "Open a web page.",
        "parameters": {"type": "object", "properties": {"url": {"type": "string", "maxLength": 120}},
                       "required": ["url"]}}},
]
TOOL_NAMES = [tool["function"]["name"] for tool in TOOLS]
PROPERTIES = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}

# (tool_choice, names a call may use, whether a call is required)
MODES = [
    ("none", [], False),
    ("auto", TOOL_NAMES, False),
    ("required", TOOL_NAMES, True),
    ({"type": "function", "function": {"name": "fs_read"}}, ["fs_read"], True),
    ({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
        {"type": "function", "function": {"name": "shell_run"}}, "browser_open"]}}, ["shell_run", "browser_open"], True),
    ({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": ["fs_*"]}}, ["fs_read", "fs_write"], False),
]
ANSWER_SCHEMA = {"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": {
    "type": "object", "properties": {"answer": {"type": "string", "maxLength": 60}, "confident": {"type": "boolean"}},
    "required": ["answer", "confident"], "additionalProperties": False}}}

SYSTEMS = [
    f"You are agent {name}, working on a software project for a small team. "
    + " ".join(f"Rule {i}: when asked about {topic} number {i}, answer briefly, cite the file you read and never guess."
               for i in range(22))
    for name, topic in (("Ada", "the build"), ("Brook", "the tests"), ("Cole", "the deployment"))
]
QUESTIONS = ["What is in src/main.rs?", "Run the tests and report.", "Open the project page.",
             "Write a note to NOTES.md saying the build passed.", "Which file holds the config?",
             "Summarize the last tool result in one line.", "List the files under src/."]
OBSERVATION = ("The command printed: " + " ".join(f"line {i}: ok, 0 warnings, {i * 7} ms;" for i in range(12)))


class Tally:
    """Thread-safe outcome counters and failure messages, split by server life."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.failures = []

    def add(self, life, outcome, count=1):
        with self.lock:
            key = (life, outcome)
            self.counts[key] = self.counts.get(key, 0) + count

    def fail(self, message):
        with self.lock:
            self.failures.append(message)

    def total(self, outcome, life=None):
        with self.lock:
            return sum(n for (l, o), n in self.counts.items() if o == outcome and (life is None or l == life))

    def by_outcome(self):
        with self.lock:
            out = {}
            for (_, outcome), n in self.counts.items():
                out[outcome] = out.get(outcome, 0) + n
            return dict(sorted(out.items()))


class Server:
    """One `tessera serve` process and its log."""

    def __init__(self, binary, port, cache_dir, log_path):
        self.binary, self.port, self.cache_dir, self.log_path = binary, port, cache_dir, log_path
        self.process = None
        self.lives_logged = 0

    def start(self):
        log = open(self.log_path, "a")
        args = [self.binary, "--log", "tessera_engine=info,warn", "serve", "--model", "smollm2", "--port", str(self.port),
                "--kv-cache-tokens", "4096", "--kv-cache-dir", self.cache_dir, "--max-running", "4",
                "--max-waiting", "4", "--default-max-tokens", "64", "--shutdown-grace-secs", "60"]
        self.process = subprocess.Popen(args, stdout=log, stderr=log)
        deadline = time.time() + 600
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"soak: the server exited at start:\n{self.log()[-3000:]}")
            if self.log().count("serving ") > self.lives_logged:
                self.lives_logged += 1
                return
            time.sleep(0.2)
        raise SystemExit("soak: the server did not start within 10 minutes")

    def stop(self):
        """SIGTERM, then reap: the exit code and the process's peak RSS in bytes over its whole
        life, its shutdown (the cache save) included, which sampling every 2 s could miss."""
        self.process.send_signal(signal.SIGTERM)
        deadline = time.time() + 120
        while time.time() < deadline:
            pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
            if pid:
                self.process.returncode = os.waitstatus_to_exitcode(status)
                return self.process.returncode, usage.ru_maxrss * 1024
            time.sleep(0.05)
        self.process.kill()
        raise SystemExit("soak: the server did not stop within 120 s of SIGTERM")

    def rss_bytes(self, pid=None):
        try:
            with open(f"/proc/{pid or self.process.pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def log(self):
        with open(self.log_path, errors="replace") as log:
            return log.read()


def connect(port, timeout=600):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)


def post(port, path, body, headers=None):
    """A plain request: (status, parsed body)."""
    conn = connect(port)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def hang_up(conn, sock):
    """Close a connection at once, whatever still reads from it."""
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    conn.close()


def metrics(port):
    conn = connect(port, timeout=60)
    try:
        conn.request("GET", "/metrics")
        return prometheus.parse(conn.getresponse().read().decode())
    finally:
        conn.close()


class Session:
    """One agent conversation: its system prompt, tools and growing history."""

    def __init__(self, rng, number):
        self.rng, self.id = rng, f"soak-{number}"
        self.system = rng.choice(SYSTEMS)
        self.with_tools = rng.random() < 0.8
        self.messages = []

    def request(self, stream):
        if not self.messages or self.rng.random() < 0.1:
            self.messages = [{"role": "system", "content": self.system}]
        self.messages.append({"role": "user", "content": self.rng.choice(QUESTIONS)})
        body = {"model": "tessera", "messages": list(self.messages), "max_tokens": self.rng.choice([8, 24, 48]),
                "temperature": self.rng.choice([0, 0.7, 1.0]), "seed": self.rng.randrange(1 << 30)}
        allowed, required, response_format = [], False, False
        if self.with_tools:
            choice, allowed, required = self.rng.choice(MODES)
            body["tools"] = TOOLS
            body["tool_choice"] = choice
        elif self.rng.random() < 0.3:
            body["response_format"] = ANSWER_SCHEMA
            response_format = True
        if required or response_format:
            # The shortest forced call takes about 18 tokens; fewer is a 400 (tested elsewhere).
            body["max_tokens"] = self.rng.choice([24, 48])
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body, allowed, required, response_format

    def answered(self, message, usage):
        calls = message.get("tool_calls") or []
        if calls:
            self.messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call{i}", "type": "function", "function": call["function"]} for i, call in enumerate(calls)]})
            self.messages += [{"role": "tool", "tool_call_id": f"call{i}", "content": OBSERVATION}
                              for i in range(len(calls))]
        else:
            self.messages.append({"role": "assistant", "content": message.get("content") or ""})
        if usage["prompt_tokens"] > 1400:
            self.messages = []


class Soak:
    def __init__(self, port, tally, seed):
        self.port, self.tally, self.seed = port, tally, seed
        self.life = 1
        self.open = threading.Event()
        self.open.set()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.in_flight = 0

    def worker(self, number):
        rng = random.Random(self.seed * 1000 + number)
        session = Session(rng, number)
        while not self.stopping.is_set():
            self.open.wait()
            if self.stopping.is_set():
                return
            if rng.random() < 0.05:
                session = Session(rng, number + 100 * rng.randrange(1 << 20))
            action = rng.choices([self.chat, self.chat_stream, self.completion, self.drop_stream, self.drop_plain,
                                  self.burst], weights=[30, 30, 8, 10, 8, 4])[0]
            self.run(action, rng, session)

    def run(self, action, rng, session):
        life = self.life
        with self.lock:
            self.in_flight += 1
        try:
            action(rng, session, life)
        except Exception as error:  # every failure is reported; none stops the soak
            self.tally.add(life, "lost")
            self.tally.fail(f"life {life} {action.__name__}: {error!r}")
        finally:
            with self.lock:
                self.in_flight -= 1

    def accepted(self, conn, path, body, headers, life):
        """The response to `body`, or None for a 429 (counted); any other status is an error."""
        conn.request("POST", path, json.dumps(body), headers)
        response = conn.getresponse()
        if response.status == 429:
            self.tally.add(life, "refused_429")
            return None
        if response.status != 200:
            raise RuntimeError(f"status {response.status}: {response.read()[:300]!r}")
        return response

    def headers(self, session):
        return {"Content-Type": "application/json", "X-Session-Id": session.id}

    def chat(self, rng, session, life):
        body, allowed, required, response_format = session.request(stream=False)
        status, answer = post(self.port, "/v1/chat/completions", body, {"X-Session-Id": session.id})
        if status == 429 and answer["error"]["code"] == "queue_full":
            self.tally.add(life, "refused_429")
            return
        if status != 200:
            raise RuntimeError(f"status {status}: {answer}")
        choice = answer["choices"][0]
        problem = check_chat(choice["message"], choice["finish_reason"], answer.get("usage"), allowed, required,
                             response_format, PROPERTIES)
        if problem:
            raise RuntimeError(problem)
        session.answered(choice["message"], answer["usage"])
        self.tally.add(life, "complete")

    def chat_stream(self, rng, session, life):
        body, allowed, required, response_format = session.request(stream=True)
        conn = connect(self.port)
        try:
            response = self.accepted(conn, "/v1/chat/completions", body, self.headers(session), life)
            if response is None:
                return
            chunks, done = read_stream(response)
        finally:
            conn.close()
        if not done:
            raise RuntimeError(f"the stream ended without [DONE] after {len(chunks)} chunks")
        message, finishes, usage = assemble_chat(chunks)
        if len(finishes) != 1:
            raise RuntimeError(f"finish reasons {finishes}")
        problem = check_chat(message, finishes[0], usage, allowed, required, response_format, PROPERTIES)
        if problem:
            raise RuntimeError(problem)
        session.answered(message, usage)
        self.tally.add(life, "complete")

    def completion(self, rng, session, life):
        stream = rng.random() < 0.5
        body = {"model": "tessera", "prompt": session.system + "\nQ: " + rng.choice(QUESTIONS) + "\nA:",
                "max_tokens": rng.choice([8, 24]), "temperature": 0.7, "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        conn = connect(self.port)
        try:
            response = self.accepted(conn, "/v1/completions", body, {"Content-Type": "application/json"}, life)
            if response is None:
                return
            if stream:
                chunks, done = read_stream(response)
                if not done:
                    raise RuntimeError("the completion stream ended without [DONE]")
                finishes = [c["finish_reason"] for chunk in chunks for c in chunk.get("choices", [])
                            if c.get("finish_reason")]
                usage = next((chunk["usage"] for chunk in chunks if chunk.get("usage")), None)
            else:
                answer = json.loads(response.read())
                finishes = [answer["choices"][0]["finish_reason"]]
                usage = answer.get("usage")
        finally:
            conn.close()
        if finishes not in (["stop"], ["length"]):
            raise RuntimeError(f"completion finish reasons {finishes}")
        problem = check_usage(usage)
        if problem:
            raise RuntimeError(problem)
        self.tally.add(life, "complete")

    def drop_stream(self, rng, session, life):
        """A client that reads a few lines of a stream and hangs up."""
        self.hang_up_on(rng, session, life, stream=True)

    def drop_plain(self, rng, session, life):
        """A client that gives up on a plain request before its answer."""
        self.hang_up_on(rng, session, life, stream=False)

    def hang_up_on(self, rng, session, life, stream):
        body, _, _, _ = session.request(stream=stream)
        body["max_tokens"] = 64
        session.messages.pop()
        conn = connect(self.port)
        sock = None
        try:
            conn.request("POST", "/v1/chat/completions", json.dumps(body), self.headers(session))
            sock = conn.sock
            if not stream:
                time.sleep(rng.uniform(0.05, 1.5))
            else:
                response = conn.getresponse()
                if response.status == 429:
                    self.tally.add(life, "refused_429")
                    return
                for _ in range(rng.randrange(1, 6)):
                    if not response.readline():
                        break
        finally:
            hang_up(conn, sock)
        self.tally.add(life, "dropped")

    def burst(self, rng, session, life):
        """Twelve short requests at once: past the admission limits, some get 429."""
        outcomes = []

        def one(index):
            body = {"model": "tessera", "max_tokens": 4, "messages": [
                {"role": "system", "content": session.system}, {"role": "user", "content": f"Say {index}."}]}
            try:
                outcomes.append(post(self.port, "/v1/chat/completions", body))
            except Exception as error:
                outcomes.append((None, repr(error)))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for status, answer in outcomes:
            if status == 200 and check_usage(answer.get("usage")) is None \
                    and answer["choices"][0]["finish_reason"] in ("stop", "length"):
                self.tally.add(life, "complete")
            elif status == 429 and answer["error"]["code"] == "queue_full" and answer["error"]["message"]:
                self.tally.add(life, "refused_429")
            else:
                self.tally.add(life, "lost")
                self.tally.fail(f"life {life} burst: {status} {answer!r:.300}")


def counters(values):
    return {name: values[f"tessera_requests_{name}_total"] for name in ("finished", "cancelled", "failed")}


def wait_idle(port):
    deadline = time.time() + 120
    while True:
        values = metrics(port)
        if values["tessera_requests_running"] == 0 and values["tessera_requests_waiting"] == 0:
            return values
        if time.time() > deadline:
            return values
        time.sleep(0.2)


def probe_restored(port, tally):
    """Right after the restart: each agent's system prompt is served from the restored cache."""
    probes = []
    for system in SYSTEMS:
        for tools in (True, False):
            body = {"model": "tessera", "max_tokens": 1, "messages": [
                {"role": "system", "content": system}, {"role": "user", "content": "Probe."}]}
            if tools:
                body["tools"] = TOOLS
            status, answer = post(port, "/v1/chat/completions", body)
            if status != 200:
                tally.fail(f"restart probe: status {status}: {answer}")
                continue
            usage = answer["usage"]
            probes.append({"prompt_tokens": usage["prompt_tokens"],
                           "cached_tokens": usage["prompt_tokens_details"]["cached_tokens"]})
    return probes


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="the tessera binary")
    parser.add_argument("--port", type=int, default=8191)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--json", help="write the summary here")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="tessera-soak.")
    log_path = os.path.join(work, "server.log")
    binary = os.path.join(work, "tessera")  # a copy: a rebuild during the soak must not change the restart's binary
    shutil.copy2(args.bin, binary)
    server = Server(binary, args.port, os.path.join(work, "kv"), log_path)
    tally = Tally()
    soak = Soak(args.port, tally, args.seed)
    print(f"soak: seed {args.seed}, {args.minutes} minutes, {args.workers} workers; server log {log_path}", flush=True)

    server.start()
    start_values = metrics(args.port)
    pool_bytes = start_values["tessera_kv_blocks_total"] * start_values["tessera_kv_block_bytes"]
    lives = [{"life": 1, "pid": server.process.pid, "rss_start": server.rss_bytes(), "rss": [],
              "started": time.time()}]
    sampling = threading.Event()

    def sample_rss():
        while not sampling.wait(2):
            # A life's samples are its own process's, its shutdown (the cache save) included; the
            # next process's start-up (the cache restore) before its life is recorded is neither's.
            life = lives[-1]
            rss = server.rss_bytes(life["pid"])
            if rss:
                life["rss"].append((time.time() - life["started"], rss))

    threading.Thread(target=sample_rss, daemon=True).start()
    workers = [threading.Thread(target=soak.worker, args=(i,)) for i in range(args.workers)]
    for thread in workers:
        thread.start()
    began = time.time()
    total = args.minutes * 60

    time.sleep(total / 2)
    # The restart: stop starting new requests (those started go on), then SIGTERM mid-flight.
    soak.open.clear()
    time.sleep(0.5)
    in_flight = soak.in_flight
    before = time.time()
    code, lives[-1]["rss_peak"] = server.stop()
    drained_s = time.time() - before
    lost_before = tally.total("lost", life=1)
    log = server.log()
    saved = re.findall(r"saved the prefix cache.*?blocks=(\d+)", log)
    soak.life = 2
    server.start()
    restored = re.findall(r"restored the prefix cache.*?blocks=(\d+)", server.log())
    lives.append({"life": 2, "pid": server.process.pid, "rss_start": server.rss_bytes(), "rss": [],
                  "started": time.time()})
    life2_start = counters(metrics(args.port))
    probes = probe_restored(args.port, tally)
    tally.add(2, "complete", len(probes))
    restart = {"in_flight_at_sigterm": in_flight, "exit_code": code, "drain_s": round(drained_s, 1),
               "lost_in_life_1": lost_before, "saved_blocks": int(saved[-1]) if saved else 0,
               "restored_blocks": int(restored[-1]) if restored else 0, "probes": probes}
    print(f"soak: restarted: {json.dumps(restart)}", flush=True)
    soak.open.set()

    time.sleep(max(0.0, began + total - time.time()))
    soak.stopping.set()
    for thread in workers:
        thread.join()
    sampling.set()
    end_values = wait_idle(args.port)
    life2_end = counters(end_values)
    lives[-1]["rss_end"] = server.rss_bytes()
    _, lives[-1]["rss_peak"] = server.stop()

    problems = list(tally.failures)
    problems += pool_problems(end_values)
    problems += counter_problems(life2_start, life2_end, tally)
    problems += restart_problems(restart)
    problems += rss_problems(lives, pool_bytes)
    problems += [f"log: {line}" for line in server.log().splitlines()
                 if "panicked" in line or " ERROR " in line][:10]
    summary = {
        "seed": args.seed, "minutes": args.minutes, "workers": args.workers,
        "outcomes": tally.by_outcome(), "restart": restart,
        "server_life_2": {name: life2_end[name] - life2_start[name] for name in life2_end},
        "preemptions": end_values["tessera_preemptions_total"], "evicted_blocks": end_values["tessera_kv_evicted_blocks_total"],
        "prefix_hit_fraction": round(end_values["tessera_prefix_cache_hit_tokens_total"]
                                     / max(1, end_values["tessera_prefix_cache_queried_tokens_total"]), 3),
        "pool_mib": round(pool_bytes / 2**20, 1),
        "rss_mib": [rss_summary(life) for life in lives],
        "pool_at_end": {name[len("tessera_"):]: end_values[name] for name in (
            "tessera_requests_running", "tessera_requests_waiting", "tessera_kv_blocks_used",
            "tessera_kv_blocks_pinned", "tessera_kv_blocks_cached", "tessera_kv_blocks_free", "tessera_kv_blocks_total")},
        "problems": problems,
    }
    print(json.dumps(summary, indent=1))
    shutil.rmtree(os.path.join(work, "kv"), ignore_errors=True)
    os.remove(binary)
    if problems:
        print(f"soak: FAILED; the server log is kept in {log_path}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(summary, out, indent=1)
    raise SystemExit(1 if problems else 0)


if __name__ == "__main__":
    main()
