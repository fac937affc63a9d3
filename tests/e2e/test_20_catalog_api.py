"""catalogd end to end: every endpoint of the catalog API over real sockets,
caching (ETag, 304, Cache-Control), gzip, the licence rules of paper files,
the llms.txt files, hidden sources, and the daemon's own behaviour (import,
restart, SIGTERM, logs)."""
import gzip
import json
import os
import re
import shutil
import subprocess
import time

import requests

from catalog_fixtures import (CACHE_CONTROL, CATALOGD, HTTP_TIMEOUT, SINGULAR, SOURCE, TYPES, WORD_RE,
                              _catalog_binaries, catalog, catalogd_factory, error_of, hidden_entities)

TEST_PAPER = "relay-catalog-test-paper"


def listing(catalog, type_):
    r = catalog.get("/api/v1/" + type_)
    assert r.status_code == 200
    return r.json()["items"]


def all_documents(catalog):
    docs = []
    for t in TYPES:
        for item in listing(catalog, t):
            r = catalog.get(item["url"])
            assert r.status_code == 200, item["url"]
            docs.append(r.json())
    return docs


# ---- the index and listings ----

def test_index_lists_every_endpoint_and_type(catalog):
    r = catalog.get("/api/v1")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json; charset=utf-8"
    index = r.json()
    paths = [e["path"] for e in index["endpoints"]]
    for expected in ("/api/v1", "/api/v1/search?q={query}&type={type}&per={per}", "/api/v1/{type}/{slug}",
                     "/api/v1/papers/{slug}/text", "/api/v1/papers/{slug}/pdf", "/llms.txt", "/llms-full.txt"):
        assert expected in paths
    assert all(e["method"] == "GET" and e["description"] for e in index["endpoints"])
    assert [t["type"] for t in index["types"]] == TYPES
    assert index["api_version"] == "v1"
    total = 0
    for t in index["types"]:
        assert t["singular"] == SINGULAR[t["type"]]
        assert t["count"] == len(listing(catalog, t["type"])) and t["count"] >= 5
        total += t["count"]
    assert index["dataset"]["entities"] == total >= 150
    assert index["dataset"]["scores"] >= 100


def test_listing_by_type_singular_or_plural(catalog):
    plural = catalog.get("/api/v1/models").json()
    singular = catalog.get("/api/v1/model").json()
    assert plural == singular
    assert plural["type"] == "models" and plural["count"] == len(plural["items"])
    assert {"slug", "title", "summary", "url"} <= set(plural["items"][0])
    error_of(catalog.get("/api/v1/widgets"), 404, "type_not_found")


# ---- entities ----

def test_entity_of_every_type(catalog):
    examples = {"evals": "gpqa-diamond", "models": "llama-3.1-405b-instruct", "tools": "lm-evaluation-harness",
                "leaderboards": "swe-bench-leaderboard", "organizations": "openai", "people": "dan-hendrycks",
                "capabilities": "mathematical-reasoning", "papers": "swe-bench-paper"}
    for t, slug in examples.items():
        for name in (t, SINGULAR[t]):
            r = catalog.get("/api/v1/%s/%s" % (name, slug))
            assert r.status_code == 200, (name, slug)
            doc = r.json()
            assert doc["type"] == t and doc["slug"] == slug and doc["url"] == "/api/v1/%s/%s" % (t, slug)
            assert doc["title"] and doc["summary"]
            assert isinstance(doc["attributes"], dict) and isinstance(doc["links"], dict)
            assert isinstance(doc["relationships"], dict)


def titles(doc, relation):
    return {ref["slug"] for ref in doc["relationships"].get(relation, [])}


