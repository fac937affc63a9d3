"""The real Claude Code, through the real @zed-industries/claude-agent-acp (pinned in
tests/agents/package.json and its lock file, installed by `make test-agents`), against a scripted
stand-in of the Anthropic Messages API (fake_anthropic.py).

First the agent alone, spoken to over ACP by the small client of agentlib: the assertions there
are what Claude Code really sends (the update kinds, a tool call announced empty then filled, the
permission options, the stop reasons), which relay-bridge's acp: agent has to map. Then end to end:
relayd, relay-bridge run --agent 'acp:…', and a client that approves or denies on the relay.

What is avoided, and how:
- No model API: ANTHROPIC_BASE_URL points at the stand-in, the key is a made-up sk-test-…; the
  agent's HOME and CLAUDE_CONFIG_DIR are a temporary folder, so no login or setting of the machine
  is read; the agent's environment is built from nothing (agentlib.claude_env), not inherited.
- No other traffic: CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, DISABLE_AUTOUPDATER=1 (and the
  telemetry and error-report switches) turn off what Claude Code would send on its own; and the
  agent runs in a network namespace of its own (agentlib.NetSandbox: `unshare --net`, `nsenter`)
  whose only interface is a loopback where the stand-in and a recording proxy listen. Nothing can
  leave from there (no route, no name resolves). What the agent still tries goes to the proxy
  (HTTPS_PROXY), which records it and answers 403: Claude Code 2.1.83 fetches the plugin blocklist
  from GitHub once per start; the tests allow that one refused request (ClaudeRig.known_refused) and
  fail on any other. The stand-in records every request: only POST /v1/messages?beta=true is seen.
- Root: the tests run as root (CI does) and do NOT set IS_SANDBOX (but one, which shows what
  IS_SANDBOX=0 does as root: no session starts, and the user reads why). Claude Code refuses to *skip*
  permission checks as root (--dangerously-skip-permissions); in the adapter (dist/acp-agent.js)
  being root only drops the bypassPermissions mode and passes allowDangerouslySkipPermissions=false
  to Claude Code (IS_ROOT gates ALLOW_BYPASS and nothing else). The path we test is the opposite
  one, the default mode that asks before each edit or command, which does not look at the user:
  the tests check that bypassPermissions is not offered when root (so the root path is the one
  under test) and that the permission prompts come all the same. An unprivileged user
  (setpriv to nobody) would need the repository's node_modules readable by that user wherever CI
  clones it, for nothing gained on that path.
"""
import json
import os

from agentlib import WAIT, AcpClient, ClaudeRig, ThroughBridge
from fake_anthropic import tools_then_text

ORIGINAL = "line one\nline two\n"


def _rig(tmp_path, steps, text="All done."):
    rig = ClaudeRig(tmp_path)
    rig.model.script = tools_then_text(steps, text)
    return rig


def _reply_text(client):
    return "".join(u["update"]["content"].get("text", "") for u in client.updates
                   if u["update"]["sessionUpdate"] == "agent_message_chunk")


def _tool_updates(client, tool_call_id):
    return [u["update"] for u in client.updates
            if u["update"].get("toolCallId") == tool_call_id]


