"""Envelope, correlation headers, routing errors, body limits and validation."""
import json
import re

import pytest
import requests

from relaylib import (
    REQUEST_ID_RE, TRACEPARENT_RE, assert_correlation_headers, assert_error,
    assert_ok, chunks_of, find_error, post_head, raw_exchange, validation_errors,
)

START = "/v1/pairing/start"
GOOD_START = {"connector_type": "test-connector", "host_label": "laptop"}
ONE_MB = 1024 * 1024


# -- envelope ---------------------------------------------------------------------

def test_healthz_answers_ok_envelope(relay):
    r = relay.get("/healthz")
    assert assert_ok(r) == {"status": "ok"}
    assert r.json() == {"ok": True, "result": {"status": "ok"}}


def test_success_envelope_has_ok_and_result_only(relay):
    r = relay.post(START, GOOD_START)
    result = assert_ok(r)
    assert set(r.json()) == {"ok", "result"}
    assert set(result) >= {"code", "expires_at", "poll_token"}
    assert_correlation_headers(r)


def test_unknown_v1_path_is_404_not_found(relay):
    r = relay.get("/v1/does-not-exist")
    err = assert_error(r, 404, "not_found")
    assert set(r.json()) == {"ok", "error"}
    assert isinstance(err.get("message", ""), str)
    assert_correlation_headers(r)
    r = relay.post("/v1/pairing/nope", GOOD_START)
    assert_error(r, 404, "not_found")


def test_wrong_method_is_405_with_allow(relay):
    r = relay.get(START)
    assert_error(r, 405, "method_not_allowed")
    assert r.headers.get("Allow") == "POST"
    assert_correlation_headers(r)
    r = relay.request("PUT", "/v1/me/pairing/claim", json={"code": "ABCDEFG"})
    assert_error(r, 405, "method_not_allowed")
    assert r.headers.get("Allow") == "POST"


# -- X-Request-ID -------------------------------------------------------------------

def _over_limit(relay, headers):
    """A 413 for a Content-Length over 1 MB, through a raw socket."""
    body = b"x" * (ONE_MB + 1)
    r = raw_exchange(relay.port, post_head(START, length=len(body), extra=headers), chunks_of(body))
    assert r is not None, "connection closed without a 413 answer"
    return r


def _responses(relay, headers):
    """One success, one 404, one 400 and one 413, all sent with `headers`."""
    ok = relay.post(START, GOOD_START, headers=headers)
    assert ok.status_code == 200, ok.text
    not_found = relay.get("/v1/nope", headers=headers)
    assert not_found.status_code == 404, not_found.text
    bad = relay.post(START, data=b"{not json", headers=dict(headers, **{"Content-Type": "application/json"}))
    assert bad.status_code == 400, bad.text
    too_big = _over_limit(relay, headers)
    assert too_big.status_code == 413, too_big.text
    return {"200": ok, "404": not_found, "400": bad, "413": too_big}


def test_request_id_generated_when_absent(relay):
    seen = set()
    for kind, r in _responses(relay, {}).items():
        rid = r.headers.get("X-Request-ID")
        assert rid is not None and REQUEST_ID_RE.match(rid), (kind, rid)
        seen.add(rid)
    assert len(seen) == 4, "request ids must differ per exchange: %r" % seen


@pytest.mark.parametrize("value", [
    pytest.param("my-request.1", id="dots-dashes"),
    pytest.param("a", id="one-char"),
    pytest.param("A:b_c-d.e:F09", id="every-class"),
    pytest.param("x" * 64, id="64-chars"),
])
def test_valid_client_request_id_is_echoed(relay, value):
    for kind, r in _responses(relay, {"X-Request-ID": value}).items():
        assert r.headers.get("X-Request-ID") == value, (kind, r.headers.get("X-Request-ID"))


@pytest.mark.parametrize("value", [
    pytest.param("x" * 65, id="65-chars"),
    pytest.param("has space", id="space"),
    pytest.param("has/slash", id="slash"),
    pytest.param("", id="empty"),
    pytest.param("bad\u00e9".encode("utf-8").decode("latin-1"), id="non-ascii"),
    pytest.param("semi;colon", id="semicolon"),
])
def test_invalid_client_request_id_is_replaced(relay, value):
    for kind, r in _responses(relay, {"X-Request-ID": value}).items():
        rid = r.headers.get("X-Request-ID")
        assert rid is not None and REQUEST_ID_RE.match(rid), (kind, value, rid)


# -- traceparent / tracestate -----------------------------------------------------------

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def _trace_routes(relay, headers):
    yield relay.post(START, GOOD_START, headers=headers)
    yield relay.get("/v1/nope", headers=headers)
    yield relay.post(START, data=b"[", headers=dict(headers, **{"Content-Type": "application/json"}))


