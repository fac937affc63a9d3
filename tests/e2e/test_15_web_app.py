"""The web client's files as relayd serves them (docs/web.md): the page at /,
/pair and /login, versioned files cached for a year, the rest revalidated by
ETag, gzip, a strict Content-Security-Policy, the public settings at
/v1/web/config, and the settings that shape them.
"""
import gzip
import json
import os
import re
import stat

import requests

from relaylib import assert_error, assert_ok, run_relayd

VERSION_RE = re.compile(r"/app/([0-9a-f]{12})/main\.js")


def version_of(relay):
    return VERSION_RE.search(relay.get("/").text).group(1)


def test_the_page_and_its_policy(relay):
    r = relay.get("/", headers={"Accept-Encoding": "identity"})
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    csp = r.headers["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["connect-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in csp
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["X-Frame-Options"] == "DENY"
    assert r.headers["Referrer-Policy"] == "no-referrer"
    assert r.headers["Cache-Control"] == "no-cache"
    assert re.match(r'^"[0-9a-f]{16}"$', r.headers["ETag"]), r.headers["ETag"]
    # The page links nothing outside the relay's origin.
    assert not re.search(r'(src|href)="(https?:)?//', r.text), r.text
    # /pair and /login are the same page: the app reads their query and fragment.
    for path in ("/pair?code=ABCDEFG", "/login"):
        other = relay.get(path, headers={"Accept-Encoding": "identity"})
        assert other.status_code == 200 and other.text == r.text, path


def test_revalidation_and_compression(relay):
    plain = relay.get("/", headers={"Accept-Encoding": "identity"})
    assert relay.get("/", headers={"If-None-Match": plain.headers["ETag"], "Accept-Encoding": "identity"}).status_code == 304
    assert relay.get("/", headers={"If-None-Match": 'W/"x", ' + plain.headers["ETag"],
                                   "Accept-Encoding": "identity"}).status_code == 304
    assert relay.get("/", headers={"If-None-Match": '"nope"'}).status_code == 200
    # requests decodes gzip itself: read the raw bytes.
    raw = requests.get(relay.url("/"), headers={"Accept-Encoding": "gzip"}, stream=True, timeout=10)
    assert raw.headers["Content-Encoding"] == "gzip"
    assert raw.headers["Vary"] == "Accept-Encoding"
    assert raw.headers["ETag"] != plain.headers["ETag"], "each encoding has its own validator"
    body = raw.raw.read()
    assert len(body) < len(plain.content)
    assert gzip.decompress(body) == plain.content
    refused = requests.get(relay.url("/"), headers={"Accept-Encoding": "gzip;q=0, identity"}, stream=True, timeout=10)
    assert "Content-Encoding" not in refused.headers


def test_versioned_files_are_immutable_and_other_versions_are_not_found(relay):
    version = version_of(relay)
    for name, kind in (("main.js", "text/javascript"), ("app.css", "text/css"), ("icon.svg", "image/svg+xml"),
                       ("icon-192.png", "image/png")):
        r = relay.get("/app/%s/%s" % (version, name))
        assert r.status_code == 200, name
        assert r.headers["Content-Type"].startswith(kind), (name, r.headers["Content-Type"])
        assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert relay.get("/app/000000000000/main.js").status_code == 404
    assert relay.get("/app/%s/nothing.js" % version).status_code == 404
    assert relay.get("/app/%s/main.js/" % version).status_code == 404
    assert relay.get("/favicon.ico").status_code == 404
    r = relay.post("/", {})
    assert r.status_code == 405 and r.headers["Allow"] == "GET"


def test_service_worker_and_manifest(relay):
    version = version_of(relay)
    sw = relay.get("/sw.js")
    assert sw.status_code == 200 and sw.headers["Content-Type"].startswith("text/javascript")
    assert "Content-Security-Policy" in sw.headers
    assert sw.headers["Cache-Control"] == "no-cache"
    assert "const VERSION = '%s';" % version in sw.text
    manifest = relay.get("/manifest.webmanifest")
    assert manifest.headers["Content-Type"] == "application/manifest+json"
    doc = json.loads(manifest.text)
    assert doc["display"] == "standalone" and doc["start_url"] == "/"
    sizes = {icon["sizes"] for icon in doc["icons"]}
    assert {"192x192", "512x512"} <= sizes
    for icon in doc["icons"]:
        assert relay.get(icon["src"]).status_code == 200, icon


def test_config_for_the_embedded_issuer_and_the_vapid_key(relay):
    config = assert_ok(relay.get("/v1/web/config"))
    assert config["auth"] == {"mode": "embedded"}
    assert re.match(r"^[0-9a-f]{12}$", config["version"])
    key = config["push"]["vapid_public_key"]
    assert re.match(r"^B[A-Za-z0-9_-]{86}$", key), key
    path = os.path.join(str(relay.data), "vapid.key")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    # Created once: a restart keeps it, so the browsers' subscriptions stay valid.
    relay.restart()
    assert assert_ok(relay.get("/v1/web/config"))["push"]["vapid_public_key"] == key


def test_config_with_an_identity_provider(relayd, tmp_path):
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}))
    relay = relayd("--jwks-file", str(jwks), "--jwt-issuer", "https://id.example.org/realm", "--jwt-audience", "relay-web",
                   "--oidc-client-id", "relay-web", "--web-connect-src", "https://tokens.example.net")
    config = assert_ok(relay.get("/v1/web/config"))
    assert config["auth"] == {"mode": "oidc", "issuer": "https://id.example.org/realm", "client_id": "relay-web",
                              "scope": "openid offline_access", "token": "id_token"}
    csp = relay.get("/").headers["Content-Security-Policy"]
    assert "connect-src 'self' https://id.example.org https://tokens.example.net" in csp
    # Sign-in links belong to the embedded issuer.
    assert_error(relay.post("/v1/login/exchange", {"code": "abc"}), 403, "permission_denied")


def test_bad_web_settings_are_refused(relayd, tmp_path):
    proc = run_relayd(["--data", str(tmp_path / "d1"), "--push-endpoints", "sometimes"])
    assert proc.returncode == 2 and "--push-endpoints" in proc.stderr
    proc = run_relayd(["--data", str(tmp_path / "d2"), "--oidc-client-id", "web"])
    assert proc.returncode == 2 and "--jwt-issuer" in proc.stderr
    relay = relayd("--web-connect-src", "javascript:alert(1)", start=False)
    relay.start(expect_ready=False)
    assert relay.wait_exit(15) == 1
    assert "--web-connect-src" in relay.log_text()


def test_nodes_of_one_relay_push_with_the_same_vapid_key(relayd, tmp_path):
    # Browsers bind their subscriptions to one key: it lives in the store with the other signing keys.
    store = "sqlite:%s" % os.path.join(str(tmp_path), "shared.db")
    a = relayd("--store", store)
    b = relayd("--store", store)
    key_a = assert_ok(a.get("/v1/web/config"))["push"]["vapid_public_key"]
    assert assert_ok(b.get("/v1/web/config"))["push"]["vapid_public_key"] == key_a
    with open(os.path.join(str(a.data), "vapid.key"), "rb") as fa, open(os.path.join(str(b.data), "vapid.key"), "rb") as fb:
        assert fa.read() == fb.read()
