"""A small OpenAI-compatible chat-completions server for the relay-bridge tests.

POST /v1/chat/completions with "stream": true answers Server-Sent Events the
way OpenAI, llama.cpp and vLLM do: chunks with choices[0].delta.content, a
last chunk with finish_reason, a usage chunk (stream_options.include_usage),
then "data: [DONE]". The reply echoes the last user message and how many
messages the request carried (so a test sees the session's history). A
message "tool: NAME ARGS-JSON" makes the model call a tool instead; "slow"
streams 200 tokens 50 ms apart (for cancel). Every request body is kept in
`requests`.
"""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI:
    def __init__(self):
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                outer.requests.append({"path": self.path, "body": body,
                                       "authorization": self.headers.get("Authorization")})
                if self.path != "/v1/chat/completions" or body.get("stream") is not True:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    outer._stream(self, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _chunk(self, handler, delta=None, finish=None, usage=None):
        doc = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake-model",
               "choices": [] if usage else [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
        if usage:
            doc["usage"] = usage
        handler.wfile.write(("data: %s\n\n" % json.dumps(doc)).encode())
        handler.wfile.flush()

    def _stream(self, handler, body):
        messages = body["messages"]
        last = messages[-1]["content"]
        if last.startswith("tool: "):
            name, args = last[6:].split(" ", 1)
            self._chunk(handler, {"role": "assistant", "content": "calling " + name})
            self._chunk(handler, {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                   "function": {"name": name, "arguments": ""}}]})
            for part in (args[:len(args) // 2], args[len(args) // 2:]):
                self._chunk(handler, {"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
            self._chunk(handler, finish="tool_calls")
        elif last == "slow":
            for n in range(200):
                self._chunk(handler, {"content": "."})
                time.sleep(0.05)
            self._chunk(handler, finish="stop")
        else:
            reply = "echo(%d): %s" % (len(messages), last)
            for n in range(0, len(reply), 3):
                self._chunk(handler, {"content": reply[n:n + 3]})
            self._chunk(handler, finish="stop")
        self._chunk(handler, usage={"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18})
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
