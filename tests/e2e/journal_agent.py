#!/usr/bin/env python3
"""A jsonl agent (docs/bridge.md) that writes down every line relay-bridge
gives it, in the order they came, one JSON line each in the file $JOURNAL
({type, session_id, interaction_id, text, files}), and answers each message
at once: "files: ..." (each file's name, type, size and SHA-256 as read from
its path, or why there is none) for a message with attachments, "echo: TEXT"
otherwise. Used by test_104_e2e_sealed_downloads.py."""
import hashlib
import json
import os
import sys


def send(**line):
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def describe(files):
    out = []
    for f in files:
        if "path" in f:
            with open(f["path"], "rb") as fh:
                data = fh.read()
            out.append("%s %s %d %s" % (f.get("name"), f.get("mime"), len(data), hashlib.sha256(data).hexdigest()))
        else:
            out.append("%s no file: %s" % (f.get("name"), f.get("error", "a link only")))
    return "; ".join(out)


def main():
    journal = open(os.environ["JOURNAL"], "a")
    send(type="manifest", agent={"name": "journal-test", "version": "1.0"}, tools=[])
    for raw in sys.stdin:
        msg = json.loads(raw)
        entry = {k: msg.get(k) for k in ("type", "session_id", "interaction_id", "text")}
        if msg.get("attachments"):
            entry["files"] = describe(msg["attachments"])
        journal.write(json.dumps(entry) + "\n")
        journal.flush()
        if msg.get("type") == "message":
            ids = {"session_id": msg["session_id"], "interaction_id": msg["interaction_id"]}
            text = "files: " + entry["files"] if "files" in entry else "echo: " + msg["text"]
            send(type="delta", text=text, **ids)
            send(type="end", finish_reason="stop", **ids)


if __name__ == "__main__":
    main()
