"""Projects in an encrypted chat, through the real relay-bridge and a device it accepted (the real
`relay` terminal, confirmed with a code from `relay-bridge devices add`; issue 36 item 1,
docs/bridge.md "Several agents and projects", docs/api.md "Agents and projects"):

- the project list asked with the terminal's device id comes sealed to it (crypto_box from the
  bridge's key to the device's): it opens here with the device's secret to the bridge's projects,
  and names no path in what the relay carried;
- a chat started with project_ct (sealed under session_meta/project with the chat's new key) before
  the bridge has the key waits for it: once the terminal's signed grant arrives, the agent's session
  opens in the project's worktree; the state names the project only sealed (project_ct);
- a sealed project whose path leads out of the roots is refused (folder_outside_roots), its error
  names no path, and nothing runs.

The device's side of crypto_box (X25519, HSalsa20, XSalsa20, Poly1305) is built here from
python3-cryptography and test_101's HSalsa20.
"""
import base64
import json
import os
import struct

from cryptography.hazmat.primitives.poly1305 import Poly1305

from e2elib import open_, seal
from relaylib import assert_ok, bearer, wait_until
from test_50_bridge_support import PYTHON, WAIT
from test_60_relay_cli import Cli
from test_63_relay_with_bridge import pair_real_bridge
from test_100_e2e_relay_cli import confirm_bridge
from test_101_e2e_signed_grants import MASK, _rotl, beforenm, grant_sig, hsalsa20, sealed_box

HERE = os.path.dirname(os.path.abspath(__file__))
AGENT = os.path.join(HERE, "acp_agent.py")


def salsa20_block(key, nonce8, counter):
    c = struct.unpack("<4I", b"expand 32-byte k")
    k = struct.unpack("<8I", key)
    n = struct.unpack("<2I", nonce8)
    x = [c[0], k[0], k[1], k[2], k[3], c[1], n[0], n[1], counter & MASK, counter >> 32, c[2], k[4], k[5], k[6],
         k[7], c[3]]
    start = list(x)

    def quarter(a, b, cc, d):
        x[b] ^= _rotl(x[a] + x[d], 7)
        x[cc] ^= _rotl(x[b] + x[a], 9)
        x[d] ^= _rotl(x[cc] + x[b], 13)
        x[a] ^= _rotl(x[d] + x[cc], 18)

    for _ in range(10):
        quarter(0, 4, 8, 12)
        quarter(5, 9, 13, 1)
        quarter(10, 14, 2, 6)
        quarter(15, 3, 7, 11)
        quarter(0, 1, 2, 3)
        quarter(5, 6, 7, 4)
        quarter(10, 11, 8, 9)
        quarter(15, 12, 13, 14)
    return struct.pack("<16I", *[(x[i] + start[i]) & MASK for i in range(16)])


