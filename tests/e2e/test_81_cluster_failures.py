"""Several relayd nodes when a part fails under load (issue 13): nodes on
PostgreSQL and Redis behind nginx (cluster.py), a bridge streaming deltas
through the balancer the whole time, and one part lost in the middle:

- kill -9 of the node that holds the bridge's socket: the bridge connects
  again through the balancer and lands on the other node;
- PostgreSQL stopped and started again (`pg.sh down` / `up`, a fast shutdown);
- Redis stopped and started again (it comes back empty: no persistence).

In each case every delta acknowledged is in the store exactly once (its
idempotency key too), requests that cannot be served meanwhile get 503
`temporarily_unavailable` with `retry_after_ms`, Retry-After and a message
naming the part that is away (Redis only once the rate buckets' local shares
stopped serving, after --bus-outage-grace), relayd logs
the loss and the reconnection, and the relay serves again by itself within a
bounded time after the part is back. A test that stops PostgreSQL or Redis
starts a server of its own, so that no other test sees the outage.

The bridge here is the tests' own (bridgelib): it retries a delta with the
same key until it is acknowledged, as relay-bridge does, so that what the
store holds can be counted against what was acknowledged.
"""
import json
import subprocess
import threading
import time

import pytest
import requests

from bridgelib import WAIT, Installation, Socket, key
from cluster import Cluster
from conftest import PG_SH, PostgresServer, RedisServer
from relaylib import SLOW, assert_ok, bearer, mint_token, postgres_query, wait_until

# How long the relay may take to serve again once the part is back: the reconnection's back-off
# reaches 5 s (store.md, bus.md), plus a reconnection and a request.
RECOVERY = 10 * SLOW
# How long the part stays away: long enough for every node to meet the outage several times.
OUTAGE = 2.0
DELTAS = 150
PACE = 0.02  # between two deltas: about 50 a second, well inside the bridge's delta bucket


@pytest.fixture
def own_redis():
    """A redis-server of the test's own, which it stops and starts; its URL is server.location."""
    server = RedisServer()
    server.location = "unix://%s?db=%d" % (server.socket, server.database())
    yield server
    server.close()


@pytest.fixture
def own_postgres():
    server = PostgresServer()
    yield server
    server.stop()


@pytest.fixture
def nodes(relayd, tmp_path):
    """nodes(n, store, bus): n relayd nodes on the store and bus behind nginx; the balancer stops at the end."""
    made = []

    def factory(n, store, bus, *extra):
        workdir = tmp_path / ("cluster%d" % len(made))
        workdir.mkdir()
        c = Cluster(relayd, workdir, n, store, bus, extra)
        made.append(c)
        return c

    yield factory
    for c in made:
        c.stop()


class DeltaPump(threading.Thread):
    """A bridge streaming DELTAS numbered deltas into one message through the balancer. Each delta has
    its own idempotency key and is sent again, with that key, until it is acknowledged: a connection
    that breaks, a 502 of the balancer (its node died) or a 503 of the relay is retried, anything else
    stops the pump. Records when each delta was acknowledged and every refusal it met."""

    def __init__(self, inst, message_id, count=DELTAS, pace=PACE):
        super().__init__(daemon=True)
        self.inst = inst
        self.message_id = message_id
        self.count = count
        self.pace = pace
        self.keys = [key() for _ in range(count)]
        self.texts = ["<%04d>" % i for i in range(count)]
        self.acked = []  # (index, time.monotonic() of the answer)
        self.replays = 0  # answers with idempotent: true (the first try's answer was lost)
        self.refusals = []  # (status, body, Retry-After) of every answer but 200
        self.broken = 0  # calls whose connection broke
        self.error = None
        self.stopping = False

    def run(self):
        try:
            for i in range(self.count):
                self._send(i)
                time.sleep(self.pace)
        except Exception as e:  # reported by finish()
            self.error = e

    def _send(self, i):
        deadline = time.monotonic() + 60 * SLOW
        while not self.stopping:
            if time.monotonic() > deadline:
                raise AssertionError("delta %d not acknowledged within 60s; refusals %r" % (i, self.refusals[-5:]))
            try:
                r = self.inst.delta(self.message_id, self.texts[i], idem=self.keys[i])
            except requests.RequestException:
                self.broken += 1
                time.sleep(0.05)
                continue
            if r.status_code == 200:
                if r.json()["result"].get("idempotent"):
                    self.replays += 1
                self.acked.append((i, time.monotonic()))
                return
            try:
                body = r.json()
            except ValueError:
                body = r.text
            self.refusals.append((r.status_code, body, r.headers.get("Retry-After")))
            if r.status_code not in (502, 503, 504):
                raise AssertionError("delta %d refused: %d %r" % (i, r.status_code, body))
            wait = 0.05
            if isinstance(body, dict) and "retry_after_ms" in body.get("error", {}):
                wait = min(body["error"]["retry_after_ms"] / 1000.0, 0.5)
            time.sleep(wait)

    def acked_before(self, moment):
        return [i for i, at in self.acked if at < moment]

    def wait_acked(self, n, timeout=WAIT):
        wait_until(lambda: len(self.acked) >= n or self.error is not None, timeout, interval=0.02,
                   what="%d deltas acknowledged" % n)
        assert self.error is None, self.error

    def finish(self, timeout=120 * SLOW):
        self.join(timeout)
        if self.is_alive():
            self.stopping = True
            self.join(5)
            raise AssertionError("the pump did not finish within %ss: %d acknowledged" % (timeout, len(self.acked)))
        assert self.error is None, self.error
        assert [i for i, _ in self.acked] == list(range(self.count))


