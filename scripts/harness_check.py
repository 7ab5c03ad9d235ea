"""Real agent harnesses, offline, on `tessera serve` (issue 33): Pi over each of its three protocols,
Claude Code, Codex CLI and the OpenAI Agents SDK, each on a few tasks of `scripts/agent_eval.py`'s
suite in a fresh workspace, through a recording proxy that reads what each request cost.

Per harness: a server with an empty `--kv-cache-dir`; the first task is the cold one (the harness's
fixed prefix, its system prompt and tools, is prefilled), the second starts warm from it, then the
server is restarted on the same cache folder (SIGTERM saves it) and the third starts warm from disk.
`tessera agent` runs the same tasks as a row of its own (in process, the same cache sequence).

For each task: pass or fail (the workspace is checked as the suite checks it), model requests
(turns), the hit rate from turn 2, how many later turns reused the previous turn's prompt and reply
in the same conversation
(cached + 16 > previous prompt + reply: the reply's tokens were replayed), first-turn and later-turn
TTFT, and every protocol error (a 4xx/5xx or an error event). A harness asking for more than
`--max-turns` model requests on a task is stopped there (`tessera agent` gets the same `--max-steps`).
Prints a table; `--json` writes all.

    scripts/harness-check.sh [--model M] [--harnesses pi-chat,claude-code,...] [--tasks a,b,c]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_eval  # noqa: E402
from harness import proxy, setups  # noqa: E402

# What harnesses write in a workspace besides the task's files: never counted as touched.
agent_eval.HARNESS_PATHS = agent_eval.HARNESS_PATHS + (".claude", ".codex", ".pi", "AGENTS.md", "CLAUDE.md")
DEFAULT_TASKS = "read-write,write-new,find-mention"


class Server:
    """`tessera serve` on a fixed port with a prefix-cache folder."""

    def __init__(self, binary, model, port, cache_dir, log):
        self.command = [binary, "serve", "--model", model, "--port", str(port), "--served-model-name", "tessera",
                        "--kv-cache-dir", cache_dir, "--kv-cache-tokens", "49152", "--max-running", "4"]
        self.log = log
        self.process = None
        self.starts = 0

    def start(self):
        self.process = subprocess.Popen(self.command, stdout=self.log, stderr=self.log)
        deadline = time.time() + 900
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"harness-check: tessera serve exited at start; see {self.log.name}")
            self.log.flush()
            with open(self.log.name, encoding="utf-8", errors="replace") as f:
                if f.read().count("serving ") > self.starts:
                    self.starts += 1
                    return
            time.sleep(0.3)
        raise SystemExit("harness-check: tessera serve did not start")

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=600)


def prepare(workspace, task):
    shutil.rmtree(workspace, ignore_errors=True)
    os.makedirs(workspace)
    for path, text in task["files"].items():
        full = os.path.join(workspace, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)
    return agent_eval.snapshot(workspace)


def figures(records):
    """The task's figures from its model requests, in order."""
    turns = [r for r in records if r["protocol"] in ("chat", "responses", "messages")]
    errors = [f"{r['path']} {r.get('status')}: {r.get('error', '')}"[:300] for r in records
              if r.get("status", 200) >= 400 or r.get("error")]
    later = [t for t in turns[1:] if "prompt" in t]
    # A request the client gave up on has no first token.
    later_ttfts = [t["ttft_s"] for t in turns[1:] if "ttft_s" in t]
    prompt, cached = sum(t["prompt"] for t in later), sum(t["cached"] for t in later)
    # Each turn against the turn before it in the same conversation (a harness may interleave others).
    pairs, last = [], {}
    for turn in turns:
        key = turn.get("conversation")
        if key in last:
            pairs.append((last[key], turn))
        last[key] = turn
    reused = sum(1 for before, after in pairs
                 if "prompt" in before and "prompt" in after
                 and after["cached"] + 16 > before["prompt"] + before["completion"])
    return {
        "turns": len(turns),
        "hit_from_turn_2": cached / prompt if prompt else None,
        "reused_previous": f"{reused}/{len(pairs)}",
        "first_prompt": turns[0].get("prompt") if turns else None,
        "first_cached": turns[0].get("cached") if turns else None,
        "first_ttft_s": turns[0].get("ttft_s") if turns else None,
        "later_ttft_s": statistics.median(later_ttfts) if later_ttfts else None,
        "errors": errors,
        "per_turn": [[t.get("prompt"), t.get("cached"), t.get("completion")] for t in turns],
    }


