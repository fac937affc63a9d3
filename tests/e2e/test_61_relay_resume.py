"""Client-side resume of `relay send`: the relay restarts mid-turn (kill -9),
the client's stream reconnects with Last-Event-ID, gets `resync` (the new
process never issued that id), reloads the snapshot and finds the finalised
reply by polling the session's messages (every 3 s, for up to 24 s).

relayd comes back on the same port, so the client's stored server stays
right; RELAY_RECONNECT_MS holds the client's first reconnect back long
enough for the reply to be finalised while it is away.
"""
import json
import subprocess
import time

import relaylib
from relaylib import SLOW, assert_ok
from test_60_relay_cli import RELAY_CLI, WAIT, Cli, in_thread, new_session, pair_with_cli


def restart_on_same_port(relay, monkeypatch):
    port = relay.port
    relay.kill9()
    monkeypatch.setattr(relaylib, "free_port", lambda host="127.0.0.1": port)
    relay.start()
    assert relay.port == port


def test_send_resumes_after_relay_restart_by_polling(relayd, tmp_path, monkeypatch):
    relay = relayd(bus="local")  # the resync needs a ring that died with the process (a shared bus keeps it)
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    turn = {}

    def first_half():
        update = agent.next_update("session.message")
        turn["iid"] = update["interaction_id"]
        turn["mid"] = agent.open(ses, turn["iid"])
        agent.delta(turn["mid"], "partial ")

    join = in_thread(first_half)
    send = cli.start("send", ses, "tell me something", env={"RELAY_RECONNECT_MS": str(3000 * SLOW)})
    delta = send.wait_for("message_delta")
    join()
    assert delta["data"]["delta"] == "partial "
    agent.sock.close()
    # docs/api.md "Durability": a delta is answered once its batch has committed, so the one acknowledged
    # above survives the kill -9 below with no wait.

    restart_on_same_port(relay, monkeypatch)
    # The bridge finishes the reply while the client is still waiting to reconnect.
    agent.delta(turn["mid"], "answer")
    agent.end(turn["mid"], finish_reason="stop")

    assert send.finish(timeout=WAIT + 30 * SLOW) == 0, (send.lines, "".join(send.stderr))
    names = [line["event"] for line in send.lines]
    assert "resync" in names, names
    assert names.index("resync") < names.index("polled") < names.index("done"), names
    done = send.events("done")[0]["data"]
    assert done["source"] == "poll" and done["text"] == "partial answer", done
    assert done["interaction_id"] == turn["iid"]
    assert "reconnecting" in "".join(send.stderr)


def test_send_follows_live_events_after_a_plain_reconnect(relayd, tmp_path, monkeypatch):
    """A reply finalised after the client is back arrives on the stream itself."""
    relay = relayd(bus="local")  # the resync needs a ring that died with the process (a shared bus keeps it)
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    turn = {}

    def first_half():
        update = agent.next_update("session.message")
        turn["iid"] = update["interaction_id"]
        turn["mid"] = agent.open(ses, turn["iid"])

    join = in_thread(first_half)
    send = cli.start("send", ses, "slow one", env={"RELAY_RECONNECT_MS": "200"})
    send.wait_for("message_added")
    join()
    agent.sock.close()
    restart_on_same_port(relay, monkeypatch)
    send.wait_for("resync", timeout=WAIT)
    agent.delta(turn["mid"], "late but live")
    agent.end(turn["mid"], finish_reason="stop")
    assert send.finish() == 0, (send.lines, "".join(send.stderr))
    done = send.events("done")[0]["data"]
    assert done["text"] == "late but live"
    history = assert_ok(relay.get("/v1/me/sessions/%s/messages" % ses,
                                  headers={"Authorization": "Bearer " + cli_token(cli)}))
    assert history["messages"][0]["state"] == "final"


def cli_token(cli):
    with open(cli.config / "client.json") as f:
        return json.load(f)["token"]


def test_chat_cold_start_follows_a_reply_still_streaming(relay, tmp_path):
    """spec: client-side resume: a turn in flight when the client starts is followed to its end."""
    cli = Cli(tmp_path)
    token = cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    iid = assert_ok(relay.post("/v1/me/sessions/%s/send" % ses, {"text": "long story"}, token=token))["interaction_id"]
    mid = agent.open(ses, iid)
    agent.delta(mid, "Once upon ")

    def finish_later():
        time.sleep(1.0 * SLOW)
        agent.delta(mid, "a time.")
        agent.end(mid, finish_reason="stop")

    join = in_thread(finish_later)
    # Nothing to type (stdin is empty): chat still waits for the reply in flight, then leaves.
    proc = subprocess.run([RELAY_CLI, "chat", ses], input="", capture_output=True, text=True, timeout=WAIT,
                          env=cli.env)
    join()
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    done = [line for line in lines if line["event"] == "done"]
    assert len(done) == 1 and done[0]["data"]["interaction_id"] == iid, lines
    assert done[0]["data"]["text"] == "Once upon a time.", lines
