"""Shared helpers for the relayd end-to-end tests.

Everything here talks to a real relayd over real loopback sockets.  Every
network call and every wait is bounded; durations scale with SLOW so that the
same suite runs against the AddressSanitizer build (RL_SANITIZED=1).
"""
import base64
import json
import os
import re
import select
import signal
import socket
import sqlite3
import subprocess
import time

import requests
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict

RELAYD = os.environ.get("RELAYD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "relayd"))
# The store of the suite's relayd: "sqlite" (the data folder's relay.db) or "postgres" (a fresh
# database per data folder, on a server the session starts: conftest.py, tests/support/pg.sh).
STORE = os.environ.get("RELAY_TEST_STORE", "sqlite")
SANITIZED = os.environ.get("RL_SANITIZED") == "1"
SLOW = 3 if SANITIZED else 1
# Timeout of a single HTTP call, and of waiting for a process to start or stop.
HTTP_TIMEOUT = 10 * SLOW
START_TIMEOUT = 15 * SLOW
STOP_TIMEOUT = 10

REQUEST_ID_RE = re.compile(r"^req_[0-9a-f]{16}$")
TRACEPARENT_RE = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
BRIDGE_TOKEN_RE = re.compile(r"^(inst_[0-9A-Za-z]{16}):s_live_([0-9A-Za-z]{32,})$")
CODE_RE = re.compile(r"^[A-Z]{7}$")

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def free_port(host="127.0.0.1"):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def b64url(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def random_base62(n):
    raw = os.urandom(n)
    return "".join(BASE62[b % 62] for b in raw)


def fake_bridge_token(inst=None, secret=None):
    """A well-formed bridge token that no relay has issued."""
    inst = inst or "inst_" + random_base62(16)
    secret = secret or random_base62(40)
    return "%s:s_live_%s" % (inst, secret)


def bearer(token):
    return {"Authorization": "Bearer " + token}


class SourceAddressAdapter(HTTPAdapter):
    """Makes requests leave from a chosen local address (e.g. 127.0.0.2)."""

    def __init__(self, source_ip, **kw):
        self._source = (source_ip, 0)
        super().__init__(**kw)

    def init_poolmanager(self, *args, **kw):
        kw["source_address"] = self._source
        return super().init_poolmanager(*args, **kw)


def session_from(ip):
    s = requests.Session()
    adapter = SourceAddressAdapter(ip)
    s.mount("http://", adapter)
    return s


def clean_env(extra=None):
    """The test's environment without RELAY_* settings of the caller, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
    env.update(extra or {})
    return env


def mint_token(data_dir, user, ttl=None, store=None):
    """`relayd token USER --data DIR [--store URL]`: the token is alone on stdout's last line."""
    argv = [RELAYD, "token", user, "--data", str(data_dir)]
    if ttl is not None:
        argv += ["--ttl", ttl]
    if store is not None:
        argv += ["--store", store]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=START_TIMEOUT, env=clean_env())
    assert proc.returncode == 0, "relayd token failed: %r %r" % (proc.stdout, proc.stderr)
    assert sanitizer_report(proc.stderr) is None, proc.stderr[-6000:]
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, "relayd token printed nothing"
    token = lines[-1].strip()
    assert token.count(".") == 2, "not a JWS compact token: %r" % token
    return token


# Markers of a sanitizer report on stderr.  UBSan reports and goes on with
# exit status 0 unless built to halt, so the log is checked as well.
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: AddressSanitizer")


def sanitizer_report(text):
    """The first sanitizer report line in `text`, or None."""
    for line in text.splitlines():
        if any(marker in line for marker in SANITIZER_MARKERS):
            return line
    return None


def run_relayd(argv, env=None, timeout=None):
    """Runs relayd to completion (for command-line checks)."""
    full_env = clean_env(env)
    proc = subprocess.run([RELAYD] + list(argv), capture_output=True, text=True,
                          timeout=timeout or START_TIMEOUT, env=full_env)
    report = sanitizer_report(proc.stderr)
    assert report is None, "sanitizer report from relayd %r: %s\n%s" % (argv, report, proc.stderr[-6000:])
    return proc


class Relay:
    """One relayd process on a loopback port with its own data folder.

    start() may be called again after stop() or kill9() to restart on the
    same data folder (a fresh port each time).  stderr of every run goes to
    the same log file, appended.
    """

    def __init__(self, data_dir, log_path, args=(), env=None, ca=None, store=None, testclock=False):
        self.data = data_dir
        # relayd-testclock (the tests' build beside relayd): advance_clock moves its wall clock forward.
        self.binary = os.path.join(os.path.dirname(RELAYD), "relayd-testclock") if testclock else RELAYD
        self.clock_port = None
        # A postgres:// URL, or None for the data folder's SQLite store.
        self.store = store
        self.log_path = log_path
        self.args = list(args)
        self.env = dict(env or {})
        # Given through the environment, so that tests which start relayd with argv of their own keep it.
        if store is not None:
            self.env.setdefault("RELAY_STORE", store)
        # With --tls-cert the relay speaks HTTPS; `ca` is the PEM file requests trust for it.
        self.scheme = "https" if "--tls-cert" in self.args else "http"
        self.ca = str(ca) if ca is not None else None
        self.proc = None
        self.port = None
        # A node behind a balancer keeps its port across restarts (tests/e2e/cluster.py).
        self.fixed_port = None
        self.exit_codes = []

    # -- process control -------------------------------------------------
    def start(self, expect_ready=True):
        assert self.proc is None, "relayd already running"
        full_env = clean_env(self.env)
        last_error = None
        for _attempt in range(3):
            self.port = self.fixed_port or free_port()
            argv = [self.binary, "--listen", "127.0.0.1:%d" % self.port, "--data", str(self.data)]
            if self.binary != RELAYD:
                self.clock_port = self.clock_port or free_port()
                argv += ["--metrics-listen", "127.0.0.1:%d" % self.clock_port]
            argv += self.args
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=log, env=full_env)
            if not expect_ready:
                return self
            try:
                self._wait_ready()
                return self
            except _StartFailed as e:
                # Another process may have taken the port between our probe
                # and relayd's bind: try again on a fresh port.
                last_error = e
                self.proc = None
        raise AssertionError("relayd did not start: %s\n--- log ---\n%s"
                             % (last_error, self.log_text()[-4000:]))

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                raise _StartFailed("exited with status %d" % rc)
            try:
                r = requests.get(self.url("/healthz"), timeout=1 * SLOW, verify=self.ca or True)
                if r.status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
        self.proc.kill()
        self.proc.wait(STOP_TIMEOUT)
        raise _StartFailed("/healthz did not answer within %ss" % START_TIMEOUT)

    def stop(self):
        """SIGTERM, wait, and return the exit status (killing it if hung)."""
        assert self.proc is not None, "relayd not running"
        proc, self.proc = self.proc, None
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(STOP_TIMEOUT * SLOW)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT)
            raise AssertionError("relayd did not stop within %ss of SIGTERM" % (STOP_TIMEOUT * SLOW))
        self.exit_codes.append(rc)
        return rc

    def stop_ok(self):
        rc = self.stop()
        assert rc == 0, "relayd exited with status %d\n--- log ---\n%s" % (rc, self.log_text()[-6000:])

    def kill9(self):
        assert self.proc is not None, "relayd not running"
        proc, self.proc = self.proc, None
        proc.kill()
        proc.wait(STOP_TIMEOUT)

    def wait_exit(self, timeout):
        """Waits for relayd to exit on its own; returns the exit status."""
        assert self.proc is not None, "relayd not running"
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT)
            self.proc = None
            raise AssertionError("relayd still running after %ss" % timeout)
        self.proc = None
        self.exit_codes.append(rc)
        return rc

    def restart(self):
        self.stop_ok()
        return self.start()

    @property
    def running(self):
        return self.proc is not None

    # -- observation -----------------------------------------------------
    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_records(self):
        out = []
        for line in self.log_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def db_path(self):
        return os.path.join(str(self.data), "relay.db")

    def query(self, sql, params=()):
        """Reads the store through a read-only connection: SQLite, or PostgreSQL with the same SQL."""
        if self.store is not None:
            return postgres_query(self.store, sql, params)
        uri = "file:%s?mode=ro" % self.db_path()
        conn = sqlite3.connect(uri, uri=True, timeout=HTTP_TIMEOUT)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def store_dump(self):
        """Everything the store holds, as {where: bytes}: the SQLite files, or every PostgreSQL table as COPY text."""
        if self.store is None:
            out = {}
            for suffix in ("", "-wal"):
                path = self.db_path() + suffix
                if os.path.exists(path):
                    with open(path, "rb") as f:
                        out[path] = f.read()
            return out
        import io
        import psycopg2

        conn = psycopg2.connect(self.store, connect_timeout=HTTP_TIMEOUT)
        try:
            conn.set_session(readonly=True, autocommit=True)
            with conn.cursor() as cur:
                cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
                out = {}
                for (table,) in cur.fetchall():
                    buf = io.BytesIO()
                    cur.copy_expert('COPY "%s" TO STDOUT' % table, buf)
                    out["postgres table %s" % table] = buf.getvalue()
        finally:
            conn.close()
        return out

    def hold_store(self):
        """Stalls the store from another connection, as a long transaction of another process would:
        SQLite's write lock, or every PostgreSQL table locked. Returns an object whose release() ends it."""
        return _StoreHold(self)

    def count(self, table):
        return self.query("SELECT COUNT(*) FROM %s" % table)[0][0]

    # -- HTTP ------------------------------------------------------------
    def url(self, path):
        return "%s://127.0.0.1:%d%s" % (self.scheme, self.port, path)

    def request(self, method, path, session=None, **kw):
        kw.setdefault("timeout", HTTP_TIMEOUT)
        kw.setdefault("verify", self.ca or True)
        caller = session or requests
        return caller.request(method, self.url(path), **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def advance_clock(self, ms):
        """Moves a relayd-testclock's wall clock ms forward: what waits on time (a key's lifetime, the replay
        window) sees that much more of it at once. Returns the relay's new now, in ms."""
        assert self.binary != RELAYD, "advance_clock needs relayd(..., testclock=True)"
        r = requests.post("http://127.0.0.1:%d/test/clock/%d" % (self.clock_port, ms), timeout=5 * SLOW)
        assert r.status_code == 200, (r.status_code, r.text)
        return r.json()["result"]["now_ms"]

    def post(self, path, body=None, token=None, headers=None, **kw):
        h = dict(headers or {})
        if token is not None:
            h.update(bearer(token))
        if body is not None:
            kw["json"] = body
        return self.request("POST", path, headers=h, **kw)

    def token(self, user, ttl=None):
        return mint_token(self.data, user, ttl, store=self.store)

    # -- the pairing flow --------------------------------------------------
    def pairing_start(self, connector_type="test-connector", host_label="test-host", **kw):
        r = self.post("/v1/pairing/start", {"connector_type": connector_type, "host_label": host_label}, **kw)
        assert r.status_code == 200, r.text
        return r.json()["result"]

    def poll(self, poll_token, **kw):
        return self.post("/v1/pairing/poll", {"poll_token": poll_token}, **kw)

    def claim(self, user_token, code, **kw):
        return self.post("/v1/me/pairing/claim", {"code": code}, token=user_token, **kw)

    def pair(self, user_token, connector_type="test-connector", host_label="test-host"):
        """start, claim, poll; returns (installation_id, bridge_token, start_result)."""
        started = self.pairing_start(connector_type, host_label)
        r = self.claim(user_token, started["code"])
        assert r.status_code == 200, r.text
        r = self.poll(started["poll_token"])
        assert r.status_code == 200, r.text
        result = r.json()["result"]
        assert result["status"] == "paired", result
        return result["installation_id"], result["token"], started

    def set_manifest(self, bridge_token, body=None, **kw):
        body = body or {"agent": {"name": "a", "version": "1"}, "tools": [{"name": "bash"}]}
        return self.post("/v1/bridge/setManifest", body, token=bridge_token, **kw)


class _StartFailed(Exception):
    pass


class _StoreHold:
    def __init__(self, relay):
        if relay.store is None or relay.store.startswith("sqlite:"):
            path = relay.db_path() if relay.store is None else relay.store[len("sqlite:"):]
            self.conn = sqlite3.connect(path, timeout=10, isolation_level=None)
            self.conn.execute("BEGIN IMMEDIATE")
            return
        import psycopg2

        self.conn = psycopg2.connect(relay.store, connect_timeout=HTTP_TIMEOUT)
        with self.conn.cursor() as cur:
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
            tables = ", ".join('"%s"' % name for (name,) in cur.fetchall())
            cur.execute("LOCK TABLE %s IN ACCESS EXCLUSIVE MODE" % tables)

    def release(self):
        if isinstance(self.conn, sqlite3.Connection):
            self.conn.execute("ROLLBACK")
        else:
            self.conn.rollback()
        self.conn.close()


def postgres_query(url, sql, params=()):
    """Runs a query of the suite (SQLite's `?` placeholders) on PostgreSQL; rows as tuples, BYTEA as bytes."""
    import psycopg2

    if params:
        sql = sql.replace("%", "%%").replace("?", "%s")
    conn = psycopg2.connect(url, connect_timeout=HTTP_TIMEOUT)
    try:
        conn.set_session(readonly=True, autocommit=True)
        with conn.cursor() as cur:
            cur.execute(sql, tuple(params) if params else None)
            rows = cur.fetchall()
    finally:
        conn.close()
    return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows]


