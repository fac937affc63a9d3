"""Client API: GET /v1/me, installations (PATCH, DELETE = revoke) and their events."""
import re
import socket
import time

from relaylib import (
    SLOW, assert_correlation_headers, assert_error, assert_ok, bearer, find_error,
    validation_errors,
)
from streams import BridgeSocket, EventStream

WAIT = 15 * SLOW
# agent and commands are ours (issue 22): what the bridge's manifest says of its agent.
# bridge_version, encrypted and model are ours too (issue 26, docs/api.md "Encrypted sessions"),
# and agents, agent, project, resume and agent_state (issue 36, "Agents and projects").
INSTALLATION_KEYS = {"id", "custom_display_name", "custom_emoji", "connector_type", "host_label",
                     "state", "health", "created_at", "agent", "commands", "agents", "bridge_version"}
SESSION_KEYS = {"id", "installation_id", "title", "state", "created_at", "updated_at", "deleted_at",
                "restore_until", "encrypted", "model", "agent", "project", "resume", "agent_state"}
INST_RE = re.compile(r"^inst_[0-9A-Za-z]{16}$")


# -- helpers (local to this file) ---------------------------------------------------

def call(relay, method, path, token, body=None, **kw):
    """One authenticated call; a 429 of the user's bucket is waited out (bounded)."""
    deadline = time.monotonic() + 20 * SLOW
    while True:
        if body is not None:
            kw["json"] = body
        r = relay.request(method, path, headers=bearer(token), **kw)
        if r.status_code != 429 or time.monotonic() > deadline:
            return r
        time.sleep(r.json()["error"].get("retry_after_ms", 200) / 1000.0 + 0.05)


def me(relay, token):
    return assert_ok(call(relay, "GET", "/v1/me", token))


def create_session(relay, token, inst, title=None):
    body = {"installation_id": inst}
    if title is not None:
        body["title"] = title
    return assert_ok(call(relay, "POST", "/v1/me/sessions", token, body))


# Events that come and go with timing (keep-alives, bridge socket health) and are not
# the subject of these tests.
NOISE = {"heartbeat", "agent_health_changed"}


def real_events(stream, start=0):
    return [e for e in stream.events[start:] if e.name not in NOISE]


class Watch:
    """Reads a stream's events in order from a mark: expect() names exactly what comes next."""

    def __init__(self, stream):
        self.stream = stream
        self.pos = len(stream.events)

    def expect(self, *names, timeout=WAIT):
        deadline = time.monotonic() + timeout
        while True:
            got = real_events(self.stream, self.pos)
            if len(got) >= len(names):
                break
            if time.monotonic() > deadline or self.stream.closed.is_set():
                raise AssertionError("expected events %r, got %r" % (names, got))
            time.sleep(0.02)
        assert [e.name for e in got[:len(names)]] == list(names), (names, got)
        # advance past exactly those events (heartbeats included)
        seen = 0
        while seen < len(names):
            if self.stream.events[self.pos].name not in NOISE:
                seen += 1
            self.pos += 1
        return got[:len(names)]


def open_stream(relay, token):
    stream = EventStream(relay, token)
    assert stream.status == 200, stream.response.text
    stream.wait_for("hello", timeout=WAIT)
    return stream


def close_stream(stream):
    """EventStream.close() blocks until the server writes again (the reader thread holds
    the buffer lock inside recv), so shut the socket down first."""
    sock = None
    try:
        sock = stream.response.raw._connection.sock
    except AttributeError:
        try:
            sock = stream.response.raw._fp.fp.raw._sock
        except AttributeError:
            pass
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    stream.close()
    stream.closed.wait(WAIT)


def drop_bridge(sock):
    """Closes a BridgeSocket's TCP connection (BridgeSocket.close() can hang: its loop stops
    as soon as the receive loop ends, before the close coroutine finishes)."""
    if sock._ws is not None and not sock._closed.is_set():
        sock._loop.call_soon_threadsafe(sock._ws.transport.abort)
    assert sock._closed.wait(WAIT), "bridge socket did not close"


def ws_status(exc):
    """HTTP status of a refused WebSocket upgrade (python3-websockets, old and new API)."""
    for attr in ("status_code",):
        if hasattr(exc, attr):
            return getattr(exc, attr)
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def now_ms():
    return int(time.time() * 1000)


# -- GET /v1/me ------------------------------------------------------------------------

