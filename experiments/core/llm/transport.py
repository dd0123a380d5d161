"""An httpx transport on the standard library's `http.client`: the engine workers' HTTP/1.1.

httpx's own transport (httpcore and h11) spends about 1.3 ms of CPU on one request and its
response on this project's 2-core machines, and its connection pool scans every connection of
the pool under a lock on each request; `http.client` needs about half of that, and an idle
connection is taken from a list. At a hundred calls a second that is a tenth of a core, on the
path of every request. The client above it is still `httpx.Client`: its timeouts,
headers, content decoding, proxies from the environment (mounted by httpx, not through this
transport) and exceptions are those the rest of the code knows.

What the journal relies on holds as with httpx's transport: one `handle_request` sends the
request once and never again (a kept-alive connection the server closed meanwhile is found
before sending, never by a failed send that would be repeated); every failure becomes the
exception httpx raises for it (before any response: a timeout or network error, response-free;
while the body is read: a read error, the response already counts as received).

`stream` is `httpx.Client.stream` for the engine's one attempt, without httpx's per-request
URL parsing, header merging, auth, redirect and cookie steps (the same bytes on the wire).

Imports no Django.
"""
from __future__ import annotations

import contextlib
import dataclasses
import email.parser
import http.client
import re
import select
import socket
import ssl
import threading
import weakref
from collections.abc import Iterator

import httpx

READ_CHUNK = 65536


