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

The bus is the local one, or with RELAY_TEST_BUS=redis (`make test-e2e-cluster`) a
Redis database per data folder, on a redis-server started once per session
(tests/support/redis.sh) and emptied before each test uses it; `bus=` chooses
for one relayd ("local", "redis" or a location). Each relayd's bus location is
`relay.bus` (None for the local bus).
"""
import os
import shutil
import subprocess
import tempfile

import pytest

from relaylib import RELAYD, STORE, Relay, mint_token, sanitizer_report

PG_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "pg.sh")
REDIS_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "redis.sh")
# The bus of the suite's relayd: "local" (in-process) or "redis" (a Redis database per data folder).
BUS = os.environ.get("RELAY_TEST_BUS", "local")
# redis.sh's server has 16 databases: a test may start relayd on at most this many data folders.
REDIS_DATABASES = 16


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
    """A throw-away redis-server (tests/support/redis.sh) on a Unix socket in a folder of its own."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rl-redis-", dir="/tmp")
        proc = subprocess.run(["sh", REDIS_SH, "start", self.dir], capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            self.stop()
            raise AssertionError("cannot start redis-server: %s" % proc.stderr)

    def location(self, db=0):
        return "unix://%s/redis.sock?db=%d" % (self.dir, db)

    def flushdb(self, db):
        subprocess.run(["redis-cli", "-s", os.path.join(self.dir, "redis.sock"), "-n", str(db), "flushdb"],
                       check=True, capture_output=True, timeout=30)

    def stop(self):
        subprocess.run(["sh", REDIS_SH, "stop", self.dir], capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def _test_bus_redis():
    """The session's Redis for RELAY_TEST_BUS=redis, started on first use."""
    server = RedisServer()
    yield server
    server.stop()


@pytest.fixture(scope="session", autouse=True)
def _relayd_binary():
    assert os.access(RELAYD, os.X_OK), "relayd binary not found at %s (set RELAYD)" % RELAYD


@pytest.fixture
def relayd(tmp_path, request):
    started = []
    counter = [0]
    # One PostgreSQL database per data folder: a relayd started again on its folder finds its store.
    databases = {}
    # One Redis database per data folder, for the same reason, emptied when first given out.
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
            server = request.getfixturevalue("_test_bus_redis")
            if str(data_dir) not in bus_databases:
                db = len(bus_databases)
                assert db < REDIS_DATABASES, "more data folders than Redis databases in one test"
                server.flushdb(db)
                bus_databases[str(data_dir)] = server.location(db)
            return bus_databases[str(data_dir)]
        return bus

    def factory(*flags, env=None, data=None, start=True, ca=None, store=None, bus=None):
        counter[0] += 1
        data_dir = data or (tmp_path / ("data%d" % counter[0]))
        log_path = tmp_path / ("relayd%d.log" % counter[0])
        bus_location = bus_of(data_dir, bus)
        if bus_location is not None:
            # Through the environment, like the store, so that a --bus of the test's own wins.
            env = dict(env or {})
            env.setdefault("RELAY_BUS", bus_location)
        relay = Relay(data_dir, log_path, flags, env, ca=ca, store=store_of(data_dir, store))
        relay.bus = bus_location
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
