"""relay-bridge run --agent exec:COMMAND: one turn, exit statuses, cancel."""
from test_50_bridge_support import WAIT, paired


def test_a_turn_streams_stdout_into_the_reply(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    agent = "exec:printf 'you said: '; cat; printf ' [%s %s]' \"$RELAY_SESSION_ID\" \"$RELAY_INTERACTION_ID\""
    bridge.start(agent)
    try:
        session = user.create_session()
        interaction = user.send(session, "hello agent")
        reply = user.wait_reply(session, interaction)
        assert reply["text"] == "you said: hello agent [%s %s]" % (session, interaction), reply
        assert reply["finish_reason"] == "stop", reply
        # processed updates are acknowledged: the bridge's ack reached the relay
        bridge.wait_log("update", count=1)
    finally:
        assert bridge.stop() == 0


def test_a_failing_agent_finishes_with_error_and_says_why(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start("exec:echo partial; echo 'model not found' >&2; exit 3")
    try:
        session = user.create_session()
        interaction = user.send(session, "hi")
        reply = user.wait_reply(session, interaction)
        assert reply["finish_reason"] == "error", reply
        assert reply["text"].startswith("partial\n"), reply
        assert "exit status 3" in reply["text"] and "model not found" in reply["text"], reply
    finally:
        assert bridge.stop() == 0


def test_cancel_stops_the_command(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    marker = tmp_path / "finished"
    bridge.start("exec:echo started; sleep 30; touch %s" % marker)
    try:
        session = user.create_session()
        interaction = user.send(session, "long job")
        bridge.wait_log("started the agent")
        # the first words arrive while it runs
        from relaylib import wait_until
        wait_until(lambda: any("started" in m["text"] for m in user.replies(session, interaction)), WAIT,
                   what="streamed text")
        user.cancel(session, interaction)
        reply = user.wait_reply(session, interaction, timeout=10)
        assert reply["finish_reason"] == "cancelled" and reply["text"].endswith("[cancelled]"), reply
        assert reply["text"].startswith("started"), reply
        assert not marker.exists()
    finally:
        assert bridge.stop() == 0


def test_turns_of_two_sessions_run_side_by_side(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start("exec:sleep 1; tr a-z A-Z")
    try:
        s1, s2 = user.create_session(), user.create_session()
        i1, i2 = user.send(s1, "first"), user.send(s2, "second")
        assert user.wait_reply(s1, i1)["text"] == "FIRST"
        assert user.wait_reply(s2, i2)["text"] == "SECOND"
    finally:
        assert bridge.stop() == 0
