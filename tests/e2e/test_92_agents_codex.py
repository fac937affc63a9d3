"""The real Codex, through the real @zed-industries/codex-acp (pinned in tests/agents, installed by
`make test-agents`; a native binary from the package's platform package, so Node's version does not
matter), against a scripted stand-in of the OpenAI Responses API (fake_openai_responses.py).

The agent alone over ACP, then end to end through relay-bridge's acp: agent.

What is avoided, and how (as in test_91): the model API is the stand-in, set as a model provider of
Codex's own in a temporary CODEX_HOME, with a made-up key; the agent's environment is built from
nothing; it runs in a network namespace whose only interface is a loopback where the stand-in and a
recording, refusing proxy listen (agentlib.NetSandbox). Codex tried nothing through the proxy in any
run, and the tests fail if it does. Codex asks for nothing as root that it would not ask otherwise:
its approvals come from `approval_policy` ("untrusted" here: every edit and every command not known
to be harmless). Its own sandbox (bubblewrap on Linux, absent on a fresh Debian) is off
(`sandbox_mode = "danger-full-access"`), which changes where a command may write, not what is asked.
"""
import os
import re

from agentlib import AcpClient, CodexRig, ThroughBridge
from fake_openai_responses import steps_then_text
from relaylib import wait_until

ORIGINAL = "line one\nline two\n"
PATCH = "*** Begin Patch\n*** Update File: notes.txt\n@@\n line one\n-line two\n+line 2 edited\n*** End Patch\n"
COMMAND = "echo hi > made.txt && echo done"


def _rig(tmp_path, steps, text):
    rig = CodexRig(tmp_path)
    rig.model.script = steps_then_text(steps, text)
    with open(os.path.join(rig.cwd, "notes.txt"), "w") as f:
        f.write(ORIGINAL)
    return rig


def _patch():
    return {"type": "custom_tool_call", "name": "apply_patch", "input": PATCH}


def _command():
    return {"type": "function_call", "name": "exec_command", "arguments": {"cmd": COMMAND}}


def test_codex_over_acp_asks_before_a_patch_and_applies_it(tmp_path):
    rig = _rig(tmp_path, [_patch()], "All done.")
    target = os.path.join(rig.cwd, "notes.txt")
    client = AcpClient(rig.argv, rig.env, rig.cwd, fs=True, stderr_path=str(tmp_path / "agent.stderr"))
    client.permission_choice = lambda params: "approved"
    try:
        init = client.initialize()
        assert init["agentInfo"]["name"] == "codex-acp" and init["agentInfo"]["version"] == "0.16.0", init
        assert init["agentCapabilities"]["loadSession"] is True, init
        assert {m["id"] for m in init["authMethods"]} == {"chatgpt", "codex-api-key", "openai-api-key"}, init
        session = client.new_session(rig.cwd)  # no authenticate: the login is in CODEX_HOME
        result = client.prompt(session["sessionId"], "Change line two of notes.txt")
        assert result["stopReason"] == "end_turn", result

        assert len(client.permission_requests) == 1, client.permission_requests
        asked = client.permission_requests[0]
        call = asked["toolCall"]
        assert call["kind"] == "edit" and call["title"] == "Edit " + target, call
        assert call["content"][0]["type"] == "diff" and call["content"][0]["path"] == target, call
        assert [(o["kind"], o["optionId"]) for o in asked["options"]] == [
            ("allow_once", "approved"), ("reject_once", "abort")], asked
        # its requests carry string ids (UUIDs)
        ids = [doc["id"] for d, doc in client.log if d == "<" and doc.get("method") == "session/request_permission"]
        assert len(ids) == 1 and isinstance(ids[0], str), ids

        with open(target) as f:
            assert f.read() == "line one\nline 2 edited\n"
        assert client.fs_calls == [], client.fs_calls  # Codex writes the file itself
        updates = [u["update"] for u in client.updates if u["update"].get("toolCallId") == call["toolCallId"]]
        assert updates[-1]["status"] == "completed", updates
        rig.assert_stayed_home()
    finally:
        client.close()
        rig.close()