def paced(send, attempts=50):
    """send() again after the bucket's retry_after_ms while it answers 429, as a patient client does: for tests
    whose own calls share the user's bucket with the real terminal or bridge they drive."""
    for _ in range(attempts):
        r = send()
        if r.status_code != 429:
            return r
        time.sleep(r.json()["error"]["retry_after_ms"] / 1000.0 + 0.05)
    return r


# -- assertions ---------------------------------------------------------------

def assert_ok(r, status=200):
    assert r.status_code == status, "expected %d, got %d: %s" % (status, r.status_code, r.text)
    body = r.json()
    assert body["ok"] is True, body
    assert isinstance(body["result"], dict), body
    return body["result"]


def assert_error(r, status, code):
    assert r.status_code == status, "expected %d %s, got %d: %s" % (status, code, r.status_code, r.text)
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    body = r.json()
    assert body["ok"] is False, body
    assert "result" not in body, body
    err = body["error"]
    assert err["code"] == code, "expected code %s, got %s" % (code, body)
    if "message" in err:
        assert isinstance(err["message"], str)
    return err


def assert_correlation_headers(r):
    rid = r.headers.get("X-Request-ID")
    assert rid is not None and REQUEST_ID_RE.match(rid), "X-Request-ID %r" % rid
    tp = r.headers.get("traceparent")
    assert tp is not None and TRACEPARENT_RE.match(tp), "traceparent %r" % tp


