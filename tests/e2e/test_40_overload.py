"""Overload: when the store falls behind, requests are refused at once with 503
and retry_after_ms (--store-queue-max, --delta-backlog-max) instead of queueing
for seconds; what was accepted completes once the store catches up. The store
is held back from another connection: SQLite's write lock, or PostgreSQL's tables locked."""
import threading
import time
import uuid

from bridgelib import Installation
from relaylib import STORE, assert_ok, bearer, wait_until


def WriteLock(relay):
    """Holds the relay's store back, as a long transaction of another process would (relaylib)."""
    return relay.hold_store()


def stall_worker(relay, token):
    """Puts the store's worker inside a transaction that waits for the held store: a batch of deltas
    the worker writes then waits behind this operation. Returns the thread (join it after release)."""
    t = threading.Thread(target=lambda: relay.get("/v1/me/snapshot", headers=bearer(token), timeout=30))
    t.start()
    time.sleep(0.2)
    return t


def in_parallel(calls):
    """Runs the calls at once; returns (response, seconds) for each, in order."""
    results = [None] * len(calls)

    def run(i, call):
        start = time.monotonic()
        r = call()
        results[i] = (r, time.monotonic() - start)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
        time.sleep(0.01)
    return threads, results


def worker_path_relayd(relayd, tmp_path, *flags):
    """A relayd whose deltas go through the store's worker, which a held store stalls. On the SQLite pass,
    a database file given as sqlite:PATH: the data folder's own store writes its deltas on the loop, to
    the delta log, which no database lock holds back (test_on_its_own_data_folder_...)."""
    if STORE == "sqlite":
        return relayd(*flags, store="sqlite:%s" % (tmp_path / "worker-path.db"))
    return relayd(*flags)


def streaming_message(relay):
    """An installation of alice's with a message open in a new session: (installation, session, message id)."""
    inst = Installation(relay, relay.token("alice"))
    session = inst.create_session()
    interaction, _ = inst.send(session)
    return inst, session, inst.open_message(session, interaction)


def delta_call(relay, inst, mid, n, key=None):
    """A call that posts delta n ("dN ") of message mid, with its own key unless one is given."""
    return lambda: relay.post("/v1/bridge/sendMessageDelta",
                              {"message_id": mid, "delta": "d%d " % n, "idempotency_key": key or str(uuid.uuid4())},
                              token=inst.token, timeout=15)


def test_a_stalled_store_sheds_new_requests_at_once(relayd):
    relay = relayd("--store-queue-max", "4")
    token = relay.token("alice")
    assert_ok(relay.get("/v1/me/snapshot", headers=bearer(token)))
    lock = WriteLock(relay)
    try:
        threads, results = in_parallel([lambda: relay.get("/v1/me/snapshot", headers=bearer(token), timeout=15)
                                        for _ in range(12)])
        # The queue holds what the worker has not taken; past 4, the answer is at once.
        wait_until(lambda: sum(1 for x in results if x is not None and x[0].status_code == 503) >= 4, 10,
                   what="four requests shed")
        answered = [x for x in results if x is not None]
        shed = [(r, t) for r, t in answered if r.status_code == 503]
        for r, seconds in shed:
            error = r.json()["error"]
            assert error["code"] == "temporarily_unavailable" and error["retry_after_ms"] == 500, error
            assert r.headers["Retry-After"] == "1"
            assert seconds < 0.9, seconds
    finally:
        lock.release()
    for t in threads:
        t.join(20)
    codes = [r.status_code for r, _ in results]
    assert set(codes) <= {200, 503} and codes.count(200) >= 1, codes
    assert_ok(relay.get("/v1/me/snapshot", headers=bearer(token)))


