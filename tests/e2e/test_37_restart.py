"""kill -9 in the middle of a turn, then start again on the same data folder:
finalised messages, idempotency records, grants, pending approvals and
unacked updates are all still there, and nothing is duplicated."""
from bridgelib import WAIT, Installation, key
from relaylib import assert_error, assert_ok, wait_until


def _acked(relay, inst, up_to):
    """Waits until the store dropped the updates up to `up_to` (acks are asynchronous)."""
    wait_until(lambda: relay.query("SELECT COUNT(*) FROM updates WHERE installation_id = ? AND update_id <= ?",
                                   (inst.id, up_to))[0][0] == 0, WAIT, what="ack of %d" % up_to)


def _history(inst, session):
    messages = inst.messages(session)
    ids = [m["message_id"] for m in messages]
    assert len(ids) == len(set(ids)), "duplicated messages: %r" % messages
    return {m["message_id"]: m for m in messages}


def test_kill9_mid_turn_loses_nothing_and_duplicates_nothing(relay, user_token):
    inst = Installation(relay, user_token)
    stream = inst.stream()
    sock = inst.connect()
    session = inst.create_session(title="durable")
    assert sock.next_update()["update_id"] == "1"

    # Turn 1, finished.
    i1, user1 = inst.send(session, "first question")
    assert sock.next_update()["update_id"] == "2"
    usage = {"input_tokens": 7, "output_tokens": 3, "model": "m"}
    m1 = inst.open_message(session, i1)
    for chunk in ("A", "B"):
        assert_ok(inst.delta(m1, chunk))
    assert_ok(inst.end(m1, text="AB final", usage=usage, finish_reason="stop"))
    sock.ack("2")
    _acked(relay, inst, 2)

    # An approve_always grant (its approval.resolved update is update 3, unacked).
    _, r = inst.request_approval(session, i1, action="exec", command="make test")
    granted = assert_ok(r)
    assert_ok(inst.decide(granted["approval_id"], "approve_always", scope="tool"))
    resolved = sock.next_update()
    assert resolved["update_id"] == "3" and resolved["type"] == "approval.resolved", resolved

    # Turn 2, in flight: some deltas answered, a pending approval, a running task.
    i2, user2 = inst.send(session, "second question")
    message_update = sock.next_update()
    assert message_update["update_id"] == "4" and message_update["interaction_id"] == i2, message_update
    open_body = {"session_id": session, "interaction_id": i2, "text": "", "idempotency_key": key()}
    m2 = assert_ok(inst.post("sendMessage", open_body))["message_id"]
    delta_keys = []
    for n, chunk in enumerate(("Hel", "lo, ", "wor")):
        delta_keys.append("%s:delta:%d" % (i2, n))
        assert_ok(inst.delta(m2, chunk, idem=delta_keys[-1]))
    assert_ok(inst.task("createTask", session, i2, "call_9", kind="bash"))
    pending_body, r = inst.request_approval(session, i2, action="deploy", command="make deploy")
    pending = assert_ok(r)
    assert pending["auto_resolved"] is False
    unacked = [resolved, message_update]

    before = _history(inst, session)
    assert before[m2]["text"] == "Hello, wor" and before[m2]["state"] == "streaming"

    sock_closed = sock
    relay.kill9()
    sock_closed.wait_closed(WAIT)
    stream.close()
    relay.start()

    # History: the finalised message intact, the open one as its answered deltas made it.
    after = _history(inst, session)
    assert set(after) == {user1, m1, user2, m2}, after
    assert after[m1]["text"] == "AB final" and after[m1]["state"] == "final", after[m1]
    assert after[m1]["usage"] == usage and after[m1]["finish_reason"] == "stop", after[m1]
    assert after[m1] == before[m1]
    assert after[user1] == before[user1] and after[user2] == before[user2]
    assert after[m2]["text"] == "Hello, wor" and after[m2]["state"] == "streaming", after[m2]

    # Unacked updates come back exactly once, in order, then live ones follow.
    stream = inst.stream()
    sock = inst.connect()
    replayed = sock.updates(2)
    assert replayed == unacked, (replayed, unacked)

    # Idempotency records: the replayed open and last delta are recognised.
    again = assert_ok(inst.post("sendMessage", open_body))
    assert again == {"message_id": m2, "idempotent": True}, again
    assert assert_ok(inst.delta(m2, "wor", idem=delta_keys[-1])) == {"message_id": m2, "idempotent": True}
    assert assert_ok(inst.task("createTask", session, i2, "call_9", kind="bash")) == \
        {"task_id": "call_9", "idempotent": True}

    # The grant still resolves the same command by itself.
    _, r = inst.request_approval(session, i2, action="exec", command="make test")
    auto = assert_ok(r)
    assert auto["auto_resolved"] is True and auto["decision"] == "approve_always", auto
    assert auto["scope"] == "tool" and auto["scope_value"] == "make test", auto
    live = sock.next_update()
    assert live["type"] == "approval.resolved" and live["update_id"] == "5", live
    assert live["payload"]["approval_id"] == auto["approval_id"], live

    # The pending approval is still pending and can be decided.
    pending_ids = [p["approval_id"] for p in inst.snapshot()["pending_approvals"]]
    assert pending_ids == [pending_body["approval_id"]], pending_ids
    assert_ok(inst.decide(pending_body["approval_id"], "approve"))
    live = sock.next_update()
    assert live["type"] == "approval.resolved" and live["update_id"] == "6", live
    assert live["payload"] == {"approval_id": pending_body["approval_id"], "decision": "approve"}, live

    # The turn goes on where it stopped.
    assert_ok(inst.delta(m2, "ld"))
    assert_ok(inst.task("finishTask", session, i2, "call_9", status="completed"))
    assert_ok(inst.end(m2, finish_reason="stop"))
    finalized = stream.wait_for("message_finalized", timeout=WAIT)
    assert finalized.data["message_id"] == m2 and finalized.data["text"] == "Hello, world", finalized

    final = _history(inst, session)
    assert set(final) == {user1, m1, user2, m2}, final
    assert final[m2]["text"] == "Hello, world" and final[m2]["state"] == "final", final[m2]
    assert final[m1] == before[m1]
    agent_added = [e for e in stream.events if e.name == "message_added"]
    assert agent_added == [], agent_added
    sock.ack(live["update_id"])
    sock.close()
    stream.close()