def test_traceparent_started_when_absent(relay):
    traces = set()
    for r in _trace_routes(relay, {}):
        m = TRACEPARENT_RE.match(r.headers.get("traceparent", ""))
        assert m, r.headers.get("traceparent")
        assert m.group(3) == "01"
        assert m.group(1) != "0" * 32 and m.group(2) != "0" * 16
        traces.add(m.group(1))
        assert "tracestate" not in r.headers
    assert len(traces) == 3, "each request without traceparent starts its own trace"


@pytest.mark.parametrize("flags", ["00", "01"])
def test_valid_traceparent_keeps_trace_and_flags(relay, flags):
    incoming = "00-%s-%s-%s" % (TRACE, PARENT, flags)
    for r in _trace_routes(relay, {"traceparent": incoming}):
        m = TRACEPARENT_RE.match(r.headers.get("traceparent", ""))
        assert m, r.headers.get("traceparent")
        assert m.group(1) == TRACE
        assert m.group(3) == flags
        assert m.group(2) != PARENT, "the server must mint a new parent id"
        assert m.group(2) != "0" * 16


@pytest.mark.parametrize("incoming", [
    pytest.param("00-%s-%s-00" % ("0" * 32, PARENT), id="zero-trace-id"),
    pytest.param("00-%s-%s-00" % (TRACE.upper(), PARENT), id="upper-case-hex"),
    pytest.param("00-%s-%s-00" % (TRACE[:-1], PARENT), id="trace-id-too-short"),
    pytest.param("00-%s-%s-00" % (TRACE, PARENT + "0"), id="parent-id-too-long"),
    pytest.param("ff-%s-%s-00" % (TRACE, PARENT), id="version-ff"),
    pytest.param("00-%s-%s-00" % (TRACE, "0" * 16), id="zero-parent-id"),
    pytest.param("00-%s-%s" % (TRACE, PARENT), id="no-flags"),
    pytest.param("garbage", id="garbage"),
])
def test_invalid_traceparent_starts_new_trace(relay, incoming):
    for r in _trace_routes(relay, {"traceparent": incoming}):
        m = TRACEPARENT_RE.match(r.headers.get("traceparent", ""))
        assert m, r.headers.get("traceparent")
        assert m.group(3) == "01", "a fresh trace is sampled"
        assert m.group(1).lower() != TRACE, "an invalid traceparent must not be continued"
        assert m.group(1) != "0" * 32


def test_tracestate_is_echoed_verbatim(relay):
    state = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE, vendor@x=Opaque  Value"
    for r in _trace_routes(relay, {"tracestate": state}):
        assert r.headers.get("tracestate") == state
    incoming = "00-%s-%s-01" % (TRACE, PARENT)
    for r in _trace_routes(relay, {"tracestate": state, "traceparent": incoming}):
        assert r.headers.get("tracestate") == state
        assert r.headers["traceparent"].split("-")[1] == TRACE


# -- body limits ---------------------------------------------------------------------------

def test_body_over_1mb_is_413_with_envelope(relay):
    before = relay.count("pairings")
    body = b"x" * (ONE_MB + 1)
    r = raw_exchange(relay.port, post_head(START, length=len(body)), chunks_of(body))
    assert r is not None, "connection closed without a 413 answer"
    err = assert_error(r, 413, "payload_too_large")
    assert_correlation_headers(r)
    assert isinstance(err.get("message", ""), str)
    assert relay.count("pairings") == before
    # The server keeps serving, on new connections.
    assert_ok(relay.get("/healthz"))
    assert_ok(relay.post(START, GOOD_START))


def test_oversize_is_refused_before_the_body_is_read(relay):
    # Announce 50 MB but send nothing: the answer must come without the body.
    r = raw_exchange(relay.port, post_head(START, length=50 * ONE_MB), ())
    assert r is not None, "connection closed without a 413 answer"
    assert_error(r, 413, "payload_too_large")
    assert_correlation_headers(r)
    assert_ok(relay.get("/healthz"))


def test_oversize_json_body_via_requests_is_413(relay):
    big = json.dumps({"connector_type": "x" * (ONE_MB + 10), "host_label": "h"})
    try:
        r = relay.post(START, data=big, headers={"Content-Type": "application/json"})
    except requests.ConnectionError:
        r = None
    if r is not None:
        assert_error(r, 413, "payload_too_large")
    assert_ok(relay.get("/healthz"))


def test_chunked_body_over_1mb_is_refused(relay):
    before = relay.count("pairings")

    def gen():
        yield b'{"connector_type":"'
        for _ in range(40):
            yield b"a" * 65536
        yield b'","host_label":"h"}'

    try:
        r = relay.post(START, data=gen(), headers={"Content-Type": "application/json"})
    except requests.ConnectionError:
        r = None
    if r is not None:
        assert_error(r, 413, "payload_too_large")
        assert_correlation_headers(r)
    assert relay.count("pairings") == before
    assert_ok(relay.get("/healthz"))
    assert_ok(relay.post(START, GOOD_START))


