"""End-to-end encryption between our relay-bridge and our terminal client (issue 26).

Real relayd, the real relay-bridge running examples/echo_agent.py and the real
`relay`, each with its own config folder (its own device key):

- the bridge registers its device key; the terminal registers its own on first
  use; both show the same four emoji (the bridge as a JSON line on its stdout,
  the terminal in `relay devices confirm`), and only after the terminal confirms
  does the bridge share keys and take its decisions;
- an encrypted session made by `relay new`: a whole turn (message, deltas, a
  task, an approval) streams and reads back in clear in the terminal, while
  relayd holds only envelopes;
- a signed approval reaches the agent; a decision posted straight to the API
  without the signature, or with a forged one, is refused by the bridge (the
  agent is not told);
- a second terminal confirmed then revoked by the first: the first rotates the
  session keys, the revoked one cannot read what comes next;
- afterwards no word of the turns is in relayd's SQLite file, its WAL, its log
  or the Web Push payloads it sent (decrypted by test_18's push service).
"""
import base64
import glob
import json
import os

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from e2elib import blob_key, open_, seal
from relaylib import assert_ok, bearer, paced, wait_until
from test_18_push import PushService, push_relay
from test_50_bridge_support import PYTHON
from test_60_relay_cli import WAIT, Cli
from test_62_relay_chat import start_in_tmux, tmux, wait_screen  # noqa: F401 - tmux is a fixture
from test_63_relay_with_bridge import ECHO_AGENT, pair_real_bridge

# The authors' SAS table (sas-emojis.ts): every emoji either side shows is one of these.
SAS_EMOJI = set("🐱 🐶 🐭 🐹 🐰 🐻 🐼 🐨 🐯 🦁 🐮 🐷 🐸 🦊 🐔 🐺 🍎 🍌 🍇 🍓 🍑 🍒 🥕 🌽 🌙 ⭐ 🌈 🔥 ⚡ 🚀 ⚓ 🎁".split())
LOCKED = "[encrypted: this device has no key for it]"
ACP_AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "acp_agent.py")


def bridge_lines(bridge, event):
    """The JSON lines relay-bridge printed on its stdout (its log file here) for event."""
    out = []
    for line in bridge.log_text().splitlines():
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if doc.get("event") == event:
                out.append(doc)
    return out


def refused(proc):
    """The JSON error a `relay` command printed (stdout or stderr)."""
    for text in (proc.stdout, proc.stderr):
        for line in text.splitlines():
            if line.startswith("{"):
                return json.loads(line)
    raise AssertionError("no JSON error: %r %r" % (proc.stdout, proc.stderr))


def confirm_bridge(cli, bridge, how="code"):
    """Registers cli's device, compares its emoji with the bridge's and confirms, with evidence the relay
    cannot make (issue 34): a code from `relay-bridge devices add` (how="code") or the owner's
    `relay-bridge devices confirm` on the bridge's machine (how="owner"). Returns (device id, sas, bridge device)."""
    devices = cli.json("devices")
    me = devices["this_device_id"]
    bridge_dev = [d for d in devices["devices"] if d["platform"] == "bridge"]
    assert len(bridge_dev) == 1, devices
    bridge_dev = bridge_dev[0]
    assert bridge_dev["confirmed_by_me"] is False
    # Off a terminal, confirm shows the emoji and refuses to go on without --yes.
    proc = cli.run("devices", "confirm", bridge_dev["device_id"])
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    shown = refused(proc)["sas"]
    wait_until(lambda: any(d["device_id"] == me for d in bridge_lines(bridge, "device_pending")), WAIT,
               what="the bridge showing the emoji of %s" % me)
    printed = [d for d in bridge_lines(bridge, "device_pending") if d["device_id"] == me][-1]
    assert printed["sas"] == shown, (printed, shown)
    emoji = shown.split(" ")
    assert len(emoji) == 4 and set(emoji) <= SAS_EMOJI, shown
    # Not confirmed yet: the bridge has not accepted the device.
    assert "device %s (" % me not in bridge.log_text().replace("device %s (%s" % (me, "cli"), ""), bridge.log_text()
    if how == "code":
        done = cli.json("devices", "confirm", bridge_dev["device_id"], "--yes", "--code", bridge.enrol_code())
    else:
        done = cli.json("devices", "confirm", bridge_dev["device_id"], "--yes")
        bridge.wait_log("device_added %s (" % me)
        assert bridge.confirm_device(me) == {"device_id": me, "state": "confirmed"}
    assert done["sas"] == shown
    bridge.wait_log("device %s (" % me)
    bridge.wait_log(" accepted: shared the keys of" if how == "code" else "confirmed on this machine: shared the keys")
    listed = cli.json("devices")
    assert [d["confirmed_by_me"] for d in listed["devices"] if d["platform"] == "bridge"] == [True]
    return me, shown, bridge_dev["device_id"]


