"""kill -9 under streaming load, as rounds (issue 39): the bench's durability tool (bench/loadgen/durability.c)
streams whole conversations from many installations and SIGKILLs a relayd at a random moment with writes
in flight; the relayd is started again and `relaybench verify` checks, through the public API, that every
acknowledged write is there once, in order, and that replaying it answers `idempotent: true`.

- Two nodes on PostgreSQL + Redis behind nginx (tests/e2e/cluster.py), 20 rounds: the node holding a
  watching bridge's WebSocket is killed each round; the figures add how long until the bridge is served
  again through the balancer (its socket ready on the other node and a delta acknowledged).
- One node on SQLite with the local bus, 100 rounds.
"""
import time

from bridgelib import WAIT, Installation, Socket, key
from cluster import Cluster
from relaylib import mint_token

import soaklib
from soaklib import RNG, Durability, Report, Rounds, verdict

INSTALLATIONS = 16

KILL_COLUMNS = ["round", "killed", "kill_ms", "acked", "inflight", "checked", "lost", "duplicated", "reordered",
                "not_idempotent"]


def tokens(data, count, store=None):
    return [("soak%d" % i, mint_token(data, "soak%d" % i, store=store)) for i in range(count)]


def clean(row):
    return row["lost"] == row["duplicated"] == row["reordered"] == row["not_idempotent"] == 0 and row["exit"] == 0


def connections(c, installation_id):
    needle = '"bridge %s connected"' % installation_id
    return [node.log_text().count(needle) for node in c.nodes]


def test_kill9_of_a_node_of_two_on_postgresql_and_redis(relayd, postgres, redis_bus, tmp_path):
    store = postgres.database()
    c = Cluster(relayd, tmp_path / "cluster", 2, store, redis_bus.url())
    report = Report("kill9-cluster", "kill -9 of the node holding the bridge, 2 nodes on PostgreSQL + Redis behind nginx",
                    KILL_COLUMNS + ["ws_ready_s", "served_s", "restart_s"])
    try:
        front = "127.0.0.1:%d" % c.front.port
        dur = Durability(tmp_path / "durability", tokens(c.nodes[0].data, INSTALLATIONS, store),
                         "127.0.0.1:%d" % c.nodes[0].port, INSTALLATIONS)
        # The watching bridge: its socket tells which node holds it, its deltas when it is served again.
        watcher = Installation(c.front, mint_token(c.nodes[0].data, "watcher", store=store))
        seen = connections(c, watcher.id)
        sock = Socket(c.front, watcher.token)
        sock.expect_ready(watcher.id)
        session = watcher.create_session()
        interaction, _ = watcher.send(session, "watch")
        message = watcher.open_message(session, interaction)
        acked = []
        rounds = Rounds(20)
        for r in rounds:
            now = connections(c, watcher.id)
            [victim] = [node for node, a, b in zip(c.nodes, seen, now) if b > a]
            seen = now
            kill_ms = RNG.randint(1500, 3000)
            load = dur.start_load(front, victim.proc.pid, r, kill_ms)
            victim.wait_exit(kill_ms / 1000.0 + 10)
            killed_at = time.monotonic()
            sock.wait_closed(WAIT)
            # The bridge connects again through the balancer, as relay-bridge does, until it is ready.
            deadline = killed_at + 30
            while True:
                sock = Socket(c.front, watcher.token)
                try:
                    sock.expect_ready(watcher.id)
                    break
                except AssertionError:
                    assert time.monotonic() < deadline, "the bridge found no node within 30 s"
                    time.sleep(0.05)
            ready_at = time.monotonic()
            text, k = "<%03d>" % r, key()
            while watcher.delta(message, text, idem=k).status_code != 200:
                assert time.monotonic() < deadline, "no delta of the bridge acknowledged within 30 s"
                time.sleep(0.05)
            acked.append(text)
            served_at = time.monotonic()
            figures = Durability.finish_load(load)
            t0 = time.monotonic()
            victim.start()
            restart_s = time.monotonic() - t0
            v = dur.verify(front)
            row = dict(round=r, killed="node%d" % (c.nodes.index(victim) + 1), kill_ms=kill_ms,
                       acked=figures["acknowledged"], inflight=figures["inflight_at_kill"],
                       ws_ready_s=round(ready_at - killed_at, 3), served_s=round(served_at - killed_at, 3),
                       restart_s=round(restart_s, 3), exit=v["exit"], problems=v["problems"], **verdict(v))
            report.add(**row)
        stored = watcher.message(session, message)["text"]
        report.note("%d rounds; the watching bridge's %d deltas, one a round: stored %s"
                    % (rounds.ran, len(acked), "once each, in order" if stored == "".join(acked) else "WRONG: %r" % stored))
        report.note("served_s min / median / max: %s" % soaklib.summary([row["served_s"] for row in report.rows]))
        bad = [row for row in report.rows if not clean(row)]
        assert not bad, bad
        assert stored == "".join(acked), (stored, acked)
        sock.close()
    finally:
        c.stop()


def test_kill9_of_the_sqlite_node(relayd, tmp_path):
    relay = relayd(store="sqlite", bus="local")
    report = Report("kill9-sqlite", "kill -9 of one node on SQLite", KILL_COLUMNS + ["restart_s"])
    dur = Durability(tmp_path / "durability", tokens(relay.data, INSTALLATIONS), "127.0.0.1:%d" % relay.port,
                     INSTALLATIONS, src_base="127.8.0.1")
    rounds = Rounds(100)
    for r in rounds:
        kill_ms = RNG.randint(800, 2000)
        load = dur.start_load("127.0.0.1:%d" % relay.port, relay.proc.pid, r, kill_ms)
        relay.wait_exit(kill_ms / 1000.0 + 10)
        figures = Durability.finish_load(load)
        t0 = time.monotonic()
        relay.start()
        restart_s = time.monotonic() - t0
        v = dur.verify("127.0.0.1:%d" % relay.port)
        report.add(round=r, killed="relayd", kill_ms=kill_ms, acked=figures["acknowledged"],
                   inflight=figures["inflight_at_kill"], restart_s=round(restart_s, 3), exit=v["exit"],
                   problems=v["problems"], **verdict(v))
    report.note("%d rounds; restart_s min / median / max: %s"
                % (rounds.ran, soaklib.summary([row["restart_s"] for row in report.rows])))
    bad = [row for row in report.rows if not clean(row)]
    assert not bad, bad
