#!/usr/bin/python3
"""A complete small agent for relay-bridge's jsonl protocol (docs/bridge.md).

Run it behind the bridge:

    relay-bridge run --agent 'jsonl:python3 examples/echo_agent.py'
    relay-bridge run --agent 'jsonl:python3 examples/echo_agent.py --delay 0.3'

It declares one tool, answers every message by echoing it word by word (with
--delay SECONDS between words, so that the reply visibly streams and can be
cancelled halfway; 0 by default), and
for a message that starts with "run " asks the user's approval first, shows
the command as a task, and reports the decision it got (allow-once,
allow-always or deny). A cancel stops the turn it names. Python 3 standard
library only.
"""
import argparse
import json
import sys
import threading
import time
import uuid

out_lock = threading.Lock()
word_delay = 0.0  # seconds between two words of a reply: --delay
waiting = {}     # approval_id -> (event, holder dict)
cancelled = set()


def send(**line):
    """Writes one line to the bridge; the bridge reads our stdout."""
    with out_lock:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def turn(msg):
    sid, iid, text = msg["session_id"], msg["interaction_id"], msg.get("text") or ""
    ids = {"session_id": sid, "interaction_id": iid}
    if text.startswith("run "):
        command = text[4:]
        approval_id = "apr_" + uuid.uuid4().hex
        done = threading.Event()
        holder = {}
        waiting[approval_id] = (done, holder)
        send(type="approval_request", approval_id=approval_id, action="exec", title="Run a command",
             message="The echo agent wants to run: " + command, severity="medium", command=command, **ids)
        done.wait(600)
        decision = holder.get("decision", "deny")
        task_id = "task_" + uuid.uuid4().hex[:12]
        send(type="task_start", task_id=task_id, kind="exec", name="shell", args={"command": command},
             status_label="deciding", **ids)
        send(type="task_progress", task_id=task_id, progress_percent=50, status_label="halfway", **ids)
        status = "cancelled" if decision == "deny" else "completed"
        send(type="task_finish", task_id=task_id, status=status, name="shell",
             result={"decision": decision}, **ids)
        send(type="delta", text="decision: " + decision, **ids)
        send(type="end", finish_reason="stop", **ids)
        return
    words = text.split(" ")
    for n, word in enumerate(words):
        if iid in cancelled:
            send(type="end", finish_reason="cancelled", **ids)
            return
        send(type="delta", text=(" " if n else "") + word, **ids)
        if n + 1 < len(words):
            time.sleep(word_delay)
    send(type="end", finish_reason="stop", usage={"input_tokens": len(words), "output_tokens": len(words),
                                                  "model": "echo"}, **ids)


def main():
    global word_delay
    parser = argparse.ArgumentParser(description="The echo agent of relay-bridge's jsonl protocol.")
    parser.add_argument("--delay", type=float, default=0.0, metavar="SECONDS",
                        help="pause between two words of a reply (default 0)")
    word_delay = max(0.0, parser.parse_args().delay)
    send(type="manifest", agent={"name": "echo", "version": "1.0"},
         tools=[{"name": "shell", "description": "runs a shell command"}])
    for raw in sys.stdin:
        msg = json.loads(raw)
        kind = msg.get("type")
        if kind == "message":
            threading.Thread(target=turn, args=(msg,), daemon=True).start()
        elif kind == "cancel":
            cancelled.add(msg.get("interaction_id"))
        elif kind == "approval":
            entry = waiting.pop(msg["approval_id"], None)
            if entry is not None:
                entry[1]["decision"] = msg["decision"]
                entry[0].set()
        elif kind == "approval_expired":
            entry = waiting.pop(msg["approval_id"], None)
            if entry is not None:
                entry[0].set()
        # other types (session_started, and any added later) are ignored


if __name__ == "__main__":
    main()
