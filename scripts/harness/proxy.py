"""A recording proxy between an agent harness and `tessera serve` (standard library only).

Every request is forwarded unchanged and its answer streamed back as it arrives; on the way the proxy
reads what the client sees, in the request's own protocol (Chat Completions, Responses, Messages):
prompt and cached tokens from the usage its protocol reports, generated tokens, the time to the first
content or call event (TTFT), the whole time, and any error the server answered (a protocol error).
Each record carries the label the harness check set (harness, task) when the request came in.

A task's model requests are capped (`Recorder.max_turns`, as `tessera agent --max-steps` caps its own
steps): the request past the cap is held unanswered and unrecorded and `capped` is set, for the
harness check to stop the harness (a small model can loop on one tool for as long as it is let).
"""

import hashlib
import http.client
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Hop-by-hop headers, and compression the proxy does not undo.
DROPPED = {"host", "connection", "keep-alive", "transfer-encoding", "accept-encoding", "content-length"}


def usage_of(protocol, event):
    """(prompt, cached, completion) from one JSON event or body, or None."""
    if protocol == "messages":
        usage = event.get("usage") or (event.get("message") or {}).get("usage")
        if event.get("type") not in (None, "message", "message_delta") or not usage:
            return None
        cached = usage.get("cache_read_input_tokens") or 0
        return usage.get("input_tokens", 0) + cached, cached, usage.get("output_tokens", 0)
    if protocol == "responses":
        usage = (event.get("response") or event).get("usage")
        if not usage:
            return None
        cached = (usage.get("input_tokens_details") or {}).get("cached_tokens", 0)
        return usage.get("input_tokens", 0), cached, usage.get("output_tokens", 0)
    usage = event.get("usage")
    if not usage:
        return None
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return usage.get("prompt_tokens", 0), cached, usage.get("completion_tokens", 0)


def is_content(protocol, event):
    """Whether an event carries the first text or call of the answer."""
    if protocol == "messages":
        return event.get("type") in ("content_block_start", "content_block_delta")
    if protocol == "responses":
        return event.get("type") in ("response.output_text.delta", "response.output_item.added")
    choices = event.get("choices") or [{}]
    delta = choices[0].get("delta") or {}
    return bool(delta.get("content") or delta.get("tool_calls"))


def error_of(event):
    """An error a stream event or a body carries, as text."""
    if event.get("type") == "error" or "error" in event and event.get("error"):
        return json.dumps(event.get("error", event))[:500]
    return None


