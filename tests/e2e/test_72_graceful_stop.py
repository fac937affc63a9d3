"""SIGTERM stops relayd gracefully (issue 15): bridge sockets close with 1012 (service restart), and
relay-bridge reconnects at once on it instead of backing off; relayd exits 0 well before
--shutdown-timeout when nothing else is under way."""
import base64
import http.client
import json
import os
import re
import signal
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


def test_an_upload_under_way_finishes_and_event_streams_end_cleanly(relayd):
    relay = relayd("--shutdown-timeout", "30s")
    user = relay.token("alice")
    # An event stream open when the stop comes: it must end with the chunked terminator, not a cut.
    stream_conn = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=WAIT)
    stream_conn.request("GET", "/v1/me/stream", headers={"Authorization": "Bearer " + user,
                                                         "Accept": "text/event-stream"})
    stream = stream_conn.getresponse()
    assert stream.status == 200
    # An upload whose body is still arriving when SIGTERM comes.
    body = os.urandom(8 * 1024 * 1024)
    conn = socket.create_connection(("127.0.0.1", relay.port), timeout=WAIT)
    conn.sendall(("POST /v1/me/attachments?name=big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  "Authorization: Bearer %s\r\nContent-Type: application/octet-stream\r\n"
                  "Content-Length: %d\r\n\r\n" % (user, len(body))).encode())
    conn.sendall(body[:1024 * 1024])
    time.sleep(0.3 * SLOW)
    relay.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5 * SLOW)
    # Still there for the upload: the rest of the body goes in, the answer comes back.
    for at in range(1024 * 1024, len(body), 1024 * 1024):
        conn.sendall(body[at:at + 1024 * 1024])
        time.sleep(0.05)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(65536)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head[:300]
    # The whole answer: its head was parsed before the stop, so h2o may keep the connection alive; it
    # goes when relayd exits, after the answer.
    length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
    answer = head.split(b"\r\n\r\n", 1)[1]
    while len(answer) < length:
        chunk = conn.recv(65536)
        assert chunk, answer
        answer += chunk
    assert json.loads(answer)["result"]["size"] == len(body), answer
    conn.close()
    # The stream ended cleanly: reading it to the end raises nothing (IncompleteRead would).
    rest = stream.read()
    assert isinstance(rest, bytes)
    stream_conn.close()
    assert relay.wait_exit(WAIT) == 0
    assert "--shutdown-timeout" not in relay.log_text()
    files = os.listdir(os.path.join(str(relay.data), "attachments"))
    assert any(os.path.getsize(os.path.join(str(relay.data), "attachments", f)) == len(body) for f in files), files
