"""Bridge health: ping/pong, degraded, 503 agent_degraded, 4001 after three missed pongs."""
import pytest

from bridgelib import WAIT, Installation, wait_for_health
from relaylib import assert_error

FAST_PINGS = ("--ws-ping-interval", "500ms", "--ws-pong-timeout", "300ms")


def _statuses(stream, inst):
    return [e.data["status"] for e in stream.events
            if e.name == "agent_health_changed" and e.data["installation_id"] == inst.id]


@pytest.fixture
def fast(relayd):
    return relayd(*FAST_PINGS)


def test_health_follows_the_socket(relay, user_token):
    inst = Installation(relay, user_token)
    stream = inst.stream()
    assert inst.health() == "offline"
    sock = inst.connect()
    event = stream.wait_for("agent_health_changed", timeout=WAIT)
    assert event.data == {"installation_id": inst.id, "status": "healthy"}, event
    assert inst.health() == "healthy"
    sock.close()
    event = stream.wait_for("agent_health_changed", lambda d: d["status"] == "offline", timeout=WAIT)
    assert event.data == {"installation_id": inst.id, "status": "offline"}, event
    assert inst.health() == "offline"
    assert _statuses(stream, inst) == ["healthy", "offline"]
    stream.close()


def test_pings_answered_keep_the_agent_healthy(fast):
    inst = Installation(fast, fast.token("alice"))
    stream = inst.stream()
    sock = inst.connect(auto_pong=True)
    session = inst.create_session()
    pings = 0
    # Four ping intervals (more than the three misses that would close it).
    while pings < 4:
        frame = sock.next_frame_any(WAIT)
        if frame["type"] == "ping":
            assert frame == {"type": "ping"}, frame
            pings += 1
    assert inst.health() == "healthy"
    assert sock.close_code is None and sock.connected
    inst.barrier(stream, session)
    assert _statuses(stream, inst) == ["healthy"]
    inst.send(session, "still there")
    sock.close()
    stream.close()


def test_missed_pong_degrades_refuses_sends_and_a_pong_recovers(fast):
    inst = Installation(fast, fast.token("alice"))
    stream = inst.stream()
    session = inst.create_session()
    sock = inst.connect(auto_pong=False)
    stream.wait_for("agent_health_changed", lambda d: d["status"] == "healthy", timeout=WAIT)
    event = stream.wait_for("agent_health_changed", lambda d: d["status"] == "degraded", timeout=WAIT)
    assert event.data == {"installation_id": inst.id, "status": "degraded"}, event
    # The socket closes after the third miss (one more second); act now.
    err = assert_error(inst.client("POST", "/v1/me/sessions/%s/send" % session, {"text": "hello?"}),
                       503, "agent_degraded")
    assert isinstance(err.get("retry_after_ms"), int) and err["retry_after_ms"] > 0, err
    assert inst.health() == "degraded"
    # A pong brings it back.  (Answer every ping from now on; the manual pong
    # also covers a ping that arrived before auto_pong was switched on.)
    sock.auto_pong = True
    sock.send({"type": "pong"})
    after = stream.events.index(event) + 1
    stream.wait_for("agent_health_changed", lambda d: d["status"] == "healthy", timeout=WAIT, after=after)
    assert inst.health() == "healthy"
    interaction, _ = inst.send(session, "back")
    # the refused message never reached the bridge; the accepted one did
    updates = []
    while True:
        update = sock.next_update(WAIT)
        updates.append(update)
        if update["type"] == "session.message":
            break
    assert [u["type"] for u in updates] == ["session.started", "session.message"], updates
    assert updates[-1]["interaction_id"] == interaction
    assert updates[-1]["payload"]["message"]["text"] == "back"
    sock.close()
    stream.close()


def test_three_missed_pongs_close_with_4001(fast):
    inst = Installation(fast, fast.token("alice"))
    stream = inst.stream()
    session = inst.create_session()
    sock = inst.connect(auto_pong=False)
    assert sock.wait_closed(WAIT) == 4001
    frames = []
    while not sock.frames.empty():
        frames.append(sock.frames.get_nowait())
    # three pings went unanswered, then the close
    assert [f for f in frames if f["type"] == "ping"] == [{"type": "ping"}] * 3, frames
    stream.wait_for("agent_health_changed", lambda d: d["status"] == "offline", timeout=WAIT)
    assert _statuses(stream, inst) == ["healthy", "degraded", "offline"]
    assert inst.health() == "offline"
    # offline again: a send is accepted and waits for the bridge
    interaction, _ = inst.send(session, "queued")
    sock = inst.connect()
    updates = sock.updates(2)
    assert [u["type"] for u in updates] == ["session.started", "session.message"], updates
    assert updates[1]["interaction_id"] == interaction
    wait_for_health(inst, "healthy")
    sock.close()
    stream.close()
