#!/usr/bin/python3
"""A jsonl agent (docs/bridge.md) whose turn mixes text, a tool call and an
approval, for the order rule (issue 40, item 6): to any message it writes a
line, runs a read as a task, writes a second line, asks to run `make check`,
and once told writes what it was told. Each text must read below what came
before it. Python 3 standard library only."""
import json
import sys
import threading
import uuid

lock = threading.Lock()
waiting = {}


def send(**line):
    with lock:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def turn(msg):
    ids = {"session_id": msg["session_id"], "interaction_id": msg["interaction_id"]}
    tag = uuid.uuid4().hex[:10]
    send(type="delta", text="First I read the notes.", **ids)
    send(type="task_start", task_id="read_" + tag, kind="read", name="read", status_label="Read notes.md",
         args={"path": "notes.md"}, **ids)
    send(type="task_finish", task_id="read_" + tag, status="completed", name="read",
         result={"content": [{"type": "text", "text": "run make check"}]}, **ids)
    send(type="delta", text="The notes say to run the checks.", **ids)
    approval_id = "apr_" + uuid.uuid4().hex
    done = threading.Event()
    waiting[approval_id] = (done, {})
    send(type="approval_request", approval_id=approval_id, action="exec", title="Run make check",
         message="The agent asks to run make check", command="make check", **ids)
    done.wait(600)
    send(type="delta", text="Told: %s. All checks passed." % waiting[approval_id][1].get("decision", "deny"), **ids)
    send(type="end", finish_reason="stop", **ids)


def main():
    send(type="manifest", agent={"name": "Order agent", "version": "1.0"}, tools=[{"name": "read"}])
    for raw in sys.stdin:
        msg = json.loads(raw)
        if msg.get("type") == "message":
            threading.Thread(target=turn, args=(msg,), daemon=True).start()
        elif msg.get("type") == "approval" and msg["approval_id"] in waiting:
            waiting[msg["approval_id"]][1]["decision"] = msg["decision"]
            waiting[msg["approval_id"]][0].set()


if __name__ == "__main__":
    main()
