"""What the protocol authors' reference connectors send (issue 18): their RFC's
finish reasons, severity critical, and a reply that is never ended, which the
relay ends itself when its interaction's follow-up window closes."""

import pytest
import requests

from bridgelib import WAIT, Turn
from relaylib import assert_error, assert_ok, find_error, validation_errors, wait_until

# What each finish reason a bridge may send is stored and shown as (docs/api.md).
FINISH_REASONS = {
    "stop": "stop", "length": "length", "content_filter": "content_filter", "tool_call": "tool_call",
    "error": "error", "cancelled": "cancelled",
    "end_turn": "stop", "max_tokens": "length", "stop_sequence": "stop", "tool_use": "tool_call",
}


@pytest.mark.parametrize("sent", sorted(FINISH_REASONS))
def test_each_finish_reason_ends_the_message_as_what_it_means(relay, user_token, sent):
    t = Turn(relay, user_token)
    inst = t.inst
    mid = inst.open_message(t.session, t.interaction)
    assert_ok(inst.delta(mid, "partial"))
    assert_ok(inst.end(mid, finish_reason=sent))
    finalized = t.stream.wait_for("message_finalized", lambda d: d["message_id"] == mid, timeout=WAIT).data
    assert finalized["finish_reason"] == FINISH_REASONS[sent], finalized
    assert finalized["state"] == "final" and finalized["text"] == "partial", finalized
    stored = inst.message(t.session, mid)
    assert stored["finish_reason"] == FINISH_REASONS[sent] and stored["state"] == "final", stored
    t.close()


def test_an_unknown_finish_reason_is_refused_and_the_message_stays_open(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    inst = t.inst
    mid = inst.open_message(t.session, t.interaction)
    for bad in ("incomplete", "done", 3):
        r = inst.end(mid, finish_reason=bad)
        assert_error(r, 400, "invalid_request")
        assert find_error(validation_errors(r), "finish_reason") is not None, r.text
    assert inst.message(t.session, mid)["state"] == "streaming"
    t.close()


def test_a_critical_approval_round_trips(relay, user_token):
    t = Turn(relay, user_token)
    inst = t.inst
    body, r = inst.request_approval(t.session, t.interaction, severity="critical")
    assert assert_ok(r)["auto_resolved"] is False
    requested = t.stream.wait_for("approval_requested", lambda d: d["approval_id"] == body["approval_id"],
                                  timeout=WAIT).data
    assert requested["severity"] == "critical", requested
    pending = inst.snapshot()["pending_approvals"]
    assert [p["severity"] for p in pending if p["approval_id"] == body["approval_id"]] == ["critical"], pending
    assert_ok(inst.decide(body["approval_id"], "approve"))
    resolved = t.sock.next_update(WAIT)
    assert resolved["type"] == "approval.resolved", resolved
    assert resolved["payload"]["approval_id"] == body["approval_id"]
    assert resolved["payload"]["decision"] == "approve"
    body, r = inst.request_approval(t.session, t.interaction, severity="urgent")
    assert_error(r, 400, "invalid_request")
    t.close()


def test_a_message_left_open_is_ended_by_the_relay_when_its_window_closes(relayd, tmp_path):
    relay = relayd("--followup-window", "3s")
    token = relay.token("alice")
    t = Turn(relay, token)
    inst = t.inst
    mid = inst.open_message(t.session, t.interaction)
    assert_ok(inst.delta(mid, "half a "))
    assert_ok(inst.delta(mid, "reply"))
    # No sendMessageEnd: the agent crashed. The window closes 3 s after the interaction started.
    finalized = t.stream.wait_for("message_finalized", lambda d: d["message_id"] == mid, timeout=10).data
    assert finalized["finish_reason"] == "incomplete", finalized
    assert finalized["text"] == "half a reply" and finalized["state"] == "final", finalized
    assert isinstance(finalized["finalized_at"], int)
    stored = inst.message(t.session, mid)
    assert stored["state"] == "final" and stored["finish_reason"] == "incomplete", stored
    assert stored["text"] == "half a reply"
    # It is over: a late delta or end gets the finalised answer, and a replayed delta still answers idempotent.
    assert_error(inst.delta(mid, "more"), 409, "message_finalized")
    assert_error(inst.end(mid, finish_reason="stop"), 409, "message_finalized")
    # Exactly one finalisation was published.
    assert sum(1 for e in t.events(("message_finalized",)) if e.data["message_id"] == mid) == 1
    t.close()


def _sweeps(relay):
    """The store sweeps a relayd-testclock has finished (relay_sweeps_total on its metrics listener)."""
    text = requests.get("http://127.0.0.1:%d/metrics" % relay.clock_port, timeout=10).text
    return sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("relay_sweeps_total "))


def test_an_ended_message_is_not_touched_by_the_window(relayd):
    relay = relayd("--followup-window", "2s", testclock=True)
    t = Turn(relay, relay.token("alice"))
    inst = t.inst
    mid = inst.open_message(t.session, t.interaction)
    assert_ok(inst.delta(mid, "whole"))
    assert_ok(inst.end(mid, finish_reason="end_turn"))
    t.stream.wait_for("message_finalized", lambda d: d["message_id"] == mid, timeout=WAIT)
    # Past the window, then two rounds of every sweep (the window's end is a sweep's): nothing may change.
    relay.advance_clock(3500)
    start = _sweeps(relay)
    wait_until(lambda: _sweeps(relay) >= start + 2 * 4, WAIT, interval=0.1, what="two rounds of the sweeps")
    stored = inst.message(t.session, mid)
    assert stored["finish_reason"] == "stop", stored
    assert sum(1 for e in t.events(("message_finalized",)) if e.data["message_id"] == mid) == 1
    t.close()
