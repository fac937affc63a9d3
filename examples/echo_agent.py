#!/usr/bin/python3
"""A complete small agent for relay-bridge's jsonl protocol (docs/bridge.md).

Run it behind the bridge:

    relay-bridge run --agent 'jsonl:python3 examples/echo_agent.py'
    relay-bridge run --agent 'jsonl:python3 examples/echo_agent.py --delay 0.3'

It declares one tool, answers every message by echoing it word by word (with
--delay SECONDS between words, so that the reply visibly streams and can be
cancelled halfway; 0 by default), and for a message that starts with "run "
asks the user's approval first. Approved (allow-once or allow-always), it
runs the command with /bin/sh in its working folder (--workdir, by default
the folder it was started in) as a task whose progress streams the output
and whose result is all of it, as a terminal content block (docs/api.md);
the command gets --run-timeout seconds (10) and --output-cap bytes of output
(65536), and is stopped past either. Denied, it runs nothing. The reply
names the decision it got (allow-once, allow-always or deny) and how the
command ended. A cancel stops the turn it names, a running command
included. Python 3 standard library only.
"""
import argparse
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid

out_lock = threading.Lock()
word_delay = 0.0  # seconds between two words of a reply: --delay
workdir = "."     # where approved commands run: --workdir
run_timeout = 10.0  # seconds an approved command may take: --run-timeout
output_cap = 65536  # bytes of its output shown: --output-cap
RESULT_TAIL = 4096  # bytes of output a task's progress carries: its result has all of it
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
        waiting[approval_id] = (done, holder, iid)
        send(type="approval_request", approval_id=approval_id, action="exec", title="Run a command",
             message="The echo agent wants to run: " + command, severity="medium", command=command, **ids)
        done.wait(600)
        decision = holder.get("decision", "deny")
        if iid in cancelled:
            # Cancelled while it waited (a decision the bridge refused leaves it waiting): nothing runs.
            send(type="delta", text="cancelled: `%s` was not run" % command, **ids)
            send(type="end", finish_reason="cancelled", **ids)
            return
        if decision == "deny":
            # Refused or expired: nothing runs, and the reply says so.
            send(type="delta", text="deny: `%s` was not run" % command, **ids)
            send(type="end", finish_reason="stop", **ids)
            return
        run_approved(command, decision, ids)
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


def terminal(task_id, output, exit_code, truncated=False):
    """The output as docs/api.md's terminal content block, which clients draw as command output."""
    block = {"type": "terminal", "terminal_id": task_id, "output": output, "exit_code": exit_code}
    if truncated:
        block["truncated"] = True
    return {"content": [block]}


def run_approved(command, decision, ids):
    """Runs an approved command as a task whose progress streams its output; the reply says how it ended."""
    task_id = "task_" + uuid.uuid4().hex[:12]
    folder = os.path.abspath(workdir)
    send(type="task_start", task_id=task_id, kind="exec", name="shell", args={"command": command, "cwd": folder},
         status_label="running", **ids)
    # Its own process group, so that a time limit or a cancel stops what it started too.
    proc = subprocess.Popen(["/bin/sh", "-c", command], cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + run_timeout
    shown, stopped, reported = b"", None, 0.0
    while True:
        if ids["interaction_id"] in cancelled:
            stopped = "cancelled"
        elif time.monotonic() >= deadline:
            stopped = "timed out after %g s" % run_timeout
        if stopped:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        if not select.select([proc.stdout], [], [], 0.1)[0]:
            continue
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            break
        if len(shown) + len(chunk) > output_cap:
            chunk = chunk[:output_cap - len(shown)]
            stopped = "output cut at %d bytes" % output_cap
        shown += chunk
        # The output so far, its last lines, at most five times a second: each progress carries all it shows.
        if time.monotonic() - reported >= 0.2:
            reported = time.monotonic()
            send(type="task_progress", task_id=task_id, status_label="running",
                 partial_result=terminal(task_id, tail_text(shown), None), **ids)
        if stopped:
            os.killpg(proc.pid, signal.SIGKILL)
            break
    try:
        # Its output closed, it may still run (a child holding nothing open): the time limit holds.
        status = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        status = proc.wait()
        stopped = stopped or "timed out after %g s" % run_timeout
    proc.stdout.close()
    exit_code = None if stopped else status
    result = terminal(task_id, shown.decode("utf-8", "replace"), exit_code, truncated=bool(stopped)
                      and stopped.startswith("output cut"))
    result["raw_output"] = {"decision": decision, "exit_status": status, "output_bytes": len(shown)}
    said = "%s: ran `%s` in %s" % (decision, command, folder)
    if stopped == "cancelled":
        send(type="task_finish", task_id=task_id, status="cancelled", name="shell", result=result, **ids)
        send(type="delta", text=said + ": cancelled", **ids)
        send(type="end", finish_reason="cancelled", **ids)
        return
    if stopped:
        result["raw_output"]["stopped"] = stopped
        send(type="task_finish", task_id=task_id, status="failed", name="shell", result=result, error=stopped, **ids)
        send(type="delta", text="%s: stopped, %s" % (said, stopped), **ids)
    else:
        send(type="task_finish", task_id=task_id, status="completed" if status == 0 else "failed", name="shell",
             result=result, **ids)
        send(type="delta", text="%s: exit status %d" % (said, status), **ids)
    send(type="end", finish_reason="stop", **ids)


def tail_text(output):
    """The last RESULT_TAIL bytes of output as text, from a line's start when there is one."""
    tail = output[-RESULT_TAIL:]
    if len(tail) < len(output) and b"\n" in tail:
        tail = tail[tail.index(b"\n") + 1:]
    return tail.decode("utf-8", "replace")


def main():
    global word_delay, workdir, run_timeout, output_cap
    parser = argparse.ArgumentParser(description="The echo agent of relay-bridge's jsonl protocol.")
    parser.add_argument("--delay", type=float, default=0.0, metavar="SECONDS",
                        help="pause between two words of a reply (default 0)")
    parser.add_argument("--workdir", default=".", metavar="DIR",
                        help="the folder approved commands run in (default: the current folder)")
    parser.add_argument("--run-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="time an approved command may take before it is stopped (default 10)")
    parser.add_argument("--output-cap", type=int, default=65536, metavar="BYTES",
                        help="output of an approved command shown before it is stopped (default 65536)")
    args = parser.parse_args()
    word_delay = max(0.0, args.delay)
    workdir = args.workdir
    run_timeout = max(0.1, args.run_timeout)
    output_cap = max(1, args.output_cap)
    send(type="manifest", agent={"name": "echo", "version": "1.0"},
         tools=[{"name": "shell", "description": "runs a shell command"}])
    for raw in sys.stdin:
        msg = json.loads(raw)
        kind = msg.get("type")
        if kind == "message":
            threading.Thread(target=turn, args=(msg,), daemon=True).start()
        elif kind == "cancel":
            cancelled.add(msg.get("interaction_id"))
            for approval_id, entry in list(waiting.items()):
                if entry[2] == msg.get("interaction_id"):
                    waiting.pop(approval_id, None)
                    entry[0].set()
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
