"""Backing up a relay on PostgreSQL with the commands of docs/operations.md
("Backups", PostgreSQL): pg_dump while relayd writes, pg_restore over the
database, and relayd serves exactly what the dump held. These tests start
their own PostgreSQL server (the `postgres` fixture) whatever
RELAY_TEST_STORE says."""
import os
import subprocess

from bridgelib import Installation, key
from relaylib import assert_ok, clean_env

DUMP = 'pg_dump --format=custom --file=relay.pgdump "$RELAY_STORE"'
RESTORE = 'pg_restore --clean --if-exists --no-owner --dbname="$RELAY_STORE" relay.pgdump'


def sh(command, folder, store):
    env = clean_env({"RELAY_STORE": store})
    proc = subprocess.run(command, shell=True, cwd=str(folder), env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, "%s: %s" % (command, proc.stderr)
    return proc


def test_pg_dump_and_pg_restore_bring_the_relay_back_as_dumped(relayd, postgres, tmp_path):
    relay = relayd(store="postgres")
    inst = Installation(relay, relay.token("alice"))
    kept = inst.create_session("kept")
    interaction, _ = inst.send(kept, "hello")
    streaming = inst.open_message(kept, interaction)
    for n in range(20):
        assert_ok(inst.delta(streaming, "d%d " % n, idem=key()))
    history = inst.messages(kept)

    # The dump is taken while the relay runs, with a bridge socket open.
    sock = inst.connect()
    sh(DUMP, tmp_path, relay.store)
    assert os.path.getsize(str(tmp_path / "relay.pgdump")) > 0

    # What happens after the dump is undone by the restore.
    later = inst.create_session("after the dump")
    assert_ok(inst.delta(streaming, "lost to the restore", idem=key()))
    sock.close()
    relay.stop_ok()
    sh(RESTORE, tmp_path, relay.store)

    relay.start()
    assert inst.messages(kept) == history
    sessions = assert_ok(inst.client("GET", "/v1/me/sessions"))["sessions"]
    ids = [s["id"] for s in sessions]
    assert kept in ids and later not in ids, sessions
    # The tokens signed before the dump still work (the keys are in the store), and the message streams on.
    assert_ok(inst.delta(streaming, "after the restore", idem=key()))
    assert inst.message(kept, streaming)["text"] == "".join("d%d " % n for n in range(20)) + "after the restore"
