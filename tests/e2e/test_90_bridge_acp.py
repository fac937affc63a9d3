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

    def __init__(self, relay, token, tmp_path, agent_flags="", bridge_flags=(), name="bridge", bridge_env=None):
        self.tmp = tmp_path
        self.cwd = tmp_path / "work"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.state = tmp_path / "agent-state"
        self.log_path = tmp_path / "agent.log"
        self.bridge, self.user = paired(relay, token, tmp_path, name)
        self.agent = "acp:%s %s --state %s --log %s %s" % (PYTHON, AGENT, self.state, self.log_path, agent_flags)
        self.bridge_flags = list(bridge_flags)
        self.bridge_env = bridge_env
        self.stream = EventStream(relay, token)
        self.start()

    def start(self):
        self.bridge.start(self.agent, "--cwd", str(self.cwd), *self.bridge_flags, env=self.bridge_env)
        self.bridge.wait_log("acp agent acp-test-agent 1.0 ready")
        # What a client waits for before it names an agent (else 422 agent_not_declared): the manifest that
        # declares the bridge's agents has reached relayd, which comes a moment after the agent is ready.
        wait_until(self.declared, WAIT, what="relayd holding the manifest that declares the bridge's agents")

    def declared(self):
        r = self.user.call("GET", "/v1/me")
        if r.status_code != 200:
            return False
        return any(i["id"] == self.user.installation_id and i.get("agents") for i in assert_ok(r)["installations"])

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

    def wait_event(self, name, interaction, task_id):
        return self.stream.wait_for(name, lambda d: d.get("interaction_id") == interaction
                                    and d.get("task_id") == task_id, timeout=WAIT).data

    def wait_turn(self, session, interaction, timeout=WAIT):
        """Waits for the turn's last agent message to be final (a message ended as a tool call is not the
        last). Events come in the order they were published, so the turn's task events are then on the
        stream too; and the stream spares the user's rate bucket the polling."""
        self.stream.wait_for("message_finalized", lambda d: d.get("interaction_id") == interaction
                             and d.get("finish_reason") != "tool_call", timeout=timeout)

def ordered(replies):
    """The agent messages a client shows, in the order they opened. A turn that begins with a tool call,
    plan or thought ends its placeholder there, empty and as a tool call (docs/api.md): clients hide it."""
    in_order = sorted(replies, key=lambda m: m["created_at"])
    shown = [m for m in in_order if not (m["finish_reason"] == "tool_call" and not m["text"].strip())]
    # Only a placeholder that another message follows is hidden: a turn never ends on one.
    assert in_order[-1] in shown, replies
    return shown


