"""SIGTERM stops relayd gracefully (issue 15): bridge sockets close with 1012 (service restart), and
relay-bridge reconnects at once on it instead of backing off; relayd exits 0 well before
--shutdown-timeout when nothing else is under way."""
import base64
import os
import socket
import time

from bridgelib import WAIT, Installation
from relaylib import SLOW, STOP_TIMEOUT
from test_50_bridge_support import paired, restart_on_same_port


def test_bridge_sockets_close_with_1012_and_relayd_exits_promptly(relayd):
    relay = relayd("--shutdown-timeout", "20s")
    inst = Installation(relay, relay.token("alice"))
    sock = inst.connect()
    started = time.monotonic()
    rc = relay.stop()
    took = time.monotonic() - started
    assert rc == 0, relay.log_text()[-3000:]
    sock.wait_closed(WAIT)
    assert sock.close_code == 1012, sock.close_code
    # It waited for the close handshake, not for the 20 s deadline.
    assert took < 5 * SLOW, took
    assert "--shutdown-timeout" not in relay.log_text()


def test_relay_bridge_reconnects_at_once_on_1012(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start("exec:cat")
    try:
        session = user.create_session()
        first = user.send(session, "before")
        assert user.wait_reply(session, first)["text"] == "before"
        assert relay.stop() == 0
        bridge.wait_log("socket closed (1012 relay restarting)")
        bridge.wait_log("the relay is restarting: reconnecting now")
        log = bridge.log_text()
        after_close = log[log.index("socket closed (1012"):]
        # No back-off before the first attempt: the attempt comes before any "reconnecting in".
        assert after_close.index("reconnecting now") < after_close.find("reconnecting in") \
            or "reconnecting in" not in after_close, after_close
        restart_on_same_port(relay)
        bridge.wait_log("connected as", count=2, timeout=WAIT)
        second = user.send(session, "after")
        assert user.wait_reply(session, second)["text"] == "after"
    finally:
        assert bridge.stop() == 0


def _silent_bridge_socket(relay, token):
    """A bridge socket upgraded by hand that never reads again, so never answers the close frame."""
    conn = socket.create_connection(("127.0.0.1", relay.port), timeout=WAIT)
    key = base64.b64encode(os.urandom(16)).decode()
    conn.sendall(("GET /v1/bridge/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n"
                  % (key, token)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(4096)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    return conn


def test_a_socket_that_never_answers_the_close_is_dropped_at_the_deadline(relayd):
    relay = relayd("--shutdown-timeout", "2s", "--ws-pong-timeout", "60s")
    inst = Installation(relay, relay.token("alice"))
    conn = _silent_bridge_socket(relay, inst.token)
    try:
        started = time.monotonic()
        assert relay.stop() == 0
        took = time.monotonic() - started
        assert 1.5 <= took < STOP_TIMEOUT * SLOW, took
        assert "--shutdown-timeout (2000 ms) passed" in relay.log_text()
    finally:
        conn.close()
