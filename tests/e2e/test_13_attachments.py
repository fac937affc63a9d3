"""Client API: attachment uploads (raw bodies up to 25 MB), their use in messages, and
the signed, expiring download links that delivery hydrates."""
import hashlib
import os
import threading
import re
import socket
import time
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import requests

from relaylib import (
    HTTP_TIMEOUT, SLOW, _read_response, assert_error, assert_ok, bearer, raw_exchange,
    validation_errors,
)
from streams import BridgeSocket
from test_10_me_installations import (
    WAIT, Watch, call, close_stream, create_session, drop_bridge, open_stream,
)

MAX = 26214400
KEY_RE = re.compile(r"^att_[0-9A-Za-z]{24}$")
ATTACHMENT_KEYS = {"key", "mime", "size", "name", "url", "url_expires_at"}


def upload(relay, token, body, mime="application/octet-stream", name=None, **kw):
    path = "/v1/me/attachments"
    if name is not None:
        path += "?" + urlencode({"name": name}, encoding="utf-8").replace("+", "%20")
    headers = dict(bearer(token)) if token else {}
    if mime is not None:
        headers["Content-Type"] = mime
    return relay.request("POST", path, data=body, headers=headers, **kw)


def stored(relay, key):
    with open(os.path.join(str(relay.data), "attachments", key), "rb") as f:
        return f.read()


def attachment_files(relay):
    return sorted(os.listdir(os.path.join(str(relay.data), "attachments")))


def setup_session(relay, token):
    inst, bridge_token, _ = relay.pair(token)
    return inst, bridge_token, create_session(relay, token, inst)["session_id"]


def send(relay, token, sid, body):
    return call(relay, "POST", "/v1/me/sessions/%s/send" % sid, token, body)


def url_re(relay):
    return re.compile(r"^http://127\.0\.0\.1:%d/v1/files/(att_[0-9A-Za-z]{24})\?exp=(\d+)&sig=([0-9a-f]{32})$"
                      % relay.port)


def check_hydrated(relay, att, key, mime, size, name, ttl_s=3600):
    assert set(att) == ATTACHMENT_KEYS, att
    assert (att["key"], att["mime"], att["size"], att["name"]) == (key, mime, size, name), att
    m = url_re(relay).match(att["url"])
    assert m, att["url"]
    assert m.group(1) == key
    exp = int(m.group(2))
    assert time.time() + ttl_s - 10 * SLOW <= exp <= time.time() + ttl_s + 5, (exp, ttl_s)
    assert isinstance(att["url_expires_at"], int)
    assert abs(att["url_expires_at"] - exp * 1000) < 1000, (att["url_expires_at"], exp)
    return exp


def with_query(url, **changes):
    parts = urlsplit(url)
    q = {k: v[0] for k, v in parse_qs(parts.query).items()}
    for k, v in changes.items():
        if v is None:
            q.pop(k, None)
        else:
            q[k] = v
    return urlunsplit(parts._replace(query=urlencode(q)))


