"""The relay CLI's handling of server errors (spec, client handling rules), against a scripted server
that answers GET /v1/me with the statuses a test lists: 503 waits for retry_after_ms (with jitter)
and tries again, other 5xx are retried three times with a growing backoff, a 4xx is final, and each
retry is said on stderr with the answer's X-Request-ID."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from relaylib import SLOW
from test_60_relay_cli import Cli

ME = {"ok": True, "result": {"user": {"id": "alice", "created_at": 1}, "installations": [], "sessions": []}}


class ScriptedServer:
    """Answers each request with the next (status, body) of its script; the last one repeats."""

    def __init__(self, script):
        self.script = list(script)
        self.times = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.times.append(time.monotonic())
                status, body = server.script.pop(0) if len(server.script) > 1 else server.script[0]
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("X-Request-ID", "req_scripted%04d" % len(server.times))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _error(code, **extra):
    error = {"code": code, "message": code.replace("_", " ")}
    error.update(extra)
    return {"ok": False, "error": error}


@pytest.fixture
def scripted():
    servers = []

    def start(*script):
        server = ScriptedServer(script)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def _whoami(tmp_path, server):
    cli = Cli(tmp_path, {"RELAY_SERVER": server.url, "RELAY_TOKEN": "eyJhbGciOiJFZERTQSJ9.e30.c2ln"})
    started = time.monotonic()
    proc = cli.run("whoami", "--json", timeout=60 * SLOW)
    return proc, time.monotonic() - started


def test_503_waits_retry_after_then_gives_the_answer(tmp_path, scripted):
    server = scripted((503, _error("agent_unavailable", retry_after_ms=1200)), (200, ME))
    proc, _ = _whoami(tmp_path, server)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert json.loads(proc.stdout)["user"]["id"] == "alice"
    assert len(server.times) == 2
    gap = server.times[1] - server.times[0]
    assert 1.2 * 0.75 - 0.05 <= gap <= 1.2 * 1.25 + 2 * SLOW, gap  # retry_after_ms with +-25 % jitter
    assert "HTTP 503 (request req_scripted0001); retrying" in proc.stderr, proc.stderr


def test_other_5xx_are_retried_three_times_with_a_growing_backoff_then_given_up(tmp_path, scripted):
    server = scripted((500, _error("internal_error")))
    proc, _ = _whoami(tmp_path, server)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert len(server.times) == 4, server.times  # the call and three retries
    gaps = [b - a for a, b in zip(server.times, server.times[1:])]
    # 0.5 s, 1 s, 2 s, each +-25 %
    for gap, base in zip(gaps, (0.5, 1.0, 2.0)):
        assert base * 0.75 - 0.05 <= gap <= base * 1.25 + 2 * SLOW, gaps
    assert proc.stderr.count("retrying") == 3, proc.stderr
    assert "req_scripted0004" in proc.stdout + proc.stderr


def test_a_5xx_then_success_is_one_answer(tmp_path, scripted):
    server = scripted((502, _error("bad_gateway")), (200, ME))
    proc, _ = _whoami(tmp_path, server)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert len(server.times) == 2


def test_a_4xx_is_final(tmp_path, scripted):
    server = scripted((403, _error("forbidden")), (200, ME))
    proc, waited = _whoami(tmp_path, server)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert len(server.times) == 1
    assert "retrying" not in proc.stderr
    assert "req_scripted0001" in proc.stdout + proc.stderr