def test_relationships_resolved_to_slugs_and_titles(catalog):
    model = catalog.get("/api/v1/models/gpt-4o").json()
    assert titles(model, "organization") == {"openai"}
    assert model["relationships"]["organization"][0] == {
        "type": "organizations", "slug": "openai", "title": "OpenAI", "url": "/api/v1/organizations/openai"}

    ev = catalog.get("/api/v1/evals/mmlu").json()
    assert "mmlu-paper" in titles(ev, "papers")
    assert "general-knowledge" in titles(ev, "capabilities")
    assert "lm-evaluation-harness" in titles(ev, "tools")
    assert "helm-leaderboards" in titles(ev, "leaderboards")

    board = catalog.get("/api/v1/leaderboards/swe-bench-leaderboard").json()
    assert titles(board, "evals") == {"swe-bench", "swe-bench-verified", "swe-bench-lite"}
    assert board["scores"] and all({"eval", "model", "value", "source_url"} <= set(row) for row in board["scores"])

    person = catalog.get("/api/v1/people/dan-hendrycks").json()
    assert {"center-for-ai-safety", "uc-berkeley"} <= titles(person, "organizations")
    assert {"mmlu-paper", "math-paper", "hle-paper"} <= titles(person, "papers")

    paper = catalog.get("/api/v1/papers/swe-bench-paper").json()
    assert paper["attributes"]["arxiv"] == "2310.06770"
    assert paper["links"]["arxiv"] == "https://arxiv.org/abs/2310.06770"
    assert {"licence", "files"} <= set(paper)
    assert "carlos-jimenez" in titles(paper, "authors")
    assert "swe-bench" in titles(paper, "evals")

    org = catalog.get("/api/v1/organizations/meta-ai").json()
    assert "llama-3.1-405b-instruct" in titles(org, "models")
    cap = catalog.get("/api/v1/capabilities/software-engineering").json()
    assert titles(cap, "evals") == {"swe-bench", "swe-bench-verified", "swe-bench-lite"}
    r1 = catalog.get("/api/v1/models/deepseek-r1").json()
    assert titles(r1, "base_model") == {"deepseek-v3"}
    assert "deepseek-r1" in titles(catalog.get("/api/v1/models/deepseek-v3").json(), "derived_models")


def test_scores_carry_their_source(catalog):
    model = catalog.get("/api/v1/models/gpt-4").json()
    mmlu = [s for s in model["scores"] if s["eval"]["slug"] == "mmlu"]
    assert mmlu == [{"eval": {"type": "evals", "slug": "mmlu", "title": "MMLU", "url": "/api/v1/evals/mmlu"},
                     "value": 86.4, "unit": "%", "setting": "5-shot", "date": "2023-03",
                     "source_url": "https://arxiv.org/abs/2303.08774"}]
    ev = catalog.get("/api/v1/evals/swe-bench-verified").json()
    values = [s["value"] for s in ev["scores"]]
    assert values == sorted(values, reverse=True) and len(values) >= 10
    assert all(s["source_url"].startswith("https://") for s in ev["scores"])


def test_every_reference_resolves(catalog):
    docs = all_documents(catalog)
    urls = {d["url"] for d in docs}
    for d in docs:
        for refs in d["relationships"].values():
            for ref in refs:
                assert ref["url"] in urls, (d["url"], ref)
                assert ref["url"] == "/api/v1/%s/%s" % (ref["type"], ref["slug"])
        for s in d.get("scores", []):
            for key in ("eval", "model"):
                if key in s:
                    assert s[key]["url"] in urls


def test_unknown_entities_routes_and_methods(catalog):
    message = error_of(catalog.get("/api/v1/models/no-such-model"), 404, "entity_not_found")
    assert "no-such-model" in message
    message = error_of(catalog.get("/api/v1/modelz/gpt-4o"), 404, "type_not_found")
    assert "evals, models" in message
    error_of(catalog.get("/api/v1/models/gpt-4o/extra"), 404, "not_found")
    error_of(catalog.get("/nothing-here"), 404, "not_found")
    r = requests.post(catalog.base + "/api/v1/search", data="{}", timeout=HTTP_TIMEOUT)
    error_of(r, 405, "method_not_allowed")
    # The HTTP core lists the method once per matching row ("GET, GET" here); reported to its owner.
    assert {m.strip() for m in r.headers["Allow"].split(",")} == {"GET"}
    error_of(catalog.get("/api/v1/models/" + "a" * 300), 404, "entity_not_found")


# ---- search ----

