"""Idempotent replays and conflicts for every bridge route scope (spec Limits)."""
from bridgelib import Turn, key
from relaylib import assert_error, assert_ok, find_error, validation_errors


def _send_body(t, idem, text="answer", session=None, interaction=None):
    return {"session_id": session or t.session, "interaction_id": interaction or t.interaction,
            "text": text, "idempotency_key": idem}


def test_send_message_replay_conflict_and_scope(relay, user_token):
    t = Turn(relay, user_token)
    inst = t.inst
    k = key()
    first = assert_ok(inst.post("sendMessage", _send_body(t, k)))
    assert set(first) == {"message_id"}, first
    replay = assert_ok(inst.post("sendMessage", _send_body(t, k)))
    assert replay == {"message_id": first["message_id"], "idempotent": True}, replay
    assert_error(inst.post("sendMessage", _send_body(t, k, text="another answer")), 409, "idempotency_conflict")

    # the same key in another session is another message
    s2 = inst.create_session()
    i2, _ = inst.send(s2, "hi there")
    other = assert_ok(inst.post("sendMessage", _send_body(t, k, session=s2, interaction=i2)))
    assert set(other) == {"message_id"} and other["message_id"] != first["message_id"], other

    inst.barrier(t.stream, t.session)
    agent_added = [e.data["message_id"] for e in t.events(["message_added"]) if e.data["role"] == "agent"]
    assert agent_added == [first["message_id"], other["message_id"]], agent_added
    agents = [m for m in inst.messages(t.session) if m["role"] == "agent"]
    assert [m["message_id"] for m in agents] == [first["message_id"]], agents
    assert agents[0]["text"] == "answer"
    t.close()


def test_delta_replay_conflict_and_scope(relay, user_token):
    t = Turn(relay, user_token)
    inst = t.inst
    mid = inst.open_message(t.session, t.interaction)
    other = inst.open_message(t.session, t.interaction)
    k = "int_x:delta:1"
    assert assert_ok(inst.delta(mid, "Hello", idem=k)) == {"message_id": mid}
    assert assert_ok(inst.delta(mid, "Hello", idem=k)) == {"message_id": mid, "idempotent": True}
    assert_error(inst.delta(mid, "Bye", idem=k), 409, "idempotency_conflict")
    assert_ok(inst.delta(mid, " world", idem="int_x:delta:2"))
    # the same key on another message is its own delta
    assert assert_ok(inst.delta(other, "Other", idem=k)) == {"message_id": other}

    assert inst.message(t.session, mid)["text"] == "Hello world"
    assert inst.message(t.session, other)["text"] == "Other"
    inst.barrier(t.stream, t.session)
    deltas = [(e.data["message_id"], e.data["delta"]) for e in t.events(["message_delta"])]
    assert deltas == [(mid, "Hello"), (mid, " world"), (other, "Other")], deltas
    t.close()


def test_end_replay_and_conflict(relay, user_token):
    t = Turn(relay, user_token)
    inst = t.inst
    mid = inst.open_message(t.session, t.interaction)
    assert_ok(inst.delta(mid, "streamed"))
    k = key()
    assert assert_ok(inst.end(mid, idem=k, text="final", finish_reason="stop")) == {"message_id": mid}
    assert assert_ok(inst.end(mid, idem=k, text="final", finish_reason="stop")) == \
        {"message_id": mid, "idempotent": True}
    assert_error(inst.end(mid, idem=k, text="different", finish_reason="stop"), 409, "idempotency_conflict")
    inst.barrier(t.stream, t.session)
    assert len(t.events(["message_finalized"])) == 1
    message = inst.message(t.session, mid)
    assert message["text"] == "final" and message["state"] == "final", message
    t.close()


def test_create_and_finish_task_replay_by_task_id(relay, user_token):
    t = Turn(relay, user_token)
    inst, s, i = t.inst, t.session, t.interaction
    args = {"cmd": "make"}
    assert assert_ok(inst.task("createTask", s, i, "tc_1", kind="bash", args=args)) == {"task_id": "tc_1"}
    assert assert_ok(inst.task("createTask", s, i, "tc_1", kind="bash", args=args)) == \
        {"task_id": "tc_1", "idempotent": True}
    assert_error(inst.task("createTask", s, i, "tc_1", kind="http", args=args), 409, "idempotency_conflict")

    assert assert_ok(inst.task("finishTask", s, i, "tc_1", status="completed", result=1)) == {"task_id": "tc_1"}
    assert assert_ok(inst.task("finishTask", s, i, "tc_1", status="completed", result=1)) == \
        {"task_id": "tc_1", "idempotent": True}
    inst.barrier(t.stream, s)
    names = [e.name for e in t.events(["task_created", "task_progress", "task_completed"])]
    assert names == ["task_created", "task_completed"], names
    t.close()


