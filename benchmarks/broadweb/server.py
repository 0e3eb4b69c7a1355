"""The load: one process serving the whole generated web on one port of 127.0.0.1.

``python -m broadweb.server CONFIG``; ``CONFIG`` is a JSON file with ``hosts``,
``pending``, ``seed``, ``latency`` (seconds each response is held, as a server's service
time: without it no two requests could ever overlap at a host and politeness could not
be seen), ``idle_timeout`` and ``ready`` (where the server writes ``{"port", "pid"}`` once
it listens).

A raw :class:`asyncio.Protocol`, HTTP/1.1 with keep-alive (a client's ``Connection:
close`` is honoured). The host is read from the ``Host`` header (``h<i>.broad.test``),
the page from the path (``/p/<j>``); a page outside the web is a 404. Connections idle for
``idle_timeout`` seconds are closed (Apache's default keep-alive timeout is 5 s), so that
neither side runs out of file descriptors when a crawl touches 100,000 hosts.

Counted per host: requests, requests in flight now and at most (politeness:
``CONCURRENT_REQUESTS_PER_DOMAIN = 1`` means never 2), and requests that arrived while
another to the same host was in flight; in total: pages served, 404s, pages served more
than once, connections, the first request's wall time, and requests per second.
Control paths (any host): ``/__count`` (the few totals, polled every second by the
driver), ``/__stats`` (everything but the per-page map), ``/__fetched`` (the map: one byte
per page of the web, 1 if served, in :meth:`BroadWeb.index` order), ``/__reset``.

CPU per request is a hash and a template (:meth:`BroadWeb.body`); the server's own CPU
time is in ``/__stats`` so that a report can show it is not the bottleneck.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import resource
import sys
import time
from array import array
from pathlib import Path
from typing import Any

from broadweb.web import BroadWeb

_HOST = re.compile(rb"\r\nhost:[ \t]*h(\d+)\.broad\.test[:\r]", re.IGNORECASE)
_CLOSE = re.compile(rb"\r\nconnection:[ \t]*close", re.IGNORECASE)
_PAGE = re.compile(rb"/p/(\d+)")
_NOT_FOUND = (
    b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nnot found\n"
)


class Stats:
    """What the server counts; reset between crawls."""

    def __init__(self, web: BroadWeb) -> None:
        self.web = web
        self.reset()

    def reset(self) -> None:
        hosts = self.web.hosts
        self.t0 = time.time()
        self.requests = array("l", bytes(8 * hosts))
        self.in_flight = array("l", bytes(8 * hosts))
        self.max_in_flight = array("l", bytes(8 * hosts))
        self.overlapping = 0
        self.fetched = bytearray(self.web.pages)
        self.pages = 0
        self.refetched = 0
        self.not_found = 0
        self.control = 0
        self.per_second: list[int] = []
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.connections_opened = 0
        self.max_open_connections = 0
        self.idle_closed = 0

    def totals(self, open_connections: int) -> dict[str, Any]:
        return {
            "t0": self.t0,
            "now": time.time(),
            "pages": self.pages,
            "not_found": self.not_found,
            "refetched": self.refetched,
            "first_at": self.first_at,
            "last_at": self.last_at,
            "max_in_flight": max(self.max_in_flight, default=0),
            "overlapping": self.overlapping,
            "open_connections": open_connections,
        }

    def full(self, open_connections: int) -> dict[str, Any]:
        cpu = os.times()
        hosts_seen = sum(1 for n in self.requests if n)
        over = [i for i, m in enumerate(self.max_in_flight) if m > 1]
        return {
            **self.totals(open_connections),
            "hosts_requested": hosts_seen,
            "hosts_with_overlap": len(over),
            "hosts_with_overlap_first": over[:20],
            "per_second": self.per_second,
            "connections_opened": self.connections_opened,
            "max_open_connections": self.max_open_connections,
            "idle_closed": self.idle_closed,
            "server_cpu_s": cpu.user + cpu.system,
        }


class Server:
    def __init__(self, web: BroadWeb, latency: float, idle_timeout: float) -> None:
        self.web = web
        self.latency = latency
        self.idle_timeout = idle_timeout
        self.stats = Stats(web)
        self.port = 0
        self.connections: set[WebProtocol] = set()

    def count_second(self, now: float) -> None:
        second = int(now - self.stats.t0)
        bins = self.stats.per_second
        if second >= len(bins):
            bins.extend([0] * (second + 1 - len(bins)))
        bins[second] += 1

    def control(self, path: bytes) -> bytes:
        """The answer to a control path, a whole HTTP response."""
        stats = self.stats
        stats.control += 1
        kind = b"application/json"
        if path.startswith(b"/__count"):
            body = json.dumps(stats.totals(len(self.connections))).encode()
        elif path.startswith(b"/__stats"):
            body = json.dumps(stats.full(len(self.connections))).encode()
        elif path.startswith(b"/__fetched"):
            body, kind = bytes(stats.fetched), b"application/octet-stream"
        elif path.startswith(b"/__reset"):
            stats.reset()
            body = b'{"reset": true}'
        else:
            return _NOT_FOUND
        return (
            b"HTTP/1.1 200 OK\r\nContent-Type: "
            + kind
            + b"\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )

    async def sweep(self) -> None:
        """Close connections idle for ``idle_timeout`` (once a second)."""
        while True:
            await asyncio.sleep(1.0)
            limit = time.monotonic() - self.idle_timeout
            for conn in [c for c in self.connections if c.idle_since < limit and not c.busy]:
                self.stats.idle_closed += 1
                conn.transport.close()


class WebProtocol(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.buffer = b""
        self.busy = False
        self.idle_since = time.monotonic()
        self.transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        server = self.server
        server.connections.add(self)
        server.stats.connections_opened += 1
        server.stats.max_open_connections = max(
            server.stats.max_open_connections, len(server.connections)
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self.next_request()

    def next_request(self) -> None:
        """Parse one request from the buffer, if a whole one is there, and answer it."""
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head, self.buffer = self.buffer[: end + 2], self.buffer[end + 4 :]
        line_end = head.find(b"\r\n")
        parts = head[:line_end].split(b" ")
        path = parts[1] if len(parts) > 1 else b"/"
        close = _CLOSE.search(head) is not None
        server = self.server
        if path.startswith(b"/__"):
            self.respond(server.control(path), close, None)
            return
        now = time.time()
        stats = server.stats
        if stats.first_at is None:
            stats.first_at = now
        stats.last_at = now
        server.count_second(now)
        found, page = _HOST.search(head), _PAGE.match(path)
        host = int(found.group(1)) if found else -1
        number = int(page.group(1)) if page else -1
        if not server.web.exists(host, number):
            stats.not_found += 1
            self.respond(_NOT_FOUND, close, None)
            return
        stats.requests[host] += 1
        flight = stats.in_flight[host] + 1
        stats.in_flight[host] = flight
        if flight > 1:
            stats.overlapping += 1
        if flight > stats.max_in_flight[host]:
            stats.max_in_flight[host] = flight
        body = server.web.body(host, number, server.port)
        response = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        self.busy = True
        asyncio.get_running_loop().call_later(
            server.latency, self.respond, response, close, (host, number)
        )

    def respond(self, response: bytes, close: bool, page: tuple[int, int] | None) -> None:
        if page is not None:
            stats = self.server.stats
            host, number = page
            stats.in_flight[host] -= 1
            at = self.server.web.index(host, number)
            if stats.fetched[at]:
                stats.refetched += 1
            stats.fetched[at] = 1
            stats.pages += 1
        self.busy = False
        self.idle_since = time.monotonic()
        if self.transport.is_closing():
            return
        self.transport.write(response)
        if close:
            self.transport.close()
        elif self.buffer:
            self.next_request()


async def serve(config: dict[str, Any]) -> None:
    web = BroadWeb(config["hosts"], config["pending"], config["seed"])
    server = Server(web, config["latency"], config["idle_timeout"])
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(
        lambda: WebProtocol(server), "127.0.0.1", 0, backlog=4096, reuse_address=True
    )
    server.port = listener.sockets[0].getsockname()[1]
    sweeper = asyncio.ensure_future(server.sweep())
    ready = Path(config["ready"])
    ready.with_suffix(".tmp").write_text(json.dumps({"port": server.port, "pid": os.getpid()}))
    ready.with_suffix(".tmp").replace(ready)
    try:
        await asyncio.Event().wait()  # until SIGTERM
    finally:
        sweeper.cancel()
        listener.close()


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        asyncio.run(serve(config))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