def test_sas_confirmation_shows_the_same_emoji_on_both_sides(relay, tmp_path):
    cli = Cli(tmp_path)
    cli.login(relay)
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    bridge.start(ECHO_AGENT)
    try:
        bridge.wait_log("device key registered as")
        key_file = bridge.config / "bridge-device.json"
        assert oct(os.stat(key_file).st_mode & 0o777) == "0o600"
        me, sas, bridge_dev = confirm_bridge(cli, bridge)
        assert oct(os.stat(cli.config / "client-device.json").st_mode & 0o777) == "0o600"
        # The secret keys never leave their files: not in any log line.
        secret = json.load(open(key_file))["secret_key"]
        assert secret not in bridge.log_text()
        assert secret not in open(relay.log_path, errors="replace").read()
    finally:
        assert bridge.stop() == 0


def plaintext_anywhere(relay, words):
    """The words of words found in relayd's store files or its log."""
    found = []
    paths = [relay.log_path]
    # On PostgreSQL (RELAY_TEST_STORE=postgres) every table is read instead of the files.
    paths += glob.glob(os.path.join(str(relay.data), "*.db*")) + glob.glob(os.path.join(str(relay.data), "*.sqlite*"))
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        for w in words:
            if w.encode() in data:
                found.append((os.path.basename(path), w))
    if relay.store and relay.store.startswith("postgres"):
        import psycopg2
        conn = psycopg2.connect(relay.store)
        try:
            cur = conn.cursor()
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
            for (table,) in cur.fetchall():
                cur.execute('SELECT t::text FROM "%s" t' % table)
                text = "\n".join(row[0] for row in cur.fetchall())
                found += [(table, w) for w in words if w in text]
        finally:
            conn.close()
    return found


