"""Device capability requests in the terminal client (ours, issue 28): `relay chat` on a real
terminal (tmux, as test_62) shows the agent's request with its reason and how to answer it;
`relay capability refuse` refuses it, `relay capability location` answers a location typed by
hand, `relay capabilities` lists the pending ones; the agent hears each answer."""
import uuid

from bridgelib import key
from test_60_relay_cli import Cli, in_thread, new_session, pair_with_cli
from test_62_relay_chat import screen, start_in_tmux, tmux, wait_screen  # noqa: F401 - tmux is a fixture


def _ask(agent, ses, iid, capability, reason):
    return agent.post("requestDeviceCapability", {"session_id": ses, "interaction_id": iid,
                                                  "capability": capability, "reason": reason,
                                                  "idempotency_key": key()})["request_id"]


def test_chat_shows_the_request_and_relay_refuses_it(relay, tmp_path, tmux):
    cli = Cli(tmp_path)
    cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent, "capabilities")
    seen = {}

    def turn():
        update = agent.next_update("session.message")
        iid = update["interaction_id"]
        mid = agent.open(ses, iid)
        seen["request_id"] = _ask(agent, ses, iid, "camera", "to read the serial number on the box")
        seen["result"] = agent.next_update("device_capability.result")["payload"]
        agent.delta(mid, "no photo then")
        agent.end(mid, finish_reason="stop")

    join = in_thread(turn)
    start_in_tmux(tmux, cli, ["chat", ses], no_color=True)
    wait_screen(tmux, "you>")
    tmux("send-keys", "-t", "chat", "what is the serial?", "Enter")
    shown = wait_screen(tmux, "the agent asks for a photo from your camera: to read the serial number on the box")
    rid = seen["request_id"]
    assert "refuse: relay capability refuse %s" % rid in shown, shown

    listed = cli.json("capabilities")["pending_capability_requests"]
    assert [(p["request_id"], p["capability"]) for p in listed] == [(rid, "camera")], listed
    out = cli.json("capability", "refuse", rid)
    assert out["request_id"] == rid and out["status"] == "refused" and "idempotent" not in out, out
    shown = wait_screen(tmux, "no photo then")
    join()
    assert seen["result"] == {"request_id": rid, "capability": "camera", "status": "refused"}, seen
    assert "capability request %s refused" % rid in shown, shown
    # A second answer changes nothing and says so.
    again = cli.json("capability", "refuse", rid)
    assert again["status"] == "refused" and again["idempotent"] is True, again
    tmux("send-keys", "-t", "chat", "/quit", "Enter")
    wait_screen(tmux, "relay exited with status 0")
    agent.close()


def test_a_location_typed_by_hand_and_usage_errors(relay, tmp_path):
    cli = Cli(tmp_path)
    token = cli.login(relay)
    agent = pair_with_cli(cli, relay)
    ses = new_session(cli, agent)
    iid = relay.post("/v1/me/sessions/%s/send" % ses, {"text": "x"}, token=token).json()["result"]["interaction_id"]
    rid = _ask(agent, ses, iid, "location", "to find the nearest station")
    for bad in (["capability", "refuse"], ["capability", "location", rid], ["capability", "location", rid, "north"],
                ["capability", "allow", rid]):
        out = cli.run(*bad)
        assert out.returncode == 2, (bad, out)
    out = cli.json("capability", "location", rid, "52.52,13.405,20")
    assert out["status"] == "answered", out
    payload = agent.next_update("device_capability.result")["payload"]
    assert payload["location"] == {"latitude": 52.52, "longitude": 13.405, "accuracy": 20}, payload
    assert cli.json("capabilities")["pending_capability_requests"] == []
    out = cli.run("capability", "refuse", "dcr_" + uuid.uuid4().hex[:20])
    assert out.returncode == 1 and "capability_request_not_found" in out.stdout + out.stderr, out
    agent.close()
