"""What the soak scenarios share: how many rounds, where the figures go,
and the bench's durability tool (relaybench durability / verify).

Every scenario appends one JSON line per round to build/soak/<scenario>.jsonl
and adds a table to the report printed at the end of the run (conftest.py).
"""
import json
import os
import random
import subprocess
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = os.environ.get("SOAK_OUT", os.path.join(ROOT, "build", "soak"))
RELAYBENCH = os.environ.get("RELAYBENCH", os.path.join(ROOT, "build", "soak-bench", "relaybench"))

# The knobs: SOAK_ROUNDS caps the rounds of every scenario; SOAK_SECONDS caps the time of each
# round-based scenario (no round starts past it; at least one always runs).
ROUNDS_CAP = int(os.environ.get("SOAK_ROUNDS") or 0) or None
SECONDS_CAP = float(os.environ.get("SOAK_SECONDS") or 0) or None

# Seeded, so that a rerun kills at the same moments (the machine's timing still varies).
RNG = random.Random(int(os.environ.get("SOAK_SEED", "39")))

TABLES = []  # (title, columns, rows, notes), printed by conftest.py at the end


def rounds(default):
    return min(default, ROUNDS_CAP) if ROUNDS_CAP else default


class Rounds:
    """Iterates round numbers 1..n, stopping early once SOAK_SECONDS have passed."""

    def __init__(self, default):
        self.n = rounds(default)
        self.started = time.monotonic()
        self.ran = 0

    def __iter__(self):
        for r in range(1, self.n + 1):
            if r > 1 and SECONDS_CAP and time.monotonic() - self.started > SECONDS_CAP:
                return
            self.ran = r
            yield r


class Report:
    """One scenario's figures: a row per round, written as a JSON line at once (a run cut short keeps its
    rounds), and a table at the end."""

    def __init__(self, scenario, title, columns):
        os.makedirs(OUT, exist_ok=True)
        self.scenario = scenario
        self.title = title
        self.columns = columns
        self.rows = []
        self.notes = []
        self.path = os.path.join(OUT, scenario + ".jsonl")
        open(self.path, "w").close()
        TABLES.append(self)

    def add(self, **row):
        row = dict(scenario=self.scenario, **row)
        self.rows.append(row)
        with open(self.path, "a") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")

    def note(self, text):
        self.notes.append(text)

    def table(self):
        cols = self.columns
        cells = [[fmt(row.get(c)) for c in cols] for row in self.rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
        lines = ["%s (%s)" % (self.title, self.path)]
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths)) + " |")
        lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for r in cells:
            lines.append("| " + " | ".join(v.rjust(w) for v, w in zip(r, widths)) + " |")
        lines += ["- " + n for n in self.notes]
        return "\n".join(lines)


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.2f" % v
    return str(v)


def summary(values):
    """min / median / max of a list of numbers, as a string."""
    values = sorted(values)
    if not values:
        return "-"
    return "%.2f / %.2f / %.2f" % (values[0], values[len(values) // 2], values[-1])


# ---- the bench's durability tool ------------------------------------------------------------------

def bench(*args, timeout=300, check=True):
    proc = subprocess.run([RELAYBENCH] + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError("relaybench %s failed (%d): %s" % (args[0], proc.returncode, proc.stderr[-3000:]))
    return proc


class Durability:
    """Installations paired for the durability tool: `load()` runs one round of its write load and SIGKILLs
    a relayd at a random moment; `verify()` checks the round's journal (and the one before, which must
    survive this crash too) through the public API."""

    def __init__(self, workdir, tokens, setup_url, count, src_base="127.7.0.1"):
        self.dir = str(workdir)
        os.makedirs(self.dir, exist_ok=True)
        self.users = os.path.join(self.dir, "users.tsv")
        self.state = os.path.join(self.dir, "state.tsv")
        with open(self.users, "w") as f:
            for user, token in tokens:
                f.write("%s\t%s\n" % (user, token))
        self.count = count
        self.journals = []
        # Pairing goes straight to a node, from several loopback addresses: the per-IP pairing bucket.
        bench("setup", "--url", setup_url, "--users", self.users, "--count", count, "--streaming", 0,
              "--out", self.state, "--src-base", src_base, "--per-ip", 8)

    def start_load(self, url, pid, rnd, kill_ms):
        journal = os.path.join(self.dir, "journal-%d.tsv" % rnd)
        self.journals.append(journal)
        return subprocess.Popen([RELAYBENCH, "durability", "--url", url, "--state", self.state,
                                 "--inst", "0:%d" % self.count, "--pid", str(pid), "--journal", journal,
                                 "--round", str(rnd), "--kill-after-ms", str(kill_ms)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    @staticmethod
    def finish_load(proc, timeout=60):
        out, err = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError("relaybench durability failed (%d): %s" % (proc.returncode, err[-3000:]))
        return json.loads(out.strip().splitlines()[-1])

    def verify(self, url):
        args = ["verify", "--url", url, "--state", self.state]
        for j in self.journals[-2:]:
            args += ["--journal", j]
        proc = bench(*args, timeout=600, check=False)
        try:
            v = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise AssertionError("relaybench verify printed no figures (%d): %s" % (proc.returncode, proc.stderr[-3000:]))
        v["problems"] = [line for line in proc.stderr.splitlines() if line.startswith("verify:")][:5]
        v["exit"] = proc.returncode
        return v


def verdict(v):
    """The per-round figures of a verify: lost, duplicated, out of order / wrong, not idempotent."""
    return dict(lost=v["missing"] + v["deltas_lost_outside_window"] + v["deltas_lost_in_window"] + v["decisions_lost"]
                + v["retry_failed"],
                duplicated=v["duplicated"], reordered=v["wrong_text"], not_idempotent=v["not_idempotent"],
                checked=v["checked"], open_deltas=v["open_deltas_acked"])