def test_me_of_a_new_user(relay, user_token):
    t0 = now_ms()
    r = call(relay, "GET", "/v1/me", user_token)
    result = assert_ok(r)
    assert_correlation_headers(r)
    assert set(result) == {"user", "installations", "sessions"}, result
    assert set(result["user"]) == {"id", "created_at"}, result
    assert result["user"]["id"] == "alice"
    assert isinstance(result["user"]["created_at"], int)
    assert t0 - 60000 <= result["user"]["created_at"] <= now_ms() + 5000
    assert result["installations"] == []
    assert result["sessions"] == []
    # created on first sight, once
    again = me(relay, user_token)
    assert again["user"] == result["user"]


def test_me_requires_a_user_token(relay, user_token):
    assert_error(relay.get("/v1/me"), 401, "invalid_token")
    assert_error(relay.get("/v1/me", headers=bearer("nope")), 401, "invalid_token")
    assert_error(relay.get("/v1/me", headers=bearer(user_token[:-2] + "xx")), 401, "invalid_token")
    _, bridge_token, _ = relay.pair(user_token)
    assert_error(relay.get("/v1/me", headers=bearer(bridge_token)), 403, "permission_denied")


def test_me_lists_installations_and_live_sessions(relay, user_token):
    t0 = now_ms()
    inst_a, _, _ = relay.pair(user_token, "claude-code", "laptop")
    inst_b, _, _ = relay.pair(user_token, "codex", "desktop")
    s1 = create_session(relay, user_token, inst_a, "first")["session"]
    s2 = create_session(relay, user_token, inst_b)["session"]
    s3 = create_session(relay, user_token, inst_a, "doomed")["session"]
    assert_ok(call(relay, "POST", "/v1/me/sessions/%s/archive" % s2["id"], user_token))
    assert_ok(call(relay, "DELETE", "/v1/me/sessions/%s" % s3["id"], user_token))

    result = me(relay, user_token)
    insts = {i["id"]: i for i in result["installations"]}
    assert set(insts) == {inst_a, inst_b}, result
    for inst in insts.values():
        assert set(inst) == INSTALLATION_KEYS, inst
        assert INST_RE.match(inst["id"])
        assert inst["custom_display_name"] is None and inst["custom_emoji"] is None
        assert inst["state"] == "live"
        assert inst["health"] == "offline"  # no bridge socket
        assert isinstance(inst["created_at"], int) and t0 - 5000 <= inst["created_at"] <= now_ms() + 5000
    assert (insts[inst_a]["connector_type"], insts[inst_a]["host_label"]) == ("claude-code", "laptop")
    assert (insts[inst_b]["connector_type"], insts[inst_b]["host_label"]) == ("codex", "desktop")

    sessions = {s["id"]: s for s in result["sessions"]}
    assert set(sessions) == {s1["id"], s2["id"]}, result["sessions"]  # the deleted one is left out
    for s in sessions.values():
        assert set(s) == SESSION_KEYS, s
        assert s["deleted_at"] is None and s["restore_until"] is None
    assert sessions[s1["id"]]["installation_id"] == inst_a
    assert sessions[s1["id"]]["title"] == "first"
    assert sessions[s1["id"]]["state"] == "active"
    assert sessions[s2["id"]]["installation_id"] == inst_b
    assert sessions[s2["id"]]["title"] is None
    assert sessions[s2["id"]]["state"] == "archived"