def test_update_task_without_key_is_always_new_with_key_replays(relay, user_token):
    t = Turn(relay, user_token)
    inst, s, i = t.inst, t.session, t.interaction
    assert_ok(inst.task("createTask", s, i, "tc_u", kind="bash"))
    # no key: two identical updates are two events
    assert assert_ok(inst.task("updateTask", s, i, "tc_u", progress_percent=10)) == {"task_id": "tc_u"}
    assert assert_ok(inst.task("updateTask", s, i, "tc_u", progress_percent=10)) == {"task_id": "tc_u"}
    # same key and body: a replay
    assert assert_ok(inst.task("updateTask", s, i, "tc_u", progress_percent=20, idempotency_key="p20")) == \
        {"task_id": "tc_u"}
    assert assert_ok(inst.task("updateTask", s, i, "tc_u", progress_percent=20, idempotency_key="p20")) == \
        {"task_id": "tc_u", "idempotent": True}
    assert_error(inst.task("updateTask", s, i, "tc_u", progress_percent=30, idempotency_key="p20"),
                 409, "idempotency_conflict")
    inst.barrier(t.stream, s)
    progress = [e.data["progress_percent"] for e in t.events(["task_progress"])]
    assert progress == [10, 10, 20], progress
    t.close()


def test_request_approval_replay_by_approval_id(relay, user_token):
    t = Turn(relay, user_token)
    inst = t.inst
    body, r = inst.request_approval(t.session, t.interaction)
    first = assert_ok(r)
    replay = assert_ok(inst.post("requestApproval", body))
    assert replay == dict(first, idempotent=True), (first, replay)
    changed = dict(body, title="Something else")
    assert_error(inst.post("requestApproval", changed), 409, "idempotency_conflict")
    inst.barrier(t.stream, t.session)
    assert len(t.events(["approval_requested"])) == 1
    assert len(inst.snapshot()["pending_approvals"]) == 1
    t.close()


def test_idempotency_records_survive_a_restart(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    inst, s, i = t.inst, t.session, t.interaction
    k = key()
    first = assert_ok(inst.post("sendMessage", _send_body(t, k)))
    dk = key()
    assert_ok(inst.delta(first["message_id"], "abc", idem=dk))
    assert_ok(inst.task("createTask", s, i, "tc_r", kind="bash"))
    body, r = inst.request_approval(s, i)
    approval = assert_ok(r)
    t.sock.close()

    relay.restart()

    assert assert_ok(inst.post("sendMessage", _send_body(t, k))) == dict(first, idempotent=True)
    assert_error(inst.post("sendMessage", _send_body(t, k, text="changed")), 409, "idempotency_conflict")
    assert assert_ok(inst.delta(first["message_id"], "abc", idem=dk)) == \
        {"message_id": first["message_id"], "idempotent": True}
    assert assert_ok(inst.task("createTask", s, i, "tc_r", kind="bash")) == {"task_id": "tc_r", "idempotent": True}
    assert assert_ok(inst.post("requestApproval", body)) == dict(approval, idempotent=True)
    assert inst.message(s, first["message_id"])["text"] == "answerabc"
    assert len([m for m in inst.messages(s) if m["role"] == "agent"]) == 1


def test_idempotency_key_is_required_and_at_most_256_characters(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    inst = t.inst
    body = _send_body(t, "x")
    del body["idempotency_key"]
    errors = validation_errors(inst.post("sendMessage", body))
    assert find_error(errors, "idempotency_key")["code"] == "invalid_type", errors
    errors = validation_errors(inst.post("sendMessage", _send_body(t, "k" * 257)))
    assert find_error(errors, "idempotency_key")["code"] == "too_big", errors
    errors = validation_errors(inst.post("sendMessage", _send_body(t, "")))
    assert find_error(errors, "idempotency_key")["code"] == "too_small", errors
    # any non-empty string up to 256 characters is a key, not only UUIDs
    assert_ok(inst.post("sendMessage", _send_body(t, "k" * 256)))
    assert_ok(inst.post("sendMessage", _send_body(t, "int_abc:delta:3", text="other")))
    mid = inst.open_message(t.session, t.interaction)
    errors = validation_errors(inst.post("sendMessageDelta", {"message_id": mid, "delta": "x"}))
    assert find_error(errors, "idempotency_key")["code"] == "invalid_type", errors
    errors = validation_errors(inst.post("sendMessageEnd", {"message_id": mid}))
    assert find_error(errors, "idempotency_key")["code"] == "invalid_type", errors
    t.close()
