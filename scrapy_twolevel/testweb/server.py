"""A Twisted server for the test web: one listener per host address, plus a control endpoint.

It speaks just enough HTTP/1.1 (GET/HEAD, no request bodies) to simulate what a two-level
scheduler cares about: per-connection set-up cost, per-response latency, keep-alive limits,
HTTP/1.0-style hosts, redirects to other hosts, hosts that hang, refuse or reset connections
(see :data:`~.web.FAILURES`), and, above all, to *count* what a crawler did to each host (open
connections, concurrent requests, response order) so tests can check politeness from the
server's side. ``twisted.web`` is deliberately not used: it hides connection handling.

A host is known by the local address a connection arrived on, so names and aliases resolved
to that address need nothing here; the ``Host`` header is only checked (421 when it names
another host), so a resolver that sends a name to the wrong address shows up in the stats.

The reactor is resolved lazily in :meth:`TestWebServer.start`, so importing this module never
installs a reactor (Scrapy must be free to install the asyncio one first).
"""

from __future__ import annotations

import json
import math
import socket
import struct
import time
import zlib
from collections import deque
from collections.abc import Callable
from functools import lru_cache
from html import escape
from typing import Any, NamedTuple

from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IDelayedCall, IListeningPort, IReactorTCP, ITCPTransport
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure

from .stats import HostStats, ResponseEvent, ServerStats, fetch_remote_stats
from .web import (
    BROKEN_PATH,
    CONTROL_ADDRESS,
    FILES_PREFIX,
    SITEMAP_PATH,
    SLOW_BODY_PATH,
    SLOW_BODY_SECONDS,
    UNAVAILABLE_PATH,
    HostSpec,
    WebSpec,
)

__all__ = [
    "HostStats",
    "ResponseEvent",
    "ServerStats",
    "TestWebServer",
    "fetch_remote_stats",
    "render_page",
]

