"""Minimal OpenAI Agents SDK run against a local Responses server.
Usage: agents_run.py BASE_URL [workdir]"""
import os, sys, subprocess
from openai import AsyncOpenAI
from agents import (Agent, Runner, function_tool, set_default_openai_client, set_default_openai_api,
                    set_tracing_disabled, OpenAIResponsesModel)

base_url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:18080/v1"
workdir = sys.argv[2] if len(sys.argv) > 2 else os.getcwd()
os.chdir(workdir)

client = AsyncOpenAI(base_url=base_url, api_key="tessera-local")
set_default_openai_client(client, use_for_tracing=False)
set_default_openai_api("responses")
set_tracing_disabled(True)


@function_tool
def bash(command: str) -> str:
    """Run a shell command in the working directory and return its combined output."""
    p = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60)
    return (p.stdout + p.stderr)[-4000:] + f"\n[exit {p.returncode}]"


agent = Agent(
    name="tessera-agent",
    instructions="You are a coding agent. Use the bash tool to act in the working directory.",
    model=OpenAIResponsesModel(model="tessera", openai_client=client),
    tools=[bash],
)
if os.environ.get("AGENTS_STREAM") == "1":
    import asyncio

    async def main():
        r = Runner.run_streamed(agent, "Create a file hello.txt containing hi")
        async for _ in r.stream_events():
            pass
        print(r.final_output)

    asyncio.run(main())
else:
    result = Runner.run_sync(agent, "Create a file hello.txt containing hi")
    print(result.final_output)
