"""relayd backup and relayd restore (issue 15): a backup taken while a bridge streams deltas holds
every write acknowledged before it started; restored into an empty folder, the relay answers with
the same keys (old tokens and signed links work), the same history and the same attachments.
Bad uses are refused with a clear message and leave nothing behind."""
import json
import os
import sqlite3
import threading
import time

import requests

from bridgelib import WAIT, Installation, key
from relaylib import HTTP_TIMEOUT, SLOW, assert_ok, bearer, run_relayd
from test_13_attachments import upload


def _tree(path):
    """Every file under path with its size (for "nothing changed" checks)."""
    out = {}
    for root, _dirs, files in os.walk(str(path)):
        for name in files:
            full = os.path.join(root, name)
            out[os.path.relpath(full, str(path))] = os.path.getsize(full)
    return out


class DeltaLoad:
    """A bridge streaming deltas into one message on a thread; remembers what was acknowledged, in order."""

    def __init__(self, relay, inst, message_id):
        self.relay, self.inst, self.message_id = relay, inst, message_id
        self.acked = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        session = requests.Session()
        n = 0
        try:
            while not self.stopping.is_set():
                piece = "d%d " % n
                r = session.post(self.relay.url("/v1/bridge/sendMessageDelta"), headers=bearer(self.inst.token),
                                 json={"message_id": self.message_id, "delta": piece, "idempotency_key": key()},
                                 timeout=HTTP_TIMEOUT)
                if r.status_code == 429:
                    time.sleep(float(r.headers.get("Retry-After", "1")) / 10)
                    continue
                assert r.status_code == 200, r.text
                with self.lock:
                    self.acked.append(piece)
                n += 1
        except Exception as e:  # noqa: BLE001 - reported by stop()
            self.error = e

    def count(self):
        with self.lock:
            return len(self.acked)

    def stop(self):
        self.stopping.set()
        self.thread.join(WAIT)
        assert self.error is None, self.error
        return list(self.acked)


def test_a_backup_under_write_load_restores_every_acknowledged_write(relayd, tmp_path):
    relay = relayd(store="sqlite")  # relayd backup copies a data folder's SQLite store (PostgreSQL: pg_dump)
    user = relay.token("alice")
    inst = Installation(relay, user)
    session = inst.create_session(title="backed up")
    picture = os.urandom(300000)
    att_key = assert_ok(upload(relay, user, picture, mime="image/png", name="cat.png"))["key"]
    interaction, user_message = inst.send(session, "stream something", attachments=[{"key": att_key}])
    message_id = inst.open_message(session, interaction)

    load = DeltaLoad(relay, inst, message_id)
    deadline = time.monotonic() + WAIT
    while load.count() < 100 and time.monotonic() < deadline:
        time.sleep(0.01)
    acked_before = load.count()
    assert acked_before >= 100, "the load did not get going"
    dest = tmp_path / "backup-1"
    proc = run_relayd(["backup", str(dest), "--data", str(relay.data)])
    after_backup = load.count()
    time.sleep(0.2 * SLOW)
    sent = load.stop()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("backup written to %s: relay.db (schema version " % dest), proc.stdout
    print("deltas acked: before the backup %d, when it ended %d, in all %d" % (acked_before, after_backup, len(sent)))
    assert len(sent) > after_backup >= acked_before, (len(sent), after_backup, acked_before)
    manifest = json.loads((dest / "backup.json").read_text())
    assert manifest["store"] == "sqlite" and manifest["attachments"] == 1, manifest
    assert sorted(manifest["keys"]) == ["issuer.key", "url.key", "vapid.key"], manifest
    assert set(os.listdir(str(dest))) == {"backup.json", "relay.db", "issuer.key", "url.key", "vapid.key",
                                          "attachments"}
    for name in os.listdir(str(dest)):
        assert os.stat(os.path.join(str(dest), name)).st_mode & 0o077 == 0, name
    assert not [n for n in os.listdir(str(tmp_path)) if ".partial-" in n]
    relay.stop_ok()

    # Restored into a folder of its own, the relay is the same relay.
    restored = relayd(data=tmp_path / "restored", start=False, store="sqlite")
    proc = run_relayd(["restore", str(dest), "--data", str(restored.data)])
    assert proc.returncode == 0, proc.stderr
    assert "restored %s into %s" % (dest, restored.data) in proc.stdout, proc.stdout
    restored.start()
    inst.relay = restored
    text = inst.message(session, message_id)["text"]
    # Every delta acknowledged before the backup started is there, in order, and nothing that was not sent.
    assert text.startswith("".join(sent[:acked_before])), (text[:200], acked_before)
    assert "".join(sent).startswith(text), "the restored text is not a prefix of what was sent"
    # The user's old token still signs in (issuer.key), and the picture comes back with the same bytes.
    assert assert_ok(restored.get("/v1/me", headers=bearer(user)))["user"]["id"] == "alice"
    with open(os.path.join(str(restored.data), "attachments", att_key), "rb") as f:
        assert f.read() == picture
    sent_message = inst.message(session, user_message)
    link = sent_message["attachments"][0]["url"]
    r = requests.get(link, timeout=HTTP_TIMEOUT)
    assert r.status_code == 200 and r.content == picture, r.status_code
    for name in ("issuer.key", "url.key", "vapid.key"):
        with open(os.path.join(str(dest), name), "rb") as a, open(os.path.join(str(restored.data), name), "rb") as b:
            assert a.read() == b.read(), name
    # The bridge's token is the restored relay's too; the stream goes on where the backup left it.
    assert_ok(inst.delta(message_id, "more"))
    assert_ok(inst.end(message_id, finish_reason="stop"))
    assert inst.message(session, message_id)["state"] == "final"


