"""The client event stream GET /v1/me/stream: hello, heartbeats, ids, Last-Event-ID replay,
resync, fan-out to several streams, isolation, a slow reader being cut off, an independent
SSE client library (Node's `eventsource`) and HTTP/2."""
import json
import os
import queue
import re
import shutil
import socket
import subprocess
import threading
import time
import uuid

import pytest
import requests

from relaylib import (
    SLOW, assert_correlation_headers, assert_error, assert_ok, bearer,
)
from streams import Event, EventStream
from test_10_me_installations import (
    NOISE, WAIT, call, close_stream, create_session, now_ms, real_events,
)

HERE = os.path.dirname(os.path.abspath(__file__))
SSE_CLIENT = os.path.join(HERE, "sse-client")
RESYNC_DATA = {"reason": "buffer_gap", "snapshot": "/v1/me/snapshot"}


# -- helpers -------------------------------------------------------------------------------------

def stream(relay, token, last_event_id=None):
    s = EventStream(relay, token, last_event_id=last_event_id)
    assert s.status == 200, s.response.text
    s.wait_for("hello", timeout=WAIT)
    return s


def rename(relay, token, sid, title):
    assert_ok(call(relay, "PATCH", "/v1/me/sessions/%s" % sid, token, {"title": title}))


def produce(relay, token, sid, n, prefix="t"):
    """n session_renamed events."""
    for i in range(n):
        rename(relay, token, sid, "%s%d" % (prefix, i))


def wait_real(s, count, start=0, timeout=WAIT):
    """Waits until s has `count` non-noise events from index start; returns them."""
    deadline = time.monotonic() + timeout
    while True:
        got = real_events(s, start)
        if len(got) >= count:
            return got
        if time.monotonic() > deadline or s.closed.is_set():
            raise AssertionError("%d events expected, got %r" % (count, got))
        time.sleep(0.02)


def settle(s, quiet=0.3):
    """Lets late events arrive (used only before asserting that nothing more came)."""
    time.sleep(quiet * SLOW)
    return real_events(s)


def ids(events):
    return [int(e.id) for e in events]


def is_decimal(value):
    return isinstance(value, str) and re.match(r"^[0-9]+$", value) is not None


def pair_and_session(relay, token, title="s"):
    inst, bridge_token, _ = relay.pair(token)
    return inst, bridge_token, create_session(relay, token, inst, title)["session_id"]


# -- hello, headers, heartbeat ---------------------------------------------------------------------

def test_headers_hello_and_heartbeats(relayd):
    relay = relayd("--sse-heartbeat", "1s")
    token = relay.token("alice")
    t0 = now_ms()
    s = EventStream(relay, token)
    try:
        assert s.status == 200
        mime = s.headers["Content-Type"].split(";")[0].strip()
        assert mime == "text/event-stream", s.headers
        assert s.headers["Cache-Control"] == "no-cache", s.headers
        assert s.headers["X-Accel-Buffering"] == "no", s.headers
        assert_correlation_headers(s.response)
        assert "Content-Length" not in s.headers
        assert "Content-Encoding" not in s.headers

        hello = s.wait_count(1, timeout=WAIT)[0]
        assert hello.name == "hello" and hello.id is None, hello
        assert set(hello.data) == {"user_id", "ts", "heartbeat_ms"}, hello.data
        assert hello.data["user_id"] == "alice"
        assert hello.data["heartbeat_ms"] == 1000
        assert isinstance(hello.data["ts"], int) and t0 - 5000 <= hello.data["ts"] <= now_ms() + 5000

        # Heartbeats every second, without ids.
        deadline = time.monotonic() + 10 * SLOW
        while len([e for e in s.events if e.name == "heartbeat"]) < 3:
            assert time.monotonic() < deadline and not s.closed.is_set(), s.events
            time.sleep(0.05)
        beats = [e for e in s.events if e.name == "heartbeat"][:3]
        for beat in beats:
            assert beat.id is None, beat
            assert set(beat.data) == {"ts"} and isinstance(beat.data["ts"], int), beat
        stamps = [b.data["ts"] for b in beats]
        assert stamps == sorted(stamps) and stamps[0] >= hello.data["ts"], stamps
        assert stamps[2] - stamps[0] >= 1000, stamps  # not more often than the setting
        assert [e.name for e in s.events[:4]] == ["hello", "heartbeat", "heartbeat", "heartbeat"], s.events
    finally:
        close_stream(s)


def test_default_heartbeat_is_25s(relay, user_token):
    s = stream(relay, user_token)
    try:
        assert s.events[0].data["heartbeat_ms"] == 25000
    finally:
        close_stream(s)