class StdlibTransport(httpx.BaseTransport):
    """HTTP/1.1 over `http.client` connections, kept alive and reused (thread-safe)."""

    def __init__(self, *, max_idle_per_origin: int = 64, ssl_context: ssl.SSLContext | None = None):
        self.max_idle_per_origin = max_idle_per_origin
        self._ssl_context = ssl_context
        self._idle: dict[tuple[str, str, int], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{url.scheme}://'.")
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        timeouts = request.extensions.get("timeout", {})
        body = request.read()
        connection = self._connection(origin, timeouts.get("connect"))
        try:
            response = self._exchange(connection, request, body, timeouts)
        except BaseException:
            connection.close()
            raise
        return httpx.Response(
            response.status,
            headers=[(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.getheaders()],
            stream=_ResponseBody(self, origin, connection, response),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": response.reason.encode("latin-1", "replace")},
        )

    def _exchange(self, connection, request: httpx.Request, body: bytes, timeouts) -> http.client.HTTPResponse:
        target = request.url.raw_path.decode("ascii")
        try:
            connection.sock.settimeout(timeouts.get("write"))
            connection.putrequest(request.method, target, skip_host=True, skip_accept_encoding=True)
            for name, value in request.headers.raw:
                try:
                    connection.putheader(name, value)
                except ValueError:  # a line break in a header: its value (maybe a key) is never quoted
                    raise httpx.LocalProtocolError(f"illegal header {name.decode('latin-1')!r}") from None
            connection.endheaders(body or None)
        except TimeoutError as exc:
            raise httpx.WriteTimeout(str(exc) or "timed out while sending the request") from exc
        except OSError as exc:
            raise httpx.WriteError(str(exc) or type(exc).__name__) from exc
        try:
            connection.sock.settimeout(timeouts.get("read"))
            return connection.getresponse()
        except TimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "timed out waiting for the response") from exc
        except (http.client.RemoteDisconnected, http.client.BadStatusLine) as exc:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__) from exc

    def _connection(self, origin, connect_timeout) -> http.client.HTTPConnection:
        with self._lock:
            idle = self._idle.get(origin, [])
            while idle:
                connection = idle.pop()
                if _still_open(connection):
                    return connection
                connection.close()
        scheme, host, port = origin
        if scheme == "https":
            connection = _HTTPSConnection(host, port, timeout=connect_timeout,
                                                     context=self._ssl_context or _default_ssl_context())
        else:
            connection = _HTTPConnection(host, port, timeout=connect_timeout)
        try:
            connection.connect()
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "timed out while connecting") from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def _keep(self, origin, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault(origin, [])
            if not self._closed and len(idle) < self.max_idle_per_origin:
                idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections = [c for idle in self._idle.values() for c in idle]
            self._idle.clear()
        for connection in connections:
            connection.close()


# A header line the email parser `http.client` uses would read as one plain "name: value" line
# (a name of printable ASCII without colon; no line break but the last; not a continuation).
_PLAIN_HEADER = re.compile(r"([\x21-\x39\x3b-\x7e]+):[ \t]*([^\r\n]*)\r?\n")


def parse_headers(fp) -> http.client.HTTPMessage:
    """`http.client.parse_headers`, the same message, for a sixth of its CPU when every line is a
    plain "name: value" (what services send); any other header block goes to the email parser."""
    lines = http.client._read_headers(fp)
    message = http.client.HTTPMessage()
    for line in lines[:-1]:
        plain = _PLAIN_HEADER.fullmatch(line.decode("iso-8859-1"))
        if plain is None:
            return email.parser.Parser(_class=http.client.HTTPMessage).parsestr(
                b"".join(lines).decode("iso-8859-1"))
        message[plain[1]] = plain[2]
    return message


class _Response(http.client.HTTPResponse):
    """`http.client.HTTPResponse` whose headers are read by `parse_headers` above: the email
    parser was a third of a request's CPU in `http.client`. `begin` is the standard library's
    (Python 3.11), but for that call."""

    def begin(self):
        if self.headers is not None:
            return
        while True:  # read until a response other than 100 Continue
            version, status, reason = self._read_status()
            if status != http.client.CONTINUE:
                break
            http.client._read_headers(self.fp)
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = parse_headers(self.fp)
        tr_enc = self.headers.get("transfer-encoding")
        self.chunked = bool(tr_enc and tr_enc.lower() == "chunked")
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()
        self.length = None
        length = self.headers.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:  # nonsensical negative lengths are ignored
                    self.length = None
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or 100 <= status < 200 \
                or self._method == "HEAD":
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True


class _HTTPConnection(http.client.HTTPConnection):
    response_class = _Response


class _HTTPSConnection(http.client.HTTPSConnection):
    response_class = _Response


def _still_open(connection: http.client.HTTPConnection) -> bool:
    """An idle kept-alive connection is readable only when its server closed it (or sent
    something unasked): then it must not carry a request, which would fail after being sent."""
    sock = connection.sock
    if sock is None:
        return False
    poller = select.poll()  # (select.select fails on descriptors above 1024)
    try:
        poller.register(sock, select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


_SSL_CONTEXT: ssl.SSLContext | None = None


def _default_ssl_context() -> ssl.SSLContext:
    """httpx's own default verification (its CA bundle and settings), made once."""
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        _SSL_CONTEXT = httpx.create_ssl_context()
    return _SSL_CONTEXT


class _ResponseBody(httpx.SyncByteStream):
    """The body as it arrives (`read1`: whatever is there, so a caller can check its own
    deadline between chunks); the connection goes back to the pool once the body was read to
    its end and the server keeps it open."""

    def __init__(self, transport: StdlibTransport, origin, connection, response):
        self._transport, self._origin = transport, origin
        self._connection, self._response = connection, response
        self._complete = False

    def __iter__(self) -> Iterator[bytes]:
        response = self._response
        while True:
            try:
                chunk = response.read1(READ_CHUNK)
            except TimeoutError as exc:
                raise httpx.ReadTimeout(str(exc) or "timed out reading the response") from exc
            except http.client.IncompleteRead as exc:
                raise httpx.RemoteProtocolError("peer closed connection without sending complete message body") from exc
            except (OSError, http.client.HTTPException) as exc:
                raise httpx.ReadError(str(exc) or type(exc).__name__) from exc
            if not chunk:
                if response.length:  # (read1, unlike read, does not call a short body incomplete)
                    raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")
                # The body's end: http.client leaves a response of known length open after
                # its last byte; closed, its connection may carry the next request.
                response.close()
                self._complete = True
                return
            yield chunk

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        response = self._response
        if self._complete and response.isclosed() and not response.will_close:
            self._transport._keep(self._origin, connection)
        else:
            response.close()
            connection.close()


# Per client: a request shape (method, URL, headers, timeout) → what httpx's `build_request` made
# of it (`_Shape`). Weak, so a client closed and dropped takes its shapes with it.
_SHAPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SHAPES_PER_CLIENT = 1024  # distinct URLs × keys × timeouts of one worker: a handful in practice


@dataclasses.dataclass(frozen=True)
class _Shape:
    url: httpx.URL
    headers: httpx.Headers  # as httpx's `build_request` made them, but the last, Content-Length
    extensions: dict
    transport: httpx.BaseTransport


@contextlib.contextmanager
def stream(client: httpx.Client, method: str, url: str, body: bytes, headers: dict, timeout_s: float):
    """`client.stream(method, url, content=body, headers=headers, timeout=timeout_s)` for the engine's
    one attempt (`client.send`): the same bytes on the wire, for about a third of its CPU.

    httpx parses the URL, merges the client's headers and builds the request's own (Host,
    Content-Length) anew for every request, then goes through its auth, redirect and cookie
    steps, none of which does anything for a request to a model's API; here the request's URL,
    headers and timeouts are what `build_request` made of the first request of the same shape, with
    this body's length, and the request goes to the transport `client.send` would use. Cookies
    are neither sent nor stored, so a retry is the identical request even when a service sets
    one. A client with auth, event hooks or redirects followed, credentials in the URL or cookies
    of its own takes httpx's full path."""
    shape = _shape(client, method, url, body, headers, timeout_s) if body else None
    if shape is None:
        with client.stream(method, url, content=body, headers=headers, timeout=timeout_s) as response:
            yield response
        return
    request_headers = httpx.Headers(shape.headers)
    request_headers["Content-Length"] = str(len(body))
    request = httpx.Request(method, shape.url, headers=request_headers, stream=httpx.ByteStream(body),
                            extensions=dict(shape.extensions))
    response = shape.transport.handle_request(request)
    response.request = request
    try:
        yield response
    finally:
        response.close()


def _shape(client: httpx.Client, method: str, url: str, body: bytes, headers: dict, timeout_s: float) -> _Shape | None:
    if client.is_closed or client.auth is not None or client.follow_redirects or any(client.event_hooks.values()) \
            or len(client.cookies.jar):
        return None
    shapes = _SHAPES.get(client)
    if shapes is None:
        shapes = _SHAPES[client] = {}
    key = (method, url, tuple(headers.items()), timeout_s)
    shape = shapes.get(key, False)
    if shape is False:
        built = client.build_request(method, url, content=body, headers=headers, timeout=timeout_s)
        raw = built.headers.raw
        shape = None
        # Content-Length comes last (httpx adds it after the client's and the caller's headers);
        # a URL with credentials would take httpx's basic auth.
        if raw and raw[-1][0].lower() == b"content-length" and not built.url.userinfo:
            shape = _Shape(built.url, httpx.Headers(raw[:-1]), built.extensions, client._transport_for_url(built.url))
        if len(shapes) >= _SHAPES_PER_CLIENT:
            shapes.clear()
        shapes[key] = shape
    return shape
