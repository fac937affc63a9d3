"""A session's timeline (issue 22): messages, tasks and approvals in the order they happened,
paged like the history; tasks kept with their session; approval content; manifest commands."""
import base64
import time

from bridgelib import WAIT, Installation, Turn, key
from relaylib import assert_error, assert_ok, find_error, paced, validation_errors

TASK_EVENTS = ("task_created", "task_progress", "task_completed", "task_failed", "task_cancelled")
DIFF = {"type": "diff", "path": "/work/app.py", "old_text": "x = 1\n", "new_text": "x = 2\n"}


def timeline(inst, session_id, token=None, **query):
    q = "&".join("%s=%s" % kv for kv in query.items())
    return inst.client("GET", "/v1/me/sessions/%s/timeline%s" % (session_id, "?" + q if q else ""), token=token)


def whole(inst, session_id):
    result = assert_ok(timeline(inst, session_id, limit=100))
    assert result["has_more"] is False and result["next_cursor"] is None, result
    return result["items"]


def tick():
    """Lets the clock move on, so that the next write has a later created_at than the last."""
    time.sleep(0.003)


def ids(items):
    out = []
    for item in items:
        obj = item[item["type"]]
        out.append(obj.get("message_id") or obj.get("task_id") or obj.get("approval_id"))
    return out


def play_turn(t):
    """One turn as the acp: agent plays it: text, a tool call, an approval with the diff, another tool call that
    fails, a plan, and the last reply. Returns the ids in the order they happened."""
    inst, s, i = t.inst, t.session, t.interaction
    tick()
    first = inst.open_message(s, i, "Let me look at the file.")
    assert_ok(inst.end(first, finish_reason="tool_call"))
    tick()
    assert_ok(inst.task("createTask", s, i, "call_read", kind="read", status_label="Read app.py",
                        args={"path": "/work/app.py"}))
    assert_ok(inst.task("updateTask", s, i, "call_read",
                        partial_result={"content": [{"type": "text", "text": "x = 1"}], "locations": []}))
    # a step without a partial result keeps the last one
    assert_ok(inst.task("updateTask", s, i, "call_read", progress_percent=50))
    assert_ok(inst.task("finishTask", s, i, "call_read", status="completed", name="Read app.py",
                        result={"content": [{"type": "text", "text": "x = 1\n"}], "locations": [{"path": "/work/app.py"}]}))
    tick()
    body, r = inst.request_approval(s, i, action="edit", title="Edit app.py", command="/work/app.py",
                                    content=[DIFF], severity="medium")
    assert_ok(r)
    approval_id = body["approval_id"]
    assert_ok(inst.decide(approval_id, "approve"))
    tick()
    assert_ok(inst.task("createTask", s, i, "call_run", kind="execute", status_label="pytest",
                        args={"command": "pytest -q"}))
    assert_ok(inst.task("finishTask", s, i, "call_run", status="failed",
                        result={"content": [{"type": "terminal", "terminal_id": "t1", "output": "1 failed",
                                             "exit_code": 1}]},
                        error={"message": "exit status 1"}))
    tick()
    plan = "plan_" + i
    entries = [{"content": "Edit app.py", "priority": "high", "status": "completed"},
               {"content": "Run the tests", "priority": "medium", "status": "in_progress"}]
    assert_ok(inst.task("createTask", s, i, plan, kind="plan", status_label="Plan"))
    assert_ok(inst.task("updateTask", s, i, plan, partial_result={"entries": entries}))
    tick()
    last = inst.open_message(s, i, "")
    assert_ok(inst.delta(last, "The edit is in; "))
    assert_ok(inst.delta(last, "one test fails."))
    return [t.user_message, first, "call_read", approval_id, "call_run", plan, last], approval_id


