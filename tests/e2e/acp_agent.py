#!/usr/bin/env python3
"""An Agent Client Protocol agent for the tests, written from the protocol's
public schema (version 1): JSON-RPC 2.0, one message per line, on stdin and
stdout. Python 3 standard library only.

The first word of a prompt picks the scenario, so that a test chooses what
the agent does:

  (anything else)        streams "echo: TEXT" in a few chunks; end_turn, with usage
                         (input tokens: the words, output tokens: one more)
  tools                  text, a read tool call (pending, in_progress with text,
                         completed), more text, an edit tool call carrying a diff,
                         last text
  plan                   a plan of three entries, updated twice, with text between
  think                  thought chunks, then the answer
  mode                   current_mode_update to "code", then text
  commands               a new available_commands_update, then text
  write PATH TEXT        an edit tool call with its diff, a permission request
                         offering all four option kinds; on allow_* the file is
                         written through fs/write_text_file; the reply names the
                         option chosen (or "cancelled")
  run COMMAND            an execute tool call and a permission request; the reply
                         names the option chosen
  twostep                an edit announced with an empty rawInput and a generic
                         title, its input in the next update, then a permission
                         request (as Claude Code does)
  askfirst               a permission request for a command no tool_call announced
                         yet; the tool_call follows (as Codex does)
  big                    a tool call whose input, diff and output are 2 MB each
  slow                   a tool call left in progress, then "." every 50 ms for
                         30 s; honours session/cancel with stopReason cancelled
  crash                  some text, then the process exits (status 3)
  read PATH              fs/read_text_file; the reply is the content or the error
  peek PATH              fs/read_text_file; the reply is only the content's length (a large file)
  unknown                asks the client for a method it does not serve; the
                         reply is the error code
  refuse / maxtokens     stopReason refusal / max_tokens
  whoami                 the reply is the ACP session id
  garbage                writes a line that is not JSON and two invalid requests
                         (the client's error answers are in the log)
  leak MARKER            every field the agent can fill carries MARKER: a thought, a
                         plan, tool calls (titles, a kind of its own, inputs, paths,
                         locations, a diff, output, raw output, an error), a
                         permission request (answered by the user), a file read and
                         a file written in the working folder whose names hold it,
                         ignored updates, the reply and the usage (a model's name)
  leakfail MARKER        writes MARKER on stderr, then answers the prompt with an
                         error whose message and data hold it
  usage                  a usage_update (context 42000 of 200000, cost 0.25 USD), text,
                         end_turn with usage (input 120, output 30, cached 1000, total 1150)
  shell [S] [CODE]       an execute tool call run as Claude Code and Codex run one when
                         the client's _meta.terminal_output is true: terminal content and
                         _meta.terminal_info, then _meta.terminal_output "first line",
                         S seconds (default 1.5) later "second line", then completed
                         (failed when CODE is not 0) with _meta.terminal_exit {exit_code:
                         CODE}; without that capability, the output as text content at the end
  shellburst N           like shell, N output chunks 10 ms apart, then 1.5 s, then completed
  settings               the reply is the session's settings in force:
                         "mode=M model=X effort=E"

Settings (--config): session/new answers configOptions mode (ask, code, plan,
bypassPermissions), model (model-a, model-b) and effort (low, medium, high),
and serves session/set_config_option (a mode change also sends
current_mode_update); without --config it answers the older modes and
models and serves session/set_mode and session/set_model. Every change is
logged ("set_config", "set_mode", "set_model"). --sessions: the
sessionCapabilities list, resume and close are advertised (--no-resume: list
and close only, so a session is continued with session/load); session/list
names the sessions kept in --state whose cwd is the one asked (a file written
there by hand is a session begun at the desk: {"history", "cwd", "title"}).

Sessions are kept in the folder named by --state (or $ACP_AGENT_STATE) so
that a restarted agent can session/load them (their history is replayed as
session/update notifications). With --log FILE (or $ACP_AGENT_LOG) every
message in and out is appended as a JSON line, for the tests to read.
Available commands are advertised after every session/new and session/load.
--no-load: loadSession is not advertised; --auth: authMethods is not empty
and session/new answers -32000 (authentication required); --auth-env VAR:
an "env_var" auth method on VAR is offered and session/new answers -32000
until authenticate with it succeeds (VAR set); --auth-prompt: session/prompt
answers -32000 (as Claude Code without a key); --images: the
prompt capabilities image and embeddedContext are advertised. --fail-new
TEXT: session/new writes three lines on stderr (the last one holds TEXT; with
--fail-new-noise N, N lines of filler before them) and answers -32603 "Internal
error" with data {"details": TEXT}, as claude-agent-acp does when Claude Code
will not start; --fail-new-once: only the first session/new fails so.
"""
import argparse
import json
import os
import sys
import threading
import time
import uuid

