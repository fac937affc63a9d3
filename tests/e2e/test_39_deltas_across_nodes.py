"""Deltas are answered only once written, and stay right when two relayd
processes write to one message: two nodes on one store (the same SQLite file
here), a bridge whose calls alternate between them."""
import os

from bridgelib import WAIT, Installation, key
from relaylib import assert_error, assert_ok


def two_nodes(relayd, tmp_path):
    store = "sqlite:%s" % os.path.join(str(tmp_path), "shared.db")
    a = relayd("--store", store)
    b = relayd("--store", store)
    return a, b


def test_a_message_streamed_through_two_nodes_is_whole_and_in_order(relayd, tmp_path):
    a, b = two_nodes(relayd, tmp_path)
    inst = Installation(a, a.token("alice"))
    sock = inst.connect()
    session = inst.create_session()
    interaction, _ = inst.send(session, "count to twenty")
    mid = inst.open_message(session, interaction)
    words, keys = [], []
    for n in range(20):
        node = a if n % 2 == 0 else b
        word = "w%02d " % n
        k = key()
        r = node.post("/v1/bridge/sendMessageDelta", {"message_id": mid, "delta": word, "idempotency_key": k},
                      token=inst.token)
        assert assert_ok(r) == {"message_id": mid}, (n, r.text)
        words.append(word)
        keys.append(k)
    # A retry on the other node is a replay there too; another body under the key is a conflict.
    for n in (3, 4):
        other = a if n % 2 == 1 else b
        r = other.post("/v1/bridge/sendMessageDelta", {"message_id": mid, "delta": words[n], "idempotency_key": keys[n]},
                       token=inst.token)
        assert assert_ok(r) == {"message_id": mid, "idempotent": True}, r.text
        r = other.post("/v1/bridge/sendMessageDelta", {"message_id": mid, "delta": "other", "idempotency_key": keys[n]},
                       token=inst.token)
        assert_error(r, 409, "idempotency_conflict")
    streamed = inst.message(session, mid)
    assert streamed["state"] == "streaming" and streamed["text"] == "".join(words), streamed
    r = b.post("/v1/bridge/sendMessageEnd", {"message_id": mid, "idempotency_key": key(), "finish_reason": "stop"},
               token=inst.token)
    assert_ok(r)
    final = inst.message(session, mid)
    assert final["state"] == "final" and final["text"] == "".join(words), final
    # Both nodes now refuse a new delta: the message ended on the other one.
    for node in (a, b):
        r = node.post("/v1/bridge/sendMessageDelta", {"message_id": mid, "delta": "late", "idempotency_key": key()},
                      token=inst.token)
        assert_error(r, 409, "message_finalized")
    sock.close()


def test_a_delta_is_durable_once_answered(relayd, tmp_path):
    relay = relayd()
    inst = Installation(relay, relay.token("alice"))
    session = inst.create_session()
    interaction, _ = inst.send(session)
    mid = inst.open_message(session, interaction)
    for n in range(30):
        assert_ok(inst.delta(mid, "d%d " % n))
    # Answered means written: a kill -9 right after the last answer loses none of them.
    relay.kill9()
    relay.start()
    text = inst.message(session, mid)["text"]
    assert text == "".join("d%d " % n for n in range(30)), text
