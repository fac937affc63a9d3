"""`relayd migrate`: a single node's SQLite store copied into PostgreSQL.

A relayd on SQLite gets real data through its API, stops, is migrated, and a
relayd on the copy (--store postgres://..., with a data folder of its own:
the signing keys travel in the store) must serve the same history, accept
the same tokens, apply the same grants and replay the same idempotent calls.
These tests start their own PostgreSQL server (the `postgres` fixture)
whatever RELAY_TEST_STORE says.
"""
import json

from bridgelib import Installation, key
from relaylib import assert_ok, run_relayd


def migrate(src, dst):
    return run_relayd(["migrate", "--from", "sqlite:%s" % src, "--to", dst], timeout=60)


def summary_of(proc):
    """The JSON summary: stdout is not a terminal here."""
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


def on(relay, inst):
    """The same installation and user, seen through another relayd."""
    moved = Installation.__new__(Installation)
    moved.relay, moved.user, moved.id, moved.token = relay, inst.user, inst.id, inst.token
    return moved


def test_history_tokens_grants_and_replays_survive_the_move(relayd, postgres):
    relay = relayd(store="sqlite")
    inst = Installation(relay, relay.token("alice"))
    s = inst.create_session("before the move")
    i, _ = inst.send(s, "hello agent")
    # An agent message streamed and ended, one sent whole, one still streaming, an approve_always grant.
    streamed = inst.open_message(s, i)
    assert_ok(inst.delta(streamed, "Hello", idem="int_x:delta:1"))
    assert_ok(inst.delta(streamed, " world", idem="int_x:delta:2"))
    end_key = key()
    assert_ok(inst.end(streamed, idem=end_key, finish_reason="stop"))
    send_body = {"session_id": s, "interaction_id": i, "text": "second\tanswer\nwith \\ and ünïcode",
                 "idempotency_key": key()}
    sent = inst.ok("sendMessage", send_body)
    typing = inst.open_message(s, i)
    assert_ok(inst.delta(typing, "still typing", idem="typing:1"))
    approval, r = inst.request_approval(s, i, action="exec", command="npm test")
    assert_ok(r)
    assert_ok(inst.decide(approval["approval_id"], "approve_always", scope="tool"))
    history = inst.messages(s)
    me = assert_ok(inst.client("GET", "/v1/me"))
    updates = relay.query("SELECT update_id, type, payload FROM updates WHERE installation_id = ? ORDER BY update_id",
                          (inst.id,))
    relay.stop_ok()

    url = postgres.database()
    proc = migrate(relay.db_path(), url)
    assert proc.returncode == 0, proc.stderr
    summary = summary_of(proc)
    assert summary["ok"] is True and summary["from"] == "sqlite:%s" % relay.db_path(), summary
    tables = summary["tables"]
    assert tables["users"] == 1 and tables["installations"] == 1 and tables["sessions"] == 1, tables
    assert tables["messages"] == len(history) == 4, tables
    assert tables["approvals"] == 1 and tables["grants"] == 1, tables
    assert tables["message_deltas"] >= 1 and tables["delta_keys"] == 1, tables
    assert tables["idempotency"] >= 3 and tables["updates"] == len(updates), tables
    assert tables["secrets"] >= 2, tables
    assert summary["rows"] == sum(tables.values()), summary
    assert summary["schema_version"]["postgres"] >= 1, summary

    # Into a database that is not empty any more: refused, and nothing changes.
    again = migrate(relay.db_path(), url)
    assert again.returncode == 1, again.stdout
    assert "not empty" in again.stderr and summary_of(again)["ok"] is False, again.stderr

    # A new node: a data folder of its own, the keys from the store. The user token minted before still works.
    moved_relay = relayd(store=url)
    assert moved_relay.data != relay.data
    moved = on(moved_relay, inst)
    # History, as the client sees it, in the same order and with the open message's streamed text.
    assert moved.messages(s) == history
    me_after = assert_ok(moved.client("GET", "/v1/me"))
    assert me_after["sessions"] == me["sessions"], me_after
    assert me_after["installations"] == me["installations"], me_after
    assert moved_relay.query("SELECT update_id, type, payload FROM updates WHERE installation_id = ?"
                             " ORDER BY update_id", (inst.id,)) == updates

    # The bridge token authenticates, and every kind of idempotency record replays.
    assert moved.ok("sendMessage", send_body) == {"message_id": sent["message_id"], "idempotent": True}
    assert assert_ok(moved.end(streamed, idem=end_key, finish_reason="stop")) == \
        {"message_id": streamed, "idempotent": True}
    assert assert_ok(moved.delta(typing, "still typing", idem="typing:1")) == \
        {"message_id": typing, "idempotent": True}
    assert_ok(moved.delta(typing, "!", idem="typing:2"))
    assert_ok(moved.end(typing, finish_reason="stop"))
    assert moved.message(s, typing)["text"] == "still typing!"

    # The grant resolves the same command in a new turn; new rows come after the copied ones.
    i2, m2 = moved.send(s, "run the tests again")
    assert moved.messages(s)[0]["message_id"] == m2
    _, r = moved.request_approval(s, i2, action="exec", command="npm test")
    auto = assert_ok(r)
    assert auto["auto_resolved"] is True and auto["decision"] == "approve_always", auto
    ids = [row[0] for row in moved_relay.query(
        "SELECT update_id FROM updates WHERE installation_id = ? ORDER BY update_id", (inst.id,))]
    assert ids[:len(updates)] == [u[0] for u in updates] and len(ids) > len(updates), ids
    assert ids == sorted(set(ids)), ids


def test_usage_errors_and_failures_leave_nothing_behind(tmp_path, relayd, postgres):
    url = postgres.database()
    for argv in (["migrate"], ["migrate", "--from", "sqlite:x.db"], ["migrate", "--to", url],
                 ["migrate", "--from", "x.db", "--to", url], ["migrate", "--from", "sqlite:x.db", "--to", "mysql://x"],
                 ["migrate", "--from", "sqlite:x.db", "--to", url, "--verbose"]):
        proc = run_relayd(argv)
        assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
        assert "usage: relayd migrate" in proc.stderr, proc.stderr

    missing = tmp_path / "none.db"
    proc = migrate(missing, url)
    assert proc.returncode == 1 and "cannot open the SQLite store" in proc.stderr, proc.stderr
    assert summary_of(proc)["ok"] is False
    assert not missing.exists()

    # A password in the URL is never printed, whether the server is reached or not.
    relay = relayd(store="sqlite")
    relay.stop_ok()
    proc = migrate(relay.db_path(), "postgres://relay:hunter2-secret@/nodb?host=/nonexistent")
    assert proc.returncode == 1, proc.stderr
    assert "hunter2-secret" not in proc.stdout + proc.stderr
    assert "database nodb on /nonexistent" in proc.stderr, proc.stderr
    with_password = url.replace("postgres://relay@", "postgres://relay:hunter2-secret@")
    proc = migrate(relay.db_path(), with_password)
    assert proc.returncode == 0, proc.stderr
    assert "hunter2-secret" not in proc.stdout + proc.stderr
    # A relay that never served anyone: its signing keys, nothing else.
    summary = summary_of(proc)
    assert summary["tables"]["users"] == 0 and summary["rows"] == summary["tables"]["secrets"] > 0, summary
