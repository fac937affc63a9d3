"""A full disk under load, as rounds (issue 39): the data folder on a small tmpfs that the run mounts
itself (test_139's SmallDisk, root), a bridge streaming deltas the whole time (each retried with its key
until acknowledged, waiting what retry_after_ms says, capped at 0.5 s) and a client sending, reading and
holding an event stream; the disk is filled, kept full 3 s, and given its room back. Then the same for
the attachments folder, with uploads. Every refusal must be 503 `storage_full` with Retry-After; reads
and the stream go on; the relay resumes by itself; every acknowledged delta (or upload) is kept once,
in order.
"""
import collections
import os
import time

from bridgelib import Turn, WAIT
from relaylib import assert_ok, bearer, mint_token, wait_until
from test_139_disk_full import SmallDisk
from test_outages import TimedPump, counted

from soaklib import Report, Rounds

FULL_S = 3.0
COLUMNS = ["round", "folder", "full_s", "acked_full", "refused", "codes", "retry_after", "reads_ok", "stream",
           "resumed_s", "lost", "duplicated", "reordered"]


def refusal_code(r):
    try:
        return r.json()["error"]["code"]
    except (ValueError, KeyError):
        return "unreadable"


def test_the_data_folders_disk_fills_up(relayd, tmp_path):
    disk = SmallDisk(tmp_path / "store", "8m")
    report = Report("disk-full", "the data folder's disk (SQLite, 8 MB tmpfs) and the attachments folder's (4 MB) full",
                    COLUMNS)
    try:
        relay = relayd(data=disk.path / "data", store="sqlite", bus="local")
        turn = Turn(relay, mint_token(relay.data, "alice"))
        inst = turn.inst
        r = 0
        for _ in Rounds(5):
            r += 1
            mid = inst.open_message(turn.session, turn.interaction) if r == 1 else new_message(inst, turn)
            pump = TimedPump(inst, mid)
            pump.start()
            pump.wait_acked(25)
            disk.fill()
            full_at = time.monotonic()
            sends, reads = [], []
            while time.monotonic() - full_at < FULL_S:
                sends.append(inst.client("POST", "/v1/me/sessions/%s/send" % turn.session, {"text": "while full"}))
                reads.append(inst.client("GET", "/v1/me/sessions/%s/timeline?limit=20" % turn.session))
                time.sleep(0.2)
            disk.free()
            freed_at = time.monotonic()
            n = len(pump.acked)
            pump.wait_acked(n + 10, timeout=30)
            resumed_s = time.monotonic() - freed_at
            pump.enough.set()
            pump.join(70)
            assert not pump.is_alive() and pump.error is None, pump.error
            acked = [i for i, _ in pump.acked]
            lost, duplicated, reordered = counted(acked, inst.message(turn.session, mid)["text"])
            refusals = [(s, b.get("error", {}).get("code") if isinstance(b, dict) else b, ra)
                        for s, b, ra in pump.refusals]
            refusals += [(x.status_code, refusal_code(x), x.headers.get("Retry-After")) for x in sends
                         if x.status_code != 200]
            codes = collections.Counter("%s %s" % (s, c) for s, c, _ in refusals)
            row = dict(round=r, folder="data", full_s=FULL_S,
                       acked_full=sum(1 for _, at in pump.acked if full_at <= at <= freed_at),
                       refused=len(refusals), codes=",".join("%s:%d" % kv for kv in sorted(codes.items())),
                       retry_after=",".join(sorted({str(ra) for _, _, ra in refusals})) or "-",
                       reads_ok="%d/%d" % (sum(1 for x in reads if x.status_code == 200), len(reads)),
                       stream="open" if not turn.stream.closed.is_set() else "closed",
                       resumed_s=round(resumed_s, 2), lost=lost, duplicated=duplicated, reordered=reordered)
            report.add(**row)
            assert set(codes) <= {"503 storage_full"} and codes, row
            assert row["retry_after"] == "10" and row["reads_ok"].split("/")[0] == row["reads_ok"].split("/")[1], row
            assert row["stream"] == "open" and lost == duplicated == reordered == 0, row
        turn.close()
    finally:
        disk.unmount()

    files_disk = SmallDisk(tmp_path / "files", "4m")
    try:
        relay = relayd("--attachments", str(files_disk.path / "files"), store="sqlite", bus="local")
        user = mint_token(relay.data, "bob")
        headers = dict(bearer(user), **{"Content-Type": "image/png"})
        kept = {}
        for k in range(5):
            body = os.urandom(50000)
            res = relay.request("POST", "/v1/me/attachments?name=a.png", headers=headers, data=body)
            kept[assert_ok(res)["key"]] = body
        turn = Turn(relay, user)
        for _ in Rounds(3):
            r += 1
            files_disk.fill()
            full_at = time.monotonic()
            refused, reads = [], []
            while time.monotonic() - full_at < FULL_S:
                refused.append(relay.request("POST", "/v1/me/attachments?name=b.png", headers=headers,
                                             data=os.urandom(200000)))
                reads.append(turn.inst.client("GET", "/v1/me/sessions"))
                time.sleep(0.2)
            files_disk.free()
            freed_at = time.monotonic()

            def uploaded():
                body = os.urandom(200000)
                res = relay.request("POST", "/v1/me/attachments?name=c.png", headers=headers, data=body)
                if res.status_code == 200:
                    kept[assert_ok(res)["key"]] = body
                return res.status_code == 200

            wait_until(uploaded, 30, interval=0.1, what="an upload once the disk had room")
            resumed_s = time.monotonic() - freed_at
            codes = collections.Counter("%d %s" % (x.status_code, refusal_code(x)) for x in refused)
            present = os.listdir(str(files_disk.path / "files"))
            lost = 0
            for name, body in kept.items():
                path = os.path.join(str(files_disk.path / "files"), name)
                if name not in present or open(path, "rb").read() != body:
                    lost += 1
            row = dict(round=r, folder="attachments", full_s=FULL_S, acked_full=0, refused=len(refused),
                       codes=",".join("%s:%d" % kv for kv in sorted(codes.items())),
                       retry_after=",".join(sorted({str(x.headers.get("Retry-After")) for x in refused})),
                       reads_ok="%d/%d" % (sum(1 for x in reads if x.status_code == 200), len(reads)),
                       stream="open" if not turn.stream.closed.is_set() else "closed",
                       resumed_s=round(resumed_s, 2), lost=lost, duplicated=len(present) - len(kept), reordered=0)
            report.add(**row)
            assert set(codes) == {"503 storage_full"} and row["retry_after"] == "10", row
            assert row["reads_ok"].split("/")[0] == row["reads_ok"].split("/")[1] and row["stream"] == "open", row
            assert lost == 0 and len(present) == len(kept), row
        turn.close()
    finally:
        files_disk.unmount()
    report.note("deltas are retried with their key after what retry_after_ms says (capped at 0.5 s); "
                "a client's sends and uploads are refused while full; reads: the timeline / the sessions list")


def new_message(inst, turn):
    interaction, _ = inst.send(turn.session, "again")
    return inst.open_message(turn.session, interaction)
