#!/usr/bin/env python3
"""Recording mock LLM server (stdlib only).

Logs every request (method, path, headers, body) as one JSON object per line to
--log, and answers plausibly for OpenAI Chat Completions, OpenAI Responses and
Anthropic Messages (streaming and non-streaming), so an agent harness reaches
its first model call and finishes with the text "done".

Usage: mock.py --port 18080 --log /tmp/x.jsonl
"""
import argparse
import base64
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
ARGS = None
MODEL = "tessera"
TEXT = "done"


def log_record(rec):
    with LOCK:
        with open(ARGS.log, "a") as f:
            f.write(json.dumps(rec) + "\n")


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        sys.stderr.write("mock: " + (fmt % a) + "\n")

    # ---------- helpers
    def read_body(self):
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            data = b""
            while True:
                line = self.rfile.readline().strip()
                n = int(line.split(b";")[0], 16)
                if n == 0:
                    # trailers
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(n)
                self.rfile.readline()
            return data
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def record(self, raw):
        rec = {
            "t": time.time(),
            "method": self.command,
            "path": self.path,
            "headers": {k: v for k, v in self.headers.items()},
            "body_len": len(raw),
        }
        body = None
        if raw:
            enc = (self.headers.get("Content-Encoding") or "").lower()
            data = raw
            if enc == "zstd":
                try:
                    import zstandard  # optional

                    data = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
                except Exception as e:  # noqa
                    rec["decode_error"] = "zstd: %r" % (e,)
            elif enc in ("gzip", "deflate"):
                import zlib

                data = zlib.decompress(raw, 47 if enc == "gzip" else 15)
            try:
                body = json.loads(data)
                rec["body"] = body
            except Exception:
                rec["body_b64"] = base64.b64encode(raw).decode()
        log_record(rec)
        return body

    def send_json(self, code, obj, extra=None):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(b)

    def start_sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def sse(self, data, event=None):
        s = ""
        if event:
            s += "event: %s\n" % event
        s += "data: %s\n\n" % (data if isinstance(data, str) else json.dumps(data))
        self.wfile.write(s.encode())
        self.wfile.flush()

    # ---------- verbs
    def do_HEAD(self):
        self.record(b"")
        self.send_response(404 if ARGS.head404 else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.record(b"")
        p = self.path.split("?")[0].rstrip("/")
        if p.endswith("/models"):
            return self.send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": MODEL,
                            "object": "model",
                            "created": 0,
                            "owned_by": "tessera",
                            "type": "model",
                            "display_name": MODEL,
                            "created_at": "2025-01-01T00:00:00Z",
                        }
                    ],
                    "has_more": False,
                    "first_id": MODEL,
                    "last_id": MODEL,
                },
            )
        if "/models/" in p:
            return self.send_json(200, {"id": MODEL, "object": "model", "type": "model", "display_name": MODEL})
        return self.send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self):
        raw = self.read_body()
        body = self.record(raw) or {}
        p = self.path.split("?")[0].rstrip("/")
        if ARGS.fail:
            return self.send_json(500, {"error": {"message": "mock failure", "type": "server_error"}})
        if p.endswith("/chat/completions"):
            return self.chat(body)
        if p.endswith("/responses"):
            return self.resp_api(body)
        if p.endswith("/messages/count_tokens"):
            return self.send_json(200, {"input_tokens": max(1, len(raw) // 4)})
        if p.endswith("/messages"):
            return self.messages(body)
        return self.send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    # ---------- tool-call mode
    CMD = "echo hi > hello.txt && ls -la"

    def pick_tool(self, tools):
        """Return (name, args) for a shell-ish tool, or None."""
        names = []
        for t in tools or []:
            n = t.get("name") or (t.get("function") or {}).get("name")
            if n:
                names.append(n)
        for n, a in (("exec_command", {"cmd": self.CMD}), ("Bash", {"command": self.CMD, "description": "write file"}),
                     ("bash", {"command": self.CMD}), ("shell_command", {"command": self.CMD}),
                     ("run_shell", {"command": self.CMD})):
            if n in names:
                return n, a
        return None

    def want_tool(self, body, done_markers):
        if not ARGS.toolcall:
            return None
        if done_markers in json.dumps(body):
            return None
        return self.pick_tool(body.get("tools"))

    # ---------- protocols
    def chat(self, body):
        cid = "chatcmpl-" + uuid.uuid4().hex[:12]
        now = int(time.time())
        usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
        tc = self.want_tool(body, '"role": "tool"')
        if tc:
            call = {"id": "call_" + uuid.uuid4().hex[:12], "type": "function",
                    "function": {"name": tc[0], "arguments": json.dumps(tc[1])}}
            if not body.get("stream"):
                return self.send_json(200, {"id": cid, "object": "chat.completion", "created": now, "model": MODEL,
                                            "choices": [{"index": 0, "message": {"role": "assistant", "content": None,
                                                         "tool_calls": [call]}, "finish_reason": "tool_calls"}],
                                            "usage": usage})
            self.start_sse()
            base = {"id": cid, "object": "chat.completion.chunk", "created": now, "model": MODEL}
            self.sse(dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": None,
                     "tool_calls": [dict(call, index=0)]}, "finish_reason": None}]))
            self.sse(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]))
            if (body.get("stream_options") or {}).get("include_usage"):
                self.sse(dict(base, choices=[], usage=usage))
            self.sse("[DONE]")
            return
        if not body.get("stream"):
            return self.send_json(
                200,
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": now,
                    "model": MODEL,
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": TEXT}, "finish_reason": "stop"}
                    ],
                    "usage": usage,
                },
            )
        self.start_sse()
        base = {"id": cid, "object": "chat.completion.chunk", "created": now, "model": MODEL}
        self.sse(dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]))
        self.sse(dict(base, choices=[{"index": 0, "delta": {"content": TEXT}, "finish_reason": None}]))
        self.sse(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))
        if (body.get("stream_options") or {}).get("include_usage"):
            self.sse(dict(base, choices=[], usage=usage))
        self.sse("[DONE]")

    def resp_api(self, body):
        rid = "resp_" + uuid.uuid4().hex[:16]
        mid = "msg_" + uuid.uuid4().hex[:16]
        now = int(time.time())
        item = {
            "id": mid,
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": TEXT, "annotations": []}],
        }
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 1,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 11,
        }
        resp = {
            "id": rid,
            "object": "response",
            "created_at": now,
            "status": "completed",
            "model": MODEL,
            "output": [item],
            "usage": usage,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": [],
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "temperature": None,
            "top_p": None,
            "text": {"format": {"type": "text"}},
            "reasoning": None,
            "store": False,
            "truncation": "disabled",
        }
        tc = self.want_tool(body, '"function_call_output"')
        if tc:
            item = {"id": "fc_" + uuid.uuid4().hex[:16], "type": "function_call", "status": "completed",
                    "call_id": "call_" + uuid.uuid4().hex[:12], "name": tc[0], "arguments": json.dumps(tc[1])}
            resp["output"] = [item]
        if not body.get("stream"):
            return self.send_json(200, resp)
        self.start_sse()
        seq = [0]

        def ev(t, **kw):
            d = {"type": t, "sequence_number": seq[0]}
            d.update(kw)
            seq[0] += 1
            self.sse(d, event=t)

        inprog = dict(resp, status="in_progress", output=[], usage=None)
        ev("response.created", response=inprog)
        ev("response.in_progress", response=inprog)
        if tc:
            ev("response.output_item.added", output_index=0, item=dict(item, status="in_progress", arguments=""))
            ev("response.function_call_arguments.delta", item_id=item["id"], output_index=0, delta=item["arguments"])
            ev("response.function_call_arguments.done", item_id=item["id"], output_index=0, arguments=item["arguments"])
            ev("response.output_item.done", output_index=0, item=item)
            ev("response.completed", response=resp)
            return
        ev("response.output_item.added", output_index=0,
           item={"id": mid, "type": "message", "status": "in_progress", "role": "assistant", "content": []})
        ev("response.content_part.added", item_id=mid, output_index=0, content_index=0,
           part={"type": "output_text", "text": "", "annotations": []})
        ev("response.output_text.delta", item_id=mid, output_index=0, content_index=0, delta=TEXT, logprobs=[])
        ev("response.output_text.done", item_id=mid, output_index=0, content_index=0, text=TEXT, logprobs=[])
        ev("response.content_part.done", item_id=mid, output_index=0, content_index=0,
           part={"type": "output_text", "text": TEXT, "annotations": []})
        ev("response.output_item.done", output_index=0, item=item)
        ev("response.completed", response=resp)

    def messages(self, body):
        mid = "msg_" + uuid.uuid4().hex[:20]
        model = body.get("model", MODEL)
        usage = {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        tc = self.want_tool(body, '"tool_result"')
        if tc:
            tid = "toolu_" + uuid.uuid4().hex[:20]
            block = {"type": "tool_use", "id": tid, "name": tc[0], "input": tc[1]}
            if not body.get("stream"):
                return self.send_json(200, {"id": mid, "type": "message", "role": "assistant", "model": model,
                                            "content": [block], "stop_reason": "tool_use", "stop_sequence": None,
                                            "usage": usage})
            self.start_sse()
            self.sse({"type": "message_start", "message": {"id": mid, "type": "message", "role": "assistant",
                      "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
                      "usage": dict(usage, output_tokens=0)}}, event="message_start")
            self.sse({"type": "content_block_start", "index": 0, "content_block": dict(block, input={})},
                     event="content_block_start")
            self.sse({"type": "content_block_delta", "index": 0,
                      "delta": {"type": "input_json_delta", "partial_json": json.dumps(tc[1])}}, event="content_block_delta")
            self.sse({"type": "content_block_stop", "index": 0}, event="content_block_stop")
            self.sse({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                      "usage": {"output_tokens": 1}}, event="message_delta")
            self.sse({"type": "message_stop"}, event="message_stop")
            return
        if not body.get("stream"):
            return self.send_json(
                200,
                {
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [{"type": "text", "text": TEXT}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
        self.start_sse()
        self.sse({"type": "message_start", "message": {"id": mid, "type": "message", "role": "assistant", "model": model,
                                                        "content": [], "stop_reason": None, "stop_sequence": None,
                                                        "usage": dict(usage, output_tokens=0)}}, event="message_start")
        self.sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                 event="content_block_start")
        self.sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": TEXT}},
                 event="content_block_delta")
        self.sse({"type": "content_block_stop", "index": 0}, event="content_block_stop")
        self.sse({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                  "usage": {"output_tokens": 1}}, event="message_delta")
        self.sse({"type": "message_stop"}, event="message_stop")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=18080)
    ap.add_argument("--log", required=True)
    ap.add_argument("--fail", action="store_true", help="answer 500 to every POST")
    ap.add_argument("--toolcall", action="store_true",
                    help="first model call answers with a shell tool call (echo hi > hello.txt), then 'done'")
    ap.add_argument("--head404", action="store_true", help="answer 404 to HEAD")
    ARGS = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), H)
    srv.daemon_threads = True
    print("mock listening on 127.0.0.1:%d, logging to %s" % (ARGS.port, ARGS.log), flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