def run_capped(argv, workspace, env, recorder, args):
    """Run one harness on one task until it exits, asks past the turn cap or runs out of time.
    Returns (its output's tail, exit code or None, why it was stopped or None)."""
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out:
        process = subprocess.Popen(argv, cwd=workspace, env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        deadline, stopped = time.monotonic() + args.timeout, None
        while process.poll() is None:
            if recorder.capped.is_set():
                stopped = f"asked past {args.max_turns} model requests"
            elif time.monotonic() > deadline:
                stopped = f"timed out after {args.timeout} s"
            if stopped:
                recorder.stopping.set()
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                break
            time.sleep(0.2)
        out.seek(0)
        output = out.read()[-3000:]
    return (f"[stopped: {stopped}]\n" if stopped else "") + output, process.returncode if not stopped else None, stopped


def run_harness(harness, args, tasks, root):
    """Every task of one harness: cold, warm, warm after a restart."""
    cache_dir = tempfile.mkdtemp(prefix=f"tessera-harness-{harness.name}-")
    log = open(os.path.join(args.logs, f"serve-{harness.name}.log"), "w")
    server = Server(args.binary, args.model, args.port, cache_dir, log)
    recorder, proxy_port = proxy.start(args.port)
    recorder.max_turns = args.max_turns
    base = f"http://127.0.0.1:{proxy_port}"
    workspace = os.path.join(root, "ws", harness.name)
    rows = []
    server.start()
    try:
        for index, task in enumerate(tasks):
            if index == 2:
                server.stop()
                server.start()
            phase = ["cold", "warm", "after restart"][min(index, 2)]
            before = prepare(workspace, task)
            recorder.label = {"harness": harness.name, "task": task["name"]}
            argv, env = harness.command(base, workspace, task["task"])
            started = time.monotonic()
            output, code, stopped = run_capped(argv, workspace, env, recorder, args)
            seconds = time.monotonic() - started
            why = agent_eval.check(task, before, agent_eval.snapshot(workspace))
            row = {"harness": harness.name, "task": task["name"], "phase": phase, "passed": why is None,
                   "why": why, "exit": code, "stopped": stopped, "seconds": seconds}
            # A request still open when a stopped harness died is recorded late: it belongs to its own task.
            records = [r for r in recorder.take() if r.get("task") == task["name"]]
            row.update(figures(records), requests=records)
            with open(os.path.join(args.logs, f"{harness.name}-{task['name']}.out"), "w") as f:
                f.write(output)
            print_row(row)
            rows.append(row)
    finally:
        server.stop()
        shutil.rmtree(cache_dir, ignore_errors=True)
    return rows


def run_tessera_agent(args, tasks, root):
    """`tessera agent` in process on the same tasks and cache sequence (its transcript has the figures)."""
    cache_dir = tempfile.mkdtemp(prefix="tessera-harness-agent-")
    workspace = os.path.join(root, "ws", "tessera-agent")
    rows = []
    for index, task in enumerate(tasks):
        before = prepare(workspace, task)
        command = [args.binary, "agent", "-m", args.model, "-w", workspace, "--kv-cache-dir", cache_dir,
                   "--max-steps", str(args.max_turns), task["task"]]
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        seconds = time.monotonic() - started
        why = agent_eval.check(task, before, agent_eval.snapshot(workspace))
        with open(os.path.join(workspace, ".tessera", "transcript.jsonl"), encoding="utf-8") as f:
            turns = [json.loads(line) for line in f if line.strip()]
        records = [{"protocol": "chat", "path": "(in process)", "prompt": t["prompt_tokens"],
                    "cached": t["cached_tokens"], "completion": t["completion_tokens"],
                    "ttft_s": t["ttft_ms"] / 1000} for t in turns if t.get("kind") == "agent"]
        row = {"harness": "tessera agent", "task": task["name"], "phase": ["cold", "warm", "warm (disk)"][min(index, 2)],
               "passed": why is None, "why": why, "exit": done.returncode, "seconds": seconds, **figures(records)}
        print_row(row)
        rows.append(row)
    shutil.rmtree(cache_dir, ignore_errors=True)
    return rows


HEADER = "harness        task           phase          result turns  hit2   reused  TTFT1 s  TTFTn s  cached1/prompt1  errors"


def print_row(row):
    def seconds(value):
        return f"{value:7.1f}" if value is not None else "      -"
    hit = f"{row['hit_from_turn_2']:6.1%}" if row["hit_from_turn_2"] is not None else "     -"
    first = f"{row['first_cached']}/{row['first_prompt']}"
    print(f"{row['harness']:<14} {row['task']:<14} {row['phase']:<14} {'pass' if row['passed'] else 'FAIL':<6} "
          f"{row['turns']:>5} {hit} {row['reused_previous']:>7} {seconds(row['first_ttft_s'])}  "
          f"{seconds(row['later_ttft_s'])}  {first:>15}  {len(row['errors'])}", flush=True)
    if row.get("stopped"):
        print(f"    stopped: {row['stopped']}", flush=True)
    for error in row["errors"][:3]:
        print(f"    protocol error: {error}", flush=True)


def markdown(rows, model):
    """The rows as a Markdown table (for BENCHMARKS.md and the README)."""
    def seconds(value):
        return f"{value:.1f}" if value is not None else "-"
    lines = [f"| harness ({model}) | task | phase | result | turns | hit from turn 2 | reused previous reply | "
             "first-turn TTFT s | later-turn TTFT s (median) | first turn cached/prompt | protocol errors |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        hit = f"{row['hit_from_turn_2']:.1%}" if row["hit_from_turn_2"] is not None else "-"
        result = "pass" if row["passed"] else "fail" + (f" ({row['stopped']})" if row.get("stopped") else "")
        lines.append(f"| {row['harness']} | {row['task']} | {row['phase']} | {result} | {row['turns']} | {hit} | "
                     f"{row['reused_previous']} | {seconds(row['first_ttft_s'])} | {seconds(row['later_ttft_s'])} | "
                     f"{row['first_cached']}/{row['first_prompt']} | {len(row['errors'])} |")
    return "\n".join(lines) + "\n"


def save(args, rows):
    """Write what ran so far (after each harness: a later failure keeps the earlier rows)."""
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "rows": rows}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows, os.path.basename(args.model)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--harnesses", default="pi-chat,pi-responses,pi-anthropic,claude-code,codex,agents-sdk,tessera-agent")
    parser.add_argument("--tasks", default=DEFAULT_TASKS)
    parser.add_argument("--port", type=int, default=8931)
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per task")
    parser.add_argument("--max-turns", type=int, default=12,
                        help="model requests per task; a harness asking for more is stopped (tessera agent: --max-steps)")
    parser.add_argument("--json", help="write every row here")
    parser.add_argument("--markdown", help="write the table here as Markdown")
    args = parser.parse_args()
    root = os.environ.get("TESSERA_HARNESS_DIR", os.path.expanduser("~/.cache/tessera/harness"))
    args.logs = os.path.join(root, "logs")
    os.makedirs(args.logs, exist_ok=True)
    by_name = {t["name"]: t for t in agent_eval.TASKS}
    tasks = [by_name[name] for name in args.tasks.split(",")]
    wanted = args.harnesses.split(",")
    harnesses = [h for h in setups.all_harnesses() if h.name in wanted]
    for harness in harnesses:
        harness.install(root)
    print(HEADER, flush=True)
    rows = []
    for harness in harnesses:
        rows += run_harness(harness, args, tasks, root)
        save(args, rows)
    if "tessera-agent" in wanted:
        rows += run_tessera_agent(args, tasks, root)
    save(args, rows)
    passed = sum(r["passed"] for r in rows)
    errors = sum(len(r["errors"]) for r in rows)
    print(f"summary: {passed}/{len(rows)} tasks passed, {errors} protocol errors ({args.model}); logs in {args.logs}")



if __name__ == "__main__":
    main()
