"""A KV-event subscriber against `tessera serve --kv-events ENDPOINT`, with PyPI `pyzmq` and `msgpack`.

Subscribes, runs a chat workload whose prompts overflow the KV pool (evictions),
and rebuilds the set of cached full blocks from the events alone, checking the
wire format on the way (three frames; consecutive sequence numbers; a
`[ts, events]` batch; `BlockStored`, `BlockRemoved`, `AllBlocksCleared` arrays
as vLLM's msgspec structs encode; parents stored before children; removals of
known blocks). At the end the rebuilt set must equal the server's index
(`GET /kv/blocks`): the same hashes, parents and tokens.

    python scripts/kv_events_check.py http://127.0.0.1:PORT tcp://127.0.0.1:ZMQ_PORT
"""

import json
import sys
import time
import urllib.request

import msgpack
import zmq

TOPICS = ["build", "tests", "deploy", "docs", "review", "release"]


def post(base, body):
    request = urllib.request.Request(f"{base}/v1/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())


def workload(base):
    """Six agents, each with its own long system prompt and a few turns: more blocks than the pool holds."""
    for turn in range(3):
        for topic in TOPICS:
            system = f"You are the {topic} agent. " + " ".join(
                f"Rule {i} of {topic}: report the {topic} status precisely and briefly." for i in range(24))
            post(base, {"model": "tessera", "max_tokens": 4, "temperature": 0, "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": f"Turn {turn}: what is the {topic} status?"}]})


class Rebuilt:
    """The set of full blocks, from the events alone."""

    def __init__(self):
        self.blocks = {}  # hash -> (parent, tokens)
        self.stored = self.removed = self.cleared = 0
        self.problems = []

    def apply(self, event):
        tag = event[0]
        if tag == "BlockStored":
            self.store(event)
        elif tag == "BlockRemoved":
            if len(event) != 3 or not isinstance(event[1], list):
                self.problems.append(f"malformed BlockRemoved {event}")
                return
            for block in event[1]:
                if self.blocks.pop(block, None) is None:
                    self.problems.append(f"removed unknown block {block}")
                self.removed += 1
        elif tag == "AllBlocksCleared":
            self.blocks.clear()
            self.cleared += 1
        else:
            self.problems.append(f"unknown event {tag!r}")

    def store(self, event):
        if len(event) != 7:
            self.problems.append(f"BlockStored has {len(event)} elements, not 7: {event}")
            return
        _, hashes, parent, tokens, block_size, lora_id, medium = event
        if lora_id is not None or medium is not None or len(tokens) != len(hashes) * block_size:
            self.problems.append(f"malformed BlockStored {event}")
            return
        for i, block in enumerate(hashes):
            if parent is not None and parent not in self.blocks:
                self.problems.append(f"block {block} stored before its parent {parent}")
            self.blocks[block] = (parent, tokens[i * block_size:(i + 1) * block_size])
            parent = block
            self.stored += 1


def receive(socket, rebuilt, state, quiet_s):
    """Apply every message until none arrives for `quiet_s`."""
    while socket.poll(int(quiet_s * 1000)):
        frames = socket.recv_multipart()
        if len(frames) != 3:
            rebuilt.problems.append(f"{len(frames)} frames, not 3")
            continue
        topic, sequence, payload = frames
        if not topic.startswith(b"kv@") or topic.count(b"@") != 2:
            rebuilt.problems.append(f"topic {topic!r} is not kv@<host>:<port>@<model>")
        sequence = int.from_bytes(sequence, "big")
        if state["next"] is not None and sequence != state["next"]:
            rebuilt.problems.append(f"sequence {sequence} after {state['next'] - 1}")
        state["next"] = sequence + 1
        batch = msgpack.unpackb(payload, raw=False)
        if not (isinstance(batch, list) and len(batch) == 2 and isinstance(batch[0], float)):
            rebuilt.problems.append(f"a batch is [ts, events], got {batch!r:.200}")
            continue
        state["batches"] += 1
        for event in batch[1]:
            rebuilt.apply(event)


def main():
    base, endpoint = sys.argv[1].rstrip("/"), sys.argv[2]
    context = zmq.Context()
    socket = context.socket(zmq.SUB)
    socket.connect(endpoint)
    socket.setsockopt(zmq.SUBSCRIBE, b"kv@")
    time.sleep(1.0)  # a PUB socket drops what it sends before the subscription arrives
    rebuilt, state = Rebuilt(), {"next": None, "batches": 0}
    workload(base)
    with urllib.request.urlopen(f"{base}/kv/blocks", timeout=60) as response:
        index = json.loads(response.read())
    receive(socket, rebuilt, state, quiet_s=2.0)
    expected = {block["hash"]: (block["parent"], block["tokens"]) for block in index["blocks"]}
    if rebuilt.blocks != expected:
        only_events = sorted(set(rebuilt.blocks) - set(expected))[:5]
        only_index = sorted(set(expected) - set(rebuilt.blocks))[:5]
        differ = [h for h in set(expected) & set(rebuilt.blocks) if expected[h] != rebuilt.blocks[h]][:5]
        rebuilt.problems.append(f"the rebuilt set differs from the index: only in the events {only_events},"
                                f" only in the index {only_index}, different {differ}")
    if rebuilt.removed == 0:
        rebuilt.problems.append("no block was removed: the workload did not evict")
    print(f"{state['batches']} batches: {rebuilt.stored} blocks stored, {rebuilt.removed} removed,"
          f" {rebuilt.cleared} clears; {len(rebuilt.blocks)} cached at the end, index has {len(expected)}:"
          f" {len(rebuilt.problems)} problems")
    for problem in rebuilt.problems[:20]:
        print("PROBLEM", problem)
    sys.exit(1 if rebuilt.problems else 0)


if __name__ == "__main__":
    main()
