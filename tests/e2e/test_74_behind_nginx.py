"""relayd behind Debian's nginx with contrib/nginx-relay.conf as shipped (issue 15): only the ports,
the upstream address and the certificate paths are put in. Through the proxy, over HTTPS: the event
stream arrives unbuffered, relay-bridge's WebSocket works, uploads up to the limit go through and
larger ones get relayd's own 413, plain HTTP is redirected, and rate limits count each real client
(relayd reads the address nginx forwards, because --trusted-proxies names nginx)."""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest
import requests

from relaylib import HTTP_TIMEOUT, SLOW, assert_ok, bearer, clean_env, free_port, session_from, wait_until
from test_07_tls import Pki
from test_50_bridge_support import BRIDGE, WAIT, User

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
MAX_UPLOAD = 26214400


def site_config(relay_port, http_port, https_port, cert, key):
    """contrib/nginx-relay.conf with this test's ports, upstream and certificate."""
    with open(os.path.join(REPO, "contrib", "nginx-relay.conf")) as f:
        text = f.read()
    replacements = [
        ("server 127.0.0.1:8080;", "server 127.0.0.1:%d;" % relay_port),
        ("    listen 80;\n", "    listen 127.0.0.1:%d;\n" % http_port),
        ("    listen [::]:80;\n", ""),
        ("    listen 443 ssl http2;\n", "    listen 127.0.0.1:%d ssl http2;\n" % https_port),
        ("    listen [::]:443 ssl http2;\n", ""),
        ("/etc/letsencrypt/live/relay.example.org/fullchain.pem", str(cert)),
        ("/etc/letsencrypt/live/relay.example.org/privkey.pem", str(key)),
    ]
    for old, new in replacements:
        assert old in text, "contrib/nginx-relay.conf no longer has %r" % old
        text = text.replace(old, new)
    return text


MAIN_CONF = """
worker_processes 1;
daemon off;
master_process on;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
user root root;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {dir}/tmp/body;
  proxy_temp_path {dir}/tmp/proxy;
  fastcgi_temp_path {dir}/tmp/fastcgi;
  uwsgi_temp_path {dir}/tmp/uwsgi;
  scgi_temp_path {dir}/tmp/scgi;
  include {dir}/relay.conf;
}}
"""


