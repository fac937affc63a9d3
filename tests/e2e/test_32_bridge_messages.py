"""Bridge REST messages: a whole turn in the spec's event order, the message
state machine, and the 404/409/410 cases of bridge writes."""
import time

import requests

from bridgelib import WAIT, Installation, Turn, assert_rate_headers, key
from relaylib import assert_error, assert_ok

TURN_EVENTS = ("message_added", "message_delta", "message_finalized", "task_created", "task_progress",
               "task_completed", "task_failed", "task_cancelled")


def test_whole_turn_in_spec_order_with_a_task_inside(relay, user_token):
    t = Turn(relay, user_token, text="what is in /tmp?")
    inst, s, i = t.inst, t.session, t.interaction
    usage = {"input_tokens": 12, "output_tokens": 5, "estimated_cost_usd": 0.001, "model": "m-1", "provider": "p"}

    r = inst.post("sendMessage", {"session_id": s, "interaction_id": i, "text": "", "idempotency_key": key()})
    placeholder = assert_ok(r)["message_id"]
    assert placeholder.startswith("msg_") and placeholder != t.user_message
    assert_rate_headers(r, "msg", 30)
    assert inst.message(s, placeholder)["text"] == " "

    r = inst.delta(placeholder, "Hel")
    assert assert_ok(r) == {"message_id": placeholder}
    assert_rate_headers(r, "delta", 200)
    streaming = inst.message(s, placeholder)
    assert streaming["text"] == "Hel" and streaming["state"] == "streaming", streaming

    assert_ok(inst.task("createTask", s, i, "call_1", kind="bash", status_label="listing", args={"cmd": "ls /tmp"}))
    assert_ok(inst.task("updateTask", s, i, "call_1", progress_percent=50, status_label="half"))
    assert_ok(inst.delta(placeholder, "lo"))
    assert_ok(inst.task("finishTask", s, i, "call_1", status="completed", result={"files": 3}))
    r = inst.end(placeholder, usage=usage, finish_reason="stop")
    assert assert_ok(r) == {"message_id": placeholder}
    assert_rate_headers(r, "msg", 30)

    t.stream.wait_for("message_finalized", timeout=WAIT)
    events = t.events(TURN_EVENTS)
    assert [e.name for e in events] == [
        "message_added", "message_added", "message_delta", "task_created", "task_progress",
        "message_delta", "task_completed", "message_finalized"], events

    user_added, agent_added, d1, created, progress, d2, completed, finalized = (e.data for e in events)
    assert user_added["message_id"] == t.user_message and user_added["role"] == "user", user_added
    assert user_added["text"] == "what is in /tmp?" and user_added["interaction_id"] == i
    assert agent_added["message_id"] == placeholder, agent_added
    assert agent_added["role"] == "agent" and agent_added["text"] == " ", agent_added
    assert agent_added["state"] == "streaming" and agent_added["session_id"] == s, agent_added
    assert agent_added["interaction_id"] == i
    for data, chunk in ((d1, "Hel"), (d2, "lo")):
        assert set(data) == {"session_id", "message_id", "delta", "interaction_id", "ts"}, data
        assert (data["session_id"], data["message_id"], data["delta"], data["interaction_id"]) == (s, placeholder, chunk, i)
        assert isinstance(data["ts"], int) and abs(data["ts"] - time.time() * 1000) < 60000, data
    assert d1["ts"] <= d2["ts"]
    assert created == {"task_id": "call_1", "session_id": s, "interaction_id": i, "kind": "bash",
                       "status_label": "listing", "args": {"cmd": "ls /tmp"}, "name": None}, created
    assert progress["task_id"] == "call_1" and progress["progress_percent"] == 50, progress
    assert progress["status_label"] == "half" and progress["session_id"] == s and progress["interaction_id"] == i
    assert completed["task_id"] == "call_1" and completed["result"] == {"files": 3}, completed
    assert completed["session_id"] == s and completed["interaction_id"] == i, completed
    assert finalized["message_id"] == placeholder and finalized["state"] == "final", finalized
    assert finalized["text"] == "Hello" and finalized["role"] == "agent", finalized
    assert finalized["usage"] == usage and finalized["finish_reason"] == "stop", finalized
    assert finalized["interaction_id"] == i and finalized["session_id"] == s

    final = inst.message(s, placeholder)
    assert final["text"] == "Hello" and final["state"] == "final", final
    assert final["usage"] == usage and final["finish_reason"] == "stop"
    assert isinstance(final["finalized_at"], int)
    history = inst.messages(s)
    assert sorted(m["message_id"] for m in history) == sorted([t.user_message, placeholder]), history
    t.close()


