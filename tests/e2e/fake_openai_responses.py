"""A scripted stand-in for the OpenAI Responses API on loopback, for the tests that drive the real
Codex (through @zed-industries/codex-acp, tests/agents; test_92).

Codex is pointed at it by a model provider of its own in $CODEX_HOME/config.toml (base_url =
<url>/v1, wire_api = "responses", env_key = OPENAI_API_KEY with a made-up key). `POST /v1/responses`
with `"stream": true` answers the Server-Sent Events the real API sends: response.created,
response.in_progress, then per output item response.output_item.added, its deltas
(response.output_text.delta for a message, response.function_call_arguments.delta for a function
call, response.custom_tool_call_input.delta for a freeform tool such as apply_patch) and
response.output_item.done, then response.completed with the usage. Any other path answers 404 with
the API's error document. Every request is kept in `requests`.

The answer comes from the script: a function of the request body returning a list of items,
`{"type": "text", "text": …}`, `{"type": "function_call", "name": …, "arguments": {…}}` or
`{"type": "custom_tool_call", "name": …, "input": "…"}`. `steps_then_text(steps, text)` asks for
each tool of `steps` in turn (the count of tool outputs since the user's last message says which),
then answers `text` with the last tool output's words appended.
"""
import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler

from fake_anthropic import _serve

_ids = itertools.count(1)
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")


def _outputs_this_turn(body):
    """The tool outputs in the request's input after the user's last message."""
    out = []
    for item in reversed(body.get("input") or []):
        if item.get("type") == "message" and item.get("role") == "user":
            break
        if item.get("type") in OUTPUT_TYPES:
            out.append(item)
    return list(reversed(out))


def _output_text(item):
    output = item.get("output")
    if isinstance(output, dict):  # {"content": "...", "success": bool} in some versions
        output = output.get("content") or json.dumps(output)
    if isinstance(output, list):
        output = " ".join(part.get("text", "") for part in output if isinstance(part, dict))
    return str(output or "")


def steps_then_text(steps, text):
    def script(body):
        outputs = _outputs_this_turn(body)
        if len(outputs) < len(steps):
            step = dict(steps[len(outputs)])
            return [{"type": "text", "text": "I will use %s." % step["name"]}, step]
        said = _output_text(outputs[-1]).strip().replace("\n", " ") if outputs else ""
        return [{"type": "text", "text": "%s [tool said: %s]" % (text, said[:200])}]
    return script


class FakeResponses:
    def __init__(self, script=None, chunk=8, sock=None):
        self.script = script or (lambda body: [{"type": "text", "text": "Hello from the stand-in."}])
        self.chunk = chunk
        self.requests = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _record(self, body):
                keep = {k.lower(): v for k, v in self.headers.items()
                        if k.lower() in ("authorization", "user-agent", "originator", "openai-beta", "version")}
                with outer.lock:
                    outer.requests.append({"method": self.command, "path": self.path, "headers": keep, "body": body})

            def _json(self, status, doc):
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._record(None)
                if self.path.split("?")[0] == "/v1/responses" and self.headers.get("Upgrade", "").lower() == "websocket":
                    # Codex's OpenAI provider tries the Responses API over a WebSocket first; 426 sends
                    # it straight to the plain HTTPS stream that this stand-in serves.
                    self._json(426, {"error": {"message": "use HTTP", "type": "invalid_request_error",
                                               "code": None, "param": None}})
                    return
                self._json(404, {"error": {"message": "not served by the stand-in: " + self.path,
                                           "type": "invalid_request_error", "code": None, "param": None}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = {"unparsed": raw[:2000].decode("utf-8", "replace")}
                self._record(body)
                if self.path.split("?")[0] == "/v1/responses" and isinstance(body, dict) and body.get("stream"):
                    try:
                        outer._stream(self, body)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    self.close_connection = True
                else:
                    self._json(404, {"error": {"message": "not served by the stand-in: " + self.path,
                                               "type": "invalid_request_error", "code": None, "param": None}})

        self.server, self.url = _serve(Handler, sock)

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def paths(self):
        with self.lock:
            return [(r["method"], r["path"]) for r in self.requests]

    def _stream(self, handler, body):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()
        seq = itertools.count(0)

        def event(kind, doc):
            doc = dict(doc, type=kind, sequence_number=next(seq))
            handler.wfile.write(("event: %s\ndata: %s\n\n" % (kind, json.dumps(doc))).encode())
            handler.wfile.flush()

        rid = "resp_fake%04d" % next(_ids)
        response = {"id": rid, "object": "response", "created_at": 1767225600, "status": "in_progress",
                    "model": body.get("model") or "gpt-5.5", "output": [], "usage": None}
        event("response.created", {"response": response})
        event("response.in_progress", {"response": response})
        done_items = []
        n = self.chunk
        for index, step in enumerate(self.script(body)):
            if step["type"] == "text":
                item_id = "msg_fake%04d" % next(_ids)
                event("response.output_item.added", {"output_index": index, "item": {
                    "type": "message", "id": item_id, "status": "in_progress", "role": "assistant", "content": []}})
                event("response.content_part.added", {"output_index": index, "item_id": item_id, "content_index": 0,
                                                      "part": {"type": "output_text", "text": "", "annotations": []}})
                text = step["text"]
                for i in range(0, len(text), n):
                    event("response.output_text.delta", {"output_index": index, "item_id": item_id,
                                                         "content_index": 0, "delta": text[i:i + n]})
                event("response.output_text.done", {"output_index": index, "item_id": item_id,
                                                    "content_index": 0, "text": text})
                part = {"type": "output_text", "text": text, "annotations": []}
                event("response.content_part.done", {"output_index": index, "item_id": item_id,
                                                     "content_index": 0, "part": part})
                item = {"type": "message", "id": item_id, "status": "completed", "role": "assistant", "content": [part]}
            elif step["type"] == "function_call":
                item_id = "fc_fake%04d" % next(_ids)
                call_id = "call_fake%04d" % next(_ids)
                args = json.dumps(step["arguments"])
                base = {"type": "function_call", "id": item_id, "call_id": call_id, "name": step["name"]}
                event("response.output_item.added", {"output_index": index, "item": dict(
                    base, arguments="", status="in_progress")})
                for i in range(0, len(args), n * 4):
                    event("response.function_call_arguments.delta", {"output_index": index, "item_id": item_id,
                                                                     "delta": args[i:i + n * 4]})
                event("response.function_call_arguments.done", {"output_index": index, "item_id": item_id,
                                                                "arguments": args})
                item = dict(base, arguments=args, status="completed")
            else:  # custom_tool_call: a freeform tool (apply_patch)
                item_id = "ctc_fake%04d" % next(_ids)
                call_id = "call_fake%04d" % next(_ids)
                text = step["input"]
                base = {"type": "custom_tool_call", "id": item_id, "call_id": call_id, "name": step["name"]}
                event("response.output_item.added", {"output_index": index, "item": dict(
                    base, input="", status="in_progress")})
                for i in range(0, len(text), n * 4):
                    event("response.custom_tool_call_input.delta", {"output_index": index, "item_id": item_id,
                                                                    "delta": text[i:i + n * 4]})
                event("response.custom_tool_call_input.done", {"output_index": index, "item_id": item_id,
                                                               "input": text})
                item = dict(base, input=text, status="completed")
            event("response.output_item.done", {"output_index": index, "item": item})
            done_items.append(item)
        usage = {"input_tokens": 200, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 240}
        event("response.completed", {"response": dict(response, status="completed", output=done_items, usage=usage)})
