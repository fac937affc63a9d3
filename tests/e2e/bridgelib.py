"""Helpers of the bridge-channel end-to-end tests (test_3x_*.py).

Installation wraps one paired bridge of one user: its token, its WebSocket,
its REST calls and the client calls that drive it.  Socket is streams'
BridgeSocket with a close() that does not hang (see below) and a few
assertions of its own.  Every wait is bounded and scales with SLOW.
"""
import asyncio
import re
import socket
import time
import uuid

from relaylib import SLOW, assert_ok, bearer, wait_until
from streams import BridgeSocket, EventStream

# How long a test waits for something the relay should do "now".
WAIT = 15 * SLOW

ISO_MS_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
RATE_HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
                "X-RateLimit-Reset-After", "X-RateLimit-Bucket", "X-RateLimit-Scope")


def key():
    """A fresh idempotency key."""
    return str(uuid.uuid4())


class Socket(BridgeSocket):
    """BridgeSocket whose close() returns as soon as the connection is over.

    streams.BridgeSocket.close() waits for the result of websockets' close()
    on the socket's event loop, but that loop stops as soon as the read loop
    ends (which the close itself causes), so the result never comes and
    close() raised TimeoutError after 15 s.  Here the loop is given a moment
    to finish what is pending, and close() waits for the end of the
    connection instead.
    """

    def _run(self, token):
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main(token))
        pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
        if pending:
            self._loop.run_until_complete(asyncio.wait(pending, timeout=5))

    def close(self):
        if self._ws is not None and not self._closed.is_set():
            self._in_loop(self._ws.close)
        assert self._closed.wait(WAIT), "socket still open %ss after close()" % WAIT

    def expect_ready(self, installation_id):
        assert self.handshake_error is None, "upgrade refused: %r" % self.handshake_error
        frame = self.next(WAIT)
        assert frame == {"type": "ready", "installation_id": installation_id}, frame
        return frame

    def updates(self, count, timeout=WAIT):
        return [self.next_update(timeout) for _ in range(count)]

    def next_frame_any(self, timeout=WAIT):
        """The next frame, pings included."""
        return self.next(timeout, skip_pings=False)


def handshake_status(sock):
    """HTTP status of a refused upgrade (websockets' InvalidStatusCode / InvalidStatus)."""
    err = sock.handshake_error
    assert err is not None, "the upgrade was accepted"
    status = getattr(err, "status_code", None)
    if status is None and getattr(err, "response", None) is not None:
        status = getattr(err.response, "status_code", None)
    return status


class Stream(EventStream):
    """EventStream whose close() does not wait for the next heartbeat.

    streams.EventStream.close() closes the response while the reader thread
    is blocked in a read of it, and only returned once the server sent the
    next byte (25 s later with the default heartbeat).  Shutting the socket
    down first ends that read at once.
    """

    def close(self):
        try:
            sock = self.response.raw._fp.fp.raw._sock
            sock.shutdown(socket.SHUT_RDWR)
        except (AttributeError, OSError):
            pass
        self.closed.wait(WAIT)
        self.response.close()


