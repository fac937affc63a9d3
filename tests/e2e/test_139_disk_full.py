"""A full disk is an overload a client waits out (issue 39): every write the
disk refuses is answered 503 `storage_full` with Retry-After, reads and
streams go on, the log says it once per episode, the metrics count it, and
the relay resumes by itself when room returns, having kept nothing of a
refused write and lost nothing acknowledged.

The data folder (or the attachments folder) lives on a small tmpfs made by
the test (root: the suite's agent tests need root already), filled with a
file that the test removes to give the room back.
"""
import os
import subprocess
import time
import uuid

import pytest
import requests

from bridgelib import Installation, Turn, WAIT, key
from relaylib import assert_error, assert_ok, bearer, free_port, mint_token, wait_until

FULL_LINE = "disk is full"
ROOM_LINE = "has room again"


class SmallDisk:
    """A tmpfs of `size` at `path`, and a filler that takes all its room."""

    def __init__(self, path, size="8m"):
        assert os.geteuid() == 0, "this test mounts a small tmpfs: run the suite as root (make test does)"
        self.path = path
        os.makedirs(path, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0700" % size, "tmpfs", str(path)], check=True)
        self.filler = os.path.join(str(path), "filler")

    def fill(self):
        # dd stops at ENOSPC; its status is then 1, which is the point.
        subprocess.run(["dd", "if=/dev/zero", "of=" + self.filler, "bs=64k"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        st = os.statvfs(str(self.path))
        assert st.f_bavail == 0, "the filler left room: %d blocks" % st.f_bavail

    def free(self):
        os.remove(self.filler)

    def unmount(self):
        subprocess.run(["umount", "-l", str(self.path)], check=False)


@pytest.fixture
def small_disk(tmp_path):
    disks = []

    def make(name, size="8m"):
        disk = SmallDisk(tmp_path / name, size)
        disks.append(disk)
        return disk

    yield make
    for disk in disks:
        disk.unmount()


def metric(relay_port, name, labels):
    text = requests.get("http://127.0.0.1:%d/metrics" % relay_port, timeout=WAIT).text
    wanted = "%s{%s} " % (name, labels)
    for line in text.splitlines():
        if line.startswith(wanted):
            return float(line[len(wanted):])
    raise AssertionError("no %s in the metrics:\n%s" % (wanted, text))


def assert_full(r):
    """503 storage_full, told when to come back."""
    err = assert_error(r, 503, "storage_full")
    assert r.headers.get("Retry-After") == "10", r.headers
    assert err.get("retry_after_ms") == 10000, err
    return err


def count_lines(relay, text):
    return sum(1 for line in relay.log_text().splitlines() if text in line)


def test_a_full_store_disk_refuses_writes_with_503_and_resumes(relayd, small_disk):
    disk = small_disk("store")
    metrics_port = free_port()
    relay = relayd("--metrics-listen", "127.0.0.1:%d" % metrics_port, data=disk.path / "data", store="sqlite")
    user = mint_token(relay.data, "alice")
    turn = Turn(relay, user)
    inst = turn.inst
    kept = inst.messages(turn.session)
    mid = inst.open_message(turn.session, turn.interaction, "first")
    assert_ok(inst.delta(mid, "acknowledged before the disk filled"))
    assert metric(metrics_port, "relay_disk_full", 'folder="store"') == 0

    disk.fill()
    events_before = len(turn.stream.events)
    # A client's send, a bridge's new message and a bridge's delta: each refused, each told to wait.
    refused = [
        inst.client("POST", "/v1/me/sessions/%s/send" % turn.session, {"text": "x" * 4000}),
        inst.post("sendMessage", {"session_id": turn.session, "interaction_id": turn.interaction,
                                  "text": "y" * 4000, "idempotency_key": key()}),
    ]
    deltas = [inst.delta(mid, "z" * 4000) for _ in range(20)]
    for r in refused:
        assert_full(r)
    statuses = {r.status_code for r in deltas}
    assert statuses <= {200, 503}, [(r.status_code, r.text) for r in deltas]
    assert 503 in statuses, "no delta was refused on a full disk"
    for r in deltas:
        if r.status_code == 503:
            assert_full(r)
    accepted = "".join("z" * 4000 for r in deltas if r.status_code == 200)

    # Reads and the stream go on.
    assert_ok(inst.client("GET", "/v1/me"))
    assert_ok(inst.client("GET", "/v1/me/sessions/%s/timeline?limit=50" % turn.session))
    assert not turn.stream.closed.is_set(), "the event stream ended on a full disk"
    assert metric(metrics_port, "relay_disk_full", 'folder="store"') == 1
    assert metric(metrics_port, "relay_disk_full_refusals_total", 'folder="store"') >= 2
    # Once per episode, however many writes it refused.
    assert count_lines(relay, FULL_LINE) == 1, relay.log_text()[-3000:]
    assert "internal_error" not in "".join(r.text for r in refused + deltas)

    disk.free()

    # Room again: the relay resumes by itself; the client retries as told (sooner here).
    sends_after = []

    def sent():
        r = inst.client("POST", "/v1/me/sessions/%s/send" % turn.session, {"text": "after the disk had room"})
        assert r.status_code in (200, 503), r.text
        if r.status_code == 200:
            sends_after.append(r)
        return r.status_code == 200

    wait_until(sent, timeout=WAIT, interval=0.3, what="a send once the disk had room")
    # The episode ends at a write a little after the last refusal (docs/operations.md, "A full disk").
    wait_until(lambda: sent() and count_lines(relay, ROOM_LINE) == 1,
               timeout=WAIT, interval=0.5, what="the log line saying the disk has room again")
    assert metric(metrics_port, "relay_disk_full", 'folder="store"') == 0
    assert count_lines(relay, FULL_LINE) == 1

    # Nothing of a refused write was kept; everything acknowledged was.
    assert_ok(inst.end(mid))
    texts = [m["text"] for m in inst.messages(turn.session)]
    assert "x" * 4000 not in texts and "y" * 4000 not in texts, texts
    final = inst.message(turn.session, mid)
    assert final["text"] == "first" + "acknowledged before the disk filled" + accepted, final["text"][:200]
    assert len(inst.messages(turn.session)) == len(kept) + 1 + len(sends_after)  # the open message, the sends after
    assert all(e.name != "message_added" or e.data.get("message", {}).get("text") not in ("x" * 4000, "y" * 4000)
               for e in turn.stream.events[events_before:])

    # A restart finds everything acknowledged (the delta log and the database agree).
    turn.close()
    relay.stop()
    relay.start()
    assert inst.message(turn.session, mid)["text"] == final["text"]


def test_a_full_attachments_disk_refuses_uploads_with_503_and_resumes(relayd, small_disk, tmp_path):
    disk = small_disk("attachments", size="4m")
    metrics_port = free_port()
    relay = relayd("--metrics-listen", "127.0.0.1:%d" % metrics_port, "--attachments", str(disk.path / "files"))
    user = mint_token(relay.data, "alice")
    headers = dict(bearer(user), **{"Content-Type": "image/png"})

    def upload(size):
        return relay.request("POST", "/v1/me/attachments?name=shot.png", headers=headers, data=os.urandom(size))

    first = assert_ok(upload(1000))
    disk.fill()
    for _ in range(3):
        assert_full(upload(200000))
    # The refused uploads left no file behind and no row (the quota is untouched).
    names = sorted(os.listdir(str(disk.path / "files")))
    assert names == [first["key"]], names
    # The store's disk is another: other writes go on.
    inst = Installation(relay, user)
    assert_ok(inst.client("POST", "/v1/me/sessions", {"installation_id": inst.id}))
    assert metric(metrics_port, "relay_disk_full", 'folder="attachments"') == 1
    assert metric(metrics_port, "relay_disk_full_refusals_total", 'folder="attachments"') == 3
    assert metric(metrics_port, "relay_disk_full", 'folder="store"') == 0
    assert count_lines(relay, "attachments folder's disk is full") == 1

    disk.free()
    again = assert_ok(upload(200000))
    assert again["size"] == 200000
    assert metric(metrics_port, "relay_disk_full", 'folder="attachments"') == 0
    assert count_lines(relay, "attachments folder's disk has room again") == 1
    assert os.path.getsize(str(disk.path / "files" / again["key"])) == 200000
