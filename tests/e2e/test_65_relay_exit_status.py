"""`relay send`'s exit status says how the reply ended (issue 17, item 2): 0 when it finished, 4 when it
is final but did not finish (a failed agent behind the real relay-bridge, finish_reason "error"; length;
an end without a finish_reason is a normal end, "stop"), 3 when no final
reply came. The JSON lines are unchanged: `done` carries the finish_reason."""
import json

from test_50_bridge_support import paired
from test_60_relay_cli import Cli, in_thread, new_session, pair_with_cli


def _done(proc):
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    done = [line["data"] for line in lines if line["event"] == "done"]
    assert len(done) == 1, lines
    return done[0]


def test_a_failed_agent_behind_the_bridge_exits_4(relay, user_token, tmp_path):
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start("exec:echo partial; echo 'model not found' >&2; exit 3")
    try:
        cli = Cli(tmp_path)
        cli.login(relay)
        session = user.create_session()
        proc = cli.run("send", session, "hi")
        assert proc.returncode == 4, (proc.returncode, proc.stdout, proc.stderr)
        done = _done(proc)
        assert done["status"] == "final" and done["finish_reason"] == "error", done
        assert done["text"].startswith("partial") and "exit status 3" in done["text"], done
    finally:
        assert bridge.stop() == 0


def test_a_finished_reply_exits_0_and_a_truncated_one_4(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    for reason, status in (("stop", 0), ("tool_call", 0), ("length", 4), ("content_filter", 4)):
        def play():
            update = agent.next_update("session.message")
            mid = agent.open(ses, update["interaction_id"])
            agent.end(mid, text="the reply", finish_reason=reason)
        join = in_thread(play)
        proc = cli.run("send", ses, "go")
        join()
        assert proc.returncode == status, (reason, proc.returncode, proc.stdout, proc.stderr)
        assert _done(proc)["finish_reason"] == reason
    agent.close()


def test_a_reply_ended_without_a_reason_finished_and_exits_0(relay, tmp_path):
    """The protocol authors' bridge ends every message with {message_id, text, usage?,
    idempotency_key}: no finish_reason. That is a normal end (docs/api.md): exit 0 and done says stop.
    A failure says so with its own reason: exit 4."""
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    for extra, status, reason in (({}, 0, "stop"), ({"usage": {"output_tokens": 2}}, 0, "stop"),
                                  ({"finish_reason": "error"}, 4, "error"),
                                  ({"finish_reason": "cancelled"}, 4, "cancelled")):
        def play():
            update = agent.next_update("session.message")
            mid = agent.open(ses, update["interaction_id"])
            agent.delta(mid, "the ")
            agent.end(mid, text="the reply", **extra)
        join = in_thread(play)
        proc = cli.run("send", ses, "go")
        join()
        assert proc.returncode == status, (extra, proc.returncode, proc.stdout, proc.stderr)
        done = _done(proc)
        assert done["finish_reason"] == reason and done["text"] == "the reply", (extra, done)
    agent.close()


def test_no_final_reply_is_still_3(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    proc = cli.run("send", ses, "anyone?", "--timeout", "1s")
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    agent.close()


def test_the_exit_statuses_are_documented(tmp_path):
    manifest = Cli(tmp_path).json("help", "--json")
    codes = {row["code"]: row["meaning"] for row in manifest["exit_codes"]}
    assert set(codes) == {0, 1, 2, 3, 4}, codes
    assert "did not finish" in codes[4], codes