class Nginx:
    def __init__(self, workdir, relay_port, pki, https_port):
        self.dir = str(workdir / "nginx")
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        cert, key = pki.server(7, name="front")
        self.http_port, self.https_port = free_port(), https_port
        with open(os.path.join(self.dir, "relay.conf"), "w") as f:
            f.write(site_config(relay_port, self.http_port, self.https_port, cert, key))
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(MAIN_CONF.format(dir=self.dir))
        check = subprocess.run([NGINX, "-t", "-c", conf, "-p", self.dir + "/"], capture_output=True, text=True,
                               timeout=HTTP_TIMEOUT)
        assert check.returncode == 0, check.stderr
        self.proc = subprocess.Popen([NGINX, "-c", conf, "-p", self.dir + "/"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        self.base = "https://127.0.0.1:%d" % self.https_port
        self.ca = str(pki.ca)
        wait_until(self._up, WAIT, what="nginx to answer")

    def _up(self):
        try:
            return requests.get(self.base + "/healthz", verify=self.ca, timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(WAIT)


class Front:
    """The relay as seen through nginx, with the helpers of relaylib.Relay that the bridge tests use."""

    def __init__(self, nginx, relay):
        self.nginx, self.relay, self.data, self.ca = nginx, relay, relay.data, nginx.ca

    def url(self, path):
        return self.nginx.base + path

    def request(self, method, path, session=None, **kw):
        kw.setdefault("timeout", HTTP_TIMEOUT)
        kw.setdefault("verify", self.ca)
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

    def claim(self, user_token, code, **kw):
        return self.post("/v1/me/pairing/claim", {"code": code}, token=user_token, **kw)


@pytest.fixture
def front(relayd, tmp_path):
    if not os.access(NGINX, os.X_OK):
        pytest.fail("nginx is not installed (scripts/install-deps.sh installs it)")
    pki = Pki(tmp_path / "pki")
    https_port = free_port()
    # The public URL is nginx's: signed links and the bridge's server point there.
    relay = relayd("--trusted-proxies", "127.0.0.1/32", "--public-url", "https://127.0.0.1:%d" % https_port)
    nginx = Nginx(tmp_path, relay.port, pki, https_port)
    yield Front(nginx, relay)
    nginx.stop()


def test_stream_socket_and_uploads_through_nginx(front, tmp_path):
    user = front.relay.token("alice")
    assert assert_ok(front.get("/v1/me", headers=bearer(user)))["user"]["id"] == "alice"

    # Plain HTTP is sent to HTTPS.
    r = requests.get("http://127.0.0.1:%d/v1/me" % front.nginx.http_port, allow_redirects=False, timeout=HTTP_TIMEOUT)
    assert r.status_code == 301 and r.headers["Location"].startswith("https://"), r.headers

    # The event stream: an event reaches the client at once, not when a buffer fills.
    stream = requests.get(front.url("/v1/me/stream"), headers=dict(bearer(user), Accept="text/event-stream"),
                          stream=True, verify=front.ca, timeout=(5, 60))
    assert stream.status_code == 200 and stream.headers["Content-Type"].startswith("text/event-stream")
    lines = stream.iter_lines(decode_unicode=True)

    # relay-bridge pairs and holds its WebSocket through nginx (wss://), trusting the test CA.
    config = tmp_path / "bridge-config"
    env = clean_env({"RELAY_CONFIG_DIR": str(config), "CURL_CA_BUNDLE": front.ca})
    pairing = subprocess.Popen([BRIDGE, "pair", "--server", front.url(""), "--name", "behind-nginx", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        code = json.loads(pairing.stdout.readline())["code"]
        assert_ok(front.claim(user, code))
        assert pairing.wait(WAIT) == 0
    finally:
        if pairing.poll() is None:
            pairing.kill()
        pairing.communicate()
    with open(config / "bridge.json") as f:
        installation = json.load(f)["installation_id"]
    log = open(tmp_path / "bridge.log", "ab")
    bridge = subprocess.Popen([BRIDGE, "run", "--agent", "exec:cat"], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_until(lambda: "connected as" in (tmp_path / "bridge.log").read_text(), WAIT, what="the bridge's socket")
        client = User(front, user, installation)
        session = client.create_session()
        started = time.monotonic()
        for line in lines:
            if line == "event: session_created":
                break
        assert time.monotonic() - started < 5 * SLOW, "the event waited in a buffer"
        interaction = client.send(session, "through the proxy")
        assert client.wait_reply(session, interaction)["text"] == "through the proxy"

        # Uploads: the largest allowed goes through; a larger one is refused by nginx, in relayd's envelope.
        body = os.urandom(MAX_UPLOAD)
        r = front.request("POST", "/v1/me/attachments?name=big.bin", data=body,
                          headers=dict(bearer(user), **{"Content-Type": "application/octet-stream"}), timeout=60)
        uploaded = assert_ok(r)
        assert uploaded["size"] == MAX_UPLOAD
        r = front.request("POST", "/v1/me/attachments?name=bigger.bin", data=body + b"x" * 100000,
                          headers=dict(bearer(user), **{"Content-Type": "application/octet-stream"}), timeout=60)
        assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large", r.text[:300]
    finally:
        bridge.send_signal(signal.SIGTERM)
        assert bridge.wait(WAIT) == 0
        stream.close()


def test_rate_limits_count_each_real_client_behind_nginx(front):
    """The pairing bucket is per client address: one client that spends it does not block another."""
    first, second = session_from("127.0.0.2"), session_from("127.0.0.3")
    for s in (first, second):
        s.mount("https://", s.get_adapter("http://"))
    body = {"connector_type": "exec", "host_label": "laptop"}
    statuses = [front.post("/v1/pairing/start", body, session=first).status_code for _ in range(25)]
    assert statuses[:20] == [200] * 20 and 429 in statuses[20:], statuses
    assert front.post("/v1/pairing/start", body, session=second).status_code == 200
    # relayd logged the real client and the proxy it came through.
    records = [r for r in front.relay.log_records() if r.get("route") == "/v1/pairing/start"]
    assert any(r.get("peer") == "127.0.0.2" and r.get("via") == "127.0.0.1" for r in records), records[-3:]
    assert any(r.get("peer") == "127.0.0.3" and r.get("status") == 200 for r in records)
