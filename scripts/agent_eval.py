#!/usr/bin/env python3
"""Tessera's own agent task suite: small offline tasks, each in a fresh
workspace, run through `tessera agent` and checked strictly: the right file
with the exact content, and nothing else in the workspace touched (the
harness's own `todo.md` and `.tessera/` aside).

Prints one line per task (pass/fail, agent steps, cache hit rate from turn 2,
seconds) and a summary line; `--json PATH` writes the same as JSON.
Called by scripts/agent-eval.sh, which builds the binary first.

`--oracle` measures the model instead of the harness: no agent, no plan, no
search; each task is one request to `tessera serve` whose history is the task
and a `file_read` of every file of its workspace (the best run up to the
write), with a `file_write` call forced.
The written file is checked exactly as the agent's. What the model fails here
it cannot pass through any harness that keeps its answer as written: the
oracle's pass count bounds the agent's.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

NOTES = "Buy green apples\nCall the plumber\nWater the plants\n"


def exact(expected):
    """The file must hold `expected` (a final newline either way)."""
    return lambda text: text is not None and text.rstrip("\n") == expected.rstrip("\n")


def answer(*accepted):
    """A one-value answer: any of `accepted`, surrounding space and a final newline aside."""
    return lambda text: text is not None and text.strip() in accepted


TASKS = [
    {
        "name": "read-write",
        "files": {"notes.md": NOTES},
        "task": "Read notes.md and write its first line to out.txt.",
        "expect": {"out.txt": exact("Buy green apples")},
    },
    {
        "name": "write-new",
        "files": {},
        "task": "Create a file hello.txt whose whole content is: Hello, world!",
        "expect": {"hello.txt": exact("Hello, world!")},
    },
    {
        "name": "edit-line",
        "files": {"config.ini": "[server]\nhost = localhost\nport = 8080\n"},
        "task": "In config.ini, change the port from 8080 to 9090. Keep the other lines as they are.",
        "expect": {"config.ini": exact("[server]\nhost = localhost\nport = 9090\n")},
    },
    {
        "name": "find-mention",
        "files": {
            "docs/fruit.md": "# Fruit\nThe kiwi is a small fruit with brown skin.\n",
            "docs/tools.md": "# Tools\nA hammer and a saw.\n",
            "docs/birds.md": "# Birds\nThe heron waits by the water.\n",
        },
        "task": "Which file in docs/ mentions kiwi? Write its path to answer.txt.",
        "expect": {"answer.txt": answer("docs/fruit.md", "fruit.md")},
    },
    {
        "name": "count-rows",
        "files": {"data.csv": "name,age\nAda,36\nBob,41\nCy,29\nDee,52\nEve,33\nFay,47\nGus,25\n"},
        "task": "How many data rows does data.csv have, not counting the header line? Write the number to count.txt.",
        "expect": {"count.txt": answer("7")},
    },
    {
        "name": "follow-link",
        "files": {
            "site/index.html": "<html><body><h1>Home</h1><p>Read <a href=\"about.html\">about us</a>.</p></body></html>",
            "site/about.html": "<html><body><h1>About</h1><p>The secret word is heron.</p></body></html>",
        },
        "task": "Open site/index.html in the browser, follow its link to the about page, and write the secret word "
        "that page gives to word.txt.",
        "expect": {"word.txt": answer("heron", "heron.")},
    },
    {
        "name": "shell-count",
        "files": {"logs/a.log": "x\n", "logs/b.log": "y\n", "logs/c.log": "z\n", "logs/readme.txt": "logs\n"},
        "task": "Use the shell to count the .log files in the logs folder, and write the number to n.txt.",
        "shell": True,
        "expect": {"n.txt": answer("3")},
    },
    {
        "name": "distractor",
        "files": {"notes.md": NOTES, "notes_old.md": "Old list\nSell the bike\n"},
        "task": "Read notes.md (not notes_old.md) and write its last line to last.txt.",
        "expect": {"last.txt": exact("Water the plants")},
    },
    {
        "name": "copy-file",
        "files": {"a.txt": "alpha\nbeta\ngamma\n"},
        "task": "Copy the content of a.txt into a new file b.txt.",
        "expect": {"b.txt": exact("alpha\nbeta\ngamma\n")},
    },
    {
        "name": "append-line",
        "files": {"shopping.txt": "eggs\nbread\n"},
        "task": "Add the line milk at the end of shopping.txt, keeping the lines already there.",
        "expect": {"shopping.txt": exact("eggs\nbread\nmilk\n")},
    },
    {
        "name": "title",
        "files": {"README.md": "# Heron\nA tool for watching birds.\n"},
        "task": "Write the title of README.md (its first line, without the leading '# ') to title.txt.",
        "expect": {"title.txt": answer("Heron")},
    },
    {
        "name": "sum",
        "files": {"numbers.txt": "3\n4\n5\n"},
        "task": "Add up the numbers in numbers.txt and write the sum to sum.txt.",
        "expect": {"sum.txt": answer("12")},
    },
    {
        "name": "find-fixme",
        "files": {
            "src/main.rs": "fn main() {\n    run();\n}\n",
            "src/parse.rs": "// FIXME: the parser drops the last field\npub fn parse() {}\n",
            "src/run.rs": "pub fn run() {}\n",
        },
        "task": "Find the source file under src/ that contains a FIXME comment and write its path to fixme.txt.",
        "expect": {"fixme.txt": answer("src/parse.rs", "parse.rs")},
    },
]

# Written by the harness, not the model: never counted as touched.
HARNESS_PATHS = ("todo.md", ".tessera")


def snapshot(root):
    """Every file under `root` (harness files aside) and its content."""
    files = {}
    for folder, dirs, names in os.walk(root):
        rel_folder = os.path.relpath(folder, root)
        dirs[:] = [d for d in dirs if os.path.normpath(os.path.join(rel_folder, d)) not in HARNESS_PATHS]
        for name in names:
            rel = os.path.normpath(os.path.join(rel_folder, name))
            if rel in HARNESS_PATHS:
                continue
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                files[rel] = f.read()
    return files


def check(task, before, after):
    """`None` when the result is exactly what the task asks, else what is wrong."""
    for path, accepts in task["expect"].items():
        if not accepts(after.get(path)):
            return f"{path}: {after.get(path)!r}"
    for path in sorted(set(before) | set(after)):
        if path in task["expect"]:
            continue
        if before.get(path) != after.get(path):
            return f"{path} was touched"
    return None


def transcript_figures(workspace):
    """(agent steps, token-weighted hit rate of agent turns from the second) from the transcript."""
    path = os.path.join(workspace, ".tessera", "transcript.jsonl")
    if not os.path.exists(path):
        return 0, None
    with open(path, encoding="utf-8") as f:
        turns = [json.loads(line) for line in f if line.strip()]
    agent = [t for t in turns if t.get("kind") == "agent"]
    later = agent[1:]
    prompt = sum(t["prompt_tokens"] for t in later)
    cached = sum(t["cached_tokens"] for t in later)
    return len(agent), (cached / prompt if prompt else None)


def run_task(binary, model, task, max_steps, keep):
    workspace = tempfile.mkdtemp(prefix=f"tessera-eval-{task['name']}-")
    for path, text in task["files"].items():
        full = os.path.join(workspace, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)
    before = snapshot(workspace)
    command = [binary, "agent", "-m", model, "-w", workspace, "--max-steps", str(max_steps), task["task"]]
    if task.get("shell"):
        command.insert(2, "--allow-shell")
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1):
        # Not the model's failure: the harness or the binary broke.
        sys.stderr.write(done.stdout[-2000:] + done.stderr[-4000:])
        raise SystemExit(f"agent-eval: `{' '.join(command[:-1])}` exited {done.returncode} on {task['name']}")
    failure = check(task, before, snapshot(workspace))
    steps, hit = transcript_figures(workspace)
    if not keep:
        shutil.rmtree(workspace, ignore_errors=True)
    return {
        "task": task["name"],
        "passed": failure is None,
        "why": failure,
        "finished": done.returncode == 0,
        "steps": steps,
        "hit_rate_from_turn_2": hit,
        "seconds": round(seconds, 1),
        "workspace": workspace if keep else None,
    }


# The agent's system prompt and the two tools the oracle uses, as crates/tessera-agent defines them.
ORACLE_SYSTEM = ("You are Tessera's offline agent. You do the user's task inside a workspace folder by calling "
                 "tools, one call per turn. Paths are relative to the workspace root. After each tool result you "
                 "see todo.md, the task's checklist. When the task is done, call finish with a one-line summary.")
PATH_PARAM = {"type": "string", "description": "Path relative to the workspace root."}


def tool(name, description, properties, required):
    """An OpenAI function tool whose arguments are exactly `properties`."""
    parameters = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


FILE_READ = tool("file_read", "Read a text file of the workspace, one page of lines at a time.", {
    "path": PATH_PARAM,
    "start_line": {"type": "integer", "description": "First line to show, 1 or more."},
}, ["path"])
FILE_WRITE = tool("file_write", "Create or replace a file; missing folders are created.", {
    "path": PATH_PARAM,
    "content": {"type": "string", "description": "The text to write."},
    "append": {"type": "boolean", "description": "Add to the end instead of replacing."},
}, ["path", "content"])


def oracle_messages(task):
    """The task, then a `file_read` of every workspace file with its result as the agent's tool renders it:
    the best run up to the write, with no step wasted and nothing left unread."""
    messages = [{"role": "system", "content": ORACLE_SYSTEM}, {"role": "user", "content": task["task"]}]
    for i, (path, text) in enumerate(sorted(task["files"].items())):
        lines = text.rstrip("\n").split("\n")
        call_id = f"call_{i}"
        arguments = json.dumps({"path": path})
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "file_read", "arguments": arguments}}]})
        result = f"{path}: lines 1-{len(lines)} of {len(lines)} (whole file)\n" + "\n".join(lines)
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return messages


def post(port, body):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                     data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.load(response)


def run_oracle_task(port, task):
    """One forced file_write after every file was read, applied to a copy of the workspace and checked."""
    body = {"messages": oracle_messages(task),
            "tools": [FILE_READ, FILE_WRITE], "tool_choice": {"type": "function", "function": {"name": "file_write"}},
            "temperature": 0, "max_tokens": 512}
    started = time.monotonic()
    answer = post(port, body)
    seconds = time.monotonic() - started
    after = dict(task["files"])
    call = answer["choices"][0]["message"]["tool_calls"][0]["function"]
    arguments = json.loads(call["arguments"])
    path = os.path.normpath(arguments["path"])
    after[path] = (after.get(path, "") if arguments.get("append") else "") + arguments["content"]
    failure = check(task, task["files"], after)
    return {"task": task["name"], "passed": failure is None, "why": failure, "finished": True, "steps": 1,
            "hit_rate_from_turn_2": None, "seconds": round(seconds, 1), "workspace": None,
            "arguments": call["arguments"]}


def start_server(binary, model, port):
    server = subprocess.Popen([binary, "serve", "-m", model, "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"agent-eval: tessera serve exited {server.returncode}: {server.stderr.read()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                return server
        except OSError:
            time.sleep(1)
    server.kill()
    raise SystemExit("agent-eval: tessera serve did not become healthy in 600 s")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True, help="the tessera binary")
    parser.add_argument("--model", default="smollm2", help="a shipped model name or a .gguf path")
    parser.add_argument("--tasks", help="comma-separated task names (default: all)")
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--json", help="write the report here too")
    parser.add_argument("--keep", action="store_true", help="keep each workspace (paths in the report)")
    parser.add_argument("--oracle", action="store_true",
                        help="bound the agent: one forced file_write per task after every file was read")
    parser.add_argument("--port", type=int, default=18093, help="the oracle's server port")
    args = parser.parse_args()
    tasks = TASKS
    if args.tasks:
        names = args.tasks.split(",")
        unknown = [n for n in names if n not in {t["name"] for t in TASKS}]
        if unknown:
            raise SystemExit(f"agent-eval: unknown task(s) {', '.join(unknown)}; known: "
                             + ", ".join(t["name"] for t in TASKS))
        tasks = [t for t in TASKS if t["name"] in names]
    results = []
    print(f"{'task':<14} {'result':<6} {'steps':>5} {'hit':>6} {'seconds':>8}  why", flush=True)
    server = start_server(args.binary, args.model, args.port) if args.oracle else None
    try:
        for task in tasks:
            if server:
                r = run_oracle_task(args.port, task)
            else:
                r = run_task(args.binary, args.model, task, args.max_steps, args.keep)
            results.append(r)
            report_line(r)
    finally:
        if server:
            server.terminate()
            server.wait()
    summarize(args, results)


def report_line(r):
    hit = "-" if r["hit_rate_from_turn_2"] is None else f"{100 * r['hit_rate_from_turn_2']:.1f}%"
    print(f"{r['task']:<14} {'pass' if r['passed'] else 'FAIL':<6} {r['steps']:>5} {hit:>6} "
          f"{r['seconds']:>8.1f}  {r['why'] or ''}", flush=True)


def summarize(args, results):
    passed = sum(r["passed"] for r in results)
    steps = statistics.median(r["steps"] for r in results) if results else 0
    rates = [r["hit_rate_from_turn_2"] for r in results if r["hit_rate_from_turn_2"] is not None]
    mean_hit = statistics.mean(rates) if rates else None
    summary = {
        "model": args.model,
        "oracle": args.oracle,
        "passed": passed,
        "tasks": len(results),
        "median_steps": steps,
        "mean_hit_rate_from_turn_2": mean_hit,
        "seconds": round(sum(r["seconds"] for r in results), 1),
    }
    hit_text = "-" if mean_hit is None else f"{100 * mean_hit:.1f}%"
    print(f"summary: {passed}/{len(results)} passed, median steps {steps}, mean hit rate from turn 2 "
          f"{hit_text}, {summary['seconds']} s ({args.model}{', oracle' if args.oracle else ''})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"summary": summary, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