def test_encrypted_turn_signed_decisions_and_a_revoked_device(relayd, tmp_path):
    relay = push_relay(relayd)
    cli = Cli(tmp_path)
    token = cli.login(relay)
    service = PushService()
    service.vapid_key = assert_ok(relay.get("/v1/web/config"))["push"]["vapid_public_key"]
    phone = service.subscribe("phone")
    assert_ok(relay.post("/v1/me/push-subscriptions", phone.json(), token=token))
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    bridge.start(ECHO_AGENT)
    try:
        bridge.wait_log("device key registered as")
        me, _, bridge_dev = confirm_bridge(cli, bridge)

        made = cli.json("new", "--installation", inst, "--title", "secret plans", "--encrypted")
        ses = made["session_id"]
        assert made["session"]["encrypted"] is True
        bridge.wait_log("session %s: key received from device %s" % (ses, me))

        # A whole turn: deltas of the reply, then (for "run") an approval and a task.
        send = cli.start("send", ses, "hello zebracorn velociraptor")
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        deltas = "".join(line["data"]["delta"] for line in send.events("message_delta"))
        assert deltas == "hello zebracorn velociraptor", send.lines
        assert send.events("done")[0]["data"]["text"] == "hello zebracorn velociraptor"

        # A decision straight to the API: without a signature, then with a forged one. relayd refuses the
        # first (issue 34: it could never verify); it cannot tell the second, which the bridge refuses. The
        # agent is told of neither.
        forgeries = [({"decision": "approve"}, None),
                     ({"decision": "approve", "device_id": me,
                       "decision_sig": "H1i7jZB4Tv2bTAyOLx5A9DMV/YJvbrN9iJGAq/wsJek="}, "decision_sig does not verify")]
        for word, (forged, why) in zip(["quetzalcoatl", "brachiosaurus"], forgeries):
            send = cli.start("send", ses, "run echo " + word)
            asked = send.wait_for("approval_requested")["data"]
            assert asked["command"] == "echo " + word, asked
            assert asked["title"] == "Run a command"
            r = paced(lambda: relay.request("POST", "/v1/me/approvals/%s" % asked["approval_id"], json=forged,
                                            headers=bearer(token)))
            if why is None:
                assert r.status_code == 400 and "decision_sig" in r.text, r.text
            else:
                assert r.status_code == 200, r.text
                bridge.wait_log("approval %s in encrypted session %s: decision refused, the agent is not told: %s"
                                % (asked["approval_id"], ses, why))
            # The turn is cancelled, so that the next send does not show it again; its end, which the bridge
            # sends after whatever the decision made the agent do, is what the check waits for.
            assert send.proc.poll() is None
            assert_ok(paced(lambda: relay.post("/v1/me/sessions/%s/cancel" % ses,
                                               {"interaction_id": asked["interaction_id"]}, token=token)))
            send.finish()
            assert send.events("task_started") == [], send.lines
            # The agent says what it was told: a deny (the approval expired with the cancel) or the cancel itself.
            # (The bridge adds "[cancelled]" to a cancelled reply.)
            said = [e["data"]["text"] for e in send.events("done")]
            assert said in (["deny: `echo %s` was not run" % word],
                            ["cancelled: `echo %s` was not run\n\n[cancelled]" % word]), said

        # Signed by the terminal: the agent runs it, the task's output comes back encrypted and reads in clear.
        send = cli.start("send", ses, "run echo xylophonist")
        asked = send.wait_for("approval_requested")["data"]
        decided = cli.json("approve", asked["approval_id"])
        assert decided["decision"] == "approve"
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        ran = send.events("done")[0]["data"]["text"]
        assert ran.startswith("allow-once: ran `echo xylophonist`"), ran
        listing = send.events("task_completed")[0]["data"]["result"]["content"][0]
        assert "xylophonist" in listing["output"], listing

        history = cli.json("history", ses)
        texts = [m["text"] for m in history["messages"]]
        assert "hello zebracorn velociraptor" in texts and any("xylophonist" in t for t in texts), texts
        approvals = [i["approval"] for i in history["items"] if i["type"] == "approval"]
        assert {a.get("command") for a in approvals} >= {"echo quetzalcoatl", "echo brachiosaurus",
                                                         "echo xylophonist"}, approvals

        # What relayd serves is ciphertext: the same history, raw.
        raw = relay.request("GET", "/v1/me/sessions/%s/messages" % ses, headers=bearer(token)).json()
        assert "zebracorn" not in json.dumps(raw)
        assert any(m.get("text_ct") for m in raw["result"]["messages"]), raw

        # A second terminal, confirmed, reads the session (the bridge shares its keys with it) ...
        other = Cli(tmp_path / "second")
        other.json("login", "--server", relay.url(""), "--token", token)
        second, _, _ = confirm_bridge(other, bridge)
        bridge.wait_log("device %s (" % second)
        wait_until(lambda: "hello zebracorn velociraptor" in
                   [m["text"] for m in other.json("history", ses)["messages"]], WAIT,
                   what="the second terminal reading the session")

        # ... until the first revokes it: new keys for the session, the revoked one reads nothing new.
        revoked = cli.json("devices", "revoke", second)
        assert revoked["rotated_sessions"] == 1, revoked
        bridge.wait_log("device %s revoked" % second)
        bridge.wait_log("session %s: key received from device %s" % (ses, me), count=2)
        send = cli.start("send", ses, "after the revoke: pterodactyl")
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        assert cli.json("history", ses)["messages"][-1]["text"] == "after the revoke: pterodactyl"
        texts = [m["text"] for m in other.json("history", ses)["messages"]]
        assert not any("pterodactyl" in t for t in texts), texts
        # It still gets the envelopes (the same user's token), and opens none of the new ones.
        assert texts[-2:] == [LOCKED, LOCKED], texts
        assert "hello zebracorn velociraptor" in texts
        # Old messages stay readable by the first terminal, with the older key.
        assert "hello zebracorn velociraptor" in [m["text"] for m in cli.json("history", ses)["messages"]]

        # No stream open: the reply is pushed, as ciphertext only.
        with open(cli.config / "client-session-keys.json") as f:
            key = bytes.fromhex(json.load(f)["sessions"][ses][0])
        pushed = len(phone.messages)
        # (The terminal's sends just before share the bucket: a 429 is waited out, as the terminal does.)
        sealed = seal(key, "messages/" + ses, "unwatched archaeopteryx")
        assert_ok(paced(lambda: relay.post("/v1/me/sessions/%s/send" % ses, {"text_ct": sealed}, token=token)))
        wait_until(lambda: len(phone.messages) > pushed and any(m.get("message_id") for m in phone.messages[pushed:]),
                   WAIT, what="the push of the unwatched reply")
        assert service.failures == []
        assert [m for m in phone.messages if m.get("kind") == "approval"], phone.messages
    finally:
        assert bridge.stop() == 0
        service.close()
    # Nothing of the turns in clear at relayd: store, WAL, log, push payloads.
    words = ["zebracorn", "velociraptor", "quetzalcoatl", "brachiosaurus", "xylophonist", "pterodactyl", "archaeopteryx",
             "secret plans", "Run a command"]
    assert plaintext_anywhere(relay, words) == []
    pushed = json.dumps(phone.messages, ensure_ascii=False)
    assert [w for w in words if w in pushed] == [], pushed


