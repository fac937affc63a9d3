"""A session the bridge creates (the authors' cron runs): its writes need no
interaction_id because the session starts with the bridge's own turn, which
still behaves as a turn (the user decides its approvals, a cancel expires
them); the user's own sessions still require interaction_id; and the client
devices that hold no wrap of the session's key are announced to the bridge
again when it opens a message there (docs/api.md "Encrypted sessions")."""
import base64
import json
import os
import uuid

from bridgelib import WAIT, key
from e2elib import E2E, pubkey, seal, wrap
from relaylib import assert_ok, find_error, validation_errors


def _bridge_session(relay, user_token):
    e = E2E(relay, user_token)
    sock = e.inst.connect()
    assert [sock.next_update(WAIT)["type"] for _ in range(2)] == ["device_pending", "device_added"]
    stream = e.inst.stream()
    created = assert_ok(e.inst.post("createSession", {"source": "cron"}))
    return e, sock, stream, created["session_id"], created["interaction_id"]


def _open(e, sid, k):
    return assert_ok(e.inst.post("sendMessage", {"session_id": sid, "text_ct": seal(k, "messages/" + sid, ""),
                                                 "idempotency_key": key()}))["message_id"]


def _barrier(e, sock, sid):
    """An update the bridge must get next: whatever came before it came first."""
    assert_ok(e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text_ct": seal(b"b" * 32, "messages/" + sid, "ok")}))
    update = sock.next_update(WAIT)
    assert update["type"] == "session.message", update


def test_cron_turn_task_and_approval_without_interaction_id(relay, user_token):
    e, sock, stream, sid, turn = _bridge_session(relay, user_token)
    k = os.urandom(32)
    message_id = _open(e, sid, k)
    added = stream.wait_for("message_added", lambda d: d["message_id"] == message_id, timeout=WAIT)
    assert added.data["interaction_id"] == turn, added
    # The phone confirmed the bridge but has no wrap of this session's key: announced again.
    again = sock.next_update(WAIT)
    assert again["type"] == "device_added" and again["payload"]["device_id"] == e.phone, again

    path = "tasks/" + sid
    label = seal(k, path, "Reading notes.txt")
    assert_ok(e.inst.post("createTask", {"session_id": sid, "task_id": "t1", "kind": "read",
                                         "status_label_ct": label, "idempotency_key": "task:create:t1"}))
    task = stream.wait_for("task_created", timeout=WAIT)
    assert task.data["interaction_id"] == turn and task.data["status_label_ct"] == label, task

    approval_id = "apr_" + uuid.uuid4().hex
    details = seal(k, "approvals/" + sid, json.dumps({"title": "Run backup", "command": "backup.sh"}))
    asked = assert_ok(e.inst.post("requestApproval", {"session_id": sid, "approval_id": approval_id,
                                                      "action": "shell.exec", "severity": "medium",
                                                      "details_ct": details, "idempotency_key": key()}))
    assert asked["auto_resolved"] is False and asked["expires_at"], asked
    requested = stream.wait_for("approval_requested", timeout=WAIT)
    assert requested.data["interaction_id"] == turn, requested
    pending = assert_ok(e.me("GET", "/v1/me/snapshot"))["pending_approvals"]
    assert [p["approval_id"] for p in pending] == [approval_id], pending

    sig = base64.b64encode(b"s" * 32).decode()  # the shape of an HMAC-SHA256; relayd cannot check more
    decided = assert_ok(e.me("POST", "/v1/me/approvals/%s" % approval_id,
                             {"decision": "approve", "decision_sig": sig, "device_id": e.phone}))
    assert decided["interaction_id"] == turn, decided
    resolved = sock.next_update(WAIT)
    assert resolved["type"] == "approval.resolved" and resolved["interaction_id"] == turn, resolved
    assert resolved["payload"]["decision"] == "approve", resolved

    assert_ok(e.inst.post("finishTask", {"session_id": sid, "task_id": "t1", "status": "completed",
                                         "result_ct": seal(k, path, "{}")}))
    done = stream.wait_for("task_completed", timeout=WAIT)
    assert done.data["interaction_id"] == turn, done
    assert_ok(e.inst.post("sendMessageEnd", {"message_id": message_id, "text_ct": seal(k, "messages/" + sid, "ok"),
                                             "idempotency_key": key()}))

    # The bridge's turn is a turn: cancelling it expires its pending approvals.
    other = "apr_" + uuid.uuid4().hex
    assert_ok(e.inst.post("requestApproval", {"session_id": sid, "approval_id": other, "action": "shell.exec",
                                              "severity": "low", "details_ct": details, "idempotency_key": key()}))
    assert_ok(e.me("POST", "/v1/me/sessions/%s/cancel" % sid, {"interaction_id": turn}))
    updates = [sock.next_update(WAIT) for _ in range(2)]
    assert [u["type"] for u in updates] == ["session.cancelled", "approval.expired"], updates
    assert updates[1]["payload"]["approval_id"] == other, updates
    sock.close()
    stream.close()


def test_user_sessions_still_require_interaction_id(relay, user_token):
    e = E2E(relay, user_token)
    sid = e.encrypted_session()
    plain = assert_ok(e.me("POST", "/v1/me/sessions", {"installation_id": e.inst.id}))["session_id"]
    k = os.urandom(32)
    for session, label in ((sid, {"status_label_ct": seal(k, "tasks/" + sid, "x")}), (plain, {"status_label": "x"})):
        r = e.inst.post("createTask", dict({"session_id": session, "task_id": "t1", "kind": "read"}, **label))
        problem = find_error(validation_errors(r), "interaction_id")
        assert problem is not None and problem["message"] == "Required", r.text
        body = {"session_id": session, "approval_id": "apr_x", "action": "x", "severity": "low",
                "idempotency_key": key()}
        body.update({"details_ct": seal(k, "approvals/" + sid, "{}")} if session == sid
                    else {"title": "t", "message": "m"})
        r = e.inst.post("requestApproval", body)
        problem = find_error(validation_errors(r), "interaction_id")
        assert problem is not None and problem["message"] == "Required", r.text
    # A message without one stays outside any turn, as before.
    message_id = assert_ok(e.inst.post("sendMessage", {"session_id": plain, "text": "hi",
                                                       "idempotency_key": key()}))["message_id"]
    messages = assert_ok(e.me("GET", "/v1/me/sessions/%s/messages" % plain))["messages"]
    assert [m["interaction_id"] for m in messages if m["message_id"] == message_id] == [None], messages


def test_reannouncement_only_for_confirmed_devices_without_a_wrap(relay, user_token):
    e, sock, stream, sid, turn = _bridge_session(relay, user_token)
    # A second client device the user never confirmed against the bridge: never announced again.
    assert_ok(e.me("POST", "/v1/me/devices", {"pubkey": pubkey(), "label": "tablet", "platform": "web"}))
    assert sock.next_update(WAIT)["type"] == "device_pending"
    k = os.urandom(32)
    _open(e, sid, k)
    again = sock.next_update(WAIT)
    assert again["type"] == "device_added" and again["payload"]["device_id"] == e.phone, again
    _barrier(e, sock, sid)
    # Naming the bridge's turn is the same turn: announced again (at least once; the phone still has no wrap).
    assert_ok(e.inst.post("sendMessage", {"session_id": sid, "interaction_id": turn, "idempotency_key": key(),
                                          "text_ct": seal(k, "messages/" + sid, "")}))
    again = sock.next_update(WAIT)
    assert again["type"] == "device_added" and again["payload"]["device_id"] == e.phone, again
    # Once the bridge wrapped the key for the phone, a new message announces nobody.
    assert_ok(e.inst.post("sessions/%s/recipients" % sid,
                          {"recipients": [{"device_id": e.phone, "wrapped_session_key": wrap()}],
                           "wrapped_by_device_id": e.bridge_device}))
    _open(e, sid, k)
    _barrier(e, sock, sid)
    # A session the user created is not the bridge's: its messages announce nobody.
    mine = e.encrypted_session()
    assert sock.next_update(WAIT)["type"] == "session.started"
    assert sock.next_update(WAIT)["type"] == "session_key_granted"
    i = assert_ok(e.me("POST", "/v1/me/sessions/%s/send" % mine,
                       {"text_ct": seal(k, "messages/" + mine, "go")}))["interaction_id"]
    assert sock.next_update(WAIT)["type"] == "session.message"
    assert_ok(e.inst.post("sendMessage", {"session_id": mine, "interaction_id": i,
                                          "text_ct": seal(k, "messages/" + mine, ""), "idempotency_key": key()}))
    _barrier(e, sock, mine)
    sock.close()
    stream.close()