def test_deltas_past_the_backlog_are_shed_and_the_rest_are_stored(relayd, tmp_path):
    relay = worker_path_relayd(relayd, tmp_path, "--delta-backlog-max", "3")
    inst, session, mid = streaming_message(relay)
    token = relay.token("alice")
    lock = WriteLock(relay)
    staller = stall_worker(relay, token)
    try:
        threads, results = in_parallel([delta_call(relay, inst, mid, n) for n in range(8)])
        # Every call is sent (in_parallel returns once they all started); the five past the backlog come back at once.
        wait_until(lambda: sum(1 for x in results if x is not None and x[0].status_code == 503) >= 5, 10,
                   what="five deltas shed")
        shed = [x[0] for x in results if x is not None and x[0].status_code == 503]
        assert len(shed) == 5, [x[0].status_code for x in results if x is not None]
        for r in shed:
            assert r.json()["error"]["retry_after_ms"] == 250, r.text
    finally:
        lock.release()
    staller.join(30)
    for t in threads:
        t.join(20)
    accepted = [n for n, (r, _) in enumerate(results) if r.status_code == 200]
    assert len(accepted) == 3, [r.status_code for r, _ in results]
    # What was answered 200 is stored, in the order it arrived; what was shed is not.
    assert inst.message(session, mid)["text"] == "".join("d%d " % n for n in accepted)


def test_deltas_are_shed_once_the_oldest_unwritten_one_has_waited_too_long(relayd, tmp_path):
    # The backlog is far from full (one delta waits), but it has waited past --delta-wait-max:
    # a bridge gets 503 at once instead of joining a queue that does not move.
    relay = worker_path_relayd(relayd, tmp_path, "--delta-wait-max", "150ms")
    inst, session, mid = streaming_message(relay)

    def delta(n):
        return delta_call(relay, inst, mid, n)

    token = relay.token("alice")
    lock = WriteLock(relay)
    staller = stall_worker(relay, token)
    try:
        first, first_result = in_parallel([delta(0)])
        # Under the limit: a second delta still joins the same wait.
        time.sleep(0.05)
        second, second_result = in_parallel([delta(1)])
        time.sleep(0.3)
        assert first_result[0] is None and second_result[0] is None, "answered while the store was held"
        shed_threads, shed = in_parallel([delta(n) for n in range(2, 6)])
        for t in shed_threads:
            t.join(5)
        for r, seconds in shed:
            assert r.status_code == 503, r.text
            error = r.json()["error"]
            assert error["code"] == "temporarily_unavailable" and error["retry_after_ms"] == 250, error
            assert r.headers["Retry-After"] == "1"
            assert seconds < 0.5, seconds
    finally:
        lock.release()
    staller.join(30)
    for t in first + second:
        t.join(20)
    assert first_result[0][0].status_code == 200 and second_result[0][0].status_code == 200
    # Once the store moves again, new deltas are taken: the wait is over.
    assert_ok(delta(6)())
    assert inst.message(session, mid)["text"] == "d0 d1 d6 "


def held_own_folder_store(relayd):
    """One node on its own SQLite store (whatever the pass's store and bus), a streaming message, and the
    store held by another process with an operation stalled in its worker: (relay, inst, session, mid, lock,
    staller)."""
    relay = relayd("--delta-wait-max", "150ms", store="sqlite", bus="local")
    inst, session, mid = streaming_message(relay)
    token = relay.token("alice")  # before the lock: minting one reads the store
    lock = WriteLock(relay)
    return relay, inst, session, mid, lock, stall_worker(relay, token)


def test_on_its_own_data_folder_deltas_are_not_held_by_a_stalled_store(relayd):
    # The loop writes deltas to the delta log and answers them in the same turn. A store held by another
    # process stalls the worker and its folds, not the deltas: none waits, none is shed, and all are in the
    # message once it moves.
    relay, inst, session, mid, lock, staller = held_own_folder_store(relayd)
    try:
        for n in range(6):
            start = time.monotonic()
            r = delta_call(relay, inst, mid, n)()
            assert r.status_code == 200, r.text
            assert time.monotonic() - start < 0.5, "a delta waited for the held store"
        assert staller.is_alive(), "the worker was not held"
    finally:
        lock.release()
    staller.join(30)
    assert inst.message(session, mid)["text"] == "d0 d1 d2 d3 d4 d5 "


