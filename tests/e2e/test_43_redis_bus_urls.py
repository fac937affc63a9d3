"""The three ways docs/operations.md ("Redis") names a Redis bus, each against
a real redis-server of this test's own: TCP with a %-encoded password, an ACL
user with a database number, and a Unix socket with its query. Each relayd
must work through that server and database (a user's events travel through
the bus and its keys land in the database named, nowhere else), and no
password may reach the log."""
import urllib.parse

import pytest

from bridgelib import Installation
from redislib import ACL_PASSWORD, PASSWORD, GuardedRedis
from relaylib import assert_ok
from streams import EventStream


@pytest.fixture
def redis_server():
    server = GuardedRedis()
    yield server
    server.stop()


def exercise(relay):
    """A user's event goes from a request through the bus to the user's stream."""
    inst = Installation(relay, relay.token("alice"))
    stream = EventStream(relay, inst.user)
    try:
        assert stream.status == 200
        session = inst.create_session("through the bus")
        stream.wait_for("session_created", lambda d: d.get("session_id") == session)
    finally:
        stream.close()
    assert_ok(inst.client("GET", "/v1/me"))


def check(relay, server, db):
    exercise(relay)
    sizes = server.sizes()
    assert sizes[db] > 0, sizes
    assert all(n == 0 for other, n in sizes.items() if other != db), sizes
    log = relay.log_text()
    for secret in (PASSWORD, ACL_PASSWORD, urllib.parse.quote(PASSWORD, safe=""),
                   urllib.parse.quote(ACL_PASSWORD, safe="")):
        assert secret not in log, "a password reached the log"


def test_tcp_with_a_percent_encoded_password(relayd, redis_server):
    # relayd --bus redis://:PASSWORD@10.0.0.5:6379/0      # TCP; the password may be %-encoded
    url = "redis://:%s@127.0.0.1:%d/0" % (urllib.parse.quote(PASSWORD, safe=""), redis_server.port)
    check(relayd("--bus", url), redis_server, 0)


def test_an_acl_user_and_a_database(relayd, redis_server):
    # relayd --bus redis://relay:PASSWORD@redis.internal/2  # an ACL user, database 2
    url = "redis://relay:%s@127.0.0.1:%d/2" % (urllib.parse.quote(ACL_PASSWORD, safe=""), redis_server.port)
    check(relayd("--bus", url), redis_server, 2)


def test_a_unix_socket_with_its_query(relayd, redis_server):
    # relayd --bus 'unix:///run/redis/redis.sock?db=0'       # a Unix socket (password=P, user=U)
    url = "unix://%s?db=5&user=relay&password=%s" % (redis_server.socket, urllib.parse.quote(ACL_PASSWORD, safe=""))
    check(relayd("--bus", url), redis_server, 5)
