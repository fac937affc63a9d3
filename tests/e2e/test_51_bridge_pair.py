"""relay-bridge pair and status against the real relayd."""
import json
import os
import stat

from test_50_bridge_support import RelayBridge, paired


def test_pair_through_the_claim_route_stores_the_token_0600_and_never_prints_it(relay, user_token, tmp_path):
    bridge = RelayBridge(relay, tmp_path)
    inst = bridge.pair(user_token, name="laptop")
    assert inst.startswith("inst_")
    path = bridge.config / "bridge.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    cred = bridge.credentials()
    assert cred["installation_id"] == inst and cred["server"] == relay.url("")
    secret = cred["token"].split(":", 1)[1]
    assert cred["token"].startswith(inst + ":") and len(secret) > 20
    assert secret not in bridge.printed
    # the relay knows the installation under the given name
    me = relay.get("/v1/me", headers={"Authorization": "Bearer " + user_token}).json()["result"]
    assert [i["host_label"] for i in me["installations"] if i["id"] == inst] == ["laptop"]


def test_status_says_paired_and_whether_connected(relay, user_token, tmp_path):
    bridge = RelayBridge(relay, tmp_path)
    proc = bridge.command("status", "--json")
    assert proc.returncode == 3 and json.loads(proc.stdout)["paired"] is False, proc.stdout
    inst = bridge.pair(user_token)
    doc = json.loads(bridge.command("status", "--json").stdout)
    assert doc == {"paired": True, "installation_id": inst, "server": relay.url(""),
                   "connection": "not running", "connected": False}, doc
    bridge.start("exec:cat")
    try:
        doc = json.loads(bridge.command("status", "--json").stdout)
        assert doc["connected"] is True and doc["connection"] == "connected", doc
        assert bridge.token().split(":")[1] not in bridge.command("status").stdout
    finally:
        assert bridge.stop() == 0
    doc = json.loads(bridge.command("status", "--json").stdout)
    assert doc["connected"] is False, doc


def test_run_without_pairing_says_to_pair(relay, tmp_path):
    bridge = RelayBridge(relay, tmp_path)
    proc = bridge.command("run", "--agent", "exec:cat")
    assert proc.returncode == 3 and "relay-bridge pair" in proc.stderr, proc.stderr


def test_an_expired_code_stops_pairing(relayd, tmp_path):
    relay = relayd("--pairing-ttl", "2s")
    bridge = RelayBridge(relay, tmp_path)
    proc = bridge.command("pair", "--server", relay.url(""), "--json", timeout=30)
    assert proc.returncode == 1 and "expired" in proc.stderr, (proc.stdout, proc.stderr)
    assert not (bridge.config / "bridge.json").exists()
