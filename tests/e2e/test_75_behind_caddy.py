"""relayd behind Debian's Caddy with contrib/Caddyfile (issue 15): the file validates as shipped;
run with the site address turned into a loopback one (Caddy would fetch a certificate for the real
name) and the upstream put in, it carries the event stream unbuffered, relay-bridge's WebSocket,
uploads up to relayd's limit, and each client's own address for the rate limits."""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest
import requests

from relaylib import HTTP_TIMEOUT, SLOW, assert_ok, bearer, clean_env, free_port, session_from, wait_until
from test_50_bridge_support import BRIDGE, WAIT, User

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CADDY = shutil.which("caddy") or "/usr/bin/caddy"
CADDYFILE = os.path.join(REPO, "contrib", "Caddyfile")
MAX_UPLOAD = 26214400


def caddy_env(workdir):
    # Caddy keeps its state under XDG folders: the test's own, not the machine's.
    return clean_env({"XDG_DATA_HOME": str(workdir), "XDG_CONFIG_HOME": str(workdir), "HOME": str(workdir)})


class Caddy:
    # free_port() only finds a port that was free: with both end-to-end passes running at once,
    # another server may take it before caddy binds it. Caddy then exits at once saying so, and
    # gets another port.
    ATTEMPTS = 5

    def __init__(self, workdir, relay_port):
        self.dir = workdir / "caddy"
        self.dir.mkdir()
        for attempt in range(self.ATTEMPTS):
            self._start(relay_port)
            wait_until(self._up_or_exited, WAIT, what="caddy to answer")
            if self.proc.poll() is None:
                return
            log = (self.dir / "caddy.log").read_text()
            assert "address already in use" in log and attempt + 1 < self.ATTEMPTS, log[-3000:]
            (self.dir / "caddy.log").unlink()

    def _start(self, relay_port):
        self.port = free_port()
        with open(CADDYFILE) as f:
            text = f.read()
        for old, new in (("relay.example.org {", "http://127.0.0.1:%d {" % self.port),
                         ("reverse_proxy 127.0.0.1:8080", "reverse_proxy 127.0.0.1:%d" % relay_port)):
            assert old in text, "contrib/Caddyfile no longer has %r" % old
            text = text.replace(old, new)
        # No admin endpoint on its fixed port (several tests may run at once).
        config = self.dir / "Caddyfile"
        config.write_text("{\n\tadmin off\n}\n\n" + text)
        log = open(self.dir / "caddy.log", "ab")
        self.proc = subprocess.Popen([CADDY, "run", "--config", str(config), "--adapter", "caddyfile"],
                                     stdout=log, stderr=log, env=caddy_env(self.dir))
        log.close()
        self.base = "http://127.0.0.1:%d" % self.port

    def _up_or_exited(self):
        if self.proc.poll() is not None:
            return True
        try:
            return requests.get(self.base + "/healthz", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(WAIT)


class Front:
    def __init__(self, caddy, relay):
        self.caddy, self.relay, self.data, self.ca = caddy, relay, relay.data, None

    def url(self, path):
        return self.caddy.base + path

    def request(self, method, path, session=None, **kw):
        kw.setdefault("timeout", HTTP_TIMEOUT)
        return (session or requests).request(method, self.url(path), **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, token=None, headers=None, **kw):
        h = dict(headers or {})
        if token is not None:
            h.update(bearer(token))
        if body is not None:
            kw["json"] = body
        return self.request("POST", path, headers=h, **kw)


def test_the_shipped_caddyfile_validates(tmp_path):
    if not os.access(CADDY, os.X_OK):
        pytest.fail("caddy is not installed (scripts/install-deps.sh installs it)")
    proc = subprocess.run([CADDY, "validate", "--config", CADDYFILE, "--adapter", "caddyfile"], capture_output=True,
                          text=True, timeout=HTTP_TIMEOUT, env=caddy_env(tmp_path))
    assert proc.returncode == 0 and "Valid configuration" in proc.stdout + proc.stderr, proc.stderr[-2000:]


def test_stream_socket_uploads_and_client_addresses_through_caddy(relayd, tmp_path):
    if not os.access(CADDY, os.X_OK):
        pytest.fail("caddy is not installed (scripts/install-deps.sh installs it)")
    relay = relayd("--trusted-proxies", "127.0.0.1/32")
    caddy = Caddy(tmp_path, relay.port)
    front = Front(caddy, relay)
    relay.args += ["--public-url", caddy.base]
    try:
        user = relay.token("alice")
        assert assert_ok(front.get("/v1/me", headers=bearer(user)))["user"]["id"] == "alice"
        stream = requests.get(front.url("/v1/me/stream"), headers=dict(bearer(user), Accept="text/event-stream"),
                              stream=True, timeout=(5, 60))
        assert stream.status_code == 200
        lines = stream.iter_lines(decode_unicode=True)

        config = tmp_path / "bridge-config"
        env = clean_env({"RELAY_CONFIG_DIR": str(config)})
        pairing = subprocess.Popen([BRIDGE, "pair", "--server", front.url(""), "--name", "behind-caddy", "--json"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            code = json.loads(pairing.stdout.readline())["code"]
            assert_ok(front.post("/v1/me/pairing/claim", {"code": code}, token=user))
            assert pairing.wait(WAIT) == 0
        finally:
            if pairing.poll() is None:
                pairing.kill()
            pairing.communicate()
        with open(config / "bridge.json") as f:
            installation = json.load(f)["installation_id"]
        log = open(tmp_path / "bridge.log", "ab")
        bridge = subprocess.Popen([BRIDGE, "run", "--agent", "exec:cat"], stdout=log, stderr=subprocess.STDOUT,
                                  env=env)
        try:
            wait_until(lambda: "connected as" in (tmp_path / "bridge.log").read_text(), WAIT,
                       what="the bridge's socket through caddy")
            client = User(front, user, installation)
            session = client.create_session()
            started = time.monotonic()
            for line in lines:
                if line == "event: session_created":
                    break
            assert time.monotonic() - started < 5 * SLOW, "the event waited in a buffer"
            interaction = client.send(session, "through caddy")
            assert client.wait_reply(session, interaction)["text"] == "through caddy"
            r = front.request("POST", "/v1/me/attachments?name=big.bin", data=os.urandom(MAX_UPLOAD),
                              headers=dict(bearer(user), **{"Content-Type": "application/octet-stream"}), timeout=60)
            assert assert_ok(r)["size"] == MAX_UPLOAD
            r = front.request("POST", "/v1/me/attachments?name=bigger.bin", data=os.urandom(MAX_UPLOAD + 1),
                              headers=dict(bearer(user), **{"Content-Type": "application/octet-stream"}), timeout=60)
            assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large", r.status_code
        finally:
            bridge.send_signal(signal.SIGTERM)
            assert bridge.wait(WAIT) == 0
            stream.close()

        # Each client's own address: one that spends the pairing bucket does not block another.
        first, second = session_from("127.0.0.2"), session_from("127.0.0.3")
        body = {"connector_type": "exec", "host_label": "laptop"}
        statuses = [front.post("/v1/pairing/start", body, session=first).status_code for _ in range(25)]
        assert statuses[:20] == [200] * 20 and 429 in statuses[20:], statuses
        assert front.post("/v1/pairing/start", body, session=second).status_code == 200
        records = [r for r in relay.log_records() if r.get("route") == "/v1/pairing/start"]
        assert any(r.get("peer") == "127.0.0.2" and r.get("via") == "127.0.0.1" for r in records), records[-3:]
    finally:
        caddy.stop()