def test_claude_code_over_acp_asks_before_an_edit_and_makes_it(tmp_path):
    """Read (not asked: inside the working folder), then Edit: asked, with the diff; allowed once;
    Claude Code writes the file itself (no fs/write_text_file, though the client offers it)."""
    target = os.path.join(str(tmp_path), "work", "notes.txt")
    rig = _rig(tmp_path, [("Read", {"file_path": target}),
                          ("Edit", {"file_path": target, "old_string": "line two", "new_string": "line 2 edited"})])
    with open(target, "w") as f:
        f.write(ORIGINAL)
    client = AcpClient(rig.argv, rig.env, rig.cwd, fs=True, stderr_path=str(tmp_path / "agent.stderr"))
    client.permission_choice = lambda params: "allow"
    try:
        init = client.initialize()
        assert init["protocolVersion"] == 1, init
        assert init["agentInfo"]["name"] == "@zed-industries/claude-agent-acp", init
        assert init["agentInfo"]["version"] == "0.23.1", init
        assert init["authMethods"] == [], init  # the key in its environment is enough: no authenticate
        caps = init["agentCapabilities"]
        assert caps["loadSession"] is True and caps["promptCapabilities"]["image"] is True, caps

        session = client.new_session(rig.cwd)
        modes = [m["id"] for m in session["modes"]["availableModes"]]
        assert session["modes"]["currentModeId"] == "default", session["modes"]
        if os.geteuid() == 0:
            assert "bypassPermissions" not in modes, modes  # the root path of the adapter
        result = client.prompt(session["sessionId"], "Change line two of notes.txt")
        assert result["stopReason"] == "end_turn", result

        # one permission request, for the Edit only, with the diff and the three options
        assert len(client.permission_requests) == 1, client.permission_requests
        asked = client.permission_requests[0]
        call = asked["toolCall"]
        assert call["kind"] == "edit" and call["title"] == "Edit notes.txt", call
        assert call["rawInput"]["file_path"] == target, call
        assert call["content"] == [{"type": "diff", "path": target, "oldText": "line two",
                                    "newText": "line 2 edited"}], call
        assert [(o["kind"], o["optionId"]) for o in asked["options"]] == [
            ("allow_always", "allow_always"), ("allow_once", "allow"), ("reject_once", "reject")], asked

        with open(target) as f:
            assert f.read() == "line one\nline 2 edited\n"
        assert client.fs_calls == [], client.fs_calls

        # the tool call: announced empty, filled by an update, then completed
        updates = _tool_updates(client, call["toolCallId"])
        first = [u for u in updates if u["sessionUpdate"] == "tool_call"]
        assert len(first) == 1 and first[0]["status"] == "pending" and first[0]["rawInput"] == {}, updates
        assert any(u.get("rawInput", {}).get("old_string") == "line two" for u in updates
                   if u["sessionUpdate"] == "tool_call_update"), updates
        assert updates[-1]["status"] == "completed", updates
        assert "updated successfully" in updates[-1]["rawOutput"], updates[-1]
        reads = [u for u in client.updates if u["update"].get("kind") == "read"]
        assert reads, "no Read tool call"

        text = _reply_text(client)
        assert text.startswith("I will use Read.I will use Edit.All done. [tool ok: The file "), text
        kinds = set(client.kinds())
        assert {"agent_message_chunk", "tool_call", "tool_call_update", "available_commands_update"} <= kinds, kinds
        assert kinds <= {"agent_message_chunk", "tool_call", "tool_call_update", "available_commands_update",
                         "usage_update"}, kinds

        # the stand-in saw the turn: three model calls, the last one carrying the Edit's result
        conversation = rig.model.conversation()
        assert len(conversation) == 3, rig.model.paths()
        assert all(body["stream"] is True for body in conversation), conversation
        rig.assert_stayed_home()
    finally:
        client.close()
        rig.close()


def test_claude_code_over_acp_command_denied_is_not_run(tmp_path):
    """Bash: asked with the command line as the title; rejected; the command never runs, the model
    is told, the turn ends normally."""
    made = os.path.join(str(tmp_path), "work", "made.txt")
    rig = _rig(tmp_path, [("Bash", {"command": "echo hi > made.txt && echo done", "description": "Make a file"})],
               text="Understood.")
    client = AcpClient(rig.argv, rig.env, rig.cwd, stderr_path=str(tmp_path / "agent.stderr"))
    client.permission_choice = lambda params: "reject"
    try:
        client.initialize()
        session = client.new_session(rig.cwd)
        result = client.prompt(session["sessionId"], "Make a file with a command")
        assert result["stopReason"] == "end_turn", result
        assert len(client.permission_requests) == 1, client.permission_requests
        call = client.permission_requests[0]["toolCall"]
        assert call["kind"] == "execute" and call["title"] == "echo hi > made.txt && echo done", call
        assert call["rawInput"] == {"command": "echo hi > made.txt && echo done", "description": "Make a file"}, call
        assert not os.path.exists(made)
        last = _tool_updates(client, call["toolCallId"])[-1]
        assert last["status"] == "failed" and last["rawOutput"] == "User refused permission to run tool", last
        assert _reply_text(client).endswith("Understood. [tool error: User refused permission to run tool]")
        rig.assert_stayed_home()
    finally:
        client.close()
        rig.close()


# -- end to end: relayd, relay-bridge run --agent 'acp:…', a client on the relay ----------------------

