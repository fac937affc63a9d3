"""relay-bridge against a relay that dies, revokes it, or rate-limits it."""
import os
import threading
import uuid

import requests

from relaylib import free_port, metric, mint_token, wait_until
from test_50_bridge_support import PYTHON, WAIT, paired, restart_on_same_port


def test_survives_kill9_and_restart_with_backoff_replay_and_no_duplicate(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start("exec:sleep 2; cat")
    try:
        session = user.create_session()
        first = user.send(session, "one")
        assert user.wait_reply(session, first)["text"] == "one"
        second = user.send(session, "two")
        bridge.wait_log("started the agent", count=2)
        wait_until(lambda: user.replies(session, second), WAIT, what="the placeholder of the second turn")
        relay.kill9()
        bridge.wait_log("reconnecting in 1000 ms")
        bridge.wait_log("reconnecting in 2000 ms")
        restart_on_same_port(relay)
        bridge.wait_log("connected as", count=2, timeout=40)
        # the unacknowledged update came again and was recognised
        reply = user.wait_reply(session, second, timeout=30)
        assert reply["text"] == "two", reply
        bridge.wait_log("skipped (already handled)")
        assert len(user.replies(session, second)) == 1
        assert bridge.log_text().count("started the agent") == 2
        # the backoff was reset by the open: a third turn goes through at once
        third = user.send(session, "three")
        assert user.wait_reply(session, third)["text"] == "three"
        agent_messages = [m for m in user.messages(session) if m["role"] == "agent"]
        assert sorted(m["text"] for m in agent_messages) == ["one", "three", "two"], agent_messages
    finally:
        assert bridge.stop() == 0


def test_revoked_installation_stops_the_bridge_with_a_clear_message(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start("exec:cat")
    user.revoke()
    rc = bridge.wait_exit()
    assert rc == 3, bridge.log_text()
    log = bridge.log_text()
    assert "close code 4401" in log and "pair again" in log, log
    assert "reconnecting" not in log, log
    # started again it is refused at the upgrade (401) and stops at once
    bridge.start("exec:cat", wait_connected=False)
    assert bridge.wait_exit() == 3
    assert "HTTP 401 invalid_token" in bridge.log_text()
    bridge.stop()


def test_429_on_the_delta_bucket_keeps_every_delta_in_order(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    agent = tmp_path / "chatty.py"
    go, enough = tmp_path / "go", tmp_path / "enough"
    # the agent waits until the test has emptied the delta bucket, then writes fast until the test has seen
    # the bridge meet a 429 (however long a loaded machine takes to get there)
    agent.write_text("import os, sys, time\n"
                     "while not os.path.exists(%r): time.sleep(0.01)\n"
                     "n = 0\n"
                     "while n < 400 or not os.path.exists(%r):\n"
                     "    sys.stdout.write('%%d,' %% n); sys.stdout.flush(); time.sleep(0.002); n += 1\n"
                     % (str(go), str(enough)))
    # no batching window: one delta per read, so the agent outruns the delta bucket
    bridge.start("exec:%s %s" % (PYTHON, agent), "--delta-window", "0")
    token = bridge.token()
    other_session = user.create_session()
    message_id = relay.post("/v1/bridge/sendMessage", {"session_id": other_session, "text": "",
                                                        "idempotency_key": str(uuid.uuid4())},
                            token=token).json()["result"]["message_id"]
    stop, empty = threading.Event(), threading.Event()
    failures = []

    def drain():
        # another writer of the same installation keeps the delta bucket empty meanwhile; one
        # kept-alive connection per drainer, so that a long run cannot run out of local ports
        try:
            with requests.Session() as http:
                while not stop.is_set():
                    r = relay.post("/v1/bridge/sendMessageDelta", {"message_id": message_id, "delta": "x",
                                                                   "idempotency_key": str(uuid.uuid4())},
                                   token=token, session=http)
                    if r.status_code == 429:
                        empty.set()
        except Exception as e:  # a dead drainer lets the bucket refill: say so instead of timing out
            failures.append(repr(e))
            raise
    drainers = [threading.Thread(target=drain) for _ in range(8)]
    try:
        session = user.create_session()
        interaction = user.send(session, "go")
        bridge.wait_log("started the agent")
        for t in drainers:
            t.start()
        assert empty.wait(WAIT), "the delta bucket never ran dry"
        # the bridge has no delta answer yet, so nothing tells it to wait: its first call meets a 429
        go.write_text("")
        bridge.wait_log("HTTP 429 rate_limited request_id=req_", timeout=60)
        assert not failures, failures
        stop.set()
        enough.write_text("")
        reply = user.wait_reply(session, interaction, timeout=60)
        count = reply["text"].count(",")
        assert count >= 400 and reply["text"] == "".join("%d," % n for n in range(count)), reply["text"]
    finally:
        stop.set()
        for t in drainers:
            if t.is_alive() or t.ident is not None:
                t.join()
        assert bridge.stop() == 0


def test_pings_are_answered_so_the_bridge_stays_healthy(relayd, user_token, tmp_path):
    metrics_port = free_port()
    relay = relayd("--ws-ping-interval", "300ms", "--ws-pong-timeout", "200ms", "--metrics-listen", "127.0.0.1:%d" % metrics_port)
    token = mint_token(relay.data, "alice")
    bridge, user = paired(relay, token, tmp_path)
    bridge.start("exec:cat")
    try:
        # Eight pings answered in a row: each within its 200 ms, none missed (a missed one degrades the socket).
        wait_until(lambda: metric(metrics_port, "relay_bridge_pongs_total") >= 8, 30, what="eight pongs")
        assert metric(metrics_port, "relay_bridge_pongs_missed_total") == 0
        # At most the ping of the moment waits for its pong (pings read first: pongs only grow meanwhile).
        pings = metric(metrics_port, "relay_bridge_pings_total")
        assert pings - metric(metrics_port, "relay_bridge_pongs_total") <= 1, pings
        me = user.call("GET", "/v1/me").json()["result"]
        assert [i["health"] for i in me["installations"]] == ["healthy"], me
        assert "socket closed" not in bridge.log_text(), bridge.log_text()
        session = user.create_session()
        assert user.wait_reply(session, user.send(session, "still here"))["text"] == "still here"
    finally:
        assert bridge.stop() == 0


def test_a_deleted_session_drops_the_turn_and_the_bridge_goes_on(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    marker = tmp_path / "finished"
    bridge.start("exec:read t; if [ \"$t\" = go ]; then echo first; sleep 1; echo second; sleep 20; touch %s; "
                 "else echo \"$t\"; fi" % marker)
    try:
        session = user.create_session()
        user.send(session, "go")
        bridge.wait_log("started the agent")
        wait_until(lambda: any(m["role"] == "agent" for m in user.messages(session)), WAIT, what="placeholder")
        user.call("DELETE", "/v1/me/sessions/%s" % session)
        bridge.wait_log("HTTP 410 session_deleted request_id=req_", timeout=WAIT)
        bridge.wait_log("dropping the turn")
        bridge.wait_log("cancelled, stopping pid")
        other = user.create_session()
        interaction = user.send(other, "next")
        assert user.wait_reply(other, interaction)["text"] == "next\n"
        assert not marker.exists()
    finally:
        assert bridge.stop() == 0
