"""The local test web served over real sockets, in a subprocess, and crawled.

The server and crawls run in subprocesses so that this process never installs or runs a
reactor; the tests talk to them with ``socket`` and ``http.client`` and read what the server
saw from its ``/_stats`` endpoint. The generator is tested in test_testweb_web.py, the
spider and resolver in test_testweb_spider.py.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import pytest
from crawl_helpers import crawl
from helpers import env_with_checkout

from scrapy_twolevel.testweb import server as server_mod
from scrapy_twolevel.testweb.process import ServerProcess
from scrapy_twolevel.testweb.web import HostProfile, WebSpec, generate_web

pytestmark = pytest.mark.crawl

TIMEOUT = 20.0  # bound on every wait for a subprocess or a socket


# -- server over real sockets ----------------------------------------------------------------

KEEPALIVE, HTTP10, SLOW, FAST, MEDIUM = 0, 1, 2, 3, 4
PROFILES = [
    HostProfile(connect_delay=0, response_delay=0, max_requests_per_connection=3),
    HostProfile(connect_delay=0, response_delay=0, max_requests_per_connection=1, http10=True),
    HostProfile(connect_delay=0, response_delay=0.5, max_requests_per_connection=100),
    HostProfile(connect_delay=0.3, response_delay=0, max_requests_per_connection=100),
    HostProfile(connect_delay=0, response_delay=0.15, max_requests_per_connection=100),
]


@dataclass
class Served:
    web: WebSpec
    server: ServerProcess

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def seeds(self) -> list[str]:
        return self.server.seeds

    @property
    def control(self) -> str:
        return self.server.control

    def address(self, host: int) -> tuple[str, int]:
        return (self.web.hosts[host].address, self.port)

    def stats(self) -> server_mod.ServerStats:
        return self.server.stats()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    web = generate_web(5, 5, seed=7, host_profiles=PROFILES, n_seeds=2)
    with ServerProcess(web, tmp_path, timeout=TIMEOUT, env=env_with_checkout()) as server:
        # the ready file is written (atomically) before the line is printed
        assert json.loads(server.ready_file.read_text()) == server.ready
        yield Served(web, server)


def _connect(address: tuple[str, int]) -> socket.socket:
    return socket.create_connection(address, timeout=TIMEOUT)


def _request(path: str, host: str, extra: str = "", method: str = "GET") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode()


def _read_response(f: BinaryIO, method: str = "GET") -> tuple[str, dict[str, str], bytes]:
    status = f.readline().decode("latin-1").rstrip("\r\n")
    headers: dict[str, str] = {}
    while (line := f.readline().decode("latin-1").rstrip("\r\n")) != "":
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers["content-length"])
    body = b"" if method == "HEAD" else f.read(length)
    return status, headers, body


def test_ready_file_and_seeds(served: Served) -> None:
    assert served.seeds == [served.web.url(s, served.port) for s in served.web.seeds]
    assert served.control == f"http://127.0.0.1:{served.port}"


def test_page_body_has_its_links_and_qualities(served: Served) -> None:
    web, port = served.web, served.port
    page = web.pages[KEEPALIVE * 5 + 2]
    conn = http.client.HTTPConnection(*served.address(KEEPALIVE), timeout=TIMEOUT)
    conn.request("GET", page.path)
    resp = conn.getresponse()
    body = resp.read().decode()
    assert resp.status == 200
    assert resp.getheader("Content-Type").startswith("text/html")
    assert f"<title>page {page.id}</title>" in body
    meta = re.search(r'<meta name="twolevel-quality" content="([^"]+)">', body)
    assert meta is not None and float(meta.group(1)) == page.quality
    anchors = re.findall(r'<a href="([^"]+)" data-quality="([^"]+)">', body)
    assert [href for href, _ in anchors] == [web.url(t, port) for t in page.links]
    assert [float(q) for _, q in anchors] == [web.pages[t].quality for t in page.links]

    conn.request("GET", "/robots.txt")
    resp = conn.getresponse()
    assert (resp.status, resp.read()) == (200, b"User-agent: *\nAllow: /\n")
    conn.close()

    conn = http.client.HTTPConnection(*served.address(FAST), timeout=TIMEOUT)
    conn.request("GET", "/no/such/page")
    resp = conn.getresponse()
    assert resp.status == 404
    resp.read()
    conn.request("HEAD", "/")
    resp = conn.getresponse()
    assert resp.status == 200 and int(resp.getheader("Content-Length")) > 0
    assert resp.read() == b""
    conn.close()
    stats = served.stats()
    assert stats.hosts[FAST].paths == {"/no/such/page": 1, "/": 1}
    assert stats.fetch_counts() == {page.id: 1}  # HEADs, 404s and robots.txt are not fetches


def test_keepalive_host_counts_down_then_closes(served: Served) -> None:
    address = served.address(KEEPALIVE)
    with _connect(address) as sock, sock.makefile("rb") as f:
        seen = []
        for k in range(3):
            sock.sendall(_request(f"/p/{k + 1}" if k else "/", address[0]))
            status, headers, _ = _read_response(f)
            assert status == "HTTP/1.1 200 OK"
            seen.append((headers.get("connection"), headers.get("keep-alive")))
        assert f.read(1) == b""  # the server closed the connection after the third response
    assert seen == [
        ("keep-alive", "timeout=30, max=2"),
        ("keep-alive", "timeout=30, max=1"),
        ("close", None),
    ]
    host = served.stats().hosts[KEEPALIVE]
    assert (host.connections_total, host.requests_total, host.responses_total) == (1, 3, 3)


def test_http10_host_answers_http10_and_closes(served: Served) -> None:
    address = served.address(HTTP10)
    for _ in range(2):
        with _connect(address) as sock, sock.makefile("rb") as f:
            sock.sendall(_request("/", address[0]))
            status, headers, body = _read_response(f)
            assert status == "HTTP/1.0 200 OK"
            assert headers["connection"] == "close" and "keep-alive" not in headers
            assert b"<html>" in body
            assert f.read(1) == b""
    host = served.stats().hosts[HTTP10]
    assert (host.connections_total, host.responses_total) == (2, 2)


def test_client_connection_close_is_honoured(served: Served) -> None:
    address = served.address(SLOW)
    with _connect(address) as sock, sock.makefile("rb") as f:
        sock.sendall(_request("/", address[0], "Connection: close\r\n"))
        _, headers, _ = _read_response(f)
        assert headers["connection"] == "close"
        assert f.read(1) == b""


def test_pipelined_requests_are_answered_in_order(served: Served) -> None:
    address = served.address(KEEPALIVE)
    with _connect(address) as sock, sock.makefile("rb") as f:
        sock.sendall(b"".join(_request(p, address[0]) for p in ("/p/4", "/p/2", "/p/3")))
        titles = [
            re.search(rb"<title>(.*?)</title>", _read_response(f)[2]).group(1) for _ in range(3)
        ]
        assert f.read(1) == b""  # max 3 per connection
    assert titles == [b"page 4", b"page 2", b"page 3"]
    stats = served.stats()
    assert stats.order() == [4, 2, 3]
    assert stats.hosts[KEEPALIVE].requests_in_flight == 0


def test_connect_delay_applies_to_the_first_response_only(served: Served) -> None:
    """Told by the order the server answers in, not by wall-clock thresholds.

    FAST pays 0.3 s on a connection's first response and 0 after; MEDIUM pays 0.15 s on
    every response. Each round sends to the host expected to answer *last* first, so load
    can only delay the second request and widen the margin: the order below is certain.
    A missing connect delay (round 1) or one paid again (round 2) reverses a pair.
    """
    fast, medium = served.address(FAST), served.address(MEDIUM)
    a, m = _connect(fast), _connect(medium)
    with a, m, a.makefile("rb") as fa, m.makefile("rb") as fm:
        m.sendall(_request("/", medium[0]))  # round 1: 0.15 s, before FAST's 0.3 s
        a.sendall(_request("/", fast[0]))
        _read_response(fa), _read_response(fm)
        a.sendall(_request("/p/1", fast[0]))  # round 2: FAST now answers at once
        m.sendall(_request("/p/1", medium[0]))
        _read_response(fa), _read_response(fm)
    events = [(e.host, e.path, e.connection_id) for e in served.stats().events]
    assert [(host, path) for host, path, _ in events] == [
        (MEDIUM, "/"),
        (FAST, "/"),
        (FAST, "/p/1"),
        (MEDIUM, "/p/1"),
    ]
    assert events[1][2] == events[2][2]  # one FAST connection: the delay was not paid again


def test_stats_see_two_concurrent_requests_to_one_host(served: Served) -> None:
    address = served.address(SLOW)  # 0.5 s per response: both requests arrive before either
    a, b = _connect(address), _connect(address)
    with a, b, a.makefile("rb") as fa, b.makefile("rb") as fb:
        a.sendall(_request("/", address[0]))
        b.sendall(_request("/p/1", address[0]))
        assert _read_response(fa)[0] == _read_response(fb)[0] == "HTTP/1.1 200 OK"
        # then one connection, one request at a time: never more than one in flight
        for path in ("/p/2", "/p/3"):
            a.sendall(_request(path, address[0]))
            _read_response(fa)
    stats = served.stats()
    slow = stats.hosts[SLOW]
    assert stats.max_concurrent_requests_per_host() == {
        KEEPALIVE: 0,
        HTTP10: 0,
        SLOW: 2,
        FAST: 0,
        MEDIUM: 0,
    }
    assert (slow.connections_total, slow.max_connections_open) == (2, 2)
    assert (slow.requests_total, slow.responses_total, slow.requests_in_flight) == (4, 4, 0)
    assert stats.total.requests_total == 4
    # the second request arrived while the first was in flight; the later two did not
    assert slow.requests_overlapping == stats.overlapping_requests() == 1
    assert stats.first_request_at is not None
    assert stats.first_request_at < min(e.time for e in stats.events)
    ids = {p.path: p.id for p in served.web.pages if p.host == SLOW}
    assert stats.fetch_counts() == {ids[p]: 1 for p in ("/", "/p/1", "/p/2", "/p/3")}
    assert stats.order()[2:] == [ids["/p/2"], ids["/p/3"]]
    first, second, third, fourth = (e.connection_id for e in stats.events)
    assert first != second and third == fourth and third in (first, second)
    # the stats survive the JSON trip and /_reset clears them
    assert server_mod.ServerStats.from_dict(stats.to_dict()).to_dict() == stats.to_dict()
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=TIMEOUT)
    conn.request("GET", "/_reset")
    assert conn.getresponse().status == 200
    conn.close()
    after = served.stats()
    assert after.events == [] and after.hosts[SLOW].max_requests_in_flight == 0
    assert after.first_request_at is None and after.overlapping_requests() == 0


def test_server_exits_cleanly_on_sigterm(served: Served) -> None:
    with _connect(served.address(KEEPALIVE)):  # an open connection must not block shutdown
        assert served.server.stop() == 0


# -- failing hosts, redirects and names, served over real sockets -----------------------------

OK, OTHER, HANG, REFUSE, RESET = range(5)


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[Served]:
    """Two working hosts (OK has an alias), three failing ones, three cross-host redirects."""
    quick = HostProfile(connect_delay=0, response_delay=0)
    web = generate_web(
        5,
        4,
        seed=3,
        n_seeds=1,
        host_profiles=[quick] * 5,
        failures={HANG: "hang", REFUSE: "refuse", RESET: "reset"},
        redirects=3,
        hostnames=True,
        aliases={OK: 1},
    )
    with ServerProcess(web, tmp_path, timeout=TIMEOUT, env=env_with_checkout()) as server:
        yield Served(web, server)


def _get(address: tuple[str, int], path: str, host: str) -> tuple[int, str | None, bytes]:
    """One GET with an explicit Host header; returns status, Location and body."""
    conn = http.client.HTTPConnection(*address, timeout=TIMEOUT)
    try:
        conn.request("GET", path, headers={"Host": host})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Location"), resp.read()
    finally:
        conn.close()


def test_hang_host_reads_requests_but_never_answers(hostile: Served) -> None:
    hang = hostile.address(HANG)
    with _connect(hang) as sock:
        sock.sendall(_request("/", hang[0]))
        # A working host answers meanwhile. The hanging request was sent first, so the
        # server had read it before it could answer this one.
        assert _get(hostile.address(OK), "/p/1", hostile.web.hosts[OK].address)[0] == 200
        sock.settimeout(0.5)  # a bounded wait for bytes that must never come
        with pytest.raises(TimeoutError):
            sock.recv(1)
        during = hostile.stats().hosts[HANG]
    after = hostile.stats().hosts[HANG]
    assert (during.connections_open, during.requests_in_flight, during.responses_total) == (1, 1, 0)
    assert during.requests_aborted == 0  # held open, not dropped
    # the client gave up: the request counts as aborted and nothing stays open
    assert (after.connections_total, after.connections_open) == (1, 0)
    assert (after.requests_total, after.requests_aborted, after.requests_in_flight) == (1, 1, 0)
    assert hostile.stats().fetch_counts() == {hostile.web.pages[OK * 4 + 1].id: 1}


def test_refuse_host_refuses_connections_at_once(hostile: Served) -> None:
    for _ in range(2):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(hostile.address(REFUSE), timeout=TIMEOUT)
    # the kernel refuses: the server never sees the attempts
    assert hostile.stats().hosts[REFUSE] == server_mod.HostStats()
    # the server holds the address (bound, not listening), so no one else can listen there
    with socket.socket() as other, pytest.raises(OSError, match="Address already in use"):
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(hostile.address(REFUSE))


def test_reset_host_aborts_the_connection_when_a_request_arrives(hostile: Served) -> None:
    address = hostile.address(RESET)
    for _ in range(2):
        with _connect(address) as sock:  # the connection itself is accepted
            sock.sendall(_request("/", address[0]))
            with pytest.raises(ConnectionResetError):  # an RST, not an orderly close
                sock.recv(1024)
    host = hostile.stats().hosts[RESET]
    assert (host.connections_total, host.connections_open) == (2, 0)
    assert (host.requests_total, host.requests_aborted, host.responses_total) == (2, 2, 0)


def test_redirect_pages_answer_301_to_a_page_of_another_host(hostile: Served) -> None:
    web, port = hostile.web, hostile.port
    redirects = [p for p in web.pages if p.redirect_to is not None]
    assert [p.path for p in redirects] == ["/r/0", "/r/1", "/r/2"]
    for page in redirects:
        host, target = web.hosts[page.host], web.pages[page.redirect_to]
        status, location, body = _get(hostile.address(page.host), page.path, host.hostname)
        assert status == 301
        assert location == web.url(target.id, port) and location.encode() in body
        split = urlsplit(location)
        assert split.port == port and split.path == target.path
        assert web.host_by_name(split.hostname) is web.hosts[target.host] != host
        # where it points, the page is there
        assert _get(hostile.address(target.host), target.path, split.hostname)[0] == 200
    stats = hostile.stats()
    # a redirect page counts as fetched, with its 301; its target counts on its own
    assert [(e.page_id, e.status) for e in stats.events] == [
        answer for p in redirects for answer in ((p.id, 301), (p.redirect_to, 200))
    ]
    fetched = Counter(p.id for p in redirects) + Counter(p.redirect_to for p in redirects)
    assert stats.fetch_counts() == dict(fetched)


def test_host_header_must_name_the_host_the_address_serves(hostile: Served) -> None:
    web, port = hostile.web, hostile.port
    ok = web.hosts[OK]
    names = [*ok.names, ok.address, web.hosts[OTHER].hostname]
    statuses = {n: _get(hostile.address(OK), "/", f"{n}:{port}")[0] for n in names}
    assert statuses == {ok.hostname: 200, ok.aliases[0]: 200, ok.address: 200, names[-1]: 421}
    stats = hostile.stats()
    assert stats.hosts[OK].host_headers == dict.fromkeys(names, 1)
    assert stats.fetch_counts() == {OK * 4: 3}  # a misdirected request fetches nothing


STOP_SCRIPT = """
import socket, sys
from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.protocol import Protocol
from scrapy_twolevel.testweb import HostProfile, generate_web
from scrapy_twolevel.testweb.server import TestWebServer

