"""Bridge rate buckets: headers on every bridge response, 429 on the approval bucket."""
import time
from concurrent.futures import ThreadPoolExecutor

from bridgelib import Installation, Turn, assert_rate_headers, key
from relaylib import assert_error, assert_ok


def _remaining(responses, bucket, limit):
    return [assert_rate_headers(r, bucket, limit) for r in responses]


def test_each_bucket_reports_its_capacity_and_remaining(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    inst, s, i = t.inst, t.session, t.interaction

    # msg: sendMessage and sendMessageEnd share it
    responses = [inst.post("sendMessage", {"session_id": s, "interaction_id": i, "text": "m%d" % n,
                                           "idempotency_key": key()}) for n in range(3)]
    mids = [assert_ok(r)["message_id"] for r in responses]
    responses.append(inst.end(mids[0]))
    remaining = _remaining(responses, "msg", 30)
    assert remaining[0] == 29 and remaining == sorted(remaining, reverse=True), remaining
    assert remaining[-1] < remaining[0], remaining

    # delta: a concurrent burst, so that its fast refill cannot hide the spending
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda n: inst.delta(mids[1], "x"), range(60)))
    for r in responses:
        assert_ok(r)
    remaining = _remaining(responses, "delta", 200)
    assert max(remaining) == 199 and min(remaining) <= 199 - 20, remaining

    # task: create, update, finish share it
    responses = [inst.task("createTask", s, i, "rt", kind="bash"),
                 inst.task("updateTask", s, i, "rt", progress_percent=1),
                 inst.task("finishTask", s, i, "rt", status="completed")]
    for r in responses:
        assert_ok(r)
    remaining = _remaining(responses, "task", 60)
    assert remaining[0] == 59 and remaining[-1] < remaining[0], remaining

    # approval
    responses = [inst.request_approval(s, i)[1] for _ in range(2)]
    for r in responses:
        assert_ok(r)
    remaining = _remaining(responses, "approval", 10)
    assert remaining == [9, 8], remaining

    # default: setManifest and uploadAttachment
    responses = [inst.post("setManifest", {"tools": []}),
                 relay.request("POST", "/v1/bridge/uploadAttachment", data=b"abc",
                               headers={"Authorization": "Bearer " + inst.token, "Content-Type": "text/plain"})]
    for r in responses:
        assert_ok(r)
    remaining = _remaining(responses, "default", 30)
    # (the socket's upgrade took one token of this bucket too)
    assert remaining[0] <= 29 and remaining[1] < remaining[0], remaining

    # errors carry them too
    r = inst.delta("msg_unknown00000000000", "x")
    assert_error(r, 404, "message_not_found")
    assert_rate_headers(r, "delta", 200)
    r = inst.task("updateTask", s, i, "nope", progress_percent=1)
    assert_error(r, 404, "task_not_found")
    assert_rate_headers(r, "task", 60)
    t.close()


def test_approval_bucket_refuses_the_eleventh_rapid_request(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    inst, s, i = t.inst, t.session, t.interaction
    results = [inst.request_approval(s, i)[1] for _ in range(11)]
    for r in results[:10]:
        assert_ok(r)
    remaining = [assert_rate_headers(r, "approval", 10) for r in results[:10]]
    assert remaining[0] == 9 and remaining == sorted(remaining, reverse=True), remaining
    r = results[10]
    err = assert_error(r, 429, "rate_limited")
    assert isinstance(err.get("retry_after_ms"), int) and 0 < err["retry_after_ms"] <= 1000, err
    assert int(r.headers["Retry-After"]) >= 1, dict(r.headers)
    assert assert_rate_headers(r, "approval", 10) == 0
    # the refused request left nothing behind
    assert len(inst.snapshot()["pending_approvals"]) == 10

    # the bucket is the installation's: another installation is unaffected
    other = Installation(relay, user_token, host_label="other")
    s2 = other.create_session()
    i2, _ = other.send(s2)
    _, r = other.request_approval(s2, i2)
    assert_ok(r)
    assert assert_rate_headers(r, "approval", 10) == 9

    # after the advised wait a token is back
    time.sleep(err["retry_after_ms"] / 1000.0 + 0.05)
    _, r = inst.request_approval(s, i)
    assert_ok(r)
    t.close()
