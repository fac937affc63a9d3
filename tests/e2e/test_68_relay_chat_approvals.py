"""Approvals in `relay chat` on a real terminal (issue 17, item 7), with tmux as in test_62: one key
answers, no Enter; a finished task shows its final status, not its last progress label; "approve for
this session" says what it does (stored as approve, spec decision mapping; docs/api.md); and
`relay approve --always` asks for the same scope as the chat's `a`: tool."""
import os

from test_60_relay_cli import Cli, in_thread, new_session, pair_with_cli
from test_62_relay_chat import screen, start_in_tmux, tmux, wait_screen  # noqa: F401 - tmux is a fixture

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def test_one_key_answers_and_a_finished_task_shows_its_status(relay, tmp_path, tmux):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent, "one key")
    seen = {}

    def turn():
        update = agent.next_update("session.message")
        iid = update["interaction_id"]
        mid = agent.open(ses, iid)
        agent.task("createTask", ses, iid, "t-shell", kind="exec", name="shell", status_label="deciding")
        agent.task("updateTask", ses, iid, "t-shell", progress_percent=50, status_label="halfway")
        agent.request_approval(ses, iid, title="Run ls", command="ls -la")
        seen["decision"] = agent.next_update("approval.resolved")["payload"]
        agent.task("finishTask", ses, iid, "t-shell", status="completed", name="shell")
        agent.delta(mid, "all done")
        agent.end(mid, finish_reason="stop")

    join = in_thread(turn)
    start_in_tmux(tmux, cli, ["chat", ses])
    wait_screen(tmux, "you>")
    tmux("send-keys", "-t", "chat", "run ls", "Enter")
    shown = wait_screen(tmux, "answer>")
    assert "one key answers, no Enter needed" in shown, shown
    # The session's approval is asked with the label of what s really does.
    assert "approve for this session while this chat is open" in shown, shown
    tmux("send-keys", "-t", "chat", "o")  # no Enter
    shown = wait_screen(tmux, "all done")
    join()
    assert seen["decision"]["decision"] == "approve", seen
    assert "task shell started: deciding" in shown, shown
    assert "task shell completed" in shown and "completed: halfway" not in shown, shown
    # Line editing is back for the next message.
    wait_screen(tmux, "you>")
    tmux("send-keys", "-t", "chat", "/quit", "Enter")
    wait_screen(tmux, "relay exited with status 0")
    agent.close()


def test_approve_always_defaults_to_the_scope_of_the_chats_a(relay, tmp_path):
    cli = Cli(tmp_path)
    token = cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    iid = relay.post("/v1/me/sessions/%s/send" % ses, {"text": "x"}, token=token).json()["result"]["interaction_id"]
    asked = agent.request_approval(ses, iid, command="make deploy")
    decided = cli.json("approve", asked["approval_id"], "--always")
    assert decided["decision"] == "approve_always" and decided["scope"] == "tool", decided
    assert decided["scope_value"] == "make deploy", decided
    help_text = cli.run("help", "approve").stdout
    assert "default tool" in help_text, help_text
    agent.close()


def test_the_decision_is_written_down():
    with open(os.path.join(REPO, "docs", "api.md"), encoding="utf-8") as f:
        api = " ".join(f.read().split())
    assert "approveForSession" in api and "approve for this session while this chat is open" in api
