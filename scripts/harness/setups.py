"""The agent harnesses the check runs, installed outside the repo, each configured to talk only to a
local Tessera (its calls home switched off by its own settings), and the command that runs one task.

Versions are pinned: a harness's prompt and request shape change from release to release.
"""

import json
import os
import subprocess
import sys

PI = "@mariozechner/pi-coding-agent@0.73.1"
CLAUDE = "@anthropic-ai/claude-code@2.1.197"
CODEX = "@openai/codex@0.171.0"
AGENTS = "openai-agents==0.24.0"
HERE = os.path.dirname(os.path.abspath(__file__))


def run(command, **kwargs):
    print("harness-check:", " ".join(command), file=sys.stderr)
    subprocess.run(command, check=True, **kwargs)


def npm_install(root, name, package):
    prefix = os.path.join(root, name)
    marker = os.path.join(prefix, ".installed-" + package.replace("/", "_"))
    if not os.path.exists(marker):
        run(["npm", "install", "--silent", "--no-fund", "--no-audit", "--prefix", prefix, package],
            stdout=sys.stderr)
        open(marker, "w").close()
    return prefix


class Pi:
    """Pi (`@mariozechner/pi-coding-agent`) in print mode, over one of its three provider APIs."""

    APIS = {"chat": "openai-completions", "responses": "openai-responses", "anthropic": "anthropic-messages"}

    def __init__(self, protocol):
        self.protocol = protocol
        self.name = f"pi-{protocol}"

    def install(self, root):
        self.prefix = npm_install(root, "pi", PI)
        self.home = os.path.join(root, "home", self.name)

    def command(self, base, workspace, task):
        agent_dir = os.path.join(self.home, ".pi", "agent")
        os.makedirs(agent_dir, exist_ok=True)
        url = base if self.protocol == "anthropic" else base + "/v1"
        provider = {"baseUrl": url, "api": self.APIS[self.protocol], "apiKey": "tessera-local",
                    "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                    "models": [{"id": "tessera", "contextWindow": 32768, "maxTokens": 2048}]}
        with open(os.path.join(agent_dir, "models.json"), "w") as f:
            json.dump({"providers": {"tessera": provider}}, f, indent=1)
        with open(os.path.join(agent_dir, "settings.json"), "w") as f:
            json.dump({"enableInstallTelemetry": False, "quietStartup": True}, f)
        binary = os.path.join(self.prefix, "node_modules", ".bin", "pi")
        env = {"HOME": self.home, "PI_OFFLINE": "1"}
        return [binary, "-p", "--offline", "--no-session", "--provider", "tessera", "--model", "tessera", task], env


class ClaudeCode:
    """Claude Code in print mode on `ANTHROPIC_BASE_URL`, non-essential traffic off."""

    name = "claude-code"

    def install(self, root):
        prefix = npm_install(root, "claude", CLAUDE)
        package = os.path.join(prefix, "node_modules", "@anthropic-ai", "claude-code")
        binary = os.path.join(prefix, "node_modules", "@anthropic-ai", "claude-code-linux-x64", "claude")
        if not os.path.exists(binary):
            # npm 11 skips install scripts; the package's own installer puts the native binary in place.
            run(["node", os.path.join(package, "install.cjs")], cwd=package, stdout=sys.stderr)
        self.binary = binary if os.path.exists(binary) else os.path.join(prefix, "node_modules", ".bin", "claude")
        self.home = os.path.join(root, "home", self.name)

    def command(self, base, workspace, task):
        os.makedirs(self.home, exist_ok=True)
        env = {
            "HOME": self.home,
            "ANTHROPIC_BASE_URL": base,
            "ANTHROPIC_AUTH_TOKEN": "tessera-local",
            "ANTHROPIC_MODEL": "tessera",
            "ANTHROPIC_SMALL_FAST_MODEL": "tessera",
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": "tessera",
            "ANTHROPIC_DEFAULT_SONNET_MODEL": "tessera",
            "ANTHROPIC_DEFAULT_OPUS_MODEL": "tessera",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "2048",
            # A cold first turn prefills its ~18k-token prompt for minutes on a CPU: the request's
            # timeout, and the stream's idle timeout (300 s at least; Claude Code's SDK does not count
            # the `ping` events the server sends meanwhile, so a longer prefill is abandoned without it).
            "API_TIMEOUT_MS": "7200000",
            "CLAUDE_STREAM_IDLE_TIMEOUT_MS": "7200000",
            # Its first system block is a billing header whose version field changes with every task's
            # first message, 22 tokens into the prompt: on, no task would share the ~18k-token prefix.
            "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",
            # Root may skip permission prompts only inside a sandbox.
            "IS_SANDBOX": "1",
        }
        # Its Agent and Skill tools each add a fixed `system` turn (the agent types, 6 kB; the skills,
        # 4.5 kB) after the task's text, where no prefix cache can reuse it: with them, every new task
        # recomputes ~1.4k tokens at 16k context (86 s here). Without them the task's text is last, and
        # a new task's first turn computes only that text. A 1.5B model cannot drive sub-agents anyway.
        return [self.binary, "-p", "--model", "tessera", "--permission-mode", "bypassPermissions",
                "--disallowedTools=Agent,Skill", task], env


class Codex:
    """Codex CLI `exec` with a custom provider on the Responses wire."""

    name = "codex"

    def install(self, root):
        prefix = npm_install(root, "codex", CODEX)
        self.binary = os.path.join(prefix, "node_modules", ".bin", "codex")
        self.home = os.path.join(root, "home", self.name)

    def command(self, base, workspace, task):
        os.makedirs(self.home, exist_ok=True)
        with open(os.path.join(self.home, "config.toml"), "w") as f:
            f.write(CODEX_CONFIG.replace("BASE_URL", base + "/v1"))
        env = {"CODEX_HOME": self.home, "TESSERA_API_KEY": "tessera-local"}
        return [self.binary, "exec", "--strict-config", "--skip-git-repo-check", "-C", workspace, task], env


CODEX_CONFIG = """model = "tessera"
model_provider = "tessera"
approval_policy = "never"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false
web_search = "disabled"
model_reasoning_summary = "none"
model_context_window = 32768

[model_providers.tessera]
name = "Tessera"
base_url = "BASE_URL"
env_key = "TESSERA_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 7200000

[features]
goals = false
apps = false
plugins = false
remote_plugin = false
tool_suggest = false
image_generation = false
view_image = false

[skills.bundled]
enabled = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[agents]
enabled = false
"""


class AgentsSdk:
    """The OpenAI Agents SDK (PyPI `openai-agents`) on the Responses wire, tracing off."""

    name = "agents-sdk"

    def install(self, root):
        venv = os.path.join(root, "agents")
        python = os.path.join(venv, "bin", "python")
        if subprocess.run([python, "-c", "import agents"], capture_output=True).returncode != 0:
            run([sys.executable, "-m", "venv", venv])
            run([os.path.join(venv, "bin", "pip"), "install", "--quiet", "--disable-pip-version-check", AGENTS],
                stdout=sys.stderr)
        self.python = python

    def command(self, base, workspace, task):
        script = os.path.join(HERE, "agents_sdk_task.py")
        return [self.python, script, base + "/v1", workspace, task], {}


def all_harnesses():
    return [Pi("chat"), Pi("responses"), Pi("anthropic"), ClaudeCode(), Codex(), AgentsSdk()]
