"""The `relay` terminal client end to end: account, pairing, sessions, send
with a streamed reply and tasks, approvals answered from the client,
`watch --json`, and exit statuses.

The bridge's side is played from Python (streams.BridgeSocket plus the bridge
REST routes), because relay-bridge is not in the tree yet; Agent below is
that bridge. The helpers of this file are shared by test_61 and test_62.

Binary: RELAY_CLI, else `relay` next to RELAYD.
"""
import json
import os
import pty
import queue
import select
import subprocess
import threading
import time
import uuid

import pytest

from bridgelib import Socket, key
from relaylib import RELAYD, SLOW, assert_ok, mint_token, sanitizer_report

RELAY_CLI = os.environ.get("RELAY_CLI") or os.path.join(os.path.dirname(RELAYD), "relay")
WAIT = 15 * SLOW


@pytest.fixture(scope="module", autouse=True)
def _relay_cli_binary():
    assert os.access(RELAY_CLI, os.X_OK), "relay binary not found at %s (set RELAY_CLI)" % RELAY_CLI


class Cli:
    """Runs the real `relay` with its own config folder."""

    def __init__(self, tmp_path, extra_env=None):
        self.config = tmp_path / "relay-config"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
        self.env.update({"RELAY_CONFIG_DIR": str(self.config), "NO_COLOR": "1"})
        self.env.update(extra_env or {})

    def run(self, *args, timeout=WAIT, stdin=None):
        proc = subprocess.run([RELAY_CLI] + list(args), capture_output=True, text=True, timeout=timeout,
                              env=self.env, stdin=stdin if stdin is not None else subprocess.DEVNULL)
        assert sanitizer_report(proc.stderr) is None, proc.stderr[-6000:]
        return proc

    def json(self, *args, timeout=WAIT):
        proc = self.run(*args, timeout=timeout)
        assert proc.returncode == 0, "relay %s: %d\n%s\n%s" % (args, proc.returncode, proc.stdout, proc.stderr)
        return json.loads(proc.stdout)

    def start(self, *args, env=None):
        full = dict(self.env)
        full.update(env or {})
        return Lines(subprocess.Popen([RELAY_CLI] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=full))

    def login(self, relay, user="alice"):
        token = mint_token(relay.data, user)
        out = self.json("login", "--server", relay.url(""), "--token", token)
        assert out["user_id"] == user
        return token


