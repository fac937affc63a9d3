"""relay-bridge run --agent jsonl:COMMAND with examples/echo_agent.py: a turn,
the manifest, tasks, approvals with each decision mapped to the gateway's
word, an approved command run with its output streamed (issue 28, item 9), a
denied one not run, and cancel."""
import os

from relaylib import assert_ok, wait_until
from streams import EventStream
from test_50_bridge_support import EXAMPLES, PYTHON, WAIT, paired

ECHO = "jsonl:%s %s" % (PYTHON, os.path.join(EXAMPLES, "echo_agent.py"))


def echo_in(folder, *flags):
    """The echo agent with approved commands running in folder."""
    return " ".join([ECHO, "--workdir", str(folder)] + list(flags))


def ran(reply, decision, command, folder, ending="exit status 0"):
    """The reply of an approved command: the decision, the command and folder, how it ended."""
    return reply["text"] == "%s: ran `%s` in %s: %s" % (decision, command, folder, ending)


def terminal(event):
    """The terminal block (docs/api.md, "Content blocks") of a task event's result or progress."""
    value = event.data.get("result") or event.data.get("partial_result")
    assert len(value["content"]) == 1 and value["content"][0]["type"] == "terminal", event.data
    return value["content"][0]


def test_a_turn_streams_deltas_in_order_with_usage(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start(ECHO)
    stream = EventStream(relay, user_token)
    try:
        session = user.create_session()
        text = " ".join("w%d" % n for n in range(40))
        interaction = user.send(session, text)
        reply = user.wait_reply(session, interaction)
        assert reply["text"] == text and reply["finish_reason"] == "stop", reply
        assert reply["usage"]["model"] == "echo" and reply["usage"]["output_tokens"] == 40, reply
        stream.wait_for("message_finalized", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        deltas = [e.data["delta"] for e in stream.events
                  if e.name == "message_delta" and e.data["interaction_id"] == interaction]
        assert "".join(deltas) == text, deltas
    finally:
        stream.close()
        assert bridge.stop() == 0


def _approval_turn(user, stream, session, command):
    interaction = user.send(session, "run " + command)
    event = stream.wait_for("approval_requested", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
    assert event.data["command"] == command and event.data["action"] == "exec", event.data
    return interaction, event.data["approval_id"]


def test_approvals_map_each_decision_to_the_gateway_word(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start(echo_in(tmp_path))
    stream = EventStream(relay, user_token)
    try:
        session = user.create_session()
        for decision, word in (("approve", "allow-once"), ("deny", "deny"), ("approve_always", "allow-always")):
            command = "echo %s" % decision
            interaction, approval_id = _approval_turn(user, stream, session, command)
            user.decide(approval_id, decision)
            reply = user.wait_reply(session, interaction)
            if decision == "deny":
                assert reply["text"] == "deny: `echo deny` was not run", reply
                continue
            assert ran(reply, word, command, tmp_path), (decision, reply)
            # the task the agent declared went through setManifest's tool list, its output as its result
            done = stream.wait_for("task_completed", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
            assert done.data["name"] == "shell", done.data
            assert terminal(done) == {"type": "terminal", "terminal_id": done.data["task_id"],
                                      "output": decision + "\n", "exit_code": 0}, done.data
            assert done.data["result"]["raw_output"] == {"decision": word, "exit_status": 0,
                                                         "output_bytes": len(decision) + 1}, done.data
            progress = stream.wait_for("task_progress", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
            assert terminal(progress)["output"] == decision + "\n" and terminal(progress)["exit_code"] is None
        # a denial started no task
        assert not [e for e in stream.events if e.name.startswith("task_") and "deny" in str(e.data)], stream.events
        # approve_always left a grant: the next request is answered by the relay at once
        interaction = user.send(session, "run echo again")
        reply = user.wait_reply(session, interaction)
        assert ran(reply, "allow-always", "echo again", tmp_path), reply
        assert user.pending_approvals() == []
    finally:
        stream.close()
        assert bridge.stop() == 0


def test_a_task_with_an_undeclared_tool_is_refused_and_logged(relay, user_token, tmp_path):
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import json, sys\n"
        "print(json.dumps({'type': 'manifest', 'tools': [{'name': 'shell'}]}), flush=True)\n"
        "for raw in sys.stdin:\n"
        "    m = json.loads(raw)\n"
        "    if m['type'] != 'message': continue\n"
        "    ids = {'session_id': m['session_id'], 'interaction_id': m['interaction_id']}\n"
        "    print(json.dumps(dict(type='task_start', task_id='t1', kind='exec', name='rm', **ids)), flush=True)\n"
        "    print('this is not json', flush=True)\n"
        "    print(json.dumps(dict(type='delta', text='done', **ids)), flush=True)\n"
        "    print(json.dumps(dict(type='end', **ids)), flush=True)\n")
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start("jsonl:%s %s" % (PYTHON, agent))
    try:
        session = user.create_session()
        interaction = user.send(session, "go")
        assert user.wait_reply(session, interaction)["text"] == "done"
        log = bridge.log_text()
        assert "createTask: HTTP 422 tool_not_declared request_id=req_" in log, log
        assert "agent line ignored" in log, log
    finally:
        assert bridge.stop() == 0


def test_cancel_reaches_the_agent(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    slow = tmp_path / "slow.py"
    slow.write_text(
        "import json, sys, threading, time\n"
        "stop = set()\n"
        "def turn(m):\n"
        "    ids = {'session_id': m['session_id'], 'interaction_id': m['interaction_id']}\n"
        "    for n in range(600):\n"
        "        if m['interaction_id'] in stop or '' in stop:\n"
        "            print(json.dumps(dict(type='end', finish_reason='cancelled', **ids)), flush=True); return\n"
        "        print(json.dumps(dict(type='delta', text='.', **ids)), flush=True); time.sleep(0.05)\n"
        "for raw in sys.stdin:\n"
        "    m = json.loads(raw)\n"
        "    if m['type'] == 'message': threading.Thread(target=turn, args=(m,)).start()\n"
        "    if m['type'] == 'cancel': stop.add(m['interaction_id'])\n")
    bridge.start("jsonl:%s %s" % (PYTHON, slow))
    try:
        session = user.create_session()
        interaction = user.send(session, "go")
        wait_until(lambda: any(m["text"].startswith("..") for m in user.replies(session, interaction)), WAIT,
                   what="dots")
        user.cancel(session, interaction)
        reply = user.wait_reply(session, interaction)
        assert reply["text"].endswith("[cancelled]") and reply["finish_reason"] == "cancelled", reply
        assert 2 <= reply["text"].count(".") < 600, reply
    finally:
        assert bridge.stop() == 0


def test_an_expired_approval_reaches_the_agent(relayd, tmp_path):
    from relaylib import mint_token
    relay = relayd("--approval-ttl", "2s")
    token = mint_token(relay.data, "alice")
    bridge, user = paired(relay, token, tmp_path)
    (tmp_path / "keep").write_text("kept")
    bridge.start(echo_in(tmp_path))
    try:
        session = user.create_session()
        interaction = user.send(session, "run rm keep")
        wait_until(lambda: user.pending_approvals(), WAIT, what="a pending approval")
        # nobody decides: the relay expires it and the agent treats that as a refusal, running nothing
        reply = user.wait_reply(session, interaction, timeout=WAIT)
        assert reply["text"] == "deny: `rm keep` was not run", reply
        assert user.pending_approvals() == []
        assert (tmp_path / "keep").read_text() == "kept"
    finally:
        assert bridge.stop() == 0


def test_an_approved_command_runs_in_its_folder_streams_and_is_held_to_its_limits(relay, user_token, tmp_path):
    """What approvals are for, in the tour: approved, the command runs where the agent works, its output
    streams as the task's progress as it comes and is the task's result; a time limit and an output cap
    stop it; denied, nothing runs."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello\n")
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start(echo_in(folder, "--run-timeout", "2", "--output-cap", "1000"))
    stream = EventStream(relay, user_token)
    try:
        session = user.create_session()

        def approved(command):
            interaction, approval_id = _approval_turn(user, stream, session, command)
            user.decide(approval_id, "approve")
            return interaction

        # In its folder, and streamed: the first line reaches the user a second before the last.
        command = "cat notes.txt; sleep 1; echo done > made.txt; pwd"
        interaction = approved(command)
        progress = stream.wait_for("task_progress", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        assert terminal(progress)["output"] == "hello\n", progress.data
        assert not (folder / "made.txt").exists()
        reply = user.wait_reply(session, interaction)
        assert ran(reply, "allow-once", command, folder), reply
        assert (folder / "made.txt").read_text() == "done\n"
        done = stream.wait_for("task_completed", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        assert terminal(done)["output"] == "hello\n%s\n" % folder and terminal(done)["exit_code"] == 0, done.data
        started = stream.wait_for("task_created", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        assert started.data["args"] == {"command": command, "cwd": str(folder)}, started.data

        # A failing command: its status, and the task failed.
        interaction = approved("ls missing")
        reply = user.wait_reply(session, interaction)
        assert ran(reply, "allow-once", "ls missing", folder, "exit status 2"), reply
        failed = stream.wait_for("task_failed", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        assert terminal(failed)["exit_code"] == 2 and "missing" in terminal(failed)["output"], failed.data

        # The time limit: stopped, and what it started with it.
        interaction = approved("sleep 30 & echo started; wait")
        reply = user.wait_reply(session, interaction)
        assert ran(reply, "allow-once", "sleep 30 & echo started; wait", folder, "stopped, timed out after 2 s"), reply
        failed = stream.wait_for("task_failed", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        assert failed.data["error"] == "timed out after 2 s", failed.data
        assert terminal(failed)["output"] == "started\n" and terminal(failed)["exit_code"] is None, failed.data

        # The output cap: the first 1000 bytes, then stopped.
        interaction = approved("yes")
        reply = user.wait_reply(session, interaction)
        assert ran(reply, "allow-once", "yes", folder, "stopped, output cut at 1000 bytes"), reply
        failed = stream.wait_for("task_failed", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        assert terminal(failed)["output"] == "y\n" * 500 and terminal(failed)["truncated"] is True, failed.data

        # Denied: nothing runs.
        interaction, approval_id = _approval_turn(user, stream, session, "rm notes.txt")
        user.decide(approval_id, "deny")
        assert user.wait_reply(session, interaction)["text"] == "deny: `rm notes.txt` was not run"
        assert (folder / "notes.txt").exists()

        # A cancel stops a command that runs.
        interaction = approved("echo going; sleep 30")
        stream.wait_for("task_progress", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        user.cancel(session, interaction)
        reply = user.wait_reply(session, interaction, timeout=5)
        assert reply["text"].startswith("allow-once: ran `echo going; sleep 30`"), reply
        assert reply["text"].endswith("[cancelled]"), reply
        cancelled = stream.wait_for("task_cancelled", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        assert terminal(cancelled)["output"] == "going\n", cancelled.data
    finally:
        stream.close()
        assert bridge.stop() == 0


def _on_a_terminal(cli, *args):
    """What `relay ARGS` prints for a person: its stdout is a pseudo-terminal."""
    import pty
    import subprocess
    from test_60_relay_cli import RELAY_CLI
    leader, follower = pty.openpty()
    proc = subprocess.Popen([RELAY_CLI] + list(args), stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=subprocess.PIPE, env=dict(cli.env, COLUMNS="200"))
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(WAIT) == 0, proc.stderr.read()
    return out.decode()


ORDER = "jsonl:%s %s" % (PYTHON, os.path.join(os.path.dirname(os.path.abspath(__file__)), "order_agent.py"))


def test_a_turn_reads_in_the_order_it_happened(relay, user_token, tmp_path):
    """Issue 40, item 6: text a jsonl agent writes after a tool call or an approval is a new agent message
    below them, not more text in the message that opened before them; the timeline, `relay history` and
    `relay send` (which follows the turn through its messages to the last) all read in that order."""
    from test_60_relay_cli import Cli
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start(ORDER)
    cli = Cli(tmp_path)
    cli.login(relay)
    try:
        session = user.create_session()
        send = cli.start("send", session, "check the notes")
        asked = send.wait_for("approval_requested")["data"]
        user.decide(asked["approval_id"], "approve")
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        interaction = asked["interaction_id"]
        told = "Told: allow-once. All checks passed."
        reply = user.wait_reply(session, interaction)
        assert reply["text"] == told and reply["finish_reason"] == "stop", reply

        # The stored turn: three agent messages, the first two ended as tool calls, in the order they opened.
        replies = sorted(user.replies(session, interaction), key=lambda m: m["created_at"])
        assert [(m["text"], m["finish_reason"]) for m in replies] == [
            ("First I read the notes.", "tool_call"), ("The notes say to run the checks.", "tool_call"),
            (told, "stop")], replies

        # The timeline: message, task, message, approval, message.
        items = assert_ok(user.call("GET", "/v1/me/sessions/%s/timeline?limit=100" % session))["items"][::-1]
        turn = [i for i in items if i[i["type"]].get("interaction_id") == interaction]
        seen = [(i["type"], i["message"]["text"] if i["type"] == "message" else i[i["type"]].get("status") or i[i["type"]].get("decision"))
                for i in turn if not (i["type"] == "message" and i["message"]["role"] == "user")]
        assert seen == [("message", "First I read the notes."), ("task", "completed"),
                        ("message", "The notes say to run the checks."), ("approval", "approve"),
                        ("message", told)], seen

        # relay send followed the turn to its last message, its events in the same order: each message
        # opened after what came before it, and ended (as a tool call) when the next text came.
        names = [line["event"] for line in send.lines
                 if line["event"] in ("message_added", "task_created", "approval_requested", "done")]
        assert names == ["message_added", "task_created", "message_added", "approval_requested", "message_added",
                         "done"], send.lines
        ended = [line["data"]["text"] for line in send.lines if line["event"] == "message_finalized"]
        assert ended == ["First I read the notes.", "The notes say to run the checks."], send.lines
        assert send.events("done")[0]["data"]["text"] == told, send.lines

        # relay history on a terminal's layout: each text below what came before it.
        out = _on_a_terminal(cli, "history", session)
        where = [out.find(s) for s in ("check the notes", "First I read the notes.", "Read notes.md",
                                       "The notes say to run the checks.", "The agent asks to run make check", told)]
        assert -1 not in where and where == sorted(where), (where, out)
    finally:
        assert bridge.stop() == 0
