"""relayd serving HTTPS itself (--tls-cert, --tls-key): the API over HTTP/1.1 and HTTP/2 by ALPN,
the event stream, the bridge's REST calls and wss:// socket and the relay CLI through a private CA
(CURL_CA_BUNDLE), bad settings refused at start, SIGHUP picking up a renewed certificate, and
catalogd with its command-line client on the same terms."""
import datetime
import ipaddress
import os
import shutil
import signal
import socket
import ssl
import subprocess

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from catalog_fixtures import CATALOG_CLI, Catalogd
from relaylib import SLOW, assert_ok, bearer, mint_token, run_relayd, wait_until
from test_50_bridge_support import WAIT, paired
from test_60_relay_cli import Cli


def _name(common):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class Pki:
    """A private CA and server certificates for 127.0.0.1 and localhost, as PEM files."""

    def __init__(self, folder):
        self.folder = folder
        folder.mkdir(exist_ok=True)
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.ca_cert = (x509.CertificateBuilder().subject_name(_name("relay test CA")).issuer_name(_name("relay test CA"))
                        .public_key(self.ca_key.public_key()).serial_number(1)
                        .not_valid_before(now - datetime.timedelta(hours=1))
                        .not_valid_after(now + datetime.timedelta(days=2))
                        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                        .sign(self.ca_key, hashes.SHA256()))
        self.ca = folder / "ca.pem"
        self.ca.write_bytes(self.ca_cert.public_bytes(serialization.Encoding.PEM))

    def server(self, serial, name="server"):
        """Writes NAME.pem (leaf then CA: a chain) and NAME.key; returns their paths."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(_name("relay test server")).issuer_name(self.ca_cert.subject)
                .public_key(key.public_key()).serial_number(serial)
                .not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                            x509.DNSName("localhost")]), critical=False)
                .sign(self.ca_key, hashes.SHA256()))
        cert_path, key_path = self.folder / (name + ".pem"), self.folder / (name + ".key")
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM) +
                              self.ca_cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(_key_pem(key))
        return cert_path, key_path


@pytest.fixture
def pki(tmp_path):
    return Pki(tmp_path / "pki")


@pytest.fixture
def tls_relay(relayd, pki):
    cert, key = pki.server(2)
    return relayd("--tls-cert", str(cert), "--tls-key", str(key), ca=pki.ca)


def _peer_serial(relay, ca):
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", relay.port), timeout=10 * SLOW) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def _curl(*args, timeout=30):
    curl = shutil.which("curl")
    if curl is None:
        pytest.fail("this test needs curl (Debian package curl)")
    return subprocess.run([curl, "-sS"] + list(args), capture_output=True, text=True, timeout=timeout * SLOW)


def test_https_serves_the_api_over_http1_and_http2(tls_relay, pki):
    relay = tls_relay
    assert relay.url("/").startswith("https://")
    token = mint_token(relay.data, "alice")
    me = assert_ok(relay.get("/v1/me", headers=bearer(token)))
    assert me["user"]["id"] == "alice"
    for flag, version in (("--http2", "2"), ("--http1.1", "1.1")):
        out = _curl(flag, "--cacert", str(pki.ca), "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
                    "-H", "Authorization: Bearer " + token, relay.url("/v1/me"))
        assert out.returncode == 0, out.stderr
        assert out.stdout == "%s 200" % version, out.stdout
    # without the CA the certificate is not trusted: the client refuses, nothing is served
    out = _curl("-o", "/dev/null", relay.url("/healthz"))
    assert out.returncode == 60, (out.returncode, out.stderr)
    # relayd login-link beside it names the address it serves, https included (issue 35, item 4).
    with open(os.path.join(str(relay.data), "relayd.url")) as f:
        assert f.read() == relay.url("") + "\n"


def test_event_stream_over_tls_and_http2(tls_relay, pki):
    relay = tls_relay
    token = mint_token(relay.data, "alice")
    # curl gives up after 3 s (exit 28), by when the stream has said hello
    out = _curl("--http2", "--cacert", str(pki.ca), "-N", "-i", "-m", "3", "-H", "Authorization: Bearer " + token,
                relay.url("/v1/me/stream"), timeout=60)
    assert out.returncode == 28, (out.returncode, out.stderr)
    assert out.stdout.startswith("HTTP/2 200"), out.stdout[:200]
    assert "content-type: text/event-stream" in out.stdout.lower()
    assert "event: hello" in out.stdout


def test_plain_http_on_the_tls_port_gets_no_answer_and_harms_nothing(tls_relay):
    relay = tls_relay
    with socket.create_connection(("127.0.0.1", relay.port), timeout=10 * SLOW) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        got = b""
        try:
            while len(got) < 4096:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        except (ConnectionResetError, socket.timeout):
            pass
    assert not got.startswith(b"HTTP/"), got[:100]
    assert relay.get("/healthz").status_code == 200


def test_bad_tls_settings_are_refused_at_start(tmp_path, pki):
    cert, key = pki.server(3)
    _, other_key = pki.server(4, name="other")
    missing = tmp_path / "nothing.pem"
    cases = [
        (["--tls-cert", str(cert)], "--tls-cert and --tls-key go together"),
        (["--tls-key", str(key)], "--tls-cert and --tls-key go together"),
        (["--tls-cert", str(cert), "--tls-key", str(other_key)], "does not match"),
        (["--tls-cert", str(missing), "--tls-key", str(key)], "cannot load the certificate chain"),
        (["--tls-cert", str(cert), "--tls-key", str(missing)], "cannot load the private key"),
    ]
    for n, (flags, message) in enumerate(cases):
        data = tmp_path / ("data%d" % n)
        proc = run_relayd(["--listen", "127.0.0.1:0", "--data", str(data)] + flags)
        assert proc.returncode == 1, (flags, proc.returncode, proc.stderr[-2000:])
        assert message in proc.stderr, (flags, proc.stderr[-2000:])
        assert not data.exists(), "a refused start left %s behind" % data
        # the private key's contents never reach the log
        assert "PRIVATE KEY" not in proc.stderr


def _accept_backlog(port):
    """Connections the kernel completed on 127.0.0.1:port that relayd has not accepted yet (the listening
    socket's receive queue in /proc/net/tcp)."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if state == "0A" and int(local.split(":")[1], 16) == port:
                return int(queues.split(":")[1], 16)
    raise AssertionError("no listening socket on port %d" % port)


def test_sighup_reloads_a_renewed_certificate(relayd, pki):
    cert, key = pki.server(10, name="live")
    relay = relayd("--tls-cert", str(cert), "--tls-key", str(key), ca=pki.ca)
    assert _peer_serial(relay, pki.ca) == 10
    # accepted before the reload, its ClientHello sent after: h2o starts its TLS state only then
    early = socket.create_connection(("127.0.0.1", relay.port), timeout=10 * SLOW)
    # The kernel completes the connection at once; relayd's accept may come later on a loaded machine (after
    # the reload, which then rightly hands it the new certificate): wait until nothing waits in the backlog.
    wait_until(lambda: _accept_backlog(relay.port) == 0, WAIT, interval=0.01, what="relayd accepting the connection")

    renewed_cert, renewed_key = pki.server(11, name="renewed")
    os.replace(renewed_cert, cert)
    os.replace(renewed_key, key)
    relay.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: _peer_serial(relay, pki.ca) == 11, WAIT, what="the renewed certificate")
    assert "TLS certificate reloaded" in relay.log_text()
    with ssl.create_default_context(cafile=str(pki.ca)).wrap_socket(early, server_hostname="127.0.0.1") as tls:
        assert x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number == 10

    # a broken renewal is refused and the working certificate stays
    cert.write_text("not a certificate\n")
    relay.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "cannot load the certificate chain" in relay.log_text(), WAIT, what="the refusal in the log")
    assert _peer_serial(relay, pki.ca) == 11
    assert relay.get("/healthz").status_code == 200
    assert relay.stop() == 0