_MAX_HEAD = 64 * 1024
_CONTROL_ENDPOINTS = (
    ("/_stats", "what the server saw, as JSON (ServerStats.to_dict())"),
    ("/_reset", "forget the stats, keeping open connections counted"),
    ("/_web", "the served web, as WebSpec JSON (serve --web PATH takes it)"),
    ("/_hold", "answer no host request until /_release (a crawl paused from outside)"),
    ("/_release", "answer the held requests, and the rest as usual"),
)
_ROBOTS = b"User-agent: *\nAllow: /\n"
_REASONS = {
    200: "OK",
    301: "Moved Permanently",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    421: "Misdirected Request",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@lru_cache(maxsize=1)
def _png() -> bytes:
    """A valid 2x2 RGB PNG, for the Images pipeline (which decodes what it downloads)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    rows = b"\x00" + b"\xff\x00\x00" * 2 + b"\x00" + b"\x00\xff\x00" * 2
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def render_page(web: WebSpec, page_id: int, port: int) -> bytes:
    """The HTML of a page: its quality in a meta tag, each link with its target's quality.

    A redirecting page renders as the short body of its 301, a link to where it points.
    """
    page = web.pages[page_id]
    if page.redirect_to is not None:
        location = escape(web.url(page.redirect_to, port))
        return f'<html><body><a href="{location}">moved</a></body></html>\n'.encode()
    anchors = "".join(
        f'<a href="{escape(web.url(t, port))}" data-quality="{web.pages[t].quality}">page {t}</a>\n'
        for t in page.links
    )
    return (
        f"<html><head><title>page {page.id}</title>"
        f'<meta name="twolevel-quality" content="{page.quality}"></head><body>\n'
        f"{anchors}</body></html>\n"
    ).encode()


class _Request(NamedTuple):
    method: str
    path: str
    close: bool  # the client asked for (or implied) Connection: close
    status: int  # 0 if well-formed, else the error status to answer with
    host: str = ""  # the Host header's name, lower case, without the port


class _Answer(NamedTuple):
    status: int
    content_type: str
    body: bytes
    page_id: int | None = None
    headers: tuple[tuple[str, str], ...] = ()


def _host_name(header: str) -> str:
    """``name:port`` -> ``name`` (also for ``[v6]:port``)."""
    if header.startswith("["):
        return header.partition("]")[0] + "]"
    name, _, port = header.rpartition(":")
    return name if name and port.isdigit() else header


def _parse_head(head: bytes) -> _Request:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return _Request("GET", "", True, 400)
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            return _Request(method, target, True, 400)
        headers[name.strip().lower()] = value.strip().lower()
    host = _host_name(headers.get("host", ""))
    if "://" in target:  # absolute-form: keep only the path
        target = "/" + target.split("://", 1)[1].partition("/")[2]
    path = target.partition("?")[0].partition("#")[0] or "/"
    tokens = {t.strip() for t in headers.get("connection", "").split(",")}
    close = "close" in tokens or (version == "HTTP/1.0" and "keep-alive" not in tokens)
    if method not in ("GET", "HEAD"):
        return _Request(method, path, True, 405, host)
    if "content-length" in headers or "transfer-encoding" in headers:
        # no bodies: we could not find the next request
        return _Request(method, path, True, 400, host)
    return _Request(method, path, close, 0, host)


class _TestWebProtocol(Protocol):
    """One connection. Requests are answered strictly in order, one at a time.

    On a failing host: ``hang`` reads and counts requests but never answers (and never
    times out); ``reset`` counts the first request, then aborts the connection (RST).
    """

    #: Set by ``makeConnection`` before ``connectionMade``: always a TCP connection here.
    transport: ITCPTransport

    def __init__(self, server: TestWebServer) -> None:
        self._server = server
        self._host: HostSpec | None = None
        self._control = False
        self._id = 0
        self._buffer = b""
        self._queue: deque[_Request] = deque()
        self._pending: IDelayedCall | None = None
        self._idle: IDelayedCall | None = None
        self._responses = 0
        self._closing = False
        self.lost: Deferred[None] = Deferred()

    # -- connection lifecycle ------------------------------------------------------------------
    def connectionMade(self) -> None:
        server = self._server
        address = self.transport.getHost().host
        self._host = server.web.host_by_address(address)
        self._control = self._host is None
        if self._host is None and address != CONTROL_ADDRESS:
            self.transport.abortConnection()  # not ours; cannot happen with our listeners
            return
        self._id = server.new_connection(self)
        if self._host is not None:
            server.stats.connection_opened(self._host.index)
        self._arm_idle()

    def connectionLost(self, reason: Failure | None = None) -> None:
        for call in (self._pending, self._idle):
            if call is not None and call.active():
                call.cancel()
        self._pending = self._idle = None
        if self._host is not None and self._id:
            for _ in self._queue:
                self._server.stats.request_aborted(self._host.index)
            self._server.stats.connection_closed(self._host.index)
        self._queue.clear()
        self._server.connection_lost(self)
        self.lost.callback(None)

    def _arm_idle(self) -> None:
        timeout = self._server.idle_timeout
        if self._host is not None and self._host.failure == "hang":
            return  # a hanging host holds connections until the client gives up
        if timeout > 0 and self._idle is None:
            self._idle = self._server.reactor.callLater(timeout, self._idle_expired)

    def _disarm_idle(self) -> None:
        if self._idle is not None and self._idle.active():
            self._idle.cancel()
        self._idle = None

    def _idle_expired(self) -> None:
        self._idle = None
        self._closing = True
        self.transport.loseConnection()

    # -- requests ----------------------------------------------------------------------------
    def dataReceived(self, data: bytes) -> None:
        if self._closing:
            return
        self._buffer += data
        while True:
            head, sep, rest = self._buffer.partition(b"\r\n\r\n")
            if not sep:
                break
            self._buffer = rest
            head = head.lstrip(b"\r\n")  # tolerate stray CRLF between requests (RFC 9112)
            request = _parse_head(head)
            self._queue.append(request)
            if self._host is not None:
                self._server.stats.request_received(
                    self._host.index, self._server.clock(), request.host, request.path
                )
                if (
                    self._host.failure == "reset"
                    or request.path == BROKEN_PATH
                    or self._server.down(self._host)
                ):
                    self._closing = True
                    self.transport.abortConnection()  # RST; connectionLost counts it aborted
                    return
            if request.close:
                self._buffer = b""  # nothing after a closing request will be answered
                break
        if len(self._buffer) > _MAX_HEAD:
            self._closing = True
            self.transport.loseConnection()
            return
        self._next()

    def _next(self) -> None:
        if self._pending is not None or not self._queue or self._closing:
            return
        if self._host is not None and self._host.failure is not None:
            return  # "hang": requests stay queued (in flight) until the connection closes
        if self._host is not None and self._server.held(self._next):
            return  # answered when the server is released
        self._disarm_idle()
        delay = 0.0
        if self._host is not None:
            delay = self._host.response_delay
            if self._responses == 0:
                delay += self._host.connect_delay
            delay *= self._server.delay_scale
        self._pending = self._server.reactor.callLater(delay, self._respond)

    def _respond(self) -> None:
        self._pending = None
        request = self._queue.popleft()
        self._responses += 1
        if self._control:
            answer = self._server.control_response(request)
        else:
            answer = self._server.host_response(self._host, request)
        status, ctype, body, page_id, extra = answer
        host = self._host
        if host is not None:
            for name, value in extra:
                if name == "Retry-After":
                    self._server.stats.asked_to_wait(host.index, self._server.clock(), value)
        close = request.close  # True for malformed requests too
        if host is not None:
            remaining = host.max_requests_per_connection - self._responses
            close = close or host.http10 or remaining <= 0
        version = "HTTP/1.0" if host is not None and host.http10 else "HTTP/1.1"
        lines = [
            f"{version} {status} {_REASONS[status]}",
            "Server: twolevel-testweb",
            f"Content-Type: {ctype}",
            f"Content-Length: {len(body)}",
            *(f"{name}: {value}" for name, value in extra),
        ]
        if close:
            lines.append("Connection: close")
        else:
            lines.append("Connection: keep-alive")
            if host is not None:
                timeout = int(self._server.idle_timeout)
                lines.append(f"Keep-Alive: timeout={timeout}, max={remaining}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if request.path == SLOW_BODY_PATH and request.method != "HEAD":
            self.transport.write(head)
            self._queue.appendleft(request)  # in flight until its body is out
            self._pending = self._server.reactor.callLater(
                SLOW_BODY_SECONDS, self._written, request, page_id, status, body, close
            )
            return
        self.transport.write(head if request.method == "HEAD" else head + body)
        self._written(request, page_id, status, b"", close)

    def _written(
        self, request: _Request, page_id: int | None, status: int, rest: bytes, close: bool
    ) -> None:
        """The response is out (``rest``: what was still to write): count it, go on."""
        self._pending = None
        if rest:
            self.transport.write(rest)
            self._queue.popleft()
        host = self._host
        if host is not None:
            self._server.stats.response_written(
                ResponseEvent(
                    self._server.clock(),
                    host.index,
                    request.path,
                    self._id,
                    page_id,
                    status,
                    request.method,
                )
            )
        if close:
            self._closing = True
            self.transport.loseConnection()  # connectionLost counts any queued as aborted
            return
        if self._queue:
            self._next()
        else:
            self._arm_idle()


class TestWebServer:
    """Serves a :class:`WebSpec` on loopback: every host on its own address, one port for all.

    Use it in the crawl's own reactor (see :func:`scrapy_twolevel.testweb.spider.run_crawl`)
    or in a separate process (``python -m scrapy_twolevel.testweb serve``), where
    ``http://127.0.0.1:PORT/_stats`` returns :meth:`ServerStats.to_dict` as JSON
    (``/_reset`` clears it, ``/_web`` returns the web, ``/`` lists them for a browser).
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        web: WebSpec,
        *,
        delay_scale: float = 1.0,
        reactor: Any = None,
        idle_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if delay_scale < 0:
            raise ValueError(f"delay_scale must be >= 0, got {delay_scale}")
        self.web = web
        self.delay_scale = delay_scale
        self.idle_timeout = idle_timeout
        self.clock = clock
        self.stats = ServerStats(len(web.hosts))
        self._reactor = reactor
        self._port = 0
        self._listeners: list[IListeningPort] = []
        #: Bound, never listening: the addresses of "refuse" hosts, held so nobody else can
        #: listen there and every connection is refused.
        self._reserved: list[socket.socket] = []
        self._protocols: set[_TestWebProtocol] = set()
        self._connection_ids = 0
        self._accepted_at: dict[int, float] = {}  # host -> its last accepted request
        self._robots_refused: set[int] = set()  # hosts whose robots.txt refused once
        self._first_request_at: dict[int, float] = {}  # host -> its first request (outages)
        self._holding = False
        self._waiting: list[Callable[[], None]] = []

    @property
    def reactor(self) -> Any:
        """The reactor in use; the global one is imported only when first needed."""
        if self._reactor is None:
            from twisted.internet import reactor

            self._reactor = reactor
        return self._reactor

    @property
    def port(self) -> int:
        """The port every host listens on (0 before :meth:`start`)."""
        return self._port

    @property
    def control_url(self) -> str:
        """Base URL of the control endpoints (``/``, ``/_stats``, ``/_reset``, ...)."""
        return f"http://{CONTROL_ADDRESS}:{self._port}"

    @property
    def seeds_urls(self) -> list[str]:
        """Absolute URLs of the web's seed pages."""
        return [self.url(s) for s in self.web.seeds]

    @property
    def sitemap_urls(self) -> list[str]:
        """The sitemap URL of every host (its first name)."""
        return [f"http://{h.names[0]}:{self._port}{SITEMAP_PATH}" for h in self.web.hosts]

    def url(self, page_id: int) -> str:
        """Absolute URL of a page on this running server."""
        if not self._port:
            raise RuntimeError("the server is not started")
        return self.web.url(page_id, self._port)

    def start(self, port: int = 0, *, attempts: int = 20) -> int:
        """Listen on every host address and the control address with one port; return it.

        With ``port=0`` the OS picks a free port for the first host and the others reuse it;
        if it is taken on another address, all listeners are closed and another port is tried.
        A ``refuse`` host gets no listener: its address and port are bound, not listened on.
        """
        if self._listeners:
            raise RuntimeError("the server is already started")
        reactor: IReactorTCP = self.reactor
        factory = Factory.forProtocol(lambda: _TestWebProtocol(self))
        factory.noisy = False
        hosts = self.web.hosts
        addresses = [h.address for h in hosts if h.failure != "refuse"] + [CONTROL_ADDRESS]
        refused = [h.address for h in hosts if h.failure == "refuse"]
        for attempt in range(attempts if port == 0 else 1):
            chosen = port
            try:
                for address in addresses:
                    # Stub gaps: listenTCP wants a ServerFactory[_ProtoWithFactory], invariant,
                    # so no concrete factory matches (forProtocol makes a Factory[P] anyway);
                    # a TCP port's getHost() is an IPv4Address, typed IAddress.
                    listener = reactor.listenTCP(
                        chosen,
                        factory,  # type: ignore[arg-type]
                        interface=address,
                    )
                    self._listeners.append(listener)
                    chosen = listener.getHost().port  # type: ignore[attr-defined]
                for address in refused:
                    self._reserved.append(_reserve(address, chosen))
            except (CannotListenError, OSError):
                for listener in self._listeners:
                    # A TCP port's stopListening() returns a Deferred; IListeningPort's may not.
                    listener.stopListening().addErrback(lambda _: None)  # type: ignore[union-attr]
                self._listeners.clear()
                self._close_reserved()
                if port != 0 or attempt == attempts - 1:
                    raise
                continue
            self._port = chosen
            return chosen
        raise AssertionError("unreachable")

    def stop(self) -> Deferred[None]:
        """Stop listening and drop every open connection; fires when all are closed."""
        # A TCP port's stopListening() returns a Deferred; IListeningPort's may not.
        waits: list[Deferred[Any]] = [
            listener.stopListening()  # type: ignore[misc]
            for listener in self._listeners
        ]
        self._listeners.clear()
        self._close_reserved()
        for proto in list(self._protocols):
            waits.append(proto.lost)
            proto.transport.abortConnection()
        if not waits:
            return succeed(None)
        d: Deferred[Any] = DeferredList(waits, consumeErrors=True)
        return d.addCallback(lambda _: None)

    def _close_reserved(self) -> None:
        for sock in self._reserved:
            sock.close()
        self._reserved.clear()

    # -- used by the protocol ----------------------------------------------------------------
    def new_connection(self, proto: _TestWebProtocol) -> int:
        self._protocols.add(proto)
        self._connection_ids += 1
        return self._connection_ids

    def connection_lost(self, proto: _TestWebProtocol) -> None:
        self._protocols.discard(proto)

    def host_response(self, host: HostSpec | None, request: _Request) -> _Answer:
        if request.status:
            return _Answer(request.status, "text/plain", b"error\n")
        assert host is not None
        if request.host and request.host not in (host.address, *host.names):
            return _Answer(421, "text/plain", b"this address does not serve that host\n")
        if request.path == SLOW_BODY_PATH:
            return _Answer(200, "text/plain", b"slow body\n" * 100)
        if request.path == UNAVAILABLE_PATH:
            return _Answer(503, "text/plain", b"unavailable\n")
        if request.path == "/robots.txt":
            return self._robots(host)
        if request.path == SITEMAP_PATH:
            return _Answer(200, "application/xml", self._sitemap(host))
        if request.path.startswith(FILES_PREFIX):
            if request.path.endswith(".png"):
                return _Answer(200, "image/png", _png())
            return _Answer(200, "application/octet-stream", request.path.encode() * 4)
        if host.min_interval:
            refusal = self._refusal(host)
            if refusal is not None:
                return refusal
        page = self.web.page_by_address_path(host.address, request.path)
        if page is None:
            return _Answer(404, "text/plain", b"not found\n")
        body = render_page(self.web, page.id, self._port)
        if page.redirect_to is not None:
            location = self.web.url(page.redirect_to, self._port)
            return _Answer(301, "text/html", body, page.id, (("Location", location),))
        return _Answer(200, "text/html; charset=utf-8", body, page.id)

    def _sitemap(self, host: HostSpec) -> bytes:
        urls = "".join(
            f"<url><loc>{self.url(page.id)}</loc></url>"
            for page in self.web.pages
            if page.host == host.index and page.redirect_to is None
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{urls}</urlset>"
        ).encode()

    def _robots(self, host: HostSpec) -> _Answer:
        status = host.robots_status
        if host.robots_retry_after:
            if host.index in self._robots_refused:
                status = 200
            else:
                self._robots_refused.add(host.index)
                extra = (("Retry-After", str(host.robots_retry_after)),)
                return _Answer(status, "text/plain", b"busy\n", None, extra)
        if status != 200:
            return _Answer(status, "text/plain", b"no robots.txt here\n")
        delay = f"Crawl-delay: {host.crawl_delay}\n" if host.crawl_delay else ""
        return _Answer(200, "text/plain", _ROBOTS + delay.encode())

    def _refusal(self, host: HostSpec) -> _Answer | None:
        """A refusal if the host's last accepted request was less than ``min_interval``
        ago, else ``None`` (and this request is the last accepted)."""
        now = self.clock()
        last = self._accepted_at.get(host.index)
        if last is not None and now - last < host.min_interval:
            extra: tuple[tuple[str, str], ...] = ()
            if host.retry_after:
                wait = max(1, math.ceil(last + host.min_interval - now))
                extra = (("Retry-After", str(wait)),)
            return _Answer(host.refusal_status, "text/plain", b"too many requests\n", None, extra)
        self._accepted_at[host.index] = now
        return None

    def down(self, host: HostSpec) -> bool:
        """Whether ``host`` is in its outage (timed from its first request)."""
        if not host.outage_length:
            return False
        now = self.clock()
        first = self._first_request_at.setdefault(host.index, now)
        return host.outage_start <= now - first < host.outage_start + host.outage_length

    def hold(self, on: bool) -> None:
        """Hold every host's answers (``True``) or answer the held ones and go on."""
        self._holding = on
        if not on:
            waiting, self._waiting = self._waiting, []
            for resume in waiting:
                resume()

    def held(self, resume: Callable[[], None]) -> bool:
        """Whether answers are held; if so, ``resume()`` is called on release."""
        if self._holding:
            self._waiting.append(resume)
        return self._holding

    def control_response(self, request: _Request) -> _Answer:
        if request.status:
            return _Answer(request.status, "text/plain", b"error\n")
        self.stats.control_requests += 1
        if request.path == "/_stats":
            return _Answer(200, "application/json", json.dumps(self.stats.to_dict()).encode())
        if request.path == "/_reset":
            self.stats.reset()
            return _Answer(200, "application/json", b'{"ok": true}')
        if request.path == "/_web":
            return _Answer(200, "application/json", self.web.to_json().encode())
        if request.path in ("/_hold", "/_release"):
            self.hold(request.path == "/_hold")
            return _Answer(200, "application/json", b'{"ok": true}')
        if request.path == "/":
            return _Answer(200, "text/html; charset=utf-8", self._control_index())
        return _Answer(404, "text/plain", b"not found\n")

    def _control_index(self) -> bytes:
        """The page at ``/``: every control endpoint and the seeds, for a browser."""
        endpoints = "".join(
            f"<li><code>{path}</code>: {escape(what)}</li>\n"
            if path == "/_reset"  # no link: a GET there clears the stats
            else f'<li><a href="{path}">{path}</a>: {escape(what)}</li>\n'
            for path, what in _CONTROL_ENDPOINTS
        )
        seeds = "".join(
            f'<li><a href="{escape(u)}">{escape(u)}</a></li>\n' for u in self.seeds_urls
        )
        return (
            "<html><head><title>twolevel test web</title></head><body>\n"
            f"<h1>Test web: {len(self.web.hosts)} hosts on port {self._port}</h1>\n"
            f"<h2>Control endpoints</h2>\n<ul>\n{endpoints}</ul>\n"
            f"<h2>Seeds</h2>\n<ul>\n{seeds}</ul>\n</body></html>\n"
        ).encode()


def _reserve(address: str, port: int) -> socket.socket:
    """Bind ``address:port`` without listening: connections there are refused (RST)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((address, port))
    except OSError:
        sock.close()
        raise
    return sock
