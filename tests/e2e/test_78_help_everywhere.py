"""--help everywhere (issue 28, item 5): every program and each of its commands and subcommands
prints its help on stdout and exits 0, with nothing on stderr and nothing started or written.

The commands are not listed here: they are read from the programs themselves (relayd's usage
lines, the manifests of `help --json`), so a command added later is walked too."""
import json
import os
import re
import subprocess

import pytest

from relaylib import RELAYD, clean_env

BUILD = os.path.dirname(RELAYD)
CLIENTS = ["relay", "relay-bridge", "catalog"]


def run(tmp_path, argv):
    # A folder of its own as the working directory and config folder: a help that started anything
    # (a data folder, a store, credentials) would leave it behind.
    env = clean_env({"RELAY_CONFIG_DIR": str(tmp_path / "config"), "CATALOG_BASE": "http://127.0.0.1:9"})
    return subprocess.run([os.path.join(BUILD, argv[0])] + argv[1:], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)


def relayd_commands():
    usage = subprocess.run([RELAYD, "--help"], capture_output=True, text=True, check=True).stdout
    names = re.findall(r"^(?:usage:)?\s+relayd ([a-z][a-z-]+)\b", usage, re.M)
    assert {"token", "login-link", "backup", "restore", "migrate"} <= set(names), usage
    return sorted(set(names) - {"COMMAND"})


def client_commands(program):
    """Each command of a client's manifest, and each subcommand its usage names (a|b|c)."""
    manifest = json.loads(subprocess.run([os.path.join(BUILD, program), "help", "--json"], capture_output=True,
                                         text=True, check=True, env=clean_env()).stdout)
    walked = []
    for command in manifest["commands"]:
        walked.append([command["name"]])
        words = command["usage"].split()
        if len(words) > 2 and re.fullmatch(r"[a-z]+(\|[a-z]+)+|[a-z]+", words[2]) and not words[2].startswith("<"):
            walked += [[command["name"], sub] for sub in words[2].split("|")]
    assert len(walked) >= 5, manifest
    return walked


def every_help():
    walked = [["relayd"], ["catalogd"]] + [["relayd", c] for c in relayd_commands()]
    for program in CLIENTS:
        walked += [[program]] + [[program] + c for c in client_commands(program)]
    return walked


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_program_and_command_prints_its_help_and_exits_0(tmp_path, flag):
    walked = every_help()
    assert ["relayd", "migrate"] in walked and ["relay", "installation", "rename"] in walked, walked
    assert ["relay", "grant", "revoke"] in walked and ["relay-bridge", "run"] in walked, walked
    for argv in walked:
        proc = run(tmp_path, argv + [flag])
        assert proc.returncode == 0, (argv, flag, proc.returncode, proc.stdout, proc.stderr)
        assert proc.stderr == "", (argv, flag, proc.stderr)
        # The help of that command: its usage names it (a subcommand's is its command's: rename|emoji|...).
        first = proc.stdout.splitlines()[0] if proc.stdout else ""
        assert first.startswith(("usage: " + " ".join(argv[:2]), argv[0] + " ")), (argv, flag, proc.stdout)
    assert sorted(os.listdir(tmp_path)) == [], os.listdir(tmp_path)


def test_a_command_s_help_says_what_it_does(tmp_path):
    """relayd's commands, which used to answer --help with a usage error (exit 2)."""
    for command, words in (("migrate", "PostgreSQL"), ("token", "user token"), ("backup", "online"),
                           ("restore", "empty data folder"), ("login-link", "sign-in link")):
        proc = run(tmp_path, ["relayd", command, "--help"])
        assert proc.returncode == 0 and words in proc.stdout, (command, proc.stdout)
    # After other arguments too, and a usage error is still one.
    proc = run(tmp_path, ["relayd", "migrate", "--from", "sqlite:x.db", "--help"])
    assert proc.returncode == 0 and "usage: relayd migrate" in proc.stdout, proc.stdout
    proc = run(tmp_path, ["relayd", "migrate", "--frobnicate"])
    assert proc.returncode == 2 and "usage: relayd migrate" in proc.stderr, proc.stderr
    assert not os.path.exists(tmp_path / "data")
