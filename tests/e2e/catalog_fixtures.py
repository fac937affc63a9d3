"""Helpers and fixtures of the catalog end-to-end tests (test_20, test_21).

They start the real catalogd on a free loopback port with a temporary data
folder, and run the real `catalog` client against it. Every network call and
every wait is bounded, and scaled by SLOW under the sanitizer build.

Binaries: CATALOGD and CATALOG_CLI, or else the `catalogd` and `catalog` next
to RELAYD (so that `make test-asan` tests the sanitizer build of all three),
or else build/ at the top of the repository.
"""
import json
import os
import re
import select
import signal
import subprocess
import time

import pytest
import requests

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SOURCE = os.path.join(REPO, "catalog")


def _binary(env_name, name):
    if os.environ.get(env_name):
        return os.environ[env_name]
    if os.environ.get("RELAYD"):
        return os.path.join(os.path.dirname(os.environ["RELAYD"]), name)
    return os.path.join(REPO, "build", name)


CATALOGD = _binary("CATALOGD", "catalogd")
CATALOG_CLI = _binary("CATALOG_CLI", "catalog")
SANITIZED = os.environ.get("RL_SANITIZED") == "1"
SLOW = 3 if SANITIZED else 1
HTTP_TIMEOUT = 10 * SLOW
START_TIMEOUT = 20 * SLOW
STOP_TIMEOUT = 10 * SLOW
CACHE_CONTROL = "public, max-age=3600"
TYPES = ["evals", "models", "tools", "leaderboards", "organizations", "people", "capabilities", "papers"]
SINGULAR = {"evals": "eval", "models": "model", "tools": "tool", "leaderboards": "leaderboard",
            "organizations": "organization", "people": "person", "capabilities": "capability", "papers": "paper"}


class Catalogd:
    """One catalogd process. start() waits for its "listening" log line."""

    def __init__(self, data, log_path, args=(), env=None):
        self.data = str(data)
        self.log_path = str(log_path)
        self.args = list(args)
        self.env = dict(os.environ, **(env or {}))
        self.proc = None
        self.base = None

    def start(self):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([CATALOGD, "--listen", "127.0.0.1:0", "--data", self.data] + self.args,
                                     stdout=subprocess.DEVNULL, stderr=self.log, env=self.env)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            for line in self.log_lines():
                if line.get("msg") == "listening":
                    scheme = "https://" if "--tls-cert" in self.args else "http://"
                    self.base = scheme + line["address"]
                    return self
            if self.proc.poll() is not None:
                raise AssertionError("catalogd exited with %d:\n%s" % (self.proc.returncode, self.log_text()))
            time.sleep(0.02)
        raise AssertionError("catalogd did not start in time:\n" + self.log_text())

    def stop(self):
        """SIGTERM, then the exit status (0 expected; a sanitizer report makes it nonzero)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT)
            return -9
        finally:
            self.log.close()

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log_lines(self):
        lines = []
        for raw in self.log_text().splitlines():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                pass
        return lines

    def get(self, path, **kwargs):
        kwargs.setdefault("timeout", HTTP_TIMEOUT)
        return requests.get(self.base + path, **kwargs)


@pytest.fixture(scope="session", autouse=True)
def _catalog_binaries():
    assert os.access(CATALOGD, os.X_OK), "catalogd not found at %s (set CATALOGD)" % CATALOGD
    assert os.access(CATALOG_CLI, os.X_OK), "catalog not found at %s (set CATALOG_CLI)" % CATALOG_CLI


@pytest.fixture
def catalogd_factory(tmp_path):
    """catalogd_factory(*args, data=None, env=None, start=True) -> Catalogd; all are stopped at teardown."""
    started = []

    def factory(*args, data=None, env=None, start=True):
        n = len(started) + 1
        server = Catalogd(data or tmp_path / ("data%d" % n), tmp_path / ("catalogd%d.log" % n), args, env)
        started.append(server)
        return server.start() if start else server

    yield factory
    failures = ["catalogd exited with %d\n%s" % (rc, s.log_text()[-4000:])
                for s in started for rc in [s.stop()] if rc != 0]
    assert not failures, "\n".join(failures)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    """One catalogd on the bundled dataset, shared by a test module (the catalog is read-only)."""
    tmp = tmp_path_factory.mktemp("catalog")
    server = Catalogd(tmp / "data", tmp / "catalogd.log").start()
    yield server
    rc = server.stop()
    assert rc == 0, "catalogd exited with %d\n%s" % (rc, server.log_text()[-4000:])


def error_of(response, status, code):
    """Checks the catalog's error envelope and returns its message."""
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["ok"] is False
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]["message"]


def source_sections():
    """Every section of every source file: {"models": [...], "sources": [...], ...}."""
    sections = {}
    for root, _dirs, files in os.walk(SOURCE):
        for name in sorted(files):
            if name.endswith(".json"):
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    for key, items in json.load(f).items():
                        sections.setdefault(key, []).extend(items)
    return sections


def hidden_entities():
    """[(type, slug, title)] of every entity from a hidden source, read from the source files."""
    sections = source_sections()
    hidden = {s["id"] for s in sections["sources"] if s["hidden"]}
    return [(t, e["slug"], e["title"]) for t in TYPES for e in sections.get(t, []) if e.get("source") in hidden]


WORD_RE = re.compile(r"[A-Za-z0-9]+")
