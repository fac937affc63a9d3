"""A scripted stand-in for the Anthropic Messages API on loopback, for the tests that drive the
real Claude Code (tests/agents, test_91).

Claude Code is pointed at it with ANTHROPIC_BASE_URL=<url> and a made-up ANTHROPIC_API_KEY.
`POST /v1/messages` (the CLI adds `?beta=true`) with `"stream": true` answers the Server-Sent
Events the real API sends: message_start, content_block_start / content_block_delta (text_delta,
or input_json_delta for a tool_use) / content_block_stop per block, message_delta with the
stop_reason and the usage, message_stop; without `stream` it answers the same message as one JSON
document. `POST /v1/messages/count_tokens` answers a count, `GET /v1/models` a list of one model;
any other path answers 404 with the API's error document. Every request is kept in `requests`
(method, path, the headers that matter, body) so that a test can show exactly what Claude Code
asked for.

Which answer a request gets:
- The *conversation* requests are those that offer Claude Code's tools (`tools` holds Bash, Write,
  ...). Their answer comes from the script: a function of the request body returning a list of
  content blocks (`{"type": "text", "text": ...}` or `{"type": "tool_use", "name": ..., "input":
  {...}}`); a tool_use in it makes the stop_reason "tool_use", else "end_turn".
  `tools_then_text([(name, input), ...], text)` is the usual script: the answers of a turn ask for
  each tool in turn (the count of tool results since the user's prompt says which), then the text,
  with the last tool result's words appended so that a test sees what came back (an edit done, or
  the refusal after a denial).
- Any other /v1/messages request (Claude Code's side calls on its small model: a title for the
  conversation, whether a prompt starts a new topic, a quota probe) answers a short text, "ok".
"""
import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "claude-sonnet-4-5"
_ids = itertools.count(1)


def _text_of(content):
    """The words of a message's or a tool_result's content (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    out = []
    for block in content or []:
        if block.get("type") == "text":
            out.append(block.get("text", ""))
        elif block.get("type") == "tool_result":
            out.append(_text_of(block.get("content")))
    return "\n".join(out)


def last_tool_result(body):
    """The tool_result block of the request's last user message, or None."""
    messages = body.get("messages") or []
    if not messages or messages[-1].get("role") != "user" or isinstance(messages[-1].get("content"), str):
        return None
    for block in messages[-1]["content"]:
        if block.get("type") == "tool_result":
            return block
    return None


def tools_then_text(steps, text):
    """Script: ask for each tool use of `steps` ([(name, input), ...]) in turn, one answer each,
    then (once the last result is back) answer `text` and end the turn.

    The final text is `text` followed by " [tool ok|error: …]" with the last result's words, so
    that the reply shows what the tool did (an edit done, or the refusal after a denial)."""

    def script(body):
        done = _tool_results_this_turn(body)
        if done < len(steps):
            name, tool_input = steps[done]
            return [{"type": "text", "text": "I will use %s." % name},
                    {"type": "tool_use", "name": name, "input": tool_input}]
        result = last_tool_result(body) or {}
        said = _text_of(result.get("content")).strip().replace("\n", " ")
        tag = "error" if result.get("is_error") else "ok"
        return [{"type": "text", "text": "%s [tool %s: %s]" % (text, tag, said[:200])}]

    return script


def tool_then_text(name, tool_input, text):
    """Script: one tool use, then `text` (see tools_then_text)."""
    return tools_then_text([(name, tool_input)], text)


def _tool_results_this_turn(body):
    """How many tool results came back since the user's last prompt (a user message with no tool_result)."""
    count = 0
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        results = [] if isinstance(content, str) else [b for b in content if b.get("type") == "tool_result"]
        if not results:
            break
        count += len(results)
    return count


def is_conversation(body):
    """A request of the agent's loop (it offers the tools) rather than a side call."""
    names = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    return bool(names & {"Bash", "Write", "Edit", "Read"})


def _serve(handler, sock):
    """A threaded HTTP server for `handler` on 127.0.0.1, or on the listening socket `sock` (one made
    inside a network namespace: agentlib.NetSandbox)."""
    if sock is None:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    else:
        server = ThreadingHTTPServer(sock.getsockname(), handler, bind_and_activate=False)
        server.socket.close()
        server.socket = sock
        server.server_address = sock.getsockname()
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, "http://127.0.0.1:%d" % server.server_address[1]


