"""Bridge tasks: lifecycle and events, task id length, finished tasks, the manifest."""
from bridgelib import WAIT, Turn, assert_rate_headers
from relaylib import assert_error, assert_ok, find_error, validation_errors

TASK_EVENTS = ("task_created", "task_progress", "task_completed", "task_failed", "task_cancelled")


def test_task_lifecycle_events_carry_the_spec_payloads(relay, user_token):
    t = Turn(relay, user_token)
    inst, s, i = t.inst, t.session, t.interaction

    r = inst.task("createTask", s, i, "toolu_01", kind="http", status_label="fetching",
                  args={"url": "https://example.com", "n": [1, 2]})
    assert assert_ok(r) == {"task_id": "toolu_01"}
    assert_rate_headers(r, "task", 60)
    r = inst.task("updateTask", s, i, "toolu_01", progress_percent=0, status_label="connecting")
    assert assert_ok(r) == {"task_id": "toolu_01"}
    assert_rate_headers(r, "task", 60)
    assert_ok(inst.task("updateTask", s, i, "toolu_01", progress_percent=62.5,
                        partial_result={"bytes": 1024}))
    assert_ok(inst.task("updateTask", s, i, "toolu_01", progress_percent=100))
    r = inst.task("finishTask", s, i, "toolu_01", status="failed", error={"code": "timeout", "after_s": 30})
    assert assert_ok(r) == {"task_id": "toolu_01"}
    assert_rate_headers(r, "task", 60)

    assert_ok(inst.task("createTask", s, i, "toolu_02", kind="exec"))
    assert_ok(inst.task("finishTask", s, i, "toolu_02", status="cancelled", status_label="stopped by user"))
    assert_ok(inst.task("createTask", s, i, "toolu_03", kind="mcp", status_label="thinking"))
    assert_ok(inst.task("finishTask", s, i, "toolu_03", status="completed", name="search",
                        result=["a", "b"]))

    t.stream.wait_for("task_completed", timeout=WAIT)
    events = [(e.name, e.data) for e in t.events(TASK_EVENTS)]
    assert [n for n, _ in events] == ["task_created", "task_progress", "task_progress", "task_progress",
                                      "task_failed", "task_created", "task_cancelled", "task_created",
                                      "task_completed"], events
    # ours (issue 22): every task event also names the task's kind and name, so a card can be drawn from any of them
    route = {"session_id": s, "interaction_id": i}
    created = events[0][1]
    assert created == dict(route, task_id="toolu_01", kind="http", status_label="fetching", name=None,
                           args={"url": "https://example.com", "n": [1, 2]}), created
    p0, p1, p2 = (d for _, d in events[1:4])
    assert p0 == dict(route, task_id="toolu_01", progress_percent=0, status_label="connecting", kind="http",
                      name=None), p0
    assert p1["progress_percent"] == 62.5 and p1["partial_result"] == {"bytes": 1024}, p1
    assert p1["task_id"] == "toolu_01" and p1["session_id"] == s and p1["interaction_id"] == i, p1
    # the label stays what it was last set to
    assert p1["status_label"] == "connecting", p1
    assert p2["progress_percent"] == 100 and "partial_result" not in p2, p2
    failed = events[4][1]
    assert failed["task_id"] == "toolu_01" and failed["error"] == {"code": "timeout", "after_s": 30}, failed
    assert failed["session_id"] == s and failed["interaction_id"] == i and "status_label" in failed, failed
    assert "result" not in failed, failed
    created2 = events[5][1]
    assert created2 == dict(route, task_id="toolu_02", kind="exec", status_label=None, args=None, name=None), created2
    cancelled = events[6][1]
    assert cancelled["task_id"] == "toolu_02" and cancelled["status_label"] == "stopped by user", cancelled
    assert cancelled["session_id"] == s and cancelled["interaction_id"] == i, cancelled
    completed = events[8][1]
    assert completed["task_id"] == "toolu_03" and completed["name"] == "search", completed
    assert completed["result"] == ["a", "b"] and completed["status_label"] == "thinking", completed
    assert completed["session_id"] == s and completed["interaction_id"] == i, completed
    assert "error" not in completed, completed
    t.close()