def test_bridge_and_relay_cli_over_tls(tls_relay, pki, tmp_path, monkeypatch):
    """The real relay-bridge pairs over https, holds its wss:// socket and answers; the relay CLI
    sends over https and reads the reply off the event stream, all trusting the private CA."""
    relay = tls_relay
    monkeypatch.setenv("CURL_CA_BUNDLE", str(pki.ca))
    token = mint_token(relay.data, "alice")
    bridge, user = paired(relay, token, tmp_path)
    bridge.start("exec:cat")
    try:
        session = user.create_session()
        interaction = user.send(session, "hello over tls")
        assert user.wait_reply(session, interaction)["text"] == "hello over tls"

        cli = Cli(tmp_path, extra_env={"CURL_CA_BUNDLE": str(pki.ca)})
        cli.login(relay)
        send = cli.start("send", session, "and once more")
        assert send.finish() == 0, (send.lines, send.stderr)
        done = send.events("done")[0]["data"]
        assert done["status"] == "final" and done["text"] == "and once more", done
        history = cli.json("history", session)["messages"]
        assert [m["text"] for m in history if m["role"] == "agent"] == ["hello over tls", "and once more"]  # oldest first
    finally:
        assert bridge.stop() == 0

    # without the CA the bridge refuses the relay's certificate and says so
    monkeypatch.delenv("CURL_CA_BUNDLE")
    (tmp_path / "stranger").mkdir()
    stranger = Cli(tmp_path / "stranger")
    proc = stranger.run("login", "--server", relay.url(""), "--token", token)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    # Piped, the error is the JSON object on stdout; an untrusted certificate is not retried.
    assert "certificate" in (proc.stdout + proc.stderr).lower(), (proc.stdout, proc.stderr)
    assert "retrying" not in proc.stderr, proc.stderr


def test_catalogd_and_its_client_over_tls(tmp_path, pki):
    cert, key = pki.server(20, name="catalog")
    server = Catalogd(str(tmp_path / "catalog-data"), tmp_path / "catalogd.log",
                      args=["--tls-cert", str(cert), "--tls-key", str(key)]).start()
    try:
        assert server.base.startswith("https://")
        r = server.get("/api/v1", verify=str(pki.ca))
        assert r.status_code == 200 and r.headers["Cache-Control"] == "public, max-age=3600"
        # llms.txt links point at the https address the catalog was reached on
        assert "(%s/api/v1/" % server.base in server.get("/llms.txt", verify=str(pki.ca)).text
        env = {k: v for k, v in os.environ.items() if k != "CATALOG_BASE"}
        env.update({"CATALOG_BASE": server.base, "CURL_CA_BUNDLE": str(pki.ca)})
        proc = subprocess.run([CATALOG_CLI, "search", "gpqa", "--json"], capture_output=True, text=True,
                              timeout=30 * SLOW, env=env)
        assert proc.returncode == 0, proc.stderr
        assert '"query":"gpqa"' in proc.stdout.replace(" ", "")
    finally:
        assert server.stop() == 0