class Lines:
    """A running `relay` whose stdout is read line by line (JSON lines) on a thread."""

    def __init__(self, proc):
        self.proc = proc
        self.lines = []
        self.queue = queue.Queue()
        self.stderr = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.queue.put(line)
        self.queue.put(None)

    def _read_err(self):
        for line in self.proc.stderr:
            self.stderr.append(line)

    def next(self, timeout=WAIT):
        try:
            line = self.queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no line from relay within %ss; so far %r; stderr %r"
                                 % (timeout, self.lines, "".join(self.stderr)))
        if line is None:
            raise AssertionError("relay ended (%r); lines %r; stderr %r"
                                 % (self.proc.wait(5), self.lines, "".join(self.stderr)))
        obj = json.loads(line)
        self.lines.append(obj)
        return obj

    def wait_for(self, event, timeout=WAIT):
        deadline = time.monotonic() + timeout
        while True:
            line = self.next(max(0.1, deadline - time.monotonic()))
            if line.get("event") == event:
                return line

    def finish(self, timeout=WAIT):
        """Reads the rest of stdout and returns the exit status."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.queue.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.proc.kill()
                raise AssertionError("relay still running; lines %r; stderr %r" % (self.lines, "".join(self.stderr)))
            if line is None:
                break
            self.lines.append(json.loads(line))
        status = self.proc.wait(timeout)
        time.sleep(0.05)  # the stderr reader catches up with the last lines
        assert sanitizer_report("".join(self.stderr)) is None, "".join(self.stderr)[-6000:]
        return status

    def events(self, name):
        return [line for line in self.lines if line.get("event") == name]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


class Agent:
    """The bridge side: a paired installation's socket and REST calls, played from Python."""

    def __init__(self, relay, installation_id, token):
        self.relay = relay
        self.id = installation_id
        self.token = token
        self.updates = queue.Queue()
        self.connect()

    def connect(self):
        self.sock = Socket(self.relay, self.token)
        self.sock.expect_ready(self.id)
        threading.Thread(target=self._pump, args=(self.sock,), daemon=True).start()

    def _pump(self, sock):
        while not sock._closed.is_set():
            try:
                frame = sock.next(0.5)
            except AssertionError:
                continue
            if frame.get("type") == "update":
                self.updates.put(frame["update"])
                try:
                    sock.ack(frame["update"]["update_id"])
                except Exception:
                    pass

    def next_update(self, kind, timeout=WAIT):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "no %s update within %ss" % (kind, timeout)
            try:
                update = self.updates.get(timeout=left)
            except queue.Empty:
                continue
            if update["type"] == kind:
                return update

    def post(self, route, body):
        return assert_ok(self.relay.post("/v1/bridge/" + route, body, token=self.token))

    def open(self, session_id, interaction_id, text=""):
        return self.post("sendMessage", {"session_id": session_id, "interaction_id": interaction_id,
                                         "text": text, "idempotency_key": key()})["message_id"]

    def delta(self, message_id, text):
        self.post("sendMessageDelta", {"message_id": message_id, "delta": text, "idempotency_key": key()})

    def end(self, message_id, **extra):
        body = {"message_id": message_id, "idempotency_key": key()}
        body.update(extra)
        self.post("sendMessageEnd", body)

    def task(self, route, session_id, interaction_id, task_id, **extra):
        body = {"session_id": session_id, "interaction_id": interaction_id, "task_id": task_id}
        body.update(extra)
        self.post(route, body)

    def request_approval(self, session_id, interaction_id, **extra):
        body = {"session_id": session_id, "interaction_id": interaction_id,
                "approval_id": "apr_" + uuid.uuid4().hex, "action": "exec", "title": "Run a command",
                "message": "The agent wants to run a command", "severity": "medium",
                "command": "make test", "host": "build-box", "idempotency_key": key()}
        body.update(extra)
        return self.post("requestApproval", body)

    def close(self):
        self.sock.close()


def pair_with_cli(cli, relay):
    """A bridge starts pairing, `relay pair CODE` claims it, the bridge polls its token: an Agent."""
    start = relay.pairing_start(connector_type="python-test", host_label="test-box")
    claimed = cli.json("pair", start["code"].lower()[:3] + "-" + start["code"].lower()[3:])
    installation_id = claimed["installation_id"]
    polled = assert_ok(relay.poll(start["poll_token"]))
    assert polled["status"] == "paired" and polled["installation_id"] == installation_id
    return Agent(relay, installation_id, polled["token"])


def new_session(cli, agent, title="tests"):
    out = cli.json("new", "--installation", agent.id, "--title", title)
    return out["session_id"]


def in_thread(fn, *args):
    """Runs fn on a thread; join() re-raises what it raised."""
    errors = []

    def body():
        try:
            fn(*args)
        except BaseException as e:  # noqa: B902 - reported to the test
            errors.append(e)

    t = threading.Thread(target=body, daemon=True)
    t.start()

    def join(timeout=WAIT):
        t.join(timeout)
        assert not t.is_alive(), "the agent thread is still running"
        if errors:
            raise errors[0]
    return join


# ---- account -------------------------------------------------------------------------------------