def test_a_turn_reads_back_in_the_order_it_happened(relay, user_token):
    t = Turn(relay, user_token)
    order, approval_id = play_turn(t)
    items = whole(t.inst, t.session)
    # newest first, like the history; the reply still streaming is there with its text so far
    assert ids(items) == list(reversed(order)), ids(items)
    assert [it["type"] for it in reversed(items)] == ["message", "message", "task", "approval", "task", "task",
                                                      "message"]
    for item in items:
        obj = item[item["type"]]
        assert item["at"] == obj["created_at"], item
        assert isinstance(item["cursor"], str) and item["cursor"], item
    assert [it["at"] for it in items] == sorted((it["at"] for it in items), reverse=True)

    by_id = dict(zip(ids(items), items))
    streaming = by_id[order[-1]]["message"]
    assert streaming["state"] == "streaming" and streaming["text"] == "The edit is in; one test fails.", streaming
    assert by_id[order[1]]["message"]["finish_reason"] == "tool_call"

    read = by_id["call_read"]["task"]
    assert read == {
        "task_id": "call_read", "session_id": t.session, "interaction_id": t.interaction, "kind": "read",
        "name": "Read app.py", "status_label": "Read app.py", "status": "completed",
        "args": {"path": "/work/app.py"},
        "partial_result": {"content": [{"type": "text", "text": "x = 1"}], "locations": []},
        "result": {"content": [{"type": "text", "text": "x = 1\n"}], "locations": [{"path": "/work/app.py"}]},
        "error": None, "created_at": read["created_at"], "updated_at": read["updated_at"]}, read
    assert read["updated_at"] >= read["created_at"]
    run = by_id["call_run"]["task"]
    assert run["status"] == "failed" and run["error"] == {"message": "exit status 1"}, run
    assert run["result"]["content"][0]["exit_code"] == 1 and run["partial_result"] is None, run
    plan = by_id[order[5]]["task"]
    assert plan["kind"] == "plan" and plan["status"] == "progressing", plan
    assert [e["status"] for e in plan["partial_result"]["entries"]] == ["completed", "in_progress"], plan

    approval = by_id[approval_id]["approval"]
    assert approval["content"] == [DIFF], approval
    assert approval["state"] == "resolved" and approval["decision"] == "approve", approval
    assert approval["action"] == "edit" and approval["command"] == "/work/app.py", approval
    assert approval["session_id"] == t.session and approval["installation_id"] == t.inst.id, approval
    assert approval["resolved_at"] >= approval["created_at"], approval
    assert "user_id" not in approval, approval
    for field in ("title", "message", "severity", "host", "tool_call_id", "scope", "scope_value", "expires_at",
                  "interaction_id"):
        assert field in approval, (field, approval)

    # the user's own message, and the history agrees with the timeline's messages
    assert by_id[order[0]]["message"]["role"] == "user"
    history = [m["message_id"] for m in t.inst.messages(t.session)]
    assert history == [x for x in ids(items) if x.startswith("msg_")], history
    t.close()


