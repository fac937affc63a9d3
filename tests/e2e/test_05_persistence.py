"""Persistence: restarts and kill -9 on the same data folder."""
from relaylib import assert_error, assert_ok, mint_token


def _auth_passes(relay, user_token):
    r = relay.claim(user_token, "ZZZZZZZ")
    assert_error(r, 404, "pairing_not_found")


def test_bridge_token_survives_a_clean_restart(relayd, tmp_path):
    data = tmp_path / "store"
    early = mint_token(data, "alice")
    relay = relayd(data=data)
    inst, token, _ = relay.pair(early)
    assert assert_ok(relay.set_manifest(token)) == {"tools": 1}

    relay.restart()
    assert assert_ok(relay.set_manifest(token)) == {"tools": 1}
    # The signing key survived: the token minted before the first start still works.
    _auth_passes(relay, early)
    rows = relay.query("SELECT id, user_id, state FROM installations")
    assert rows == [(inst, "alice", "live")]


def test_token_is_durable_before_the_poll_answers(relayd, tmp_path):
    data = tmp_path / "store"
    relay = relayd(data=data)
    user = relay.token("alice")
    _, first, _ = relay.pair(user)
    inst, second, _ = relay.pair(user)
    # kill -9 right after the poll returned the token.
    relay.kill9()
    relay.start()
    assert assert_ok(relay.set_manifest(second)) == {"tools": 1}
    assert assert_ok(relay.set_manifest(first)) == {"tools": 1}
    _auth_passes(relay, user)
    relay.stop_ok()
    assert relay.exit_codes == [0]


def test_claim_is_durable_before_it_answers(relayd, tmp_path):
    relay = relayd(data=tmp_path / "store")
    user = relay.token("alice")
    started = relay.pairing_start()
    claimed = assert_ok(relay.claim(user, started["code"]))
    relay.kill9()
    relay.start()
    paired = assert_ok(relay.poll(started["poll_token"]))
    assert paired["status"] == "paired"
    assert paired["installation_id"] == claimed["installation_id"]
    assert assert_ok(relay.set_manifest(paired["token"])) == {"tools": 1}


def test_pending_code_survives_kill9(relayd, tmp_path):
    relay = relayd(data=tmp_path / "store")
    user = relay.token("alice")
    started = relay.pairing_start()
    relay.kill9()
    relay.start()
    assert assert_ok(relay.poll(started["poll_token"])) == {"status": "pending"}
    assert_ok(relay.claim(user, started["code"]))
    assert assert_ok(relay.poll(started["poll_token"]))["status"] == "paired"


def test_handed_out_token_is_not_handed_out_again_after_restart(relayd, tmp_path):
    relay = relayd(data=tmp_path / "store")
    user = relay.token("alice")
    _, token, started = relay.pair(user)
    relay.kill9()
    relay.start()
    assert_error(relay.poll(started["poll_token"]), 404, "pairing_not_found")
    assert_ok(relay.set_manifest(token))


def test_signing_key_survives_kill9(relayd, tmp_path):
    relay = relayd(data=tmp_path / "store")
    before = relay.token("alice")
    relay.kill9()
    relay.start()
    _auth_passes(relay, before)
    _auth_passes(relay, relay.token("bob"))
