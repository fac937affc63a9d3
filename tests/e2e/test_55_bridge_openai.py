"""relay-bridge run --agent openai:URL against tests/e2e/fake_openai.py."""
from fake_openai import FakeOpenAI
from relaylib import wait_until
from streams import EventStream
from test_50_bridge_support import WAIT, paired


def test_turns_stream_tokens_keep_history_and_report_usage(relay, user_token, tmp_path):
    model = FakeOpenAI()
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start("openai:" + model.url, env={"OPENAI_API_KEY": "sk-test", "OPENAI_MODEL": "fake-model"})
    try:
        session = user.create_session()
        first = user.send(session, "hello")
        reply = user.wait_reply(session, first)
        assert reply["text"] == "echo(1): hello" and reply["finish_reason"] == "stop", reply
        assert reply["usage"] == {"input_tokens": 11, "output_tokens": 7, "model": "fake-model",
                                  "provider": "openai-compatible"}, reply
        second = user.send(session, "again")
        assert user.wait_reply(session, second)["text"] == "echo(3): again"
        body = model.requests[-1]["body"]
        assert body["stream"] is True and body["model"] == "fake-model", body
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"], body
        assert body["messages"][1]["content"] == "echo(1): hello", body
        assert model.requests[-1]["authorization"] == "Bearer sk-test"
        # another session has its own history
        other = user.create_session()
        assert user.wait_reply(other, user.send(other, "x"))["text"] == "echo(1): x"
    finally:
        assert bridge.stop() == 0
        model.close()


def test_tool_calls_become_tasks(relay, user_token, tmp_path):
    model = FakeOpenAI()
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start("openai:%s/v1" % model.url)
    stream = EventStream(relay, user_token)
    try:
        session = user.create_session()
        interaction = user.send(session, 'tool: get_weather {"city": "Paris"}')
        reply = user.wait_reply(session, interaction, ends_as_tool_call=True)
        assert reply["text"] == "calling get_weather" and reply["finish_reason"] == "tool_call", reply
        # the text came before the tool calls: one message, above their tasks
        assert user.shown_texts(session, interaction) == ["calling get_weather"]
        created = stream.wait_for("task_created", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        assert created.data["task_id"] == "call_1" and created.data["kind"] == "tool", created.data
        assert created.data["args"] == {"city": "Paris"}, created.data
        done = stream.wait_for("task_completed", lambda d: d["interaction_id"] == interaction, timeout=WAIT)
        assert done.data["name"] == "get_weather", done.data
    finally:
        stream.close()
        assert bridge.stop() == 0
        model.close()


def test_cancel_aborts_the_request(relay, user_token, tmp_path):
    model = FakeOpenAI()
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start("openai:" + model.url)
    try:
        session = user.create_session()
        interaction = user.send(session, "slow")
        wait_until(lambda: any(m["text"].startswith("...") for m in user.replies(session, interaction)), WAIT,
                   what="tokens")
        user.cancel(session, interaction)
        reply = user.wait_reply(session, interaction)
        assert reply["text"].endswith("[cancelled]") and reply["text"].count(".") < 200, reply
    finally:
        assert bridge.stop() == 0
        model.close()


def test_a_dead_model_server_ends_the_turn_with_an_error_text(relay, user_token, tmp_path):
    model = FakeOpenAI()
    url = model.url
    model.close()
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start("openai:" + url)
    try:
        session = user.create_session()
        interaction = user.send(session, "hello")
        reply = user.wait_reply(session, interaction)
        assert "[the model server failed" in reply["text"] and reply["finish_reason"] == "error", reply
    finally:
        assert bridge.stop() == 0
