#!/usr/bin/python3
"""The agent of tests/browser/sealed_cards.test.js, behind relay-bridge's jsonl adapter (docs/bridge.md).

To "cards" it answers with one of everything a chat shows of an agent's work,
the same way in a plain and in an encrypted session (relay-bridge seals what
it must in the second): a plan changed in place, an edit with its arguments,
a progress label, the diff while it runs and again as its result (with a
raw output), a capability request with its reason, an approval of the edit
carrying the diff, a read that fails with an error, a command's output.
To "ask" it asks to run a command before writing anything (the turn's
placeholder stays empty while the approval waits), then says what it was told.
Ids are made fresh per turn (task and approval ids are the installation's).
`--name NAME` is the agent's name in its manifest (an ACP agent's is its npm
package). Python 3 standard library only.
"""
import json
import sys
import threading
import time
import uuid

PATH = "/home/alice/projects/relay-demo/docs/notes.md"
OLD = "".join("line %d of the notes\n" % i for i in range(1, 13))
NEW = OLD.replace("line 6 of the notes\n",
                  "line 6 of the notes, rewritten by the agent so that it is long enough to scroll sideways on a phone\n")
DIFF = {"type": "diff", "path": PATH, "old_text": OLD, "new_text": NEW}
PLAN = [{"content": "Read the notes", "status": "completed", "priority": "medium"},
        {"content": "Rewrite line 6", "status": "in_progress", "priority": "high"},
        {"content": "Run the checks", "status": "pending", "priority": "low"}]

lock = threading.Lock()
waiting = {}


def send(**line):
    with lock:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def wait_for(approval_id):
    done = threading.Event()
    holder = {}
    waiting[approval_id] = (done, holder)
    return lambda: (done.wait(600), holder.get("decision", "deny"))[1]


def turn(msg):
    ids = {"session_id": msg["session_id"], "interaction_id": msg["interaction_id"]}
    if (msg.get("text") or "") == "ask":
        approval_id = "apr_" + uuid.uuid4().hex
        decided = wait_for(approval_id)
        send(type="approval_request", approval_id=approval_id, action="execute", title="Run make check",
             message="The agent asks to run make check", severity="medium", command="make check", **ids)
        send(type="delta", text="Told: %s." % decided(), **ids)
        send(type="end", finish_reason="stop", **ids)
        return
    if (msg.get("text") or "") != "cards":
        send(type="delta", text="Say cards.", **ids)
        send(type="end", finish_reason="stop", **ids)
        return
    tag = uuid.uuid4().hex[:10]
    # Ids that sort (bytewise) in the order the tasks start: relayd lists the tasks of one millisecond by
    # task_id after a reload (docs/api.md "Timeline"), and the plan and the edit start back to back, in
    # one millisecond in one chat and not in the other, as it happens. Named so, the reloaded timelines
    # read the same either way.
    plan, edit, read, run = ("t%s_%d_%s" % (tag, i, k) for i, k in enumerate(("plan", "edit", "read", "run")))
    send(type="delta", text="I will rewrite line 6 of the notes.", **ids)
    send(type="end", finish_reason="tool_call", **ids)
    send(type="task_start", task_id=plan, kind="plan", **ids)
    send(type="task_progress", task_id=plan, partial_result={"entries": PLAN}, **ids)
    send(type="task_start", task_id=edit, kind="edit", status_label="Edit docs/notes.md", args={"file_path": PATH}, **ids)
    send(type="task_progress", task_id=edit, progress_percent=40, status_label="Writing line 6",
         partial_result={"content": [DIFF], "locations": [{"path": PATH}]}, **ids)
    send(type="capability_request", capability="location", reason="to name the nearest office in the notes", **ids)
    approval_id = "apr_" + uuid.uuid4().hex
    decided = wait_for(approval_id)
    send(type="approval_request", approval_id=approval_id, action="edit", title="Edit docs/notes.md",
         message="The agent asks to edit " + PATH, severity="medium", command=PATH, host="build-box",
         tool_call_id=edit, content=[DIFF], **ids)
    decision = decided()
    if decision == "deny":
        send(type="task_finish", task_id=edit, status="failed", error={"message": "The user said no"}, **ids)
    else:
        send(type="task_finish", task_id=edit, status="completed", status_label="Edited docs/notes.md",
             result={"content": [DIFF], "locations": [{"path": PATH}], "raw_output": {"bytes_written": len(NEW)}}, **ids)
    send(type="task_start", task_id=read, kind="read", status_label="Read docs/missing.md",
         args={"file_path": "/home/alice/projects/relay-demo/docs/missing.md"}, **ids)
    send(type="task_finish", task_id=read, status="failed",
         error={"message": "ENOENT: no such file docs/missing.md", "code": -2}, **ids)
    send(type="task_start", task_id=run, kind="execute", status_label="Run the checks", args={"command": "make check"}, **ids)
    send(type="task_finish", task_id=run, status="completed",
         result={"content": [{"type": "text", "text": "```console\nall 12 checks passed\n```"}]}, **ids)
    send(type="task_finish", task_id=plan, status="completed",
         result={"entries": [dict(e, status="completed") for e in PLAN]}, **ids)
    # The closing words a moment after the last task: relay-bridge opens a message and finishes a task on
    # separate requests, and two of one millisecond may be listed either way after a reload (the two chats
    # would then differ by an order that says nothing of what encryption shows).
    time.sleep(0.3)
    send(type="delta", text="Done: %s." % decision, **ids)
    send(type="end", finish_reason="stop", **ids)


COMMANDS = [
    {"name": "review", "description": "Review the changes on this branch against main: every file, every function it "
     "touches, the tests that cover them and the ones that are missing, the documentation that no longer says what "
     "the code does, and a summary of what to fix first, ordered by how much each finding matters to the people "
     "who use this project"},
    {"name": "init", "description": "Create CLAUDE.md"},
    {"name": "compact", "description": "Summarise the conversation so far"},
]


def main():
    name = sys.argv[sys.argv.index("--name") + 1] if "--name" in sys.argv else "Cards agent"
    send(type="manifest", agent={"name": name, "version": "1.0"},
         tools=[{"name": "edit"}, {"name": "read"}, {"name": "execute"}], commands=COMMANDS)
    for raw in sys.stdin:
        msg = json.loads(raw)
        kind = msg.get("type")
        if kind == "message":
            threading.Thread(target=turn, args=(msg,), daemon=True).start()
        elif kind == "approval":
            entry = waiting.pop(msg["approval_id"], None)
            if entry is not None:
                entry[1]["decision"] = msg["decision"]
                entry[0].set()


if __name__ == "__main__":
    main()
