#!/usr/bin/env bash
# The engine's mask-time histogram over a real run (issue 18 item 4): `tessera serve` on a shipped
# model, forced tool calls (named, `required`, a response format) under budgets from 24 to 160
# tokens at temperatures 0 and 0.8, then the `tessera_mask_seconds` histogram from /metrics and
# its p50/p99 bucket bounds.
#   scripts/mask-histogram.sh [MODEL]      MODEL: smollm2 (default), qwen2.5-coder-1.5b, ...
# REQUESTS (default 12) sets how many chat requests are sent; PORT (default 8093).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
model="${1:-smollm2}"
requests="${REQUESTS:-12}"
port="${PORT:-8093}"
cargo build --release -p tessera >&2
binary="${CARGO_TARGET_DIR:-target}/release/tessera"
"$binary" serve --model "$model" --port "$port" --max-running 4 >/tmp/tessera-mask-histogram.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 1
done
tools='[{"type":"function","function":{"name":"file_write","description":"Write a file.","parameters":{"type":"object","properties":{"path":{"type":"string","minLength":1,"maxLength":200},"content":{"type":"string"},"mode":{"enum":["create","append"]}},"required":["path","content"],"additionalProperties":false}}},
{"type":"function","function":{"name":"calendar_add","description":"Add an event.","parameters":{"type":"object","properties":{"title":{"type":"string","maxLength":80},"due":{"type":"string","format":"date"},"minutes":{"type":"integer","minimum":5,"maximum":480}},"required":["title","due"],"additionalProperties":false}}},
{"type":"function","function":{"name":"web_search","description":"Search the web.","parameters":{"type":"object","properties":{"query":{"type":"string"},"max_results":{"type":"integer","minimum":1,"maximum":20}},"required":["query"]}}}]'
prompts=("Save a shopping list to list.md" "Book a dentist appointment next Tuesday" "Find recent news about Rust 2024"
  "Append a note about the meeting to notes.md" "Schedule lunch with Sam on 2026-12-03" "Search for the best hiking trails")
budgets=(24 40 64 96 128 160)
pids=()
for i in $(seq 0 $((requests - 1))); do
  prompt="${prompts[$((i % ${#prompts[@]}))]}"
  budget="${budgets[$((i % ${#budgets[@]}))]}"
  temperature=$([ $((i % 2)) -eq 0 ] && echo 0 || echo 0.8)
  case $((i % 3)) in
    0) choice='"required"' ;;
    1) choice='{"type":"function","function":{"name":"calendar_add"}}' ;;
    *) choice='{"type":"function","function":{"name":"file_write"}}' ;;
  esac
  body="{\"messages\":[{\"role\":\"user\",\"content\":\"$prompt\"}],\"tools\":$tools,\"tool_choice\":$choice,\"max_tokens\":$budget,\"temperature\":$temperature,\"seed\":$i}"
  curl -s "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' -d "$body" \
    -o "/tmp/tessera-mask-histogram-$i.json" &
  pids+=($!)
done
wait "${pids[@]}"
for i in $(seq 0 $((requests - 1))); do
  python3 - "/tmp/tessera-mask-histogram-$i.json" <<'EOF'
import json, sys
answer = json.load(open(sys.argv[1]))
if "error" in answer:
    print("refused:", answer["error"]["message"])
else:
    choice = answer["choices"][0]
    calls = choice["message"].get("tool_calls") or []
    args = [json.loads(c["function"]["arguments"]) for c in calls]
    print(choice["finish_reason"], [c["function"]["name"] for c in calls], json.dumps(args)[:100])
EOF
done
curl -s "http://127.0.0.1:$port/metrics" | grep '^tessera_mask_seconds' | python3 -c '
import sys
buckets, count = [], 0
for line in sys.stdin:
    name, value = line.rsplit(" ", 1)
    print(line.rstrip())
    if "_bucket" in name:
        bound = name.split("le=\"")[1].split("\"")[0]
        buckets.append((float("inf") if bound == "+Inf" else float(bound), float(value)))
    elif name.endswith("_count"):
        count = float(value)
for q in (0.5, 0.99):
    bound = next(b for b, c in buckets if c >= q * count)
    print(f"p{int(q * 100)} <= {bound * 1e6:.0f} us over {int(count)} masks")
'