def search(catalog, **params):
    r = catalog.get("/api/v1/search", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def hit_slugs(answer, type_):
    return [h["slug"] for h in answer["results"].get(type_, {}).get("hits", [])]


def test_search_groups_by_type_with_snippets(catalog):
    answer = search(catalog, q="swe bench")
    assert answer["query"] == "swe bench" and answer["match"] == "all" and answer["per"] == 5
    assert list(answer["results"]) == [t for t in TYPES if t in answer["results"]]
    assert {"evals", "tools", "leaderboards", "papers"} <= set(answer["results"])
    assert hit_slugs(answer, "evals")[0] == "swe-bench"  # the query is its slug
    assert answer["total"] == sum(g["total"] for g in answer["results"].values())
    for group in answer["results"].values():
        assert 1 <= len(group["hits"]) <= 5 and group["total"] >= len(group["hits"])
        for hit in group["hits"]:
            assert {"type", "slug", "title", "summary", "url", "snippet", "score"} <= set(hit)
    assert "**SWE**" in answer["results"]["evals"]["hits"][1]["snippet"]


def test_search_prefix_of_the_last_word(catalog):
    assert "gpqa-diamond" in hit_slugs(search(catalog, q="gpqa diam"), "evals")
    assert search(catalog, q="gpqa diam")["match"] == "all"
    # A finished word is not a prefix: no entity has both words, so any word may match.
    assert search(catalog, q="gpqa diam ")["match"] == "any"
    assert "humanitys-last-exam" in hit_slugs(search(catalog, q="humanity's las"), "evals")


def test_search_weights_names_over_descriptions(catalog):
    # "harness" is in three tools' names; others only say it in their kind or description.
    hits = hit_slugs(search(catalog, q="harness", type="tools", per=10), "tools")
    assert set(hits[:3]) == {"lm-evaluation-harness", "swe-bench-harness", "bigcode-evaluation-harness"}
    assert len(hits) > 3


def test_search_type_and_per(catalog):
    plural = search(catalog, q="llama", type="models", per=30)
    singular = search(catalog, q="llama", type="model", per=30)
    assert plural == dict(singular, type="models")
    assert list(plural["results"]) == ["models"] and plural["type"] == "models"
    assert len(hit_slugs(plural, "models")) == plural["results"]["models"]["total"] >= 6
    one = search(catalog, q="llama", per=1)
    assert all(len(g["hits"]) == 1 for g in one["results"].values())
    assert one["results"]["models"]["total"] == plural["results"]["models"]["total"]


def test_search_falls_back_to_any_word(catalog):
    answer = search(catalog, q="mmlu zzqqxxnothing")
    assert answer["match"] == "any" and "mmlu" in hit_slugs(answer, "evals")
    empty = search(catalog, q="zzqqxxnothing")
    assert empty["total"] == 0 and empty["results"] == {}
    assert search(catalog, q="tessellated-lighthouse")["total"] == 0  # paper text is not indexed


def test_search_unicode_and_syntax_is_text(catalog):
    assert "francois-chollet" in hit_slugs(search(catalog, q="François"), "people")
    assert "francois-chollet" in hit_slugs(search(catalog, q="francois chollet"), "people")
    for q in ('title:mmlu', 'NEAR(mmlu gsm8k)', 'mmlu OR', '"unclosed', '*', 'a"b', 'mmlu -gsm8k', '—  mmlu  —'):
        r = catalog.get("/api/v1/search", params={"q": q})
        assert r.status_code in (200, 400), (q, r.text)
        if r.status_code == 400:
            error_of(r, 400, "invalid_query")


def test_search_refusals(catalog):
    assert "required" in error_of(catalog.get("/api/v1/search"), 400, "invalid_query")
    error_of(catalog.get("/api/v1/search?q="), 400, "invalid_query")
    error_of(catalog.get("/api/v1/search?q=%21%21"), 400, "invalid_query")
    error_of(catalog.get("/api/v1/search?q=" + "a" * 201), 400, "invalid_query")
    error_of(catalog.get("/api/v1/search?q=%ff"), 400, "invalid_query")
    error_of(catalog.get("/api/v1/search?q=x&per=0"), 400, "invalid_parameter")
    error_of(catalog.get("/api/v1/search?q=x&per=31"), 400, "invalid_parameter")
    error_of(catalog.get("/api/v1/search?q=x&per=ten"), 400, "invalid_parameter")
    assert "type must be" in error_of(catalog.get("/api/v1/search?q=x&type=widget"), 400, "invalid_parameter")
    error_of(catalog.get("/api/v1/search?q=x&q=y"), 400, "invalid_query")


# ---- papers ----

def test_paper_text_and_pdf_of_an_open_paper(catalog):
    doc = catalog.get("/api/v1/papers/" + TEST_PAPER).json()
    assert doc["licence"]["id"] == "cc-by-4.0" and doc["licence"]["redistributable"] is True
    assert doc["files"] == {"text": "/api/v1/papers/%s/text" % TEST_PAPER, "pdf": "/api/v1/papers/%s/pdf" % TEST_PAPER}
    text = catalog.get(doc["files"]["text"])
    assert text.status_code == 200
    assert text.headers["Content-Type"] == "text/plain; charset=utf-8"
    with open(os.path.join(SOURCE, "papers", TEST_PAPER + ".txt"), "rb") as f:
        assert text.content == f.read()
    pdf = catalog.get(doc["files"]["pdf"])
    assert pdf.status_code == 200
    assert pdf.headers["Content-Type"] == "application/pdf"
    assert pdf.headers["Content-Disposition"] == 'inline; filename="%s.pdf"' % TEST_PAPER
    assert pdf.content.startswith(b"%PDF-") and pdf.content.rstrip().endswith(b"%%EOF")
    with open(os.path.join(SOURCE, "papers", TEST_PAPER + ".pdf"), "rb") as f:
        assert pdf.content == f.read()


def test_paper_refusals_say_why(catalog):
    message = error_of(catalog.get("/api/v1/papers/mmlu-paper/text"), 403, "not_redistributable")
    assert "licence" in message and "https://arxiv.org/abs/2009.03300" in message
    r = catalog.get("/api/v1/papers/gpt-4-technical-report/pdf")
    error_of(r, 403, "not_redistributable")
    details = r.json()["error"]["details"]
    assert details["redistributable"] is False and details["read_at"] == "https://arxiv.org/abs/2303.08774"
    message = error_of(catalog.get("/api/v1/papers/relay-catalog-notes/pdf"), 404, "file_not_found")
    assert "no PDF" in message
    assert catalog.get("/api/v1/papers/relay-catalog-notes/text").status_code == 200
    error_of(catalog.get("/api/v1/papers/no-such-paper/text"), 404, "entity_not_found")
    error_of(catalog.get("/api/v1/models/gpt-4o/text"), 404, "not_found")
    assert catalog.get("/api/v1/papers/mmlu-paper").json()["files"] == {}


# ---- caching, gzip ----

CACHED_URLS = ["/api/v1", "/api/v1/models", "/api/v1/evals/mmlu", "/api/v1/search?q=mmlu",
               "/api/v1/papers/%s/text" % TEST_PAPER, "/api/v1/papers/%s/pdf" % TEST_PAPER, "/llms.txt",
               "/llms-full.txt"]


def test_every_answer_is_cacheable_with_an_etag(catalog):
    for url in CACHED_URLS:
        r = catalog.get(url)
        assert r.status_code == 200, url
        assert r.headers["Cache-Control"] == CACHE_CONTROL, url
        assert re.fullmatch(r'W/"[0-9a-f]{16}"', r.headers["ETag"]), url
        assert r.headers["Access-Control-Allow-Origin"] == "*"
        assert catalog.get(url).headers["ETag"] == r.headers["ETag"]  # the same bytes, the same tag
    for url, status in (("/api/v1/models/nope", 404), ("/api/v1/search?q=x&per=0", 400),
                        ("/api/v1/papers/mmlu-paper/text", 403)):
        r = catalog.get(url)
        assert r.status_code == status and r.headers["Cache-Control"] == CACHE_CONTROL


def test_if_none_match_gives_304(catalog):
    for url in CACHED_URLS:
        etag = catalog.get(url).headers["ETag"]
        for header in (etag, etag[2:], '"other", ' + etag, "*"):
            r = catalog.get(url, headers={"If-None-Match": header})
            assert r.status_code == 304, (url, header)
            assert r.content == b""
            assert r.headers["ETag"] == etag and r.headers["Cache-Control"] == CACHE_CONTROL
        assert catalog.get(url, headers={"If-None-Match": 'W/"0000000000000000"'}).status_code == 200


def test_gzip_when_asked(catalog):
    for url in ("/api/v1/evals/mmlu", "/api/v1/search?q=model", "/llms.txt", "/api/v1/papers/%s/text" % TEST_PAPER):
        plain = catalog.get(url, headers={"Accept-Encoding": "identity"})
        assert "Content-Encoding" not in plain.headers
        r = requests.get(catalog.base + url, headers={"Accept-Encoding": "gzip"}, stream=True, timeout=HTTP_TIMEOUT)
        assert r.headers["Content-Encoding"] == "gzip", url
        assert "accept-encoding" in r.headers["Vary"].lower()
        raw = r.raw.read(decode_content=False)
        assert gzip.decompress(raw) == plain.content
        assert len(raw) < len(plain.content)
    pdf = catalog.get("/api/v1/papers/%s/pdf" % TEST_PAPER, headers={"Accept-Encoding": "gzip"})
    assert "Content-Encoding" not in pdf.headers


# ---- llms.txt ----

LINK_RE = re.compile(r"^- \[(?P<title>(?:[^\]\\]|\\.)+)\]\((?P<url>[^)]+)\): (?P<summary>.+)$")


def test_llms_txt_structure(catalog):
    r = catalog.get("/llms.txt")
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/plain; charset=utf-8"
    lines = r.text.split("\n")
    assert lines[0] == "# Relay catalog" and lines[1] == ""
    assert lines[2].startswith("> ") and lines[3] == ""
    headings = [l[3:] for l in lines if l.startswith("## ")]
    assert headings == ["Evals", "Models", "Tools", "Leaderboards", "Organizations", "People", "Capabilities",
                        "Papers"]
    section, seen = None, {}
    for line in lines[4:]:
        if line.startswith("## "):
            section = line[3:].lower()
            seen[section] = []
        elif line.startswith("- "):
            assert section is not None
            m = LINK_RE.match(line)
            assert m, line
            prefix = catalog.base + "/api/v1/" + section + "/"
            assert m.group("url").startswith(prefix), line
            seen[section].append((m.group("url")[len(prefix):], m.group("summary")))
        else:
            assert line == "" or section is None, line
    for t in TYPES:
        items = listing(catalog, t)
        assert sorted(slug for slug, _ in seen[t]) == sorted(i["slug"] for i in items)
        summaries = {i["slug"]: i["summary"] for i in items}
        assert all(summaries[slug] == summary for slug, summary in seen[t])
    assert catalog.get("/api/v1/evals/mmlu").status_code == 200


def test_llms_full_txt_inlines_details(catalog):
    r = catalog.get("/llms-full.txt")
    assert r.status_code == 200
    text = r.text
    assert text.startswith("# Relay catalog (full text)\n\n> ")
    total = sum(len(listing(catalog, t)) for t in TYPES)
    assert text.count("\n### ") == total
    block = text.split("\n### GPT-4\n", 1)[1].split("\n### ", 1)[0]
    assert catalog.base + "/api/v1/models/gpt-4 (models/gpt-4)" in block
    assert "- Organization: OpenAI (organizations/openai)" in block
    assert "MMLU: 86.4% (5-shot), reported at https://arxiv.org/abs/2303.08774" in block
    block = text.split("\n### SWE-bench Verified\n", 1)[1].split("\n### ", 1)[0]
    assert "- Top scores (" in block and "- Papers: SWE-bench: Can Language Models" in block
    assert len(r.content) > len(catalog.get("/llms.txt").content)


# ---- hidden sources ----

def test_hidden_entities_never_appear(catalog):
    hidden = hidden_entities()
    assert len(hidden) >= 5
    words = set()
    for t, slug, title in hidden:
        error_of(catalog.get("/api/v1/%s/%s" % (t, slug)), 404, "entity_not_found")
        words.update(w.lower() for w in WORD_RE.findall(title) if len(w) > 5)
        for q in (slug, title):
            assert search(catalog, q=q, per=30)["total"] == 0 or all(
                h["slug"] != slug for g in search(catalog, q=q, per=30)["results"].values() for h in g["hits"])
    assert {"zephyrquill", "quillmoss"} <= words
    for word in ("zephyrquill", "quillmoss"):
        assert search(catalog, q=word)["total"] == 0
    bodies = [catalog.get(u).text for u in ("/llms.txt", "/llms-full.txt", "/api/v1")]
    bodies += [catalog.get("/api/v1/" + t).text for t in TYPES]
    bodies += [json.dumps(d) for d in all_documents(catalog)]
    for body in bodies:
        low = body.lower()
        for t, slug, title in hidden:
            assert slug not in low and title.lower() not in low, slug
        assert "quillmoss" not in low and "zephyrquill" not in low
    # A visible model's score from a hidden source is gone too.
    gpt4o = catalog.get("/api/v1/models/gpt-4o").json()
    assert all(s["value"] != 97.7 for s in gpt4o["scores"])
    error_of(catalog.get("/api/v1/papers/zephyrquill-report/text"), 404, "entity_not_found")


# ---- the daemon ----

def test_import_errors_name_file_and_field(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(SOURCE, source)
    with open(source / "models.json", encoding="utf-8") as f:
        models = json.load(f)
    models["models"][2]["organization"] = "no-such-org"
    del models["models"][3]["released"]
    with open(source / "models.json", "w", encoding="utf-8") as f:
        json.dump(models, f)
    p = subprocess.run([CATALOGD, "--import", "--data", str(tmp_path / "data"), "--source", str(source)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert "models.json: models[3].released (%s): Required" % models["models"][3]["slug"] in p.stderr
    assert not os.path.exists(tmp_path / "data" / "catalog.db")
    models["models"][3]["released"] = "2024"
    with open(source / "models.json", "w", encoding="utf-8") as f:
        json.dump(models, f)
    p = subprocess.run([CATALOGD, "--import", "--data", str(tmp_path / "data"), "--source", str(source)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert ("models.json: models[2].organization (%s): no organization has the slug 'no-such-org'"
            % models["models"][2]["slug"]) in p.stderr


def test_import_command_builds_the_catalog(tmp_path):
    p = subprocess.run([CATALOGD, "--import", "--data", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout.split(": ", 1)[1])
    assert sum(summary["entities"].values()) >= 150 and summary["hidden"] >= 5
    assert os.path.exists(tmp_path / "catalog.db")


def test_imports_only_when_stale_and_stops_on_sigterm(catalogd_factory, tmp_path):
    source = tmp_path / "source"
    shutil.copytree(SOURCE, source)
    data = tmp_path / "data"
    first = catalogd_factory("--source", str(source), data=data)
    assert any(l.get("msg") == "imported the catalog" for l in first.log_lines())
    assert first.stop() == 0
    assert any(l.get("msg") == "stopped" for l in first.log_lines())
    for raw in first.log_text().splitlines():
        line = json.loads(raw)  # every log line is one JSON object
        assert {"time", "level", "msg"} <= set(line)

    second = catalogd_factory("--source", str(source), data=data)
    assert not any(l.get("msg") == "importing the catalog" for l in second.log_lines())
    assert second.get("/api/v1/evals/mmlu").status_code == 200
    assert second.stop() == 0

    # An edited source file makes the catalog stale: the next start imports it.
    with open(source / "capabilities.json", encoding="utf-8") as f:
        caps = json.load(f)
    caps["capabilities"].append({"slug": "juggling", "title": "Juggling", "summary": "Keeping things up."})
    with open(source / "capabilities.json", "w", encoding="utf-8") as f:
        json.dump(caps, f)
    third = catalogd_factory("--source", str(source), data=data)
    assert any(l.get("msg") == "importing the catalog" for l in third.log_lines())
    assert third.get("/api/v1/capabilities/juggling").json()["title"] == "Juggling"


def test_start_refuses_a_broken_source(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    (source / "broken.json").write_text("{\"models\": [{\"slug\": \"x\"}]}")
    p = subprocess.run([CATALOGD, "--listen", "127.0.0.1:0", "--data", str(tmp_path / "d"), "--source", str(source)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    problems = [json.loads(l) for l in p.stderr.splitlines() if "invalid catalog source" in l]
    assert problems and problems[0]["file"] == "broken.json" and problems[0]["field"].startswith("models[0].")


def test_command_line(tmp_path):
    p = subprocess.run([CATALOGD, "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "127.0.0.1:8090" in p.stdout and "--import" in p.stdout
    p = subprocess.run([CATALOGD, "--bogus"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "unknown argument" in p.stderr
    p = subprocess.run([CATALOGD, "--listen"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    p = subprocess.run([CATALOGD, "--version"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stdout.startswith("catalogd ")


def test_public_url_sets_llms_links(catalogd_factory):
    server = catalogd_factory("--public-url", "https://catalog.example.org/")
    text = server.get("/llms.txt").text
    assert "(https://catalog.example.org/api/v1/evals/mmlu)" in text
    assert server.base not in text


def test_sigterm_closes_idle_keep_alive_connections(catalogd_factory):
    import socket
    server = catalogd_factory()
    host, port = server.base[len("http://"):].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=HTTP_TIMEOUT) as sock:
        sock.sendall(b"GET /api/v1 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        assert server.stop() == 0  # the idle connection must not keep it from stopping cleanly
        assert time.monotonic() - started < 5
