#!/usr/bin/env python3
"""A jsonl agent (docs/bridge.md) that asks the user's phone for a capability:
"where am I?" asks for the location, "photo ..." for a photo from the camera;
it answers with what came back (the "capability" line); a message with
attachments is answered with each file's name, type, size and SHA-256 as the
agent reads it (from path, which relay-bridge gives for an encrypted
session's sealed files). Used by test_47_capabilities_jsonl.py and
test_100_e2e_relay_cli.py."""
import hashlib
import json
import sys
import threading

lock = threading.Lock()


def send(**line):
    with lock:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def reply(ids, text):
    send(type="delta", text=text, **ids)
    send(type="end", finish_reason="stop", **ids)


def describe(files):
    out = []
    for f in files:
        if "path" in f:
            with open(f["path"], "rb") as fh:
                data = fh.read()
            out.append("%s %s %d %s" % (f.get("name"), f.get("mime"), len(data), hashlib.sha256(data).hexdigest()))
        else:
            out.append("%s %s no file: %s" % (f.get("name"), f.get("mime"), f.get("error", "a link only")))
    return "; ".join(out)


def main():
    send(type="manifest", agent={"name": "capability-test", "version": "1.0"}, tools=[])
    for raw in sys.stdin:
        msg = json.loads(raw)
        kind = msg.get("type")
        if kind == "message":
            ids = {"session_id": msg["session_id"], "interaction_id": msg["interaction_id"]}
            text = msg["text"]
            if msg.get("attachments"):
                reply(ids, "files: " + describe(msg["attachments"]))
                continue
            capability = "location" if text.startswith("where") else "camera" if text.startswith("photo") else None
            if capability is None:
                reply(ids, "say 'where am I?' or 'photo ...'")
            else:
                send(type="delta", text="asking your phone... ", **ids)
                send(type="capability_request", capability=capability, reason="because you asked: " + text, **ids)
        elif kind == "capability":
            ids = {"session_id": msg["session_id"], "interaction_id": msg["interaction_id"]}
            status = msg["status"]
            if status == "pending":
                continue
            if status == "answered" and "location" in msg:
                where = msg["location"]
                reply(ids, "%s %s: you are at %.3f, %.3f (±%g m)" % (msg["request_id"], status, where["latitude"],
                                                                    where["longitude"], where["accuracy"]))
            elif status == "answered" and "path" in msg["attachments"][0]:
                reply(ids, "%s %s: a photo: %s" % (msg["request_id"], status, describe(msg["attachments"])))
            elif status == "answered":
                photo = msg["attachments"][0]
                reply(ids, "%s %s: a photo of %d bytes (%s) at %s" % (msg["request_id"], status, photo["size"],
                                                                     photo["mime"], photo["url"].split("?")[0]))
            else:
                reply(ids, "%s %s%s" % (msg.get("request_id", "-"), status,
                                        ": " + msg["error"] if "error" in msg else ""))


if __name__ == "__main__":
    main()