class Recorder:
    """What went through, and the label new requests get."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.label = {}
        self.records = []
        self.lock = threading.Lock()
        self.max_turns = None
        self.turns = 0
        self.capped = threading.Event()
        # Set by the harness check before it stops a harness: a hang-up then is its doing.
        self.stopping = threading.Event()

    def admit(self):
        """Whether one more model request of this task may go through (else the cap is reached)."""
        with self.lock:
            if self.max_turns is not None and self.turns >= self.max_turns:
                self.capped.set()
                return False
            self.turns += 1
            return True

    def add(self, record):
        with self.lock:
            self.records.append(record)

    def take(self):
        with self.lock:
            records, self.records = self.records, []
            self.turns = 0
            self.capped.clear()
            self.stopping.clear()
        return records


MODEL_PROTOCOLS = ("chat", "responses", "messages")


def conversation_of(body):
    """A conversation's key: its instructions and first message (a harness's background requests,
    such as Claude Code's workflows, are other conversations interleaved with the task's own)."""
    try:
        request = json.loads(body)
    except ValueError:
        return None
    if not isinstance(request, dict):
        return None
    if request.get("previous_response_id"):
        return "chained"  # sends only the new items: its head is in the server's store
    items = request.get("messages") or request.get("input") or []
    first = items[:1] if isinstance(items, list) else items
    head = [request.get("system"), request.get("instructions"), first]
    return hashlib.sha1(json.dumps(head, sort_keys=True).encode()).hexdigest()[:12]


def protocol_of(path):
    if path.startswith("/v1/messages/count_tokens"):
        return "count_tokens"
    if path.startswith("/v1/messages"):
        return "messages"
    if path.startswith("/v1/responses"):
        return "responses"
    if path.startswith("/v1/chat/completions"):
        return "chat"
    return "other"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    recorder = None  # set on the class by `start`

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.forward()

    def do_POST(self):
        self.forward()

    def do_HEAD(self):
        self.forward()

    def forward(self):
        recorder = self.recorder
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in DROPPED}
        protocol = protocol_of(self.path)
        record = {**recorder.label, "path": self.path, "protocol": protocol, "sent": time.time(),
                  "conversation": conversation_of(body) if body else None}
        capture = os.environ.get("TESSERA_HARNESS_CAPTURE")
        if capture and body:
            # Debugging a harness: every request body, numbered.
            os.makedirs(capture, exist_ok=True)
            name = f"{len(os.listdir(capture)):04d}-{protocol}.json"
            with open(os.path.join(capture, name), "wb") as f:
                f.write(body)
        if protocol in MODEL_PROTOCOLS and not recorder.admit():
            # Past the task's cap: held until the harness check stops the harness.
            time.sleep(60)
            self.close_connection = True
            return
        started = time.monotonic()
        upstream = http.client.HTTPConnection(*recorder.upstream, timeout=7200)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
        except OSError as error:
            record.update(status=502, error=f"the server did not answer: {error}")
            recorder.add(record)
            self.send_error(502)
            return
        record["status"] = answer.status
        try:
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in DROPPED:
                    self.send_header(name, value)
            self.send_header("Connection", "close")
            self.end_headers()
        except OSError:
            self.hung_up(record)
        else:
            self.relay(answer, protocol, record, started)
        upstream.close()
        self.close_connection = True
        if protocol in ("chat", "responses", "messages", "count_tokens"):
            recorder.add(record)

    def hung_up(self, record):
        """The client went away: a protocol error, unless the harness check stopped it."""
        if self.recorder.stopping.is_set():
            record["stopped_by_check"] = True
        else:
            record["error"] = "the client hung up"

    def relay(self, answer, protocol, record, started):
        """Stream the answer through, reading its events (or its body) on the way."""
        streamed = "text/event-stream" in (answer.getheader("content-type") or "")
        pending, whole = b"", b""
        while True:
            chunk = answer.read1(65536) if hasattr(answer, "read1") else answer.read(65536)
            if not chunk:
                break
            try:
                self.wfile.write(chunk)
                self.wfile.flush()
            except OSError:
                self.hung_up(record)
                return
            if not streamed:
                whole += chunk
                continue
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self.read_event(line, protocol, record, started)
        record["total_s"] = time.monotonic() - started
        record.setdefault("ttft_s", record["total_s"])
        if not streamed and whole:
            try:
                event = json.loads(whole)
            except ValueError:
                return
            self.note(event, protocol, record)
        if record["status"] >= 400 and "error" not in record:
            record["error"] = whole.decode("utf-8", "replace")[:500]

    def read_event(self, line, protocol, record, started):
        text = line.decode("utf-8", "replace").strip()
        if not text.startswith("data:") or text[5:].strip() == "[DONE]":
            return
        try:
            event = json.loads(text[5:].strip())
        except ValueError:
            return
        if "ttft_s" not in record and is_content(protocol, event):
            record["ttft_s"] = time.monotonic() - started
        self.note(event, protocol, record)

    @staticmethod
    def note(event, protocol, record):
        if not isinstance(event, dict):
            return
        error = error_of(event)
        if error:
            record["error"] = error
        usage = usage_of(protocol, event)
        if usage:
            record["prompt"], record["cached"], record["completion"] = usage


def start(upstream_port, port=0):
    """Serve the proxy on 127.0.0.1:`port` in a thread; returns (recorder, port)."""
    recorder = Recorder(("127.0.0.1", upstream_port))
    handler = type("BoundHandler", (Handler,), {"recorder": recorder})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return recorder, server.server_address[1]