PARSER = argparse.ArgumentParser()
PARSER.add_argument("--state", default=os.environ.get("ACP_AGENT_STATE"))
PARSER.add_argument("--log", default=os.environ.get("ACP_AGENT_LOG"))
PARSER.add_argument("--no-load", action="store_true", help="do not advertise loadSession")
PARSER.add_argument("--auth", action="store_true", help="session/new answers auth_required")
PARSER.add_argument("--auth-env", metavar="VAR",
                    help="an env_var auth method on VAR; session/new answers auth_required until authenticate")
PARSER.add_argument("--auth-prompt", action="store_true", help="session/prompt answers auth_required")
PARSER.add_argument("--images", action="store_true", help="advertise promptCapabilities image and embeddedContext")
PARSER.add_argument("--fail-new", metavar="TEXT", help="session/new fails with TEXT in its data and on stderr")
PARSER.add_argument("--fail-new-noise", type=int, default=0, help="lines of stderr filler before the failure's")
PARSER.add_argument("--fail-new-once", action="store_true", help="only the first session/new fails")
PARSER.add_argument("--config", action="store_true", help="session config options instead of modes and models")
PARSER.add_argument("--sessions", action="store_true", help="advertise session/list, resume and close")
PARSER.add_argument("--no-resume", action="store_true", help="with --sessions: no session/resume")
ARGS = PARSER.parse_args()

OUT = threading.Lock()
LOG = threading.Lock()
PENDING = {}  # our request id -> [Event, response]
NEXT_ID = [1000]
SESSIONS = {}  # session id -> {"history": [...], "cancel": Event}
COMMANDS = [
    {"name": "web", "description": "Search the web", "input": {"hint": "what to search for"}},
    {"name": "test", "description": "Run the project's tests"},
]


def log(event, **fields):
    if not ARGS.log:
        return
    fields["event"] = event
    fields["pid"] = os.getpid()
    with LOG, open(ARGS.log, "a") as f:
        f.write(json.dumps(fields) + "\n")


def write(msg):
    log("out", msg=msg)
    with OUT:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def respond(rid, result=None, error=None):
    msg = {"jsonrpc": "2.0", "id": rid}
    if error is not None:
        msg["error"] = error
    else:
        msg["result"] = result
    write(msg)


def call(method, params, timeout=120):
    """A request to the client; returns (result, error)."""
    with OUT:
        NEXT_ID[0] += 1
        rid = NEXT_ID[0]
    slot = [threading.Event(), None]
    PENDING[rid] = slot
    write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    if not slot[0].wait(timeout):
        return None, {"code": 0, "message": "no answer"}
    msg = slot[1]
    return msg.get("result"), msg.get("error")


