"""The SQLite store's delta log (docs/internals/store.md, "The delta log"): a batch of
deltas is one write to relay.db-deltas.log, answered when it returns, and folded into
the database later. kill -9 mid-stream loses no answered delta and duplicates none; a
torn or corrupt tail is ignored with a log line; reads of an open message see deltas not
folded yet. One SQLite node only: PostgreSQL and a shared bus write no log (store="sqlite", bus="local"
for every relayd but the migration's target)."""
import os
import struct
import threading
import time
import uuid
import zlib

from bridgelib import Installation
import requests

from relaylib import assert_ok, free_port


def log_path(relay):
    return os.path.join(str(relay.data), "relay.db-deltas.log")


def log_size(relay):
    try:
        return os.path.getsize(log_path(relay))
    except FileNotFoundError:
        return 0


def record(message_id, seq, key, body_hash, delta):
    """One record as deltalog.h describes it."""
    fields = [message_id.encode(), key.encode(), body_hash.encode()]
    payload = struct.pack("<Bq", 1, seq)
    for f in fields:
        payload += struct.pack("<H", len(f)) + f
    d = delta.encode()
    payload += struct.pack("<I", len(d)) + d
    return struct.pack("<II", len(payload), zlib.crc32(payload) & 0xFFFFFFFF) + payload


def open_messages(relay, count):
    inst = Installation(relay, relay.token("alice"))
    session = inst.create_session()
    interaction, _ = inst.send(session)
    return inst, session, [inst.open_message(session, interaction) for _ in range(count)]


def test_kill9_mid_stream_keeps_every_answered_delta_once(relayd):
    relay = relayd(store="sqlite", bus="local")
    inst, session, mids = open_messages(relay, 3)
    acked = {m: [] for m in mids}     # (key, chunk) answered 200, in order
    inflight = {m: None for m in mids}  # the one sent and not answered when relayd died
    stop = threading.Event()

    def stream(mid):
        n = 0
        while not stop.is_set():
            chunk, idem = "%s.%d;" % (mid[-4:], n), str(uuid.uuid4())
            inflight[mid] = (idem, chunk)
            try:
                r = relay.post("/v1/bridge/sendMessageDelta",
                               {"message_id": mid, "delta": chunk, "idempotency_key": idem},
                               token=inst.token, timeout=5)
            except Exception:
                return
            if r.status_code != 200:
                return
            acked[mid].append((idem, chunk))
            inflight[mid] = None
            n += 1

    threads = [threading.Thread(target=stream, args=(m,)) for m in mids]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while min(len(a) for a in acked.values()) < 30 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert min(len(a) for a in acked.values()) >= 30, {m: len(a) for m, a in acked.items()}
    # Killed with answered deltas in the log only (the first fold of its own comes a second after them).
    assert log_size(relay) > 0
    relay.kill9()
    stop.set()
    for t in threads:
        t.join(10)
    relay.start()

    messages = inst.messages(session)
    ids = [m["message_id"] for m in messages]
    assert len(ids) == len(set(ids)), ids
    by_id = {m["message_id"]: m for m in messages}
    for mid in mids:
        answered = "".join(c for _, c in acked[mid])
        text = by_id[mid]["text"]
        # Every answered delta, once, in order; the one in flight may or may not have been written.
        tail = inflight[mid][1] if inflight[mid] else ""
        assert text in (answered, answered + tail), (mid, text[-80:], answered[-80:], tail)
        assert inst.message(session, mid)["text"] == text
        # Retries after the restart are recognised.
        for idem, chunk in acked[mid][-5:] + acked[mid][:2]:
            again = assert_ok(relay.post("/v1/bridge/sendMessageDelta",
                                         {"message_id": mid, "delta": chunk, "idempotency_key": idem},
                                         token=inst.token))
            assert again == {"message_id": mid, "idempotent": True}, again
        expected = answered + tail
        if inflight[mid]:
            idem, chunk = inflight[mid]
            assert_ok(relay.post("/v1/bridge/sendMessageDelta",
                                 {"message_id": mid, "delta": chunk, "idempotency_key": idem}, token=inst.token))
            assert inst.message(session, mid)["text"] == expected
        assert_ok(inst.end(mid, finish_reason="stop"))
        final = inst.message(session, mid)
        assert final["state"] == "final" and final["text"] == expected, final