def test_the_sweeps_of_a_held_store_do_not_send_deltas_to_it(relayd):
    # The sweeps run every second. The one that ends messages left open changes messages, and while such a
    # change is in the store the deltas that come are checked there rather than written on the loop. With
    # no message due it only reads, and changes nothing: held behind a stalled store for seconds, it does
    # not take the deltas of that time with it. Each is answered at once (a delta every 100 ms, past two
    # rounds of the sweeps) and all are in the message once the store moves.
    relay, inst, session, mid, lock, staller = held_own_folder_store(relayd)
    try:
        slowest, began = 0.0, time.monotonic()
        n = 0
        while time.monotonic() - began < 2.5:
            start = time.monotonic()
            r = delta_call(relay, inst, mid, n)()
            assert r.status_code == 200, r.text
            slowest = max(slowest, time.monotonic() - start)
            n += 1
            time.sleep(0.1)
        assert slowest < 0.5, "a delta waited %.2f s for the held store" % slowest
        assert staller.is_alive(), "the worker was not held"
    finally:
        lock.release()
    staller.join(30)
    assert inst.message(session, mid)["text"] == "".join("d%d " % k for k in range(n))


def test_the_delta_wait_limit_is_a_duration():
    import subprocess
    from relaylib import RELAYD
    out = subprocess.run([RELAYD, "--delta-wait-max", "100", "--data", "/nonexistent"], capture_output=True, text=True)
    assert out.returncode != 0 and "not a duration for delta-wait-max" in out.stderr, out.stderr


def test_a_loop_behind_many_connections_ready_at_once_sheds_the_excess(relayd):
    # Many bridges, each with a delta ready at once: h2o reads at most 256 sockets a loop turn, so each turn
    # stays short while the requests left unread wait through every turn before theirs. That is lag too:
    # past --loop-lag-max of turns that were all full, the rest are refused at once with 503 and
    # Retry-After, unread, and leave nothing in the store; every delta answered 200 is in its message.
    import json
    import os
    import resource
    import signal
    import socket

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    try:
        relay = relayd("--loop-lag-max", "10ms", "--max-connections-per-address", "4000", store="sqlite",
                       bus="local")
        # Under an installation's burst of 200 deltas; six turns' worth of sockets, if the descriptors allow.
        per_inst, insts = min(150, (min(hard, 8192) - 300) // 10), []
        assert per_inst >= 60, "too few file descriptors (%d) for the test" % hard
        for i in range(10):  # one user each: pairing is rate limited per user
            inst = Installation(relay, relay.token("bridge-owner-%d" % i))
            session = inst.create_session()
            interaction, _ = inst.send(session)
            insts.append((inst, session, inst.open_message(session, interaction)))
        requests_bytes, sockets = [], []
        for inst, _, mid in insts:
            for n in range(per_inst):
                body = json.dumps({"message_id": mid, "delta": "<%s:%d>" % (mid[-6:], n),
                                   "idempotency_key": str(uuid.uuid4())}).encode()
                requests_bytes.append(
                    b"POST /v1/bridge/sendMessageDelta HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                    + inst.token.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: "
                    + str(len(body)).encode() + b"\r\n\r\n" + body)
        for _ in requests_bytes:
            s = socket.create_connection(("127.0.0.1", relay.port), timeout=30)
            sockets.append(s)
        # All of them ready when the loop next looks: relayd is stopped while they are sent.
        os.kill(relay.proc.pid, signal.SIGSTOP)
        try:
            for s, req in zip(sockets, requests_bytes):
                s.sendall(req)
        finally:
            os.kill(relay.proc.pid, signal.SIGCONT)
        answers = []
        for s in sockets:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                assert chunk, "relayd closed a connection without an answer"
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
            while len(rest) < length:
                rest += s.recv(65536)
            answers.append((int(head.split(b" ")[1]), head, json.loads(rest[:length])))
            s.close()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    shed = [a for a in answers if a[0] == 503]
    accepted = [i for i, a in enumerate(answers) if a[0] == 200]
    assert len(shed) + len(accepted) == len(answers), [a for a in answers if a[0] not in (200, 503)][:3]
    assert shed, "no delta was shed: the loop's lag across full turns was not seen"
    assert accepted, "every delta was shed"
    for status, head, body in shed:
        assert body["error"]["code"] == "temporarily_unavailable" and body["error"]["retry_after_ms"] > 0, body
        assert b"retry-after:" in head.lower(), head
    # What was answered 200 is stored, once; what was shed left no trace.
    texts = {mid: inst.message(session, mid)["text"] for inst, session, mid in insts}
    for i, req in enumerate(requests_bytes):
        inst_i = i // per_inst
        piece = "<%s:%d>" % (insts[inst_i][2][-6:], i % per_inst)
        assert texts[insts[inst_i][2]].count(piece) == (1 if i in accepted else 0), piece