def test_task_id_up_to_256_characters(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    inst, s, i = t.inst, t.session, t.interaction
    long_id = "t" * 256
    assert assert_ok(inst.task("createTask", s, i, long_id, kind="bash")) == {"task_id": long_id}
    assert_ok(inst.task("updateTask", s, i, long_id, progress_percent=5))
    assert_ok(inst.task("finishTask", s, i, long_id, status="completed"))
    errors = validation_errors(inst.task("createTask", s, i, "t" * 257, kind="bash"))
    assert find_error(errors, "task_id")["code"] == "too_big", errors
    errors = validation_errors(inst.task("updateTask", s, i, "u" * 257, progress_percent=5))
    assert find_error(errors, "task_id")["code"] == "too_big", errors
    t.close()


def test_task_validation(relay, user_token):
    t = Turn(relay, user_token, stream=False)
    inst, s, i = t.inst, t.session, t.interaction
    assert_ok(inst.task("createTask", s, i, "v1", kind="bash"))
    errors = validation_errors(inst.task("createTask", s, i, "v2"))
    assert find_error(errors, "kind")["code"] == "invalid_type", errors
    errors = validation_errors(inst.task("updateTask", s, i, "v1", progress_percent=101))
    assert find_error(errors, "progress_percent")["code"] == "too_big", errors
    errors = validation_errors(inst.task("updateTask", s, i, "v1", progress_percent=-1))
    assert find_error(errors, "progress_percent")["code"] == "too_small", errors
    errors = validation_errors(inst.task("finishTask", s, i, "v1", status="done"))
    assert find_error(errors, "status")["code"] == "invalid_enum_value", errors
    t.close()


def test_finished_task_refuses_updates_and_unknown_task_is_404(relay, user_token):
    t = Turn(relay, user_token)
    inst, s, i = t.inst, t.session, t.interaction
    assert_ok(inst.task("createTask", s, i, "f1", kind="bash"))
    assert_ok(inst.task("finishTask", s, i, "f1", status="completed", result="ok"))
    assert_error(inst.task("updateTask", s, i, "f1", progress_percent=50), 409, "task_finished")
    assert_error(inst.task("updateTask", s, i, "nope", progress_percent=1), 404, "task_not_found")
    assert_error(inst.task("finishTask", s, i, "nope", status="completed"), 404, "task_not_found")
    inst.barrier(t.stream, s)
    assert [e.name for e in t.events(TASK_EVENTS)] == ["task_created", "task_completed"]
    t.close()


def test_second_finish_with_another_outcome_is_409_idempotency_conflict(relay, user_token):
    # spec: the idempotency scope of finishTask is the task id, so a second
    # finish with another body is a conflict (docs/api.md, Tasks).
    t = Turn(relay, user_token)
    inst, s, i = t.inst, t.session, t.interaction
    assert_ok(inst.task("createTask", s, i, "f1", kind="bash"))
    assert_ok(inst.task("finishTask", s, i, "f1", status="completed", result="ok"))
    assert_error(inst.task("finishTask", s, i, "f1", status="failed", error="late"), 409, "idempotency_conflict")
    inst.barrier(t.stream, s)
    assert [e.name for e in t.events(TASK_EVENTS)] == ["task_created", "task_completed"]
    t.close()


def test_manifest_declares_the_tools_task_calls_may_name(relay, user_token):
    t = Turn(relay, user_token)
    inst, s, i = t.inst, t.session, t.interaction
    # no manifest yet: any name goes
    assert_ok(inst.task("createTask", s, i, "m0", kind="bash", name="anything"))
    r = inst.post("setManifest", {"agent": {"name": "claude", "version": "1.2"},
                                  "tools": [{"name": "bash", "description": "runs commands"},
                                            {"name": "read_file"}]})
    assert assert_ok(r) == {"tools": 2}
    assert_rate_headers(r, "default", 30)
    assert_error(inst.task("createTask", s, i, "m1", kind="bash", name="rm_everything"), 422, "tool_not_declared")
    assert_ok(inst.task("createTask", s, i, "m2", kind="bash", name="bash"))
    assert_error(inst.task("finishTask", s, i, "m2", status="completed", name="curl"), 422, "tool_not_declared")
    assert_ok(inst.task("finishTask", s, i, "m2", status="completed", name="read_file"))
    # a refused create left nothing behind
    assert_error(inst.task("updateTask", s, i, "m1", progress_percent=1), 404, "task_not_found")
    event = t.stream.wait_for("task_completed", lambda d: d["task_id"] == "m2", timeout=WAIT)
    assert event.data["name"] == "read_file", event
    created = [e.data["task_id"] for e in t.events(["task_created"])]
    assert created == ["m0", "m2"], created
    t.close()