def test_end_with_canonical_text_replaces_the_streamed_text(relay, user_token):
    t = Turn(relay, user_token)
    inst = t.inst
    mid = inst.open_message(t.session, t.interaction, text="Draft: ")
    added = t.stream.wait_for("message_added", lambda d: d["message_id"] == mid, timeout=WAIT)
    assert added.data["text"] == "Draft: " and added.data["state"] == "streaming", added
    assert_ok(inst.delta(mid, "one "))
    assert_ok(inst.delta(mid, "two"))
    assert inst.message(t.session, mid)["text"] == "Draft: one two"
    assert_ok(inst.end(mid, text="The canonical answer.", usage={"output_tokens": 4}, finish_reason="length"))
    event = t.stream.wait_for("message_finalized", timeout=WAIT)
    assert event.data["text"] == "The canonical answer.", event
    assert event.data["usage"] == {"output_tokens": 4} and event.data["finish_reason"] == "length"
    message = inst.message(t.session, mid)
    assert message["text"] == "The canonical answer." and message["state"] == "final", message
    assert message["finish_reason"] == "length"
    t.close()


def test_every_finish_reason_is_accepted(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    for reason in ("stop", "length", "content_filter", "tool_call"):
        mid = t.inst.open_message(t.session, t.interaction, text=reason)
        assert_ok(t.inst.end(mid, finish_reason=reason))
        assert t.inst.message(t.session, mid)["finish_reason"] == reason
    t.close()


def test_an_end_without_a_finish_reason_is_a_normal_end(relay, user_token):
    """The spec makes finish_reason optional and the protocol authors' bridge never sends one
    ({message_id, text_ct, usage?, idempotency_key}): relayd stores such an end as "stop", in the
    event and in the record, so that no client reads a finished reply as a failed one. null is the
    same as absent; a reason that is given is kept as it is."""
    t = Turn(relay, user_token)
    ends = {"absent": {}, "null": {"finish_reason": None}, "cancelled": {"finish_reason": "cancelled"},
            "error": {"finish_reason": "error"}}
    expected = {"absent": "stop", "null": "stop", "cancelled": "cancelled", "error": "error"}
    for name, extra in ends.items():
        mid = t.inst.open_message(t.session, t.interaction, text=name)
        assert_ok(t.inst.end(mid, text="the reply", usage={"output_tokens": 2}, **extra))
        finalized = t.stream.wait_for("message_finalized", lambda d: d["message_id"] == mid, timeout=WAIT).data
        assert finalized["finish_reason"] == expected[name] and finalized["state"] == "final", (name, finalized)
        stored = t.inst.message(t.session, mid)
        assert stored["finish_reason"] == expected[name] and stored["text"] == "the reply", (name, stored)
    t.close()


def test_writes_after_finalisation_are_409_message_finalized(relay, user_token):
    t = Turn(relay, user_token)
    inst = t.inst
    mid = inst.open_message(t.session, t.interaction)
    assert_ok(inst.delta(mid, "done"))
    assert_ok(inst.end(mid))
    assert_error(inst.delta(mid, " more"), 409, "message_finalized")
    message = inst.message(t.session, mid)
    assert message["text"] == "done" and message["state"] == "final", message
    inst.barrier(t.stream, t.session)
    assert [e.data["delta"] for e in t.events(["message_delta"])] == ["done"]
    t.close()


def test_delta_for_an_unknown_message_is_404(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    assert_error(t.inst.delta("msg_doesnotexist0000000", "x"), 404, "message_not_found")
    # the user's own message is not the bridge's to stream into
    t.close()


def test_session_of_another_installation_is_404(relay, user_token):
    t = Turn(relay, user_token)
    other = Installation(relay, user_token, host_label="other-box")
    s, i = t.session, t.interaction
    assert_error(other.post("sendMessage", {"session_id": s, "interaction_id": i, "text": "x",
                                            "idempotency_key": key()}), 404, "session_not_found")
    assert_error(other.task("createTask", s, i, "t1", kind="bash"), 404, "session_not_found")
    _, r = other.request_approval(s, i)
    assert_error(r, 404, "session_not_found")
    # another user's bridge too
    stranger = Installation(relay, relay.token("mallory"))
    assert_error(stranger.post("sendMessage", {"session_id": s, "interaction_id": i, "text": "x",
                                               "idempotency_key": key()}), 404, "session_not_found")
    # and a message of this installation cannot be streamed by another one
    mid = t.inst.open_message(s, i)
    assert_error(other.delta(mid, "intrusion"), 404, "message_not_found")
    assert_error(stranger.end(mid, text="intrusion"), 404, "message_not_found")
    assert t.inst.message(s, mid)["text"] == " "
    inst_ids = {e.data.get("installation_id") for e in t.events(["message_added"])}
    assert inst_ids <= {None, t.inst.id}
    t.close()


def test_unknown_interaction_is_404(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    inst, s = t.inst, t.session
    bogus = "int_doesnotexist000000"
    assert_error(inst.post("sendMessage", {"session_id": s, "interaction_id": bogus, "text": "x",
                                           "idempotency_key": key()}), 404, "interaction_not_found")
    assert_error(inst.task("createTask", s, bogus, "t1", kind="bash"), 404, "interaction_not_found")
    _, r = inst.request_approval(s, bogus)
    assert_error(r, 404, "interaction_not_found")
    # an interaction of another session of the same installation
    s2 = inst.create_session()
    assert_error(inst.post("sendMessage", {"session_id": s2, "interaction_id": t.interaction, "text": "x",
                                           "idempotency_key": key()}), 404, "interaction_not_found")
    t.close()


def test_interaction_past_the_followup_window_is_410(relayd):
    relay = relayd("--followup-window", "1s", testclock=True)
    t = Turn(relay, relay.token("alice"), stream=False)
    inst, s, i = t.inst, t.session, t.interaction
    # inside the window it works
    assert_ok(inst.task("createTask", s, i, "early", kind="bash"))
    relay.advance_clock(2000)
    assert_error(inst.post("sendMessage", {"session_id": s, "interaction_id": i, "text": "late",
                                           "idempotency_key": key()}), 410, "interaction_expired")
    assert_error(inst.task("createTask", s, i, "late", kind="bash"), 410, "interaction_expired")
    _, r = inst.request_approval(s, i)
    assert_error(r, 410, "interaction_expired")
    # a new message opens a new window
    i2, _ = inst.send(s, "again")
    assert_ok(inst.post("sendMessage", {"session_id": s, "interaction_id": i2, "text": "on time",
                                        "idempotency_key": key()}))
    t.close()


def test_session_deleted_mid_stream_is_410(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    inst, s, i = t.inst, t.session, t.interaction
    mid = inst.open_message(s, i)
    assert_ok(inst.delta(mid, "partial"))
    assert_ok(inst.task("createTask", s, i, "t1", kind="bash"))
    assert_ok(inst.client("DELETE", "/v1/me/sessions/%s" % s))
    assert_error(inst.delta(mid, " more"), 410, "session_deleted")
    assert_error(inst.end(mid), 410, "session_deleted")
    assert_error(inst.post("sendMessage", {"session_id": s, "interaction_id": i, "text": "x",
                                           "idempotency_key": key()}), 410, "session_deleted")
    assert_error(inst.task("updateTask", s, i, "t1", progress_percent=10), 410, "session_deleted")
    assert_error(inst.task("createTask", s, i, "t2", kind="bash"), 410, "session_deleted")
    _, r = inst.request_approval(s, i)
    assert_error(r, 410, "session_deleted")
    t.close()


def test_bridge_upload_then_message_with_the_attachment(relay, user_token):
    t = Turn(relay, user_token)
    inst = t.inst
    data = b"line one\nline two\n"
    r = relay.request("POST", "/v1/bridge/uploadAttachment?name=notes.txt", data=data,
                      headers={"Authorization": "Bearer " + inst.token, "Content-Type": "text/plain"})
    uploaded = assert_ok(r)
    assert_rate_headers(r, "default", 30)
    assert set(uploaded) >= {"key", "mime", "size", "name"}, uploaded
    assert uploaded["mime"] == "text/plain" and uploaded["size"] == len(data), uploaded
    assert uploaded["name"] == "notes.txt"

    mid = inst.open_message(t.session, t.interaction, text="see attached",
                            attachments=[{"key": uploaded["key"]}])
    assert_ok(inst.end(mid))
    message = inst.message(t.session, mid)
    assert len(message["attachments"]) == 1, message
    att = message["attachments"][0]
    assert att["key"] == uploaded["key"] and att["mime"] == "text/plain", att
    assert att["size"] == len(data) and att["name"] == "notes.txt", att
    assert isinstance(att.get("url"), str) and att["url"], att
    url = att["url"] if att["url"].startswith("http") else relay.url(att["url"])
    got = requests.get(url, timeout=WAIT)
    assert got.status_code == 200 and got.content == data, (got.status_code, got.content[:100])
    added = t.stream.wait_for("message_added", lambda d: d["message_id"] == mid, timeout=WAIT)
    assert added.data["attachments"][0]["key"] == uploaded["key"]
    assert added.data["attachments"][0].get("url"), added
    t.close()


def test_many_deltas_stay_in_order_over_one_connection(relay, user_token):
    t = Turn(relay, user_token)
    inst = t.inst
    http = requests.Session()
    headers = {"Authorization": "Bearer " + inst.token}
    r = http.post(relay.url("/v1/bridge/sendMessage"), headers=headers, timeout=WAIT,
                  json={"session_id": t.session, "interaction_id": t.interaction, "text": "",
                        "idempotency_key": key()})
    mid = assert_ok(r)["message_id"]
    chunks = ["<%d>" % n for n in range(150)]
    for n, chunk in enumerate(chunks):
        r = http.post(relay.url("/v1/bridge/sendMessageDelta"), headers=headers, timeout=WAIT,
                      json={"message_id": mid, "delta": chunk, "idempotency_key": "d%d" % n})
        assert_ok(r)
    assert_ok(inst.end(mid))
    t.stream.wait_for("message_finalized", timeout=WAIT)
    events = t.events(["message_added", "message_delta", "message_finalized"])
    agent = [e for e in events if e.data.get("message_id") == mid]
    assert agent[0].name == "message_added" and agent[-1].name == "message_finalized", agent[:2]
    assert [e.data["delta"] for e in agent[1:-1]] == chunks
    assert agent[-1].data["text"] == "".join(chunks)
    assert inst.message(t.session, mid)["text"] == "".join(chunks)
    ids = [int(e.id) for e in agent]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    t.close()