class Installation:
    """One user (by token) with one paired bridge on `relay`."""

    def __init__(self, relay, user_token, host_label="test-host"):
        self.relay = relay
        self.user = user_token
        self.id, self.token, _ = relay.pair(user_token, host_label=host_label)

    # -- the bridge's side --------------------------------------------------
    def connect(self, auto_pong=True, expect_ready=True):
        sock = Socket(self.relay, self.token, auto_pong=auto_pong)
        if expect_ready:
            sock.expect_ready(self.id)
        return sock

    def post(self, route, body, token=None):
        return self.relay.post("/v1/bridge/" + route, body, token=token or self.token)

    def ok(self, route, body):
        return assert_ok(self.post(route, body))

    def open_message(self, session_id, interaction_id, text="", **extra):
        body = {"session_id": session_id, "interaction_id": interaction_id, "text": text,
                "idempotency_key": key()}
        body.update(extra)
        return self.ok("sendMessage", body)["message_id"]

    def delta(self, message_id, delta, idem=None):
        return self.post("sendMessageDelta", {"message_id": message_id, "delta": delta,
                                              "idempotency_key": idem or key()})

    def end(self, message_id, idem=None, **extra):
        body = {"message_id": message_id, "idempotency_key": idem or key()}
        body.update(extra)
        return self.post("sendMessageEnd", body)

    def task(self, route, session_id, interaction_id, task_id, **extra):
        body = {"session_id": session_id, "interaction_id": interaction_id, "task_id": task_id}
        body.update(extra)
        return self.post(route, body)

    def approval_body(self, session_id, interaction_id, **extra):
        body = {"session_id": session_id, "interaction_id": interaction_id,
                "approval_id": "apr_" + uuid.uuid4().hex, "action": "exec",
                "title": "Run a command", "message": "The agent wants to run a command",
                "severity": "medium", "command": "ls -la", "host": "example.com",
                "tool_call_id": "tc_" + uuid.uuid4().hex[:12], "idempotency_key": key()}
        body.update(extra)
        return body

    def request_approval(self, session_id, interaction_id, **extra):
        body = self.approval_body(session_id, interaction_id, **extra)
        return body, self.post("requestApproval", body)

    # -- the client's side --------------------------------------------------
    def client(self, method, path, body=None, token=None):
        kw = {"headers": bearer(token or self.user)}
        if body is not None:
            kw["json"] = body
        return self.relay.request(method, path, **kw)

    def stream(self, **kw):
        es = Stream(self.relay, self.user, **kw)
        assert es.status == 200, es.status
        es.wait_for("hello", timeout=WAIT)
        return es

    def create_session(self, title=None):
        body = {"installation_id": self.id}
        if title is not None:
            body["title"] = title
        return assert_ok(self.client("POST", "/v1/me/sessions", body))["session_id"]

    def send(self, session_id, text="hello agent", **extra):
        """Client send; returns (interaction_id, message_id)."""
        body = {"text": text}
        body.update(extra)
        result = assert_ok(self.client("POST", "/v1/me/sessions/%s/send" % session_id, body))
        return result["interaction_id"], result["message_id"]

    def messages(self, session_id, token=None):
        r = self.client("GET", "/v1/me/sessions/%s/messages?limit=100" % session_id, token=token)
        result = assert_ok(r)
        assert result["has_more"] is False, result
        return result["messages"]

    def message(self, session_id, message_id):
        hits = [m for m in self.messages(session_id) if m["message_id"] == message_id]
        assert len(hits) == 1, (message_id, hits)
        return hits[0]

    def health(self):
        me = assert_ok(self.client("GET", "/v1/me"))
        hits = [i for i in me["installations"] if i["id"] == self.id]
        assert len(hits) == 1, me
        return hits[0]["health"]

    def decide(self, approval_id, decision, token=None, **extra):
        body = {"decision": decision}
        body.update(extra)
        return self.client("POST", "/v1/me/approvals/%s" % approval_id, body, token=token)

    def snapshot(self):
        return assert_ok(self.client("GET", "/v1/me/snapshot"))

    def barrier(self, stream, session_id):
        """Publishes a marker event and waits for it: every event published
        before this call is then in stream.events."""
        title = "barrier-" + uuid.uuid4().hex[:8]
        assert_ok(self.client("PATCH", "/v1/me/sessions/%s" % session_id, {"title": title}))
        return stream.wait_for("session_renamed", lambda d: d.get("title") == title, timeout=WAIT)

    def update_barrier(self, sock, session_id):
        """Queues a session.cancelled update for a marker interaction and
        returns the next update the socket receives (the caller asserts it is
        the marker, i.e. nothing else was queued before it)."""
        assert_ok(self.client("POST", "/v1/me/sessions/%s/cancel" % session_id, {}))
        return sock.next_update(WAIT)


class Turn:
    """A user with an installation, a connected bridge, a session and one
    client message already received by the bridge."""

    def __init__(self, relay, user_token, text="hello agent", stream=True):
        self.inst = Installation(relay, user_token)
        self.stream = self.inst.stream() if stream else None
        self.sock = self.inst.connect()
        self.session = self.inst.create_session()
        started = self.sock.next_update(WAIT)
        assert started["type"] == "session.started", started
        self.interaction, self.user_message = self.inst.send(self.session, text)
        update = self.sock.next_update(WAIT)
        assert update["type"] == "session.message", update
        assert update["interaction_id"] == self.interaction, update
        self.update = update

    def events(self, names=None, after=0):
        events = self.stream.events[after:]
        if names is not None:
            events = [e for e in events if e.name in names]
        return events

    def close(self):
        self.sock.close()
        if self.stream is not None:
            self.stream.close()


def wait_for_health(inst, status, timeout=WAIT):
    return wait_until(lambda: inst.health() == status, timeout, interval=0.05,
                      what="health %s" % status)


def assert_rate_headers(r, bucket, limit, scope="installation"):
    for name in RATE_HEADERS:
        assert name in r.headers, (name, dict(r.headers))
    assert r.headers["X-RateLimit-Bucket"] == bucket, dict(r.headers)
    assert r.headers["X-RateLimit-Scope"] == scope, dict(r.headers)
    assert int(r.headers["X-RateLimit-Limit"]) == limit, dict(r.headers)
    remaining = int(r.headers["X-RateLimit-Remaining"])
    assert 0 <= remaining < limit, dict(r.headers)
    reset = int(r.headers["X-RateLimit-Reset"])
    assert time.time() - 2 <= reset <= time.time() + limit + 2, dict(r.headers)
    float(r.headers["X-RateLimit-Reset-After"])
    return remaining


def raw_upgrade(relay, token):
    """A WebSocket upgrade request made with requests, so that a refusal's
    JSON body can be read (websockets only reports the status)."""
    headers = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    if token is not None:
        headers.update(bearer(token))
    return relay.get("/v1/bridge/ws", headers=headers)


__all__ = ["WAIT", "ISO_MS_Z", "key", "Socket", "Stream", "Installation", "Turn", "handshake_status",
           "raw_upgrade", "wait_for_health", "assert_rate_headers"]
