"""A null plain field beside its ciphertext counts as absent (docs/api.md,
"Ciphertext fields, route by route"; issue 34, finding 6): on every route of
the table, in an encrypted session, `text: null` beside `text_ct` and the
like are taken, and the ciphertext is what is stored. A plain value there
is still refused by name."""
import json
import uuid

from bridgelib import WAIT, key
from e2elib import encrypted_session, seal
from relaylib import assert_ok, find_error, validation_errors


def _refused(r, field):
    problem = find_error(validation_errors(r), field)
    assert problem is not None and "encrypted" in problem["message"], r.text


def test_null_plain_fields_beside_ciphertext_are_taken_on_every_route(relay, user_token):
    e, sock, stream, sid = encrypted_session(relay, user_token)
    k = e.session_key
    msg, tasks, appr, caps = ("%s/%s" % (p, sid) for p in ("messages", "tasks", "approvals", "capabilities"))

    # POST send: text null.
    sent = assert_ok(e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text": None, "text_ct": seal(k, msg, "q")}))
    i = sent["interaction_id"]
    _refused(e.me("POST", "/v1/me/sessions/%s/send" % sid, {"text": "", "text_ct": seal(k, msg, "q")}), "text")

    # PATCH the session: title null beside title_ct.
    title_ct = seal(k, "sessions/" + sid, "secret title")
    r = assert_ok(e.me("PATCH", "/v1/me/sessions/%s" % sid, {"title": None, "title_ct": title_ct}))
    assert json.dumps(r).find(title_ct) >= 0, r
    _refused(e.me("PATCH", "/v1/me/sessions/%s" % sid, {"title": "x", "title_ct": title_ct}), "title")

    # sendMessage, sendMessageDelta, sendMessageEnd.
    mid = assert_ok(e.inst.post("sendMessage", {"session_id": sid, "interaction_id": i, "text": None,
                                                "text_ct": seal(k, msg, ""), "idempotency_key": key()}))["message_id"]
    assert_ok(e.inst.post("sendMessageDelta", {"message_id": mid, "delta": None, "delta_ct": seal(k, msg, "a"),
                                               "idempotency_key": key()}))
    _refused(e.inst.post("sendMessageDelta", {"message_id": mid, "delta": "a", "delta_ct": seal(k, msg, "a"),
                                              "idempotency_key": key()}), "delta")
    assert_ok(e.inst.post("sendMessageEnd", {"message_id": mid, "text": None, "text_ct": seal(k, msg, "ab"),
                                             "idempotency_key": key()}))

    # createTask, updateTask, finishTask: every plain field null.
    base = {"session_id": sid, "interaction_id": i, "task_id": "t1"}
    assert_ok(e.inst.post("createTask", dict(base, kind="read", status_label=None, args=None,
                                             status_label_ct=seal(k, tasks, "Reading"),
                                             args_ct=seal(k, tasks, "{}"))))
    assert_ok(e.inst.post("updateTask", dict(base, progress_percent=10, status_label=None, partial_result=None,
                                             partial_result_ct=seal(k, tasks, "1"))))
    assert_ok(e.inst.post("finishTask", dict(base, status="completed", status_label=None, error=None, result=None,
                                             result_ct=seal(k, tasks, "{}"))))
    _refused(e.inst.post("createTask", dict(base, task_id="t2", kind="read", args={"a": 1})), "args")

    # requestApproval: every plain field null beside details_ct.
    details = seal(k, appr, json.dumps({"title": "Run", "command": "ls"}))
    body = {"session_id": sid, "interaction_id": i, "approval_id": "apr_" + uuid.uuid4().hex, "action": "exec",
            "severity": "low", "details_ct": details, "idempotency_key": key(), "title": None, "message": None,
            "command": None, "host": None, "tool_call_id": None, "content": None}
    assert_ok(e.inst.post("requestApproval", body))
    event = stream.wait_for("approval_requested", timeout=WAIT)
    assert event.data["details_ct"] == details and event.data["title"] is None, event
    _refused(e.inst.post("requestApproval", dict(body, approval_id="apr_" + uuid.uuid4().hex, command="ls",
                                                 idempotency_key=key())), "command")

    # requestDeviceCapability: reason null beside reason_ct.
    assert_ok(e.inst.post("requestDeviceCapability", {"session_id": sid, "interaction_id": i,
                                                      "capability": "location", "reason": None,
                                                      "reason_ct": seal(k, caps, "why"), "idempotency_key": key()}))

    # The ciphertext is what went in, the plain fields stay null on the reads.
    items = assert_ok(e.me("GET", "/v1/me/sessions/%s/timeline" % sid))["items"]
    task = [it["task"] for it in items if it["type"] == "task"][0]
    assert task["args"] is None and task["result"] is None and task["result_ct"] is not None, task
    messages = assert_ok(e.me("GET", "/v1/me/sessions/%s/messages" % sid))["messages"]
    assert all(m["text"] is None and m["text_ct"] for m in messages), messages

    # A plain session: text null is no text (Required); a null ciphertext field is still refused at its name.
    plain = assert_ok(e.me("POST", "/v1/me/sessions", {"installation_id": e.inst.id}))["session_id"]
    r = e.me("POST", "/v1/me/sessions/%s/send" % plain, {"text": None})
    assert find_error(validation_errors(r), "text")["message"] == "Required", r.text
    r = e.me("POST", "/v1/me/sessions/%s/send" % plain, {"text": "hi", "text_ct": None})
    assert find_error(validation_errors(r), "text_ct") is not None, r.text
    sock.close()
    stream.close()
