"""The tour's agent (issue 17, item 4): examples/echo_agent.py with --delay answers word by word, so
that a reply visibly streams through the real relay-bridge and relayd into `relay send`, and Ctrl-C
(SIGINT) cancels it halfway: the reply ends with [cancelled] and only some of its words."""
import os
import signal
import time

from relaylib import mint_token
from test_50_bridge_support import EXAMPLES, PYTHON
from test_60_relay_cli import WAIT, Cli
from test_63_relay_with_bridge import pair_real_bridge

SLOW_ECHO = "jsonl:%s %s --delay 0.25" % (PYTHON, os.path.join(EXAMPLES, "echo_agent.py"))


def test_a_reply_streams_word_by_word_and_ctrl_c_cancels_it(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.json("login", "--server", relay.url(""), "--token", mint_token(relay.data, "alice"))
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    bridge.start(SLOW_ECHO)
    try:
        ses = cli.json("new", "--installation", inst, "--title", "tour")["session_id"]
        words = "one two three four five six"
        send = cli.start("send", ses, words)
        send.wait_for("message_delta")
        first = time.monotonic()
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        spread = time.monotonic() - first
        deltas = [line["data"]["delta"] for line in send.events("message_delta")]
        # Six words, a quarter second apart: at least one delta per word, over more than a second.
        assert "".join(deltas) == words and len(deltas) >= 6, deltas
        assert spread >= 1.0, spread

        many = " ".join("w%02d" % n for n in range(40))
        send = cli.start("send", ses, many)
        send.wait_for("message_delta")
        send.wait_for("message_delta")
        send.proc.send_signal(signal.SIGINT)
        assert send.finish() == 3, (send.lines, "".join(send.stderr))
        assert send.events("done")[-1]["data"]["status"] == "cancelled"

        def cancelled_reply():
            replies = [m for m in cli.json("history", ses)["messages"] if m["role"] == "agent"]
            # history is oldest first: the cancelled reply is the last.
            return replies[-1] if replies and replies[-1]["state"] == "final" else None
        deadline = time.monotonic() + WAIT
        while cancelled_reply() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        reply = cancelled_reply()
        assert reply is not None, cli.json("history", ses)
        assert reply["text"].startswith("w00 w01") and reply["text"].endswith("[cancelled]"), reply
        assert "w39" not in reply["text"], reply
    finally:
        assert bridge.stop() == 0
