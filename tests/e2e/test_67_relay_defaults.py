"""Fewer ids to paste (issue 17, item 6): `relay new` runs on the only installation (or the only healthy
one) and asks when several could; `relay chat` without a session takes the newest; revoked
installations leave the default lists and choices (`--all` brings them back)."""
import json
import subprocess
import time

from test_60_relay_cli import RELAY_CLI, WAIT, Cli, in_thread, new_session, pair_with_cli


def _offline_installation(relay, token, label):
    """An installation paired but never connected: offline."""
    inst, _bridge_token, _ = relay.pair(token, host_label=label)
    return inst


def test_new_runs_on_the_only_installation(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    proc = cli.run("new", "--title", "defaulted")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    out = json.loads(proc.stdout)
    assert out["session"]["installation_id"] == agent.id, out
    assert agent.id in proc.stderr and "only installation" in proc.stderr, proc.stderr
    agent.close()


def test_new_prefers_the_only_healthy_one_and_asks_when_several_could(relay, tmp_path):
    cli = Cli(tmp_path)
    token = cli.login(relay)
    agent = pair_with_cli(cli, relay)
    offline = _offline_installation(relay, token, "asleep")
    out = cli.json("new")
    assert out["session"]["installation_id"] == agent.id, out
    # Two healthy ones: the user chooses, and is told the ids to choose from.
    other = pair_with_cli(cli, relay)
    proc = cli.run("new")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    error = json.loads(proc.stdout)["error"]
    assert agent.id in error and other.id in error and offline in error and "--installation" in error, error
    assert cli.json("new", "--installation", offline)["session"]["installation_id"] == offline
    agent.close()
    other.close()


def test_revoked_installations_leave_the_default_lists(relay, tmp_path):
    cli = Cli(tmp_path)
    token = cli.login(relay)
    agent = pair_with_cli(cli, relay)
    doomed = _offline_installation(relay, token, "doomed")
    doomed_session = cli.json("new", "--installation", doomed)["session_id"]
    cli.json("installation", "revoke", doomed)
    listed = [i["id"] for i in cli.json("installations")["installations"]]
    assert listed == [agent.id], listed
    everything = {i["id"]: i["state"] for i in cli.json("installations", "--all")["installations"]}
    assert everything == {agent.id: "live", doomed: "revoked"}, everything
    assert doomed_session not in [s["id"] for s in cli.json("sessions")["sessions"]]
    assert doomed_session in [s["id"] for s in cli.json("sessions", "--all")["sessions"]]
    # The revoked one is no candidate: the live one is the only installation.
    assert cli.json("new")["session"]["installation_id"] == agent.id
    agent.close()


def test_chat_without_a_session_takes_the_newest(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    new_session(cli, agent, "older")
    time.sleep(0.01)
    newest = new_session(cli, agent, "newest")

    def play():
        update = agent.next_update("session.message")
        assert update["session_id"] == newest, update
        mid = agent.open(newest, update["interaction_id"])
        agent.end(mid, text="answered in the newest", finish_reason="stop")

    join = in_thread(play)
    proc = subprocess.run([RELAY_CLI, "chat"], input="hello newest", capture_output=True, text=True, timeout=WAIT,
                          env=cli.env)
    join()
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert newest in proc.stderr, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines[-1]["event"] == "done" and lines[-1]["data"]["text"] == "answered in the newest", lines
    agent.close()


def test_chat_without_any_session_says_how_to_start_one(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    proc = cli.run("chat")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "relay new" in json.loads(proc.stdout)["error"]