def head(path, length, token, mime="application/octet-stream", extra=()):
    lines = ["POST %s HTTP/1.1" % path, "Host: 127.0.0.1", "Authorization: Bearer " + token,
             "Content-Type: " + mime, "Content-Length: %d" % length] + list(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


# -- upload -----------------------------------------------------------------------------------

def test_upload_small_file(relay, user_token):
    body = os.urandom(1000) + b"\x00\r\n\r\n" + os.urandom(1000)
    r = upload(relay, user_token, body, mime="application/pdf", name="r\u00e9port 1.pdf")
    result = assert_ok(r)
    assert set(result) == {"key", "mime", "size", "name"}, result
    assert KEY_RE.match(result["key"]), result["key"]
    assert result["mime"] == "application/pdf"
    assert result["size"] == len(body)
    assert result["name"] == "r\u00e9port 1.pdf"
    assert stored(relay, result["key"]) == body

    # Without a name or a Content-Type.
    result = assert_ok(upload(relay, user_token, b"abc", mime="image/png"))
    assert result["name"] is None and result["mime"] == "image/png" and result["size"] == 3
    other = assert_ok(upload(relay, user_token, b"abc", mime="image/png"))
    assert other["key"] != result["key"]


def test_upload_errors(relay, user_token):
    assert_error(upload(relay, None, b"abc"), 401, "invalid_token")
    validation_errors(upload(relay, user_token, b""))
    assert attachment_files(relay) == []
    assert relay.count("attachments") == 0


def test_upload_of_exactly_25_mb(relay, user_token):
    body = os.urandom(MAX)
    r = upload(relay, user_token, body, mime="video/mp4", name="clip.mp4", timeout=60 * SLOW)
    result = assert_ok(r)
    assert result["size"] == MAX
    assert hashlib.sha256(stored(relay, result["key"])).digest() == hashlib.sha256(body).digest()


def test_upload_over_25_mb_is_refused_before_the_body(relay, user_token):
    # Only the head is sent: the answer must come without the body.
    r = raw_exchange(relay.port, head("/v1/me/attachments", MAX + 1, user_token), (), timeout=10 * SLOW)
    assert r is not None, "connection closed without an answer"
    assert_error(r, 413, "payload_too_large")
    assert attachment_files(relay) == []
    assert relay.count("attachments") == 0
    # And a JSON route still says 413 for 2 MB right after an upload.
    assert_ok(upload(relay, user_token, b"x" * 4096))
    r = raw_exchange(relay.port, head("/v1/me/sessions", 2 * 1024 * 1024, user_token, "application/json"), (),
                     timeout=10 * SLOW)
    assert r is not None, "connection closed without an answer"
    assert_error(r, 413, "payload_too_large")


def test_chunked_upload_over_25_mb_is_cut_off(relay, user_token):
    lines = ["POST /v1/me/attachments HTTP/1.1", "Host: 127.0.0.1", "Authorization: Bearer " + user_token,
             "Content-Type: application/octet-stream", "Transfer-Encoding: chunked"]
    h = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    piece = os.urandom(1024 * 1024)

    def chunks():
        for _ in range(27):
            yield b"%x\r\n" % len(piece) + piece + b"\r\n"
        yield b"0\r\n\r\n"

    r = raw_exchange(relay.port, h, chunks(), timeout=20 * SLOW)
    assert r is not None, "connection closed without an answer"
    assert_error(r, 413, "payload_too_large")
    assert relay.count("attachments") == 0
    deadline = time.monotonic() + WAIT
    while attachment_files(relay) != []:  # no partial file is left behind
        assert time.monotonic() < deadline, attachment_files(relay)
        time.sleep(0.1)


def test_json_route_refuses_2_mb_on_the_connection_of_an_upload(relay, user_token):
    """The 25 MB limit of the upload route must not leak to the next request on the
    same keep-alive connection."""
    sock = socket.create_connection(("127.0.0.1", relay.port), timeout=HTTP_TIMEOUT)
    try:
        body = os.urandom(3 * 1024 * 1024)
        sock.sendall(head("/v1/me/attachments", len(body), user_token) + body)
        r = _read_response(sock, HTTP_TIMEOUT)
        assert r is not None
        assert assert_ok(r)["size"] == len(body)
        sock.sendall(head("/v1/me/sessions", 2 * 1024 * 1024, user_token, "application/json"))
        r = _read_response(sock, 10 * SLOW)
        assert r is not None, "connection closed without an answer"
        assert_error(r, 413, "payload_too_large")
    finally:
        sock.close()


def test_other_requests_are_served_during_a_slow_upload(relay, user_token):
    sock = socket.create_connection(("127.0.0.1", relay.port), timeout=HTTP_TIMEOUT)
    try:
        body = os.urandom(2 * 1024 * 1024)
        sock.sendall(head("/v1/me/attachments", len(body), user_token) + body[:len(body) // 2])
        t0 = time.monotonic()
        assert_ok(call(relay, "GET", "/v1/me", user_token))
        assert time.monotonic() - t0 < 5 * SLOW
        sock.sendall(body[len(body) // 2:])
        r = _read_response(sock, HTTP_TIMEOUT)
        result = assert_ok(r)
        assert stored(relay, result["key"]) == body
    finally:
        sock.close()


def _peak_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM for %d" % pid)


def _anon_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc/%d/status" % pid)


def test_upload_is_not_held_whole_in_memory(relayd):
    """Issue: uploads are 'streamed to the data folder, never held whole in memory'.

    h2o 2.2.5 hands a body over only once it is complete; past 4 MB relayd has
    it kept in a file-backed buffer in DATA/tmp, whose pages the kernel writes
    back and can evict. Those pages are page cache, not the process's own
    memory: the anonymous part of relayd's resident set must not grow by
    anything like the body's size while it arrives and is stored.
    """
    env = {"ASAN_OPTIONS": (os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0").lstrip(":")}
    relay = relayd(env=env)
    token = relay.token("alice")
    assert_ok(upload(relay, token, b"warm up"))
    before = _anon_kb(relay.proc.pid)
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            try:
                peak[0] = max(peak[0], _anon_kb(relay.proc.pid))
            except (OSError, AssertionError):
                return
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    body = os.urandom(MAX)
    try:
        assert assert_ok(upload(relay, token, body, timeout=60 * SLOW))["size"] == MAX
    finally:
        done.set()
        sampler.join(10)
    grown_mb = (peak[0] - before) / 1024.0
    assert grown_mb < 16, "anonymous RSS grew by %.1f MB during a 25 MB upload" % grown_mb
    assert (relay.data / "tmp").is_dir()


# -- attachments in messages, download links ----------------------------------------------------

def test_send_with_attachment_and_download(relay, user_token):
    inst, bridge_token, sid = setup_session(relay, user_token)
    body = os.urandom(5000)
    key = assert_ok(upload(relay, user_token, body, mime="image/png", name="photo.png"))["key"]
    sock = BridgeSocket(relay, bridge_token)
    stream = open_stream(relay, user_token)
    try:
        assert sock.connected, sock.handshake_error
        assert sock.next(WAIT)["type"] == "ready"
        assert sock.next_update(WAIT)["type"] == "session.started"
        watch = Watch(stream)
        # Text may be empty when there is an attachment.
        sent = assert_ok(send(relay, user_token, sid, {"text": "", "attachments": [{"key": key}]}))

        record = watch.expect("message_added")[0].data
        assert record["message_id"] == sent["message_id"] and record["text"] == ""
        assert len(record["attachments"]) == 1
        att = record["attachments"][0]
        check_hydrated(relay, att, key, "image/png", 5000, "photo.png")

        page = assert_ok(call(relay, "GET", "/v1/me/sessions/%s/messages" % sid, user_token))
        hist = page["messages"][0]["attachments"]
        assert len(hist) == 1
        check_hydrated(relay, hist[0], key, "image/png", 5000, "photo.png")

        # The bridge gets the same hydrated attachment.
        update = sock.next_update(WAIT)
        assert update["type"] == "session.message"
        batt = update["payload"]["message"]["attachments"]
        assert len(batt) == 1
        check_hydrated(relay, batt[0], key, "image/png", 5000, "photo.png")

        for url in (att["url"], hist[0]["url"], batt[0]["url"]):
            r = requests.get(url, timeout=HTTP_TIMEOUT)  # no Authorization
            assert r.status_code == 200, r.text
            assert r.content == body
            assert r.headers["Content-Type"] == "image/png"

        # Anything tampered with is 404, and gives nothing away.
        sig = urlsplit(att["url"]).query.split("sig=")[1]
        flipped = sig[:-1] + ("0" if sig[-1] != "0" else "1")
        exp = int(parse_qs(urlsplit(att["url"]).query)["exp"][0])
        other_key = assert_ok(upload(relay, user_token, b"other", mime="text/plain"))["key"]
        for bad in (with_query(att["url"], sig=flipped),
                    with_query(att["url"], sig=sig.upper()),
                    with_query(att["url"], sig=None),
                    with_query(att["url"], exp=str(exp + 1)),
                    with_query(att["url"], exp=None),
                    att["url"].replace(key, other_key),
                    att["url"].replace(key, "att_" + "A" * 24)):
            r = requests.get(bad, timeout=HTTP_TIMEOUT)
            assert r.status_code == 404, (bad, r.status_code)
            assert body not in r.content and b"other" not in r.content
    finally:
        close_stream(stream)
        drop_bridge(sock)


def test_several_attachments_keep_their_order(relay, user_token):
    _, _, sid = setup_session(relay, user_token)
    keys = [assert_ok(upload(relay, user_token, b"file %d" % i, mime="text/plain", name="f%d.txt" % i))["key"]
            for i in range(3)]
    assert_ok(send(relay, user_token, sid, {"text": "three files", "attachments": [{"key": k} for k in keys]}))
    msg = assert_ok(call(relay, "GET", "/v1/me/sessions/%s/messages" % sid, user_token))["messages"][0]
    assert [a["key"] for a in msg["attachments"]] == keys
    assert [a["name"] for a in msg["attachments"]] == ["f0.txt", "f1.txt", "f2.txt"]
    for i, a in enumerate(msg["attachments"]):
        assert requests.get(a["url"], timeout=HTTP_TIMEOUT).content == b"file %d" % i


def test_unknown_or_foreign_attachment_keys(relay, user_token):
    _, _, sid = setup_session(relay, user_token)
    bob = relay.token("bob")
    bobs_key = assert_ok(upload(relay, bob, b"bob's file", mime="text/plain"))["key"]
    mine = assert_ok(upload(relay, user_token, b"mine", mime="text/plain"))["key"]
    before = relay.count("messages")
    for attachments in ([{"key": "att_" + "Z" * 24}], [{"key": bobs_key}], [{"key": mine}, {"key": bobs_key}],
                        [{"key": "nope"}], [{}], [{"key": 5}], ["att_x"]):
        r = send(relay, user_token, sid, {"text": "look", "attachments": attachments})
        errors = validation_errors(r)
        assert any(e["path"] == "attachments" or e["path"].startswith("attachments.") for e in errors), \
            (attachments, errors)
        assert b"bob's file" not in r.content
    assert relay.count("messages") == before


def test_download_link_expires(relayd):
    relay = relayd("--attachment-url-ttl", "3s")
    token = relay.token("alice")
    _, _, sid = setup_session(relay, token)
    key = assert_ok(upload(relay, token, b"short-lived", mime="text/plain"))["key"]
    assert_ok(send(relay, token, sid, {"text": "x", "attachments": [{"key": key}]}))
    att = assert_ok(call(relay, "GET", "/v1/me/sessions/%s/messages" % sid, token))["messages"][0]["attachments"][0]
    exp = check_hydrated(relay, att, key, "text/plain", 11, None, ttl_s=3)
    r = requests.get(att["url"], timeout=HTTP_TIMEOUT)
    assert r.status_code == 200 and r.content == b"short-lived"
    while time.time() < exp + 1.2:
        time.sleep(0.1)
    r = requests.get(att["url"], timeout=HTTP_TIMEOUT)
    assert r.status_code == 404, r.status_code
    assert b"short-lived" not in r.content
    # A new delivery hydrates a fresh link.
    fresh = assert_ok(call(relay, "GET", "/v1/me/sessions/%s/messages" % sid, token))["messages"][0]["attachments"][0]
    assert fresh["url"] != att["url"]
    r = requests.get(fresh["url"], timeout=HTTP_TIMEOUT)
    assert r.status_code == 200 and r.content == b"short-lived"


# -- issue 27, item 3: the quota from the declared length -------------------------------------

def test_an_upload_past_the_quota_is_refused_before_its_body(relayd):
    relay = relayd("--attachment-quota", "10000")
    token = relay.token("alice")
    assert_ok(upload(relay, token, b"a" * 6000))
    # Only the head: the answer must come at once, from the declared length and what the user keeps.
    started = time.monotonic()
    r = raw_exchange(relay.port, head("/v1/me/attachments", 3000000, token), (), timeout=5)
    assert r is not None, "connection closed without an answer"
    err = assert_error(r, 413, "quota_exceeded")
    assert err["details"] == {"quota_bytes": 10000}
    assert time.monotonic() - started < 2
    assert relay.count("attachments") == 1 and len(attachment_files(relay)) == 1
    # What still fits is taken; exactly the rest, too.
    assert_ok(upload(relay, token, b"b" * 3000))
    r = raw_exchange(relay.port, head("/v1/me/attachments", 1001, token), (), timeout=5)
    assert_error(r, 413, "quota_exceeded")
    assert_ok(upload(relay, token, b"c" * 1000))
    # At the quota, a bridge of the user's is refused from the head as well (its token known to this node).
    _, bridge_token, _ = relay.pair(token)
    relay.set_manifest(bridge_token)
    r = raw_exchange(relay.port, head("/v1/bridge/uploadAttachment", 3000000, bridge_token), (), timeout=5)
    assert r is not None, "connection closed without an answer"
    assert_error(r, 413, "quota_exceeded")
    # A chunked body declares no length: it is counted as it comes (and by the upload's transaction).
    lines = ["POST /v1/me/attachments HTTP/1.1", "Host: 127.0.0.1", "Authorization: Bearer " + token,
             "Content-Type: application/octet-stream", "Transfer-Encoding: chunked"]
    r = raw_exchange(relay.port, ("\r\n".join(lines) + "\r\n\r\n").encode(),
                     [b"10\r\n" + b"d" * 16 + b"\r\n", b"0\r\n\r\n"], timeout=5)
    assert r is not None, "connection closed without an answer"
    assert_error(r, 413, "quota_exceeded")
    # Another user, and a token this node has not seen yet, are not refused from the head.
    bob = relay.token("bob")
    assert_ok(upload(relay, bob, b"x" * 10000))
    assert relay.count("attachments") == 4