def test_login_stores_credentials_0600_and_whoami(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    path = cli.config / "client.json"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(cli.config.stat().st_mode & 0o777) == "0o700"
    who = cli.json("whoami")
    assert who["user"]["id"] == "alice" and who["installations"] == 0 and who["sessions"] == 0
    # A token the relay refuses is not stored: remote error, exit 1.
    bad = cli.run("login", "--server", relay.url(""), "--token", "eyJ.bad.token")
    assert bad.returncode == 1, bad
    assert json.loads(bad.stdout)["code"] == "invalid_token"
    assert cli.json("whoami")["user"]["id"] == "alice"


def test_not_logged_in_is_a_runtime_error(tmp_path):
    cli = Cli(tmp_path)
    proc = cli.run("whoami")
    assert proc.returncode == 1
    assert "not logged in" in json.loads(proc.stdout)["error"]


def test_usage_errors_exit_2(relay, tmp_path):
    cli = Cli(tmp_path)
    for argv in (["bogus"], [], ["send", "ses_x"], ["whoami", "--nope"], ["login", "--server", "ftp://x", "--token", "t"],
                 ["installation", "paint", "inst_x"], ["approve", "apr_x", "--scope", "tool"],
                 ["send", "ses_x", "hi", "--timeout", "soon"], ["history", "ses_x", "--limit", "500"]):
        proc = cli.run(*argv)
        assert proc.returncode == 2, (argv, proc.returncode, proc.stdout, proc.stderr)
        assert "error" in json.loads(proc.stdout), (argv, proc.stdout)
    manifest = cli.json("help", "--json")
    names = {c["name"] for c in manifest["commands"]}
    assert {"login", "whoami", "pair", "installations", "installation", "sessions", "new", "rename", "archive",
            "unarchive", "delete", "restore", "history", "send", "chat", "approvals", "approve", "deny",
            "watch"} <= names


def test_an_empty_id_is_refused_before_any_request(relay, tmp_path):
    """Issue 35, item 9: `relay send "" hi` made the path /v1/me/sessions//send and got "no such route
    (HTTP 404)". An empty name is a usage error that says which argument, and nothing reaches the relay:
    with the relay stopped, a request would be a runtime error (1), not a usage one (2)."""
    cli = Cli(tmp_path)
    cli.login(relay)
    relay.stop()
    for argv, name in ((["send", "", "hi"], "<session>"), (["history", ""], "[session]"),
                       (["chat", ""], "[session]"), (["cancel", ""], "<session>"), (["approve", ""], "<approval>"),
                       (["rename", "", "x"], "<session>")):
        proc = cli.run(*argv)
        assert proc.returncode == 2, (argv, proc.returncode, proc.stdout, proc.stderr)
        error = json.loads(proc.stdout)["error"]
        assert error == "%s: the %s argument is empty: give one (nothing was sent)" % (argv[0], name), (argv, error)
    # An empty pairing code is refused by pair itself, which says what a code is (test_66), also before any request.
    proc = cli.run("pair", "")
    assert proc.returncode == 2 and "7 letters" in json.loads(proc.stdout)["error"], (proc.stdout, proc.stderr)
    # Free text may be empty: this one is sent (and fails to reach the stopped relay).
    proc = cli.run("rename", "ses_x", "")
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)


