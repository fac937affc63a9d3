"""Papers' text through the `catalog` client (issue 17, items 3 and 10): `paper --text` is content, so
piped into a file it is the paper and an error goes to stderr, never into the file; `help` piped is
text; every bundled paper is either served or the client says why and where to read it; and an
operator who follows docs/catalog.md to add a paper with a redistributable licence gets its text."""
import json
import os
import shutil
import subprocess

from catalog_fixtures import (CATALOG_CLI, REPO, SOURCE, _catalog_binaries, catalog, catalogd_factory,
                              source_sections)
from test_21_catalog_cli import CLI_TIMEOUT, TEST_PAPER, cli_env

__all__ = ["_catalog_binaries", "catalog", "catalogd_factory"]


def piped(base, *args, stdout=subprocess.PIPE):
    p = subprocess.run([CATALOG_CLI] + list(args), stdout=stdout, stderr=subprocess.PIPE, timeout=CLI_TIMEOUT,
                       env=cli_env(base))
    return p.returncode, p.stdout, p.stderr.decode("utf-8")


def test_paper_text_piped_into_a_file_is_the_paper(catalog, tmp_path):
    with open(os.path.join(SOURCE, "papers", TEST_PAPER + ".txt"), "rb") as f:
        text = f.read()
    target = tmp_path / "paper.txt"
    with open(target, "wb") as out:
        status, _, err = piped(catalog.base, "paper", TEST_PAPER, "--text", stdout=out)
    assert status == 0 and err == "", err
    assert target.read_bytes() == text
    # --json still gives the JSON object.
    status, out, _ = piped(catalog.base, "paper", TEST_PAPER, "--text", "--json")
    assert status == 0 and json.loads(out)["text"] == text.decode("utf-8")


def test_a_refused_paper_writes_nothing_into_the_file(catalog, tmp_path):
    target = tmp_path / "paper.txt"
    with open(target, "wb") as out:
        status, _, err = piped(catalog.base, "paper", "mmlu-paper", "--text", stdout=out)
    assert status == 1
    assert target.read_bytes() == b""
    assert err.startswith("catalog: ") and "https://arxiv.org/abs/2009.03300" in err, err
    status, out, _ = piped(catalog.base, "paper", "no-such-paper", "--text")
    assert status == 1 and out == b""


def test_help_piped_is_text(catalog):
    status, out, _ = piped(catalog.base, "help")
    assert status == 0 and out.decode().startswith("catalog "), out[:200]
    assert b"commands:" in out
    status, out, _ = piped(catalog.base, "help", "--json")
    assert status == 0 and json.loads(out)["name"] == "catalog"


def test_every_bundled_paper_is_served_or_says_where_to_read_it(catalog):
    sections = source_sections()
    licences = {row["id"]: row for row in sections["licences"]}
    hidden = {row["id"] for row in sections["sources"] if row["hidden"]}
    served = []
    for paper in sections["papers"]:
        if paper.get("source") in hidden:
            continue
        status, out, err = piped(catalog.base, "paper", paper["slug"], "--text")
        if licences[paper["licence"]]["redistributable"] and paper.get("text"):
            assert status == 0 and out, (paper["slug"], err)
            served.append(paper["slug"])
        else:
            assert status == 1 and out == b"", (paper["slug"], out)
            assert "licence" in err or "license" in err, (paper["slug"], err)
            if paper.get("arxiv"):
                assert "https://arxiv.org/abs/" + paper["arxiv"] in err, (paper["slug"], err)
    # What docs/catalog.md says: the two fixtures the project wrote, and no real paper.
    assert sorted(served) == ["relay-catalog-notes", "relay-catalog-test-paper"], served
    with open(os.path.join(REPO, "docs", "catalog.md"), encoding="utf-8") as f:
        doc = f.read()
    assert "Why the bundled catalog serves no real paper's text" in doc
    assert "Serving a paper's text: what an operator does" in doc


def test_an_operator_adds_a_redistributable_paper(catalogd_factory, tmp_path):
    """The steps of docs/catalog.md, "Serving a paper's text", with a fixture paper of the test's own."""
    source = tmp_path / "source"
    shutil.copytree(SOURCE, source)
    text = "A fixture paper of the end-to-end tests.\n\nIt stands for a paper whose licence was checked.\n"
    (source / "papers" / "operator-added-paper.txt").write_text(text, encoding="utf-8")
    (source / "operator-papers.json").write_text(json.dumps({"papers": [{
        "slug": "operator-added-paper", "title": "An Operator's Added Paper",
        "summary": "A fixture standing for a paper whose licence an operator checked.",
        "year": 2026, "authors": ["Relay catalog maintainers"], "licence": "cc-by-4.0",
        "text": "papers/operator-added-paper.txt"}]}), encoding="utf-8")
    server = catalogd_factory("--source", str(source))
    target = tmp_path / "paper.txt"
    with open(target, "wb") as out:
        status, _, err = piped(server.base, "paper", "operator-added-paper", "--text", stdout=out)
    assert status == 0, err
    assert target.read_text(encoding="utf-8") == text
