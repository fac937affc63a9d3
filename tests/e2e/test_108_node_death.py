"""A dead node's bridges are shown offline within 15 s (docs/operations.md,
"Several nodes"; issue 25). Two nodes on one PostgreSQL database and one Redis
database behind nginx (cluster.py): a bridge on node A, a client's stream on
node B, A killed with kill -9. The presence A held lapses a lease (10 s) after
its last renewal, and B, at its next claim (every fifth of a lease), tells the
user `agent_health_changed` `offline`.

The kill is timed right after a renewal of A landed in Redis (its lease
score moved), the moment that leaves the presence the longest life, and B is
started at two phases of its claims against A's renewals, the quickest and
the slowest, so that the test meets the bound at its worst rather than at a
lucky moment.
"""
import copy
import time

import pytest

from bridgelib import WAIT, Installation, Socket
from cluster import Cluster

# docs/operations.md: "Its bridges are shown offline within 15 s unless they are back sooner."
DOCUMENTED_BOUND = 15.0
LEASES_KEY = "relay:presence:lease"


@pytest.fixture
def two_nodes(relayd, tmp_path, postgres, redis_bus):
    bus = redis_bus.url()
    c = Cluster(relayd, tmp_path / "cluster", 2, postgres.database(), bus)
    yield c, bus, redis_bus
    c.stop()


def on(inst, node):
    other = copy.copy(inst)
    other.relay = node
    return other


def offline_events(stream):
    return [e for e in stream.events if e.name == "agent_health_changed" and e.data["status"] == "offline"]


# How long after a renewal of A node B starts: B's claims then tick that much (plus B's start-up) after A's
# renewals. Near a whole renewal period (2 s), B claims just before the presence lapses and only the next claim
# finds it: the slowest case. Near zero, the quickest.
@pytest.mark.parametrize("phase", [0.2, 1.7])
def test_a_killed_nodes_bridge_is_offline_within_the_documented_15_s(two_nodes, phase):
    c, bus, redis = two_nodes
    a, b = c.nodes
    inst = Installation(c.front, c.front.token("alice"))
    sock = Socket(a, inst.token)
    sock.expect_ready(inst.id)

    def lease_score():
        return redis.cli(bus, "ZSCORE", LEASES_KEY, inst.id).strip()

    def next_renewal():
        first = lease_score()
        assert first != "", "node A holds no presence lease for the bridge"
        deadline = time.monotonic() + WAIT
        while lease_score() == first:
            assert time.monotonic() < deadline, "node A did not renew its presence within %ss" % WAIT
            time.sleep(0.005)

    b.stop_ok()
    next_renewal()
    time.sleep(phase)
    b.start()
    stream = on(inst, b).stream()
    assert on(inst, b).health() == "healthy"

    # Kill A right after its next renewal landed: the presence then lives the longest after the kill.
    next_renewal()
    assert offline_events(stream) == [], stream.events
    killed_at = time.monotonic()
    a.kill9()
    sock.wait_closed(WAIT)

    event = stream.wait_for("agent_health_changed", lambda d: d["status"] == "offline", timeout=DOCUMENTED_BOUND + 10)
    took = time.monotonic() - killed_at
    print("phase %.1f s: offline %.2f s after kill -9" % (phase, took))
    assert event.data["installation_id"] == inst.id, event
    assert took <= DOCUMENTED_BOUND, "offline came %.2f s after the kill, past the documented %.0f s" % (
        took, DOCUMENTED_BOUND)
    assert on(inst, b).health() == "offline"
    # Once: B's later claims find nothing more to say.
    c.wait_claim_rounds(2)
    assert len(offline_events(stream)) == 1, stream.events
    assert "lost with its node" in b.log_text()
    stream.close()


def test_a_lapse_claimed_while_the_cache_still_counts_it_live_is_said_offline_once(two_nodes):
    """The rare lost offline (issue 39): each node's presence cache times a lease from when it heard of the
    renewal, a little later than Redis did; a node whose claim of the lapse came within that delay found its
    cache still saying the bridge was there, said nothing, and nobody else was told of the lapse. Here the
    delay is made long: once A is killed, its presence's lease is moved to the past in Redis, so B's next
    claim (within a renewal period, 2 s) takes the lapse while B's cache still has seconds of the lease to
    go. B must say offline then, once."""
    c, bus, redis = two_nodes
    a, b = c.nodes
    inst = Installation(c.front, c.front.token("ines"))
    sock = Socket(a, inst.token)
    sock.expect_ready(inst.id)
    stream = on(inst, b).stream()
    assert on(inst, b).health() == "healthy"
    a.kill9()
    sock.wait_closed(WAIT)
    killed_at = time.monotonic()
    assert redis.cli(bus, "ZADD", LEASES_KEY, "XX", "CH", "1", inst.id).strip() == "1"
    # Within a claim period and the store's answer, well before B's cache would lapse it by itself (10 s).
    event = stream.wait_for("agent_health_changed", lambda d: d["status"] == "offline", timeout=5)
    took = time.monotonic() - killed_at
    print("offline %.2f s after the kill" % took)
    assert event.data["installation_id"] == inst.id, event
    assert on(inst, b).health() == "offline"
    # Once: later claims (two more rounds of every node) find nothing more to say.
    c.wait_claim_rounds(2)
    assert len(offline_events(stream)) == 1, stream.events
    stream.close()


def test_a_node_that_died_with_many_bridges_has_them_all_claimed_at_once(relayd, redis_bus):
    """A presence script moves at most 100 lapses at a time: a survivor must claim batch after batch at once,
    not 100 every renewal (2 s), or a node that died with 1 000 bridges would have its last ones said offline
    20 s late. The dead node's presences are written into Redis as it would have left them, already lapsed."""
    bus = redis_bus.url()
    relayd("--bus", bus)
    count = 600
    now_ms = int(redis_bus.cli(bus, "TIME").split()[0]) * 1000
    for first in range(0, count, 100):
        args = []
        for i in range(first, first + 100):
            args += ["inst_dead%04d" % i, "%d healthy node_dead/socket%d" % (1000 + i, i)]
        redis_bus.cli(bus, "HSET", "relay:presence", *args)
        scores = []
        for i in range(first, first + 100):
            scores += [str(now_ms - 1000), "inst_dead%04d" % i]
        redis_bus.cli(bus, "ZADD", LEASES_KEY, *scores)
    started = time.monotonic()
    deadline = started + 20
    while int(redis_bus.cli(bus, "ZCARD", LEASES_KEY).strip() or 0) > 0:
        assert time.monotonic() < deadline, "lapses still unclaimed after 20 s"
        time.sleep(0.05)
    took = time.monotonic() - started
    print("%d lapses claimed in %.2f s" % (count, took))
    # The node's next claim (within one renewal period, 2 s) takes them all, not a hundred.
    assert took <= 3.0, "%d lapses took %.2f s to claim" % (count, took)
    assert redis_bus.cli(bus, "HLEN", "relay:presence").strip() == "0"
    assert redis_bus.cli(bus, "HLEN", "relay:presence:lapsed").strip() == "0"