def test_bad_backups_and_restores_are_refused_and_leave_nothing(relayd, tmp_path):
    relay = relayd(store="sqlite")  # relayd backup copies a data folder's SQLite store (PostgreSQL: pg_dump)
    relay.token("alice")

    # Into a folder that holds something: refused, the folder as it was.
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    proc = run_relayd(["backup", str(busy), "--data", str(relay.data)])
    assert proc.returncode == 1 and "already exists and is not an empty folder" in proc.stderr, proc.stderr
    assert _tree(busy) == {"keep.txt": 4}
    # A PostgreSQL store is not relayd backup's: pg_dump is (docs/operations.md).
    proc = run_relayd(["backup", str(tmp_path / "pg"), "--store", "postgres://relay@localhost/relay"])
    assert proc.returncode == 2 and "pg_dump" in proc.stderr and "relay@" not in proc.stderr, proc.stderr
    assert not (tmp_path / "pg").exists()
    # No store to copy: nothing written.
    proc = run_relayd(["backup", str(tmp_path / "none"), "--data", str(tmp_path / "no-such-folder")])
    assert proc.returncode == 1 and "relay.db" in proc.stderr, proc.stderr
    assert sorted(os.listdir(str(tmp_path))) == sorted(n for n in os.listdir(str(tmp_path)) if ".partial-" not in n)
    assert not (tmp_path / "none").exists()
    assert run_relayd(["backup"]).returncode == 2

    # An empty folder is a fine destination, with or without a trailing slash.
    good = tmp_path / "good"
    good.mkdir()
    assert run_relayd(["backup", str(good) + "/", "--data", str(relay.data)]).returncode == 0
    assert (good / "backup.json").exists() and not [n for n in os.listdir(str(good)) if ".partial-" in n]
    assert not [n for n in os.listdir(str(tmp_path)) if ".partial-" in n]

    # Restore: not into a folder with something in it (the running relay's own folder, say).
    before = _tree(relay.data)
    proc = run_relayd(["restore", str(good), "--data", str(relay.data)])
    assert proc.returncode == 1 and "is not empty" in proc.stderr, proc.stderr
    assert _tree(relay.data) == before
    # Not from a folder that is not a backup.
    proc = run_relayd(["restore", str(busy), "--data", str(tmp_path / "from-busy")])
    assert proc.returncode == 1 and "not a backup" in proc.stderr, proc.stderr
    assert not (tmp_path / "from-busy").exists()
    # Not a backup of a newer relayd's schema.
    newer = tmp_path / "newer"
    assert run_relayd(["backup", str(newer), "--data", str(relay.data)]).returncode == 0
    conn = sqlite3.connect(str(newer / "relay.db"))
    version = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    conn.close()
    manifest = json.loads((newer / "backup.json").read_text())
    manifest["schema_version"] = version + 1
    (newer / "backup.json").write_text(json.dumps(manifest))
    proc = run_relayd(["restore", str(newer), "--data", str(tmp_path / "from-newer")])
    assert proc.returncode == 1 and "newer than this relayd" in proc.stderr, proc.stderr
    assert not (tmp_path / "from-newer").exists()
    # A damaged store in the backup: refused, and the empty folder it was to fill stays empty.
    damaged = tmp_path / "damaged"
    assert run_relayd(["backup", str(damaged), "--data", str(relay.data)]).returncode == 0
    with open(str(damaged / "relay.db"), "r+b") as f:
        f.seek(0)
        f.write(b"this is not an SQLite file at all")
    target = tmp_path / "empty-target"
    target.mkdir()
    proc = run_relayd(["restore", str(damaged), "--data", str(target)])
    assert proc.returncode == 1, proc.stdout
    assert os.listdir(str(target)) == [], os.listdir(str(target))
    assert run_relayd(["restore"]).returncode == 2


def test_a_backup_inside_the_data_or_attachments_folder_is_refused(relayd, tmp_path):
    # Issue 27, item 6: each backup would hold every earlier one, on the disk it is meant to outlive.
    relay = relayd(store="sqlite")
    relay.token("alice")
    data = str(relay.data)
    before = sorted(os.listdir(data))
    link = tmp_path / "link-to-data"
    os.symlink(data, str(link))
    attachments = tmp_path / "shared-attachments"
    attachments.mkdir()
    for dest, extra in [(os.path.join(data, "backups", "nightly"), []), (os.path.join(data, "nightly"), []),
                        (data, []), (data + "/", []), (os.path.join(data, "attachments", "b"), []),
                        (os.path.join(data, "..", os.path.basename(data), "b"), []), (str(link / "b"), []),
                        (str(attachments / "b"), ["--attachments", str(attachments)])]:
        if dest.endswith("backups/nightly"):
            os.makedirs(os.path.dirname(dest), exist_ok=True)
        proc = run_relayd(["backup", dest, "--data", data] + extra)
        assert proc.returncode == 2 and "inside the data folder" in proc.stderr, (dest, proc.stderr)
        assert not os.path.exists(dest) or dest.rstrip("/") == data, dest
    os.rmdir(os.path.join(data, "backups"))
    assert sorted(os.listdir(data)) == before
    # Beside the data folder is fine.
    assert run_relayd(["backup", str(tmp_path / "beside"), "--data", data]).returncode == 0
