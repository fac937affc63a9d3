"""The real Claude Code, through the real @zed-industries/claude-agent-acp (pinned in
tests/agents/package.json and its lock file, installed by `make test-agents`), against a scripted
stand-in of the Anthropic Messages API (fake_anthropic.py).

First the agent alone, spoken to over ACP by the small client of agentlib (what it sends is what
relay-bridge's acp: agent has to map: NOTES in docs/bridge.md); then end to end: relayd,
relay-bridge run --agent 'acp:…', and a client that approves or denies on the relay.

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
  from GitHub once per start; the tests allow that one refused request (agentlib.KNOWN_REFUSED) and
  fail on any other. The stand-in records every request: only POST /v1/messages?beta=true is seen.
- Root: the tests run as root (CI does) and do NOT set IS_SANDBOX. Claude Code refuses to *skip*
  permission checks as root (--dangerously-skip-permissions); the adapter, when root, only drops
  the bypassPermissions mode and passes allowDangerouslySkipPermissions=false. The path we test is
  the opposite one, the default mode that asks before each edit or command, and it is the same as
  root or not: the tests check that bypassPermissions is not offered when root (so the root path is
  the one under test) and that the permission prompts come all the same. An unprivileged user
  (setpriv to nobody) would need the repository's node_modules readable by that user wherever CI
  clones it, for nothing gained on that path.
"""
import os

from agentlib import CLAUDE_ACP, WAIT, AcpClient, ClaudeRig
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
