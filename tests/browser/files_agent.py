#!/usr/bin/python3
"""The ACP agent of tests/browser/files.test.js, behind relay-bridge's acp: adapter (docs/bridge.md).

Speaks the Agent Client Protocol (JSON-RPC 2.0, one message per line) and
writes files only through the client (fs/write_text_file), in the session's
working folder (the bridge's --cwd), so that relay-bridge reports each one
(notifyToolFile: sealed in an encrypted session, in clear in a plain one). To "files" it writes notes.md,
edits it twice (the whole file once, then one line by a snippet, as Claude
Code's Edit tool sends it), writes todo.txt, logo.png, big.log and link.txt;
each write is a tool call of kind edit carrying its diff and location. The
test then changes some of them on disk (a binary logo, a large log, a link
out of the folder). Anything else is answered "Say files.". Python 3
standard library only.
"""
import json
import os
import sys
import threading
import uuid

OUT = threading.Lock()
PENDING = {}
NEXT = [0]
SESSIONS = {}

NOTES_1 = "".join("line %d of the notes\n" % i for i in range(1, 9))
NOTES_2 = NOTES_1.replace("line 2 of the notes\n", "line 2 of the notes, rewritten\n")
SNIPPET_OLD = "line 7 of the notes"
SNIPPET_NEW = "line 7 of the notes, edited a second time"
NOTES_3 = NOTES_2.replace(SNIPPET_OLD, SNIPPET_NEW)


def write(msg):
    with OUT:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def call(method, params):
    with OUT:
        NEXT[0] += 1
        rid = NEXT[0]
    slot = [threading.Event(), None]
    PENDING[rid] = slot
    write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    slot[0].wait(60)
    return slot[1] or {"error": {"message": "no answer"}}


def update(sid, body):
    write({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": body}})


def say(sid, text):
    update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})


def edit(sid, path, old, new, content):
    """One tool call: announced with its diff, the file written through the client, then completed."""
    tid = "call_" + uuid.uuid4().hex[:8]
    update(sid, {"sessionUpdate": "tool_call", "toolCallId": tid, "title": "Write " + os.path.basename(path),
                 "kind": "edit", "status": "in_progress", "locations": [{"path": path}],
                 "content": [{"type": "diff", "path": path, "oldText": old, "newText": new}]})
    answer = call("fs/write_text_file", {"sessionId": sid, "path": path, "content": content})
    status = "failed" if "error" in answer else "completed"
    update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": tid, "status": status})


def prompt(rid, params):
    sid = params["sessionId"]
    text = " ".join(b.get("text", "") for b in params.get("prompt", []) if b.get("type") == "text").strip()
    if text != "files":
        say(sid, "Say files.")
        write({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
        return
    cwd = SESSIONS.get(sid, os.getcwd())
    notes = os.path.join(cwd, "notes.md")
    say(sid, "Writing the notes.")
    edit(sid, notes, None, NOTES_1, NOTES_1)
    edit(sid, notes, NOTES_1, NOTES_2, NOTES_2)
    edit(sid, notes, SNIPPET_OLD, SNIPPET_NEW, NOTES_3)
    edit(sid, os.path.join(cwd, "todo.txt"), None, "- check the notes\n", "- check the notes\n")
    for name in ("logo.png", "big.log", "link.txt"):
        edit(sid, os.path.join(cwd, name), None, "placeholder\n", "placeholder\n")
    say(sid, "Done: two files and three more.")
    write({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})


def main():
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method = msg.get("method")
        if method is None and msg.get("id") in PENDING:
            slot = PENDING.pop(msg["id"])
            slot[1] = msg
            slot[0].set()
        elif method == "initialize":
            write({"jsonrpc": "2.0", "id": msg["id"], "result": {
                "protocolVersion": 1, "agentCapabilities": {"loadSession": False},
                "agentInfo": {"name": "files-test-agent", "version": "1.0"}, "authMethods": []}})
        elif method == "session/new":
            sid = "sess_" + uuid.uuid4().hex[:16]
            SESSIONS[sid] = msg["params"].get("cwd") or os.getcwd()
            write({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": sid}})
        elif method == "session/prompt":
            threading.Thread(target=prompt, args=(msg["id"], msg["params"]), daemon=True).start()
        elif method == "session/cancel":
            pass
        elif "id" in msg:
            write({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