class ClaudeThroughBridge(ThroughBridge):
    """A paired relay-bridge running the real Claude Code (ClaudeRig's launcher: the agent in its
    network namespace with its own environment), a user and an event stream."""

    def __init__(self, relay, token, tmp_path, steps, text, drop_env=(), extra_env=None, bridge_flags=()):
        self.rig = _rig(tmp_path, steps, text)
        self.cwd = self.rig.cwd
        for name in drop_env:
            del self.rig.env[name]
        self.rig.env.update(extra_env or {})
        launcher = self.rig.write_launcher(os.path.join(str(tmp_path), "claude-agent.sh"))
        self._start(relay, token, tmp_path, launcher, "acp agent @zed-industries/claude-agent-acp 0.23.1 ready",
                    bridge_flags=bridge_flags)


def _texts(replies):
    return [m["text"] for m in replies]


def test_claude_code_through_relay_bridge_edit_approved_after_its_diff(relay, user_token, tmp_path):
    target = os.path.join(str(tmp_path), "work", "notes.txt")
    run = ClaudeThroughBridge(relay, user_token, tmp_path, [
        ("Read", {"file_path": target}),
        ("Edit", {"file_path": target, "old_string": "line two", "new_string": "line 2 edited"})], "All done.")
    try:
        with open(target, "w") as f:
            f.write(ORIGINAL)
        session = run.user.create_session()
        interaction = run.user.send(session, "Change line two of notes.txt")
        approval = run.approval(interaction)
        assert approval["action"] == "edit" and approval["severity"] == "medium", approval
        assert approval["title"] == "Edit notes.txt" and approval["command"] == target, approval
        assert approval["tool_call_id"].startswith("toolu_"), approval
        # The user approves what they can see: the edit's diff is in the approval.
        assert approval["content"] == [{"type": "diff", "path": target, "old_text": "line two",
                                         "new_text": "line 2 edited"}], approval
        with open(target) as f:
            assert f.read() == ORIGINAL  # nothing written before the user said yes
        run.user.decide(approval["approval_id"], "approve")

        replies = run.wait_turn(session, interaction)
        with open(target) as f:
            assert f.read() == "line one\nline 2 edited\n"
        assert _texts(replies)[:2] == ["I will use Read.", "I will use Edit."], replies
        assert replies[-1]["text"].startswith("All done. [tool ok: The file %s has been updated" % target), replies
        assert [m["finish_reason"] for m in replies] == ["tool_call", "tool_call", "stop"], replies
        # streamed: deltas, then each message finalized
        deltas = "".join(e["delta"] for e in run.events("message_delta", interaction))
        assert deltas == "".join(_texts(replies)), deltas
        finalized = {e["message_id"] for e in run.events("message_finalized", interaction)}
        assert finalized == {m["message_id"] for m in replies}, finalized

        # the two tool calls as tasks: the Read and the Edit, both completed
        edit_id = approval["tool_call_id"]
        created = {e["task_id"]: e for e in run.events("task_created", interaction)}
        assert edit_id in created and len(created) == 2, created
        assert {e["kind"] for e in created.values()} == {"read", "edit"}, created
        # Claude Code announces each tool call with rawInput {} and a bare title ("Edit"); the card
        # still gets the real arguments and title
        assert created[edit_id]["status_label"] == "Edit notes.txt", created[edit_id]
        assert created[edit_id]["args"] == {"file_path": target, "old_string": "line two",
                                            "new_string": "line 2 edited", "replace_all": False}, created[edit_id]
        done = {e["task_id"]: e for e in run.events("task_completed", interaction)}
        assert set(done) == set(created), done
        assert "updated successfully" in json.dumps(done[edit_id].get("result")), done[edit_id]
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def test_claude_code_through_relay_bridge_edit_denied_leaves_the_file(relay, user_token, tmp_path):
    target = os.path.join(str(tmp_path), "work", "notes.txt")
    run = ClaudeThroughBridge(relay, user_token, tmp_path, [
        ("Read", {"file_path": target}),
        ("Edit", {"file_path": target, "old_string": "line two", "new_string": "line 2 edited"})], "Understood.")
    try:
        with open(target, "w") as f:
            f.write(ORIGINAL)
        session = run.user.create_session()
        interaction = run.user.send(session, "Change line two of notes.txt")
        approval = run.approval(interaction)
        assert approval["action"] == "edit" and approval["command"] == target, approval
        run.user.decide(approval["approval_id"], "deny")
        replies = run.wait_turn(session, interaction)
        with open(target) as f:
            assert f.read() == ORIGINAL
        assert replies[-1]["text"] == "Understood. [tool error: User refused permission to run tool]", replies
        assert replies[-1]["finish_reason"] == "stop", replies
        failed = run.events("task_failed", interaction)
        assert [e["task_id"] for e in failed] == [approval["tool_call_id"]], failed
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def test_claude_code_through_relay_bridge_command_approved_runs(relay, user_token, tmp_path):
    made = os.path.join(str(tmp_path), "work", "made.txt")
    command = "echo hi > made.txt && echo done"
    run = ClaudeThroughBridge(relay, user_token, tmp_path, [("Bash", {"command": command, "description": "Make a file"})],
                              "Made it.")
    try:
        session = run.user.create_session()
        interaction = run.user.send(session, "Make a file with a command")
        approval = run.approval(interaction)
        assert approval["action"] == "execute" and approval["severity"] == "high", approval
        assert approval["command"] == command and approval["title"] == command, approval
        assert not os.path.exists(made)
        run.user.decide(approval["approval_id"], "approve")
        replies = run.wait_turn(session, interaction)
        with open(made) as f:
            assert f.read() == "hi\n"
        assert replies[-1]["text"] == "Made it. [tool ok: done]", replies
        done = run.events("task_completed", interaction)
        assert [e["task_id"] for e in done] == [approval["tool_call_id"]], done
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def test_claude_code_command_output_and_usage_reach_the_relay(relay, user_token, tmp_path):
    """Issue 36: a Bash command that prints, sleeps, prints. Claude Code's adapter, told
    _meta.terminal_output, sends the output in _meta when the command ends (not while it runs), then
    the completed update with terminal_exit: the task shows the output in a partial_result before it
    finishes, then the exit status. The turn's usage has its tokens and, from usage_update, the context."""
    command = "printf 'first\\n'; sleep 1; printf 'second\\n'"
    run = ClaudeThroughBridge(relay, user_token, tmp_path, [("Bash", {"command": command, "description": "Print twice"})],
                              "Printed.")
    try:
        session = run.user.create_session()
        interaction = run.user.send(session, "Print two lines")
        approval = run.approval(interaction)
        run.user.decide(approval["approval_id"], "approve")
        replies = run.wait_turn(session, interaction)
        task = approval["tool_call_id"]
        events = [(e.name, e.data) for e in run.stream.events
                  if e.data.get("interaction_id") == interaction and e.data.get("task_id") == task]
        outputs = [i for i, (name, d) in enumerate(events) if name == "task_progress"
                   and ((d.get("partial_result") or {}).get("terminal") or {}).get("output") == "first\nsecond"]
        done = [i for i, (name, _) in enumerate(events) if name == "task_completed"]
        assert outputs and done and outputs[0] < done[0], [(n, d.get("partial_result") or d.get("result")) for n, d in events]
        assert events[done[0]][1]["result"]["terminal"] == {"output": "first\nsecond", "exit_status": 0}, events
        assert "omitted" not in events[done[0]][1]["result"], events
        usage = replies[-1]["usage"]
        assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0, usage
        assert 0 < usage["context_used"] <= usage["context_size"], usage
        assert "model" not in usage, usage
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def test_claude_code_without_a_key_ends_the_reply_with_an_error(relay, user_token, tmp_path):
    """No ANTHROPIC_API_KEY and no login in its HOME: Claude Code opens the session but answers the
    prompt with ACP's auth_required (-32000); the user sees the reply end in an error that says so,
    and nothing was asked of any model API."""
    run = ClaudeThroughBridge(relay, user_token, tmp_path, [], "unused", drop_env=["ANTHROPIC_API_KEY"])
    try:
        session = run.user.create_session()
        interaction = run.user.send(session, "hello")
        replies = run.wait_turn(session, interaction)
        assert len(replies) == 1 and replies[0]["finish_reason"] == "error", replies
        assert "[the agent needs a login first" in replies[0]["text"], replies
        assert run.rig.model.paths() == [], run.rig.model.paths()
        assert set(run.rig.proxy.asked) <= run.rig.known_refused, run.rig.proxy.asked
    finally:
        assert run.close() == 0


