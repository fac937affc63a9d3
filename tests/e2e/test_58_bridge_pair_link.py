"""The pairing screen of `relay-bridge pair` shows a link (and its QR code) only when the relay serves
the claim page (issue 17, item 5): one probe of GET /pair when the screen opens, 200 = show it.
Against the real relayd the screen follows the probe's answer (404 today, 200 once the web client
serves it); against a scripted relay whose /pair answers 200 the link must be there. The JSON line
keeps claim_url for scripts and says with claim_page whether it is served."""
import json
import os
import pty
import select
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from relaylib import SLOW
from test_50_bridge_support import BRIDGE, WAIT, RelayBridge


def pair_screen(bridge, server, until=b"Waiting...", timeout=WAIT):
    """Runs `relay-bridge pair` on a pseudo-terminal until `until` is shown; returns the screen."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([BRIDGE, "pair", "--server", server, "--name", "screen-test"], stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave, env=bridge.env({"NO_COLOR": "1", "TERM": "xterm"}),
                            close_fds=True)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and until not in b"".join(chunks):
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_the_screen_follows_the_relays_claim_page(relay, tmp_path):
    bridge = RelayBridge(relay, tmp_path)
    probe = requests.get(relay.url("/pair"), timeout=10 * SLOW)
    shown = pair_screen(bridge, relay.url(""))
    assert "Enter this code" in shown, shown
    if probe.status_code == 200:
        assert relay.url("/pair?code=") in shown, shown
    else:
        assert "pair?code=" not in shown and "Or open" not in shown, shown
        assert "relay pair " in shown, shown


class ScriptedRelay:
    """Pairing routes and a claim page: start gives a code, poll says the code expired, /pair is 200."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            def _json(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.startswith("/pair"):
                    page = b"<!doctype html><title>pair</title>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                else:
                    self._json(404, {"ok": False, "error": {"code": "not_found"}})

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/v1/pairing/start":
                    self._json(200, {"ok": True, "result": {"code": "QWERTYU", "poll_token": "p_x",
                                                            "expires_at": int(time.time()) + 120}})
                else:
                    time.sleep(1)
                    self._json(410, {"ok": False, "error": {"code": "pairing_expired"}})

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted_relay():
    server = ScriptedRelay()
    yield server
    server.close()


def test_a_served_claim_page_is_shown_with_its_link(relay, tmp_path, scripted_relay):
    bridge = RelayBridge(relay, tmp_path)
    shown = pair_screen(bridge, scripted_relay.url)
    assert "Or open %s/pair?code=QWERTYU" % scripted_relay.url in shown, shown


def test_the_json_line_says_whether_the_page_is_served(relay, tmp_path, scripted_relay):
    bridge = RelayBridge(relay, tmp_path)
    for server, served in ((relay.url(""), requests.get(relay.url("/pair"), timeout=10 * SLOW).status_code == 200),
                           (scripted_relay.url, True)):
        proc = subprocess.Popen([BRIDGE, "pair", "--server", server, "--json"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=bridge.env())
        try:
            first = json.loads(proc.stdout.readline())
        finally:
            proc.kill()
            proc.communicate()
        assert first["claim_page"] is served, (server, first)
        assert first["claim_url"].endswith("/pair?code=" + first["code"]), first