def update(sid, body):
    write({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": body}})


def say(sid, text):
    update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
    SESSIONS[sid]["history"].append(["agent", text])


# ---- state ---------------------------------------------------------------------------------------

def state_path(sid):
    return os.path.join(ARGS.state, sid + ".json") if ARGS.state else None


def save(sid):
    path = state_path(sid)
    if path:
        with open(path, "w") as f:
            json.dump({"history": SESSIONS[sid]["history"]}, f)


def load(sid):
    path = state_path(sid)
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)["history"]


# ---- scenarios -----------------------------------------------------------------------------------

def tool_call(sid, tid, title, kind, status="pending", **extra):
    body = {"sessionUpdate": "tool_call", "toolCallId": tid, "title": title, "kind": kind, "status": status}
    body.update(extra)
    update(sid, body)


def tool_update(sid, tid, **fields):
    body = {"sessionUpdate": "tool_call_update", "toolCallId": tid}
    body.update(fields)
    update(sid, body)


def text_content(text):
    return [{"type": "content", "content": {"type": "text", "text": text}}]


OPTIONS = [
    {"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject-always", "name": "Always reject", "kind": "reject_always"},
]


def ask(sid, tool):
    result, error = call("session/request_permission", {"sessionId": sid, "toolCall": tool, "options": OPTIONS})
    log("permission", result=result, error=error)
    if error is not None:
        return "error %s" % error.get("code")
    outcome = result["outcome"]
    return outcome["optionId"] if outcome["outcome"] == "selected" else "cancelled"


def scenario_echo(sid, text, words):
    for part in ("echo: ", text[: len(text) // 2], text[len(text) // 2:]):
        say(sid, part)
        time.sleep(0.02)
    # ACP v1's unstable PromptResponse.usage
    return "end_turn", {"inputTokens": len(words), "outputTokens": len(words) + 1, "totalTokens": 2 * len(words) + 1}


def scenario_tools(sid, text, words):
    say(sid, "Looking at the file.")
    time.sleep(0.05)
    tool_call(sid, "call_read", "Read notes.txt", "read", rawInput={"path": "/tmp/notes.txt"},
              locations=[{"path": "/tmp/notes.txt", "line": 3}])
    tool_update(sid, "call_read", status="in_progress", content=text_content("reading..."))
    tool_update(sid, "call_read", status="completed", content=text_content("line one\nline two"),
                rawOutput={"lines": 2})
    say(sid, "Now editing.")
    time.sleep(0.05)
    diff = {"type": "diff", "path": "/tmp/notes.txt", "oldText": "line one\n", "newText": "line 1\n"}
    tool_call(sid, "call_edit", "Edit notes.txt", "edit", rawInput={"file_path": "/tmp/notes.txt"}, content=[diff])
    tool_update(sid, "call_edit", status="completed")
    tool_call(sid, "call_fail", "Run make", "execute", rawInput={"command": "make"})
    tool_update(sid, "call_fail", status="failed", content=text_content("make: no targets"))
    say(sid, "All done.")
    return "end_turn"


def plan(sid, statuses):
    entries = [{"content": "step %d" % (i + 1), "priority": p, "status": s}
               for i, (p, s) in enumerate(zip(("high", "medium", "low"), statuses))]
    update(sid, {"sessionUpdate": "plan", "entries": entries})


def scenario_plan(sid, text, words):
    plan(sid, ["pending", "pending", "pending"])
    say(sid, "Working on it.")
    time.sleep(0.05)
    plan(sid, ["completed", "in_progress", "pending"])
    plan(sid, ["completed", "completed", "completed"])
    say(sid, "Plan finished.")
    return "end_turn"


def scenario_think(sid, text, words):
    for part in ("Let me ", "think about ", "this."):
        update(sid, {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": part}})
        time.sleep(0.02)
    say(sid, "The answer is 42.")
    return "end_turn"


def scenario_mode(sid, text, words):
    update(sid, {"sessionUpdate": "current_mode_update", "currentModeId": "code"})
    say(sid, "mode is code")
    return "end_turn"


def scenario_commands(sid, text, words):
    update(sid, {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS + [
        {"name": "deploy", "description": "Deploy the project", "input": {"hint": "environment"}}]})
    say(sid, "commands updated")
    return "end_turn"


def scenario_write(sid, text, words):
    path, content = words[1], " ".join(words[2:]) + "\n"
    old = None
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    tid = "call_" + uuid.uuid4().hex[:8]
    diff = {"type": "diff", "path": path, "oldText": old, "newText": content}
    tool = {"toolCallId": tid, "title": "Write " + os.path.basename(path), "kind": "edit", "status": "pending",
            "rawInput": {"file_path": path, "content": content}, "content": [diff],
            "locations": [{"path": path}]}
    tool_call(sid, tid, tool["title"], "edit", rawInput=tool["rawInput"], content=[diff], locations=tool["locations"])
    choice = ask(sid, {"toolCallId": tid})
    if choice == "cancelled":
        return "cancelled"
    if choice.startswith("allow"):
        tool_update(sid, tid, status="in_progress")
        result, error = call("fs/write_text_file", {"sessionId": sid, "path": path, "content": content})
        log("fs_write", path=path, result=result, error=error)
        if error is not None:
            tool_update(sid, tid, status="failed", content=text_content("write failed: %s" % error["message"]))
            say(sid, "write failed %s" % error["code"])
            return "end_turn"
        tool_update(sid, tid, status="completed")
        say(sid, "wrote %s (%s)" % (path, choice))
    else:
        tool_update(sid, tid, status="failed", content=text_content("the user refused"))
        say(sid, "not written (%s)" % choice)
    return "end_turn"


def scenario_run(sid, text, words):
    command = " ".join(words[1:])
    tid = "call_" + uuid.uuid4().hex[:8]
    tool_call(sid, tid, "Run " + command, "execute", rawInput={"command": command})
    choice = ask(sid, {"toolCallId": tid, "rawInput": {"command": command}})
    if choice == "cancelled":
        return "cancelled"
    tool_update(sid, tid, status="completed" if choice.startswith("allow") else "failed",
                content=text_content("ran" if choice.startswith("allow") else "refused"))
    say(sid, "outcome: %s" % choice)
    return "end_turn"


def scenario_twostep(sid, text, words):
    """Claude Code's way: the call is announced empty, its input follows in an update; then it asks."""
    tid = "toolu_" + uuid.uuid4().hex[:8]
    path = "/w/fresh.txt"
    tool_call(sid, tid, "Write", "edit", rawInput={}, content=[], locations=[])
    diff = {"type": "diff", "path": path, "oldText": None, "newText": "fresh\n"}
    tool_update(sid, tid, title="Write fresh.txt", kind="edit", rawInput={"file_path": path, "content": "fresh\n"},
                content=[diff], locations=[{"path": path}])
    choice = ask(sid, {"toolCallId": tid, "title": "Write fresh.txt", "rawInput": {"file_path": path}})
    tool_update(sid, tid, status="completed" if choice.startswith("allow") else "failed")
    say(sid, "twostep: %s" % choice)
    return "end_turn"


def scenario_askfirst(sid, text, words):
    """Codex's way for a command: the permission request comes before any tool_call."""
    tid = "exec_" + uuid.uuid4().hex[:8]
    command = ["/bin/bash", "-lc", "make test"]
    choice = ask(sid, {"toolCallId": tid, "title": "make test", "kind": "execute", "status": "pending",
                       "rawInput": {"command": command}, "content": text_content("Proposed: make test")})
    tool_call(sid, tid, "make test", "execute", status="in_progress", rawInput={"command": command})
    tool_update(sid, tid, status="completed", rawOutput={"stdout": "ok", "exit_code": 0})
    say(sid, "askfirst: %s" % choice)
    return "end_turn"


def scenario_big(sid, text, words):
    """A Write of a 2 MB file: its input, its diff and its output are all that large."""
    body = ("x" * 99 + "\n") * 20000
    tool_call(sid, "call_big", "Write big.txt", "edit", rawInput={"file_path": "/w/big.txt", "content": body},
              content=[{"type": "diff", "path": "/w/big.txt", "oldText": body, "newText": body + "end\n"}])
    tool_update(sid, "call_big", status="completed", rawOutput=body, content=text_content(body) * 3)
    say(sid, "big done")
    return "end_turn"


def scenario_slow(sid, text, words):
    cancel = SESSIONS[sid]["cancel"]
    tool_call(sid, "call_slow", "Long job", "execute", status="in_progress", rawInput={"command": "sleep 30"})
    for _ in range(600):
        if cancel.is_set():
            log("cancelled", session=sid)
            return "cancelled"
        say(sid, ".")
        time.sleep(0.05)
    return "end_turn"


def scenario_crash(sid, text, words):
    say(sid, "about to crash")
    time.sleep(0.3)
    log("crash")
    sys.stdout.flush()
    os._exit(3)


def scenario_read(sid, text, words):
    result, error = call("fs/read_text_file", {"sessionId": sid, "path": words[1]})
    log("fs_read", path=words[1], result=result, error=error)
    say(sid, "content: %s" % result["content"] if error is None else "error %s" % error["code"])
    return "end_turn"


def scenario_peek(sid, text, words):
    result, error = call("fs/read_text_file", {"sessionId": sid, "path": words[1]})
    log("fs_read", path=words[1], error=error)
    say(sid, "read %d characters" % len(result["content"]) if error is None else "error %s" % error["code"])
    return "end_turn"


def scenario_unknown(sid, text, words):
    result, error = call("x/not_a_method", {"sessionId": sid})
    log("unknown_answer", result=result, error=error)
    say(sid, "error %s" % (error or {}).get("code"))
    return "end_turn"


def scenario_garbage(sid, text, words):
    """Malformed messages to the client: not JSON, an invalid request with an id, one without jsonrpc."""
    with OUT:
        sys.stdout.write("this is not json\n")
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": "bad-1", "method": 5}) + "\n")
        sys.stdout.write(json.dumps({"id": 77, "method": "fs/read_text_file", "params": {}}) + "\n")
        sys.stdout.flush()
    time.sleep(0.3)
    say(sid, "sent garbage")
    return "end_turn"


def scenario_leak(sid, text, words):
    """Every field an agent can fill, each holding the marker (test_110: none of it may reach relayd in clear)."""
    m = words[1]
    cwd = SESSIONS[sid]["cwd"]
    for part in ("thinking about ", m):
        update(sid, {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": part}})
    update(sid, {"sessionUpdate": "plan", "entries": [
        {"content": "plan step " + m, "priority": "high", "status": "pending"},
        {"content": "second " + m, "priority": "low", "status": "in_progress"}]})
    say(sid, "Starting " + m)
    secret = os.path.join(cwd, m + "-plan-A.txt")
    run = "call_run_" + uuid.uuid4().hex[:8]
    tool_call(sid, run, "Run cat %s" % secret, "execute", rawInput={"command": "cat " + secret, "note": m},
              locations=[{"path": secret, "line": 1}])
    choice = ask(sid, {"toolCallId": run, "title": "Run cat %s (%s)" % (secret, m),
                       "rawInput": {"command": ["/bin/bash", "-lc", "cat " + secret]},
                       "content": text_content("about to read " + m)})
    tool_update(sid, run, status="in_progress", content=text_content("terminal output " + m))
    tool_update(sid, run, status="completed", content=text_content("plan A of " + m),
                rawOutput={"stdout": "out " + m, "exit_code": 0})
    odd = "call_odd_" + uuid.uuid4().hex[:8]
    tool_call(sid, odd, "Odd tool " + m, "kind-" + m, rawInput=m)
    tool_update(sid, odd, status="failed", content=text_content("error: " + m + " went wrong"))
    path = os.path.join(cwd, m + "-notes.txt")
    read = "call_read_" + uuid.uuid4().hex[:8]
    tool_call(sid, read, "Read " + path, "read", rawInput={"file_path": path}, locations=[{"path": path}])
    result, error = call("fs/read_text_file", {"sessionId": sid, "path": path})
    tool_update(sid, read, status="completed", content=text_content((result or {}).get("content", str(error))))
    written = os.path.join(cwd, m + "-out.txt")
    edit = "call_edit_" + uuid.uuid4().hex[:8]
    diff = {"type": "diff", "path": written, "oldText": None, "newText": "new " + m + "\n"}
    tool_call(sid, edit, "Write " + written, "edit", rawInput={"file_path": written, "content": "new " + m},
              content=[diff], locations=[{"path": written}])
    result, error = call("fs/write_text_file", {"sessionId": sid, "path": written, "content": "new " + m + "\n"})
    tool_update(sid, edit, status="completed" if error is None else "failed")
    update(sid, {"sessionUpdate": "session_info_update", "title": "title " + m})
    update(sid, {"sessionUpdate": "usage_update", "used": 10, "size": 100, "model": m})
    say(sid, "Done with %s (%s)" % (m, choice))
    return "end_turn", {"inputTokens": 5, "outputTokens": 7, "model": "model-" + m}


def scenario_leakfail(sid, text, words):
    print("agent trouble: " + words[1], file=sys.stderr, flush=True)
    time.sleep(0.1)
    return {"error": {"code": -32603, "message": "Internal error: " + words[1],
                      "data": {"details": "the model said no to " + words[1]}}}


# ---- usage and shell output (issue 36) ------------------------------------------------------------

CLIENT_CAPABILITIES = [{}]


def scenario_usage(sid, text, words):
    update(sid, {"sessionUpdate": "usage_update", "used": 42000, "size": 200000,
                 "cost": {"amount": 0.25, "currency": "USD"}})
    say(sid, "usage reported")
    return "end_turn", {"inputTokens": 120, "outputTokens": 30, "cachedReadTokens": 1000, "totalTokens": 1150}


def terminal_meta():
    return (CLIENT_CAPABILITIES[0].get("_meta") or {}).get("terminal_output") is True


def shell_run(sid, command, chunks, gaps, code):
    """One command's tool call with its output in chunks, gaps[i] seconds after chunk i, as the adapters send it."""
    tid = "call_shell_" + uuid.uuid4().hex[:8]
    meta = terminal_meta()
    extra = {"content": [{"type": "terminal", "terminalId": tid}],
             "_meta": {"terminal_info": {"terminal_id": tid}}} if meta else {}
    tool_call(sid, tid, "Run " + command, "execute", status="in_progress", rawInput={"command": command}, **extra)
    for chunk, gap in zip(chunks, gaps):
        if meta:
            tool_update(sid, tid, _meta={"terminal_output": {"terminal_id": tid, "data": chunk}})
        log("shell_output", tool=tid, data=chunk)
        time.sleep(gap)
    status = "completed" if code == 0 else "failed"
    if meta:
        tool_update(sid, tid, status=status, _meta={"terminal_exit": {"terminal_id": tid, "exit_code": code,
                                                                      "signal": None}})
    else:
        tool_update(sid, tid, status=status, content=text_content("".join(chunks)))
    log("shell_end", tool=tid)
    return tid


def scenario_shell(sid, text, words):
    pause = float(words[1]) if len(words) > 1 else 1.5
    code = int(words[2]) if len(words) > 2 else 0
    shell_run(sid, "echo first; sleep; echo second", ["first line\n", "second line\n"], [pause, 0.05], code)
    say(sid, "shell done")
    return "end_turn"


def scenario_shellburst(sid, text, words):
    n = int(words[1]) if len(words) > 1 else 40
    chunks = ["burst %03d\n" % i for i in range(n)]
    shell_run(sid, "burst", chunks, [0.01] * (n - 1) + [1.5], 0)
    say(sid, "burst done")
    return "end_turn"


def scenario_whoami(sid, text, words):
    say(sid, "session " + sid)
    return "end_turn"


SCENARIOS = {
    "tools": scenario_tools, "plan": scenario_plan, "think": scenario_think, "mode": scenario_mode,
    "commands": scenario_commands, "write": scenario_write, "run": scenario_run, "slow": scenario_slow,
    "crash": scenario_crash, "read": scenario_read, "peek": scenario_peek, "unknown": scenario_unknown,
    "whoami": scenario_whoami, "garbage": scenario_garbage, "leak": scenario_leak, "leakfail": scenario_leakfail,
    "twostep": scenario_twostep, "askfirst": scenario_askfirst, "big": scenario_big,
    "usage": scenario_usage, "shell": scenario_shell, "shellburst": scenario_shellburst,
    "refuse": lambda sid, text, words: (say(sid, "no."), "refusal")[1],
    "maxtokens": lambda sid, text, words: (say(sid, "too long"), "max_tokens")[1],
}


# ---- methods -------------------------------------------------------------------------------------

def advertise(sid):
    update(sid, {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS})


def on_initialize(rid, params):
    log("initialize", params=params)
    CLIENT_CAPABILITIES[0] = params.get("clientCapabilities") or {}
    respond(rid, {"protocolVersion": 1,
                  "agentCapabilities": {"loadSession": not ARGS.no_load,
                                        "promptCapabilities": {"image": ARGS.images,
                                                               "embeddedContext": ARGS.images},
                                        "sessionCapabilities": session_capabilities()},
                  "agentInfo": {"name": "acp-test-agent", "version": "1.0"},
                  "authMethods": auth_methods()})


AUTHENTICATED = [False]


def auth_methods():
    methods = []
    if ARGS.auth or ARGS.auth_env:
        methods.append({"id": "test-login", "name": "Test login", "description": "run: acp_agent.py login"})
    if ARGS.auth_env:
        methods.append({"type": "env_var", "id": "test-env", "name": "Test key", "vars": [{"name": ARGS.auth_env}]})
    return methods


def on_authenticate(rid, params):
    log("authenticate", params=params)
    if params.get("methodId") == "test-env" and ARGS.auth_env and os.environ.get(ARGS.auth_env):
        AUTHENTICATED[0] = True
        respond(rid, {})
    else:
        respond(rid, error={"code": -32000, "message": "Authentication required"})


FAILED_NEW = [0]


def on_new(rid, params):
    if ARGS.auth or (ARGS.auth_env and not AUTHENTICATED[0]):
        respond(rid, error={"code": -32000, "message": "Authentication required"})
        return
    if ARGS.fail_new and not (ARGS.fail_new_once and FAILED_NEW[0]):
        FAILED_NEW[0] += 1
        for n in range(ARGS.fail_new_noise):
            print("filler line %04d of the agent's stderr, long enough to fill a tail soon" % n, file=sys.stderr)
        print("Error handling request session/new", file=sys.stderr)
        print("  code: -32603, message: 'Internal error'", file=sys.stderr)
        print("  the real reason: " + ARGS.fail_new, file=sys.stderr, flush=True)
        time.sleep(0.1)
        respond(rid, error={"code": -32603, "message": "Internal error", "data": {"details": ARGS.fail_new}})
        return
    sid = "sess_" + uuid.uuid4().hex[:16]
    SESSIONS[sid] = {"history": [], "cancel": threading.Event(), "cwd": params.get("cwd") or os.getcwd()}
    save(sid)
    log("session_new", session=sid, cwd=params.get("cwd"))
    answer = {"sessionId": sid, "modes": {"currentModeId": "ask", "availableModes": [
        {"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]}}
    answer.update(settings_answer(sid))
    respond(rid, answer)
    advertise(sid)


def on_load(rid, params):
    sid = params["sessionId"]
    history = load(sid)
    log("session_load", session=sid, found=history is not None)
    if history is None:
        respond(rid, error={"code": -32002, "message": "unknown session"})
        return
    SESSIONS[sid] = {"history": history, "cancel": threading.Event(), "cwd": params.get("cwd") or os.getcwd()}
    log("session_load_settings", session=sid, settings=settings_answer(sid))
    for role, text in history:
        kind = "user_message_chunk" if role == "user" else "agent_message_chunk"
        update(sid, {"sessionUpdate": kind, "content": {"type": "text", "text": text}})
    respond(rid, settings_answer(sid) or None)
    advertise(sid)


def on_prompt(rid, params):
    sid = params["sessionId"]
    session = SESSIONS.get(sid)
    if session is None:
        respond(rid, error={"code": -32602, "message": "unknown session"})
        return
    if ARGS.auth_prompt:
        respond(rid, error={"code": -32000, "message": "Authentication required"})
        return
    session["cancel"].clear()
    text = " ".join(b.get("text", "") for b in params["prompt"] if b.get("type") == "text")
    blocks = [b for b in params["prompt"] if b.get("type") != "text"]
    log("prompt", session=sid, text=text, blocks=blocks)
    session["history"].append(["user", text])
    words = text.split()
    scenario = SCENARIOS.get(words[0] if words else "", scenario_echo)

    def run():
        stop = scenario(sid, text, words)
        if isinstance(stop, dict):
            log("prompt_end", session=sid, error=stop["error"])
            respond(rid, error=stop["error"])
            return
        result = {"stopReason": stop}
        if isinstance(stop, tuple):
            result = {"stopReason": stop[0], "usage": stop[1]}
        save(sid)
        log("prompt_end", session=sid, stop=result["stopReason"])
        respond(rid, result)
    threading.Thread(target=run, daemon=True).start()


def on_cancel(params):
    log("session_cancel", session=params.get("sessionId"))
    session = SESSIONS.get(params.get("sessionId"))
    if session:
        session["cancel"].set()


# ---- settings and the agent's own sessions (--config, --sessions) --------------------------------

SETTING_VALUES = {
    "mode": [("ask", "Ask"), ("code", "Code"), ("plan", "Plan"), ("bypassPermissions", "Bypass Permissions")],
    "model": [("model-a", "Model A"), ("model-b", "Model B")],
    "effort": [("low", "Low"), ("medium", "Medium"), ("high", "High")],
}
SETTING_CATEGORY = {"mode": "mode", "model": "model", "effort": "thought_level"}


def settings_of(sid):
    return SESSIONS[sid].setdefault("settings", {"mode": "ask", "model": "model-a", "effort": "medium"})


def config_options(sid):
    settings = settings_of(sid)
    return [{"id": key, "name": key.capitalize(), "category": SETTING_CATEGORY[key], "type": "select",
             "currentValue": settings[key],
             "options": [{"value": v, "name": n, "description": "the " + n + " " + key} for v, n in values]}
            for key, values in SETTING_VALUES.items()]


def settings_answer(sid):
    """What session/new, load and resume add to their answer: configOptions, or modes and models."""
    settings = settings_of(sid)
    if ARGS.config:
        return {"configOptions": config_options(sid)}
    return {"modes": {"currentModeId": settings["mode"], "availableModes": [
                {"id": v, "name": n} for v, n in SETTING_VALUES["mode"]]},
            "models": {"currentModelId": settings["model"], "availableModels": [
                {"modelId": v, "name": n} for v, n in SETTING_VALUES["model"]]}}


def session_capabilities():
    if not ARGS.sessions:
        return {}
    caps = {"list": {}, "close": {}}
    if not ARGS.no_resume:
        caps["resume"] = {}
    return caps


def change_setting(rid, sid, key, value, event):
    session = SESSIONS.get(sid)
    log(event, session=sid, key=key, value=value)
    if session is None:
        respond(rid, error={"code": -32602, "message": "unknown session"})
        return False
    if key not in SETTING_VALUES or value not in [v for v, _ in SETTING_VALUES[key]]:
        respond(rid, error={"code": -32602, "message": "Invalid value for config option %s: %s" % (key, value)})
        return False
    settings_of(sid)[key] = value
    return True


def on_set_config_option(rid, params):
    sid = params.get("sessionId")
    if not change_setting(rid, sid, params.get("configId"), params.get("value"), "set_config"):
        return
    if params.get("configId") == "mode":
        update(sid, {"sessionUpdate": "current_mode_update", "currentModeId": params.get("value")})
    respond(rid, {"configOptions": config_options(sid)})


def on_set_mode(rid, params):
    if change_setting(rid, params.get("sessionId"), "mode", params.get("modeId"), "set_mode"):
        respond(rid, {})


def on_set_model(rid, params):
    if change_setting(rid, params.get("sessionId"), "model", params.get("modelId"), "set_model"):
        respond(rid, {})


def scenario_settings(sid, text, words):
    settings = settings_of(sid)
    say(sid, "mode=%s model=%s effort=%s" % (settings["mode"], settings["model"], settings["effort"]))
    return "end_turn"


def kept_sessions():
    """The sessions in --state: (id, document, modification time)."""
    found = []
    for name in sorted(os.listdir(ARGS.state)) if ARGS.state else []:
        if name.endswith(".json"):
            path = os.path.join(ARGS.state, name)
            with open(path) as f:
                found.append((name[:-5], json.load(f), os.path.getmtime(path)))
    return found


def on_list(rid, params):
    cwd = params.get("cwd")
    sessions = []
    for sid, doc, mtime in kept_sessions():
        if cwd and doc.get("cwd", cwd) != cwd:
            continue
        first = next((text for role, text in doc.get("history", []) if role == "user"), "")
        sessions.append({"sessionId": sid, "cwd": doc.get("cwd", cwd), "title": doc.get("title") or first[:40],
                         "updatedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime))})
    log("session_list", cwd=cwd, count=len(sessions))
    respond(rid, {"sessions": sessions})


def on_resume(rid, params):
    sid = params["sessionId"]
    history = load(sid)
    log("session_resume", session=sid, found=history is not None, cwd=params.get("cwd"))
    if history is None:
        respond(rid, error={"code": -32002, "message": "unknown session"})
        return
    SESSIONS[sid] = {"history": history, "cancel": threading.Event(), "cwd": params.get("cwd") or os.getcwd()}
    respond(rid, settings_answer(sid))
    advertise(sid)


def on_close(rid, params):
    sid = params.get("sessionId")
    log("session_close", session=sid, known=sid in SESSIONS)
    SESSIONS.pop(sid, None)
    respond(rid, {})


SCENARIOS["settings"] = scenario_settings

METHODS = {"initialize": on_initialize, "authenticate": on_authenticate, "session/new": on_new, "session/load": on_load, "session/prompt": on_prompt,
           "session/set_config_option": on_set_config_option, "session/set_mode": on_set_mode,
           "session/set_model": on_set_model, "session/list": on_list, "session/resume": on_resume,
           "session/close": on_close}


def main():
    if ARGS.state:
        os.makedirs(ARGS.state, exist_ok=True)
    print("acp test agent started", file=sys.stderr, flush=True)
    for raw in sys.stdin:
        raw = raw.strip()
        if not raw:
            continue
        msg = json.loads(raw)
        log("in", msg=msg)
        if "method" not in msg:
            slot = PENDING.pop(msg.get("id"), None)
            if slot is not None:
                slot[1] = msg
                slot[0].set()
            continue
        if msg["method"] == "session/cancel":
            on_cancel(msg.get("params") or {})
            continue
        handler = METHODS.get(msg["method"])
        if "id" not in msg:
            continue
        if handler is None:
            respond(msg["id"], error={"code": -32601, "message": "Method not found"})
            continue
        handler(msg["id"], msg.get("params") or {})


if __name__ == "__main__":
    main()
