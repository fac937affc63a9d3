"""relay-bridge through an outage of relayd mid-turn (issue 17, item 1): the reply is never stored
with a silent hole. Writes are kept and retried while relayd is away (--retry-window, default 30 min)
and the message ends with its whole text in sendMessageEnd; a reply too long for that, which also
lost a delta, ends with finish_reason "error" and says it is incomplete, so that `relay send` exits 4."""
from relaylib import wait_until
from test_50_bridge_support import PYTHON, WAIT, paired, restart_on_same_port

WORDS = ["x%02d" % n for n in range(1, 21)]


def _text_so_far(user, session, interaction):
    replies = user.replies(session, interaction)
    return replies[0]["text"] if replies else ""


def _failed_deltas(bridge, what):
    """The bridge's log lines of a sendMessageDelta that failed, then was retried or given up (bridge/rest.c)."""
    return sum(1 for line in bridge.log_text().splitlines() if "sendMessageDelta" in line and "(%s)" % what in line)


def test_a_reply_survives_an_outage_whole(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    agent = tmp_path / "slow.py"
    agent.write_text("import sys, time\n"
                     "for word in %r:\n"
                     "    sys.stdout.write(word + ' '); sys.stdout.flush(); time.sleep(1)\n" % WORDS)
    bridge.start("exec:%s %s" % (PYTHON, agent))
    try:
        session = user.create_session()
        interaction = user.send(session, "count")
        wait_until(lambda: "x03" in _text_so_far(user, session, interaction), WAIT, what="x03 stored")
        before = _failed_deltas(bridge, "retrying")
        relay.kill9()
        # Away for longer than the three retries of the spec's rule 3 (1 s, 2 s, 4 s, with jitter) the old
        # bridge made before dropping a delta: relayd comes back once the bridge has failed a fourth try, which
        # the old bridge gave up on, and says it retries.
        wait_until(lambda: _failed_deltas(bridge, "retrying") >= before + 4, 60, what="four failed tries of a delta")
        restart_on_same_port(relay)
        reply = user.wait_reply(session, interaction, timeout=90)
        assert reply["text"] == " ".join(WORDS) + " ", reply["text"]
        assert reply["finish_reason"] == "stop", reply
        assert "giving up" not in bridge.log_text().split("connected as")[-1], bridge.log_text()[-3000:]
    finally:
        assert bridge.stop() == 0


def test_a_long_reply_that_lost_a_delta_ends_incomplete(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    agent = tmp_path / "long.py"
    # 120 000 characters: more than relayd keeps as one message's canonical text (100 000).
    agent.write_text("import sys, time\n"
                     "sys.stdout.write('a' * 60000); sys.stdout.flush(); time.sleep(2)\n"
                     "sys.stdout.write('b' * 60000); sys.stdout.flush(); time.sleep(8)\n")
    bridge.start("exec:%s %s" % (PYTHON, agent), "--retry-window", "1s")
    try:
        session = user.create_session()
        interaction = user.send(session, "long")
        wait_until(lambda: "aaaa" in _text_so_far(user, session, interaction), WAIT, what="the first half stored")
        relay.kill9()
        # The second half is written while relayd is away and given up after the 1 s window.
        wait_until(lambda: _failed_deltas(bridge, "giving up") >= 1, WAIT, what="the delta given up")
        restart_on_same_port(relay)
        reply = user.wait_reply(session, interaction, timeout=60)
        assert reply["finish_reason"] == "error", reply["finish_reason"]
        text = reply["text"]
        assert text.startswith("a" * 60000), text[:100]
        assert text.endswith("[incomplete: part of this reply could not be delivered to the relay]"), text[-200:]
        assert len(text) <= 100000, len(text)
        assert "ending it as incomplete" in bridge.log_text(), bridge.log_text()[-3000:]
    finally:
        assert bridge.stop() == 0