web = generate_web(
    4, 2, seed=1, host_profiles=[HostProfile(connect_delay=0, response_delay=0)] * 4,
    failures={1: "hang", 2: "reset", 3: "refuse"},
)

class Client(Protocol):
    def __init__(self):
        self.data, self.lost = b"", Deferred()
    def dataReceived(self, data):
        self.data += data
    def connectionLost(self, reason):
        self.lost.callback(None)

@inlineCallbacks
def until(condition):
    # a bounded wait on a condition, one reactor turn at a time (not a sleep)
    deadline = reactor.seconds() + 10
    while not condition():
        assert reactor.seconds() < deadline, "timed out"
        turn = Deferred()
        reactor.callLater(0, turn.callback, None)
        yield turn

@inlineCallbacks
def connect(clients, name, host, port):
    client = clients[name] = Client()
    address = web.hosts[host].address
    yield connectProtocol(TCP4ClientEndpoint(reactor, address, port, timeout=10), client)
    client.transport.write(f"GET / HTTP/1.1\\r\\nHost: {address}\\r\\n\\r\\n".encode())

@inlineCallbacks
def main():
    server = TestWebServer(web, reactor=reactor, idle_timeout=0.2)
    port = server.start()
    clients = {}
    for name, host in (("hang", 1), ("hang2", 1), ("reset", 2), ("idle", 0)):
        yield connect(clients, name, host, port)
    hang = server.stats.hosts[1]
    yield until(lambda: hang.requests_total == 2)
    yield clients["reset"].lost  # the server reset it
    # The idle timeout closes the working host's connection, made after the hanging ones:
    # had they an idle timer, theirs would have expired first.
    yield clients["idle"].lost.addTimeout(10, reactor)
    assert b"</html>" in clients["idle"].data
    assert (hang.connections_open, hang.requests_in_flight) == (2, 2), hang
    yield connect(clients, "keepalive", 0, port)
    yield until(lambda: b"</html>" in clients["keepalive"].data)  # answered, idle timer armed
    yield server.stop()
    for client in clients.values():
        yield client.lost.addTimeout(10, reactor)
    assert not server._protocols and not server._listeners and not server._reserved
    left = [c for c in reactor.getDelayedCalls() if c.active()]
    assert not left, left  # no idle timer, response timer or abort left behind
    assert (hang.connections_open, hang.requests_in_flight, hang.requests_aborted) == (0, 0, 2)
    # every address is free again, the refused host's included (SO_REUSEADDR: connections
    # the server closed in order leave TIME_WAIT behind, which is no leak)
    for h in web.hosts:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((h.address, port))
    print("clean")