def test_unacked_updates_survive_kill9_without_a_socket(relay, user_token):
    inst = Installation(relay, user_token)
    session = inst.create_session()
    sent = [inst.send(session, "offline %d" % n) for n in range(3)]
    relay.kill9()
    relay.start()
    sock = inst.connect()
    updates = sock.updates(4)
    assert [u["update_id"] for u in updates] == ["1", "2", "3", "4"], updates
    assert [u["interaction_id"] for u in updates[1:]] == [i for i, _ in sent]
    sock.ack("4")
    _acked(relay, inst, 4)
    sock.close()
    relay.kill9()
    relay.start()
    sock = inst.connect()
    interaction, _ = inst.send(session, "after")
    update = sock.next_update()
    assert update["update_id"] == "5" and update["interaction_id"] == interaction, update
    sock.close()


def test_delta_keys_of_an_ended_message_survive_a_restart(relay, user_token):
    """A finalised message's deltas are folded into its text; their idempotency keys are kept apart
    (delta_keys), so that a delta replayed after a crash is still recognised, not refused or applied."""
    inst = Installation(relay, user_token)
    session = inst.create_session()
    interaction, _ = inst.send(session, "question")
    mid = inst.open_message(session, interaction)
    keys = [key() for _ in range(3)]
    for k, part in zip(keys, ["one ", "two ", "three"]):
        assert assert_ok(inst.delta(mid, part, idem=k)) == {"message_id": mid}
    # a second, still open message keeps its keys in its delta rows
    open_mid = inst.open_message(session, interaction)
    open_key = key()
    assert_ok(inst.delta(open_mid, "half", idem=open_key))
    assert assert_ok(inst.end(mid)) == {"message_id": mid}
    assert relay.query("SELECT COUNT(*) FROM message_deltas WHERE message_id = ?", (mid,))[0][0] == 0
    assert relay.query("SELECT COUNT(*) FROM delta_keys WHERE message_id = ?", (mid,))[0][0] == 1
    relay.kill9()
    relay.start()

    assert inst.message(session, mid)["text"] == "one two three"
    for k, part in zip(keys, ["one ", "two ", "three"]):
        assert assert_ok(inst.delta(mid, part, idem=k)) == {"message_id": mid, "idempotent": True}
    assert_error(inst.delta(mid, "other text", idem=keys[0]), 409, "idempotency_conflict")
    # a new key on the ended message is refused, and changes nothing
    assert_error(inst.delta(mid, "late", idem=key()), 409, "message_finalized")
    assert assert_ok(inst.delta(open_mid, "half", idem=open_key)) == {"message_id": open_mid, "idempotent": True}
    assert inst.message(session, mid)["text"] == "one two three"
    assert inst.message(session, open_mid)["text"] == "half"


def test_sigterm_with_writes_in_flight_finishes_them_and_exits_cleanly(relay, user_token):
    """SIGTERM while bridges and clients are writing: relayd lets the store finish what it accepted
    (callbacks that answer requests, publish events and queue bridge updates run before the sockets,
    the open-message records and the pending delta batch go away) and exits 0. Under the sanitizer
    build a use after free there aborts relayd, and this test fails."""
    import threading
    import requests as rq

    from relaylib import mint_token
    inst = Installation(relay, user_token)
    sock = inst.connect()
    session = inst.create_session()
    interaction, _ = inst.send(session, "question")
    messages = [inst.open_message(session, interaction) for _ in range(4)]
    # other users, each with an installation and its own rate buckets, keep the store busy
    others = [Installation(relay, mint_token(relay.data, "user%d" % n)) for n in range(6)]
    stop = threading.Event()
    answered = []

    def writer(n):
        me = others[n]
        with rq.Session() as http:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    if i % 3 == 0:
                        r = relay.post("/v1/me/sessions", {"installation_id": me.id}, token=me.user, session=http)
                    elif i % 3 == 1:
                        r = relay.post("/v1/me/sessions/%s/send" % session, {"text": "more %d" % i},
                                       token=inst.user, session=http)
                    else:
                        r = relay.post("/v1/bridge/sendMessageDelta",
                                       {"message_id": messages[n % 4], "delta": "d%d " % i, "idempotency_key": key()},
                                       token=inst.token, session=http)
                    answered.append(r.status_code)
                except rq.RequestException:
                    return  # the relay went away: expected

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    wait_until(lambda: len(answered) >= 60, WAIT, what="writes under way")
    try:
        assert relay.stop() == 0, relay.log_text()[-3000:]
    finally:
        stop.set()
        for t in threads:
            t.join()
        sock.close()
    assert "stopped" in relay.log_text()
    # and what was answered is there after a restart. On a shared bus (Redis) the rate buckets
    # outlive the restart, and the writers may have left this user's empty: a read waits its turn.
    relay.start()

    def agent_texts():
        r = inst.client("GET", "/v1/me/sessions/%s/messages?limit=100" % session)
        return None if r.status_code == 429 else [m["text"] for m in assert_ok(r)["messages"] if m["role"] == "agent"]

    texts = wait_until(agent_texts, WAIT, interval=0.3, what="the user's rate bucket to refill")
    assert len(texts) == 4