def stored_deltas(store, message_id):
    """The message's runs of deltas in the store, in order: (the text, the idempotency keys)."""
    rows = postgres_query(store, "SELECT delta, keys FROM message_deltas WHERE message_id = ? ORDER BY seq",
                          (message_id,))
    text = b"".join(bytes(delta) for delta, _ in rows).decode("utf-8")
    keys = [k for _, keys in rows for k, _hash in json.loads(keys)]
    return text, keys


def assert_each_delta_once(store, pump):
    """Every delta the pump sent (all of them acknowledged) is in the store once, in order, with its key once."""
    text, keys = stored_deltas(store, pump.message_id)
    for i, piece in enumerate(pump.texts):
        assert text.count(piece) == 1, "delta %d is in the store %d times" % (i, text.count(piece))
    assert text == "".join(pump.texts)
    assert len(keys) == len(pump.keys) and set(keys) == set(pump.keys), (len(keys), len(pump.keys))


def end_and_check(inst, store, pump, session):
    """Ends the message (retried with its key like a delta) and reads it back through the balancer."""
    end_key = key()
    deadline = time.monotonic() + RECOVERY
    while True:
        r = inst.end(pump.message_id, idem=end_key)
        if r.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert_ok(r)
    text = postgres_query(store, "SELECT text, state FROM messages WHERE id = ?", (pump.message_id,))
    assert text == [("".join(pump.texts), "final")]
    message = inst.message(session, pump.message_id)
    assert message["text"] == "".join(pump.texts) and message["state"] == "final", message


def node_holding(c, installation_id, count=1):
    """The node whose log says the bridge connected to it (the count-th time across nodes)."""
    needle = '"bridge %s connected"' % installation_id

    def find():
        seen = [node for node in c.nodes if node.log_text().count(needle) > 0]
        total = sum(node.log_text().count(needle) for node in c.nodes)
        return seen if total >= count else None

    return wait_until(find, WAIT, what="the bridge's socket on a node")


def start_turn(c, store):
    """A user with a paired bridge connected through the balancer, a session and an open message."""
    user = mint_token(c.nodes[0].data, "alice", store=store)
    inst = Installation(c.front, user)
    sock = Socket(c.front, inst.token)
    sock.expect_ready(inst.id)
    session = inst.create_session()
    assert sock.next_update(WAIT)["type"] == "session.started"
    interaction, _ = inst.send(session, "tell me a long story")
    update = sock.next_update(WAIT)
    assert update["type"] == "session.message"
    # Acknowledged, so that a socket made later is sent only what comes after.
    sock.ack(update["update_id"])
    message_id = inst.open_message(session, interaction)
    return inst, sock, session, message_id