failed = []

def done(result):
    if result is not None:
        failed.append(result)
        print(result.getTraceback(), file=sys.stderr)
    reactor.stop()

reactor.callWhenRunning(lambda: main().addBoth(done))
reactor.run()
sys.exit(1 if failed else 0)
"""


def test_stop_closes_hanging_connections_and_leaves_nothing_behind() -> None:
    """In-process server and clients on one reactor, warnings as errors; exit status 0."""
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-c", STOP_SCRIPT],
        capture_output=True,
        text=True,
        env=env_with_checkout(),
        timeout=TIMEOUT * 2,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "clean\n", "")


# -- crawls: the stock scheduler; webs with failures, redirects and names ---------------------


def test_full_crawl_with_the_stock_scheduler(tmp_path: Path) -> None:
    profiles = [
        HostProfile(connect_delay=0.005, response_delay=0.005, max_requests_per_connection=4),
        HostProfile(
            connect_delay=0.005, response_delay=0.01, max_requests_per_connection=1, http10=True
        ),
        HostProfile(connect_delay=0.01, response_delay=0.02, max_requests_per_connection=50),
    ]
    web = generate_web(3, 5, seed=11, host_profiles=profiles, n_seeds=1)
    result = crawl(tmp_path, web, {"CONCURRENT_REQUESTS": 4}, timeout=60)
    reachable = web.reachable()
    assert len(reachable) == 15
    assert result.server.fetch_counts() == dict.fromkeys(reachable, 1)  # stock dupefilter
    assert result.crawl_stats["item_scraped_count"] == 15
    by_url = {web.url(p.id, result.port): p for p in web.pages}
    assert len(result.items) == 15
    for item in result.items:
        page = by_url[item["url"]]
        assert item["quality"] == page.quality
        assert item["host"] == web.hosts[page.host].address == urlsplit(item["url"]).hostname
    # the http10 host's responses each came on their own connection
    http10 = [e for e in result.server.events if e.host == 1]
    assert len({e.connection_id for e in http10}) == len(http10) == 5


QUICK = HostProfile(connect_delay=0.002, response_delay=0.003, max_requests_per_connection=20)


def test_crawl_follows_redirects_across_named_hosts(tmp_path: Path) -> None:
    web = generate_web(
        4,
        6,
        seed=5,
        host_profiles=[QUICK] * 4,
        redirects=4,
        redirect_hops=2,
        hostnames=True,
        aliases={1: 1},
    )
    redirects = {p.id for p in web.pages if p.redirect_to is not None}
    assert len(redirects) == 8 and redirects <= web.reachable()
    result = crawl(tmp_path, web, {"CONCURRENT_REQUESTS": 4})
    server = result.server
    assert server.fetch_counts() == {page: 1 for page in web.reachable()}
    assert {e.page_id for e in server.events if e.status == 301} == redirects
    assert {e.status for e in server.events} == {200, 301}  # no 404, no 421
    stats = result.crawl_stats
    assert stats["downloader/response_status_count/301"] == len(redirects)
    assert stats["item_scraped_count"] == len(web.reachable() - redirects)
    # every URL named a host; the resolver sent each name to its host's address
    hosts_map = web.hosts_map()
    assert {item["host"] for item in result.items} <= set(hosts_map)
    for index, host in server.hosts.items():
        assert set(host.host_headers) == set(web.hosts[index].names)
    assert set(server.hosts[1].host_headers) == {"h1.testweb.test", "h1-a1.testweb.test"}


def test_crawl_against_failing_hosts_counts_every_attempt(tmp_path: Path) -> None:
    failures = {0: "hang", 2: "refuse", 3: "reset"}
    web = generate_web(6, 5, seed=0, n_seeds=2, host_profiles=[QUICK] * 6, failures=failures)
    unfetchable = web.linked() - web.reachable()
    tried = {h: {p for p in unfetchable if web.pages[p].host == h} for h in failures}
    assert all(tried.values()), tried  # each failing host has pages the crawl will try
    attempts = 2  # RETRY_TIMES=1: each request is tried twice, then given up
    result = crawl(
        tmp_path, web, {"CONCURRENT_REQUESTS": 4, "DOWNLOAD_TIMEOUT": 1, "RETRY_TIMES": 1}
    )
    server = result.server
    assert server.fetch_counts() == {page: 1 for page in web.reachable()}
    for index in (0, 3):  # hang, reset: one connection and one request per attempt, no answer
        host = server.hosts[index]
        expected = attempts * len(tried[index])
        assert (host.connections_total, host.requests_total) == (expected, expected)
        assert (host.requests_aborted, host.responses_total, host.connections_open) == (
            expected,
            0,
            0,
        )
    assert server.hosts[2] == server_mod.HostStats()  # refused: never reached the server
    stats = result.crawl_stats
    assert stats["retry/max_reached"] == sum(len(pages) for pages in tried.values())
    assert stats["downloader/exception_count"] == attempts * stats["retry/max_reached"]
    assert stats["finish_reason"] == "finished"


def test_control_index_lists_every_endpoint_and_the_seeds(served: Served) -> None:
    import urllib.request

    with urllib.request.urlopen(served.server.control + "/", timeout=TIMEOUT) as reply:
        assert reply.status == 200
        page = reply.read().decode()
    for path in ("/_stats", "/_reset", "/_web"):
        assert path in page
    assert '<a href="/_reset">' not in page  # a GET there would clear the stats
    for url in served.server.seeds:
        assert f'href="{url}"' in page
    assert served.stats().control_requests >= 1


def test_held_answers_wait_for_the_release(served: Served) -> None:
    served.server.hold()
    page = served.web.seeds[0]
    host = served.web.pages[page].host
    with _connect(served.address(host)) as conn:
        conn.sendall(_request(served.web.pages[page].path, served.web.hosts[host].address))
        deadline = time.monotonic() + TIMEOUT
        while served.stats().hosts[host].requests_total < 1:  # read and counted...
            assert time.monotonic() < deadline, "the held request never reached the server"
        held = served.stats().hosts[host]
        assert (held.requests_in_flight, held.responses_total) == (1, 0)  # ...not answered
        served.server.release()
        status, _, _ = _read_response(conn.makefile("rb"))
    assert status == "HTTP/1.1 200 OK"
    assert served.stats().hosts[host].responses_total == 1