def test_a_reply_streams_and_finishes(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        interaction, replies = acp.turn(session, "hello there agent")
        assert len(replies) == 1, replies
        assert replies[0]["text"] == "echo: hello there agent" and replies[0]["finish_reason"] == "stop", replies
        assert replies[0]["usage"] == {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}, replies
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


def test_tool_calls_become_tasks_and_text_after_them_a_new_message(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        interaction, replies = acp.turn(session, "tools please")
        replies = ordered(replies)
        assert [m["text"] for m in replies] == ["Looking at the file.", "Now editing.", "All done."], replies
        assert [m["finish_reason"] for m in replies] == ["tool_call", "tool_call", "stop"], replies
        created = {e["task_id"]: e for e in acp.events("task_created", interaction)}
        assert set(created) == {"call_read", "call_edit", "call_fail"}, created
        read = created["call_read"]
        assert read["kind"] == "read" and read["status_label"] == read["name"] == "Read notes.txt", read
        assert read["args"] == {"path": "/tmp/notes.txt"}, read
        assert created["call_edit"]["kind"] == "edit" and created["call_fail"]["kind"] == "execute", created
        progress = [e for e in acp.events("task_progress", interaction) if e["task_id"] == "call_read"]
        assert progress[-1]["partial_result"] == {
            "content": [{"type": "text", "text": "reading..."}],
            "locations": [{"path": "/tmp/notes.txt", "line": 3}]}, progress
        done = {e["task_id"]: e for e in acp.events("task_completed", interaction)}
        assert done["call_read"]["result"] == {
            "content": [{"type": "text", "text": "line one\nline two"}],
            "locations": [{"path": "/tmp/notes.txt", "line": 3}], "raw_output": {"lines": 2}}, done
        assert done["call_edit"]["result"]["content"] == [
            {"type": "diff", "path": "/tmp/notes.txt", "old_text": "line one\n", "new_text": "line 1\n"}], done
        failed = acp.events("task_failed", interaction)
        assert len(failed) == 1 and failed[0]["task_id"] == "call_fail", failed
        assert failed[0]["name"] == "Run make", failed
        assert failed[0]["error"] == {"message": "make: no targets"}, failed
        # everything in the order it happened: message, read, message, edit, fail, message
        tasks = sorted(created.values(), key=lambda e: list(created).index(e["task_id"]))
        assert [t["task_id"] for t in tasks] == ["call_read", "call_edit", "call_fail"]
    finally:
        assert acp.close() == 0


def test_a_call_announced_before_its_input_gets_its_task_with_the_input(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        interaction = acp.user.send(session, "twostep")
        approval = acp.stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction,
                                       timeout=WAIT).data
        assert approval["command"] == "/w/fresh.txt" and approval["action"] == "edit", approval
        assert approval["title"] == "Write fresh.txt", approval
        acp.user.decide(approval["approval_id"], "approve")
        acp.wait_turn(session, interaction)
        created = acp.events("task_created", interaction)
        assert len(created) == 1, created
        assert created[0]["args"] == {"file_path": "/w/fresh.txt", "content": "fresh\n"}, created
        assert created[0]["status_label"] == "Write fresh.txt" and created[0]["kind"] == "edit", created
        progress = acp.events("task_progress", interaction)
        assert progress[0]["partial_result"]["content"] == [
            {"type": "diff", "path": "/w/fresh.txt", "old_text": None, "new_text": "fresh\n"}], progress

        # asked before announced: one task, created from the request
        interaction = acp.user.send(session, "askfirst")
        approval = acp.stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction,
                                       timeout=WAIT).data
        assert approval["command"] == "make test" and approval["severity"] == "high", approval
        acp.user.decide(approval["approval_id"], "approve")
        acp.wait_turn(session, interaction)
        created = acp.events("task_created", interaction)
        assert [e["task_id"] for e in created] == [approval["tool_call_id"]], created
        done = acp.wait_event("task_completed", interaction, approval["tool_call_id"])
        assert done["result"]["raw_output"] == {"stdout": "ok", "exit_code": 0}, done
        assert ordered(acp.user.replies(session, interaction))[-1]["text"] == "askfirst: allow-once"
    finally:
        assert acp.close() == 0


def test_a_tool_call_with_megabytes_of_input_and_output_still_reaches_the_relay(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        interaction, replies = acp.turn(session, "big")
        assert ordered(replies)[-1]["text"] == "big done", replies
        # the announcement's diff (2 MB each side) is shown cut, whole enough to read
        diff = acp.wait_event("task_progress", interaction, "call_big")["partial_result"]["content"][0]
        assert diff["type"] == "diff" and diff["truncated"] and len(diff["new_text"]) == 256 * 1024, len(diff["new_text"])
        created = acp.wait_event("task_created", interaction, "call_big")
        assert created["args"]["file_path"] == "/w/big.txt", created
        assert len(created["args"]["content"]) == 16 * 1024, len(created["args"]["content"])
        done = acp.wait_event("task_completed", interaction, "call_big")
        blocks = done["result"]["content"]
        # the update's three texts replace the diff: each cut at 256 KiB, the third past the budget (640 KiB)
        assert [b["type"] for b in blocks] == ["text", "text"] and all(b["truncated"] for b in blocks), \
            [(b["type"], len(b.get("text", ""))) for b in blocks]
        assert done["result"]["omitted"] == 1, done["result"]["omitted"]
        assert len(done["result"]["raw_output"]) == 16 * 1024
        assert "finishTask: HTTP" not in acp.bridge.log_text() and "createTask: HTTP" not in acp.bridge.log_text()
    finally:
        assert acp.close() == 0


def test_plan_and_thoughts_are_tasks(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        interaction, replies = acp.turn(session, "plan it")
        assert [m["text"] for m in ordered(replies)] == ["Working on it.", "Plan finished."], replies
        plan_id = "plan_" + interaction
        created = acp.events("task_created", interaction)
        assert [(e["task_id"], e["kind"]) for e in created] == [(plan_id, "plan")], created
        updates = [e["partial_result"]["entries"] for e in acp.events("task_progress", interaction)]
        assert [[x["status"] for x in entries] for entries in updates] == [
            ["pending", "pending", "pending"], ["completed", "in_progress", "pending"],
            ["completed", "completed", "completed"]], updates
        assert updates[0][0] == {"content": "step 1", "priority": "high", "status": "pending"}, updates
        done = acp.wait_event("task_completed", interaction, plan_id)
        assert [x["status"] for x in done["result"]["entries"]] == ["completed"] * 3, done

        interaction, replies = acp.turn(session, "think hard")
        assert [m["text"] for m in ordered(replies)] == ["The answer is 42."], replies
        think_id = "think_%s_1" % interaction
        created = acp.events("task_created", interaction)
        assert [(e["task_id"], e["kind"], e["status_label"]) for e in created] == [
            (think_id, "think", "Thinking")], created
        done = acp.wait_event("task_completed", interaction, think_id)
        assert done["result"] == {"text": "Let me think about this."}, done
    finally:
        assert acp.close() == 0


def test_approved_write_goes_through_fs_inside_the_cwd(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        target = acp.cwd / "hello.txt"
        target.write_text("old words\n")
        interaction = acp.user.send(session, "write %s new words" % target)
        approval = acp.stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction,
                                       timeout=WAIT).data
        assert approval["action"] == "edit" and approval["severity"] == "medium", approval
        assert approval["title"] == "Write hello.txt", approval
        assert approval["command"] == str(target), approval
        assert approval["message"] == "The agent asks to edit %s" % target, approval
        assert approval["tool_call_id"].startswith("call_"), approval
        assert approval["content"] == [{"type": "diff", "path": str(target), "old_text": "old words\n",
                                         "new_text": "new words\n"}], approval
        assert target.read_text() == "old words\n"
        acp.user.decide(approval["approval_id"], "approve")
        acp.wait_turn(session, interaction)
        replies = ordered(acp.user.replies(session, interaction))
        assert replies[-1]["text"] == "wrote %s (allow-once)" % target, replies
        assert target.read_text() == "new words\n"
        writes = acp.agent_log("fs_write")
        assert writes[-1]["error"] is None and writes[-1]["result"] is None, writes
    finally:
        assert acp.close() == 0


def test_denied_write_leaves_the_file(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        target = acp.cwd / "keep.txt"
        target.write_text("keep me\n")
        interaction = acp.user.send(session, "write %s overwritten" % target)
        approval = acp.stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction,
                                       timeout=WAIT).data
        acp.user.decide(approval["approval_id"], "deny")
        acp.wait_turn(session, interaction)
        replies = ordered(acp.user.replies(session, interaction))
        assert replies[-1]["text"] == "not written (reject-once)", replies
        assert target.read_text() == "keep me\n"
        failed = acp.events("task_failed", interaction)
        assert len(failed) == 1 and failed[0]["task_id"] == approval["tool_call_id"], failed
    finally:
        assert acp.close() == 0


def test_approve_always_covers_the_same_command_only(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        interaction = acp.user.send(session, "run ls -la /srv")
        approval = acp.stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction,
                                       timeout=WAIT).data
        assert approval["action"] == "execute" and approval["severity"] == "high", approval
        assert approval["command"] == "ls -la /srv", approval
        acp.user.decide(approval["approval_id"], "approve_always", scope="tool")
        acp.wait_turn(session, interaction)
        # the agent is allowed once: its own "always" could be broader than the relay's grant
        assert ordered(acp.user.replies(session, interaction))[-1]["text"] == "outcome: allow-once"
        # the same command: the relay's grant answers, nobody is asked
        interaction, replies = acp.turn(session, "run ls -la /srv")
        assert ordered(replies)[-1]["text"] == "outcome: allow-once", replies
        assert acp.events("approval_requested", interaction) == []
        # another command still asks
        interaction = acp.user.send(session, "run rm -rf /srv")
        approval = acp.stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction,
                                       timeout=WAIT).data
        assert approval["command"] == "rm -rf /srv", approval
        acp.user.decide(approval["approval_id"], "deny")
        acp.wait_turn(session, interaction)
        assert ordered(acp.user.replies(session, interaction))[-1]["text"] == "outcome: reject-once"
    finally:
        assert acp.close() == 0


def test_an_expired_approval_rejects(relayd, tmp_path):
    from relaylib import mint_token
    relay = relayd("--approval-ttl", "2s")
    acp = Acp(relay, mint_token(relay.data, "alice"), tmp_path)
    try:
        session = acp.user.create_session()
        interaction = acp.user.send(session, "run make deploy")
        acp.stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        acp.wait_turn(session, interaction)
        assert ordered(acp.user.replies(session, interaction))[-1]["text"] == "outcome: reject-once"
    finally:
        assert acp.close() == 0


def test_cancel_mid_turn(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        interaction = acp.user.send(session, "slow")
        wait_until(lambda: any(m["text"].startswith("..") for m in acp.user.replies(session, interaction)), WAIT,
                   what="dots")
        acp.user.cancel(session, interaction)
        acp.wait_turn(session, interaction)
        replies = ordered(acp.user.replies(session, interaction))
        assert replies[-1]["finish_reason"] == "cancelled", replies
        assert 2 <= replies[-1]["text"].count(".") < 600, replies
        cancelled = acp.wait_event("task_cancelled", interaction, "call_slow")
        assert cancelled["status"] == "cancelled", cancelled
        assert acp.agent_log("cancelled"), acp.agent_log()

        # a permission request pending at the cancel is answered "cancelled"
        interaction = acp.user.send(session, "run sleep 100")
        acp.stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        acp.user.cancel(session, interaction)
        acp.wait_turn(session, interaction)
        assert acp.user.replies(session, interaction)[-1]["finish_reason"] == "cancelled"
        outcomes = [e["result"]["outcome"] for e in acp.agent_log("permission")]
        assert outcomes[-1] == {"outcome": "cancelled"}, outcomes
    finally:
        assert acp.close() == 0


def test_a_crash_ends_the_reply_with_an_error_and_the_agent_comes_back(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        interaction, replies = acp.turn(session, "crash now")
        assert len(replies) == 1, replies
        assert replies[0]["finish_reason"] == "error", replies
        assert replies[0]["text"].startswith("about to crash"), replies
        assert "the agent exited with status 3" in replies[0]["text"], replies
        acp.bridge.wait_log("restarting the acp agent in 1000 ms")
        interaction, replies = acp.turn(session, "whoami")
        assert replies[0]["finish_reason"] == "stop", replies
        # the restarted agent loaded the session it had before
        first = acp.agent_log("session_new")[0]["session"]
        assert replies[0]["text"] == "session " + first, replies
        loads = acp.agent_log("session_load")
        assert loads and loads[-1]["session"] == first and loads[-1]["found"], loads
        assert len({e["pid"] for e in acp.agent_log("initialize")}) == 2
    finally:
        assert acp.close() == 0


def test_a_restarted_bridge_continues_with_session_load(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        interaction, replies = acp.turn(session, "whoami")
        first = acp.agent_log("session_new")[0]["session"]
        assert replies[0]["text"] == "session " + first, replies
        assert acp.bridge.stop() == 0
        acp.start()
        interaction, replies = acp.turn(session, "whoami")
        assert replies[0]["text"] == "session " + first, replies
        assert len(replies) == 1, replies
        assert len(acp.agent_log("session_new")) == 1
        assert acp.agent_log("session_load")[-1]["session"] == first
        # the replayed history did not come back as a reply
        everything = acp.user.messages(session)
        assert [m["text"] for m in everything if m["role"] == "agent"] == ["session " + first] * 2, everything
    finally:
        assert acp.close() == 0


def test_a_session_the_agent_cannot_load_starts_afresh(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        acp.turn(session, "whoami")
        first = acp.agent_log("session_new")[0]["session"]
        assert acp.bridge.stop() == 0
        for name in os.listdir(str(acp.state)):  # the agent forgets its sessions
            os.unlink(os.path.join(str(acp.state), name))
        acp.start()
        _, replies = acp.turn(session, "whoami")
        second = acp.agent_log("session_new")[-1]["session"]
        assert second != first and replies[0]["text"] == "session " + second, replies
        assert acp.agent_log("session_load")[-1] == dict(acp.agent_log("session_load")[-1], session=first,
                                                          found=False)
        assert "could not load session %s" % first in acp.bridge.log_text()
        # the mapping now names the new session: the next start loads it
        assert acp.bridge.stop() == 0
        acp.start()
        _, replies = acp.turn(session, "whoami")
        assert replies[0]["text"] == "session " + second, replies
    finally:
        assert acp.close() == 0


def test_fs_stays_inside_the_cwd_and_unknown_methods_are_refused(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        inside = acp.cwd / "notes.txt"
        inside.write_text("inside\n")
        outside = tmp_path / "secret.txt"
        outside.write_text("secret\n")
        os.symlink(str(outside), str(acp.cwd / "link.txt"))
        _, replies = acp.turn(session, "read %s" % inside)
        assert replies[0]["text"] == "content: inside\n", replies
        for path in (outside, acp.cwd / "link.txt", "%s/../secret.txt" % acp.cwd, "relative.txt"):
            _, replies = acp.turn(session, "read %s" % path)
            assert replies[0]["text"] == "error -32602", (path, replies)
        _, replies = acp.turn(session, "read %s" % (acp.cwd / "missing.txt"))
        assert replies[0]["text"] == "error -32002", replies
        # a write through the link is refused too, and the file outside is untouched
        interaction = acp.user.send(session, "write %s pwned" % (acp.cwd / "link.txt"))
        approval = acp.stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction,
                                       timeout=WAIT).data
        acp.user.decide(approval["approval_id"], "approve")
        acp.wait_turn(session, interaction)
        assert ordered(acp.user.replies(session, interaction))[-1]["text"] == "write failed -32602"
        assert outside.read_text() == "secret\n"
        _, replies = acp.turn(session, "unknown")
        assert replies[0]["text"] == "error -32601", replies
    finally:
        assert acp.close() == 0


def test_commands_and_mode_reach_the_manifest(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        acp.turn(session, "commands")
        acp.turn(session, "mode")
        log = acp.bridge.log_text()
        assert "setManifest: HTTP" not in log, log
        me = assert_ok(acp.user.call("GET", "/v1/me"))
        inst = [i for i in me["installations"] if i["id"] == acp.user.installation_id][0]
        assert [c["name"] for c in inst["commands"]] == ["web", "test", "deploy"], inst
        assert inst["commands"][0] == {"name": "web", "description": "Search the web",
                                       "input_hint": "what to search for"}, inst
        assert inst["agent"]["mode"] == "code", inst
    finally:
        assert acp.close() == 0


def test_stop_reasons_map_to_finish_reasons(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        _, replies = acp.turn(session, "refuse")
        assert replies[0]["finish_reason"] == "content_filter", replies
        _, replies = acp.turn(session, "maxtokens")
        assert replies[0]["finish_reason"] == "length", replies
    finally:
        assert acp.close() == 0


def test_malformed_messages_get_the_json_rpc_errors(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        _, replies = acp.turn(session, "garbage")
        assert replies[0]["text"] == "sent garbage", replies
        answers = [e["msg"] for e in acp.agent_log("in") if "error" in e["msg"]]
        assert {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}} in answers, answers
        assert {"jsonrpc": "2.0", "id": "bad-1", "error": {"code": -32600, "message": "Invalid Request"}} in answers
        assert {"jsonrpc": "2.0", "id": 77, "error": {"code": -32600, "message": "Invalid Request"}} in answers
        # the agent goes on working
        _, replies = acp.turn(session, "still there")
        assert replies[0]["text"] == "echo: still there", replies
    finally:
        assert acp.close() == 0


def test_an_agent_that_needs_a_login_says_so(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path, agent_flags="--auth")
    try:
        session = acp.user.create_session()
        _, replies = acp.turn(session, "hello")
        assert replies[0]["finish_reason"] == "error", replies
        assert "the agent needs a login first" in replies[0]["text"], replies
        log = acp.bridge.log_text()
        assert "the acp agent needs a login before it can start a session" in log, log
        assert "acp agent login method test-login: Test login - run: acp_agent.py login" in log, log
    finally:
        assert acp.close() == 0


def test_a_login_refused_at_the_prompt_says_so_too(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path, agent_flags="--auth-prompt")
    try:
        session = acp.user.create_session()
        _, replies = acp.turn(session, "hello")
        assert replies[0]["finish_reason"] == "error", replies
        assert "the agent needs a login first" in replies[0]["text"], replies
    finally:
        assert acp.close() == 0


def test_an_env_var_login_is_given_when_its_variables_are_set(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path, agent_flags="--auth-env ACP_TEST_KEY",
              bridge_env={"ACP_TEST_KEY": "sk-test"})
    try:
        session = acp.user.create_session()
        _, replies = acp.turn(session, "hello")
        assert replies[0]["text"] == "echo: hello", replies
        assert [e["params"] for e in acp.agent_log("authenticate")] == [{"methodId": "test-env"}]
    finally:
        assert acp.close() == 0
    # without the variable, no authenticate is tried and the user is told to log in
    acp = Acp(relay, user_token, tmp_path / "unset", agent_flags="--auth-env ACP_TEST_KEY", name="bridge2")
    try:
        session = acp.user.create_session()
        _, replies = acp.turn(session, "hello")
        assert "the agent needs a login first" in replies[0]["text"], replies
        assert acp.agent_log("authenticate") == []
    finally:
        assert acp.close() == 0


def test_without_load_session_a_restarted_bridge_starts_a_new_session(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path, agent_flags="--no-load")
    try:
        session = acp.user.create_session()
        acp.turn(session, "whoami")
        assert acp.bridge.stop() == 0
        acp.start()
        acp.turn(session, "whoami")
        assert acp.agent_log("session_load") == []
        assert len(acp.agent_log("session_new")) == 2
    finally:
        assert acp.close() == 0


def _upload(acp, data, mime, name):
    r = acp.user.relay.request("POST", "/v1/me/attachments?name=" + name, data=data,
                               headers={"Authorization": "Bearer " + acp.user.token, "Content-Type": mime})
    return assert_ok(r)["key"]


def test_attachments_as_links_or_inline_as_the_agent_accepts(relay, user_token, tmp_path):
    import base64
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    for flags, inline in (("", False), ("--images", True)):
        acp = Acp(relay, user_token, tmp_path / flags.strip("-") if flags else tmp_path / "plain", agent_flags=flags,
                  name="bridge-" + (flags.strip("-") or "plain"))
        try:
            image = _upload(acp, png, "image/png", "shot.png")
            notes = _upload(acp, "café notes\n".encode(), "text/plain", "notes.txt")
            blob = _upload(acp, b"\x00\x01", "application/octet-stream", "blob.bin")
            session = acp.user.create_session()
            r = acp.user.call("POST", "/v1/me/sessions/%s/send" % session,
                              {"text": "look", "attachments": [{"key": image}, {"key": notes}, {"key": blob}]})
            interaction = assert_ok(r)["interaction_id"]
            acp.wait_turn(session, interaction)
            blocks = acp.agent_log("prompt")[-1]["blocks"]
            assert len(blocks) == 3, blocks
            if inline:
                assert blocks[0]["type"] == "image" and blocks[0]["mimeType"] == "image/png", blocks
                assert base64.b64decode(blocks[0]["data"]) == png
                assert blocks[1]["type"] == "resource", blocks
                assert blocks[1]["resource"]["text"] == "café notes\n", blocks
                assert blocks[1]["resource"]["mimeType"] == "text/plain", blocks
                assert blocks[2]["type"] == "resource_link", blocks
            else:
                assert [b["type"] for b in blocks] == ["resource_link"] * 3, blocks
                assert [b["name"] for b in blocks] == ["shot.png", "notes.txt", "blob.bin"], blocks
                assert blocks[0]["mimeType"] == "image/png" and blocks[0]["size"] == len(png), blocks
                assert "/v1/files/%s?" % image in blocks[0]["uri"], blocks
            # The user is told which image went as a link only, and why (issue 40, item 3); other files say nothing.
            note = "[shot.png reached the agent as a link only: this agent does not take images]\n\n"
            reply = acp.user.wait_reply(session, interaction)
            assert reply["text"] == ("" if inline else note) + "echo: look", reply
        finally:
            assert acp.close() == 0


def test_sessions_run_side_by_side_and_prompts_of_one_session_in_turn(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        first, second = acp.user.create_session(), acp.user.create_session()
        slow = acp.user.send(first, "slow")
        wait_until(lambda: any(m["text"].startswith("..") for m in acp.user.replies(first, slow)), WAIT, what="dots")
        # another session is answered while the first one's prompt runs
        _, replies = acp.turn(second, "meanwhile")
        assert replies[0]["text"] == "echo: meanwhile", replies
        # a second message of the busy session waits for the first prompt
        queued = acp.user.send(first, "queued one")
        wait_until(lambda: acp.user.replies(first, queued), WAIT, what="the queued reply's placeholder")
        assert [e["text"] for e in acp.agent_log("prompt") if e["text"] == "queued one"] == []
        # cancelling the running turn drops the one queued behind it (test_116 has one that runs after it)
        acp.user.cancel(first, slow)
        acp.wait_turn(first, slow)
        acp.wait_turn(first, queued)
        assert acp.user.replies(first, queued)[-1]["finish_reason"] == "cancelled"
        _, replies = acp.turn(first, "then this")
        assert replies[-1]["text"] == "echo: then this", replies
        prompts = [(e["session"], e["text"]) for e in acp.agent_log("prompt")]
        sessions = {text: sid for sid, text in prompts}
        assert sessions["slow"] == sessions["then this"] != sessions["meanwhile"], prompts
        assert [t for _, t in prompts] == ["slow", "meanwhile", "then this"], prompts
    finally:
        assert acp.close() == 0


def test_an_agent_that_cannot_start_fails_the_message_and_says_why(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    broken = tmp_path / "broken.py"
    # coloured, as some agents write even into a pipe: the log gets the text
    broken.write_text("import sys\nsys.stderr.write('\\x1b[31mno API key\\x1b[0m configured\\x07\\n')\nsys.exit(5)\n")
    bridge.start("acp:%s %s" % (PYTHON, broken))
    try:
        bridge.wait_log("acp agent stderr: no API key configured \n")
        bridge.wait_log("the agent exited with status 5")
        session = user.create_session()
        interaction = user.send(session, "hello")
        reply = user.wait_reply(session, interaction, timeout=WAIT + 10)
        assert reply["finish_reason"] == "error", reply
        assert "the agent could not start: the agent exited with status 5" in reply["text"], reply
        # What it wrote on stderr before it died is the user's too (issue 35).
        assert "The agent's last lines on stderr:\nno API key configured \n" in reply["text"], reply
        assert "restarting the acp agent in 2000 ms" in bridge.log_text()
    finally:
        assert bridge.stop() == 0


def test_a_session_the_agent_refuses_shows_its_reason_and_its_stderr(relay, user_token, tmp_path):
    """Issue 35: claude-agent-acp answers a Claude Code that will not start as "Internal error" with the
    reason in the error's data; the user reads it, with the agent's last stderr lines (2 KiB at most)."""
    reason = "Claude Code exited: --dangerously-skip-permissions cannot be used with root"
    acp = Acp(relay, user_token, tmp_path, agent_flags="--fail-new '%s' --fail-new-noise 60 --fail-new-once" % reason)
    try:
        session = acp.user.create_session()
        _, replies = acp.turn(session, "hello")
        text = replies[0]["text"]
        assert replies[0]["finish_reason"] == "error", replies
        head, tail = text.split("\n\nThe agent's last lines on stderr:\n")
        assert head.strip() == "[the agent could not start a session: Internal error (%s)]" % reason, text
        assert tail.endswith("Error handling request session/new\n  code: -32603, message: 'Internal error'\n"
                             "  the real reason: %s\n" % reason), tail
        # Whole lines, the last 2 KiB of them: the first filler lines (and the start banner) are gone.
        assert 1800 < len(tail.encode()) <= 2048, len(tail)
        assert tail.startswith("filler line ") and "filler line 0000" not in tail, tail[:200]
        assert "acp test agent started" not in tail, tail
        log = acp.bridge.log_text()
        assert ("the acp agent could not start a session for relay session %s: Internal error (%s)" % (session, reason)
                in log), log[-3000:]
        assert "acp agent stderr:   the real reason: " + reason in log, log[-3000:]

        # The next message opens the session; its reply is the agent's, with no stderr of the failure before.
        _, replies = acp.turn(session, "hello again")
        assert replies[0]["text"] == "echo: hello again" and replies[0]["finish_reason"] == "stop", replies
    finally:
        assert acp.close() == 0


def test_is_sandbox_other_than_1_is_warned_about_when_root(relay, user_token, tmp_path):
    """Claude Code as root starts no session unless IS_SANDBOX is exactly 1, and says so only in its debug log:
    the bridge, which passes its environment on, warns (docs/bridge.md "Claude Code")."""
    acp = Acp(relay, user_token, tmp_path, bridge_env={"IS_SANDBOX": "0"})
    try:
        warned = "IS_SANDBOX=0 in the environment of root: Claude Code then refuses to start a session"
        assert (warned in acp.bridge.log_text()) == (os.geteuid() == 0), acp.bridge.log_text()[-2000:]
    finally:
        assert acp.close() == 0
    acp = Acp(relay, user_token, tmp_path / "again", bridge_env={"IS_SANDBOX": "1"})
    try:
        assert "IS_SANDBOX" not in acp.bridge.log_text(), acp.bridge.log_text()[-2000:]
    finally:
        assert acp.close() == 0


def test_a_failed_prompt_shows_the_agents_reason_and_stderr(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        interaction, replies = acp.turn(session, "leakfail quota-exceeded")
        assert replies[0]["finish_reason"] == "error", replies
        assert replies[0]["text"].strip() == (
            "[the agent failed: Internal error: quota-exceeded (the model said no to quota-exceeded)]\n\n"
            "The agent's last lines on stderr:\nagent trouble: quota-exceeded"), replies
        log = acp.bridge.log_text()
        assert ("the acp agent failed a prompt of relay session %s: Internal error: quota-exceeded "
                "(the model said no to quota-exceeded)" % session) in log, log[-3000:]
        # A turn that ends well resets what the next failure quotes of stderr.
        _, replies = acp.turn(session, "fine now")
        assert replies[0]["text"] == "echo: fine now", replies
        _, replies = acp.turn(session, "leakfail again")
        assert "agent trouble: quota-exceeded" not in replies[0]["text"], replies
        assert replies[0]["text"].strip().endswith("stderr:\nagent trouble: again"), replies
    finally:
        assert acp.close() == 0


def test_a_cwd_that_does_not_exist_is_refused(relay, user_token, tmp_path):
    bridge, _ = paired(relay, user_token, tmp_path)
    bridge.start("acp:%s %s" % (PYTHON, AGENT), "--cwd", str(tmp_path / "nowhere"), wait_connected=False)
    assert bridge.wait_exit() == 1
    assert "--cwd %s: No such file or directory" % (tmp_path / "nowhere") in bridge.log_text()
    bridge.stop()