def test_history_without_a_session_shows_the_newest_as_chat_does(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    proc = cli.run("history")
    assert proc.returncode == 1 and "no session yet: start one with relay new" in proc.stdout, proc
    agent = pair_with_cli(cli, relay)
    older = new_session(cli, agent, title="older")
    time.sleep(0.01)
    newer = new_session(cli, agent, title="newer")
    token = mint_token(relay.data, "alice")
    assert_ok(relay.post("/v1/me/sessions/%s/send" % newer, {"text": "in the newer one"}, token=token))
    proc = cli.run("history")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert [m["text"] for m in json.loads(proc.stdout)["messages"]] == ["in the newer one"], proc.stdout
    assert 'showing your newest session, %s "newer" (relay history SESSION picks another)' % newer in proc.stderr, \
        proc.stderr
    assert json.loads(cli.run("history", older).stdout)["messages"] == []
    agent.close()


def test_remote_errors_exit_1_with_request_id(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    for argv, code in ((["history", "ses_missing"], "session_not_found"),
                       (["send", "ses_missing", "hi"], "session_not_found"),
                       (["approve", "apr_missing"], "approval_not_found"),
                       (["pair", "ABCDEFG"], "pairing_not_found")):
        proc = cli.run(*argv)
        assert proc.returncode == 1, (argv, proc.returncode, proc.stdout, proc.stderr)
        error = json.loads(proc.stdout)
        assert error["code"] == code, (argv, error)
        assert error["request_id"].startswith("req_"), error


# ---- pairing, installations, sessions ------------------------------------------------------------

def test_pair_installations_and_session_lifecycle(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    try:
        inst = cli.json("installations")["installations"]
        assert [i["id"] for i in inst] == [agent.id]
        assert inst[0]["health"] == "healthy" and inst[0]["host_label"] == "test-box"
        cli.json("installation", "rename", agent.id, "build box")
        cli.json("installation", "emoji", agent.id, "🐢")
        inst = cli.json("installations")["installations"][0]
        assert inst["custom_display_name"] == "build box" and inst["custom_emoji"] == "🐢"
        cli.json("installation", "emoji", agent.id, "")
        assert cli.json("installations")["installations"][0]["custom_emoji"] is None

        ses = new_session(cli, agent, "first")
        assert [s["id"] for s in cli.json("sessions")["sessions"]] == [ses]
        cli.json("rename", ses, "renamed")
        assert cli.json("sessions")["sessions"][0]["title"] == "renamed"
        cli.json("archive", ses)
        assert cli.json("sessions")["sessions"] == []
        assert [s["id"] for s in cli.json("sessions", "--archived")["sessions"]] == [ses]
        cli.json("unarchive", ses)
        cli.json("delete", ses)
        assert cli.run("history", ses).returncode == 1
        cli.json("restore", ses)
        assert cli.json("history", ses)["messages"] == []
        assert agent.next_update("session.started")["session_id"] == ses
    finally:
        agent.close()
    cli.json("installation", "revoke", agent.id)
    # Revoked installations are listed with --all only (issue 17, item 6; test_67).
    assert cli.json("installations", "--all")["installations"][0]["state"] == "revoked"


# ---- send ----------------------------------------------------------------------------------------

def test_send_streams_the_reply_and_task_lines(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)

    def play():
        update = agent.next_update("session.message")
        assert update["payload"]["message"]["text"] == "what is the weather?"
        iid = update["interaction_id"]
        mid = agent.open(ses, iid)
        agent.delta(mid, "It is ")
        agent.task("createTask", ses, iid, "t1", kind="http", name="weather", status_label="asking the sky")
        agent.task("finishTask", ses, iid, "t1", status="completed", name="weather", result={"sky": "blue"})
        agent.delta(mid, "sunny.")
        agent.end(mid, finish_reason="stop", usage={"output_tokens": 3})

    join = in_thread(play)
    send = cli.start("send", ses, "what is the weather?")
    status = send.finish()
    join()
    assert status == 0, (send.lines, send.stderr)
    sent = send.events("sent")[0]["data"]
    deltas = [line["data"]["delta"] for line in send.events("message_delta")]
    assert deltas == ["It is ", "sunny."]
    assert all(line["data"]["interaction_id"] == sent["interaction_id"] for line in send.events("message_delta"))
    assert send.events("task_created")[0]["data"]["name"] == "weather"
    assert send.events("task_completed")[0]["data"]["task_id"] == "t1"
    names = [line["event"] for line in send.lines]
    assert names.index("task_created") < names.index("task_completed") < names.index("done")
    done = send.events("done")[0]["data"]
    assert done == {"status": "final", "interaction_id": sent["interaction_id"], "message_id": done["message_id"],
                    "text": "It is sunny.", "finish_reason": "stop", "source": "stream"}
    # oldest first, as its help says (issue 28), the task between the user's message and the reply
    history = cli.json("history", ses)
    assert [m["role"] for m in history["messages"]] == ["user", "agent"]
    assert [i["type"] for i in history["items"]] == ["message", "message", "task"], history
    assert history["items"][2]["task"]["result"] == {"sky": "blue"}
    agent.close()


def on_terminal(cli, *args, colour=False):
    """Runs relay with stdout and stderr on a pseudo-terminal: its human output. Returns (status, output)."""
    env = dict(cli.env, TERM="xterm", COLUMNS="100")
    if colour:
        env.pop("NO_COLOR", None)
    master, slave = pty.openpty()
    proc = subprocess.Popen([RELAY_CLI] + list(args), stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env,
                            close_fds=True)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + WAIT
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    status = proc.wait(timeout=WAIT)
    return status, b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def test_history_shows_the_timeline_with_diffs_plans_and_approvals(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    iid = assert_ok(relay.post("/v1/me/sessions/%s/send" % ses, {"text": "fix the test"},
                               token=mint_token(relay.data, "alice")))["interaction_id"]
    diff = {"type": "diff", "path": "/work/app.py", "old_text": "x = 1\ny = 2\n", "new_text": "x = 2\ny = 2\n"}
    first = agent.open(ses, iid, "Let me look.")
    agent.end(first, finish_reason="tool_call")
    time.sleep(0.003)
    agent.task("createTask", ses, iid, "call_1", kind="edit", status_label="Edit app.py", args={"path": "/work/app.py"})
    time.sleep(0.003)
    approval = agent.request_approval(ses, iid, action="edit", title="Edit app.py", command="/work/app.py",
                                      content=[diff])
    assert_ok(relay.post("/v1/me/approvals/%s" % approval["approval_id"], {"decision": "approve"},
                         token=mint_token(relay.data, "alice")))
    agent.task("finishTask", ses, iid, "call_1", status="completed", result={"content": [diff]})
    time.sleep(0.003)
    agent.task("createTask", ses, iid, "plan_" + iid, kind="plan", status_label="Plan")
    agent.task("updateTask", ses, iid, "plan_" + iid, partial_result={"entries": [
        {"content": "Edit app.py", "priority": "high", "status": "completed"},
        {"content": "Run the tests", "priority": "medium", "status": "pending"}]})
    time.sleep(0.003)
    last = agent.open(ses, iid, "Done: x is 2 now.")
    agent.end(last, finish_reason="stop")

    history = cli.json("history", ses)
    assert [i["type"] for i in history["items"]] == ["message", "message", "task", "approval", "task", "message"]
    assert history["items"][3]["approval"]["decision"] == "approve"
    assert history["items"][3]["approval"]["content"] == [diff]
    assert [m["text"] for m in history["messages"]] == ["fix the test", "Let me look.", "Done: x is 2 now."]
    assert history["has_more"] is False and history["next_cursor"] is None
    # --limit takes the newest items, still shown oldest first
    two = cli.json("history", ses, "--limit", "2")
    assert [i["type"] for i in two["items"]] == ["task", "message"] and two["has_more"] is True

    status, screen = on_terminal(cli, "history", ses)
    assert status == 0, screen
    assert "\x1b[" not in screen, screen
    order = ["you>", "Let me look.", "✓ task Edit app.py completed, edit", "--- a/work/app.py",
             "+++ b/work/app.py", "@@ -1,2 +1,2 @@", "-x = 1", "+x = 2", " y = 2",
             "? approval Edit app.py medium → approved", "▶ plan Plan running", "[x] Edit app.py (high)",
             "[ ] Run the tests", "Done: x is 2 now."]
    at = [screen.find(text) for text in order]
    assert all(i >= 0 for i in at) and at == sorted(at), (list(zip(order, at)), screen)

    status, screen = on_terminal(cli, "history", ses, colour=True)
    assert status == 0, screen
    assert "\x1b[31m-x = 1\x1b[0m" in screen and "\x1b[32m+x = 2\x1b[0m" in screen, screen
    agent.close()


def test_send_on_a_terminal_shows_plans_diffs_and_output_as_they_come(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    diff = {"type": "diff", "path": "/work/app.py", "old_text": "x = 1\n", "new_text": "x = 2\n"}

    def play():
        iid = agent.next_update("session.message")["interaction_id"]
        plan = "plan_" + iid
        agent.task("createTask", ses, iid, plan, kind="plan", status_label="Plan")
        agent.task("updateTask", ses, iid, plan, partial_result={"entries": [
            {"content": "Edit app.py", "priority": "medium", "status": "in_progress"},
            {"content": "Run the tests", "priority": "medium", "status": "pending"}]})
        agent.task("createTask", ses, iid, "e1", kind="edit", status_label="Edit app.py", args={"path": "/work/app.py"})
        agent.task("finishTask", ses, iid, "e1", status="completed", result={"content": [diff]})
        agent.task("updateTask", ses, iid, plan, partial_result={"entries": [
            {"content": "Edit app.py", "priority": "medium", "status": "completed"},
            {"content": "Run the tests", "priority": "medium", "status": "in_progress"}]})
        agent.task("createTask", ses, iid, "r1", kind="execute", status_label="pytest")
        agent.task("finishTask", ses, iid, "r1", status="failed", error={"message": "exit status 1"},
                   result={"content": [{"type": "terminal", "terminal_id": "t", "output": "1 failed",
                                        "exit_code": 1}]})
        agent.task("finishTask", ses, iid, plan, status="completed")
        mid = agent.open(ses, iid, "One test still fails.")
        agent.end(mid, finish_reason="stop")

    join = in_thread(play)
    status, screen = on_terminal(cli, "send", ses, "fix it")
    join()
    assert status == 0, screen
    order = ["plan", "[~] Edit app.py", "[ ] Run the tests", "▶ task edit started: Edit app.py",
             'args {"path":"/work/app.py"}', "✓ task edit completed", "--- a/work/app.py", "-x = 1", "+x = 2",
             "[x] Edit app.py", "[~] Run the tests", "▶ task execute started: pytest", "✗ task execute failed", "1 failed", "exit status 1",
             "error: exit status 1", "One test still fails."]
    at, pos = [], 0
    for text in order:
        pos = screen.find(text, pos)
        at.append(pos)
    assert all(i >= 0 for i in at), (list(zip(order, at)), screen)
    agent.close()


def test_send_without_a_reply_in_time_exits_3(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    started = time.monotonic()
    proc = cli.run("send", ses, "anyone there?", "--timeout", "1500ms")
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert time.monotonic() - started < 10 * SLOW
    agent.close()


def test_approval_answered_from_the_client(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    seen = {}

    def play():
        update = agent.next_update("session.message")
        iid = update["interaction_id"]
        mid = agent.open(ses, iid)
        agent.task("createTask", ses, iid, "t-run", kind="exec", status_label="make test")
        asked = agent.request_approval(ses, iid)
        assert asked["auto_resolved"] is False
        resolved = agent.next_update("approval.resolved")
        seen["resolved"] = resolved["payload"]
        agent.task("finishTask", ses, iid, "t-run", status="completed")
        agent.delta(mid, "tests pass")
        agent.end(mid, finish_reason="stop")
        # The grant made by "always approve this command" answers the next identical request by itself.
        again = agent.request_approval(ses, iid)
        seen["again"] = again

    join = in_thread(play)
    send = cli.start("send", ses, "run the tests")
    requested = send.wait_for("approval_requested")["data"]
    pending = cli.json("approvals")["pending_approvals"]
    assert [a["approval_id"] for a in pending] == [requested["approval_id"]]
    assert pending[0]["command"] == "make test"
    decided = cli.json("approve", requested["approval_id"], "--always", "--scope", "tool")
    assert decided["decision"] == "approve_always" and decided["scope"] == "tool"
    assert send.finish() == 0, (send.lines, send.stderr)
    join()
    assert seen["resolved"]["approval_id"] == requested["approval_id"]
    assert seen["resolved"]["decision"] == "approve_always" and seen["resolved"]["scope"] == "tool"
    assert seen["again"]["auto_resolved"] is True
    assert send.events("approval_resolved")[0]["data"]["approval_id"] == requested["approval_id"]
    assert send.events("done")[0]["data"]["text"] == "tests pass"
    # A second decision changes nothing; deny of an unknown id is a remote error.
    again = cli.json("deny", requested["approval_id"])
    assert again["decision"] == "approve_always" and again["idempotent"] is True
    assert cli.json("approvals")["pending_approvals"] == []
    agent.close()


def test_pending_approval_from_the_snapshot_is_shown_once(relay, tmp_path):
    """spec: client-side resume: the snapshot's approvals are handled like live ones, de-duplicated."""
    cli = Cli(tmp_path)
    token = cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    r = relay.post("/v1/me/sessions/%s/send" % ses, {"text": "earlier"}, token=token)
    iid = assert_ok(r)["interaction_id"]
    early = agent.request_approval(ses, iid)

    def play():
        update = agent.next_update("session.message")
        while update["payload"]["message"]["text"] != "now":
            update = agent.next_update("session.message")
        mid = agent.open(ses, update["interaction_id"])
        agent.end(mid, text="ok", finish_reason="stop")

    join = in_thread(play)
    send = cli.start("send", ses, "now")
    assert send.finish() == 0, (send.lines, send.stderr)
    join()
    asked = send.events("approval_requested")
    assert [a["data"]["approval_id"] for a in asked] == [early["approval_id"]]
    agent.close()


# ---- watch ---------------------------------------------------------------------------------------

def test_watch_json_prints_one_event_per_line(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    watch = cli.start("watch", "--json", "--count", "3")
    hello = watch.next()
    assert hello["event"] == "hello" and "id" not in hello and hello["data"]["user_id"] == "alice"
    ses = new_session(cli, agent, "watched")
    cli.json("rename", ses, "watched twice")
    assert watch.finish() == 0
    created, renamed = watch.lines[1], watch.lines[2]
    assert created["event"] == "session_created" and created["data"]["session_id"] == ses
    assert renamed["event"] == "session_renamed" and renamed["data"]["title"] == "watched twice"
    assert int(renamed["id"]) > int(created["id"])
    # Resuming after the first event replays the second.
    again = cli.start("watch", "--json", "--since", created["id"], "--count", "2")
    assert again.finish() == 0
    assert [line["event"] for line in again.lines] == ["hello", "session_renamed"]
    assert again.lines[1]["id"] == renamed["id"]
    agent.close()


def test_watch_resync_fetches_the_snapshot(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    token = mint_token(relay.data, "alice")
    iid = assert_ok(relay.post("/v1/me/sessions/%s/send" % ses, {"text": "x"}, token=token))["interaction_id"]
    asked = agent.request_approval(ses, iid)
    # An id this relay never issued: the stream answers resync, and the client reloads the snapshot.
    watch = cli.start("watch", "--json", "--since", "12345", "--count", "3")
    assert watch.finish() == 0
    assert [line["event"] for line in watch.lines] == ["hello", "resync", "snapshot"]
    assert watch.lines[1]["data"]["reason"] == "buffer_gap"
    pending = watch.lines[2]["data"]["pending_approvals"]
    assert [a["approval_id"] for a in pending] == [asked["approval_id"]]
    agent.close()


def test_send_stops_when_the_session_is_deleted_mid_turn(relay, tmp_path):
    """spec: client rule 4: the target is gone, so the turn in flight is dropped (exit 1, not a hang)."""
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)

    def play():
        update = agent.next_update("session.message")
        agent.open(ses, update["interaction_id"])

    join = in_thread(play)
    send = cli.start("send", ses, "a long job")
    send.wait_for("message_added")
    join()
    cli.json("delete", ses)
    assert send.finish() == 1, (send.lines, send.stderr)
    done = send.events("done")[0]["data"]
    assert done["status"] == "gone" and "deleted" in done["reason"], done
    agent.close()


def test_chat_reads_a_script_from_a_pipe(relay, tmp_path):
    """Not on a terminal, chat takes one message per input line and prints JSON events; at the end of
    input it still waits for the reply in progress."""
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)

    def play():
        update = agent.next_update("session.message")
        assert update["payload"]["message"]["text"] == "scripted hello"
        mid = agent.open(ses, update["interaction_id"])
        time.sleep(0.5)
        agent.delta(mid, "scripted answer")
        agent.end(mid, finish_reason="stop")

    join = in_thread(play)
    proc = subprocess.run([RELAY_CLI, "chat", ses], input="scripted hello", capture_output=True, text=True,
                          timeout=WAIT, env=cli.env)
    join()
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [line["event"] for line in lines][0] == "sent", lines
    assert lines[-1]["event"] == "done" and lines[-1]["data"]["text"] == "scripted answer", lines
    agent.close()


def test_chat_sends_a_script_s_lines_one_turn_after_the_other(relay, tmp_path):
    """Issue 35, item 7: a piped script's lines arrive while the first reply streams; each is queued
    and sent once the turn before it ended, in order, none thrown away."""
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    received = []

    def play():
        for n in range(3):
            update = agent.next_update("session.message")
            received.append(update["payload"]["message"]["text"])
            mid = agent.open(ses, update["interaction_id"])
            time.sleep(0.3)
            agent.end(mid, text="answer %d" % n, finish_reason="stop")

    join = in_thread(play)
    proc = subprocess.run([RELAY_CLI, "chat", ses], input="one\ntwo\nthree\n", capture_output=True, text=True,
                          timeout=WAIT, env=cli.env)
    join()
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert received == ["one", "two", "three"], received
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [line["data"]["text"] for line in lines if line["event"] == "done"] == ["answer 0", "answer 1", "answer 2"]
    assert [line["event"] for line in lines].count("sent") == 3, lines
    assert proc.stderr.count("(queued: sent when the agent's answer ends") == 2, proc.stderr
    assert "still answering" not in proc.stderr, proc.stderr
    agent.close()


def test_rate_limited_call_waits_retry_after_then_gives_the_answer(relay, tmp_path):
    """spec: client rule 2: a 429 is retried after Retry-After (with jitter), never in a tight loop."""
    cli = Cli(tmp_path)
    token = cli.login(relay)
    for _ in range(5):  # the claim bucket holds 5 tries, then one per 10 s
        relay.claim(token, "ZZZZZZZ")
    assert relay.claim(token, "ZZZZZZZ").status_code == 429
    started = time.monotonic()
    proc = cli.run("pair", "ABCDEFG", timeout=40 * SLOW)
    waited = time.monotonic() - started
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert json.loads(proc.stdout)["code"] == "pairing_not_found"
    assert 5 <= waited <= 30 * SLOW, waited
    assert "HTTP 429" in proc.stderr and "req_" in proc.stderr, proc.stderr


def test_watch_refused_stream_is_a_remote_error(relay, tmp_path):
    """A 401 on the stream is final (spec client rule 1): exit 1, with the answer's X-Request-ID."""
    cli = Cli(tmp_path, {"RELAY_SERVER": relay.url(""), "RELAY_TOKEN": "eyJhbGciOiJFZERTQSJ9.e30.c2ln"})
    proc = cli.run("watch", "--json")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    error = json.loads(proc.stdout.splitlines()[-1])["error"]
    assert "HTTP 401" in error and "request req_" in error, error