def test_stream_needs_a_user_token(relay, user_token):
    r = relay.get("/v1/me/stream", timeout=WAIT)
    assert_error(r, 401, "invalid_token")
    r = relay.get("/v1/me/stream", headers=bearer("garbage"), timeout=WAIT)
    assert_error(r, 401, "invalid_token")
    r = relay.get("/v1/me/stream", headers=bearer(user_token[:-3] + "abc"), timeout=WAIT)
    assert_error(r, 401, "invalid_token")
    _, bridge_token, _ = relay.pair(user_token)
    r = relay.get("/v1/me/stream", headers=bearer(bridge_token), timeout=WAIT)
    assert_error(r, 403, "permission_denied")
    # Browsers' EventSource cannot send headers; a token in the query is still refused.
    r = relay.get("/v1/me/stream?access_token=" + user_token, timeout=WAIT)
    assert_error(r, 400, "invalid_token_location")


# -- ids and replay -----------------------------------------------------------------------------------

def test_ids_increase_and_last_event_id_replays_exactly_what_followed(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    a = stream(relay, user_token)
    b = c = None
    try:
        sid = create_session(relay, user_token, inst, "first")["session_id"]
        produce(relay, user_token, sid, 3)
        assert_ok(call(relay, "POST", "/v1/me/sessions/%s/archive" % sid, user_token))
        seen = wait_real(a, 5, 1)
        assert [e.name for e in seen] == ["session_created"] + ["session_renamed"] * 3 + ["session_updated"]
        for e in seen:
            assert is_decimal(e.id), e
        assert all(x < y for x, y in zip(ids(seen), ids(seen)[1:])), ids(seen)

        # Resume after the second event: exactly the three that followed, in order.
        b = stream(relay, user_token, last_event_id=seen[1].id)
        replay = wait_real(b, 3, 1)
        assert [(e.name, e.id, e.data) for e in replay] == [(e.name, e.id, e.data) for e in seen[2:]]
        assert settle(b)[1:] == replay, b.events  # no more, no resync

        # Resume from the newest id: nothing to replay, no resync.
        c = stream(relay, user_token, last_event_id=seen[-1].id)
        assert settle(c)[1:] == [], c.events

        # Then all three continue live, with the same new id.
        rename(relay, user_token, sid, "live")
        live = [wait_real(x, n, 1)[n - 1] for x, n in ((a, 6), (b, 4), (c, 1))]
        assert {e.name for e in live} == {"session_renamed"}
        assert len({e.id for e in live}) == 1 and int(live[0].id) > int(seen[-1].id)
        assert live[0].data["title"] == "live"
    finally:
        for x in (a, b, c):
            if x is not None:
                close_stream(x)


def test_two_streams_of_one_user_and_isolation_between_users(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    bob_token = relay.token("bob")
    bob_inst, _, _ = relay.pair(bob_token)
    phone, tablet, bob = stream(relay, user_token), stream(relay, user_token), stream(relay, bob_token)
    try:
        sid = create_session(relay, user_token, inst, "a")["session_id"]
        produce(relay, user_token, sid, 2)
        assert_ok(call(relay, "POST", "/v1/me/sessions/%s/send" % sid, user_token, {"text": "private"}))
        got_phone, got_tablet = wait_real(phone, 4, 1), wait_real(tablet, 4, 1)
        assert [(e.name, e.id, e.data) for e in got_phone] == [(e.name, e.id, e.data) for e in got_tablet]
        assert [e.name for e in got_phone] == ["session_created", "session_renamed", "session_renamed",
                                               "message_added"]
        assert real_events(bob)[1:] == [], bob.events

        bob_sid = create_session(relay, bob_token, bob_inst, "bob's")["session_id"]
        bob_event = wait_real(bob, 1, 1)[0]
        assert bob_event.name == "session_created" and bob_event.data["session_id"] == bob_sid
        # alice's streams: the next thing they see is alice's own marker, not bob's event.
        rename(relay, user_token, sid, "marker")
        for s in (phone, tablet):
            nxt = wait_real(s, 5, 1)[4]
            assert nxt.name == "session_renamed" and nxt.data["title"] == "marker", s.events
        assert [e.name for e in settle(bob)[1:]] == ["session_created"], bob.events
        # Replay does not cross users either: alice's marker came after bob's newest event, and
        # bob resuming from that event gets nothing replayed (and no resync), then his own events.
        bob2 = stream(relay, bob_token, last_event_id=bob_event.id)
        try:
            assert settle(bob2)[1:] == [], bob2.events
            rename(relay, bob_token, bob_sid, "bob again")
            again = wait_real(bob2, 1, 1)[0]
            assert again.name == "session_renamed" and again.data["session_id"] == bob_sid
            assert int(again.id) > int(bob_event.id)
        finally:
            close_stream(bob2)
    finally:
        for s in (phone, tablet, bob):
            close_stream(s)


# -- resync -------------------------------------------------------------------------------------------

def check_resync(s, newest_id):
    """After hello, the next event is resync with the newest id and nothing was replayed."""
    events = wait_real(s, 2)
    assert events[0].name == "hello", s.events
    resync = events[1]
    assert resync.name == "resync", s.events
    assert resync.id == str(newest_id), (resync, newest_id)
    assert resync.data == RESYNC_DATA, resync.data
    return resync


def test_resync_when_last_event_id_is_older_than_the_buffer(relayd):
    relay = relayd("--sse-buffer-events", "5")
    token = relay.token("alice")
    inst, _, _ = relay.pair(token)
    a = stream(relay, token)
    opened = []
    try:
        sid = create_session(relay, token, inst)["session_id"]
        produce(relay, token, sid, 7)
        seen = wait_real(a, 8, 1)  # e1..e8; the buffer keeps e4..e8

        # The oldest buffered id still resumes exactly.
        b = stream(relay, token, last_event_id=seen[3].id)
        opened.append(b)
        replay = wait_real(b, 4, 1)
        assert [(e.name, e.id) for e in replay] == [(e.name, e.id) for e in seen[4:]]
        assert settle(b)[1:] == replay, b.events

        # The first id is no longer buffered: resync, and nothing replayed.
        c = stream(relay, token, last_event_id=seen[0].id)
        opened.append(c)
        resync = check_resync(c, seen[-1].id)
        assert settle(c)[1:] == [resync], c.events
        # Live events follow.
        rename(relay, token, sid, "after resync")
        live = wait_real(c, 3)[2]
        assert live.name == "session_renamed" and live.data["title"] == "after resync"
        assert int(live.id) > int(resync.id)

        # Resuming from the resync id misses nothing.
        d = stream(relay, token, last_event_id=resync.id)
        opened.append(d)
        got = wait_real(d, 1, 1)
        assert [(e.name, e.id) for e in got] == [(live.name, live.id)], d.events
    finally:
        close_stream(a)
        for s in opened:
            close_stream(s)


def test_resync_after_more_than_256_events_by_default(relay, user_token):
    """Default buffer: 256 events. Bridge deltas make the events quickly."""
    inst, bridge_token, sid = pair_and_session(relay, user_token)
    a = stream(relay, user_token)
    opened = []
    try:
        bridge = requests.Session()
        r = bridge.post(relay.url("/v1/bridge/sendMessage"), headers=bearer(bridge_token), timeout=WAIT,
                        json={"session_id": sid, "text": "", "idempotency_key": str(uuid.uuid4())})
        message_id = assert_ok(r)["message_id"]
        for i in range(262):
            body = {"message_id": message_id, "delta": "d%d " % i, "idempotency_key": "delta-%d" % i}
            deadline = time.monotonic() + 20 * SLOW
            while True:
                r = bridge.post(relay.url("/v1/bridge/sendMessageDelta"), headers=bearer(bridge_token),
                                json=body, timeout=WAIT)
                if r.status_code != 429 or time.monotonic() > deadline:
                    break
                time.sleep(r.json()["error"].get("retry_after_ms", 100) / 1000.0)
            assert_ok(r)
        bridge.close()
        seen = wait_real(a, 263, 1, timeout=30 * SLOW)  # message_added + 262 deltas
        assert seen[0].name == "message_added"
        assert [e.name for e in seen[1:]] == ["message_delta"] * 262
        assert [e.data["delta"] for e in seen[1:]] == ["d%d " % i for i in range(262)]
        assert all(x < y for x, y in zip(ids(seen), ids(seen)[1:]))

        # 256 events after this one: all still buffered.
        b = stream(relay, user_token, last_event_id=seen[-257].id)
        opened.append(b)
        replay = wait_real(b, 256, 1, timeout=30 * SLOW)
        assert [e.id for e in replay] == [e.id for e in seen[-256:]]
        assert len(settle(b)) == 257, "expected hello + 256 replayed events"
        # 257 after this one: the oldest of them is gone.
        c = stream(relay, user_token, last_event_id=seen[-258].id)
        opened.append(c)
        resync = check_resync(c, seen[-1].id)
        assert settle(c)[1:] == [resync], [e.name for e in c.events][:5]
    finally:
        close_stream(a)
        for s in opened:
            close_stream(s)


@pytest.mark.parametrize("bad", ["abc", "-1", "12abc", "1e5", "99999999999999999999999", "0x10"])
def test_resync_for_a_garbage_last_event_id(relay, user_token, bad):
    inst, _, _ = relay.pair(user_token)
    a = stream(relay, user_token)
    try:
        sid = create_session(relay, user_token, inst)["session_id"]
        newest = wait_real(a, 1, 1)[0]
        s = stream(relay, user_token, last_event_id=bad)
        try:
            resync = check_resync(s, newest.id)
            rename(relay, user_token, sid, "live")
            live = wait_real(s, 3)[2]
            assert live.name == "session_renamed" and int(live.id) > int(resync.id)
        finally:
            close_stream(s)
    finally:
        close_stream(a)


def test_resync_for_an_id_from_before_a_restart(relayd, tmp_path):
    # The local bus's ring dies with its process; a shared bus (Redis) keeps it, and resumes exactly.
    relay = relayd(data=tmp_path / "store", bus="local")
    token = relay.token("alice")
    inst, _, _ = relay.pair(token)
    a = stream(relay, token)
    sid = create_session(relay, token, inst)["session_id"]
    produce(relay, token, sid, 2)
    before = wait_real(a, 3, 1)
    close_stream(a)
    relay.restart()
    s = stream(relay, token, last_event_id=before[0].id)
    try:
        events = wait_real(s, 2)
        assert events[1].name == "resync", s.events
        assert is_decimal(events[1].id) and events[1].data == RESYNC_DATA
        rename(relay, token, sid, "after restart")
        live = wait_real(s, 3)[2]
        assert live.name == "session_renamed"
        # Ids keep increasing across the restart, so an old id can never name a new event.
        assert int(live.id) > int(before[-1].id), (live.id, before[-1].id)
    finally:
        close_stream(s)


def test_replay_window_limits_replay_by_age(relayd):
    relay = relayd("--replay-window", "2s")
    token = relay.token("alice")
    inst, _, _ = relay.pair(token)
    a = stream(relay, token)
    try:
        sid = create_session(relay, token, inst)["session_id"]
        rename(relay, token, sid, "x")
        produced_at = time.monotonic()
        seen = wait_real(a, 2, 1)
        # Young enough: replayed.
        b = stream(relay, token, last_event_id=seen[0].id)
        try:
            assert [(e.name, e.id) for e in wait_real(b, 1, 1)] == [(seen[1].name, seen[1].id)]
        finally:
            close_stream(b)
        while time.monotonic() < produced_at + 2.5:
            time.sleep(0.1)
        c = stream(relay, token, last_event_id=seen[0].id)
        try:
            check_resync(c, seen[1].id)
        finally:
            close_stream(c)
    finally:
        close_stream(a)


# -- a slow reader is cut off, the others keep receiving -------------------------------------------------

class FastStream:
    """A stream reader for big events: EventStream's iter_lines is quadratic on lines of
    hundreds of KB. Dechunks with urllib3 and splits records without rescanning."""

    def __init__(self, relay, token, last_event_id=None):
        h = dict(bearer(token), Accept="text/event-stream")
        if last_event_id is not None:
            h["Last-Event-ID"] = last_event_id
        self.response = requests.get(relay.url("/v1/me/stream"), headers=h, stream=True, timeout=(5, 60))
        assert self.response.status_code == 200, self.response.text
        self.events = []
        self.closed = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        buf = bytearray()
        scan = 0
        try:
            for chunk in self.response.iter_content(chunk_size=256 * 1024):
                buf += chunk
                while True:
                    end = buf.find(b"\n\n", scan)
                    if end < 0:
                        scan = max(0, len(buf) - 1)
                        break
                    event = parse_record(bytes(buf[:end]))
                    del buf[:end + 2]
                    scan = 0
                    if event is not None:
                        self.events.append(event)
        except Exception:
            pass
        finally:
            self.closed.set()

    def close(self):
        self.response.close()


def parse_record(record):
    name, data, id_ = None, [], None
    for line in record.decode("utf-8").split("\n"):
        if line.startswith(":") or not line:
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            id_ = value
    if not data:
        return None
    return Event(name or "message", json.loads("\n".join(data)), id_)


def dechunk(raw):
    """The body of a (possibly truncated) chunked HTTP/1.1 response, as far as it is complete."""
    head, sep, rest = raw.partition(b"\r\n\r\n")
    assert sep, raw[:200]
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    assert b"chunked" in head.lower(), head
    body = bytearray()
    pos = 0
    while True:
        eol = rest.find(b"\r\n", pos)
        if eol < 0:
            break
        size = int(rest[pos:eol].split(b";")[0], 16)
        if size == 0 or eol + 2 + size > len(rest):
            body += rest[eol + 2:eol + 2 + size]
            break
        body += rest[eol + 2:eol + 2 + size]
        pos = eol + 2 + size + 2
    return bytes(body)


def bridge_post(session, relay, bridge_token, route, body):
    """A bridge REST call; a 429 of the installation's bucket is waited out (bounded)."""
    deadline = time.monotonic() + 20 * SLOW
    while True:
        r = session.post(relay.url("/v1/bridge/" + route), headers=bearer(bridge_token), json=body, timeout=WAIT)
        if r.status_code != 429 or time.monotonic() > deadline:
            return assert_ok(r)
        time.sleep(r.json()["error"].get("retry_after_ms", 100) / 1000.0)


class CutOff:
    """The scenario of the slow-reader tests: one reader that stops reading (a raw socket with
    a tiny receive buffer), one fast reader, and ~24 MB of events published quickly."""

    count, size = 375, 64000
    PER_MESSAGE = 60  # 60 deltas of 64 000 characters: 3.84 MB, under the 4 MiB a message may hold

    def __init__(self, relayd):
        # A buffer longer than the scenario's events, so that the cut-off reader could resume exactly.
        # A message holds at most 4 MiB of text (--max-message-bytes, issue 11): the deltas are
        # spread over several messages of PER_MESSAGE deltas each.
        self.relay = relay = relayd("--sse-buffer-events", "1000", "--max-message-bytes", "4194304")
        self.token = token = relay.token("alice")
        inst, bridge_token, self.sid = pair_and_session(relay, token)
        # The slow reader: the receive buffer is set before connecting; reads the hello, then stops.
        self.slow = slow = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.settimeout(WAIT)
        slow.connect(("127.0.0.1", relay.port))
        slow.sendall(("GET /v1/me/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                      "Accept: text/event-stream\r\n\r\n" % token).encode())
        self.raw = b""
        while b"event: hello" not in self.raw:
            chunk = slow.recv(4096)
            assert chunk, self.raw
            self.raw += chunk
        self.fast = FastStream(relay, token)
        # message_delta events carry their delta (at most 65536 characters), and the bridge's
        # delta bucket allows a burst of 200 then 100/s. (A user's send goes at 30 + 10/s, too
        # slow for this.)
        bridge = requests.Session()
        try:
            self.t0 = time.monotonic()
            self.message_ids = []
            for i in range(self.count):
                if i % self.PER_MESSAGE == 0:
                    self.message_ids.append(bridge_post(bridge, relay, bridge_token, "sendMessage",
                                                        {"session_id": self.sid, "text": "",
                                                         "idempotency_key": str(uuid.uuid4())})["message_id"])
                bridge_post(bridge, relay, bridge_token, "sendMessageDelta",
                            {"message_id": self.message_ids[-1], "delta": "%04d" % i + "x" * (self.size - 4),
                             "idempotency_key": "d%d" % i})
        finally:
            bridge.close()

    @staticmethod
    def deltas(s):
        return [e for e in list(s.events) if e.name == "message_delta"]

    def wait_fast(self):
        deadline = time.monotonic() + 30 * SLOW
        while len(self.deltas(self.fast)) < self.count:
            assert time.monotonic() < deadline and not self.fast.closed.is_set(), \
                "the fast reader got %d of %d" % (len(self.deltas(self.fast)), self.count)
            time.sleep(0.05)
        return self.deltas(self.fast)

    def drain_slow(self):
        """Waits for the cut-off, reads what the slow socket still holds; returns its SSE records."""
        deadline = time.monotonic() + 15 * SLOW
        while "event stream cut off: reader too slow" not in self.relay.log_text():
            assert time.monotonic() < deadline, "no cut-off in the log"
            time.sleep(0.1)
        deadline = time.monotonic() + 15 * SLOW
        self.slow.settimeout(1)
        while True:
            assert time.monotonic() < deadline, "the slow stream was never closed (%d bytes read)" % len(self.raw)
            try:
                chunk = self.slow.recv(1 << 20)
            except socket.timeout:
                continue
            except (ConnectionResetError, ConnectionAbortedError):
                break
            if not chunk:
                break
            self.raw += chunk
        assert len(self.raw) < self.count * self.size, "the slow reader got everything (%d bytes)" % len(self.raw)
        records = [parse_record(r) for r in dechunk(self.raw).split(b"\n\n")[:-1]]
        return [e for e in records if e is not None]

    def close(self):
        self.slow.close()
        close_stream(self.fast)


def test_slow_reader_is_cut_off_and_others_keep_receiving(relayd):
    scenario = CutOff(relayd)
    try:
        got = scenario.wait_fast()
        assert [e.data["delta"][:4] for e in got] == ["%04d" % i for i in range(scenario.count)]
        assert all(len(e.data["delta"]) == scenario.size
                   and e.data["message_id"] == scenario.message_ids[i // scenario.PER_MESSAGE]
                   for i, e in enumerate(got))
        assert time.monotonic() - scenario.t0 < 30 * SLOW

        records = scenario.drain_slow()
        slow_deltas = [e for e in records if e.name == "message_delta"]
        assert len(slow_deltas) < scenario.count, len(slow_deltas)
        assert [e.id for e in slow_deltas] == [e.id for e in got[:len(slow_deltas)]], \
            "the slow reader's events are not a prefix of the stream"

        # The fast reader is still attached and live.
        rename(scenario.relay, scenario.token, scenario.sid, "still here")
        deadline = time.monotonic() + WAIT
        while not any(e.name == "session_renamed" for e in list(scenario.fast.events)):
            assert time.monotonic() < deadline and not scenario.fast.closed.is_set(), "fast reader stopped"
            time.sleep(0.05)
    finally:
        scenario.close()


def test_cut_off_reader_resumes_with_last_event_id(relayd):
    """Issue: a subscriber that does not read is cut off (it can resume with Last-Event-ID)."""
    scenario = CutOff(relayd)
    try:
        got = scenario.wait_fast()
        records = scenario.drain_slow()
        slow_deltas = [e for e in records if e.name == "message_delta"]
        with_id = [e for e in records if e.id is not None]
        assert with_id, records  # at least message_added came through
        missing = got[len(slow_deltas):]
        resumed = FastStream(scenario.relay, scenario.token, last_event_id=with_id[-1].id)
        try:
            deadline = time.monotonic() + 30 * SLOW
            while len(scenario.deltas(resumed)) < len(missing):
                assert not resumed.closed.is_set(), (
                    "the resumed stream ended after %d of %d missed events (%r); relayd log: %s"
                    % (len(scenario.deltas(resumed)), len(missing), [e.name for e in resumed.events][:5],
                       [line for line in scenario.relay.log_text().splitlines() if "cut off" in line][-1:]))
                assert time.monotonic() < deadline, \
                    "resumed stream: %d of %d" % (len(scenario.deltas(resumed)), len(missing))
                time.sleep(0.05)
            names = [e.name for e in resumed.events if e.name not in NOISE]
            assert names[0] == "hello" and "resync" not in names, names[:5]
            assert [e.id for e in scenario.deltas(resumed)] == [e.id for e in missing]
        finally:
            close_stream(resumed)
    finally:
        scenario.close()


# -- an independent SSE client: Node's `eventsource` ------------------------------------------------------

def ensure_node_client():
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("this test needs Node.js and npm (Debian packages nodejs and npm): "
                    "node=%r npm=%r" % (node, npm))
    if not os.path.isfile(os.path.join(SSE_CLIENT, "node_modules", "eventsource", "package.json")):
        proc = subprocess.run([npm, "ci", "--prefix", SSE_CLIENT, "--no-audit", "--no-fund", "--engine-strict"],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            pytest.fail("npm ci in %s failed (%d):\n%s\n%s" % (SSE_CLIENT, proc.returncode, proc.stdout,
                                                                 proc.stderr))
    return node


class NodeReader:
    """tests/e2e/sse-client/read.js in a subprocess; its JSON lines in a list."""

    def __init__(self, node, url, token, count=1000, timeout_s=60, last_event_id=None):
        argv = [node, os.path.join(SSE_CLIENT, "read.js"), url, "--count", str(count),
                "--timeout-ms", str(int(timeout_s * 1000))]
        if last_event_id is not None:
            argv += ["--last-event-id", last_event_id]
        env = dict(os.environ, RELAY_TOKEN=token)
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.lines = []
        self.eof = False
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for line in self.proc.stdout:
                item = json.loads(line)
                if not item["type"].startswith("@") and item.get("data") is not None:
                    item["json"] = json.loads(item["data"])
                with self._cond:
                    self.lines.append(item)
                    self._cond.notify_all()
        finally:
            with self._cond:
                self.eof = True
                self._cond.notify_all()

    def exit_code(self, timeout):
        """Waits for the script to exit and for all of its output to be read."""
        code = self.proc.wait(timeout)
        with self._cond:
            self._cond.wait_for(lambda: self.eof, 10)
        return code

    def wait(self, predicate, after=0, timeout=WAIT):
        """Index and line of the first line from `after` on that matches."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i in range(after, len(self.lines)):
                    if predicate(self.lines[i]):
                        return i, self.lines[i]
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    raise AssertionError("no matching line; got %r; stderr %r"
                                         % (self.lines, self._stderr()))
                self._cond.wait(min(left, 0.2))

    def _stderr(self):
        if self.proc.poll() is None:
            return "(running)"
        return self.proc.stderr.read()

    def events(self, after=0):
        with self._cond:
            return [(i, x) for i, x in enumerate(self.lines) if i >= after and not x["type"].startswith("@")
                    and x["type"] != "heartbeat"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class HoldingProxy:
    """A TCP proxy in front of relayd that can drop its connections and hold new ones until
    resumed, so that events happen while an SSE client is disconnected. Records the request
    head of each connection."""

    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.gate = threading.Event()
        self.gate.set()
        self.heads = queue.Queue()
        self.pairs = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        if not self.gate.wait(60):
            client.close()
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        with self.lock:
            self.pairs.append((client, upstream))
        threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
        self._pump(upstream, client, False)

    def _pump(self, src, dst, record):
        head = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if record and head is not None:
                    head += data
                    if b"\r\n\r\n" in head:
                        self.heads.put(head.split(b"\r\n\r\n")[0].decode("latin-1"))
                        head = None
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def drop_and_hold(self):
        self.gate.clear()
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def release(self):
        self.gate.set()

    def close(self):
        self.listener.close()
        self.drop_and_hold()
        self.gate.set()


def header_value(head, name):
    for line in head.split("\r\n")[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == name.lower():
            return v.strip()
    return None


def test_independent_eventsource_client(relayd):
    node = ensure_node_client()
    relay = relayd("--sse-heartbeat", "1s")
    token = relay.token("alice")
    inst, _, _ = relay.pair(token)
    proxy = HoldingProxy(relay.port)
    ref = stream(relay, token)  # the project's parser, for comparison
    reader = NodeReader(node, "http://127.0.0.1:%d/v1/me/stream" % proxy.port, token, timeout_s=60 * SLOW)
    try:
        head = proxy.heads.get(timeout=WAIT)
        assert header_value(head, "Last-Event-ID") is None, head
        i, hello = reader.wait(lambda x: x["type"] == "hello")
        assert hello["json"]["user_id"] == "alice" and hello["json"]["heartbeat_ms"] == 1000
        assert hello["id"] == "", hello  # hello carries no id
        sid = create_session(relay, token, inst, "via node")["session_id"]
        i, created = reader.wait(lambda x: x["type"] == "session_created", after=i)
        ref_created = ref.wait_for("session_created", timeout=WAIT)
        assert created["json"] == ref_created.data and created["json"]["session_id"] == sid
        assert created["id"] == ref_created.id and is_decimal(created["id"]), (created, ref_created)
        # A heartbeat has no id: the library's last event id stays the one of session_created.
        i, beat = reader.wait(lambda x: x["type"] == "heartbeat", after=i)
        assert beat["id"] == created["id"] and set(beat["json"]) == {"ts"}, beat

        # Drop the connection; events happen while the client is away.
        proxy.drop_and_hold()
        i, _ = reader.wait(lambda x: x["type"] == "@error", after=i)
        rename(relay, token, sid, "while away")
        sid2 = create_session(relay, token, inst, "second")["session_id"]
        ref_missed = wait_real(ref, 3, 1)[1:]
        proxy.release()
        # The library reconnects with its own Last-Event-ID and gets exactly what it missed.
        head = proxy.heads.get(timeout=WAIT)
        assert header_value(head, "Last-Event-ID") == created["id"], head
        assert header_value(head, "Authorization") == "Bearer " + token
        i, hello2 = reader.wait(lambda x: x["type"] == "hello", after=i)
        i2, _ = reader.wait(lambda x: x["type"] == "session_created", after=i)
        got = [x for _, x in reader.events(i)][:3]
        assert [x["type"] for x in got] == ["hello", "session_renamed", "session_created"], got
        assert [(x["type"], x["id"], x["json"]) for x in got[1:]] == \
            [(e.name, e.id, e.data) for e in ref_missed]
        assert got[1]["json"]["title"] == "while away" and got[2]["json"]["session_id"] == sid2
        # ... and then continues live.
        assert_ok(call(relay, "POST", "/v1/me/sessions/%s/archive" % sid, token))
        _, updated = reader.wait(lambda x: x["type"] == "session_updated", after=i2)
        ref_updated = ref.wait_for("session_updated", timeout=WAIT)
        assert (updated["id"], updated["json"]) == (ref_updated.id, ref_updated.data)
    finally:
        reader.stop()
        proxy.close()
        close_stream(ref)

    # An initial Last-Event-ID given to the library: it replays the three that followed, then exits.
    resumed = NodeReader(node, relay.url("/v1/me/stream"), token, count=4, timeout_s=30 * SLOW,
                         last_event_id=created["id"])
    try:
        assert resumed.exit_code(40 * SLOW) == 0, (resumed.lines, resumed._stderr())
        got = [x for _, x in resumed.events()]
        assert [x["type"] for x in got] == ["hello", "session_renamed", "session_created", "session_updated"], got
        assert [x["id"] for x in got[1:]] == [e.id for e in ref_missed] + [ref_updated.id]
    finally:
        resumed.stop()

    # A garbage initial Last-Event-ID: resync through the library too.
    resync = NodeReader(node, relay.url("/v1/me/stream"), token, count=2, timeout_s=30 * SLOW,
                        last_event_id="not-an-id")
    try:
        assert resync.exit_code(40 * SLOW) == 0, (resync.lines, resync._stderr())
        got = [x for _, x in resync.events()]
        assert [x["type"] for x in got] == ["hello", "resync"], got
        assert got[1]["id"] == ref_updated.id and got[1]["json"] == RESYNC_DATA
    finally:
        resync.stop()

    # A bad token: the library sees 401 and gives up.
    refused = NodeReader(node, relay.url("/v1/me/stream"), "not-a-token", count=1, timeout_s=20 * SLOW)
    try:
        assert refused.exit_code(30 * SLOW) == 4, (refused.lines, refused._stderr())
        errors = [x for x in refused.lines if x["type"] == "@error"]
        assert errors and errors[0]["status"] == 401, refused.lines
    finally:
        refused.stop()


# -- a reader that hangs up ----------------------------------------------------------------------

def raw_stream(relay, token, extra=b""):
    """A stream over a bare socket: (socket, what was read up to the hello's data line)."""
    sock = socket.create_connection(("127.0.0.1", relay.port), timeout=WAIT)
    sock.sendall(b"GET /v1/me/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token.encode() +
                 b"\r\n\r\n" + extra)
    got = b""
    while b"event: hello" not in got or b"}\n\n" not in got[got.index(b"event: hello"):]:
        chunk = sock.recv(4096)
        assert chunk, got
        got += chunk
    return sock, got


def test_a_reader_that_hangs_up_is_forgotten_at_once(relayd):
    """HTTP/1 answers read nothing while they last; the stream still hears its reader hang up,
    without waiting for a heartbeat (25 s here) or an event to fail on."""
    from relaylib import free_port, wait_until
    from test_73_metrics import scrape, value
    port = free_port()
    relay = relayd("--metrics-listen", "127.0.0.1:%d" % port)
    token = relay.token("alice")
    sock, head = raw_stream(relay, token)
    assert head.startswith(b"HTTP/1.1 200"), head
    # The connection carries nothing after the stream: it says so.
    assert b"\r\nconnection: close\r\n" in head.lower(), head
    assert value(scrape(port), "relay_event_streams") == 1
    t0 = time.monotonic()
    sock.close()
    wait_until(lambda: value(scrape(port), "relay_event_streams") == 0, 2 * SLOW, interval=0.02,
               what="the stream to be gone")
    assert time.monotonic() - t0 < 2 * SLOW


def test_what_a_reader_sends_after_its_request_is_dropped(relay, user_token):
    """Bytes after the request (a pipelined request, noise) are read and dropped: the stream goes on
    and nothing is answered to them; a half-close ends it like a hang-up."""
    inst, _, _ = relay.pair(user_token)
    sock, _ = raw_stream(relay, user_token, extra=b"GET /v1/me HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        sock.sendall(b"x" * 100000)
        sid = create_session(relay, user_token, inst)["session_id"]
        got = b""
        while sid.encode() not in got:
            chunk = sock.recv(4096)
            assert chunk, got
            got += chunk
        assert b"HTTP/1.1" not in got, got
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(5 * SLOW)
        rest = b""
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            rest += chunk
        assert b"HTTP/1.1" not in rest, rest
    finally:
        sock.close()


# -- HTTP/2 ---------------------------------------------------------------------------------------------

def test_stream_over_http2(relay, user_token):
    curl = shutil.which("curl")
    if curl is None:
        pytest.fail("this test needs curl with HTTP/2 (Debian package curl)")
    inst, _, _ = relay.pair(user_token)
    proc = subprocess.Popen([curl, "--http2-prior-knowledge", "-sS", "-N", "-i", "-m", str(int(60 * SLOW)),
                             "-H", "Authorization: Bearer " + user_token, relay.url("/v1/me/stream")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = queue.Queue()

    def pump():
        for line in proc.stdout:
            lines.put(line.decode("utf-8").rstrip("\r\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()

    def read_until(pred, what):
        deadline = time.monotonic() + WAIT
        seen = []
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "no %s over HTTP/2; got %r" % (what, seen)
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, "curl ended: %r %r" % (seen, proc.stderr.read())
            seen.append(line)
            if pred(line):
                return seen

    try:
        head = read_until(lambda l: l == "", "response head")
        assert head[0].startswith("HTTP/2 200"), head
        headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in head[1:-1])}
        assert headers["content-type"].split(";")[0] == "text/event-stream", headers
        assert headers["cache-control"] == "no-cache" and headers["x-accel-buffering"] == "no", headers
        got = read_until(lambda l: l.startswith("data:"), "hello")
        assert got == ["event: hello", got[-1]], got
        assert json.loads(got[-1][5:])["user_id"] == "alice"
        sid = create_session(relay, user_token, inst)["session_id"]
        got = read_until(lambda l: l.startswith("data:") and sid in l, "session_created")
        record = [l for l in got if l]
        assert record[-2] == "event: session_created" and is_decimal(record[-3][len("id: "):]), record
    finally:
        proc.terminate()
        proc.wait(10)