def test_chunked_body_over_1mb_raw_gets_413(relay):
    def chunked():
        for _ in range(40):
            yield b"10000\r\n" + b"a" * 65536 + b"\r\n"
        yield b"0\r\n\r\n"

    before = relay.count("pairings")
    r = raw_exchange(relay.port, post_head(START, chunked=True), chunked())
    assert r is not None, "connection closed without a 413 answer"
    assert_error(r, 413, "payload_too_large")
    assert_correlation_headers(r)
    assert relay.count("pairings") == before
    assert_ok(relay.get("/healthz"))


def test_small_chunked_body_is_accepted(relay):
    def gen():
        yield b'{"connector_type":'
        yield b'"cli","host_label":"box"}'

    r = relay.post(START, data=gen(), headers={"Content-Type": "application/json"})
    assert re.match(r"^[A-Z]{7}$", assert_ok(r)["code"])


def test_body_of_exactly_1mb_is_read_and_rejected_as_json(relay):
    before = relay.count("pairings")
    body = b"{" + b"x" * (ONE_MB - 1)
    assert len(body) == ONE_MB
    r = raw_exchange(relay.port, post_head(START, length=len(body)), chunks_of(body))
    assert r is not None, "connection closed without an answer"
    err = assert_error(r, 400, "invalid_request")
    assert err["errors"][0]["code"] == "invalid_json"
    assert relay.count("pairings") == before


def test_valid_json_of_exactly_1mb_is_accepted_by_the_reader(relay):
    # 1 MB of valid JSON passes the size limit and reaches the validator,
    # which refuses the over-long host_label.
    prefix = b'{"connector_type":"x","host_label":"'
    suffix = b'"}'
    body = prefix + b"h" * (ONE_MB - len(prefix) - len(suffix)) + suffix
    assert len(body) == ONE_MB
    r = raw_exchange(relay.port, post_head(START, length=len(body)), chunks_of(body))
    assert r is not None
    errors = validation_errors(r)
    assert find_error(errors, "host_label")["code"] == "too_big"


# -- validation ------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    pytest.param(b"{not json", id="not-json"),
    pytest.param(b'{"connector_type":"x","host_label":"h"', id="truncated"),
    pytest.param(b'{"connector_type":"x","host_label":"h"} trailing', id="trailing-garbage"),
    pytest.param(b"\xff\xfe{}", id="not-utf8"),
])
def test_malformed_json_is_invalid_json(relay, raw):
    before = relay.count("pairings")
    r = relay.post(START, data=raw, headers={"Content-Type": "application/json"})
    errors = validation_errors(r)
    assert errors[0]["code"] == "invalid_json"
    assert errors[0]["path"] == ""
    assert_correlation_headers(r)
    assert relay.count("pairings") == before


def test_empty_body_reports_the_required_fields(relay):
    # An empty body stands for an empty object (routes such as archive take
    # none), so each required field is reported missing.
    before = relay.count("pairings")
    r = relay.post(START, data=b"", headers={"Content-Type": "application/json"})
    errors = validation_errors(r)
    assert find_error(errors, "connector_type") == {
        "path": "connector_type", "code": "invalid_type", "message": "Required"}
    assert find_error(errors, "host_label")["message"] == "Required"
    assert relay.count("pairings") == before


def test_wrong_types_report_each_field(relay):
    before = relay.count("pairings")
    errors = validation_errors(relay.post(START, {"connector_type": 5}))
    ct = find_error(errors, "connector_type")
    assert ct["code"] == "invalid_type"
    hl = find_error(errors, "host_label")
    assert hl["code"] == "invalid_type"
    assert hl["message"] == "Required"
    assert len(errors) == 2, errors
    assert relay.count("pairings") == before


def test_host_label_too_long_is_too_big(relay):
    before = relay.count("pairings")
    errors = validation_errors(relay.post(START, {"connector_type": "cli", "host_label": "h" * 300}))
    assert find_error(errors, "host_label")["code"] == "too_big"
    assert [e["path"] for e in errors] == ["host_label"]
    assert relay.count("pairings") == before


def test_empty_connector_type_is_too_small(relay):
    before = relay.count("pairings")
    errors = validation_errors(relay.post(START, {"connector_type": "", "host_label": "h"}))
    assert find_error(errors, "connector_type")["code"] == "too_small"
    assert relay.count("pairings") == before


@pytest.mark.parametrize("body", [[], [GOOD_START], "text", 42, None])
def test_non_object_root_is_invalid_type_at_root(relay, body):
    before = relay.count("pairings")
    r = relay.post(START, data=json.dumps(body), headers={"Content-Type": "application/json"})
    errors = validation_errors(r)
    assert errors[0]["path"] == ""
    assert errors[0]["code"] == "invalid_type"
    assert relay.count("pairings") == before


def test_null_fields_are_invalid_type(relay):
    errors = validation_errors(relay.post(START, {"connector_type": None, "host_label": "h"}))
    assert find_error(errors, "connector_type")["code"] == "invalid_type"


def test_valid_start_does_add_a_row(relay):
    # The "no new rows" checks above are meaningful only if a good request adds one.
    before = relay.count("pairings")
    assert_ok(relay.post(START, GOOD_START))
    assert relay.count("pairings") == before + 1