def test_on_a_terminal_confirm_asks_and_chat_signs_its_one_key_answers(relay, tmp_path, tmux):
    cli = Cli(tmp_path)
    cli.login(relay)
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    bridge.start(ECHO_AGENT)
    try:
        bridge.wait_log("device key registered as")
        devices = cli.json("devices")
        me = devices["this_device_id"]
        bridge_dev = [d for d in devices["devices"] if d["platform"] == "bridge"][0]["device_id"]
        wait_until(lambda: any(d["device_id"] == me for d in bridge_lines(bridge, "device_pending")), WAIT,
                   what="the bridge showing the emoji")
        sas = [d for d in bridge_lines(bridge, "device_pending") if d["device_id"] == me][-1]["sas"]

        # On a terminal, confirm shows the emoji the bridge must show and asks; "n" confirms nothing.
        start_in_tmux(tmux, cli, ["devices", "confirm", bridge_dev])
        shown = wait_screen(tmux, "[y/N]")
        assert "must show: " + sas in shown, (shown, sas)
        tmux("send-keys", "-t", "chat", "n", "Enter")
        wait_screen(tmux, "relay exited with status 1")
        assert [d["confirmed_by_me"] for d in cli.json("devices")["devices"] if d["platform"] == "bridge"] == [False]
        tmux("kill-session", "-t", "chat")
        start_in_tmux(tmux, cli, ["devices", "confirm", bridge_dev])
        wait_screen(tmux, "[y/N]")
        tmux("send-keys", "-t", "chat", "y", "Enter")
        # Without a code the bridge waits for its owner, and the terminal says how (issue 34).
        shown = wait_screen(tmux, "relay exited with status 0")
        assert "relay-bridge devices confirm %s" % me in shown, shown
        bridge.wait_log("device_added %s (" % me)
        assert " accepted: shared the keys" not in bridge.log_text()
        bridge.confirm_device(me)
        bridge.wait_log("device %s confirmed on this machine: shared the keys" % me)
        tmux("kill-session", "-t", "chat")

        ses = cli.json("new", "--installation", inst, "--encrypted")["session_id"]
        bridge.wait_log("session %s: key received" % ses)
        # chat: the approval shows its sealed command in clear, one key answers it, signed.
        start_in_tmux(tmux, cli, ["chat", ses])
        wait_screen(tmux, "you>")
        tmux("send-keys", "-t", "chat", "run echo ornithopter", "Enter")
        shown = wait_screen(tmux, "answer>")
        assert "echo ornithopter" in shown, shown
        tmux("send-keys", "-t", "chat", "o")
        shown = wait_screen(tmux, "allow-once: ran `echo ornithopter`")
        assert "decision refused" not in bridge.log_text()
        tmux("send-keys", "-t", "chat", "/quit", "Enter")
        wait_screen(tmux, "relay exited with status 0")
    finally:
        assert bridge.stop() == 0
    assert plaintext_anywhere(relay, ["ornithopter"]) == []


