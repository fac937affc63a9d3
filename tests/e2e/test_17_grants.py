"""The user's permanent grants (GET /v1/me/grants, DELETE /v1/me/grants/:id)
and the list of chats that can still be restored (GET
/v1/me/sessions?state=deleted), as the web client uses them.
"""
import re
import time

from bridgelib import Turn
from relaylib import assert_error, assert_ok, bearer, find_error, mint_token, validation_errors

GRANT_ID = re.compile(r"^grt_[0-9a-f]{16}$")


def test_list_and_revoke_a_grant(relay, user_token):
    t = Turn(relay, user_token)
    inst, s, i = t.inst, t.session, t.interaction
    assert assert_ok(inst.client("GET", "/v1/me/grants")) == {"grants": []}
    body, r = inst.request_approval(s, i, action="exec", command="make test")
    assert_ok(r)
    assert_ok(inst.decide(body["approval_id"], "approve_always", scope="tool"))
    grants = assert_ok(inst.client("GET", "/v1/me/grants"))["grants"]
    assert len(grants) == 1, grants
    grant = grants[0]
    assert GRANT_ID.match(grant["id"]), grant
    assert {k: v for k, v in grant.items() if k not in ("id", "created_at")} == {
        "installation_id": inst.id, "action": "exec", "scope": "tool", "scope_value": "make test"}
    assert abs(grant["created_at"] - time.time() * 1000) < 60000

    # Someone else cannot see or revoke it.
    other = mint_token(relay.data, "mallory")
    assert assert_ok(inst.client("GET", "/v1/me/grants", token=other)) == {"grants": []}
    assert_error(inst.client("DELETE", "/v1/me/grants/" + grant["id"], token=other), 404, "grant_not_found")

    revoked = assert_ok(inst.client("DELETE", "/v1/me/grants/" + grant["id"]))
    assert revoked["grant_id"] == grant["id"] and revoked["grant"] == grant
    event = t.stream.wait_for("grant_revoked")
    assert event.data == {"grant_id": grant["id"], "grant": grant}
    assert assert_ok(inst.client("GET", "/v1/me/grants")) == {"grants": []}
    assert_error(inst.client("DELETE", "/v1/me/grants/" + grant["id"]), 404, "grant_not_found")

    # Revoked: the same command asks again.
    _, r = inst.request_approval(s, i, action="exec", command="make test")
    assert assert_ok(r)["auto_resolved"] is False
    t.close()


def test_unknown_and_malformed_grant_ids(relay, user_token):
    for gid in ("grt_0000000000000000", "grt_short", "apr_0000000000000000", "x" * 300):
        r = relay.request("DELETE", "/v1/me/grants/" + gid, headers=bearer(user_token))
        assert_error(r, 404, "grant_not_found")
    assert_error(relay.request("DELETE", "/v1/me/grants/grt_0000000000000000"), 401, "invalid_token")


def test_restorable_sessions_are_listed(relayd):
    relay = relayd("--delete-grace", "2s", testclock=True)
    token = mint_token(relay.data, "alice")
    inst_id, _, _ = relay.pair(token)

    def client(method, path, body=None, who=token):
        kw = {"headers": bearer(who)}
        if body is not None:
            kw["json"] = body
        return relay.request(method, path, **kw)

    ids = [assert_ok(client("POST", "/v1/me/sessions", {"installation_id": inst_id, "title": "s%d" % n}))["session_id"]
           for n in range(3)]
    live = assert_ok(client("GET", "/v1/me/sessions"))["sessions"]
    assert sorted(s["id"] for s in live) == sorted(ids)
    assert assert_ok(client("GET", "/v1/me/sessions?state=deleted")) == {"sessions": []}

    assert_ok(client("DELETE", "/v1/me/sessions/" + ids[0]))
    deleted = assert_ok(client("GET", "/v1/me/sessions?state=deleted"))["sessions"]
    assert [s["id"] for s in deleted] == [ids[0]]
    assert deleted[0]["deleted_at"] is not None
    assert deleted[0]["restore_until"] == deleted[0]["deleted_at"] + 2000
    assert ids[0] not in [s["id"] for s in assert_ok(client("GET", "/v1/me/sessions"))["sessions"]]
    other = mint_token(relay.data, "mallory")
    assert assert_ok(client("GET", "/v1/me/sessions?state=deleted", who=other)) == {"sessions": []}

    assert_ok(client("POST", "/v1/me/sessions/%s/restore" % ids[0]))
    assert assert_ok(client("GET", "/v1/me/sessions?state=deleted")) == {"sessions": []}

    # Past the grace a deleted session is no longer offered, even before the purge runs.
    assert_ok(client("DELETE", "/v1/me/sessions/" + ids[1]))
    relay.advance_clock(2200)
    assert assert_ok(client("GET", "/v1/me/sessions?state=deleted")) == {"sessions": []}

    errors = validation_errors(client("GET", "/v1/me/sessions?state=archived"))
    assert find_error(errors, "state")["code"] == "invalid_enum_value"
    assert_error(relay.request("GET", "/v1/me/sessions"), 401, "invalid_token")
