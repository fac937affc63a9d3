"""`relay` against relayd and the real relay-bridge running examples/echo_agent.py:
the bridge pairs and prints a code, `relay pair` claims it, `relay send`
streams the agent's reply, and an approval the agent asks for is answered
with `relay approve` (the agent is told the gateway's word for it, per the
spec's decision mapping).

Binaries: RELAY_CLI and RELAY_BRIDGE, else both next to RELAYD.
"""
import json
import os
import subprocess

from relaylib import mint_token
from test_50_bridge_support import BRIDGE, EXAMPLES, PYTHON, RelayBridge
from test_60_relay_cli import WAIT, Cli

ECHO_AGENT = "jsonl:%s %s" % (PYTHON, os.path.join(EXAMPLES, "echo_agent.py"))


def pair_real_bridge(cli, relay, tmp_path):
    bridge = RelayBridge(relay, tmp_path)
    proc = subprocess.Popen([BRIDGE, "pair", "--server", relay.url(""), "--name", "echo-box", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=bridge.env())
    try:
        code = json.loads(proc.stdout.readline())["code"]
        claimed = cli.json("pair", code)
        out, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, (out, err)
    assert json.loads(out.strip().splitlines()[-1])["installation_id"] == claimed["installation_id"]
    return bridge, claimed["installation_id"]


def test_send_and_approve_through_relay_bridge(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.json("login", "--server", relay.url(""), "--token", mint_token(relay.data, "alice"))
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    bridge.start(ECHO_AGENT)
    try:
        assert cli.json("installations")["installations"][0]["health"] == "healthy"
        ses = cli.json("new", "--installation", inst, "--title", "echo")["session_id"]

        send = cli.start("send", ses, "hello from the terminal")
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        deltas = [line["data"]["delta"] for line in send.events("message_delta")]
        # The bridge batches deltas into ~30 ms windows (spec: rate limits), so their count varies.
        assert "".join(deltas) == "hello from the terminal" and len(deltas) >= 1, deltas
        assert send.events("done")[0]["data"]["text"] == "hello from the terminal"

        send = cli.start("send", ses, "run ls -la")
        asked = send.wait_for("approval_requested")["data"]
        assert asked["command"] == "ls -la"
        cli.json("approve", asked["approval_id"], "--always", "--scope", "tool")
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        # spec: approve_always reaches the agent's gateway as allow-always.
        # The agent ran it (issue 28, item 9): the reply says so, the listing is the task's result.
        ran = send.events("done")[0]["data"]["text"]
        assert ran.startswith("allow-always: ran `ls -la` in /") and ran.endswith(": exit status 0"), ran
        listing = send.events("task_completed")[0]["data"]["result"]["content"][0]
        assert listing["type"] == "terminal" and listing["output"].startswith("total "), listing
        assert [t["data"]["name"] for t in send.events("task_completed")] == ["shell"]

        # The second turn asked first: its placeholder ended empty, as a tool call (clients hide it), and
        # the reply after the approval is a message of its own below the card (docs/bridge.md).
        history = cli.json("history", ses)["messages"]
        assert [m["role"] for m in history] == ["user", "agent", "user", "agent", "agent"], history
        assert history[3]["finish_reason"] == "tool_call" and not history[3]["text"].strip(), history
        assert history[4]["text"] == ran, history
    finally:
        assert bridge.stop() == 0
