"""End-to-end encryption (issue 26): tasks and approvals of an encrypted
session keep their sealed fields on every read and event, the decision
signature reaches the bridge as given, and no field relayd is sent is ever
dropped without a word (the issue's silent data loss)."""
import base64
import json
import os
import uuid

from bridgelib import WAIT, key
from e2elib import E2E, encrypted_session, open_, seal
from relaylib import assert_error, assert_ok, find_error, validation_errors


def _turn(relay, user_token):
    e, sock, stream, sid = encrypted_session(relay, user_token)
    k = e.session_key
    sent = assert_ok(e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text_ct": seal(k, "messages/" + sid, "go")}))
    assert sock.next_update(WAIT)["type"] == "session.message"
    return e, sock, stream, sid, sent["interaction_id"]


def test_encrypted_task_fields_on_every_read_and_event(relay, user_token):
    e, sock, stream, sid, i = _turn(relay, user_token)
    k, path = e.session_key, "tasks/" + sid
    label, args = seal(k, path, "Reading secret.txt"), seal(k, path, json.dumps({"path": "/secret.txt"}))
    assert_ok(e.inst.post("createTask", {"session_id": sid, "interaction_id": i, "task_id": "t1", "kind": "read",
                                         "status_label_ct": label, "args_ct": args}))
    created = stream.wait_for("task_created", timeout=WAIT)
    assert created.data["status_label_ct"] == label and created.data["args_ct"] == args, created
    assert created.data["status_label"] is None and created.data["args"] is None, created
    partial = seal(k, path, json.dumps({"lines": 3}))
    assert_ok(e.inst.post("updateTask", {"session_id": sid, "interaction_id": i, "task_id": "t1",
                                         "progress_percent": 50, "partial_result_ct": partial}))
    progress = stream.wait_for("task_progress", timeout=WAIT)
    assert progress.data["partial_result_ct"] == partial, progress
    result, error = seal(k, path, json.dumps({"ok": True})), seal(k, path, "none")
    assert_ok(e.inst.post("finishTask", {"session_id": sid, "interaction_id": i, "task_id": "t1",
                                         "status": "completed", "result_ct": result, "error_ct": error}))
    done = stream.wait_for("task_completed", timeout=WAIT)
    assert done.data["result_ct"] == result and done.data["error_ct"] == error, done
    items = assert_ok(e.me("GET", "/v1/me/sessions/%s/timeline" % sid))["items"]
    task = [it["task"] for it in items if it["type"] == "task"][0]
    assert (task["status_label_ct"], task["args_ct"], task["partial_result_ct"], task["result_ct"],
            task["error_ct"]) == (label, args, partial, result, error), task
    assert task["args"] is None and task["result"] is None, task
    assert json.loads(open_(k, path, task["args_ct"])) == {"path": "/secret.txt"}

    # Plaintext content in an encrypted session is refused by name.
    for route, extra, field in (("createTask", {"task_id": "t2", "kind": "read", "status_label": "x"}, "status_label"),
                                ("createTask", {"task_id": "t3", "kind": "read", "args": {"a": 1}}, "args"),
                                ("updateTask", {"task_id": "t1", "partial_result": 1}, "partial_result"),
                                ("finishTask", {"task_id": "t1", "status": "failed", "error": "x"}, "error")):
        body = dict({"session_id": sid, "interaction_id": i}, **extra)
        r = e.inst.post(route, body)
        assert find_error(validation_errors(r), field) is not None, (route, r.text)
    sock.close()
    stream.close()


def test_encrypted_approval_details_and_decision_signature(relay, user_token):
    e, sock, stream, sid, i = _turn(relay, user_token)
    k = e.session_key
    details = seal(k, "approvals/" + sid, json.dumps({"title": "Run rm", "message": "rm -rf build?",
                                                      "command": "rm -rf build", "host": "laptop"}))
    approval_id = "apr_" + uuid.uuid4().hex
    body = {"session_id": sid, "interaction_id": i, "approval_id": approval_id, "action": "exec",
            "severity": "high", "details_ct": details, "idempotency_key": key()}
    assert_ok(e.inst.post("requestApproval", body))
    event = stream.wait_for("approval_requested", timeout=WAIT)
    assert event.data["details_ct"] == details and event.data["title"] is None, event
    pending = assert_ok(e.me("GET", "/v1/me/snapshot"))["pending_approvals"]
    assert [p["details_ct"] for p in pending] == [details], pending
    items = assert_ok(e.me("GET", "/v1/me/sessions/%s/timeline" % sid))["items"]
    assert [it["approval"]["details_ct"] for it in items if it["type"] == "approval"] == [details]
    # Plain title where the details are sealed: refused; no details at all: Required.
    r = e.inst.post("requestApproval", dict(body, approval_id="apr_2", title="Run rm", idempotency_key=key()))
    assert find_error(validation_errors(r), "title") is not None, r.text
    r = e.inst.post("requestApproval", dict({k2: v for k2, v in body.items() if k2 != "details_ct"},
                                            approval_id="apr_3", idempotency_key=key()))
    assert find_error(validation_errors(r), "details_ct")["message"] == "Required", r.text

    sig = base64.b64encode(b"s" * 32).decode()  # the shape of an HMAC-SHA256; relayd cannot check more
    decided = assert_ok(e.me("POST", "/v1/me/approvals/%s" % approval_id,
                             {"decision": "approve", "decision_sig": sig, "device_id": e.phone}))
    assert decided["decision_sig"] == sig and decided["device_id"] == e.phone, decided
    update = sock.next_update(WAIT)
    assert update["type"] == "approval.resolved", update
    assert update["payload"]["decision_sig"] == sig and update["payload"]["device_id"] == e.phone, update
    resolved = stream.wait_for("approval_resolved", timeout=WAIT)
    assert resolved.data["decision_sig"] == sig, resolved
    r = e.me("POST", "/v1/me/approvals/%s" % approval_id, {"decision": "deny", "decision_sig": "x" * 129})
    assert find_error(validation_errors(r), "decision_sig")["code"] == "too_big"

    # An approve_always grant resolves nothing in an encrypted session: only a signed decision counts.
    again = "apr_" + uuid.uuid4().hex
    assert_ok(e.inst.post("requestApproval", dict(body, approval_id=again, idempotency_key=key())))
    assert_ok(e.me("POST", "/v1/me/approvals/%s" % again, {"decision": "approve_always", "scope": "all",
                                                           "decision_sig": sig, "device_id": e.phone}))
    assert sock.next_update(WAIT)["type"] == "approval.resolved"
    third = assert_ok(e.inst.post("requestApproval", dict(body, approval_id="apr_" + uuid.uuid4().hex,
                                                          idempotency_key=key())))
    assert third["auto_resolved"] is False, third
    sock.close()
    stream.close()


def test_no_field_is_dropped_without_a_word(relay, user_token):
    """The issue's report: task calls with *_ct fields answered 200 and the fields dropped. Now a
    plain session refuses each by name, and an unknown *_ct anywhere is refused as unrecognized."""
    e = E2E(relay, user_token)
    sock = e.inst.connect()
    sid = assert_ok(e.me("POST", "/v1/me/sessions", {"installation_id": e.inst.id}))["session_id"]
    i = assert_ok(e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text": "hi"}))["interaction_id"]
    ct = seal(b"k" * 32, "tasks/" + sid, "x")
    for route, extra, field in (
            ("createTask", {"task_id": "t1", "kind": "read", "status_label_ct": ct}, "status_label_ct"),
            ("createTask", {"task_id": "t1", "kind": "read", "args_ct": ct}, "args_ct"),
            ("updateTask", {"task_id": "t1", "partial_result_ct": ct}, "partial_result_ct"),
            ("finishTask", {"task_id": "t1", "status": "completed", "result_ct": ct}, "result_ct"),
            ("requestApproval", {"approval_id": "a1", "action": "x", "severity": "low", "title": "t",
                                 "message": "m", "details_ct": ct, "idempotency_key": key()}, "details_ct")):
        r = e.inst.post(route, dict({"session_id": sid, "interaction_id": i}, **extra))
        problem = find_error(validation_errors(r), field)
        assert problem is not None and "not encrypted" in problem["message"], (route, r.text)
    # Unknown encrypted fields, in either kind of session, on bridge and client routes.
    enc = e.encrypted_session()
    for path, body in (("/v1/me/sessions/%s/send" % sid, {"text": "x", "summary_ct": ct}),
                       ("/v1/me/sessions/%s/send" % enc, {"text_ct": ct, "summary_ct": ct})):
        r = e.me("POST", path, body)
        assert find_error(validation_errors(r), "summary_ct")["code"] == "unrecognized_keys", r.text
    r = e.inst.post("createTask", {"session_id": enc, "interaction_id": i, "task_id": "t9", "kind": "read",
                                   "name_ct": ct})
    assert find_error(validation_errors(r), "name_ct")["code"] == "unrecognized_keys", r.text
    # Other unknown keys stay ignored (forward compatibility), as docs/api.md says.
    assert_ok(e.inst.post("createTask", {"session_id": sid, "interaction_id": i, "task_id": "t9", "kind": "read",
                                         "idempotency_key": "task:create:t9", "future_flag": True}))
    sock.close()


def test_encrypted_capability_request_and_sealed_answer(relay, user_token):
    """Device capabilities in an encrypted session (api.md "Device capabilities"): the bridge's
    reason and the user's answer travel sealed under capabilities/<sid>; relayd stores and
    routes them as given and keeps none of the words or numbers in clear."""
    e, sock, stream, sid, i = _turn(relay, user_token)
    k, path = e.session_key, "capabilities/" + sid
    reason_ct = seal(k, path, "to find the nearest okapisanctuary")
    base = {"session_id": sid, "interaction_id": i, "capability": "location"}
    # The plain reason is refused by name; no reason at all is Required (reason_ct).
    r = e.inst.post("requestDeviceCapability", dict(base, reason="to find cafés", idempotency_key=key()))
    assert find_error(validation_errors(r), "reason") is not None, r.text
    r = e.inst.post("requestDeviceCapability", dict(base, idempotency_key=key()))
    assert find_error(validation_errors(r), "reason_ct")["message"] == "Required", r.text
    r = e.inst.post("requestDeviceCapability", dict(base, reason_ct="bm90IGFuIGVudmVsb3Bl", idempotency_key=key()))
    assert find_error(validation_errors(r), "reason_ct") is not None, r.text
    rid = assert_ok(e.inst.post("requestDeviceCapability", dict(base, reason_ct=reason_ct,
                                                                 idempotency_key=key())))["request_id"]
    event = stream.wait_for("device_capability_request", timeout=WAIT)
    assert event.data["reason_ct"] == reason_ct and event.data["reason"] is None, event
    pending = assert_ok(e.me("GET", "/v1/me/snapshot"))["pending_capability_requests"]
    assert [p["reason_ct"] for p in pending] == [reason_ct], pending

    # A plain location is refused by name; answer_ct with a refusal or a location is one answer too many.
    answer_url = "/v1/me/capabilities/%s" % rid
    r = e.me("POST", answer_url, {"location": {"latitude": 48.8, "longitude": 2.3, "accuracy": 10}})
    assert find_error(validation_errors(r), "location")["code"] == "invalid_answer", r.text
    sealed = seal(k, path, json.dumps({"location": {"latitude": 48.858421, "longitude": 2.294481, "accuracy": 7}}))
    r = e.me("POST", answer_url, {"answer_ct": sealed, "refused": True})
    assert find_error(validation_errors(r), "")["code"] == "invalid_answer", r.text
    r = e.me("POST", answer_url, {"answer_ct": "%%%"})
    assert find_error(validation_errors(r), "answer_ct") is not None, r.text
    done = assert_ok(e.me("POST", answer_url, {"answer_ct": sealed}))
    assert done["status"] == "answered", done
    update = sock.next_update(WAIT)
    while update["type"] != "device_capability.result":
        update = sock.next_update(WAIT)
    assert update["payload"]["answer_ct"] == sealed and "location" not in update["payload"], update
    assert json.loads(open_(k, path, update["payload"]["answer_ct"]))["location"]["latitude"] == 48.858421
    resolved = stream.wait_for("device_capability_resolved", timeout=WAIT)
    assert resolved.data["status"] == "answered" and "answer_ct" not in resolved.data, resolved
    assert "okapisanctuary" not in relay.log_text()
    sock.close()
    stream.close()


def test_capability_ciphertext_refused_in_a_plain_session(relay, user_token):
    from bridgelib import Turn
    t = Turn(relay, user_token)
    k = os.urandom(32)
    r = t.inst.post("requestDeviceCapability", {"session_id": t.session, "interaction_id": t.interaction,
                                                "capability": "location", "idempotency_key": key(),
                                                "reason_ct": seal(k, "capabilities/x", "why")})
    assert find_error(validation_errors(r), "reason_ct") is not None, r.text
    rid = assert_ok(t.inst.post("requestDeviceCapability", {
        "session_id": t.session, "interaction_id": t.interaction, "capability": "location", "reason": "why",
        "idempotency_key": key()}))["request_id"]
    r = t.inst.client("POST", "/v1/me/capabilities/%s" % rid, {"answer_ct": seal(k, "capabilities/x", "{}")})
    assert find_error(validation_errors(r), "answer_ct")["code"] == "invalid_answer", r.text
    # The plain answer still works as before.
    assert assert_ok(t.inst.client("POST", "/v1/me/capabilities/%s" % rid, {
        "location": {"latitude": 1, "longitude": 2, "accuracy": 3}}))["status"] == "answered"
    t.stream.close()