def assert_unavailable(r):
    """A 503 temporarily_unavailable that says when to come back, in the body and in Retry-After."""
    assert r.status_code == 503, (r.status_code, r.text)
    error = r.json()["error"]
    assert error["code"] == "temporarily_unavailable", error
    assert isinstance(error.get("retry_after_ms"), int) and error["retry_after_ms"] > 0, error
    assert int(r.headers["Retry-After"]) >= 1, dict(r.headers)


def read_messages(node, inst, session):
    """A read that needs the store on this node (GET /v1/me is cached, and may not reach it)."""
    return node.get("/v1/me/sessions/%s/messages?limit=5" % session, headers=bearer(inst.user))


def assert_recovered(c, inst, session, pump, store, message_id, acked_before):
    """Right after an outage ended: every node serves again within RECOVERY, the deltas that met it
    were refused with 503 and a retry time, and every delta acknowledged is stored exactly once."""
    up_at = time.monotonic()
    for node in c.nodes:
        wait_until(lambda: read_messages(node, inst, session).status_code == 200, RECOVERY,
                   interval=0.2, what="node %d serving again" % node.port)
    assert time.monotonic() - up_at < RECOVERY
    pump.finish()
    assert any(status == 503 for status, _, _ in pump.refusals), (
        "no delta met the outage: %d acknowledged, the last %.2f s before the relay served again"
        % (len(pump.acked), up_at - pump.acked[-1][1]) if pump.acked else "no delta acknowledged")
    for status, body, retry_after in pump.refusals:
        if status == 503:
            assert body["error"]["code"] == "temporarily_unavailable" and body["error"]["retry_after_ms"] > 0, body
            assert retry_after is not None and int(retry_after) >= 1
    text, _ = stored_deltas(store, message_id)
    for i in acked_before:
        assert text.count(pump.texts[i]) == 1, i
    assert_each_delta_once(store, pump)


def log_lines(node, text):
    return [rec for rec in node.log_records() if text in rec.get("msg", "")]


# ---- a node lost ---------------------------------------------------------------------------------