def test_files_the_agent_read_open_on_the_device_only(relay, tmp_path):
    """An acp agent reads a file in an encrypted session: the relay lists it by blind index with its path
    sealed, fetches it from the bridge (file.read.req) sealed, and cannot read either; the bridge also said
    hello (its version) and answers models.list.req."""
    cli = Cli(tmp_path)
    token = cli.login(relay)
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("the treasure is under the gazebo\n")
    (tmp_path / "outside.txt").write_text("not the agent's\n")
    agent = "acp:%s %s --state %s --log %s" % (PYTHON, ACP_AGENT, tmp_path / "agent-state", tmp_path / "agent.log")
    bridge.start(agent, "--cwd", str(work))
    try:
        bridge.wait_log("device key registered as")
        confirm_bridge(cli, bridge)
        ses = cli.json("new", "--installation", inst, "--encrypted")["session_id"]
        bridge.wait_log("session %s: key received" % ses)
        send = cli.start("send", ses, "read %s" % (work / "notes.txt"))
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        assert "gazebo" in send.events("done")[0]["data"]["text"]

        with open(cli.config / "client-session-keys.json") as f:
            key = bytes.fromhex(json.load(f)["sessions"][ses][0])
        files = wait_until(lambda: assert_ok(relay.get("/v1/me/sessions/%s/files" % ses, headers=bearer(token)))["files"],
                           WAIT, what="the file the agent read")
        assert len(files) == 1 and files[0]["tool"] == "read", files
        idx = files[0]["path_blind_idx"]
        blob = "agent_files/%s/%s" % (ses, idx)
        assert open_(key, blob, files[0]["path_ct"]) == os.path.realpath(str(work / "notes.txt"))
        assert open_(key, blob, files[0]["display_name_ct"]) == "notes.txt"
        got = assert_ok(relay.get("/v1/me/sessions/%s/files/%s" % (ses, idx), headers=bearer(token)))
        assert got["encrypted"] is True and got["size_bytes"] == len("the treasure is under the gazebo\n"), got
        raw = base64.b64decode(got["base64"])
        assert raw[0] == 1
        assert AESGCM(blob_key(key, blob)).decrypt(raw[1:13], raw[13:], None) == b"the treasure is under the gazebo\n"

        assert assert_ok(relay.get("/v1/me/installations/%s/models" % inst, headers=bearer(token)))["models"] == []
        me = assert_ok(relay.get("/v1/me", headers=bearer(token)))
        version = bridge.command("version").stdout.split()[-1]
        assert [i.get("bridge_version") for i in me["installations"] if i["id"] == inst] == [version]
    finally:
        assert bridge.stop() == 0
    assert plaintext_anywhere(relay, ["treasure", "gazebo", "notes.txt"]) == []


CAPABILITY_AGENT = "jsonl:%s %s" % (PYTHON, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                        "capability_agent.py"))


def _agent_reply(cli, ses, start, what):
    """The text of the agent's reply in ses that starts with start (read, opened, by the terminal)."""
    found = []

    def seen():
        found[:] = [m["text"] for m in cli.json("history", ses)["messages"]
                    if m["role"] == "agent" and start in m.get("text", "")]
        return found
    # Each look is a `relay history` (a few GETs): at 0.1 s a slow machine spent the user's bucket
    # (10 a second, burst 30) and the terminal got a 429; at 0.5 s a loaded one left the test's next
    # request a 429. One look a second stays well inside the refill.
    wait_until(seen, WAIT, interval=1.0, what=what)
    return found[-1]


