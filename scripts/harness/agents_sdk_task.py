"""One task with the OpenAI Agents SDK (PyPI `openai-agents`) on a Responses-API server, offline.

    agents_sdk_task.py BASE_URL WORKSPACE "task"

An agent with four function tools (list, read, write, shell), all inside WORKSPACE, run with
`Runner.run_sync` on `OpenAIResponsesModel` (the Responses wire); tracing is off and the client is
the SDK's default, pointed at BASE_URL. Prints the agent's final output.
"""

import os
import subprocess
import sys

from agents import (Agent, ModelSettings, OpenAIResponsesModel, Runner, function_tool, set_default_openai_api,
                    set_default_openai_client, set_tracing_disabled)
from openai import AsyncOpenAI

base_url, workspace, task = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3]
os.chdir(workspace)


def inside(path):
    full = os.path.realpath(os.path.join(workspace, path))
    if os.path.commonpath([full, workspace]) != workspace:
        raise ValueError(f"{path} is outside the workspace")
    return full


@function_tool
def list_files(path: str = ".") -> str:
    """List the files under a folder of the workspace (recursively)."""
    found = []
    for folder, _, names in os.walk(inside(path)):
        found += [os.path.relpath(os.path.join(folder, name), workspace) for name in names]
    return "\n".join(sorted(found)) or "(no files)"


@function_tool
def read_file(path: str) -> str:
    """Read a text file of the workspace."""
    with open(inside(path), encoding="utf-8") as f:
        return f.read()


@function_tool
def write_file(path: str, content: str) -> str:
    """Write (create or replace) a text file of the workspace with exactly `content`."""
    full = inside(path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(content)
    return f"wrote {len(content)} characters to {path}"


@function_tool
def run_shell(command: str) -> str:
    """Run a shell command in the workspace and return its output."""
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60, cwd=workspace)
    return (done.stdout + done.stderr)[-4000:] + f"\n[exit {done.returncode}]"


client = AsyncOpenAI(base_url=base_url, api_key="tessera-local", timeout=7200, max_retries=0)
set_default_openai_client(client, use_for_tracing=False)
set_default_openai_api("responses")
set_tracing_disabled(True)
agent = Agent(
    name="tessera-agent",
    instructions="You do the user's task in the current folder with your tools, one call at a time. "
    "When the task is done, answer in one short sentence.",
    model=OpenAIResponsesModel(model="tessera", openai_client=client),
    model_settings=ModelSettings(temperature=0, parallel_tool_calls=False),
    tools=[list_files, read_file, write_file, run_shell],
)
result = Runner.run_sync(agent, task, max_turns=12)
print(result.final_output)