class FakeAnthropic:
    def __init__(self, script=None, chunk=6, sock=None):
        self.script = script or (lambda body: [{"type": "text", "text": "Hello from the stand-in."}])
        self.chunk = chunk  # characters per text_delta / input_json_delta
        self.requests = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _record(self, body):
                keep = {k.lower(): v for k, v in self.headers.items()
                        if k.lower() in ("x-api-key", "authorization", "anthropic-version", "anthropic-beta",
                                         "user-agent", "x-app")}
                entry = {"method": self.command, "path": self.path, "headers": keep, "body": body}
                with outer.lock:
                    outer.requests.append(entry)

            def _json(self, status, doc):
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("request-id", "req_fake_%d" % next(_ids))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._record(None)
                path = self.path.split("?")[0]
                if path == "/v1/models":
                    self._json(200, {"data": [{"type": "model", "id": MODEL, "display_name": "Fake Sonnet",
                                               "created_at": "2025-01-01T00:00:00Z"}],
                                     "has_more": False, "first_id": MODEL, "last_id": MODEL})
                else:
                    self._not_found()

            def do_HEAD(self):
                self._record(None)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = {"unparsed": raw[:2000].decode("utf-8", "replace")}
                self._record(body)
                path = self.path.split("?")[0]
                if path == "/v1/messages/count_tokens":
                    self._json(200, {"input_tokens": 100 + len(raw) // 4})
                elif path == "/v1/messages" and isinstance(body, dict):
                    try:
                        outer._answer(self, body)
                    except (BrokenPipeError, ConnectionResetError):
                        self.close_connection = True
                else:
                    self._not_found()

            def _not_found(self):
                self._json(404, {"type": "error", "error": {"type": "not_found_error",
                                                            "message": "not served by the stand-in: " + self.path}})

        self.server, self.url = _serve(Handler, sock)

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    # -- what the test reads back -----------------------------------------------------------------
    def paths(self):
        with self.lock:
            return [(r["method"], r["path"]) for r in self.requests]

    def conversation(self):
        """The bodies of the agent loop's requests, in order."""
        with self.lock:
            return [r["body"] for r in self.requests
                    if r["path"].split("?")[0] == "/v1/messages" and is_conversation(r["body"])]

    # -- answers ----------------------------------------------------------------------------------
    def _answer(self, handler, body):
        blocks = self.script(body) if is_conversation(body) else [{"type": "text", "text": "ok"}]
        content = []
        for block in blocks:
            if block["type"] == "tool_use":
                content.append({"type": "tool_use", "id": "toolu_fake%04d" % next(_ids),
                                "name": block["name"], "input": block["input"]})
            else:
                content.append({"type": "text", "text": block["text"]})
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        usage_in = {"input_tokens": 120, "output_tokens": 1, "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0}
        out_tokens = sum(len(json.dumps(b)) // 4 for b in content) or 1
        message = {"id": "msg_fake%04d" % next(_ids), "type": "message", "role": "assistant",
                   "model": body.get("model") or MODEL, "content": content, "stop_reason": stop,
                   "stop_sequence": None, "usage": dict(usage_in, output_tokens=out_tokens)}
        if not body.get("stream"):
            handler._json(200, message)
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("request-id", "req_fake_%d" % next(_ids))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True

        def event(kind, doc):
            doc = dict(doc, type=kind)
            handler.wfile.write(("event: %s\ndata: %s\n\n" % (kind, json.dumps(doc))).encode())
            handler.wfile.flush()

        start = dict(message, content=[], stop_reason=None, usage=usage_in)
        event("message_start", {"message": start})
        event("ping", {})
        n = self.chunk
        for index, block in enumerate(content):
            if block["type"] == "text":
                event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
                text = block["text"]
                for i in range(0, len(text), n):
                    event("content_block_delta", {"index": index,
                                                  "delta": {"type": "text_delta", "text": text[i:i + n]}})
            else:
                event("content_block_start", {"index": index, "content_block": dict(block, input={})})
                js = json.dumps(block["input"])
                for i in range(0, len(js), n * 4):
                    event("content_block_delta", {"index": index, "delta": {"type": "input_json_delta",
                                                                            "partial_json": js[i:i + n * 4]}})
            event("content_block_stop", {"index": index})
        event("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                "usage": {"output_tokens": out_tokens}})
        event("message_stop", {})


class RefusingProxy:
    """An HTTP(S) proxy on loopback that records what is asked of it and refuses it all (403).

    Given to the agent as HTTPS_PROXY / HTTP_PROXY (NO_PROXY keeps loopback direct), it shows
    every connection the agent tries to open anywhere but the stand-in, and lets none through."""

    def __init__(self, sock=None):
        self.asked = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _refuse(self):
                outer.asked.append("%s %s" % (self.command, self.path))
                self.send_response(403, "refused by the test")
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

            do_CONNECT = do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = _refuse

        self.server, self.url = _serve(Handler, sock)

    def close(self):
        self.server.shutdown()
        self.server.server_close()
