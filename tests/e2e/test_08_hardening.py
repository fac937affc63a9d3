"""Hardening (issue 11): what a hostile client or a careless operator setup
must not break.  Each test here failed against relayd before its fix."""
import base64
import json
import os
import re
import socket
import stat
import time

import pytest
import requests
from cryptography.hazmat.primitives import serialization

import relaylib
from relaylib import (
    HTTP_TIMEOUT, assert_error, assert_ok, b64url, bearer, mint_token, raw_exchange, wait_until,
)

GOOD_START = {"connector_type": "test-connector", "host_label": "laptop"}


# -- user tokens with any subject -------------------------------------------------

def _embedded_token(relay, sub, ttl=600):
    """A token signed with the embedded issuer's own key, for a subject that
    `relayd token` itself would refuse to sign."""
    with open(os.path.join(str(relay.data), "issuer.key"), "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    now = int(time.time())
    head = {"alg": "EdDSA", "typ": "JWT"}
    payload = {"iss": "relayd", "aud": "relay", "sub": sub, "iat": now, "exp": now + ttl}
    signing_input = (b64url(json.dumps(head).encode()) + "." +
                     b64url(json.dumps(payload, ensure_ascii=False).encode("utf-8")))
    return signing_input + "." + b64url(key.sign(signing_input.encode("ascii")))


def _first_record(relay, token):
    """The raw bytes of the first record of the user's event stream (HTTP/1.1, chunked)."""
    sock = socket.create_connection(("127.0.0.1", relay.port), timeout=HTTP_TIMEOUT)
    try:
        sock.sendall(("GET /v1/me/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n"
                      % token).encode("ascii"))
        raw = b""
        while b"\r\n\r\n" not in raw:
            raw += _recv(sock)
        head, _, raw = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        assert b"transfer-encoding: chunked" in head.lower(), head
        body = b""
        while not body.endswith(b"\n\n"):
            while b"\r\n" not in raw:
                raw += _recv(sock)
            size_line, _, raw = raw.partition(b"\r\n")
            size = int(size_line, 16)
            while len(raw) < size + 2:
                raw += _recv(sock)
            body += raw[:size]
            raw = raw[size + 2:]
            assert len(body) < 65536, "no record end in %r" % body[:200]
        return body
    finally:
        sock.close()


def _recv(sock):
    data = sock.recv(65536)
    assert data, "connection closed"
    return data


def _hello(record):
    lines = record.decode("utf-8").split("\n")
    assert lines[0] == "event: hello", record
    assert lines[1].startswith("data: "), record
    assert lines[2:] == ["", ""], "one data line and nothing after it: %r" % record
    return json.loads(lines[1][len("data: "):])


@pytest.mark.parametrize("sub", [
    pytest.param("u" * 250, id="250-chars"),
    pytest.param("x" * 255, id="255-chars"),
    pytest.param('say"hi"', id="quotes"),
    pytest.param('back\\slash', id="backslash"),
    pytest.param('"},"user_id":"mallory', id="json-injection"),
    pytest.param(("q\"\\" * 85), id="255-chars-all-escaped"),
])
def test_hello_carries_any_accepted_subject_exactly(relay, sub):
    token = mint_token(relay.data, sub)
    hello = _hello(_first_record(relay, token))
    assert hello["user_id"] == sub
    assert set(hello) == {"user_id", "ts", "heartbeat_ms"}


@pytest.mark.parametrize("sub", [
    pytest.param("x" * 256, id="256-chars"),
    pytest.param("has space", id="space"),
    pytest.param("tab\there", id="tab"),
    pytest.param("line\nbreak", id="newline"),
    pytest.param("nul\u0000byte", id="nul"),
    pytest.param("caf\u00e9", id="non-ascii"),
    pytest.param("del\u007f", id="delete"),
    pytest.param("", id="empty"),
])
def test_subjects_outside_the_rule_are_refused_at_verification(relay, sub):
    r = relay.get("/v1/me", headers=bearer(_embedded_token(relay, sub)))
    assert_error(r, 401, "invalid_token")
    r = requests.get(relay.url("/v1/me/stream"), headers=bearer(_embedded_token(relay, sub)), timeout=HTTP_TIMEOUT)
    assert_error(r, 401, "invalid_token")


def test_a_signed_subject_of_the_rule_is_accepted(relay):
    """The signing helper above is sound: the same path with a good subject passes."""
    sub = 'ok"sub\\' + "z" * 200
    r = relay.get("/v1/me", headers=bearer(_embedded_token(relay, sub)))
    assert assert_ok(r)["user"]["id"] == sub


# -- item 12: the text of a message is bounded by the 1 MB body only ----------------

def _session(relay, token):
    inst, bridge_token, _ = relay.pair(token)
    r = relay.post("/v1/me/sessions", {"installation_id": inst}, token=token)
    return bridge_token, assert_ok(r)["session_id"]


def test_a_900_kb_text_is_accepted_by_send_and_sendmessage(relay, user_token):
    bridge_token, sid = _session(relay, user_token)
    text = ("0123456789abcdef" * 57600)[:900 * 1000]
    r = relay.post("/v1/me/sessions/%s/send" % sid, {"text": text}, token=user_token)
    mid = assert_ok(r)["message_id"]
    assert relay.query("SELECT length(text) FROM messages WHERE id = ?", (mid,)) == [(len(text),)]
    r = relay.post("/v1/bridge/sendMessage", {"session_id": sid, "text": text, "idempotency_key": "k1"},
                   token=bridge_token)
    agent = assert_ok(r)["message_id"]
    r = relay.post("/v1/bridge/sendMessageEnd", {"message_id": agent, "text": text + "!", "idempotency_key": "k2"},
                   token=bridge_token)
    assert_ok(r)
    assert relay.query("SELECT length(text) FROM messages WHERE id = ?", (agent,)) == [(len(text) + 1,)]


def test_the_body_limit_still_bounds_the_text(relay, user_token):
    _, sid = _session(relay, user_token)
    r = relay.post("/v1/me/sessions/%s/send" % sid, {"text": "x" * (1024 * 1024)}, token=user_token)
    assert_error(r, 413, "payload_too_large")


def test_an_early_413_reaches_a_client_still_sending_its_body(relay, user_token):
    """relayd refuses an oversized body right after the head and closes; the
    body's bytes still arriving must not turn that close into a reset that
    throws the 413 away (the connection lingers, reading and dropping them)."""
    _, sid = _session(relay, user_token)
    size = 8 * 1024 * 1024
    head = ("POST /v1/me/sessions/%s/send HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % (sid, user_token, size)).encode()
    chunk = b"x" * 65536
    with socket.create_connection(("127.0.0.1", relay.port), timeout=HTTP_TIMEOUT) as sock:
        sock.sendall(head)
        for _ in range(size // len(chunk)):
            sock.sendall(chunk)
        answer = b""
        while b"\r\n\r\n" not in answer:
            part = sock.recv(65536)
            assert part, "the connection ended before the answer: %r" % answer
            answer += part
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    for _ in range(10):
        r = relay.post("/v1/me/sessions/%s/send" % sid, {"text": "x" * (1024 * 1024)}, token=user_token)
        assert_error(r, 413, "payload_too_large")


# -- item 4: the data folder's files are the relay's alone --------------------------------

def _modes(folder):
    out = {}
    for root, dirs, files in os.walk(str(folder)):
        for name in dirs + files:
            path = os.path.join(root, name)
            out[os.path.relpath(path, str(folder))] = stat.S_IMODE(os.lstat(path).st_mode)
    return out


def _folder_warnings(relay):
    return [r for r in relay.log_records() if r.get("level") == "warn" and "data folder" in r.get("msg", "")]


def test_every_file_of_a_shared_looking_folder_is_private(relayd, tmp_path):
    data = tmp_path / "open-data"
    data.mkdir()
    os.chmod(str(data), 0o755)
    relay = relayd(data=data, store="sqlite")  # the store files under test are SQLite's
    token = relay.token("alice")
    _session(relay, token)
    r = relay.post("/v1/me/attachments?name=a.txt", data=b"hello", token=token,
                   headers={"Content-Type": "text/plain"})
    assert_ok(r)
    modes = _modes(data)
    for name in ("relay.db", "relay.db-wal", "relay.db-shm", "issuer.key", "url.key"):
        assert name in modes, sorted(modes)
    loose = {name: oct(mode) for name, mode in modes.items() if mode & 0o077}
    assert not loose, "readable by others: %r" % loose
    warnings = _folder_warnings(relay)
    assert len(warnings) == 1, relay.log_text()[-3000:]
    assert warnings[0].get("mode") == "0755" and warnings[0].get("path") == str(data), warnings


def test_a_private_folder_gives_no_warning(relayd, tmp_path):
    relay = relayd(data=tmp_path / "fresh")
    assert stat.S_IMODE(os.stat(str(tmp_path / "fresh")).st_mode) == 0o700
    assert _folder_warnings(relay) == []


# -- item 8: uploads never run on the relay's origin ----------------------------------------------

def _download(relay, token, sid, mime, name, body=b"<script>alert(document.domain)</script>"):
    headers = {"Content-Type": mime} if mime is not None else {}
    query = "?name=" + requests.utils.quote(name, safe="") if name else ""
    r = relay.post("/v1/me/attachments" + query, data=body, token=token, headers=headers)
    key = assert_ok(r)["key"]
    assert_ok(relay.post("/v1/me/sessions/%s/send" % sid, {"text": "", "attachments": [{"key": key}]},
                         token=token))
    page = assert_ok(relay.get("/v1/me/sessions/%s/messages?limit=1" % sid, headers=bearer(token)))
    url = page["messages"][0]["attachments"][0]["url"]
    r = requests.get(url, timeout=HTTP_TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.content == body
    assert r.headers.get("X-Content-Type-Options") == "nosniff"
    assert r.headers.get("Content-Security-Policy") == "sandbox", r.headers
    return r


@pytest.mark.parametrize("mime", ["text/html", "text/html; charset=utf-8", "image/svg+xml", "application/xhtml+xml",
                                  "text/xml", "application/pdf", "application/javascript", "TEXT/HTML",
                                  "application/octet-stream", "text/javascript", "text/javascript; charset=utf-8",
                                  "application/x-javascript", "text/ecmascript", "module", "text/css",
                                  "application/wasm", "application/json", "image/svg+xml; charset=utf-8",
                                  "application/manifest+json", "text/vtt", "multipart/x-mixed-replace"])
def test_active_types_are_served_as_downloads(relay, user_token, mime):
    _, sid = _session(relay, user_token)
    r = _download(relay, user_token, sid, mime, "page.html")
    assert r.headers.get("Content-Disposition", "").startswith("attachment"), r.headers
    assert "filename*=UTF-8''page.html" in r.headers["Content-Disposition"]
    # Issue 27, item 4: as bytes, never with a type a <script>, <link> or wasm import of this origin would take.
    assert r.headers["Content-Type"] == "application/octet-stream", r.headers


@pytest.mark.parametrize("mime", ["image/png", "image/jpeg", "image/gif", "image/webp", "text/plain",
                                  "text/plain; charset=utf-8", "audio/mpeg", "video/mp4", "IMAGE/PNG"])
def test_safe_types_are_shown_inline_but_sandboxed(relay, user_token, mime):
    _, sid = _session(relay, user_token)
    r = _download(relay, user_token, sid, mime, None)
    assert r.headers.get("Content-Disposition", "inline").startswith("inline"), r.headers
    assert r.headers["Content-Type"] == mime


def test_download_names_are_encoded_not_injected(relay, user_token):
    _, sid = _session(relay, user_token)
    name = 'a"; filename=evil.html; x="\u00e9t\u00e9 %.txt'
    r = _download(relay, user_token, sid, "text/html", name)
    disposition = r.headers["Content-Disposition"]
    m = re.match(r'^attachment; filename="([^";\\%]*)"; filename\*=UTF-8\'\'([A-Za-z0-9!#$&+.^_`|~%-]*)$', disposition)
    assert m, disposition
    assert requests.utils.unquote(m.group(2)) == name


# -- item 9: credentials in the URL are found whatever their percent-encoding --------------

def _encoded_url_cases(user_token, bridge_token):
    head, payload, sig = user_token.split(".")
    inst, secret = bridge_token.split(":")
    return [
        ("jwt-dots-%2E", "/v1/me?x=%s%%2E%s%%2E%s" % (head, payload, sig)),
        ("jwt-dots-%2e", "/v1/me?x=%s%%2e%s%%2e%s" % (head, payload, sig)),
        ("jwt-eyJ-%65yJ", "/v1/me?x=%%65%s.%s.%s" % (head[1:], payload, sig)),
        ("jwt-all-encoded", "/v1/me?x=" + "".join("%%%02X" % ord(c) for c in user_token)),
        ("jwt-double-encoded", "/v1/me?x=%s%%252E%s%%252E%s" % (head, payload, sig)),
        ("jwt-in-path-encoded", "/v1/me/sessions/%s%%2E%s%%2E%s" % (head, payload, sig)),
        ("bridge-inst-%5F", "/v1/me?x=inst%%5F%s:%s" % (inst[5:], secret)),
        ("bridge-s-%5F", "/v1/me?x=%s:s%%5F%s" % (inst, secret[2:])),
        ("bridge-all-encoded", "/v1/me?x=" + "".join("%%%02x" % ord(c) for c in bridge_token)),
        ("name-encoded", "/v1/me?%74oken=abc"),
        ("name-underscore-encoded", "/v1/me?access%5Ftoken=abc"),
    ]


def _raw(relay, method, target, token, body=b""):
    """One request sent byte for byte (an HTTP library would normalise the
    percent-encoding of unreserved characters before sending)."""
    head = ("%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n"
            "Connection: close\r\n\r\n" % (method, target, token, len(body))).encode("latin-1")
    r = raw_exchange(relay.port, head + body)
    assert r is not None, "no answer to %s %s" % (method, target)
    return r


def test_percent_encoded_credentials_in_the_url_are_refused(relay, user_token):
    _, bridge_token, _ = relay.pair(user_token)
    for name, path in _encoded_url_cases(user_token, bridge_token):
        r = _raw(relay, "GET", path, user_token)
        assert r.status_code == 400, (name, r.status_code, r.text)
        assert_error(r, 400, "invalid_token_location")
        r = _raw(relay, "POST", "/v1/bridge/setManifest" + path[len("/v1/me"):], bridge_token, b'{"tools":[]}')
        assert r.status_code == 400, (name, r.status_code, r.text)
        assert_error(r, 400, "invalid_token_location")


def test_encoded_ordinary_queries_still_pass(relay, user_token):
    _, sid = _session(relay, user_token)
    r = _raw(relay, "GET", "/v1/me/sessions/%s/messages?limit=%%35" % sid, user_token)
    assert_ok(r)
    r = _raw(relay, "POST", "/v1/me/attachments?name=%65yJ%20notes%2Etxt", user_token, b"x")
    assert assert_ok(r)["name"] == "eyJ notes.txt"


# -- items 6 and 11: request framing and the head ------------------------------------------

def _send_raw(relay, data, timeout=HTTP_TIMEOUT):
    """Sends bytes, reads one response; returns (response or None, whether the relay then closed)."""
    sock = socket.create_connection(("127.0.0.1", relay.port), timeout=timeout)
    try:
        sock.sendall(data)
        response = relaylib._read_response(sock, timeout)
        sock.settimeout(2)
        try:
            rest = sock.recv(65536)
            closed = rest == b""
        except ConnectionResetError:
            closed = True
        except socket.timeout:
            closed = False
        return response, closed
    finally:
        sock.close()


def _assert_refused_and_closed(relay, data, status=400, code="invalid_request"):
    before = relay.count("pairings")
    r, closed = _send_raw(relay, data)
    assert r is not None, "no answer"
    assert_error(r, status, code)
    assert r.headers.get("X-Request-ID", "").startswith("req_"), r.headers
    assert closed, "the connection must be closed after a framing error"
    assert relay.count("pairings") == before
    return r


START_BODY = json.dumps(GOOD_START).encode()
SMUGGLED = b"GET /v1/me HTTP/1.1\r\nHost: x\r\n\r\n"


def _chunked(body):
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def test_content_length_with_transfer_encoding_is_refused(relay):
    body = _chunked(START_BODY)
    for first, second in (("Content-Length: %d" % len(body), "Transfer-Encoding: chunked"),
                          ("Transfer-Encoding: chunked", "Content-Length: %d" % len(body)),
                          ("Content-Length: 5", "Transfer-Encoding: chunked")):
        head = "POST /v1/pairing/start HTTP/1.1\r\nHost: x\r\n%s\r\n%s\r\n\r\n" % (first, second)
        _assert_refused_and_closed(relay, head.encode() + body + SMUGGLED)


def test_two_content_lengths_are_refused(relay):
    for values in ((len(START_BODY), len(START_BODY) + 30), (len(START_BODY), len(START_BODY))):
        head = "POST /v1/pairing/start HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nContent-Length: %d\r\n\r\n" % values
        _assert_refused_and_closed(relay, head.encode() + START_BODY + b" " * 30 + SMUGGLED)


def test_transfer_encoding_in_http_1_0_is_refused(relay):
    head = b"POST /v1/pairing/start HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"
    _assert_refused_and_closed(relay, head + _chunked(START_BODY))


def test_a_bad_content_length_gets_the_envelope(relay):
    head = b"POST /v1/pairing/start HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n"
    _assert_refused_and_closed(relay, head + START_BODY)


def test_http_1_1_without_host_is_refused(relay):
    _assert_refused_and_closed(relay, b"GET /healthz HTTP/1.1\r\n\r\n")
    head = "POST /v1/pairing/start HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(START_BODY)
    _assert_refused_and_closed(relay, head.encode() + START_BODY)
    # HTTP/1.0 has no Host requirement.
    r, _ = _send_raw(relay, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert_ok(r)


def test_two_host_headers_are_refused(relay):
    _assert_refused_and_closed(relay, b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")


@pytest.mark.parametrize("raw", [
    pytest.param(b"GET /v1/me HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-F%d: v\r\n" % i for i in range(150)) + b"\r\n",
                 id="header-flood"),
    pytest.param(b"GET /v1/me HTTP/1.1\r\nHost: x\r\nX-Bad: a\x00b\r\n\r\n", id="nul-in-header"),
    pytest.param(b"GET /v1/me\r\n\r\n", id="http-0.9"),
    pytest.param(b"GET /v1/me HTTP/1.1\r\nHost: x\r\nX-Big: " + b"y" * 420000 + b"\r\n\r\n", id="head-too-large"),
    pytest.param(b"GET /v1/me HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", id="space-in-name"),
    pytest.param(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n", id="tls-on-plain-port"),
])
def test_malformed_heads_get_the_envelope(relay, raw):
    _assert_refused_and_closed(relay, raw)


def test_the_connection_preface_of_http2_still_works(relay):
    """The head hook leaves h2c prior knowledge to h2o."""
    sock = socket.create_connection(("127.0.0.1", relay.port), timeout=HTTP_TIMEOUT)
    try:
        # The preface and an empty SETTINGS frame: the server answers with its own SETTINGS frame.
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        frame = sock.recv(9)
        assert len(frame) == 9 and frame[3] == 4, frame
    finally:
        sock.close()


def test_a_request_with_a_stray_marker_header_is_served(relay):
    """The header relayd uses internally to carry a refusal cannot be sent by a client."""
    r, closed = _send_raw(relay, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-RL-Refused: 1\r\nConnection: close\r\n\r\n")
    assert_ok(r)


def test_two_authorization_headers_are_refused(relay, user_token):
    head = ("GET /v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nAuthorization: Bearer %s\r\n\r\n"
            % (user_token, relay.token("mallory")))
    r, _ = _send_raw(relay, head.encode())
    assert_error(r, 400, "invalid_request")
    r, _ = _send_raw(relay, ("GET /v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n"
                             % user_token).encode())
    assert_ok(r)


def test_a_nul_in_the_path_is_refused(relay, user_token):
    r, _ = _send_raw(relay, ("GET /v1/me/sessions/ses_abc%%00def HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                             "Connection: close\r\n\r\n" % user_token).encode())
    assert_error(r, 400, "invalid_request")


def test_file_links_are_exact(relay, user_token):
    _, sid = _session(relay, user_token)
    r = _download(relay, user_token, sid, "text/plain", "a.txt", body=b"secret bytes")
    url = r.url
    path_and_query = url[url.index("/v1/files/"):]
    path, _, query = path_and_query.partition("?")
    for bad in (path + "%00?" + query, path + "/?" + query, path + "%00.html?" + query,
                path.replace("/v1/files/", "/v1/files//") + "?" + query, path + "/.?" + query):
        r, _ = _send_raw(relay, ("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % bad).encode())
        assert r is not None and r.status_code in (400, 404), (bad, r and r.status_code)
        assert b"secret bytes" not in r.content, bad
    r, _ = _send_raw(relay, ("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path_and_query).encode())
    assert r.status_code == 200 and r.content == b"secret bytes"


# -- item 11 (the store's part): a revoked installation cannot be renamed ---------------------

def test_patch_on_a_revoked_installation_is_403(relay, user_token):
    inst, _, _ = relay.pair(user_token)
    path = "/v1/me/installations/%s" % inst
    assert_ok(relay.request("DELETE", path, headers=bearer(user_token)))
    before = relay.query("SELECT custom_display_name, custom_emoji, state FROM installations WHERE id = ?", (inst,))
    r = relay.request("PATCH", path, json={"custom_display_name": "renamed"}, headers=bearer(user_token))
    assert_error(r, 403, "installation_revoked")
    assert relay.query("SELECT custom_display_name, custom_emoji, state FROM installations WHERE id = ?",
                       (inst,)) == before
    # Someone else's installation is still simply not found.
    r = relay.request("PATCH", path, json={"custom_display_name": "x"}, headers=bearer(relay.token("bob")))
    assert_error(r, 404, "installation_not_found")


# -- item 14: the name a message gives an attachment is kept ------------------------------------

def test_an_attachment_name_given_in_send_is_kept(relay, user_token):
    _, sid = _session(relay, user_token)
    key = assert_ok(relay.post("/v1/me/attachments", data=b"%PDF-1.4", token=user_token,
                               headers={"Content-Type": "application/pdf"}))["key"]
    named = assert_ok(relay.post("/v1/me/attachments?name=stored.txt", data=b"x", token=user_token,
                                 headers={"Content-Type": "text/plain"}))["key"]
    r = relay.post("/v1/me/sessions/%s/send" % sid,
                   {"text": "", "attachments": [{"key": key, "name": "report.pdf"}, {"key": named},
                                                {"key": named, "name": None}]}, token=user_token)
    mid = assert_ok(r)["message_id"]
    page = assert_ok(relay.get("/v1/me/sessions/%s/messages" % sid, headers=bearer(user_token)))
    attachments = [m for m in page["messages"] if m["message_id"] == mid][0]["attachments"]
    assert [a["name"] for a in attachments] == ["report.pdf", "stored.txt", "stored.txt"], attachments
    assert attachments[0]["mime"] == "application/pdf" and attachments[0]["size"] == 8
    payload = json.loads(relay.query("SELECT payload FROM updates WHERE type = 'session.message'")[0][0])
    assert [a["name"] for a in payload["message"]["attachments"]] == ["report.pdf", "stored.txt", "stored.txt"]


# -- item 13: an idempotency record past its lifetime is absent -------------------------------

def test_an_idempotency_key_past_its_ttl_no_longer_replays(relayd):
    relay = relayd("--idempotency-ttl", "2s", testclock=True)
    token = relay.token("alice")
    bridge_token, sid = _session(relay, token)
    body = {"session_id": sid, "text": "hello", "idempotency_key": "k-1"}
    first = assert_ok(relay.post("/v1/bridge/sendMessage", body, token=bridge_token))
    replay = assert_ok(relay.post("/v1/bridge/sendMessage", body, token=bridge_token))
    assert replay == dict(first, idempotent=True)
    # Still a replay just inside the lifetime, then not once the clock has gone past it.
    relay.advance_clock(1500)
    assert assert_ok(relay.post("/v1/bridge/sendMessage", body, token=bridge_token)) == dict(first, idempotent=True)
    relay.advance_clock(1000)
    # Long before housekeeping (every minute) removes it, an old record counts as absent.
    again = assert_ok(relay.post("/v1/bridge/sendMessage", body, token=bridge_token))
    assert "idempotent" not in again and again["message_id"] != first["message_id"]
    # The new write is remembered for its own lifetime, and a different body under the key is a new write too.
    assert assert_ok(relay.post("/v1/bridge/sendMessage", body, token=bridge_token)) == dict(again, idempotent=True)
    relay.advance_clock(2500)
    other = assert_ok(relay.post("/v1/bridge/sendMessage", dict(body, text="changed"), token=bridge_token))
    assert "idempotent" not in other and other["message_id"] not in (first["message_id"], again["message_id"])
    assert relay.query("SELECT COUNT(*) FROM messages WHERE session_id = ? AND role = 'agent'", (sid,)) == [(3,)]


def test_a_delta_key_past_its_ttl_no_longer_replays(relayd):
    relay = relayd("--idempotency-ttl", "2s", testclock=True)
    token = relay.token("alice")
    bridge_token, sid = _session(relay, token)
    mid = assert_ok(relay.post("/v1/bridge/sendMessage", {"session_id": sid, "text": "", "idempotency_key": "m"},
                               token=bridge_token))["message_id"]
    delta = {"message_id": mid, "delta": "hi", "idempotency_key": "d-1"}
    assert_ok(relay.post("/v1/bridge/sendMessageDelta", delta, token=bridge_token))
    assert_ok(relay.post("/v1/bridge/sendMessageEnd", {"message_id": mid, "idempotency_key": "e"}, token=bridge_token))
    assert assert_ok(relay.post("/v1/bridge/sendMessageDelta", delta, token=bridge_token)).get("idempotent") is True
    relay.advance_clock(2500)
    r = relay.post("/v1/bridge/sendMessageDelta", delta, token=bridge_token)
    assert_error(r, 409, "message_finalized")


# -- item 10: a message's text has a cap, and history pages are bounded -----------------------

def test_a_message_cannot_grow_past_its_cap(relayd):
    relay = relayd("--max-message-bytes", "1000")
    token = relay.token("alice")
    bridge_token, sid = _session(relay, token)

    def bridge(route, body):
        return relay.post("/v1/bridge/" + route, body, token=bridge_token)

    assert_error(relay.post("/v1/me/sessions/%s/send" % sid, {"text": "u" * 1001}, token=token),
                 413, "message_too_large")
    assert_ok(relay.post("/v1/me/sessions/%s/send" % sid, {"text": "u" * 1000}, token=token))
    assert_error(bridge("sendMessage", {"session_id": sid, "text": "a" * 1001, "idempotency_key": "big"}),
                 413, "message_too_large")
    mid = assert_ok(bridge("sendMessage", {"session_id": sid, "text": "", "idempotency_key": "m"}))["message_id"]
    for i, (size, status) in enumerate(((400, 200), (400, 200), (400, 413), (200, 200), (1, 413))):
        r = bridge("sendMessageDelta", {"message_id": mid, "delta": str(i) * size, "idempotency_key": "d%d" % i})
        if status == 200:
            assert_ok(r)
        else:
            assert_error(r, 413, "message_too_large")
    page = assert_ok(relay.get("/v1/me/sessions/%s/messages" % sid, headers=bearer(token)))
    streamed = [m for m in page["messages"] if m["message_id"] == mid][0]
    assert streamed["text"] == "0" * 400 + "1" * 400 + "3" * 200, len(streamed["text"])
    # A refused delta left no key behind: with a smaller body it is a new delta, still over the cap.
    assert_error(bridge("sendMessageDelta", {"message_id": mid, "delta": "z", "idempotency_key": "d2"}),
                 413, "message_too_large")
    assert_error(bridge("sendMessageEnd", {"message_id": mid, "text": "e" * 1001, "idempotency_key": "e1"}),
                 413, "message_too_large")
    assert_ok(bridge("sendMessageEnd", {"message_id": mid, "text": "e" * 1000, "idempotency_key": "e2"}))


def test_a_message_streamed_on_an_opening_text_counts_it(relayd):
    relay = relayd("--max-message-bytes", "100")
    token = relay.token("alice")
    bridge_token, sid = _session(relay, token)
    mid = assert_ok(relay.post("/v1/bridge/sendMessage", {"session_id": sid, "text": "o" * 90, "idempotency_key": "m"},
                               token=bridge_token))["message_id"]
    assert_ok(relay.post("/v1/bridge/sendMessageDelta", {"message_id": mid, "delta": "d" * 10, "idempotency_key": "1"},
                         token=bridge_token))
    r = relay.post("/v1/bridge/sendMessageDelta", {"message_id": mid, "delta": "x", "idempotency_key": "2"},
                   token=bridge_token)
    assert_error(r, 413, "message_too_large")
    # After a restart the record is loaded from the store, and counts the same.
    relay.restart()
    r = relay.post("/v1/bridge/sendMessageDelta", {"message_id": mid, "delta": "x", "idempotency_key": "3"},
                   token=bridge_token)
    assert_error(r, 413, "message_too_large")


def test_history_pages_are_bounded_in_bytes(relay, user_token):
    _, sid = _session(relay, user_token)
    sent = []
    for i in range(6):
        sent.append(assert_ok(relay.post("/v1/me/sessions/%s/send" % sid, {"text": str(i) * 1000000},
                                         token=user_token))["message_id"])
    first = assert_ok(relay.get("/v1/me/sessions/%s/messages?limit=100" % sid, headers=bearer(user_token)))
    assert first["has_more"] is True and 1 <= len(first["messages"]) <= 5, len(first["messages"])
    assert sum(len(m["text"]) for m in first["messages"]) <= 4 * 1024 * 1024 + 1000000
    rest = assert_ok(relay.get("/v1/me/sessions/%s/messages?limit=100&before=%s" % (sid, first["next_cursor"]),
                               headers=bearer(user_token)))
    assert rest["has_more"] is False
    assert [m["message_id"] for m in first["messages"] + rest["messages"]] == sent[::-1]


def test_the_message_cap_has_a_ceiling(tmp_path):
    from relaylib import run_relayd
    proc = run_relayd(["--data", str(tmp_path / "d"), "--max-message-bytes", "4194305"])
    assert proc.returncode == 2 and "--max-message-bytes" in proc.stderr, proc.stderr


# -- item 3: approval ids belong to their installation ----------------------------------------------

def _approval_body(sid, iid, approval_id, key):
    return {"session_id": sid, "interaction_id": iid, "approval_id": approval_id, "action": "exec",
            "title": "Run", "message": "run it", "severity": "low", "command": "ls", "idempotency_key": key}


def _turn(relay, token, inst=None):
    """An installation (new unless given), a session and an interaction: (inst, bridge_token, sid, iid)."""
    if inst is None:
        inst = relay.pair(token)[:2]
    installation_id, bridge_token = inst
    sid = assert_ok(relay.post("/v1/me/sessions", {"installation_id": installation_id}, token=token))["session_id"]
    iid = assert_ok(relay.post("/v1/me/sessions/%s/send" % sid, {"text": "go"}, token=token))["interaction_id"]
    return installation_id, bridge_token, sid, iid


def test_approval_ids_of_one_installation_do_not_touch_another(relay):
    alice, bob = relay.token("alice"), relay.token("bob")
    _, bob_bridge, bob_sid, bob_iid = _turn(relay, bob)
    _, alice_bridge, alice_sid, alice_iid = _turn(relay, alice)
    r = relay.post("/v1/bridge/requestApproval", _approval_body(bob_sid, bob_iid, "apr_X", "b1"), token=bob_bridge)
    assert_ok(r)
    # Alice's bridge may use the same id: nothing tells it that Bob's exists.
    r = relay.post("/v1/bridge/requestApproval", _approval_body(alice_sid, alice_iid, "apr_X", "a1"),
                   token=alice_bridge)
    assert assert_ok(r)["auto_resolved"] is False
    for token, sid in ((alice, alice_sid), (bob, bob_sid)):
        pending = assert_ok(relay.get("/v1/me/snapshot", headers=bearer(token)))["pending_approvals"]
        assert [(p["approval_id"], p["session_id"]) for p in pending] == [("apr_X", sid)], pending
    # Each user decides their own.
    r = relay.post("/v1/me/approvals/apr_X", {"decision": "deny"}, token=bob)
    assert assert_ok(r)["session_id"] == bob_sid
    assert assert_ok(relay.get("/v1/me/snapshot", headers=bearer(bob)))["pending_approvals"] == []
    assert len(assert_ok(relay.get("/v1/me/snapshot", headers=bearer(alice)))["pending_approvals"]) == 1
    r = relay.post("/v1/me/approvals/apr_X", {"decision": "approve"}, token=alice)
    result = assert_ok(r)
    assert result["session_id"] == alice_sid and result["decision"] == "approve" and "idempotent" not in result
    # A replay of the request is still idempotent within the installation.
    r = relay.post("/v1/bridge/requestApproval", _approval_body(alice_sid, alice_iid, "apr_X", "a1"),
                   token=alice_bridge)
    assert assert_ok(r).get("idempotent") is True


def test_one_user_with_the_same_approval_id_on_two_installations(relay, user_token):
    first = _turn(relay, user_token)
    second = _turn(relay, user_token)
    for installation_id, bridge_token, sid, iid in (first, second):
        assert_ok(relay.post("/v1/bridge/requestApproval", _approval_body(sid, iid, "apr_Y", "k"), token=bridge_token))
    r = relay.post("/v1/me/approvals/apr_Y", {"decision": "approve"}, token=user_token)
    assert_error(r, 409, "approval_ambiguous")
    r = relay.post("/v1/me/approvals/apr_Y", {"decision": "approve", "installation_id": second[0]}, token=user_token)
    assert assert_ok(r)["session_id"] == second[2]
    pending = assert_ok(relay.get("/v1/me/snapshot", headers=bearer(user_token)))["pending_approvals"]
    assert [(p["approval_id"], p["installation_id"]) for p in pending] == [("apr_Y", first[0])]
    r = relay.post("/v1/me/approvals/apr_Y", {"decision": "deny", "installation_id": "inst_" + "0" * 16},
                   token=user_token)
    assert_error(r, 404, "approval_not_found")


# -- item 5: attachments have an end, and a quota ------------------------------------------------

def _upload(relay, token, body, name=None):
    query = "?name=" + name if name else ""
    return relay.post("/v1/me/attachments" + query, data=body, token=token, headers={"Content-Type": "text/plain"})


def _attachment_files(relay):
    folder = os.path.join(str(relay.data), "attachments")
    return sorted(os.listdir(folder))


def _history_urls(relay, token, sid):
    page = assert_ok(relay.get("/v1/me/sessions/%s/messages" % sid, headers=bearer(token)))
    return [a["url"] for m in page["messages"] for a in m["attachments"]]


def test_attachments_go_with_their_purged_session(relayd):
    relay = relayd("--delete-grace", "2s")
    token = relay.token("alice")
    _, sid = _session(relay, token)
    _, keep_sid = _session(relay, token)
    only_here = assert_ok(_upload(relay, token, b"only in the deleted session"))["key"]
    shared = assert_ok(_upload(relay, token, b"also in another session"))["key"]
    assert_ok(relay.post("/v1/me/sessions/%s/send" % sid, {"text": "", "attachments": [{"key": only_here},
                                                                                        {"key": shared}]},
                         token=token))
    assert_ok(relay.post("/v1/me/sessions/%s/send" % keep_sid, {"text": "", "attachments": [{"key": shared}]},
                         token=token))
    urls = _history_urls(relay, token, sid)
    assert requests.get(urls[0], timeout=HTTP_TIMEOUT).status_code == 200
    assert_ok(relay.request("DELETE", "/v1/me/sessions/%s" % sid, headers=bearer(token)))
    # Within the grace the files stay (the session can be restored).
    assert requests.get(urls[0], timeout=HTTP_TIMEOUT).status_code == 200
    wait_until(lambda: only_here not in _attachment_files(relay), 10, what="the purged session's file to go")
    assert relay.query("SELECT COUNT(*) FROM sessions WHERE id = ?", (sid,)) == [(0,)]
    r = requests.get(urls[0], timeout=HTTP_TIMEOUT)
    assert r.status_code == 404 and b"only in the deleted" not in r.content
    assert relay.query("SELECT COUNT(*) FROM attachments WHERE key = ?", (only_here,)) == [(0,)]
    # Its key cannot be sent again; the one another session still uses stays, file and link.
    r = relay.post("/v1/me/sessions/%s/send" % keep_sid, {"text": "", "attachments": [{"key": only_here}]},
                   token=token)
    assert r.status_code == 400, r.text
    assert shared in _attachment_files(relay)
    kept = _history_urls(relay, token, keep_sid)
    assert requests.get(kept[0], timeout=HTTP_TIMEOUT).content == b"also in another session"


def test_uploads_never_sent_are_removed_after_their_ttl(relayd):
    relay = relayd("--unused-attachment-ttl", "2s")
    token = relay.token("alice")
    _, sid = _session(relay, token)
    unused = assert_ok(_upload(relay, token, b"never sent"))["key"]
    sent = assert_ok(_upload(relay, token, b"sent"))["key"]
    assert_ok(relay.post("/v1/me/sessions/%s/send" % sid, {"text": "", "attachments": [{"key": sent}]}, token=token))
    wait_until(lambda: unused not in _attachment_files(relay), 10, what="the unused upload to go")
    # The row goes after the file, in the store's next batch (attachments.c: doomed, unlinked, then deleted).
    wait_until(lambda: relay.query("SELECT key FROM attachments") == [(sent,)], 10, what="the unused upload's row to go")
    assert sent in _attachment_files(relay)
    r = relay.post("/v1/me/sessions/%s/send" % sid, {"text": "", "attachments": [{"key": unused}]}, token=token)
    assert r.status_code == 400, r.text
    assert any(r["msg"].startswith("removed 1 attachments") for r in relay.log_records()), relay.log_text()[-2000:]


def test_each_user_has_a_storage_quota(relayd):
    relay = relayd("--attachment-quota", "10000", "--unused-attachment-ttl", "1h")
    alice, bob = relay.token("alice"), relay.token("bob")
    assert_ok(_upload(relay, alice, b"a" * 6000))
    assert_ok(_upload(relay, alice, b"b" * 4000))
    before = _attachment_files(relay)
    r = _upload(relay, alice, b"c")
    err = assert_error(r, 413, "quota_exceeded")
    assert err["details"] == {"quota_bytes": 10000}
    assert _attachment_files(relay) == before, "a refused upload leaves no file"
    assert relay.query("SELECT COUNT(*) FROM attachments WHERE user_id = 'alice'") == [(2,)]
    # Another user's quota is their own; a bridge's uploads count against its user.
    assert_ok(_upload(relay, bob, b"x" * 10000))
    _, bridge_token, _ = relay.pair(alice)
    r = relay.post("/v1/bridge/uploadAttachment", data=b"z", token=bridge_token, headers={"Content-Type": "text/plain"})
    assert_error(r, 413, "quota_exceeded")


# -- issue 27, item 6 -----------------------------------------------------------------

def test_a_content_length_too_long_to_hold_is_413(relay, user_token):
    for length in ("100000000000000000000", "9" * 40):
        head = ("POST /v1/me/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                "Content-Type: application/json\r\nContent-Length: %s\r\n\r\n" % (user_token, length))
        r = relaylib.raw_exchange(relay.port, head.encode())
        assert_error(r, 413, "payload_too_large")
    # Leading zeros say nothing: the body is read as its real length.
    body = b'{"installation_id":"inst_0000000000000000"}'
    head = ("POST /v1/me/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"
            "Content-Length: %s\r\n\r\n" % (user_token, str(len(body)).rjust(25, "0")))
    r = relaylib.raw_exchange(relay.port, head.encode(), [body])
    assert r.status_code == 404, r.json()


def test_a_query_key_given_twice_is_refused(relay, user_token):
    r = relay.get("/v1/me/sessions?state=deleted&state=live", headers=relaylib.bearer(user_token))
    errors = relaylib.validation_errors(r)
    assert relaylib.find_error(errors, "state")
    r = relay.get("/v1/me/sessions?state=live&state=live", headers=relaylib.bearer(user_token))
    assert r.status_code == 400, r.text
    _, sid = _session(relay, user_token)
    r = relay.get("/v1/me/sessions/%s/messages?limit=1&limit=100" % sid, headers=relaylib.bearer(user_token))
    assert relaylib.find_error(relaylib.validation_errors(r), "limit")
    assert_ok(relay.get("/v1/me/sessions?state=deleted", headers=relaylib.bearer(user_token)))


def test_a_download_link_with_a_key_given_twice_is_refused(relay, user_token):
    _, sid = _session(relay, user_token)
    r = _download(relay, user_token, sid, "image/png", None)
    url = r.url
    assert_error(requests.get(url + "&exp=1", timeout=HTTP_TIMEOUT), 404, "not_found")
    assert_error(requests.get(url + "&sig=" + "0" * 32, timeout=HTTP_TIMEOUT), 404, "not_found")


@pytest.mark.parametrize("route", [
    ("GET", "/v1/me/sessions/%s/messages", None), ("POST", "/v1/me/sessions/%s/send", {"text": "hi"}),
    ("POST", "/v1/me/sessions/%s/cancel", {}), ("PATCH", "/v1/me/sessions/%s", {"title": "x"}),
    ("DELETE", "/v1/me/sessions/%s", None), ("POST", "/v1/me/sessions/%s/archive", None),
    ("POST", "/v1/me/sessions/%s/restore", None), ("POST", "/v1/me/approvals/%s", {"decision": "approve"}),
    ("PATCH", "/v1/me/installations/%s", {"name": "x"}), ("DELETE", "/v1/me/installations/%s", None),
    ("DELETE", "/v1/me/grants/%s", None)], ids=lambda r: r[0] + " " + r[1])
def test_a_10_kb_id_in_a_path_is_404(relay, user_token, route):
    method, path, body = route
    r = relay.request(method, path % ("s" * 10240), json=body, headers=relaylib.bearer(user_token))
    assert r.status_code == 404, r.text
    assert r.json()["error"]["code"].endswith("not_found"), r.text