def test_a_torn_or_corrupt_tail_is_ignored_and_whole_records_are_folded(relayd):
    relay = relayd(store="sqlite", bus="local")
    inst, session, (mid,) = open_messages(relay, 1)
    assert_ok(inst.delta(mid, "one ", idem="k1"))
    relay.stop_ok()
    assert log_size(relay) == 0, "a clean stop folds the log"
    # A relayd killed mid-write: a whole record (written, maybe answered), then half of the next one.
    whole = record(mid, 2, "k2", "h2", "two ")
    torn = record(mid, 3, "k3", "h3", "three ")
    corrupt = bytearray(record(mid, 3, "k3", "h3", "THREE "))
    corrupt[-2] ^= 0xFF
    with open(log_path(relay), "wb") as f:
        f.write(whole + torn[:len(torn) // 2])
    relay.start()
    assert inst.message(session, mid)["text"] == "one two "
    assert "ignoring %d bytes at offset %d" % (len(torn) // 2, len(whole)) in relay.log_text(), relay.log_text()[-2000:]
    assert log_size(relay) == 0
    # The whole record's key is a stored delta's: its retry is idempotent.
    relay.stop_ok()
    with open(log_path(relay), "wb") as f:
        f.write(bytes(corrupt))
    relay.start()
    assert inst.message(session, mid)["text"] == "one two "
    assert "failing its checksum" in relay.log_text()
    # Replayed twice (a crash between a fold's commit and the log's truncation): written once.
    relay.stop_ok()
    with open(log_path(relay), "wb") as f:
        f.write(whole + record(mid, 3, "k3", "h3", "three "))
    relay.start()
    assert inst.message(session, mid)["text"] == "one two three "
    assert_ok(inst.delta(mid, "four", idem="k4"))
    assert inst.message(session, mid)["text"] == "one two three four"


def test_reads_of_an_open_message_see_deltas_not_folded_yet(relayd):
    port = free_port()
    relay = relayd("--metrics-listen", "127.0.0.1:%d" % port, store="sqlite", bus="local")
    inst, session, (mid,) = open_messages(relay, 1)
    seen_unfolded = 0
    text = ""
    for n in range(20):
        assert_ok(inst.delta(mid, "d%d " % n))
        text += "d%d " % n
        # Folded once a second, or by the next store operation: right after the answer it is usually in the log.
        unfolded = log_size(relay) > 0
        assert inst.message(session, mid)["text"] == text
        seen_unfolded += unfolded
    assert seen_unfolded > 0, "every delta was folded before it was read: the log was never read through"
    metrics = requests.get("http://127.0.0.1:%d/metrics" % port, timeout=10).text
    appends = [line for line in metrics.splitlines() if line.startswith("relay_store_log_appends_total ")]
    assert appends and int(appends[0].split()[1]) >= 20, appends


def test_a_migration_after_a_kill9_carries_the_deltas_of_the_log(relayd, postgres):
    from relaylib import run_relayd
    relay = relayd(store="sqlite", bus="local")
    inst, session, (mid,) = open_messages(relay, 1)
    for n in range(5):
        assert_ok(inst.delta(mid, "d%d " % n, idem="k%d" % n))
    assert log_size(relay) > 0
    relay.kill9()
    url = postgres.database()
    proc = run_relayd(["migrate", "--from", "sqlite:%s" % relay.db_path(), "--to", url], timeout=60)
    assert proc.returncode == 0, proc.stderr
    moved_relay = relayd(store=url)
    moved = Installation.__new__(Installation)
    moved.relay, moved.user, moved.id, moved.token = moved_relay, inst.user, inst.id, inst.token
    assert moved.message(session, mid)["text"] == "d0 d1 d2 d3 d4 "
    assert assert_ok(moved.delta(mid, "d4 ", idem="k4")) == {"message_id": mid, "idempotent": True}