def test_kill9_of_the_node_holding_the_bridge_loses_and_repeats_no_delta(nodes, postgres, redis_bus):
    store = postgres.database()
    c = nodes(2, store, redis_bus.url())
    inst, sock, session, message_id = start_turn(c, store)
    [holder] = node_holding(c, inst.id)
    survivor = [node for node in c.nodes if node is not holder][0]

    pump = DeltaPump(inst, message_id)
    pump.start()
    pump.wait_acked(DELTAS // 3)
    killed_at = time.monotonic()
    holder.kill9()
    acked_before_kill = pump.acked_before(killed_at)
    assert len(acked_before_kill) >= DELTAS // 3

    # The balancer closes the bridge's socket with its node; the bridge connects again through it.
    sock.wait_closed(WAIT)
    again = Socket(c.front, inst.token)
    again.expect_ready(inst.id)
    assert log_lines(survivor, "bridge %s connected" % inst.id), "the bridge came back elsewhere than the survivor"

    pump.finish()
    # The deltas answered before the kill are stored, and no retry of one whose answer the kill lost
    # was stored twice.
    text, keys = stored_deltas(store, message_id)
    for i in acked_before_kill:
        assert text.count(pump.texts[i]) == 1, i
    assert_each_delta_once(store, pump)

    # The relay serves as one through the survivor: health, the update queue, the end of the message.
    wait_until(lambda: inst.health() == "healthy", WAIT, what="healthy on the survivor")
    assert_ok(inst.client("POST", "/v1/me/sessions/%s/cancel" % session, {}))
    assert again.next_update(WAIT)["type"] == "session.cancelled"
    end_and_check(inst, store, pump, session)
    again.close()


# ---- PostgreSQL lost -----------------------------------------------------------------------------

def test_a_postgresql_restart_under_load_loses_nothing_and_recovers_by_itself(nodes, own_postgres, redis_bus):
    store = own_postgres.database()
    c = nodes(2, store, redis_bus.url())
    inst, sock, session, message_id = start_turn(c, store)
    stream = inst.stream()
    pump = DeltaPump(inst, message_id)
    pump.start()
    pump.wait_acked(DELTAS // 4)

    subprocess.run([PG_SH, "down", own_postgres.dir], check=True, capture_output=True, timeout=60)
    down_at = time.monotonic()
    acked_before = pump.acked_before(down_at)
    try:
        # Every node answers what needs the store with 503, at once (no request waits for the database).
        for node in c.nodes:
            started = time.monotonic()
            r = read_messages(node, inst, session)
            assert time.monotonic() - started < 2 * SLOW, "a request waited for the database"
            assert_unavailable(r)
            assert r.json()["error"]["message"] == "the store (PostgreSQL) is unreachable; retry later", r.text
        r = c.front.post("/v1/me/sessions/%s/send" % session, {"text": "while the database is down"},
                         token=inst.user)
        assert_unavailable(r)
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - down_at)))
    finally:
        subprocess.run([PG_SH, "up", own_postgres.dir], check=True, capture_output=True, timeout=60)

    # The relay serves again by itself, on every node, within the reconnection's back-off.
    assert_recovered(c, inst, session, pump, store, message_id, acked_before)

    # The bridge's socket lived through it, and its updates flow again.
    assert_ok(inst.client("POST", "/v1/me/sessions/%s/cancel" % session, {}))
    assert sock.next_update(WAIT)["type"] == "session.cancelled"
    end_and_check(inst, store, pump, session)
    # So did the client's stream, its events' ids without a gap (the bus was never down). A delta that
    # was published but not stored is published again with its retry (docs/api.md, "Durability"):
    # every delta is there in order of first sight, and message_finalized carries the stored text.
    final = stream.wait_for("message_finalized", timeout=WAIT)
    assert final.data["text"] == "".join(pump.texts)
    seen = []
    for e in stream.events:
        if e.name == "message_delta" and e.data["delta"] not in seen:
            seen.append(e.data["delta"])
    assert seen == pump.texts, seen
    ids = [int(e.id) for e in stream.events if e.id is not None]
    assert ids == list(range(ids[0], ids[0] + len(ids))), ids
    stream.close()

    # Each node logged the loss once, with its back-off, and the return once (the attempts between are quiet).
    for node in c.nodes:
        lost = [rec for rec in node.log_records() if rec.get("level") == "warn" and "PostgreSQL" in rec.get("msg", "")
                and ("lost its" in rec["msg"] or "cannot reach" in rec["msg"]) and "back-off" in rec["msg"]]
        back = [rec for rec in node.log_records() if rec.get("level") == "info"
                and "PostgreSQL connection" in rec.get("msg", "") and "is back after" in rec["msg"]]
        assert len(lost) == 1 and len(back) == 1, node.log_text()[-3000:]
        # The sweeps met the outage every second: the store's one warning says it all.
        noise = [rec for rec in node.log_records() if rec.get("level") == "warn" and "sweep" in rec.get("msg", "")]
        assert not noise, noise
    sock.close()


# ---- Redis lost ----------------------------------------------------------------------------------

# The outage grace of the Redis test: how long each node's local shares of the rate buckets keep serving.
# A node counts it from when it lost its connection, which is while redis.sh's stop still waits for
# the server to go (up to a second or more on a loaded machine): the grace leaves room for that.
GRACE = 4.0 * SLOW


