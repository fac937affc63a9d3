"""Approvals: request, snapshot, decision, both notifications, first decision
wins, other users, approve_always grants, expiry."""
import time

from bridgelib import WAIT, Turn, assert_rate_headers
from relaylib import SLOW, assert_error, assert_ok

# content is ours (issue 22): the blocks the agent shows with its request, null when it sends none.
REQUESTED_FIELDS = {"approval_id", "installation_id", "agent_id", "session_id", "interaction_id", "action",
                    "severity", "title", "message", "command", "host", "tool_call_id", "expires_at", "content"}


def _expected_view(t, body, expires_at):
    return {"approval_id": body["approval_id"], "installation_id": t.inst.id, "agent_id": None,
            "session_id": t.session, "interaction_id": t.interaction, "action": body["action"],
            "severity": body["severity"], "title": body["title"], "message": body["message"],
            "command": body["command"], "host": body["host"], "tool_call_id": body["tool_call_id"],
            "expires_at": expires_at, "content": body.get("content")}


def _no_more_updates(t):
    """The next update the bridge gets is a marker: nothing else was queued."""
    marker = t.inst.update_barrier(t.sock, t.session)
    assert marker["type"] == "session.cancelled", marker


def test_request_snapshot_decide_and_both_notifications(relay, user_token):
    t = Turn(relay, user_token)
    inst, s, i = t.inst, t.session, t.interaction
    assert_ok(inst.task("createTask", s, i, "call_rm", kind="exec"))

    before = time.time() * 1000
    body, r = inst.request_approval(s, i, action="exec", severity="high", command="rm -rf build",
                                    host="laptop.local", title="Delete build", message="rm -rf build?")
    result = assert_ok(r)
    assert_rate_headers(r, "approval", 10)
    assert set(result) == {"approval_id", "auto_resolved", "expires_at"}, result
    assert result["approval_id"] == body["approval_id"] and result["auto_resolved"] is False, result
    expires_at = result["expires_at"]
    assert before + 5 * 60000 - 5000 <= expires_at <= time.time() * 1000 + 5 * 60000 + 5000, result

    event = t.stream.wait_for("approval_requested", timeout=WAIT)
    assert REQUESTED_FIELDS <= set(event.data) and set(event.data) - REQUESTED_FIELDS <= {"ts"}, event
    view = _expected_view(t, body, expires_at)
    assert {k: event.data[k] for k in REQUESTED_FIELDS} == view, event

    snap = inst.snapshot()
    assert set(snap) >= {"ts", "pending_approvals"}, snap
    assert isinstance(snap["ts"], int) and abs(snap["ts"] - time.time() * 1000) < 60000, snap
    assert len(snap["pending_approvals"]) == 1, snap
    pending = snap["pending_approvals"][0]
    assert set(pending) == REQUESTED_FIELDS | {"ts"}, pending
    assert {k: pending[k] for k in REQUESTED_FIELDS} == view, pending
    assert isinstance(pending["ts"], int) and before - 5000 <= pending["ts"] <= time.time() * 1000 + 5000

    r = inst.decide(body["approval_id"], "approve")
    decided = assert_ok(r)
    assert decided == {"approval_id": body["approval_id"], "decision": "approve", "session_id": s,
                       "interaction_id": i}, decided
    resolved = t.stream.wait_for("approval_resolved", timeout=WAIT)
    assert resolved.data == decided, resolved
    update = t.sock.next_update()
    assert update["type"] == "approval.resolved", update
    assert update["session_id"] == s and update["interaction_id"] == i, update
    assert update["payload"] == {"approval_id": body["approval_id"], "decision": "approve"}, update
    assert inst.snapshot()["pending_approvals"] == []

    assert_ok(inst.task("finishTask", s, i, "call_rm", status="completed"))
    t.stream.wait_for("task_completed", timeout=WAIT)
    names = [e.name for e in t.events(["task_created", "approval_requested", "approval_resolved",
                                       "task_completed"])]
    assert names == ["task_created", "approval_requested", "approval_resolved", "task_completed"], names

    # The first decision wins; a later one gets it back, and nobody is told twice.
    again = assert_ok(inst.decide(body["approval_id"], "deny"))
    assert again == dict(decided, idempotent=True), again
    inst.barrier(t.stream, s)
    assert len(t.events(["approval_resolved"])) == 1
    _no_more_updates(t)
    t.close()


