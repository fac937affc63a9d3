"""Fixtures of the relayd end-to-end suite.

`relayd(*flags, env=None, data=None, start=True, store=None)` starts the real
binary on a free loopback port with a fresh data folder and returns a
relaylib.Relay. At teardown every relayd still running gets SIGTERM and must
exit with status 0, and no relayd's stderr may hold a sanitizer report (ASan
makes the status nonzero; UBSan may only print).

The store is the data folder's SQLite database, or with RELAY_TEST_STORE=postgres
(`make test-e2e-postgres`) a fresh PostgreSQL database per data folder, on a
server started once per session (`postgres`, tests/support/pg.sh) and removed
at its end; `store=` chooses for one relayd ("sqlite", "postgres" or a URL).

`redis_bus` gives a test Redis for `--bus`: a redis-server started once per
session on a Unix socket in a temporary folder (tests/support/redis.sh) and
stopped at its end; `redis_bus.url()` is a `unix://...?db=N` location on a
logical database of its own, emptied when handed out, so that tests never see
each other's events, presences, buckets or leases.

The bus of every relayd is the local one, or with RELAY_TEST_BUS=redis (`make
test-e2e-cluster`) a Redis database per data folder from `redis_bus` (emptied
when first given out, so a relayd started again on its folder finds its bus);
`bus=` chooses for one relayd ("local", "redis" or a location), and
`relay.bus` is its location (None for the local bus).
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from relaylib import RELAYD, STORE, Relay, mint_token, sanitizer_report


def pytest_configure(config):
    # A coroutine never awaited is a frame never sent: a test that checks less than it says. Its
    # RuntimeWarning fails the test, also when it is raised as the coroutine is collected (pytest
    # then reports it as an unraisable exception).
    config.addinivalue_line("filterwarnings", "error::RuntimeWarning")
    config.addinivalue_line("filterwarnings",
                            "error:Exception ignored in. <coroutine:pytest.PytestUnraisableExceptionWarning")

PG_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "pg.sh")
REDIS_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "redis.sh")
# The bus of the suite's relayd: "local" (in-process) or "redis" (a Redis database per data folder).
BUS = os.environ.get("RELAY_TEST_BUS", "local")


class PostgresServer:
    """A throw-away PostgreSQL server (tests/support/pg.sh) on a Unix socket in a folder of its own."""

    def __init__(self):
        # Not under pytest's tmp_path: the server runs as an unprivileged user that must reach the folder.
        self.dir = tempfile.mkdtemp(prefix="rl-pg-", dir="/tmp")
        proc = subprocess.run([PG_SH, "start", self.dir], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            subprocess.run([PG_SH, "stop", self.dir], capture_output=True, timeout=120)
            raise AssertionError("cannot start PostgreSQL: %s" % proc.stderr)
        self.count = 0

    def _admin(self, sql):
        import psycopg2

        conn = psycopg2.connect(host=self.dir, user="relay", dbname="postgres", connect_timeout=10)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(sql)
        finally:
            conn.close()

    def database(self):
        """A new empty database; its URL."""
        self.count += 1
        name = "relay_%d" % self.count
        self._admin('CREATE DATABASE "%s"' % name)
        return "postgres://relay@/%s?host=%s" % (name, self.dir)

    def drop(self, url):
        name = url.split("/")[3].split("?")[0]
        self._admin('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)

    def stop(self):
        subprocess.run([PG_SH, "stop", self.dir], capture_output=True, timeout=120)


@pytest.fixture(scope="session")
def postgres():
    """The session's PostgreSQL server, started on first use."""
    server = PostgresServer()
    yield server
    server.stop()