def validation_errors(r):
    err = assert_error(r, 400, "invalid_request")
    errors = err.get("errors")
    assert isinstance(errors, list) and errors, err
    for e in errors:
        assert set(("path", "code", "message")) <= set(e), e
        assert isinstance(e["path"], str) and isinstance(e["code"], str) and isinstance(e["message"], str), e
    return errors


def find_error(errors, path):
    hits = [e for e in errors if e["path"] == path]
    assert hits, "no error for path %r in %r" % (path, errors)
    return hits[0]


def metric(metrics_port, name):
    """An unlabelled counter or gauge of the /metrics a relayd serves on its --metrics-listen port."""
    text = requests.get("http://127.0.0.1:%d/metrics" % metrics_port, timeout=HTTP_TIMEOUT).text
    values = [float(line.split()[1]) for line in text.splitlines() if line.startswith(name + " ")]
    assert len(values) == 1, "no single %s in the metrics:\n%s" % (name, text)
    return values[0]


def wait_until(predicate, timeout, interval=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(interval)


# -- raw HTTP for oversize bodies -------------------------------------------------

class RawResponse:
    def __init__(self, status, headers, body):
        self.status_code = status
        self.headers = CaseInsensitiveDict(headers)
        self.content = body
        self.text = body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.text)


def raw_exchange(port, head, body_chunks=(), timeout=HTTP_TIMEOUT, source_ip=None):
    """Sends a request head, then body chunks until the server answers.

    Returns a RawResponse, or None when the server closed the connection
    without an answer.  Stops sending as soon as response bytes are readable,
    so a server that answers 413 before reading the whole body is observed
    as such instead of as a broken pipe.
    """
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                    source_address=(source_ip, 0) if source_ip else None)
    try:
        sock.sendall(head)
        for chunk in body_chunks:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
        return _read_response(sock, timeout)
    finally:
        sock.close()


