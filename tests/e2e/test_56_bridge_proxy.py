"""relay-bridge through an HTTP proxy: the socket tunnels with CONNECT (as it
would under HTTPS_PROXY for an https:// relay), the REST calls go through the
proxy too. The proxy is a small one written here."""
import select
import socket
import threading

from test_50_bridge_support import paired


class Proxy:
    def __init__(self):
        self.seen = []
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.url = "http://127.0.0.1:%d" % self.listener.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(65536)
            if not chunk:
                conn.close()
                return
            head += chunk
        line = head.split(b"\r\n", 1)[0].decode()
        method, target, _ = line.split(" ", 2)
        self.seen.append((method, target))
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            rest = head.split(b"\r\n\r\n", 1)[1]
        else:
            # absolute-form (http://host:port/path): one request per connection, passed on in
            # origin-form with "Connection: close", so the answer ends with the connection
            hostport = target.split("/")[2]
            host, port = hostport.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            lines, body = head.split(b"\r\n\r\n", 1)
            lines = lines.split(b"\r\n")
            path = "/" + target.split("/", 3)[3] if target.count("/") >= 3 else "/"
            lines[0] = ("%s %s HTTP/1.1" % (method, path)).encode()
            lines = [l for l in lines if not l.lower().startswith((b"connection:", b"proxy-connection:"))]
            rest = b"\r\n".join(lines + [b"Connection: close"]) + b"\r\n\r\n" + body
        if rest:
            upstream.sendall(rest)
        self._pipe(conn, upstream)

    def _pipe(self, a, b):
        try:
            while True:
                ready, _, _ = select.select([a, b], [], [], 30)
                if not ready:
                    break
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
        except OSError:
            pass
        finally:
            a.close()
            b.close()

    def close(self):
        self.stopped = True
        self.listener.close()


def test_the_socket_and_the_calls_go_through_the_proxy(relay, user_token, tmp_path):
    proxy = Proxy()
    bridge, user = paired(relay, user_token, tmp_path)
    bridge.start("exec:cat", env={"http_proxy": proxy.url, "HTTPS_PROXY": proxy.url, "NO_PROXY": "",
                                  "no_proxy": ""})
    try:
        session = user.create_session()
        interaction = user.send(session, "via proxy")
        assert user.wait_reply(session, interaction)["text"] == "via proxy"
        assert ("CONNECT", "127.0.0.1:%d" % relay.port) in proxy.seen, proxy.seen
        assert any(m == "POST" and t.endswith("/v1/bridge/sendMessage") for m, t in proxy.seen), proxy.seen
    finally:
        assert bridge.stop() == 0
        proxy.close()