class CodexThroughBridge(ThroughBridge):
    def __init__(self, relay, token, tmp_path, steps, text, logged_in=True, key_in_env=False, bridge_flags=()):
        self.rig = _rig(tmp_path, steps, text)
        self.cwd = self.rig.cwd
        bridge_env, inherit = {}, ()
        if key_in_env:
            # No login, the key in relay-bridge's environment (which the agent inherits): relay-bridge
            # logs in with ACP's `authenticate` (Codex's env_var method openai-api-key).
            os.unlink(os.path.join(self.rig.env["CODEX_HOME"], "auth.json"))
            bridge_env, inherit = {"OPENAI_API_KEY": "sk-test-not-a-real-key"}, ("OPENAI_API_KEY",)
        if not logged_in:
            os.unlink(os.path.join(self.rig.env["CODEX_HOME"], "auth.json"))
        launcher = self.rig.write_launcher(os.path.join(str(tmp_path), "codex-agent.sh"), inherit=inherit)
        self._start(relay, token, tmp_path, launcher, "acp agent codex-acp 0.16.0 ready", env=bridge_env,
                    bridge_flags=bridge_flags)


def test_codex_through_relay_bridge_patch_approved_after_its_diff(relay, user_token, tmp_path):
    run = CodexThroughBridge(relay, user_token, tmp_path, [_patch()], "All done.")
    target = os.path.join(run.cwd, "notes.txt")
    try:
        session = run.user.create_session()
        interaction = run.user.send(session, "Change line two of notes.txt")
        approval = run.approval(interaction)
        assert approval["action"] == "edit" and approval["severity"] == "medium", approval
        assert approval["title"] == "Edit " + target and approval["command"] == target, approval
        assert approval["content"][0]["type"] == "diff" and approval["content"][0]["path"] == target, approval
        with open(target) as f:
            assert f.read() == ORIGINAL
        run.user.decide(approval["approval_id"], "approve")
        replies = run.wait_turn(session, interaction)
        with open(target) as f:
            assert f.read() == "line one\nline 2 edited\n"
        assert replies[0]["text"] == "I will use apply_patch.", replies
        assert replies[-1]["text"].startswith("All done. [tool said: "), replies
        assert "Success. Updated the following files: M notes.txt" in replies[-1]["text"], replies
        assert replies[-1]["finish_reason"] == "stop", replies
        deltas = "".join(e["delta"] for e in run.events("message_delta", interaction))
        assert deltas == "".join(m["text"] for m in replies), deltas
        done = run.events("task_completed", interaction)
        assert [e["task_id"] for e in done] == [approval["tool_call_id"]], done
        assert done[0]["result"]["content"][0]["type"] == "diff", done
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def test_codex_through_relay_bridge_command_denied_is_not_run(relay, user_token, tmp_path):
    """Codex's "No" (abort) ends the whole turn: the prompt stops `cancelled`."""
    run = CodexThroughBridge(relay, user_token, tmp_path, [_command()], "Made it.")
    made = os.path.join(run.cwd, "made.txt")
    try:
        session = run.user.create_session()
        interaction = run.user.send(session, "Make a file with a command")
        approval = run.approval(interaction)
        assert approval["action"] == "execute" and approval["severity"] == "high", approval
        assert approval["title"] == COMMAND, approval
        assert approval["command"] == COMMAND, approval  # the line of Codex's ["/bin/bash", "-lc", LINE]
        run.user.decide(approval["approval_id"], "deny")
        replies = run.wait_turn(session, interaction)
        assert not os.path.exists(made)
        assert replies[-1]["finish_reason"] == "cancelled", replies
        posts = [p for p in run.rig.model.paths() if p[0] == "POST"]
        assert len(posts) == 1, run.rig.model.paths()  # the model was not asked again
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def test_codex_command_output_is_seen_while_it_runs_and_usage_arrives(relay, user_token, tmp_path):
    """Issue 36: a command that prints, sleeps, prints. Codex's adapter, told _meta.terminal_output,
    streams the output in _meta as it comes: the first line reaches the task's partial_result while
    the command still sleeps, then the whole output with the exit status when it ends, as far as Codex saw it end (Codex says
    both only in its rawOutput: aggregated_output, exit_code). The turn's usage has the context from
    usage_update. (codex-acp 0.16.0 drops output written before its first
    tool_call update: hence the command's first sleep. Its exec_command yields to the model after
    yield_time_ms, 10 s by default, leaving the command running with no exit status: on a loaded machine
    the three seconds here once took longer, so the call asks for a minute, as a model that expects a
    command to end does.)"""
    line = "sleep 1; printf 'first\\n'; sleep 2; printf 'second\\n'"
    run = CodexThroughBridge(relay, user_token, tmp_path,
                             [{"type": "function_call", "name": "exec_command",
                               "arguments": {"cmd": line, "yield_time_ms": 60000}}], "Printed.")
    try:
        session = run.user.create_session()
        interaction = run.user.send(session, "Print two lines")
        approval = run.approval(interaction)
        run.user.decide(approval["approval_id"], "approve")
        replies = run.wait_turn(session, interaction)
        events = [(e.name, e.data) for e in run.stream.events if e.data.get("interaction_id") == interaction
                  and e.data.get("task_id") and e.name in ("task_progress", "task_completed", "task_failed")]
        outputs = [((d.get("partial_result") or {}).get("terminal") or {}).get("output", "") for _, d in events]
        early = [i for i, (name, _) in enumerate(events) if name == "task_progress"
                 and "first" in outputs[i] and "second" not in outputs[i]]
        done = [i for i, (name, _) in enumerate(events) if name == "task_completed"]
        assert early and done and early[0] < done[0], [(n, outputs[i], (d.get("result") or {}).get("terminal")) for i, (n, d) in enumerate(events)]
        terminal = events[done[-1]][1]["result"]["terminal"]
        # What Codex told the model of the command is what the phone must be told. On a loaded machine Codex
        # sometimes collects the whole output (the pty closed) before it has seen the process exit, and then
        # reports it as still running ("Process running with session ID ...") and never sends an exit code:
        # the task must then say no exit status rather than invent one.
        told = [item.get("output") for r in run.rig.model.requests for item in ((r.get("body") or {}).get("input") or [])
                if isinstance(item, dict) and item.get("type") == "function_call_output"]
        assert len(told) == 1 and isinstance(told[0], str), told
        if "Process exited with code 0" in told[0]:
            if "exit_status" not in terminal:
                # Codex emits the command's end from a watcher of its own (100 ms after the exit at most), while
                # the output goes to the model at once: with the stand-in answering at once the turn can end first.
                # The adapter then drops that end ("unknown submission", as the turn's state is gone) or sends it
                # after its answer, which relay-bridge drops and logs: either way no exit status ever reached
                # relay-bridge within the turn, and the task must not invent one. Seen on a loaded CI machine.
                # (It comes after the turn's end, so it is waited for.)
                def late_end():
                    log = run.bridge.log_text()
                    return (re.search(r"Received event for unknown submission ID: \S* ?ExecCommandEnd\(", log)
                            or "acp agent sent a tool_call_update update for relay session" in log)
                wait_until(late_end, 10, what="the late command end in the log (%r, %r)" % (terminal, told))
            assert terminal == {"output": "first\nsecond\n", "exit_status": 0} or terminal == {
                "output": "first\nsecond\n"}, (terminal, told, events)
        else:
            assert "Process running with session ID" in told[0], told
            assert terminal == {"output": "first\nsecond\n"}, (terminal, told, events)
        # codex-acp 0.16.0 answers session/prompt without a usage: the context figures are all there is
        usage = replies[-1]["usage"]
        assert set(usage) == {"context_used", "context_size"}, usage
        assert 0 < usage["context_used"] <= usage["context_size"], usage
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def test_codex_without_a_login_says_so(relay, user_token, tmp_path):
    """No login (no auth.json) and no key in the environment: Codex refuses session/new (-32000,
    authentication required) before it sends anything anywhere, and relay-bridge,
    which does not log in for the user, ends the reply saying a login is needed and logs Codex's
    login methods."""
    run = CodexThroughBridge(relay, user_token, tmp_path, [], "unused", logged_in=False)
    try:
        session = run.user.create_session()
        interaction = run.user.send(session, "hello")
        replies = run.wait_turn(session, interaction)
        assert len(replies) == 1 and replies[0]["finish_reason"] == "error", replies
        assert "[the agent needs a login first" in replies[0]["text"], replies
        log = run.bridge.log_text()
        assert "openai-api-key" in log and "chatgpt" in log, log
        assert run.rig.model.paths() == [] and run.rig.proxy.asked == [], (run.rig.model.paths(), run.rig.proxy.asked)
    finally:
        assert run.close() == 0