def _read_response(sock, timeout):
    deadline = time.monotonic() + timeout
    buf = b""

    def recv_more():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError("no complete response within %ss" % timeout)
        sock.settimeout(remaining)
        try:
            return sock.recv(65536)
        except ConnectionResetError:
            return b""

    while b"\r\n\r\n" not in buf:
        chunk = recv_more()
        if not chunk:
            return None if not buf else _fail("truncated head: %r" % buf)
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip()] = value.strip()
    length = int(headers.get("Content-Length", headers.get("content-length", "0")) or 0)
    if any(k.lower() == "transfer-encoding" for k in headers):
        raise AssertionError("chunked responses not expected here")
    while len(rest) < length:
        chunk = recv_more()
        if not chunk:
            break
        rest += chunk
    return RawResponse(status, headers, rest[:length])


def _fail(msg):
    raise AssertionError(msg)


def post_head(path, length=None, chunked=False, extra=None):
    lines = ["POST %s HTTP/1.1" % path, "Host: 127.0.0.1", "Content-Type: application/json"]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    else:
        lines.append("Content-Length: %d" % length)
    for k, v in (extra or {}).items():
        lines.append("%s: %s" % (k, v))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunks_of(data, size=65536):
    for i in range(0, len(data), size):
        yield data[i:i + size]
