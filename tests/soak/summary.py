"""Prints the soak's figures (build/soak/*.jsonl, or the folder given) as the markdown of docs/operations.md,
"What we tested": the kill rounds summed up, the outage and disk rounds one row each.

    python3 tests/soak/summary.py [build/soak]
"""
import json
import os
import sys


def load(folder, name):
    path = os.path.join(folder, name + ".jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def spread(values):
    values = sorted(values)
    return "%.2f / %.2f / %.2f" % (values[0], values[len(values) // 2], values[-1]) if values else "-"


def table(columns, rows):
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(str(r.get(c, "-")) for c in columns) + " |" for r in rows]
    return "\n".join(out)


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "build", "soak")
    kills = []
    for name, what in (("kill9-cluster", "2 nodes, PostgreSQL + Redis, nginx"), ("kill9-sqlite", "1 node, SQLite")):
        rows = load(folder, name)
        if not rows:
            continue
        row = {"scenario": what, "rounds": len(rows), "writes acked": sum(r["acked"] for r in rows),
               "in flight at the kill": sum(r["inflight"] for r in rows),
               "checked": sum(r["checked"] for r in rows),
               "lost": sum(r["lost"] for r in rows), "duplicated": sum(r["duplicated"] for r in rows),
               "reordered/wrong": sum(r["reordered"] for r in rows),
               "not idempotent": sum(r["not_idempotent"] for r in rows),
               "failed rounds": sum(1 for r in rows if r["exit"] != 0),
               "restart s (min / median / max)": spread([r["restart_s"] for r in rows]),
               "bridge served again s": spread([r["served_s"] for r in rows]) if "served_s" in rows[0] else "-"}
        kills.append(row)
    print(table(list(kills[0]) if kills else [], kills))
    print()
    outages = load(folder, "outage-postgres") + load(folder, "outage-redis")
    print(table(["outage", "away_s", "bridge_acked", "bridge_503", "client_200", "client_503", "named", "retry_after",
                 "back_s", "healthy_s", "update_s", "stream", "lost", "duplicated", "reordered"], outages))
    print()
    print(table(["folder", "full_s", "acked_full", "refused", "codes", "retry_after", "reads_ok", "stream",
                 "resumed_s", "lost", "duplicated", "reordered"], load(folder, "disk-full")))


if __name__ == "__main__":
    main()
