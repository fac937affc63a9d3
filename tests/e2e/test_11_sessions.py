"""Client API: the session state machine (create, rename, archive, unarchive, delete,
restore, cancel), its events, its bridge updates and cross-user isolation."""
import json
import re
import time

from relaylib import SLOW, assert_error, assert_ok, find_error, validation_errors
from streams import BridgeSocket
from test_10_me_installations import (
    SESSION_KEYS, WAIT, Watch, call, close_stream, create_session, drop_bridge, me, now_ms,
    open_stream, real_events,
)

SES_RE = re.compile(r"^ses_[0-9A-Za-z]+$")
DAY_MS = 24 * 3600 * 1000


def path(session_id, action=""):
    return "/v1/me/sessions/%s%s" % (session_id, ("/" + action) if action else "")


def updates(relay, inst, type_=None):
    rows = relay.query("SELECT update_id, type, session_id, interaction_id, payload FROM updates "
                       "WHERE installation_id = ? ORDER BY update_id", (inst,))
    out = [(t, sid, iid, json.loads(p)) for _uid, t, sid, iid, p in rows]
    return [u for u in out if type_ is None or u[0] == type_]


def check_view(view, inst, title, state="active"):
    assert set(view) == SESSION_KEYS, view
    assert SES_RE.match(view["id"]), view
    assert view["installation_id"] == inst
    assert view["title"] == title
    assert view["state"] == state
    assert isinstance(view["created_at"], int) and isinstance(view["updated_at"], int)
    assert view["updated_at"] >= view["created_at"]


# -- create ---------------------------------------------------------------------------------

