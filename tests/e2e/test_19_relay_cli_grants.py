"""`relay grants` and `relay grant revoke`: the terminal client's view of the
permanent grants approve_always makes (GET/DELETE /v1/me/grants)."""
from bridgelib import Turn
from relaylib import assert_ok
from test_60_relay_cli import Cli


def test_list_and_revoke_grants_from_the_terminal(relay, tmp_path):
    cli = Cli(tmp_path)
    token = cli.login(relay)
    assert cli.json("grants") == {"grants": []}
    t = Turn(relay, token)
    body, r = t.inst.request_approval(t.session, t.interaction, command="cargo build")
    assert_ok(r)
    assert_ok(t.inst.decide(body["approval_id"], "approve_always", scope="tool"))
    grants = cli.json("grants")["grants"]
    assert [(g["action"], g["scope"], g["scope_value"]) for g in grants] == [("exec", "tool", "cargo build")]
    revoked = cli.json("grant", "revoke", grants[0]["id"])
    assert revoked["grant_id"] == grants[0]["id"]
    assert cli.json("grants") == {"grants": []}
    proc = cli.run("grant", "revoke", grants[0]["id"], "--json")
    assert proc.returncode == 1 and "grant_not_found" in proc.stdout + proc.stderr
    proc = cli.run("grant", "remove", grants[0]["id"])
    assert proc.returncode == 2
    t.close()