def test_claude_code_through_relay_bridge_cancel_while_asking(relay, user_token, tmp_path):
    """The user cancels while Claude Code waits for the approval of an edit: the permission request
    is answered `cancelled`, Claude Code's prompt stops `cancelled`, the reply ends cancelled, the
    Edit's card is cancelled and the file stays as it was."""
    target = os.path.join(str(tmp_path), "work", "notes.txt")
    run = ClaudeThroughBridge(relay, user_token, tmp_path, [
        ("Read", {"file_path": target}),
        ("Edit", {"file_path": target, "old_string": "line two", "new_string": "line 2 edited"})], "All done.")
    try:
        with open(target, "w") as f:
            f.write(ORIGINAL)
        session = run.user.create_session()
        interaction = run.user.send(session, "Change line two of notes.txt")
        approval = run.approval(interaction)
        run.user.cancel(session, interaction)
        replies = run.wait_turn(session, interaction)
        assert [(m["text"], m["finish_reason"]) for m in replies] == [
            ("I will use Read.", "tool_call"), ("I will use Edit.", "cancelled")], replies
        cancelled = run.events("task_cancelled", interaction)
        assert [e["task_id"] for e in cancelled] == [approval["tool_call_id"]], cancelled
        with open(target) as f:
            assert f.read() == ORIGINAL
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def test_claude_code_through_relay_bridge_plan_updates_in_place(relay, user_token, tmp_path):
    """Claude Code's TodoWrite is no tool call over ACP but a `plan` update (the whole list each
    time, priority "medium", nothing asked): one plan task for the turn, updated with each list,
    completed with the last one when the turn ends."""
    first = [{"content": "Read the file", "status": "in_progress", "activeForm": "Reading the file"},
             {"content": "Edit the file", "status": "pending", "activeForm": "Editing the file"}]
    second = [{"content": "Read the file", "status": "completed", "activeForm": "Reading the file"},
              {"content": "Edit the file", "status": "in_progress", "activeForm": "Editing the file"}]
    run = ClaudeThroughBridge(relay, user_token, tmp_path, [("TodoWrite", {"todos": first}),
                                                            ("TodoWrite", {"todos": second})], "Planned.")
    try:
        session = run.user.create_session()
        interaction = run.user.send(session, "Plan the change")
        replies = run.wait_turn(session, interaction)
        assert replies[-1]["text"].startswith("Planned. [tool ok: "), replies
        assert run.events("approval_requested", interaction) == []

        def entries(todos):
            return [{"content": t["content"], "priority": "medium", "status": t["status"]} for t in todos]
        created = run.events("task_created", interaction)
        assert [(e["task_id"], e["kind"]) for e in created] == [("plan_" + interaction, "plan")], created
        progress = [e["partial_result"] for e in run.events("task_progress", interaction)
                    if e["task_id"] == "plan_" + interaction]
        assert progress and progress[-1] == {"entries": entries(second)}, progress
        assert {"entries": entries(first)} in progress or created[0].get("partial_result") == {
            "entries": entries(first)}, (created, progress)
        done = [e for e in run.events("task_completed", interaction) if e["task_id"] == "plan_" + interaction]
        assert len(done) == 1 and done[0]["result"] == {"entries": entries(second)}, done
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def _prompts(body):
    """The user's own words in a Messages API request (Claude Code adds <system-reminder> blocks)."""
    out = []
    for message in body["messages"]:
        if message["role"] != "user" or isinstance(message["content"], str):
            continue
        for block in message["content"]:
            if block.get("type") == "text" and not block["text"].startswith("<"):
                out.append(block["text"])
    return out