def test_codex_with_only_openai_api_key_is_logged_in_by_the_bridge(relay, user_token, tmp_path):
    """OPENAI_API_KEY in the agent's environment and no `codex login`: Codex offers the env_var login
    method openai-api-key, relay-bridge calls `authenticate` with it, and the key reaches the API."""
    run = CodexThroughBridge(relay, user_token, tmp_path, [], "Hello.", key_in_env=True)
    try:
        session = run.user.create_session()
        interaction = run.user.send(session, "hello")
        replies = run.wait_turn(session, interaction)
        assert replies[-1]["text"] == "Hello. [tool said: ]" and replies[-1]["finish_reason"] == "stop", replies
        run.rig.assert_stayed_home()  # with the key: Authorization: Bearer sk-test-not-a-real-key
    finally:
        assert run.close() == 0


def _images_seen(rig):
    """Every image of the Responses API requests' input: (media type, bytes), from its data: URL."""
    import base64
    with rig.model.lock:
        bodies = [r["body"] for r in rig.model.requests if isinstance(r["body"], dict)]
    seen = []
    for body in bodies:
        for item in body.get("input") or []:
            content = item.get("content") if isinstance(item, dict) else None
            for part in content if isinstance(content, list) else []:
                url = part.get("image_url") or ""
                if part.get("type") == "input_image" and url.startswith("data:"):
                    head, _, data = url[5:].partition(",")
                    seen.append((head.split(";")[0], base64.b64decode(data)))
    return seen


