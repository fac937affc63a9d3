#!/usr/bin/python3
"""The agent of the browser tests, behind relay-bridge's jsonl adapter (docs/bridge.md).

- "slow N" streams N numbered words, one every 150 ms (a reply to reload or
  cut in the middle of);
- "run COMMAND" asks the user's approval, shows the command as a tool call
  with progress, and answers with the decision it was given;
- "markdown" answers with every construct the app renders, and some that
  must stay text;
- "table" (or the command "/table") answers with a wide table and a code block;
- "fail ..." runs a build (a shell tool call) that fails, and ends the turn with finish_reason error;
- anything else is echoed back word by word.
Python 3 standard library only.
"""
import json
import sys
import threading
import time
import uuid

lock = threading.Lock()
waiting = {}
cancelled = set()

MARKDOWN = """# Heading

Some **bold**, *italic*, `inline code` and a [link](https://example.org/docs).

- one
- two

```python
print("hello")
```

<script>alert("not run")</script> <img src=x onerror=alert(1)> [bad](javascript:alert(1))
"""


TABLE = """Here are the files:

| Name | Size | Kind | Note |
|:-----|-----:|:----:|------|
| **report.md** | 12 KB | text | the `summary` of the week, with a long note that makes the table wider than a phone |
| data.csv | 1.2 MB | table | [source](https://example.org/data) |
| a \\| b | 3 B | odd | an escaped pipe |

```bash
ls -la /srv/reports && wc -l /srv/reports/*.md | sort -n | tail -n 20
```
"""


def send(**line):
    with lock:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def turn(msg):
    ids = {"session_id": msg["session_id"], "interaction_id": msg["interaction_id"]}
    text = msg.get("text") or ""
    if text.startswith("run "):
        command = text[4:]
        approval_id = "apr_" + uuid.uuid4().hex
        done = threading.Event()
        holder = {}
        waiting[approval_id] = (done, holder)
        send(type="approval_request", approval_id=approval_id, action="exec", title="Run a command",
             message="The test agent wants to run: " + command, severity="high", command=command,
             host="build-box", **ids)
        done.wait(600)
        decision = holder.get("decision", "deny")
        task_id = "task_" + uuid.uuid4().hex[:12]
        send(type="task_start", task_id=task_id, kind="exec", name="shell", args={"command": command},
             status_label="starting", **ids)
        send(type="task_progress", task_id=task_id, progress_percent=50, status_label="halfway", **ids)
        status = "cancelled" if decision == "deny" else "completed"
        send(type="task_finish", task_id=task_id, status=status, name="shell", result={"decision": decision}, **ids)
        send(type="delta", text="decision: " + decision, **ids)
        send(type="end", finish_reason="stop", **ids)
        return
    if text.startswith("slow "):
        words = ["word%d" % i for i in range(1, int(text.split()[1]) + 1)]
        for n, word in enumerate(words):
            if msg["interaction_id"] in cancelled:
                send(type="end", finish_reason="cancelled", **ids)
                return
            send(type="delta", text=(" " if n else "") + word, **ids)
            time.sleep(0.15)
        send(type="end", finish_reason="stop", **ids)
        return
    if text.startswith("fail"):
        task_id = "task_" + uuid.uuid4().hex[:12]
        send(type="task_start", task_id=task_id, kind="exec", name="shell", args={"command": "make"},
             status_label="building", **ids)
        send(type="task_finish", task_id=task_id, status="failed", name="shell", error="make: *** [all] Error 2", **ids)
        send(type="delta", text="The build broke.", **ids)
        send(type="end", finish_reason="error", **ids)
        return
    if text in ("table", "/table"):
        send(type="delta", text=TABLE, **ids)
        send(type="end", finish_reason="stop", **ids)
        return
    if text == "markdown":
        send(type="delta", text=MARKDOWN, **ids)
        send(type="end", finish_reason="stop", **ids)
        return
    for n, word in enumerate(text.split(" ")):
        send(type="delta", text=(" " if n else "") + word, **ids)
    send(type="end", finish_reason="stop", **ids)


def main():
    send(type="manifest", agent={"name": "browser-test", "version": "1.0"},
         tools=[{"name": "shell", "description": "runs a shell command"}],
         commands=[{"name": "table", "description": "Answer with a table and some code"}])
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


if __name__ == "__main__":
    main()