def test_pages_follow_the_cursor_to_the_end(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    order, _ = play_turn(t)
    everything = whole(t.inst, t.session)
    seen, cursor, pages = [], None, 0
    while True:
        query = {"limit": 2}
        if cursor is not None:
            query["before"] = cursor
        page = assert_ok(timeline(t.inst, t.session, **query))
        pages += 1
        assert 1 <= len(page["items"]) <= 2, page
        seen += page["items"]
        if not page["has_more"]:
            assert page["next_cursor"] is None, page
            break
        assert page["next_cursor"] == page["items"][-1]["cursor"], page
        cursor = page["next_cursor"]
    assert pages == 4 and seen == everything, (pages, ids(seen))
    # any item's cursor starts the next page right after it
    for n, item in enumerate(everything):
        rest = assert_ok(timeline(t.inst, t.session, before=item["cursor"], limit=100))
        assert rest["items"] == everything[n + 1:], (n, ids(rest["items"]))
    # the default page holds all of these; limit is bounded like the history's
    assert assert_ok(timeline(t.inst, t.session))["items"] == everything
    for bad, code in (("0", "too_small"), ("101", "too_big"), ("x", "invalid_type")):
        errors = validation_errors(timeline(t.inst, t.session, limit=bad))
        assert find_error(errors, "limit")["code"] == code, errors
    t.close()


def test_bad_and_foreign_cursors_are_400(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    order, _ = play_turn(t)
    items = whole(t.inst, t.session)
    other = t.inst.create_session()
    t.inst.send(other, "another conversation")
    foreign = whole(t.inst, other)[0]["cursor"]

    def forged(raw):
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    good = items[2]
    kind, at, ident = base64.urlsafe_b64decode(good["cursor"] + "==").decode().split(":", 2)
    bad = ["not*base64", forged("garbage"), forged("x:%s:%s" % (at, ident)), forged("%s:%s:nobody" % (kind, at)),
           forged("%s:%d:%s" % (kind, int(at) + 1, ident)), forged("%s::%s" % (kind, ident)), foreign, "%00"]
    for cursor in bad:
        r = timeline(t.inst, t.session, before=cursor)
        errors = validation_errors(r)
        assert find_error(errors, "before")["code"] == "invalid_string", (cursor, errors)
    # the cursor of the other session is good there
    assert assert_ok(timeline(t.inst, other, before=foreign))["items"] == []
    t.close()


def test_another_users_session_is_404(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    bob = relay.token("bob")
    assert_error(timeline(t.inst, t.session, token=bob), 404, "session_not_found")
    assert_error(timeline(t.inst, "ses_doesnotexist", limit=5), 404, "session_not_found")
    # deleted: gone from the timeline as from the history, back with a restore
    assert_ok(t.inst.client("DELETE", "/v1/me/sessions/%s" % t.session))
    assert_error(timeline(t.inst, t.session), 404, "session_not_found")
    assert_ok(t.inst.client("POST", "/v1/me/sessions/%s/restore" % t.session))
    assert len(whole(t.inst, t.session)) == 1
    t.close()


def test_tasks_outlive_a_restart_and_go_with_their_session(relayd):
    relay = relayd("--delete-grace", "1s")
    token = relay.token("alice")
    t = Turn(relay, token, stream=False)
    play_turn(t)
    before = whole(t.inst, t.session)
    t.close()
    relay.restart()
    assert whole(t.inst, t.session) == before

    other = t.inst.create_session()
    i, _ = t.inst.send(other, "keep me")
    assert_ok(t.inst.task("createTask", other, i, "call_kept", kind="read"))
    assert relay.query("SELECT COUNT(*) FROM tasks WHERE session_id = ?", (t.session,))[0][0] == 3
    assert relay.query("SELECT COUNT(*) FROM approvals WHERE session_id = ?", (t.session,))[0][0] == 1
    deleted = assert_ok(t.inst.client("DELETE", "/v1/me/sessions/%s" % t.session))["session"]
    deadline = time.time() + WAIT
    while time.time() < deadline:
        if relay.query("SELECT COUNT(*) FROM sessions WHERE id = ?", (t.session,))[0][0] == 0:
            break
        time.sleep(0.1)
    assert time.time() * 1000 >= deleted["restore_until"]
    assert relay.query("SELECT COUNT(*) FROM tasks WHERE session_id = ?", (t.session,)) == [(0,)]
    assert relay.query("SELECT COUNT(*) FROM approvals WHERE session_id = ?", (t.session,)) == [(0,)]
    assert relay.query("SELECT COUNT(*) FROM tasks WHERE session_id = ?", (other,)) == [(1,)]
    assert_error(timeline(t.inst, t.session), 404, "session_not_found")


def test_every_task_event_names_its_card(relay, user_token):
    t = Turn(relay, user_token)
    inst, s, i = t.inst, t.session, t.interaction
    assert_ok(inst.task("createTask", s, i, "c1", kind="edit", status_label="Edit a.py", args={"path": "a.py"}))
    assert_ok(inst.task("updateTask", s, i, "c1", partial_result={"content": [DIFF]}))
    assert_ok(inst.task("finishTask", s, i, "c1", status="completed", name="Edit a.py", result={"content": [DIFF]}))
    assert_ok(inst.task("createTask", s, i, "c2", kind="think"))
    assert_ok(inst.task("finishTask", s, i, "c2", status="cancelled"))
    t.stream.wait_for("task_cancelled", timeout=WAIT)
    events = t.events(TASK_EVENTS)
    assert [e.name for e in events] == ["task_created", "task_progress", "task_completed", "task_created",
                                        "task_cancelled"]
    for e in events:
        for field in ("task_id", "session_id", "interaction_id", "kind", "status_label", "name"):
            assert field in e.data, (field, e.name, e.data)
        assert e.data["session_id"] == s and e.data["interaction_id"] == i, e.data
    c1 = [e.data for e in events if e.data["task_id"] == "c1"]
    assert [d["kind"] for d in c1] == ["edit"] * 3
    assert [d["status_label"] for d in c1] == ["Edit a.py"] * 3
    assert [d["name"] for d in c1] == [None, None, "Edit a.py"]
    assert c1[1]["partial_result"] == {"content": [DIFF]} and c1[2]["result"] == {"content": [DIFF]}
    c2 = [e.data for e in events if e.data["task_id"] == "c2"]
    assert [(d["kind"], d["name"], d["status_label"]) for d in c2] == [("think", None, None)] * 2, c2
    t.close()


def test_approval_content_is_validated_kept_and_compared(relay, user_token):
    t = Turn(relay, user_token)
    inst, s, i = t.inst, t.session, t.interaction
    command = {"type": "terminal", "terminal_id": "t1", "output": "$ rm -rf build", "exit_code": None}
    body, r = inst.request_approval(s, i, action="execute", content=[{"type": "text", "text": "rm -rf build"},
                                                                     command], severity="high")
    assert_ok(r)
    event = t.stream.wait_for("approval_requested", lambda d: d["approval_id"] == body["approval_id"], timeout=WAIT)
    assert event.data["content"] == body["content"], event.data
    pending = [a for a in inst.snapshot()["pending_approvals"] if a["approval_id"] == body["approval_id"]]
    assert len(pending) == 1 and pending[0]["content"] == body["content"], pending
    # the same key and body replays; another content under the same id is a conflict
    again = assert_ok(inst.post("requestApproval", body))
    assert again["idempotent"] is True, again
    changed = dict(body, content=[{"type": "text", "text": "rm -rf /"}])
    assert_error(inst.post("requestApproval", changed), 409, "idempotency_conflict")
    # without content: null in every view
    plain, r = inst.request_approval(s, i)
    assert_ok(r)
    event = t.stream.wait_for("approval_requested", lambda d: d["approval_id"] == plain["approval_id"], timeout=WAIT)
    assert event.data["content"] is None, event.data

    for content, path, code in (
            ([{"type": "text"}] * 33, "content", "too_big"),
            ([{"text": "no type"}], "content.0.type", "invalid_type"),
            ([{"type": 3}], "content.0.type", "invalid_type"),
            ([{"type": ""}], "content.0.type", "too_small"),
            (["text"], "content.0", "invalid_type"),
            ({"type": "text"}, "content", "invalid_type")):
        bad, r = inst.request_approval(s, i, content=content)
        errors = validation_errors(r)
        assert find_error(errors, path)["code"] == code, (content, errors)
    # The approval bucket holds 10 and refills 2 a second: a 429 is waited out as it says.
    made = []
    assert_ok(paced(lambda: made.append(inst.request_approval(
        s, i, content=[{"type": "text", "text": str(n)} for n in range(32)])) or made[-1][1]))
    ok32, r = made[-1]
    # the decision of each, in the timeline
    assert_ok(inst.decide(body["approval_id"], "deny"))
    items = [it["approval"] for it in whole(inst, s) if it["type"] == "approval"]
    decided = {a["approval_id"]: (a["state"], a["decision"], len(a["content"] or [])) for a in items}
    assert decided == {body["approval_id"]: ("resolved", "deny", 2), plain["approval_id"]: ("pending", None, 0),
                       ok32["approval_id"]: ("pending", None, 32)}, decided
    t.close()


def test_manifest_commands_and_mode_show_in_the_installation(relay, user_token):
    inst = Installation(relay, user_token)
    stream = inst.stream()

    def mine():
        me = assert_ok(inst.client("GET", "/v1/me"))
        return [x for x in me["installations"] if x["id"] == inst.id][0]

    view = mine()
    assert view["agent"] is None and view["commands"] == [], view
    commands = [{"name": "review", "description": "Review the changes", "input_hint": "what to look at"},
                {"name": "init"}]
    assert assert_ok(inst.post("setManifest", {"commands": commands})) == {"tools": 0}
    event = stream.wait_for("installation_updated", timeout=WAIT)
    assert event.data["installation_id"] == inst.id
    assert event.data["installation"]["commands"] == commands, event.data
    assert mine()["commands"] == commands
    # the agent and its mode; the commands sent before are kept
    assert_ok(inst.post("setManifest", {"agent": {"name": "claude-code", "version": "1.0", "mode": "plan"},
                                        "tools": [{"name": "bash"}]}))
    event = stream.wait_for("installation_updated", lambda d: d["installation"]["agent"] is not None, timeout=WAIT)
    assert event.data["installation"]["agent"] == {"name": "claude-code", "version": "1.0", "mode": "plan"}
    assert event.data["installation"]["commands"] == commands
    view = mine()
    assert view["agent"] == {"name": "claude-code", "version": "1.0", "mode": "plan"} and view["commands"] == commands
    # the same again changes nothing the user sees: no event
    count = len(stream.events)
    assert assert_ok(inst.post("setManifest", {"agent": {"name": "claude-code", "version": "1.0", "mode": "plan"},
                                               "tools": [{"name": "bash"}]})) == {"tools": 1}
    inst.barrier(stream, inst.create_session())
    assert [e.name for e in stream.events[count:] if e.name == "installation_updated"] == []
    # an agent without a mode: null; the latest list of commands wins, [] clears them
    assert_ok(inst.post("setManifest", {"agent": {"name": "gemini"}, "commands": []}))
    stream.wait_for("installation_updated", lambda d: d["installation"]["commands"] == [], timeout=WAIT)
    assert mine()["agent"] == {"name": "gemini", "version": None, "mode": None}

    for body, path, code in (
            ({"commands": [{"name": "x"}] * 201}, "commands", "too_big"),
            ({"commands": [{"name": ""}]}, "commands.0.name", "too_small"),
            ({"commands": [{"name": "n" * 65}]}, "commands.0.name", "too_big"),
            ({"commands": [{"name": "x", "description": "d" * 501}]}, "commands.0.description", "too_big"),
            ({"commands": [{"name": "x", "input_hint": "h" * 201}]}, "commands.0.input_hint", "too_big"),
            ({"commands": [{"description": "no name"}]}, "commands.0.name", "invalid_type"),
            ({"agent": {"name": "a", "mode": 3}}, "agent.mode", "invalid_type")):
        errors = validation_errors(inst.post("setManifest", body))
        assert find_error(errors, path)["code"] == code, (body, errors)
    assert_ok(inst.post("setManifest", {"commands": [{"name": "c%d" % n} for n in range(200)]}))
    stream.close()