def test_a_restarted_bridge_continues_the_claude_code_conversation(relay, user_token, tmp_path):
    """relay-bridge stopped and started again: the next message of the session loads Claude Code's
    session (session/load, from the transcript Claude Code keeps in its HOME) instead of starting
    afresh, so the model gets the earlier turn; the history Claude Code replays while it loads does
    not come back as messages or tasks."""
    run = ClaudeThroughBridge(relay, user_token, tmp_path, [], "unused")
    command = tools_then_text([("Bash", {"command": "echo apricot > word.txt", "description": "Note it"})], "Noted.")

    def script(body):  # the first turn runs a command, then every turn repeats the user's words
        said = _prompts(body)
        if len(said) == 1 and not command(body)[0]["text"].startswith("Noted."):
            return command(body)
        return [{"type": "text", "text": "You said: " + " / ".join(said)}]
    run.rig.model.script = script
    try:
        session = run.user.create_session()
        first = run.user.send(session, "remember the word apricot")
        run.user.decide(run.approval(first)["approval_id"], "approve")
        assert [m["text"] for m in run.wait_turn(session, first)] == [
            "I will use Bash.", "You said: remember the word apricot"]
        assert len(run.events("task_created", first)) == 1
        assert run.bridge.stop() == 0
        run.bridge.start("acp:" + os.path.join(str(tmp_path), "claude-agent.sh"), "--cwd", run.cwd)
        run.bridge.wait_log("acp agent @zed-industries/claude-agent-acp 0.23.1 ready", count=2, timeout=WAIT)
        second = run.user.send(session, "which word?")
        replies = run.wait_turn(session, second)
        assert [m["text"] for m in replies] == ["You said: remember the word apricot / which word?"], replies
        assert "loaded for relay session " + session in run.bridge.log_text(), run.bridge.log_text()
        everything = sorted(run.user.messages(session), key=lambda m: m["created_at"])
        assert [m["text"] for m in everything if m["role"] == "agent"] == [
            "I will use Bash.", "You said: remember the word apricot",
            "You said: remember the word apricot / which word?"], everything
        # the replayed Bash call is not a task again, nor a new approval
        assert [e.data["task_id"] for e in run.stream.events if e.name == "task_created"] == [
            e["task_id"] for e in run.events("task_created", first)]
        assert len([e for e in run.stream.events if e.name == "approval_requested"]) == 1
        assert [m["text"] for m in everything if m["role"] == "user"] == [
            "remember the word apricot", "which word?"], everything
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def test_claude_code_approve_always_covers_the_same_file_only(relay, user_token, tmp_path):
    """"Always" on an edit of a.txt: the relay keeps a grant for edits of that file and answers the
    next one itself; an edit of b.txt is asked again. (Claude Code's own "Always Allow" would cover
    every edit of the session, so the bridge answers it "allow" once, not "always".)"""
    work = os.path.join(str(tmp_path), "work")
    a, b = os.path.join(work, "a.txt"), os.path.join(work, "b.txt")
    turns = {
        "first": [("Read", {"file_path": a}), ("Edit", {"file_path": a, "old_string": "x", "new_string": "x1"})],
        "second": [("Read", {"file_path": a}), ("Edit", {"file_path": a, "old_string": "x1", "new_string": "x2"})],
        "third": [("Read", {"file_path": b}), ("Edit", {"file_path": b, "old_string": "y", "new_string": "y1"})],
    }
    run = ClaudeThroughBridge(relay, user_token, tmp_path, [], "Done.")
    run.rig.model.script = lambda body: tools_then_text(turns[_prompts(body)[-1]], "Done.")(body)
    try:
        with open(a, "w") as f:
            f.write("x\n")
        with open(b, "w") as f:
            f.write("y\n")
        session = run.user.create_session()
        first = run.user.send(session, "first")
        approval = run.approval(first)
        assert approval["command"] == a, approval
        run.user.decide(approval["approval_id"], "approve_always", scope="tool")
        run.wait_turn(session, first)
        with open(a) as f:
            assert f.read() == "x1\n"

        second = run.user.send(session, "second")  # the same file: the relay's grant answers
        run.wait_turn(session, second)
        with open(a) as f:
            assert f.read() == "x2\n"
        assert run.events("approval_requested", second) == [], run.events("approval_requested", second)

        third = run.user.send(session, "third")  # another file: asked again
        approval = run.approval(third)
        assert approval["command"] == b, approval
        run.user.decide(approval["approval_id"], "deny")
        run.wait_turn(session, third)
        with open(b) as f:
            assert f.read() == "y\n"
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def test_claude_code_as_root_with_is_sandbox_0_fails_and_the_user_reads_why(relay, user_token, tmp_path):
    """Issue 35: IS_SANDBOX set to anything but 1 makes claude-agent-acp start Claude Code with leave to skip
    permissions, which Claude Code as root refuses: session/new answers "Internal error". The user reads
    that, with the adapter's details and its last stderr lines; so does relay-bridge's log."""
    run = ClaudeThroughBridge(relay, user_token, tmp_path, [], "Hello.", extra_env={"IS_SANDBOX": "0"})
    try:
        session = run.user.create_session()
        interaction = run.user.send(session, "hello")
        replies = run.wait_turn(session, interaction)
        text = replies[-1]["text"]
        if os.geteuid() != 0:
            # Not root: IS_SANDBOX changes nothing that matters here (CI runs as root, where it does).
            assert text.startswith("Hello."), replies
            return
        reason = "Internal error (Query closed before response received)"
        assert replies[-1]["finish_reason"] == "error", replies
        assert text.strip().startswith("[the agent could not start a session: %s]" % reason), text
        assert "\n\nThe agent's last lines on stderr:\n" in text and "Error handling request" in text, text
        assert len(text.encode()) < 3200, len(text)
        log = run.bridge.log_text()
        assert "the acp agent could not start a session for relay session %s: %s" % (session, reason) in log, log
    finally:
        assert run.close() == 0


