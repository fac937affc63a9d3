"""A scripted stand-in for Google's Generative Language API (the Gemini API) on loopback, for the
tests that drive the real Gemini CLI (@google/gemini-cli in tests/agents/gemini; test_114).

Gemini CLI is pointed at it with GOOGLE_GEMINI_BASE_URL=<url> and a made-up GEMINI_API_KEY (sent
as the x-goog-api-key header). `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` answers
the Server-Sent Events the real API sends: `data: <GenerateContentResponse>` events, each with one
candidate whose content holds some parts (text, or one functionCall), the last one with the
finishReason "STOP" and the usageMetadata. `POST …:generateContent` answers one such response as a
JSON document and `POST …:countTokens` a count. Any other request answers 404 with the API's error
document. Every request is kept in `requests` (method, path, the headers that matter, body).

Which answer a request gets:
- The *conversation* requests are those that offer Gemini CLI's tools (`tools[].functionDeclarations`
  holds write_file, run_shell_command, ...). Their answer comes from the script: a function of the
  request body returning a list of parts (`{"type": "text", "text": …}` or `{"type": "call",
  "name": …, "args": {…}}`). `calls_then_text([(name, args), …], text)` is the usual script: the
  answers of a turn ask for each call in turn (the count of functionResponse parts since the user's
  prompt says which), then the text, with the last call's response appended so that a test sees
  what came back (a file written, or the refusal after a denial).
- Any other request (a side call of the CLI, none seen with the settings of the tests) answers a
  short text, "ok".
"""
import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler

from fake_anthropic import _serve

MODEL_VERSION = "gemini-fake-001"
_ids = itertools.count(1)


def _responses_this_turn(body):
    """The functionResponse parts of the request's contents since the user's last prompt (a user
    content with no functionResponse)."""
    out = []
    for content in reversed(body.get("contents") or []):
        if content.get("role") != "user":
            continue
        responses = [p["functionResponse"] for p in content.get("parts") or [] if "functionResponse" in p]
        if not responses:
            break
        out = responses + out
    return out


def _response_words(response):
    """The words of a functionResponse (Gemini CLI puts the tool's output in response.output, or an
    error in response.error)."""
    inner = response.get("response") or {}
    for key in ("output", "error", "content"):
        if key in inner:
            value = inner[key]
            return value if isinstance(value, str) else json.dumps(value)
    return json.dumps(inner)


def calls_then_text(steps, text):
    """Script: ask for each function call of `steps` ([(name, args), …]) in turn, one answer each,
    then (once the last response is back) answer `text` followed by " [tool said: …]" with the last
    response's words."""

    def script(body):
        done = _responses_this_turn(body)
        if len(done) < len(steps):
            name, args = steps[len(done)]
            return [{"type": "text", "text": "I will use %s." % name}, {"type": "call", "name": name, "args": args}]
        said = _response_words(done[-1]).strip().replace("\n", " ") if done else ""
        suffix = " [tool said: %s]" % said[:200] if done else ""
        return [{"type": "text", "text": text + suffix}]

    return script


def tool_names(body):
    names = set()
    for tool in (body or {}).get("tools") or []:
        for decl in tool.get("functionDeclarations") or []:
            names.add(decl.get("name"))
    return names


def is_conversation(body):
    """A request of the agent's loop (it offers the CLI's tools) rather than a side call."""
    return bool(tool_names(body) & {"write_file", "replace", "run_shell_command", "read_file"})


class FakeGemini:
    def __init__(self, script=None, chunk=6, sock=None):
        self.script = script or (lambda body: [{"type": "text", "text": "Hello from the stand-in."}])
        self.chunk = chunk  # characters of text per event
        self.requests = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _record(self, body):
                keep = {k.lower(): v for k, v in self.headers.items()
                        if k.lower() in ("x-goog-api-key", "authorization", "user-agent", "x-goog-api-client")}
                with outer.lock:
                    outer.requests.append({"method": self.command, "path": self.path, "headers": keep, "body": body})

            def _json(self, status, doc):
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _not_found(self):
                self._json(404, {"error": {"code": 404, "message": "not served by the stand-in: " + self.path,
                                           "status": "NOT_FOUND"}})

            def do_GET(self):
                self._record(None)
                self._not_found()

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = {"unparsed": raw[:2000].decode("utf-8", "replace")}
                self._record(body)
                path = self.path.split("?")[0]
                method = path.rsplit(":", 1)[-1] if path.startswith("/v1beta/models/") and ":" in path else ""
                try:
                    if method == "streamGenerateContent" and isinstance(body, dict):
                        outer._stream(self, body)
                        self.close_connection = True
                    elif method == "generateContent" and isinstance(body, dict):
                        self._json(200, outer._whole(body))
                    elif method == "countTokens":
                        self._json(200, {"totalTokens": 100 + len(raw) // 4})
                    else:
                        self._not_found()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

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
            return [r["body"] for r in self.requests if isinstance(r["body"], dict) and is_conversation(r["body"])]

    # -- answers ----------------------------------------------------------------------------------
    def _parts(self, body):
        steps = self.script(body) if is_conversation(body) else [{"type": "text", "text": "ok"}]
        parts = []
        for step in steps:
            if step["type"] == "call":
                parts.append({"functionCall": {"name": step["name"], "args": step["args"]}})
            else:
                parts.append({"text": step["text"]})
        return parts

    @staticmethod
    def _usage(body, parts):
        prompt = len(json.dumps(body)) // 4
        out = sum(len(json.dumps(p)) // 4 for p in parts) or 1
        return {"promptTokenCount": prompt, "candidatesTokenCount": out, "totalTokenCount": prompt + out}

    def _whole(self, body):
        parts = self._parts(body)
        return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": self._usage(body, parts), "modelVersion": MODEL_VERSION,
                "responseId": "fake%04d" % next(_ids)}

    def _stream(self, handler, body):
        parts = self._parts(body)
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()
        rid = "fake%04d" % next(_ids)

        def event(chunk_parts, last=False):
            candidate = {"content": {"role": "model", "parts": chunk_parts}, "index": 0}
            doc = {"candidates": [candidate], "modelVersion": MODEL_VERSION, "responseId": rid}
            if last:
                candidate["finishReason"] = "STOP"
                doc["usageMetadata"] = self._usage(body, parts)
            handler.wfile.write(("data: %s\r\n\r\n" % json.dumps(doc)).encode())
            handler.wfile.flush()

        pieces = []
        n = self.chunk
        for part in parts:
            if "text" in part:
                text = part["text"]
                pieces.extend({"text": text[i:i + n]} for i in range(0, len(text), n))
            else:
                pieces.append(part)  # a function call comes whole, as the real API sends it
        for i, piece in enumerate(pieces):
            event([piece], last=i == len(pieces) - 1)