def box_open(sealed, their_pub, my_sec):
    """crypto_box_open_easy of base64(nonce(24) || mac(16) || ciphertext); raises when the tag is wrong."""
    raw = base64.b64decode(sealed)
    nonce, mac, ct = raw[:24], raw[24:40], raw[40:]
    sub = hsalsa20(beforenm(their_pub, my_sec), nonce[:16])
    stream = b"".join(salsa20_block(sub, nonce[16:], i) for i in range((32 + len(ct)) // 64 + 1))
    Poly1305.verify_tag(stream[:32], ct, mac)
    return bytes(a ^ b for a, b in zip(ct, stream[32:32 + len(ct)]))


def test_projects_in_an_encrypted_chat(relay, tmp_path):
    cli = Cli(tmp_path)
    token = cli.login(relay)
    bridge, inst = pair_real_bridge(cli, relay, tmp_path)
    root = tmp_path / "src"
    (root / "app").mkdir(parents=True)
    os.system("git init -q -b main '%s' && git -C '%s' -c user.email=t@t -c user.name=t commit -q --allow-empty "
              "-m first" % (root / "app", root / "app"))
    (tmp_path / "outside").mkdir()
    log = tmp_path / "agent.log"
    bridge.start("coder=acp:%s %s --state %s --log %s" % (PYTHON, AGENT, tmp_path / "agent-state", log),
                 "--root", str(root), "--cwd", str(tmp_path))
    try:
        bridge.wait_log("device key registered as")
        me, _, bridge_dev = confirm_bridge(cli, bridge)
        devices = cli.json("devices")["devices"]
        bridge_pub = bytes.fromhex([d for d in devices if d["device_id"] == bridge_dev][0]["pubkey"])
        with open(cli.config / "client-device.json") as f:
            device_sec = bytes.fromhex(json.load(f)["secret_key"])

        # The list, sealed to this device: the relay carried no path.
        r = relay.request("GET", "/v1/me/installations/%s/projects?device_id=%s" % (inst, me), headers=bearer(token))
        answer = assert_ok(r)
        assert answer["to_device_id"] == me and answer["from_device_id"] == bridge_dev, answer
        assert str(root) not in r.text and "app" not in r.text.replace(answer["sealed"], ""), r.text
        projects = json.loads(box_open(answer["sealed"], bridge_pub, device_sec))["projects"]
        app = str((root / "app").resolve())
        assert [(p["name"], p["path"], p["branch"]) for p in projects] == [("app", app, "main")], projects
        project_id = projects[0]["id"]

        def start(project):
            key = os.urandom(32)
            body = {"installation_id": inst, "encrypted": True, "agent": "coder"}
            if project is not None:
                body["project_ct"] = seal(key, "session_meta/project", json.dumps(project))
            ses = assert_ok(relay.post("/v1/me/sessions", body, token=token))["session_id"]
            # The key comes after the start, as a client's grant does.
            wrapped = sealed_box(bridge_pub, key)
            recipient = {"device_id": bridge_dev, "wrapped_session_key": wrapped,
                         "grant_sig": grant_sig(device_sec, bridge_pub, ses, wrapped, me)}
            assert_ok(relay.post("/v1/me/sessions/%s/recipients" % ses,
                                 {"recipients": [recipient], "wrapped_by_device_id": me}, token=token))
            return ses, key

        def state(ses):
            found = {}

            def posted():
                rows = assert_ok(relay.request("GET", "/v1/me/sessions", headers=bearer(token)))["sessions"]
                found["s"] = [s for s in rows if s["id"] == ses][0]["agent_state"]
                return found["s"] is not None and found["s"]["state"] in ("ready", "refused") and (
                    found["s"]["state"] == "refused" or "project_ct" in found["s"])
            wait_until(posted, WAIT, interval=0.1, what="the state of %s" % ses)
            return found["s"]

        ses, key = start({"id": project_id, "worktree_branch": "feature/sealed", "name": "app"})
        got = state(ses)
        assert got["state"] == "ready" and "project" not in got, got
        worktree = str((root / "app.worktrees" / "feature-sealed").resolve())
        opened = json.loads(open_(key, "session_meta/project", got["project_ct"]))
        assert opened == {"id": project_id, "name": "app", "path": worktree, "branch": "feature/sealed"}
        def turn(ses, key, text):
            """The key is this test's (the terminal never had it): the message is sealed here, the reply opened here."""
            assert_ok(relay.post("/v1/me/sessions/%s/send" % ses,
                                 {"text_ct": seal(key, "messages/" + ses, text)}, token=token))
            found = {}

            def replied():
                rows = assert_ok(relay.request("GET", "/v1/me/sessions/%s/messages" % ses, headers=bearer(token)))
                done = [m for m in rows["messages"] if m["role"] == "agent" and m["state"] == "final"]
                found["m"] = done[-1] if done else None
                return bool(done)
            wait_until(replied, WAIT, interval=0.1, what="the sealed reply")
            return open_(key, "messages/" + ses, found["m"]["text_ct"])

        assert turn(ses, key, "hello sealed") == "echo: hello sealed"
        with open(log) as f:
            news = [json.loads(line) for line in f if '"session_new"' in line]
        assert [n["cwd"] for n in news] == [worktree], news

        # A sealed path out of the roots (its id made up): refused, and the words name no path.
        bad, _ = start({"id": project_id, "path": str(tmp_path / "outside")})
        got = state(bad)
        assert got["state"] == "refused" and got["error"]["code"] == "folder_outside_roots", got
        assert "/" not in got["error"]["message"] and "project_ct" not in got, got
        with open(log) as f:
            assert sum('"session_new"' in line for line in f) == 1

        # An encrypted chat that names no project (relayd says project_ct: null) runs in --cwd, as before.
        free, key = start(None)
        assert turn(free, key, "no project") == "echo: no project"
        with open(log) as f:
            news = [json.loads(line) for line in f if '"session_new"' in line]
        assert [n["cwd"] for n in news] == [worktree, str(tmp_path)], news
    finally:
        assert bridge.stop() == 0
