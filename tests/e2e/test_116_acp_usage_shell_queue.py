"""relay-bridge with the ACP test agent (tests/e2e/acp_agent.py), issue 36 item 2: a turn's usage and the
agent's usage_update become the agent message's usage; a shell command's output (Claude Code's and Codex's
_meta.terminal_output) reaches the task as partial_result.terminal while the command runs, at most about four
updates a second, and its end with the exit status; a message sent while a turn runs waits for it, and a cancel
of the running turn drops what waits (docs/bridge.md "Usage", "Shell output", "A message sent while a turn
runs")."""
from relaylib import wait_until
from test_50_bridge_support import WAIT
from test_90_bridge_acp import Acp, ordered


def terminal_events(acp, interaction, name="task_progress"):
    return [e for e in acp.events(name, interaction) if "terminal" in (e.get("partial_result") or {})]


def test_usage_and_context_reach_the_message(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        _, replies = acp.turn(session, "usage")
        assert ordered(replies)[-1]["usage"] == {
            "input_tokens": 120, "output_tokens": 30, "cached_tokens": 1000, "total_tokens": 1150,
            "context_used": 42000, "context_size": 200000, "cost": {"amount": 0.25, "currency": "USD"}}, replies
        # the context figures go with the turn they came in: the next one reports only its own tokens
        _, replies = acp.turn(session, "two words")
        assert replies[-1]["usage"] == {"input_tokens": 2, "output_tokens": 3, "total_tokens": 5}, replies
    finally:
        assert acp.close() == 0


def test_shell_output_is_seen_before_the_command_ends(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        init = acp.agent_log("initialize")[0]["params"]
        assert init["clientCapabilities"]["_meta"] == {"terminal_output": True}, init
        session = acp.user.create_session()
        interaction = acp.user.send(session, "shell 2")
        first = acp.stream.wait_for(
            "task_progress", lambda d: d.get("interaction_id") == interaction
            and "first line" in ((d.get("partial_result") or {}).get("terminal") or {}).get("output", ""),
            timeout=WAIT).data
        # seen while the command still runs: the agent has not sent its second line, nor its end
        assert [e["data"] for e in acp.agent_log("shell_output")] == ["first line\n"], acp.agent_log("shell_output")
        assert acp.agent_log("shell_end") == []
        assert first["partial_result"]["terminal"] == {"output": "first line\n"}, first
        assert first["partial_result"]["content"] == [], first  # the terminal block is the terminal, not a block
        task = first["task_id"]
        done = acp.wait_event("task_completed", interaction, task)
        assert done["result"]["terminal"] == {"output": "first line\nsecond line\n", "exit_status": 0}, done
        assert "omitted" not in done["result"], done
        acp.wait_turn(session, interaction)

        # a command that fails: its exit status on the failed task
        interaction = acp.user.send(session, "shell 0.1 3")
        acp.wait_turn(session, interaction)
        failed = [e for e in acp.events("task_failed", interaction)]
        assert len(failed) == 1 and failed[0]["result"]["terminal"]["exit_status"] == 3, failed
        assert failed[0]["result"]["terminal"]["output"] == "first line\nsecond line\n", failed
    finally:
        assert acp.close() == 0


def test_shell_output_is_coalesced_and_the_rest_sent_by_the_timer(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        interaction = acp.user.send(session, "shellburst 40")
        every = "".join("burst %03d\n" % i for i in range(40))
        # the whole burst (0.4 s of chunks 10 ms apart) arrives in an update before the command ends 1.5 s later
        acp.stream.wait_for(
            "task_progress", lambda d: d.get("interaction_id") == interaction
            and ((d.get("partial_result") or {}).get("terminal") or {}).get("output") == every, timeout=WAIT)
        assert acp.agent_log("shell_end") == [], "the output came only with the end"
        acp.wait_turn(session, interaction)
        updates = terminal_events(acp, interaction)
        # 40 chunks in about 0.4 s: at most one update per 250 ms, plus the first and the one the timer sends
        assert 2 <= len(updates) <= 5, [u["partial_result"]["terminal"]["output"][-10:] for u in updates]
    finally:
        assert acp.close() == 0


def test_a_message_sent_while_a_turn_runs_waits_for_it(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        running = acp.user.send(session, "shell 1.5")
        acp.stream.wait_for("task_progress", lambda d: d.get("interaction_id") == running, timeout=WAIT)
        queued = acp.user.send(session, "next one")
        wait_until(lambda: acp.user.replies(session, queued), WAIT, what="the queued turn's placeholder")
        assert [e["text"] for e in acp.agent_log("prompt")] == ["shell 1.5"], acp.agent_log("prompt")
        acp.wait_turn(session, queued)
        assert acp.user.replies(session, queued)[-1]["text"] == "echo: next one"
        assert ordered(acp.user.replies(session, running))[-1]["finish_reason"] == "stop"
        # the second prompt went only once the first one's answer came
        log = acp.agent_log()
        ends = [i for i, e in enumerate(log) if e["event"] == "prompt_end"]
        starts = [i for i, e in enumerate(log) if e["event"] == "prompt"]
        assert starts[1] > ends[0], log
    finally:
        assert acp.close() == 0


def test_a_cancel_drops_the_messages_waiting_behind_the_turn(relay, user_token, tmp_path):
    acp = Acp(relay, user_token, tmp_path)
    try:
        session = acp.user.create_session()
        slow = acp.user.send(session, "slow")
        wait_until(lambda: any(m["text"].startswith("..") for m in acp.user.replies(session, slow)), WAIT,
                   what="dots")
        first, second = acp.user.send(session, "queued one"), acp.user.send(session, "queued two")
        wait_until(lambda: acp.user.replies(session, second), WAIT, what="the queued turns' placeholders")
        acp.user.cancel(session, slow)
        for interaction in (slow, first, second):
            acp.wait_turn(session, interaction)
            assert ordered(acp.user.replies(session, interaction))[-1]["finish_reason"] == "cancelled", interaction
        assert [e["text"] for e in acp.agent_log("prompt")] == ["slow"], acp.agent_log("prompt")
        # the session goes on with the next message
        _, replies = acp.turn(session, "after")
        assert replies[-1]["text"] == "echo: after", replies
    finally:
        assert acp.close() == 0