def test_a_photo_reaches_codex_as_an_image_plain_and_sealed(relay, tmp_path):
    """Issue 40, item 3: the composer's photo is an ACP image block for Codex, which hands the model
    the very bytes (a data: URL in the Responses API request); in an encrypted session too."""
    from relaylib import wait_until
    from test_91_agents_claude import PhotoRig, png
    rig = _rig(tmp_path, [], "A red square.")
    run = PhotoRig(relay, tmp_path, rig, "acp agent codex-acp 0.16.0 ready")
    try:
        seen = 0
        for encrypted, data in ((False, png()), (True, png(5, 4, (10, 120, 240)))):
            sid = run.session(encrypted)
            run.send_photo(sid, "What is in this screenshot?", data, encrypted)
            wait_until(lambda: len(_images_seen(rig)) > seen, 60,
                       what="the image in the model request (encrypted: %s)" % encrypted)
            assert _images_seen(rig)[seen] == ("image/png", data), encrypted
            seen = len(_images_seen(rig))
        assert "acp: could not" not in run.bridge.log_text(), run.bridge.log_text()
        rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def test_codex_model_and_effort_set_from_the_client_reach_it(relay, user_token, tmp_path):
    """issue 36: Codex's settings come back as the session's state (codex-acp 0.16, with this rig's
    fixed sandbox, offers its model and reasoning effort as options and no mode); a model chosen from
    the client is the one the stand-in's next request names, and a send's thought_level "max" is
    its highest reasoning effort."""
    run = CodexThroughBridge(relay, user_token, tmp_path, [], "Hello.")

    def state(check):
        return run.stream.wait_for("session_state", lambda d: d.get("session_id") == session
                                   and check(d["agent_state"]), timeout=60).data["agent_state"]

    def last_request():
        return [r["body"] for r in run.rig.model.requests
                if r["method"] == "POST" and isinstance(r["body"], dict) and "model" in r["body"]][-1]
    try:
        session = run.user.create_session()
        first = run.user.send(session, "hi")
        run.wait_turn(session, first)
        current = state(lambda s: s.get("model") is not None)
        assert [o["kind"] for o in current["options"]] == ["model", "effort"], current
        assert current["effort"] == "medium", current
        before = last_request()["model"]
        model = current["options"][0]
        others = [v["value"] for v in model["values"] if v["value"] != before]
        assert others, (before, model)
        r = run.user.call("POST", "/v1/me/sessions/%s/config" % session,
                          {"option": {"id": model["id"], "value": others[0]}})
        assert r.status_code == 202, r.text
        state(lambda s: s.get("model") == others[0])
        r = run.user.call("POST", "/v1/me/sessions/%s/send" % session, {"text": "again", "thought_level": "max"})
        assert r.status_code == 200, r.text
        run.wait_turn(session, r.json().get("result", r.json())["interaction_id"])
        body = last_request()
        assert body["model"] == others[0] != before, (before, body["model"])
        assert body.get("reasoning", {}).get("effort") == "xhigh", body.get("reasoning")
        state(lambda s: s.get("effort") == "xhigh")
        run.rig.assert_stayed_home()
    finally:
        assert run.close() == 0


def _user_words(body):
    """The user's own words in a Responses API request (Codex adds <environment_context> and the like)."""
    out = []
    for item in body.get("input", []):
        if item.get("type") == "message" and item.get("role") == "user":
            for part in item.get("content", []):
                if part.get("type") == "input_text" and not part["text"].startswith("<") \
                        and not part["text"].startswith("#"):
                    out.append(part["text"])
    return out


def test_a_codex_session_begun_at_the_desk_is_listed_and_continued_from_the_phone(relay, user_token, tmp_path):
    """issue 36 item 3 with the real Codex (ThroughBridge.continue_at_the_phone)."""
    run = CodexThroughBridge(relay, user_token, tmp_path, [], "unused", bridge_flags=["--no-e2e"])
    try:
        run.continue_at_the_phone(tmp_path, _user_words)
    finally:
        assert run.close() == 0
