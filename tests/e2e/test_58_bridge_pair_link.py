"""The pairing screen of `relay-bridge pair` shows a link (and its QR code) only when the relay serves
the claim page (issue 17, item 5): one probe of GET /pair when the screen opens, 200 = show it.
Against the real relayd the screen follows the probe's answer (404 today, 200 once the web client
serves it); against a scripted relay whose /pair answers 200 the link must be there. The JSON line
keeps claim_url for scripts and says with claim_page whether it is served."""
import json
import os
import pty
import re
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


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _paired_screen(relay, user_token, tmp_path, argv0, cwd, path_dirs=()):
    """`relay-bridge pair` on a terminal, run as argv0 from cwd, the code claimed by the user: the screen."""
    bridge = RelayBridge(relay, tmp_path)
    master, slave = pty.openpty()
    env = bridge.env({"NO_COLOR": "1", "TERM": "xterm",
                      "PATH": ":".join(list(path_dirs) + ["/usr/local/bin", "/usr/bin", "/bin"])})
    proc = subprocess.Popen([argv0, "pair", "--server", relay.url(""), "--name", "screen-test"],
                            executable=BRIDGE, cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            env=env, close_fds=True)
    os.close(slave)
    screen, claimed, deadline = b"", False, time.monotonic() + WAIT
    try:
        while time.monotonic() < deadline and proc.poll() is None or select.select([master], [], [], 0)[0]:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                if not data:
                    break
                screen += data
            code = re.search(rb"\b([A-Z2-9]{7})\b", screen.split(b"Enter this code")[-1])
            if not claimed and b"Enter this code" in screen and code:
                r = requests.post(relay.url("/v1/me/pairing/claim"), json={"code": code.group(1).decode()},
                                  headers={"Authorization": "Bearer " + user_token}, timeout=10 * SLOW)
                assert r.status_code == 200, r.text
                claimed = True
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(master)
    text = screen.decode("utf-8", "replace").replace("\r\n", "\n")
    assert "Paired: installation" in text, text
    return text


def test_after_pairing_it_names_itself_as_it_can_be_run_and_the_tour_s_agent(relay, user_token, tmp_path):
    """Issue 35, item 9: built from the tree, relay-bridge is not on PATH: the next command is the path
    it was run as, with the README tour's agent when its example is there; on PATH, its bare name."""
    inside = os.path.join(os.path.dirname(BRIDGE), ".", "relay-bridge")
    text = _paired_screen(relay, user_token, tmp_path / "a", inside, REPO)
    assert ("Start the bridge with: %s run --agent 'jsonl:python3 examples/echo_agent.py --delay 0.3'\n" % inside
            in text), text
    assert "--agent exec:COMMAND\n" not in text and "relay-bridge run --agent exec:COMMAND" not in text, text
    # Elsewhere, no example agent to point at: the generic form, still with the path it was run as.
    text = _paired_screen(relay, user_token, tmp_path / "b", inside, str(tmp_path))
    assert "Start the bridge with: %s run --agent exec:COMMAND" % inside in text, text
    # Found on PATH (a link to this very program): its name is enough.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(BRIDGE, str(bin_dir / "relay-bridge"))
    text = _paired_screen(relay, user_token, tmp_path / "c", inside, REPO, path_dirs=[str(bin_dir)])
    assert "Start the bridge with: relay-bridge run --agent 'jsonl:python3 examples/echo_agent.py" in text, text
