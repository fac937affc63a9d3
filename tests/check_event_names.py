#!/usr/bin/env python3
"""Holds every reader of the event catalogue against it (src/common/event_names.h).

relayd cannot publish a name the catalogue lacks (rl_hub_publish and rl_update_append take its
ids). What the compiler cannot see is checked here: docs/api.md documents every name and no other,
and each of our programs that the catalogue says acts on a name does (the web app, the relay
command, relay-bridge), and none acts on a name the catalogue does not have or does not give it.
Run from anywhere: `python3 tests/check_event_names.py [repository root]`; exit 1 with a line per
mismatch.
"""
import glob
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ROW = re.compile(r'X\((\w+),\s*"([a-z_.]+)",\s*([A-Z_ |0]+)\)')


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def catalogue():
    text = read("src/common/event_names.h")
    events_part = text[text.index("#define RL_EVENT_MAP(X)"):text.index("#define RL_UPDATE_MAP(X)")]
    updates_part = text[text.index("#define RL_UPDATE_MAP(X)"):text.index("#define RL_EVENT_ID")]

    def rows(part):
        return {name: (ident, set(re.findall(r"RL_READ_(\w+)", readers))) for ident, name, readers in ROW.findall(part)}

    return rows(events_part), rows(updates_part)


def table_names(doc, header):
    """The names in the first column of the markdown table that starts with header."""
    start = doc.index(header)
    names = set()
    for line in doc[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        names.update(re.findall(r"`([a-z_.]+)`", line.split("|")[1]))
    return names


def web_reads():
    reads = set()
    state = read("web/app/state.js")
    block = state[state.index("const handlers = {"):]
    block = block[:block.index("\n};")]
    reads.update(re.findall(r"^  (\w+): ", block, re.M))
    for path in glob.glob(os.path.join(ROOT, "web/app/*.js")):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        reads.update(re.findall(r"'event:(\w+)'", text))
        # A comparison of an event's name (main.js, e2e.js): only names shaped like events, so that
        # route names ('s', 'files') and error names (err.name) do not count.
        reads.update(n for n in re.findall(r"(?<![.\w])name === '(\w+)'", text) if re.fullmatch(r"[a-z]+(_[a-z]+)+|resync|hello|heartbeat", n))
    return reads


def c_sources(folder):
    text = ""
    for path in sorted(glob.glob(os.path.join(ROOT, folder, "*.c"))):
        with open(path, encoding="utf-8") as f:
            text += f.read()
    return text


def main():
    events, updates = catalogue()
    problems = []
    if not events or not updates:
        problems.append("the catalogue could not be read")

    doc = read("docs/api.md")
    for name in sorted(set(events) | set(updates)):
        if not re.search(r"`%s[` ]" % re.escape(name), doc):
            problems.append("docs/api.md never names `%s`" % name)
    for name in sorted(table_names(doc, "| Event | Data |") - set(events)):
        problems.append("docs/api.md's event table lists `%s`, which the catalogue lacks" % name)
    for name in sorted(table_names(doc, "| `update.type` | `payload` |") - set(updates)):
        problems.append("docs/api.md's update table lists `%s`, which the catalogue lacks" % name)

    web = web_reads()
    for name in sorted(web - set(events)):
        problems.append("web/app acts on the event %s, which the catalogue lacks" % name)
    for name, (_, readers) in sorted(events.items()):
        if ("WEB" in readers) != (name in web):
            problems.append("%s: the catalogue says the web app %s it, web/app %s" % (
                name, "reads" if "WEB" in readers else "ignores", "reads it" if name in web else "does not"))

    cli = set(re.findall(r"\bRL_EV_(\w+)\b", c_sources("src/client")))
    ids = {ident: name for name, (ident, _) in events.items()}
    for ident in sorted(cli - set(ids)):
        problems.append("src/client names RL_EV_%s, which the catalogue lacks" % ident)
    for name, (ident, readers) in sorted(events.items()):
        if ("CLI" in readers) != (ident in cli):
            problems.append("%s: the catalogue says relay %s it, src/client %s" % (
                name, "reads" if "CLI" in readers else "ignores", "reads it" if ident in cli else "does not"))
    if re.search(r'strn?cmp\([^;]*\bevent\b[^;]*, "[a-z_]+"', c_sources("src/client")):
        problems.append("src/client compares an event with a string: use the catalogue's ids")

    bridge_text = c_sources("src/bridge")
    bridge = set(re.findall(r'strcmp\((?:f->)?update_type, "([a-z_.]+)"\)', bridge_text))
    for name in sorted(bridge - set(updates)):
        problems.append("src/bridge acts on the update %s, which the catalogue lacks" % name)
    for name, (_, readers) in sorted(updates.items()):
        if ("BRIDGE" in readers) != (name in bridge):
            problems.append("%s: the catalogue says relay-bridge %s it, src/bridge %s" % (
                name, "reads" if "BRIDGE" in readers else "ignores", "reads it" if name in bridge else "does not"))

    for line in problems:
        print(line)
    print("event catalogue: %d events, %d updates, %d problem(s)" % (len(events), len(updates), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
