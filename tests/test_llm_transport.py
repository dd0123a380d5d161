"""The engine workers' HTTP transport (`StdlibTransport`): kept-alive connections are reused,
one the server closed meanwhile never carries a request (a request is sent once, never again
by the transport), and many threads share one transport. The wire outcomes over it (faults
included) are `test_llm_clients.py`'s, which runs every test over both transports."""
import shutil
import socket
import ssl
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from experiments.core.llm.transport import StdlibTransport
from experiments.execution import jobs
from tests.llm_fake_server import running_fake_llm


class ClosingServer:
    """Answers one request per connection (keep-alive, as far as the client can tell), then
    closes the connection a moment later, as a server's idle timeout does."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests = 0
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests += 1
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n"
                             b'{"ok":true}')
                time.sleep(0.05)

    def close(self):
        self.listener.close()


@pytest.fixture
def transport():
    transport = StdlibTransport()
    yield transport
    transport.close()


def test_a_connection_the_server_closed_while_idle_never_carries_a_request(transport):
    server = ClosingServer()
    try:
        with httpx.Client(transport=transport, trust_env=False) as client:
            url = f"http://127.0.0.1:{server.port}/v1/chat/completions"
            assert client.post(url, content=b"{}", timeout=5).status_code == 200
            time.sleep(0.3)  # the server has closed that connection by now
            assert client.post(url, content=b"{}", timeout=5).status_code == 200
        assert server.requests == 2 and server.connections == 2  # each sent once, the second on a new connection
    finally:
        server.close()


def test_kept_alive_connections_are_reused_and_many_threads_share_the_transport(transport):
    with running_fake_llm() as server, httpx.Client(transport=transport, trust_env=False) as client:
        url = server.openai_base_url.rstrip("/") + "/chat/completions"
        body = b'{"model": "gpt-test-1", "messages": [{"role": "user", "content": "Hello?"}]}'

        def post(_):
            response = client.post(url, content=body, headers={"content-type": "application/json"}, timeout=5)
            return response.status_code, response.json()["choices"][0]["message"]["content"]

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(post, range(80)))
        assert all(status == 200 and text for status, text in results)
        assert len(server.requests) == 80  # every request arrived once
        idle = sum(len(connections) for connections in transport._idle.values())
        assert 1 <= idle <= 8  # at most one connection per thread at a time, all kept for the next requests


def test_the_engine_workers_client_uses_it():
    assert isinstance(jobs.http_client()._transport, StdlibTransport)


@pytest.mark.parametrize("transport_kind", ["httpx", "stdlib"])
def test_an_illegal_header_is_an_httpx_error_and_sends_nothing(transport_kind):
    """As over httpx's own transport (a configuration error, never a crash of the slot's job);
    this transport never quotes the value, which may hold a key."""
    transport = StdlibTransport() if transport_kind == "stdlib" else None
    with running_fake_llm() as server, httpx.Client(transport=transport, trust_env=False) as client:
        url = server.openai_base_url.rstrip("/") + "/chat/completions"
        with pytest.raises(httpx.HTTPError) as raised:
            client.post(url, content=b"{}", headers={"authorization": "Bearer sk-secret\r\nx-injected: 1"}, timeout=5)
        assert server.requests == []
        if transport_kind == "stdlib":
            assert "sk-secret" not in str(raised.value) and "authorization" in str(raised.value)


def _self_signed(tmp_path):
    """A certificate for 127.0.0.1, made by the openssl command."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_https_is_verified_and_its_connections_reused(tmp_path):
    cert, key = _self_signed(tmp_path)
    with running_fake_llm() as server:
        server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_context.load_cert_chain(cert, key)
        server.socket = server_context.wrap_socket(server.socket, server_side=True)
        accepted = []
        accept = server.get_request
        server.get_request = lambda: accepted.append(1) or accept()
        url = f"https://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
        body = b'{"model": "gpt-test-1", "messages": [{"role": "user", "content": "Hello?"}]}'
        trusted = StdlibTransport(ssl_context=ssl.create_default_context(cafile=str(cert)))
        with httpx.Client(transport=trusted, trust_env=False) as client:
            for _ in range(3):
                assert client.post(url, content=body, timeout=5).json()["choices"][0]["message"]["content"]
            assert len(trusted._idle[("https", "127.0.0.1", server.server_address[1])]) == 1
        assert len(accepted) == 1  # three requests over one TLS connection (TLS 1.3's tickets do not spoil it)
        with httpx.Client(transport=StdlibTransport(), trust_env=False) as client:  # httpx's CA bundle: refused
            with pytest.raises(httpx.ConnectError):
                client.post(url, content=body, timeout=5)
        assert len(server.requests) == 3