def test_decision_scope_reaches_client_and_bridge(relay, user_token):
    t = Turn(relay, user_token)
    inst, s, i = t.inst, t.session, t.interaction
    body, r = inst.request_approval(s, i, action="http.get", host="api.example.com")
    assert_ok(r)
    decided = assert_ok(inst.decide(body["approval_id"], "deny", scope="domain", scope_value="api.example.com"))
    assert decided == {"approval_id": body["approval_id"], "decision": "deny", "session_id": s,
                       "interaction_id": i, "scope": "domain", "scope_value": "api.example.com"}, decided
    event = t.stream.wait_for("approval_resolved", timeout=WAIT)
    assert event.data == decided, event
    update = t.sock.next_update()
    assert update["type"] == "approval.resolved", update
    assert update["payload"] == {"approval_id": body["approval_id"], "decision": "deny", "scope": "domain",
                                 "scope_value": "api.example.com"}, update
    # deny stores no grant: the same request asks again
    _, r = inst.request_approval(s, i, action="http.get", host="api.example.com")
    assert assert_ok(r)["auto_resolved"] is False
    t.close()


def test_other_users_and_unknown_ids_get_404(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    body, r = t.inst.request_approval(t.session, t.interaction)
    assert_ok(r)
    mallory = relay.token("mallory")
    assert_error(t.inst.decide(body["approval_id"], "approve", token=mallory), 404, "approval_not_found")
    assert_error(t.inst.decide("apr_doesnotexist", "approve"), 404, "approval_not_found")
    assert assert_ok(t.inst.client("GET", "/v1/me/snapshot", token=mallory))["pending_approvals"] == []
    pending = t.inst.snapshot()["pending_approvals"]
    assert [p["approval_id"] for p in pending] == [body["approval_id"]], pending
    t.close()


def test_approve_always_tool_grant_resolves_the_same_command(relay, user_token):
    t = Turn(relay, user_token)
    inst, s, i = t.inst, t.session, t.interaction
    body, r = inst.request_approval(s, i, action="exec", command="npm test")
    assert_ok(r)
    decided = assert_ok(inst.decide(body["approval_id"], "approve_always", scope="tool"))
    assert decided["decision"] == "approve_always" and decided["scope"] == "tool", decided
    assert decided.get("scope_value", "npm test") == "npm test", decided
    assert t.sock.next_update()["type"] == "approval.resolved"
    requested_before = len(t.events(["approval_requested"]))

    # a later request with the same action and command, in a new turn
    i2, _ = inst.send(s, "run the tests again")
    assert t.sock.next_update()["interaction_id"] == i2
    body2, r = inst.request_approval(s, i2, action="exec", command="npm test", host="elsewhere")
    auto = assert_ok(r)
    assert auto == {"approval_id": body2["approval_id"], "auto_resolved": True, "decision": "approve_always",
                    "scope": "tool", "scope_value": "npm test"}, auto
    update = t.sock.next_update()
    assert update["type"] == "approval.resolved", update
    assert update["interaction_id"] == i2 and update["session_id"] == s, update
    assert update["payload"]["approval_id"] == body2["approval_id"], update
    assert update["payload"]["decision"] == "approve_always", update
    inst.barrier(t.stream, s)
    assert len(t.events(["approval_requested"])) == requested_before
    assert inst.snapshot()["pending_approvals"] == []
    # ours (issue 28, item 7): the user's clients hear of it, marked, with what was asked, and no prompt.
    told = [e.data for e in t.events(["approval_resolved"]) if e.data["approval_id"] == body2["approval_id"]]
    assert len(told) == 1, told
    assert told[0]["auto_resolved"] is True and told[0]["decision"] == "approve_always", told
    assert told[0]["session_id"] == s and told[0]["interaction_id"] == i2, told
    assert told[0]["command"] == "npm test" and told[0]["action"] == "exec" and told[0]["title"], told
    assert told[0]["scope"] == "tool" and told[0]["scope_value"] == "npm test", told

    # another command, or another action with that command, still asks
    _, r = inst.request_approval(s, i2, action="exec", command="npm publish")
    assert assert_ok(r)["auto_resolved"] is False
    _, r = inst.request_approval(s, i2, action="write", command="npm test")
    assert assert_ok(r)["auto_resolved"] is False
    assert len(inst.snapshot()["pending_approvals"]) == 2
    t.close()


def test_grant_scopes_all_domain_and_session(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    inst, s, i = t.inst, t.session, t.interaction

    def ask(session, interaction, **kw):
        _, r = inst.request_approval(session, interaction, **kw)
        return assert_ok(r)

    def grant(decision_scope, **kw):
        first = ask(s, i, **kw)
        assert first["auto_resolved"] is False, first
        assert_ok(inst.decide(first["approval_id"], "approve_always", scope=decision_scope))

    s2 = inst.create_session()
    i2, _ = inst.send(s2, "other session")

    # all: any request with that action
    grant("all", action="read", command="cat a", host="h1")
    got = ask(s2, i2, action="read", command="cat b", host="h2")
    assert got["auto_resolved"] is True and got["scope"] == "all", got
    assert ask(s2, i2, action="write", command="cat a", host="h1")["auto_resolved"] is False

    # domain: the same host
    grant("domain", action="fetch", command="GET /", host="api.example.com")
    got = ask(s2, i2, action="fetch", command="GET /other", host="api.example.com")
    assert got["auto_resolved"] is True and got["scope"] == "domain", got
    assert got["scope_value"] == "api.example.com", got
    assert ask(s2, i2, action="fetch", command="GET /", host="evil.example.com")["auto_resolved"] is False

    # session: the same session
    grant("session", action="edit", command="sed -i", host="h1")
    got = ask(s, i, action="edit", command="vim x", host="h9")
    assert got["auto_resolved"] is True and got["scope"] == "session" and got["scope_value"] == s, got
    assert ask(s2, i2, action="edit", command="sed -i", host="h1")["auto_resolved"] is False
    t.close()


def test_cancelling_a_turn_expires_its_pending_approvals_only(relay, user_token):
    """Ours (issue 22): the agent drops what it asked in a cancelled turn, so its pending approvals can no
    longer be answered; they expire at once, with both notifications. Another turn's approval stays."""
    t = Turn(relay, user_token)
    inst, s, i = t.inst, t.session, t.interaction
    other, _ = inst.send(s, "another turn")
    update = t.sock.next_update()
    assert update["type"] == "session.message" and update["interaction_id"] == other, update
    body = inst.request_approval(s, i)[0]
    kept = inst.request_approval(s, other)[0]
    assert len(inst.snapshot()["pending_approvals"]) == 2

    assert_ok(inst.client("POST", "/v1/me/sessions/%s/cancel" % s, {"interaction_id": i}))
    event = t.stream.wait_for("approval_expired", timeout=WAIT)
    assert event.data == {"approval_id": body["approval_id"], "session_id": s, "interaction_id": i}, event
    updates = [t.sock.next_update(), t.sock.next_update()]
    assert [u["type"] for u in updates] == ["session.cancelled", "approval.expired"], updates
    assert updates[1]["payload"] == {"approval_id": body["approval_id"]}, updates
    assert [p["approval_id"] for p in inst.snapshot()["pending_approvals"]] == [kept["approval_id"]]
    assert_error(inst.decide(body["approval_id"], "approve"), 410, "approval_expired")
    assert_ok(inst.decide(kept["approval_id"], "approve"))
    inst.barrier(t.stream, s)
    assert [e.data["approval_id"] for e in t.events(["approval_expired"])] == [body["approval_id"]]
    t.close()


def test_pending_approval_expires(relayd):
    relay = relayd("--approval-ttl", "1s")
    t = Turn(relay, relay.token("alice"))
    inst, s, i = t.inst, t.session, t.interaction
    t0 = time.monotonic()
    body, r = inst.request_approval(s, i)
    result = assert_ok(r)
    assert abs(result["expires_at"] - (time.time() * 1000 + 1000)) < 2000 * SLOW, result
    assert len(inst.snapshot()["pending_approvals"]) == 1
    event = t.stream.wait_for("approval_expired", timeout=WAIT)
    elapsed = time.monotonic() - t0
    assert elapsed < 3 * SLOW, elapsed
    assert event.data == {"approval_id": body["approval_id"], "session_id": s, "interaction_id": i}, event
    update = t.sock.next_update()
    assert update["type"] == "approval.expired", update
    assert update["session_id"] == s and update["interaction_id"] == i, update
    assert update["payload"] == {"approval_id": body["approval_id"]}, update
    assert inst.snapshot()["pending_approvals"] == []
    assert_error(inst.decide(body["approval_id"], "approve"), 410, "approval_expired")
    inst.barrier(t.stream, s)
    assert t.events(["approval_resolved"]) == []
    _no_more_updates(t)
    t.close()
