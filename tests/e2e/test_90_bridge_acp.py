"""relay-bridge run --agent acp:COMMAND with our ACP test agent
(tests/e2e/acp_agent.py): replies stream and finish, tool calls become tasks
with the documented shapes, text after a tool call is a second agent
message, plans and thoughts are tasks, permission requests become approvals
(approve, deny, approve_always, expiry, cancel), the agent's file writes
stay inside --cwd, a crash ends the open reply with an error and the agent
is restarted, and a restarted bridge continues its sessions with
session/load. The agent logs every message it gets (--log) so that the tests
can see what reached it."""
import json
import os

from relaylib import assert_ok, wait_until
from streams import EventStream
from test_50_bridge_support import PYTHON, WAIT, paired

HERE = os.path.dirname(os.path.abspath(__file__))
AGENT = os.path.join(HERE, "acp_agent.py")


class Acp:
    """A paired bridge running the ACP test agent, with the agent's log and state, a user, an event stream."""

    def __init__(self, relay, token, tmp_path, agent_flags="", bridge_flags=(), name="bridge"):
        self.tmp = tmp_path
        self.cwd = tmp_path / "work"
        self.cwd.mkdir(exist_ok=True)
        self.state = tmp_path / "agent-state"
        self.log_path = tmp_path / "agent.log"
        self.bridge, self.user = paired(relay, token, tmp_path, name)
        self.agent = "acp:%s %s --state %s --log %s %s" % (PYTHON, AGENT, self.state, self.log_path, agent_flags)
        self.bridge_flags = list(bridge_flags)
        self.stream = EventStream(relay, token)
        self.start()

    def start(self):
        self.bridge.start(self.agent, "--cwd", str(self.cwd), *self.bridge_flags)
        self.bridge.wait_log("acp agent acp-test-agent 1.0 ready")

    def close(self):
        self.stream.close()
        return self.bridge.stop()

    def agent_log(self, event=None):
        try:
            with open(self.log_path) as f:
                entries = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []
        return [e for e in entries if event is None or e["event"] == event]

    def events(self, name, interaction):
        return [e.data for e in self.stream.events if e.name == name and e.data.get("interaction_id") == interaction]

    def turn(self, session, text):
        """Sends text and waits until the turn's last agent message is final; returns (interaction, replies)."""
        interaction = self.user.send(session, text)
        self.wait_turn(session, interaction)
        return interaction, self.user.replies(session, interaction)

    def wait_turn(self, session, interaction, timeout=WAIT):
        # The prompt's answer ends the turn: the agent logs it just before it answers.
        def ended():
            replies = self.user.replies(session, interaction)
            return replies and all(m["state"] == "final" for m in replies) and any(
                m["finish_reason"] != "tool_call" for m in replies)
        wait_until(ended, timeout, interval=0.1, what="the end of turn %s" % interaction)


def ordered(replies):
    return sorted(replies, key=lambda m: m["created_at"])


def test_a_reply_streams_and_finishes(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        interaction, replies = acp.turn(session, "hello there agent")
        assert len(replies) == 1, replies
        assert replies[0]["text"] == "echo: hello there agent" and replies[0]["finish_reason"] == "stop", replies
        deltas = "".join(e["delta"] for e in acp.events("message_delta", interaction))
        assert deltas == "echo: hello there agent", deltas
        init = acp.agent_log("initialize")[0]["params"]
        assert init["protocolVersion"] == 1, init
        assert init["clientCapabilities"]["fs"] == {"readTextFile": True, "writeTextFile": True}, init
        assert init["clientCapabilities"]["terminal"] is False, init
        assert init["clientInfo"]["name"] == "relay-bridge", init
        new = acp.agent_log("session_new")
        assert len(new) == 1 and new[0]["cwd"] == str(acp.cwd), new
        # a second message of the same session goes to the same ACP session
        acp.turn(session, "again")
        assert len(acp.agent_log("session_new")) == 1
        assert {p["session"] for p in acp.agent_log("prompt")} == {new[0]["session"]}
    finally:
        assert acp.close() == 0