def test_me_shows_only_the_callers_objects(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    create_session(relay, user_token, inst, "alice's")
    bob = relay.token("bob")
    result = me(relay, bob)
    assert result["user"]["id"] == "bob"
    assert result["installations"] == [] and result["sessions"] == []
    bob_inst, _, _ = relay.pair(bob)
    bob_sess = create_session(relay, bob, bob_inst)["session_id"]
    alice = me(relay, user_token)
    assert [i["id"] for i in alice["installations"]] == [inst]
    assert bob_sess not in [s["id"] for s in alice["sessions"]]
    assert [i["id"] for i in me(relay, bob)["installations"]] == [bob_inst]


def test_health_follows_the_bridge_socket(relay, user_token):
    inst, bridge_token, _ = relay.pair(user_token)

    def health():
        return [i for i in me(relay, user_token)["installations"] if i["id"] == inst][0]["health"]

    assert health() == "offline"
    sock = BridgeSocket(relay, bridge_token)
    try:
        assert sock.connected, sock.handshake_error
        assert sock.next(WAIT)["type"] == "ready"
        deadline = time.monotonic() + WAIT
        while health() != "healthy":
            assert time.monotonic() < deadline, "health never became healthy"
            time.sleep(0.05)
    finally:
        drop_bridge(sock)
    deadline = time.monotonic() + WAIT
    while health() != "offline":
        assert time.monotonic() < deadline, "health never went back to offline"
        time.sleep(0.05)


# -- installation_created -----------------------------------------------------------------

def test_claim_emits_installation_created(relay, user_token):
    stream = open_stream(relay, user_token)
    bob_stream = open_stream(relay, relay.token("bob"))
    try:
        watch = Watch(stream)
        started = relay.pairing_start("claude-code", "laptop")
        claimed = assert_ok(relay.claim(user_token, started["code"]))
        event = watch.expect("installation_created")[0]
        assert event.id is not None and re.match(r"^\d+$", event.id), event
        assert set(event.data) == {"installation_id", "installation"}, event.data
        assert event.data["installation_id"] == claimed["installation_id"]
        inst = event.data["installation"]
        assert set(inst) == INSTALLATION_KEYS, inst
        assert inst["id"] == claimed["installation_id"]
        assert inst["state"] == "live"
        assert (inst["connector_type"], inst["host_label"]) == ("claude-code", "laptop")
        for key in ("custom_display_name", "custom_emoji", "connector_type", "host_label", "created_at"):
            assert inst[key] == claimed["installation"][key], key
        # bob saw nothing of it
        time.sleep(0.2)
        assert real_events(bob_stream)[1:] == [], bob_stream.events
    finally:
        close_stream(stream)
        close_stream(bob_stream)


# -- PATCH /v1/me/installations/:id ------------------------------------------------------

def patch_inst(relay, token, inst, body):
    return call(relay, "PATCH", "/v1/me/installations/%s" % inst, token, body)


def test_rename_installation(relay, user_token):
    inst, _, _ = relay.pair(user_token, "claude-code", "laptop")
    stream = open_stream(relay, user_token)
    try:
        watch = Watch(stream)
        result = assert_ok(patch_inst(relay, user_token, inst, {"custom_display_name": "Work Mac",
                                                               "custom_emoji": "\U0001F4BB"}))
        assert set(result) == {"installation"}, result
        view = result["installation"]
        assert set(view) == INSTALLATION_KEYS, view
        assert view["id"] == inst
        assert view["custom_display_name"] == "Work Mac"
        assert view["custom_emoji"] == "\U0001F4BB"
        assert (view["connector_type"], view["host_label"], view["state"]) == ("claude-code", "laptop", "live")
        event = watch.expect("installation_updated")[0]
        assert set(event.data) == {"installation_id", "installation"}, event.data
        assert event.data["installation_id"] == inst
        assert event.data["installation"]["custom_display_name"] == "Work Mac"
        assert event.data["installation"]["custom_emoji"] == "\U0001F4BB"

        listed = [i for i in me(relay, user_token)["installations"] if i["id"] == inst][0]
        assert listed["custom_display_name"] == "Work Mac" and listed["custom_emoji"] == "\U0001F4BB"

        # One key alone leaves the other as it was.
        view = assert_ok(patch_inst(relay, user_token, inst, {"custom_emoji": "\U0001F680"}))["installation"]
        assert (view["custom_display_name"], view["custom_emoji"]) == ("Work Mac", "\U0001F680")
        event = watch.expect("installation_updated")[0]
        assert event.data["installation"]["custom_emoji"] == "\U0001F680"

        # null clears.
        view = assert_ok(patch_inst(relay, user_token, inst, {"custom_display_name": None}))["installation"]
        assert (view["custom_display_name"], view["custom_emoji"]) == (None, "\U0001F680")
        watch.expect("installation_updated")
        view = assert_ok(patch_inst(relay, user_token, inst, {"custom_display_name": None,
                                                             "custom_emoji": None}))["installation"]
        assert (view["custom_display_name"], view["custom_emoji"]) == (None, None)
        watch.expect("installation_updated")
        listed = [i for i in me(relay, user_token)["installations"] if i["id"] == inst][0]
        assert (listed["custom_display_name"], listed["custom_emoji"]) == (None, None)
    finally:
        close_stream(stream)


def test_rename_installation_limits_in_code_points(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    name64 = "\u00e9" * 64          # 64 code points, 128 bytes
    emoji16 = "\U0001F600" * 16      # 16 code points, 64 bytes
    view = assert_ok(patch_inst(relay, user_token, inst, {"custom_display_name": name64,
                                                         "custom_emoji": emoji16}))["installation"]
    assert view["custom_display_name"] == name64 and view["custom_emoji"] == emoji16

    cases = [
        ({"custom_display_name": "x" * 65}, "custom_display_name", "too_big"),
        ({"custom_display_name": ""}, "custom_display_name", "too_small"),
        ({"custom_display_name": 7}, "custom_display_name", "invalid_type"),
        ({"custom_emoji": "\U0001F600" * 17}, "custom_emoji", "too_big"),
        ({"custom_emoji": ""}, "custom_emoji", "too_small"),
        ({"custom_emoji": ["x"]}, "custom_emoji", "invalid_type"),
    ]
    for body, path, code in cases:
        errors = validation_errors(patch_inst(relay, user_token, inst, body))
        assert find_error(errors, path)["code"] == code, (body, errors)
    # Nothing changed.
    listed = [i for i in me(relay, user_token)["installations"] if i["id"] == inst][0]
    assert (listed["custom_display_name"], listed["custom_emoji"]) == (name64, emoji16)


def test_rename_installation_needs_a_key(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    stream = open_stream(relay, user_token)
    try:
        watch = Watch(stream)
        validation_errors(patch_inst(relay, user_token, inst, {}))
        validation_errors(patch_inst(relay, user_token, inst, {"name": "x", "emoji": "y"}))
        validation_errors(patch_inst(relay, user_token, inst, None))  # empty body counts as {}
        # The failures emitted nothing: the next event is the one of this call.
        assert_ok(patch_inst(relay, user_token, inst, {"custom_display_name": "ok"}))
        event = watch.expect("installation_updated")[0]
        assert event.data["installation"]["custom_display_name"] == "ok"
    finally:
        close_stream(stream)


def test_installations_of_others_are_not_found(relay, user_token):
    inst, bridge_token, _ = relay.pair(user_token)
    bob = relay.token("bob")
    stream = open_stream(relay, user_token)
    bob_stream = open_stream(relay, bob)
    try:
        watch = Watch(stream)
        assert_error(patch_inst(relay, bob, inst, {"custom_display_name": "mine now"}), 404,
                     "installation_not_found")
        assert_error(call(relay, "DELETE", "/v1/me/installations/%s" % inst, bob), 404, "installation_not_found")
        unknown = "inst_" + "A" * 16
        assert_error(patch_inst(relay, user_token, unknown, {"custom_display_name": "x"}), 404,
                     "installation_not_found")
        assert_error(call(relay, "DELETE", "/v1/me/installations/%s" % unknown, user_token), 404,
                     "installation_not_found")
        # alice's installation is untouched and still works.
        listed = [i for i in me(relay, user_token)["installations"] if i["id"] == inst][0]
        assert listed["custom_display_name"] is None and listed["state"] == "live"
        assert_ok(relay.set_manifest(bridge_token))
        # No event went out to anyone; a real change is the next event alice sees.
        assert_ok(patch_inst(relay, user_token, inst, {"custom_emoji": "\u2705"}))
        watch.expect("installation_updated")
        assert real_events(bob_stream)[1:] == [], bob_stream.events
    finally:
        close_stream(stream)
        close_stream(bob_stream)


# -- DELETE /v1/me/installations/:id (revoke) ---------------------------------------------

def test_revoke_installation(relay, user_token):
    inst, bridge_token, _ = relay.pair(user_token)
    other_inst, _, _ = relay.pair(user_token)
    session_id = create_session(relay, user_token, inst, "before")["session_id"]
    interaction = assert_ok(call(relay, "POST", "/v1/me/sessions/%s/send" % session_id, user_token,
                                 {"text": "hi"}))["interaction_id"]
    sock = BridgeSocket(relay, bridge_token)
    assert sock.connected, sock.handshake_error
    assert sock.next(WAIT)["type"] == "ready"
    stream = open_stream(relay, user_token)
    try:
        watch = Watch(stream)
        r = call(relay, "DELETE", "/v1/me/installations/%s" % inst, user_token)
        result = assert_ok(r)
        assert set(result) == {"installation"}, result
        assert set(result["installation"]) == INSTALLATION_KEYS, result
        assert result["installation"]["id"] == inst
        assert result["installation"]["state"] == "revoked"

        event = watch.expect("installation_revoked")[0]
        assert set(event.data) == {"installation_id", "installation"}, event.data
        assert event.data["installation_id"] == inst
        assert event.data["installation"]["id"] == inst
        assert event.data["installation"]["state"] == "revoked"

        # The open bridge socket is closed as unauthorised.
        assert sock.wait_closed(WAIT) == 4401, (sock.close_code, sock.close_reason)
        # Bridge REST: 410; the upgrade: 401 invalid_token.
        assert_error(relay.post("/v1/bridge/setManifest", {"tools": []}, token=bridge_token), 410,
                     "installation_revoked")
        again = BridgeSocket(relay, bridge_token)
        assert again.handshake_error is not None, "upgrade with a revoked token succeeded"
        assert ws_status(again.handshake_error) == 401, repr(again.handshake_error)

        # Client calls into it: 403 installation_revoked.
        assert_error(call(relay, "POST", "/v1/me/sessions/%s/send" % session_id, user_token, {"text": "x"}),
                     403, "installation_revoked")
        assert_error(call(relay, "POST", "/v1/me/sessions", user_token, {"installation_id": inst}),
                     403, "installation_revoked")
        assert_error(call(relay, "POST", "/v1/me/sessions/%s/cancel" % session_id, user_token,
                          {"interaction_id": interaction}), 403, "installation_revoked")

        # /v1/me shows it revoked and offline.
        deadline = time.monotonic() + WAIT
        while True:
            listed = [i for i in me(relay, user_token)["installations"] if i["id"] == inst][0]
            if listed["health"] == "offline":
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.05)
        assert listed["state"] == "revoked"
        other = [i for i in me(relay, user_token)["installations"] if i["id"] == other_inst][0]
        assert other["state"] == "live"

        # Revoking twice: 200, no second event.
        result = assert_ok(call(relay, "DELETE", "/v1/me/installations/%s" % inst, user_token))
        assert result["installation"]["state"] == "revoked"
        assert_ok(patch_inst(relay, user_token, other_inst, {"custom_display_name": "marker"}))
        event = watch.expect("installation_updated")[0]
        assert event.data["installation_id"] == other_inst
    finally:
        close_stream(stream)
        drop_bridge(sock)
    rows = relay.query("SELECT state FROM installations WHERE id = ?", (inst,))
    assert rows == [("revoked",)]


def test_me_shows_each_change_at_once_even_when_its_answer_is_kept(relay, user_token):
    """GET /v1/me keeps its answer per user (me.c) and drops it on the user's next event: every change
    below is asked right after a GET that was answered (and kept) before it."""
    from bridgelib import Installation, wait_for_health

    def me():
        return assert_ok(relay.get("/v1/me", headers={"Authorization": "Bearer " + user_token}))

    inst = Installation(relay, user_token)
    me(), me()
    session = inst.create_session("first")
    assert [s["title"] for s in me()["sessions"]] == ["first"]
    assert_ok(inst.client("PATCH", "/v1/me/sessions/%s" % session, {"title": "renamed"}))
    assert [s["title"] for s in me()["sessions"]] == ["renamed"]
    other = inst.create_session("second")
    me()
    inst.send(session, "bump")  # a send moves the session to the top
    assert [s["id"] for s in me()["sessions"]] == [session, other]
    assert_ok(inst.client("POST", "/v1/me/sessions/%s/archive" % other, {}))
    assert {s["id"]: s["state"] for s in me()["sessions"]}[other] == "archived"
    assert_ok(inst.client("DELETE", "/v1/me/sessions/%s" % other))
    assert [s["id"] for s in me()["sessions"]] == [session]
    assert_ok(inst.client("PATCH", "/v1/me/installations/%s" % inst.id, {"custom_display_name": "Desk"}))
    assert me()["installations"][0]["custom_display_name"] == "Desk"
    sock = inst.connect()
    wait_for_health(inst, "healthy")
    assert me()["installations"][0]["health"] == "healthy"
    sock.close()
    wait_for_health(inst, "offline")
    assert me()["installations"][0]["health"] == "offline"
    assert_ok(inst.client("DELETE", "/v1/me/installations/%s" % inst.id))
    assert me()["installations"][0]["state"] == "revoked"