def test_a_redis_restart_under_load_loses_nothing_and_recovers_by_itself(nodes, postgres, own_redis):
    store = postgres.database()
    c = nodes(2, store, own_redis.location, "--bus-outage-grace", "%dms" % int(GRACE * 1000))
    inst, sock, session, message_id = start_turn(c, store)
    stream = inst.stream()
    # Enough deltas to stream through the grace and past it, however fast the machine answers: at PACE
    # between two, the pump is still sending two seconds after the grace even if every answer took no
    # time (3 * DELTAS alone ran out before an ASan node's 12 s grace ended on a fast machine).
    pump = DeltaPump(inst, message_id, count=max(3 * DELTAS, int((GRACE + 2.0) / PACE) + DELTAS // 4))
    pump.start()
    pump.wait_acked(DELTAS // 4)

    # Taken before the stop: the nodes lose Redis while it shuts down, and their grace runs from then.
    down_at = time.monotonic()
    own_redis.stop()
    acked_before = pump.acked_before(down_at)
    try:
        # Rate buckets are served from each node's local shares for the grace: requests go on.
        for node in c.nodes:
            started = time.monotonic()
            r = node.get("/v1/me", headers=bearer(inst.user))
            assert time.monotonic() - started < 2 * SLOW, "a request waited for Redis"
            assert_ok(r)
        assert time.monotonic() - down_at < GRACE, "the machine is too slow for this test's grace"
        # Past the grace, every node refuses at once, saying why and when to come back.
        time.sleep(max(0.0, GRACE + 0.3 - (time.monotonic() - down_at)))
        for node in c.nodes:
            started = time.monotonic()
            r = node.get("/v1/me", headers=bearer(inst.user))
            assert time.monotonic() - started < 2 * SLOW, "a request waited for Redis"
            assert_unavailable(r)
            assert r.json()["error"]["message"] == "the event bus (Redis) is unreachable; retry later", r.text
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - down_at)))
    finally:
        own_redis.start()
    # The bridge's deltas were acknowledged through the grace (stored; their events could not be sent).
    assert [i for i, at in pump.acked if down_at + 0.2 < at < down_at + GRACE - 0.2], ("no delta served in the grace", [(round(at - down_at, 2)) for _, at in pump.acked][-40:], pump.refusals[:3])

    assert_recovered(c, inst, session, pump, store, message_id, acked_before)

    # Redis came back empty: the node holding the socket asserts its presence again, and signals reach
    # the socket again (an update queued through the balancer, whichever node takes the call).
    wait_until(lambda: inst.health() == "healthy", RECOVERY, interval=0.2, what="healthy after Redis returned")
    # The stream opened before the outage lived through it. Redis came back empty, so ids start again
    # from its clock: the stream says so with a resync where they jump (never a silent gap), and goes on.
    assert_ok(inst.client("PATCH", "/v1/me/sessions/%s" % session, {"title": "after the outage"}))
    stream.wait_for("session_renamed", lambda d: d.get("title") == "after the outage", timeout=WAIT)
    ids = [(e.name, int(e.id)) for e in stream.events if e.id is not None]
    for (_, before), (name, after) in zip(ids, ids[1:]):
        assert after == before + 1 or (name == "resync" and after > before), ids
    assert [name for name, _ in ids].count("resync") <= 1, ids
    stream.close()
    for _ in range(2):
        assert_ok(inst.client("POST", "/v1/me/sessions/%s/cancel" % session, {}))
        assert sock.next_update(WAIT)["type"] == "session.cancelled"
    end_and_check(inst, store, pump, session)

    # Each node logged the loss of each of its two connections once, with the back-off, and their return.
    for node in c.nodes:
        lost = [rec for rec in log_lines(node, "connection lost") if "back-off" in rec["msg"]]
        assert len(lost) == 2, node.log_text()[-3000:]
        assert len(log_lines(node, "connected again after")) == 2, node.log_text()[-3000:]
    sock.close()


def test_an_update_queued_while_redis_restarts_reaches_the_bridge_on_the_other_node(nodes, postgres, own_redis):
    """A bridge's socket on node A; Redis goes and comes back empty; meanwhile (inside the grace) a user's
    cancel through node B is stored, but B cannot send its signal. Once Redis answers again, B tells the
    installation's topic that signals were missed, and A reads the queue again: the update reaches the socket
    that lived through the outage, without a new signal or a new socket (the soak's lost update)."""
    import copy
    store = postgres.database()
    c = nodes(2, store, own_redis.location, "--bus-outage-grace", "%dms" % int(GRACE * 1000))
    a, b = c.nodes
    user = mint_token(a.data, "alice", store=store)
    inst = Installation(c.front, user)
    on_b = copy.copy(inst)
    on_b.relay = b
    sock = Socket(a, inst.token)
    sock.expect_ready(inst.id)
    session = on_b.create_session()
    assert sock.next_update(WAIT)["type"] == "session.started"

    own_redis.stop()
    try:
        # Inside the grace: stored and answered; its signal cannot go.
        assert_ok(on_b.client("POST", "/v1/me/sessions/%s/cancel" % session, {}))
        wait_until(lambda: "events and signals are dropped" in b.log_text(), WAIT, interval=0.05,
                   what="node B dropping the signal")
    finally:
        own_redis.start()
    update = sock.next_update(WAIT)
    assert update["type"] == "session.cancelled", update
    sock.close()