class RedisServer:
    """A throw-away redis-server (tests/support/redis.sh): a Unix socket in a folder of its own, no TCP port,
    no persistence, 16 logical databases."""

    DATABASES = 16

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rl-redis-", dir="/tmp")
        self.socket = os.path.join(self.dir, "redis.sock")
        self.start()
        # Database 0 is left alone: a test that forgets `?db=` then cannot meet another test's keys.
        self.next_db = 1

    def _sh(self, *args):
        proc = subprocess.run([REDIS_SH] + list(args), capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise AssertionError("redis.sh %s failed: %s" % (" ".join(args), proc.stderr))

    def start(self):
        """Starts the server (again, after stop()) on the same socket; its data is gone."""
        self._sh("start", self.dir)

    def stop(self):
        """SIGTERM, without saving; waits for the process to go."""
        self._sh("stop", self.dir)

    def kill(self):
        """SIGKILL, as a crash would; start() brings a new, empty server."""
        try:
            with open(os.path.join(self.dir, "redis.pid")) as f:
                pid = int(f.read().strip())
        except FileNotFoundError:
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)
        for name in ("redis.pid", "redis.sock"):
            try:
                os.unlink(os.path.join(self.dir, name))
            except FileNotFoundError:
                pass

    def cli(self, *args, db=0):
        """redis-cli on database `db`; its stdout (raw replies, one per line)."""
        proc = subprocess.run(["redis-cli", "-s", self.socket, "-n", str(db), "--raw"] + [str(a) for a in args],
                              capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise AssertionError("redis-cli %r failed: %s" % (args, proc.stderr))
        return proc.stdout

    def database(self):
        """The number of an emptied logical database, taken round robin from 1 to 15."""
        db = self.next_db
        self.next_db = self.next_db % (self.DATABASES - 1) + 1
        self.cli("FLUSHDB", db=db)
        return db

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisBus:
    """One test's view of the session's Redis: `url()` hands out a location on a fresh database per call."""

    def __init__(self, server):
        self.server = server
        self.given = []

    def url(self):
        """A new `unix:///.../redis.sock?db=N` for `--bus`, on an emptied database no other URL of this test
        uses; nodes that must form one relay share one URL."""
        if len(self.given) >= RedisServer.DATABASES - 1:
            raise AssertionError("a test may use at most %d Redis databases" % (RedisServer.DATABASES - 1))
        db = self.server.database()
        self.given.append(db)
        return "unix://%s?db=%d" % (self.server.socket, db)

    @staticmethod
    def db_of(url):
        return int(url.rsplit("db=", 1)[1].split("&")[0])

    def cli(self, url, *args):
        """redis-cli on the database of `url`."""
        return self.server.cli(*args, db=self.db_of(url))


@pytest.fixture(scope="session")
def redis_server():
    """The session's redis-server, started on first use and stopped at the end."""
    server = RedisServer()
    yield server
    server.close()


@pytest.fixture
def redis_bus(redis_server):
    """Redis for `--bus` in one test: `redis_bus.url()` is a location on a database of its own;
    `redis_bus.server` stops, kills and starts the shared server (tests of Redis outages)."""
    bus = RedisBus(redis_server)
    yield bus
    # A test that stopped the server gives the next test a running one.
    if not os.path.exists(redis_server.socket):
        redis_server.start()


@pytest.fixture(scope="session", autouse=True)
def _relayd_binary():
    assert os.access(RELAYD, os.X_OK), "relayd binary not found at %s (set RELAYD)" % RELAYD


@pytest.fixture
def relayd(tmp_path, request):
    started = []
    counter = [0]
    # One PostgreSQL database per data folder: a relayd started again on its folder finds its store.
    databases = {}
    # One Redis database per data folder, for the same reason.
    bus_databases = {}

    def store_of(data_dir, store):
        store = store or STORE
        if store == "sqlite":
            return None
        if store == "postgres":
            if str(data_dir) not in databases:
                databases[str(data_dir)] = request.getfixturevalue("postgres").database()
            return databases[str(data_dir)]
        return store

    def bus_of(data_dir, bus):
        bus = bus or BUS
        if bus == "local":
            return None
        if bus == "redis":
            if str(data_dir) not in bus_databases:
                bus_databases[str(data_dir)] = request.getfixturevalue("redis_bus").url()
            return bus_databases[str(data_dir)]
        return bus

    def factory(*flags, env=None, data=None, start=True, ca=None, store=None, bus=None, testclock=False):
        counter[0] += 1
        data_dir = data or (tmp_path / ("data%d" % counter[0]))
        log_path = tmp_path / ("relayd%d.log" % counter[0])
        # A relayd given a --bus of the test's own (a cluster's nodes) keeps it, and takes no database here.
        bus_location = None if "--bus" in flags else bus_of(data_dir, bus)
        if bus_location is not None:
            # Through the environment, like the store, so that a --bus of the test's own wins.
            env = dict(env or {})
            env.setdefault("RELAY_BUS", bus_location)
        relay = Relay(data_dir, log_path, flags, env, ca=ca, store=store_of(data_dir, store), testclock=testclock)
        relay.bus = flags[list(flags).index("--bus") + 1] if "--bus" in flags else bus_location
        started.append(relay)
        if start:
            relay.start()
        return relay

    yield factory

    failures = []
    for relay in started:
        if relay.running:
            rc = relay.stop()
            if rc != 0:
                failures.append("relayd on %s exited with status %d\n%s"
                                % (relay.data, rc, relay.log_text()[-6000:]))
        report = sanitizer_report(relay.log_text())
        if report is not None:
            failures.append("sanitizer report from relayd on %s: %s\n%s"
                            % (relay.data, report, relay.log_text()[-6000:]))
    for url in databases.values():
        request.getfixturevalue("postgres").drop(url)
    assert not failures, "\n".join(failures)


@pytest.fixture
def relay(relayd):
    """A relayd with default settings."""
    return relayd()


@pytest.fixture
def user_token(relay):
    """A token for user "alice" from the embedded issuer of `relay`."""
    return mint_token(relay.data, "alice")