def test_create_session(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    stream = open_stream(relay, user_token)
    try:
        watch = Watch(stream)
        t0 = now_ms()
        result = create_session(relay, user_token, inst, "Plan the trip")
        assert set(result) == {"session_id", "session"}, result
        view = result["session"]
        check_view(view, inst, "Plan the trip")
        assert view["id"] == result["session_id"]
        assert t0 - 5000 <= view["created_at"] <= now_ms() + 5000
        assert view["deleted_at"] is None and view["restore_until"] is None

        event = watch.expect("session_created")[0]
        assert set(event.data) == {"session_id", "session"}, event.data
        assert event.data["session_id"] == view["id"]
        assert event.data["session"] == view

        listed = {s["id"]: s for s in me(relay, user_token)["sessions"]}
        assert listed[view["id"]] == view

        # The bridge is told: session.started with {session: {id, title, encrypted: false}}.
        started = updates(relay, inst, "session.started")
        assert len(started) == 1, started
        assert started[0][1] == view["id"]
        assert started[0][3] == {"session": {"id": view["id"], "title": "Plan the trip", "encrypted": False, "agent": None, "project": None, "resume": None}}

        # Without a title.
        untitled = create_session(relay, user_token, inst)
        check_view(untitled["session"], inst, None)
        assert untitled["session_id"] != view["id"]
        assert watch.expect("session_created")[0].data["session"]["title"] is None
        started = updates(relay, inst, "session.started")
        assert started[-1][3] == {"session": {"id": untitled["session_id"], "title": None, "encrypted": False, "agent": None, "project": None, "resume": None}}
    finally:
        close_stream(stream)


def test_session_started_reaches_a_connected_bridge(relay, user_token):
    inst, bridge_token, _ = relay.pair(user_token)
    sock = BridgeSocket(relay, bridge_token)
    try:
        assert sock.connected, sock.handshake_error
        assert sock.next(WAIT)["type"] == "ready"
        session_id = create_session(relay, user_token, inst, "hello bridge")["session_id"]
        update = sock.next_update(WAIT)
        assert update["type"] == "session.started", update
        assert update["session_id"] == session_id
        assert update["installation_id"] == inst
        assert update["payload"] == {"session": {"id": session_id, "title": "hello bridge", "encrypted": False, "agent": None, "project": None, "resume": None}}
    finally:
        drop_bridge(sock)


def test_create_session_errors(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    bob = relay.token("bob")
    bob_inst, _, _ = relay.pair(bob)
    revoked, _, _ = relay.pair(user_token)
    assert_ok(call(relay, "DELETE", "/v1/me/installations/%s" % revoked, user_token))
    before = relay.count("sessions")

    def create(body, token=user_token):
        return call(relay, "POST", "/v1/me/sessions", token, body)

    assert_error(create({"installation_id": bob_inst}), 404, "installation_not_found")
    assert_error(create({"installation_id": inst}, token=bob), 404, "installation_not_found")
    assert_error(create({"installation_id": "inst_" + "Z" * 16}), 404, "installation_not_found")
    assert_error(create({"installation_id": revoked}), 403, "installation_revoked")
    errors = validation_errors(create({"installation_id": "nope"}))
    assert find_error(errors, "installation_id")["code"] == "invalid_string", errors
    errors = validation_errors(create({}))
    assert find_error(errors, "installation_id")["code"] == "invalid_type", errors
    errors = validation_errors(create({"installation_id": 5}))
    assert find_error(errors, "installation_id")["code"] == "invalid_type", errors
    errors = validation_errors(create({"installation_id": inst, "title": "x" * 201}))
    assert find_error(errors, "title")["code"] == "too_big", errors
    errors = validation_errors(create({"installation_id": inst, "title": 12}))
    assert find_error(errors, "title")["code"] == "invalid_type", errors
    assert relay.count("sessions") == before
    assert updates(relay, inst) == []

    # 200 code points is the limit (counted in code points, not bytes).
    title = "\u00e9" * 200
    view = create_session(relay, user_token, inst, title)["session"]
    assert view["title"] == title


# -- rename -----------------------------------------------------------------------------------

def test_rename_session(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    created = create_session(relay, user_token, inst, "old")["session"]
    stream = open_stream(relay, user_token)
    try:
        watch = Watch(stream)
        r = call(relay, "PATCH", path(created["id"]), user_token, {"title": "new"})
        result = assert_ok(r)
        assert set(result) == {"session_id", "session"}, result
        assert result["session_id"] == created["id"]
        check_view(result["session"], inst, "new")
        assert result["session"]["created_at"] == created["created_at"]
        assert result["session"]["updated_at"] >= created["updated_at"]
        event = watch.expect("session_renamed")[0]
        assert set(event.data) == {"session_id", "title", "session"}, event.data
        assert event.data["session_id"] == created["id"]
        assert event.data["title"] == "new"
        assert event.data["session"] == result["session"]

        # The same title again still emits.
        assert_ok(call(relay, "PATCH", path(created["id"]), user_token, {"title": "new"}))
        assert watch.expect("session_renamed")[0].data["title"] == "new"

        # null clears it.
        result = assert_ok(call(relay, "PATCH", path(created["id"]), user_token, {"title": None}))
        assert result["session"]["title"] is None
        event = watch.expect("session_renamed")[0]
        assert event.data["title"] is None and event.data["session"]["title"] is None
        listed = {s["id"]: s for s in me(relay, user_token)["sessions"]}
        assert listed[created["id"]]["title"] is None

        # Validation: title is required (nullable), a string of at most 200.
        for body, code in (({}, "invalid_type"), ({"title": 3}, "invalid_type"),
                           ({"title": "y" * 201}, "too_big")):
            errors = validation_errors(call(relay, "PATCH", path(created["id"]), user_token, body))
            assert find_error(errors, "title")["code"] == code, (body, errors)
        assert_error(call(relay, "PATCH", path("ses_doesnotexist00000000"), user_token, {"title": "x"}),
                     404, "session_not_found")
        # None of the failures emitted anything.
        assert_ok(call(relay, "PATCH", path(created["id"]), user_token, {"title": "last"}))
        assert watch.expect("session_renamed")[0].data["title"] == "last"
    finally:
        close_stream(stream)


# -- archive / unarchive ----------------------------------------------------------------------

def test_archive_and_unarchive(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    created = create_session(relay, user_token, inst, "s")["session"]
    sid = created["id"]
    stream = open_stream(relay, user_token)
    try:
        watch = Watch(stream)
        result = assert_ok(call(relay, "POST", path(sid, "archive"), user_token))
        assert set(result) == {"session_id", "session"}, result
        assert result["session_id"] == sid
        check_view(result["session"], inst, "s", "archived")
        event = watch.expect("session_updated")[0]
        assert set(event.data) == {"session_id", "state", "session"}, event.data
        assert (event.data["session_id"], event.data["state"]) == (sid, "archived")
        assert event.data["session"] == result["session"]
        # archived sessions are still listed
        assert {s["id"]: s for s in me(relay, user_token)["sessions"]}[sid]["state"] == "archived"

        # Archiving an archived session: 200, no event.
        result = assert_ok(call(relay, "POST", path(sid, "archive"), user_token))
        assert result["session"]["state"] == "archived"
        assert_ok(call(relay, "PATCH", path(sid), user_token, {"title": "marker1"}))
        watch.expect("session_renamed")

        result = assert_ok(call(relay, "POST", path(sid, "unarchive"), user_token))
        check_view(result["session"], inst, "marker1", "active")
        event = watch.expect("session_updated")[0]
        assert (event.data["session_id"], event.data["state"]) == (sid, "active")
        assert event.data["session"]["state"] == "active"

        # Unarchiving an active session: 200, no event.
        assert assert_ok(call(relay, "POST", path(sid, "unarchive"), user_token))["session"]["state"] == "active"
        assert_ok(call(relay, "PATCH", path(sid), user_token, {"title": "marker2"}))
        watch.expect("session_renamed")
        # An archived session can still be written to.
        assert_ok(call(relay, "POST", path(sid, "archive"), user_token))
        watch.expect("session_updated")
        assert_ok(call(relay, "POST", path(sid, "send"), user_token, {"text": "still here"}))
        watch.expect("message_added")
    finally:
        close_stream(stream)


# -- delete / restore -------------------------------------------------------------------------

def test_delete_and_restore(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    created = create_session(relay, user_token, inst, "keep me")["session"]
    sid = created["id"]
    sent = assert_ok(call(relay, "POST", path(sid, "send"), user_token, {"text": "remember this"}))
    stream = open_stream(relay, user_token)
    try:
        watch = Watch(stream)
        t0 = now_ms()
        result = assert_ok(call(relay, "DELETE", path(sid), user_token))
        assert set(result) == {"session_id", "session"}, result
        assert result["session_id"] == sid
        view = result["session"]
        assert set(view) == SESSION_KEYS, view
        assert isinstance(view["deleted_at"], int) and t0 - 5000 <= view["deleted_at"] <= now_ms() + 5000
        assert view["restore_until"] == view["deleted_at"] + DAY_MS  # default grace 24 h
        event = watch.expect("session_deleted")[0]
        assert event.data == {"session_id": sid, "deleted_at": view["deleted_at"],
                              "restore_until": view["restore_until"]}

        # Gone from /v1/me and from every session route.
        assert sid not in [s["id"] for s in me(relay, user_token)["sessions"]]
        for method, p, body in (
            ("PATCH", path(sid), {"title": "x"}),
            ("POST", path(sid, "archive"), None),
            ("POST", path(sid, "unarchive"), None),
            ("POST", path(sid, "send"), {"text": "x"}),
            ("GET", path(sid, "messages"), None),
            ("POST", path(sid, "cancel"), {}),
            ("POST", path(sid, "cancel"), {"interaction_id": sent["interaction_id"]}),
            ("DELETE", path(sid), None),
        ):
            assert_error(call(relay, method, p, user_token, body), 404, "session_not_found")

        # Restore within the grace.
        result = assert_ok(call(relay, "POST", path(sid, "restore"), user_token))
        assert set(result) == {"session_id", "session"}, result
        assert result["session_id"] == sid
        check_view(result["session"], inst, "keep me")
        assert result["session"]["deleted_at"] is None and result["session"]["restore_until"] is None
        event = watch.expect("session_updated")[0]
        assert set(event.data) == {"session_id", "state", "session"}, event.data
        assert event.data["session_id"] == sid
        assert event.data["state"] == result["session"]["state"]
        assert event.data["session"]["deleted_at"] is None
        assert sid in [s["id"] for s in me(relay, user_token)["sessions"]]
        history = assert_ok(call(relay, "GET", path(sid, "messages"), user_token))
        assert [m["message_id"] for m in history["messages"]] == [sent["message_id"]]
        assert_ok(call(relay, "PATCH", path(sid), user_token, {"title": "back"}))
        watch.expect("session_renamed")

        # Restoring a live session: 200, no event.
        result = assert_ok(call(relay, "POST", path(sid, "restore"), user_token))
        assert result["session"]["deleted_at"] is None
        assert_ok(call(relay, "PATCH", path(sid), user_token, {"title": "marker"}))
        watch.expect("session_renamed")

        assert_error(call(relay, "POST", path("ses_doesnotexist00000000", "restore"), user_token), 404,
                     "session_not_found")
    finally:
        close_stream(stream)


def test_archived_session_deleted_and_restored_keeps_its_state(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    sid = create_session(relay, user_token, inst)["session_id"]
    assert_ok(call(relay, "POST", path(sid, "archive"), user_token))
    assert_ok(call(relay, "DELETE", path(sid), user_token))
    view = assert_ok(call(relay, "POST", path(sid, "restore"), user_token))["session"]
    assert view["state"] == "archived" and view["deleted_at"] is None


def test_restore_after_the_grace_is_not_found(relayd):
    relay = relayd("--delete-grace", "2s")
    token = relay.token("alice")
    inst, _, _ = relay.pair(token)
    expired = create_session(relay, token, inst, "expires")["session_id"]
    assert_ok(call(relay, "POST", path(expired, "send"), token, {"text": "soon gone"}))
    kept = create_session(relay, token, inst, "restored in time")["session_id"]

    view = assert_ok(call(relay, "DELETE", path(expired), token))["session"]
    assert view["restore_until"] == view["deleted_at"] + 2000, view
    # Within the grace, restore works.
    assert_ok(call(relay, "DELETE", path(kept), token))
    assert assert_ok(call(relay, "POST", path(kept, "restore"), token))["session"]["deleted_at"] is None

    # Wait (bounded) until the grace has passed, with a margin.
    while now_ms() < view["restore_until"] + 500:
        time.sleep(0.1)
    assert_error(call(relay, "POST", path(expired, "restore"), token), 404, "session_not_found")
    assert_error(call(relay, "GET", path(expired, "messages"), token), 404, "session_not_found")
    assert_error(call(relay, "DELETE", path(expired), token), 404, "session_not_found")
    listed = [s["id"] for s in me(relay, token)["sessions"]]
    assert expired not in listed and kept in listed


# -- cancel ---------------------------------------------------------------------------------

def test_cancel(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    sid = create_session(relay, user_token, inst)["session_id"]
    sent = assert_ok(call(relay, "POST", path(sid, "send"), user_token, {"text": "long task"}))
    iid = sent["interaction_id"]

    result = assert_ok(call(relay, "POST", path(sid, "cancel"), user_token, {"interaction_id": iid}))
    assert result == {"session_id": sid, "interaction_id": iid}
    cancelled = updates(relay, inst, "session.cancelled")
    assert len(cancelled) == 1, cancelled
    assert cancelled[0][1] == sid and cancelled[0][2] == iid
    assert cancelled[0][3] == {"interaction_id": iid}

    # Without an interaction id.
    result = assert_ok(call(relay, "POST", path(sid, "cancel"), user_token, {}))
    assert result["session_id"] == sid
    assert result.get("interaction_id") is None
    assert len(updates(relay, inst, "session.cancelled")) == 2

    # Unknown interaction; one of another session.
    assert_error(call(relay, "POST", path(sid, "cancel"), user_token, {"interaction_id": "int_nope0000000000000"}),
                 404, "interaction_not_found")
    other = create_session(relay, user_token, inst)["session_id"]
    assert_error(call(relay, "POST", path(other, "cancel"), user_token, {"interaction_id": iid}),
                 404, "interaction_not_found")
    errors = validation_errors(call(relay, "POST", path(sid, "cancel"), user_token, {"interaction_id": 7}))
    assert find_error(errors, "interaction_id")["code"] == "invalid_type"
    assert len(updates(relay, inst, "session.cancelled")) == 2


def test_cancel_reaches_a_connected_bridge(relay, user_token):
    inst, bridge_token, _ = relay.pair(user_token)
    sid = create_session(relay, user_token, inst)["session_id"]
    iid = assert_ok(call(relay, "POST", path(sid, "send"), user_token, {"text": "go"}))["interaction_id"]
    sock = BridgeSocket(relay, bridge_token)
    try:
        assert sock.connected, sock.handshake_error
        assert sock.next(WAIT)["type"] == "ready"
        seen = [sock.next_update(WAIT)["type"] for _ in range(2)]  # replay of what was queued
        assert seen == ["session.started", "session.message"], seen
        assert_ok(call(relay, "POST", path(sid, "cancel"), user_token, {"interaction_id": iid}))
        update = sock.next_update(WAIT)
        assert update["type"] == "session.cancelled", update
        assert update["session_id"] == sid and update["interaction_id"] == iid
        assert update["installation_id"] == inst
        assert update["payload"] == {"interaction_id": iid}
    finally:
        drop_bridge(sock)


def test_cancel_on_a_revoked_installation(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    sid = create_session(relay, user_token, inst)["session_id"]
    iid = assert_ok(call(relay, "POST", path(sid, "send"), user_token, {"text": "go"}))["interaction_id"]
    assert_ok(call(relay, "DELETE", "/v1/me/installations/%s" % inst, user_token))
    assert_error(call(relay, "POST", path(sid, "cancel"), user_token, {"interaction_id": iid}),
                 403, "installation_revoked")
    assert_error(call(relay, "POST", path(sid, "cancel"), user_token, {}), 403, "installation_revoked")
    assert updates(relay, inst, "session.cancelled") == []


# -- isolation -------------------------------------------------------------------------------

def test_sessions_of_others_are_not_found(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    created = create_session(relay, user_token, inst, "alice only")["session"]
    sid = created["id"]
    sent = assert_ok(call(relay, "POST", path(sid, "send"), user_token, {"text": "secret"}))
    bob = relay.token("bob")
    bob_inst, _, _ = relay.pair(bob)
    bob_sid = create_session(relay, bob, bob_inst)["session_id"]
    before = {s["id"]: s for s in me(relay, user_token)["sessions"]}[sid]
    alice_stream = open_stream(relay, user_token)
    bob_stream = open_stream(relay, bob)
    try:
        watch = Watch(alice_stream)
        for method, p, body in (
            ("PATCH", path(sid), {"title": "bob was here"}),
            ("POST", path(sid, "archive"), None),
            ("POST", path(sid, "unarchive"), None),
            ("DELETE", path(sid), None),
            ("POST", path(sid, "restore"), None),
            ("POST", path(sid, "cancel"), {}),
            ("POST", path(sid, "cancel"), {"interaction_id": sent["interaction_id"]}),
            ("POST", path(sid, "send"), {"text": "hi"}),
            ("GET", path(sid, "messages"), None),
        ):
            r = call(relay, method, p, bob, body)
            assert_error(r, 404, "session_not_found")
            assert "secret" not in r.text and "alice only" not in r.text
        # Bob cannot cancel alice's interaction through his own session either.
        assert_error(call(relay, "POST", path(bob_sid, "cancel"), bob, {"interaction_id": sent["interaction_id"]}),
                     404, "interaction_not_found")
        # alice's session is as it was, and nobody got an event.
        now = {s["id"]: s for s in me(relay, user_token)["sessions"]}[sid]
        assert now == before
        assert updates(relay, inst, "session.cancelled") == []
        assert_ok(call(relay, "PATCH", path(sid), user_token, {"title": "marker"}))
        watch.expect("session_renamed")
        time.sleep(0.2 * SLOW)
        assert real_events(bob_stream)[1:] == [], bob_stream.events
    finally:
        close_stream(alice_stream)
        close_stream(bob_stream)