def test_encrypted_capability_and_attachments_through_the_real_bridge(relay, tmp_path):
    """Gaps of issue 26 closed (docs/api.md "Device capabilities", "Encrypted sessions"): the
    agent's reason and the user's location travel sealed between the terminal and the real
    relay-bridge; a sealed attachment and a sealed photo reach the agent intact; relayd's store,
    WAL, log and attachments folder hold none of the words, numbers or bytes."""
    import hashlib
    from e2elib import seal_bytes
    cli = Cli(tmp_path)
    token = cli.login(relay)
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    bridge.start(CAPABILITY_AGENT)
    try:
        bridge.wait_log("device key registered as")
        me, _, _ = confirm_bridge(cli, bridge)
        ses = cli.json("new", "--installation", inst, "--encrypted")["session_id"]
        bridge.wait_log("session %s: key received from device %s" % (ses, me))

        # The reason reads in clear in the terminal; the location goes sealed; the agent gets it.
        send = cli.start("send", ses, "where am I? near the okapisanctuary")
        asked = send.wait_for("device_capability_request")["data"]
        assert asked["reason"] == "because you asked: where am I? near the okapisanctuary", asked
        assert "reason_ct" not in asked, asked
        listed = cli.json("capabilities")["pending_capability_requests"]
        assert [p["reason"] for p in listed] == [asked["reason"]], listed
        done = cli.json("capability", "location", asked["request_id"], "48.858421,2.294481,7")
        assert done["status"] == "answered", done
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        assert "you are at 48.858, 2.294 (±7 m)" in send.events("done")[0]["data"]["text"], send.lines

        with open(cli.config / "client-session-keys.json") as f:
            key = bytes.fromhex(json.load(f)["sessions"][ses][0])

        # The test's own calls share the user's bucket with the real terminal it drives: paced as a client would.
        def upload(data):
            sealed = seal_bytes(key, "attachments/" + ses, data)
            r = paced(lambda: relay.request("POST", "/v1/me/attachments", data=sealed,
                                            headers=dict(bearer(token), **{"Content-Type": "application/octet-stream"})))
            return assert_ok(r)["key"]

        def meta(name, mime, data):
            return {"name": name, "mime": mime, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}

        # A sealed attachment: the agent reads the very bytes, under their real name and type.
        notes = b"okapi field notes: the wombatcartographer was here\n" * 40
        item = {"key": upload(notes), "meta_ct": seal(key, "attachments/" + ses,
                                                      json.dumps(meta("okapi-notes.txt", "text/plain", notes)))}
        body = {"text_ct": seal(key, "messages/" + ses, "read this"), "attachments": [item]}
        assert_ok(paced(lambda: relay.post("/v1/me/sessions/%s/send" % ses, body, token=token)))
        reply = _agent_reply(cli, ses, "files:", "the agent's reading of the attachment")
        assert reply == "files: okapi-notes.txt text/plain %d %s" % (len(notes), hashlib.sha256(notes).hexdigest())

        # A bad sealed file (bytes that are not what meta_ct names): the agent gets no file, and says so.
        item = {"key": upload(b"other bytes"), "meta_ct": seal(key, "attachments/" + ses,
                                                               json.dumps(meta("x.txt", "text/plain", notes)))}
        body = {"text_ct": seal(key, "messages/" + ses, "and this"), "attachments": [item]}
        assert_ok(paced(lambda: relay.post("/v1/me/sessions/%s/send" % ses, body, token=token)))
        reply = _agent_reply(cli, ses, "no file", "the agent told of an unreadable attachment")
        assert reply == "files: None application/octet-stream no file: unreadable", reply

        # A photo for a camera request: its bytes sealed, its name and type in answer_ct.
        send = cli.start("send", ses, "photo of the okapi")
        asked = send.wait_for("device_capability_request")["data"]
        photo = b"\x89PNG\r\n\x1a\n" + b"okapi-photo-pixels" * 30
        answer = seal(key, "capabilities/" + ses, json.dumps({"attachment": meta("okapi.png", "image/png", photo)}))
        body = {"attachment_key": upload(photo), "answer_ct": answer}
        assert_ok(paced(lambda: relay.post("/v1/me/capabilities/%s" % asked["request_id"], body, token=token)))
        assert send.finish() == 0, (send.lines, "".join(send.stderr))
        assert send.events("done")[0]["data"]["text"].endswith(
            "a photo: okapi.png image/png %d %s" % (len(photo), hashlib.sha256(photo).hexdigest())), send.lines
    finally:
        assert bridge.stop() == 0
    words = ["okapisanctuary", "48.858421", "2.294481", "wombatcartographer", "okapi-notes", "okapi-photo-pixels",
             "okapi.png"]
    assert plaintext_anywhere(relay, words) == []
    for path in glob.glob(os.path.join(str(relay.data), "attachments", "**"), recursive=True):
        if os.path.isfile(path):
            with open(path, "rb") as f:
                data = f.read()
            assert not [w for w in words if w.encode() in data], path