# -- images sent with a message (issue 40, item 3) ----------------------------------------------------

def png(width=3, height=2, rgb=(200, 30, 40)):
    """A small valid PNG, made here (zlib and struct only): what a phone's screenshot is, in little."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def images_seen(requests):
    """Every image block of the model requests' user messages: (media type, bytes)."""
    import base64
    seen = []
    for body in requests:
        for message in body.get("messages") or []:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "image" and block["source"]["type"] == "base64":
                    seen.append((block["source"]["media_type"], base64.b64decode(block["source"]["data"])))
    return seen


class PhotoRig:
    """relayd, a real relay-bridge paired and confirmed by the real `relay` (so that it can make an
    encrypted session, as test_104 does), running a real agent through acp:, and the user's uploads."""

    def __init__(self, relay, tmp_path, rig, ready_line):
        from test_60_relay_cli import Cli
        from test_63_relay_with_bridge import pair_real_bridge
        from test_100_e2e_relay_cli import confirm_bridge
        self.relay, self.rig = relay, rig
        self.cli = Cli(tmp_path)
        self.token = self.cli.login(relay)
        self.bridge, self.inst = pair_real_bridge(self.cli, relay, tmp_path)
        launcher = rig.write_launcher(os.path.join(str(tmp_path), "agent.sh"))
        self.bridge.start("acp:" + launcher, "--cwd", rig.cwd)
        self.bridge.wait_log(ready_line, timeout=WAIT)
        self.bridge.wait_log("device key registered as")
        self.me = confirm_bridge(self.cli, self.bridge)[0]

    def session(self, encrypted):
        sid = self.cli.json("new", "--installation", self.inst, "--encrypted" if encrypted else "--plain")["session_id"]
        if encrypted:
            self.bridge.wait_log("session %s: key received from device %s" % (sid, self.me))
        return sid

    def send_photo(self, sid, text, data, encrypted):
        """Uploads data as a phone does (sealed in an encrypted session) and sends it with text."""
        import hashlib
        import json as _json
        from e2elib import seal, seal_bytes
        from relaylib import assert_ok
        auth = {"Authorization": "Bearer " + self.token}
        if not encrypted:
            up = self.relay.request("POST", "/v1/me/attachments", data=data, headers=dict(auth, **{"Content-Type": "image/png"}))
            body = {"text": text, "attachments": [{"key": assert_ok(up)["key"]}]}
        else:
            with open(self.cli.config / "client-session-keys.json") as f:
                k = bytes.fromhex(_json.load(f)["sessions"][sid][0])
            path = "attachments/" + sid
            up = self.relay.request("POST", "/v1/me/attachments", data=seal_bytes(k, path, data),
                                    headers=dict(auth, **{"Content-Type": "application/octet-stream"}))
            meta = {"name": "screenshot.png", "mime": "image/png", "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest()}
            body = {"text_ct": seal(k, "messages/" + sid, text),
                    "attachments": [{"key": assert_ok(up)["key"], "meta_ct": seal(k, path, _json.dumps(meta))}]}
        return assert_ok(self.relay.post("/v1/me/sessions/%s/send" % sid, body, token=self.token))["interaction_id"]

    def close(self):
        status = self.bridge.stop()
        self.rig.close()
        return status


def test_a_photo_reaches_claude_code_as_an_image_plain_and_sealed(relay, tmp_path):
    """The composer's photo, sent with a message, is an ACP image block for Claude Code, which hands the
    model the very bytes (base64 in the Messages API request); in an encrypted session too, where the phone
    sealed the file and relay-bridge opened it."""
    from relaylib import wait_until
    rig = _rig(tmp_path, [], "A red square.")
    run = PhotoRig(relay, tmp_path, rig, "acp agent @zed-industries/claude-agent-acp 0.23.1 ready")
    try:
        for encrypted, data in ((False, png()), (True, png(5, 4, (10, 120, 240)))):
            sid = run.session(encrypted)
            before = len(rig.model.conversation())
            run.send_photo(sid, "What is in this screenshot?", data, encrypted)
            wait_until(lambda: images_seen(rig.model.conversation()[before:]), WAIT,
                       what="the image in the model request (encrypted: %s)" % encrypted)
            assert images_seen(rig.model.conversation()[before:])[0] == ("image/png", data), encrypted
        assert "acp: could not" not in run.bridge.log_text(), run.bridge.log_text()
        rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def _wait_state(run, session, check, what):
    """The session's agent_state as the session_state events tell it, once check holds (the stream spares the
    user's rate bucket the polling)."""
    return run.stream.wait_for("session_state", lambda d: d.get("session_id") == session and check(d["agent_state"]),
                               timeout=WAIT).data["agent_state"]


def _set(run, session, option_id, value):
    r = run.user.call("POST", "/v1/me/sessions/%s/config" % session, {"option": {"id": option_id, "value": value}})
    assert r.status_code == 202, r.text


def test_plan_mode_set_from_the_client_is_in_force_claude_code_edits_nothing(relay, user_token, tmp_path):
    """The session's mode, set from the client before the first message (issue 36): Claude Code's mode
    option comes back as the session's state, plan goes through session/set_config_option, and the
    turn then proposes without touching the file, though the model asks for an Edit."""
    target = os.path.join(str(tmp_path), "work", "notes.txt")
    run = ClaudeThroughBridge(relay, user_token, tmp_path, [
        ("Edit", {"file_path": target, "old_string": "line two", "new_string": "line 2 edited"})], "My plan.")
    try:
        with open(target, "w") as f:
            f.write(ORIGINAL)
        session = run.user.create_session()
        _set(run, session, "mode", "plan")
        state = _wait_state(run, session, lambda s: s.get("mode") == "plan", "Claude Code in plan mode")
        modes = [v["value"] for o in state["options"] if o["kind"] == "mode" for v in o["values"]]
        assert {"default", "acceptEdits", "plan"} <= set(modes), state
        if os.geteuid() == 0:
            assert "bypassPermissions" not in modes, modes
        interaction = run.user.send(session, "Change line two of notes.txt")
        replies = run.wait_turn(session, interaction)
        with open(target) as f:
            assert f.read() == ORIGINAL, replies
        assert [e for e in run.stream.events if e.name == "approval_requested"] == [], replies
        assert replies[-1]["text"].startswith("My plan."), replies
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def test_a_model_chosen_from_the_client_reaches_the_stand_ins_next_request(relay, user_token, tmp_path):
    run = ClaudeThroughBridge(relay, user_token, tmp_path, [], "Hello.")
    try:
        session = run.user.create_session()
        first = run.user.send(session, "hi")
        run.wait_turn(session, first)
        state = _wait_state(run, session, lambda s: s.get("model") is not None, "Claude Code's model")
        before = [b.get("model") for b in run.rig.model.conversation()][-1]
        model = [o for o in state["options"] if o["kind"] == "model"][0]
        # Another family than the one in use (sonnet[1m] is the same model with a longer context).
        family = "haiku" if "haiku" not in before else "opus"
        other = [v["value"] for v in model["values"] if family in v["value"]]
        assert other, model
        _set(run, session, model["id"], other[0])
        _wait_state(run, session, lambda s: s.get("model") == other[0], "the model changed")
        second = run.user.send(session, "again")
        run.wait_turn(session, second)
        after = [b.get("model") for b in run.rig.model.conversation()][-1]
        assert family in after and after != before, (before, after, other[0])
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def test_a_claude_code_session_begun_at_the_desk_is_listed_and_continued_from_the_phone(relay, user_token, tmp_path):
    """issue 36 item 3 with the real Claude Code (ThroughBridge.continue_at_the_phone)."""
    run = ClaudeThroughBridge(relay, user_token, tmp_path, [], "unused", bridge_flags=["--no-e2e"])
    try:
        run.continue_at_the_phone(tmp_path, _prompts)
    finally:
        assert run.close() == 0
