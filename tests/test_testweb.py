"""The local test web: generator (pure), server (real sockets, in a subprocess), spider.

The server and crawls run in subprocesses so that this process never installs or runs a
reactor; the tests talk to them with ``socket`` and ``http.client`` and read what the server
saw from its ``/_stats`` endpoint.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import pytest
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from scrapy_twolevel.testing import server as server_mod
from scrapy_twolevel.testing import spider as spider_mod
from scrapy_twolevel.testing.process import ServerProcess
from scrapy_twolevel.testing.web import (
    CONTROL_ADDRESS,
    HostProfile,
    WebSpec,
    generate_web,
    host_address,
)

ROOT = Path(__file__).resolve().parents[1]
WEB_PY = ROOT / "scrapy_twolevel" / "testing" / "web.py"
TIMEOUT = 20.0  # bound on every wait for a subprocess or a socket


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _same_host_fraction(web: WebSpec) -> float:
    same = total = 0
    for page in web.pages:
        for link in page.links:
            total += 1
            same += web.pages[link].host == page.host
    return same / total


# -- generator (pure) ------------------------------------------------------------------------


def test_generate_is_deterministic_per_seed() -> None:
    assert generate_web(10, 8, seed=3) == generate_web(10, 8, seed=3)
    assert generate_web(10, 8, seed=3).to_json() == generate_web(10, 8, seed=3).to_json()


def test_different_seeds_give_different_webs() -> None:
    a, b = generate_web(10, 8, seed=1), generate_web(10, 8, seed=2)
    assert [p.links for p in a.pages] != [p.links for p in b.pages]
    assert [p.quality for p in a.pages] != [p.quality for p in b.pages]


@pytest.mark.parametrize(
    ("n_hosts", "pages_per_host", "seed"),
    [(1, 1, 0), (1, 7, 0), (7, 1, 0), (20, 30, 1), (50, 40, 2), (13, 3, 5)],
)
def test_every_page_is_reachable_from_the_seeds(
    n_hosts: int, pages_per_host: int, seed: int
) -> None:
    web = generate_web(n_hosts, pages_per_host, seed=seed)
    assert len(web.pages) == n_hosts * pages_per_host
    assert web.reachable() == set(range(len(web.pages)))
    # seeds are a subset of home pages, not every page
    assert all(web.pages[s].path == "/" for s in web.seeds)
    assert 1 <= len(web.seeds) <= max(1, -(-n_hosts // 4))


def test_reachable_follows_links_only() -> None:
    web = generate_web(4, 3, seed=0, n_seeds=1)
    cut = WebSpec(
        hosts=web.hosts,
        pages=tuple(
            type(p)(id=p.id, host=p.host, path=p.path, quality=p.quality, links=())
            for p in web.pages
        ),
        seeds=web.seeds,
    )
    assert cut.reachable() == set(web.seeds)


@pytest.mark.parametrize("fraction", [0.9, 0.7, 0.5])
def test_same_host_link_fraction_is_close_to_requested(fraction: float) -> None:
    web = generate_web(50, 40, seed=4, same_host_links=fraction)
    assert _same_host_fraction(web) == pytest.approx(fraction, abs=0.01)
    assert all(len(p.links) >= 5 for p in web.pages)


def test_addresses_are_unique_loopback_and_never_the_control_address() -> None:
    web = generate_web(600, 1, seed=0)
    addresses = [h.address for h in web.hosts]
    assert len(set(addresses)) == 600
    assert CONTROL_ADDRESS not in addresses
    assert all(a.startswith("127.0.") for a in addresses)
    assert addresses[0] == "127.0.1.1"
    assert addresses[249] == "127.0.1.250"
    assert addresses[250] == "127.0.2.1"
    assert host_address(599) == addresses[599]


def test_default_profiles_mix_http10_and_keepalive_hosts() -> None:
    web = generate_web(200, 1, seed=0)
    http10 = [h for h in web.hosts if h.http10]
    assert all(h.max_requests_per_connection == 1 for h in http10)
    assert 0.15 < len(http10) / 200 < 0.35
    keepalive = [h for h in web.hosts if not h.http10]
    assert all(5 <= h.max_requests_per_connection <= 100 for h in keepalive)
    assert all(0.005 <= h.connect_delay <= 0.1 for h in web.hosts)
    assert all(0.005 <= h.response_delay <= 0.2 for h in web.hosts)
    assert all(0 < p.quality <= 1 for p in web.pages)


def test_http10_requires_one_request_per_connection() -> None:
    with pytest.raises(ValueError, match="http10"):
        HostProfile(http10=True, max_requests_per_connection=5)
    with pytest.raises(ValueError, match="quality_scale"):
        HostProfile(quality_scale=0)


def test_json_round_trip() -> None:
    web = generate_web(7, 6, seed=9)
    again = WebSpec.from_json(web.to_json())
    assert again == web
    assert again.page_by_address_path(web.hosts[2].address, "/p/3") == web.pages[2 * 6 + 3]
    assert json.loads(web.to_json()) == web.to_dict()


def test_host_profiles_override_behaviour_but_not_links() -> None:
    slow = HostProfile(response_delay=0.5, quality_scale=0.2)
    top = HostProfile(http10=True, max_requests_per_connection=1, quality_scale=1.0)
    base = generate_web(5, 10, seed=1)
    web = generate_web(5, 10, seed=1, host_profiles={0: slow, 3: top})
    assert [p.links for p in web.pages] == [p.links for p in base.pages]
    assert web.hosts[0].response_delay == 0.5
    assert web.hosts[3].http10 and web.hosts[3].max_requests_per_connection == 1
    assert web.hosts[1] == base.hosts[1]
    # scales 0.2 and 1.0 give disjoint quality ranges: [0.1, 0.2] and [0.5, 1]
    assert max(p.quality for p in web.pages if p.host == 0) <= 0.2
    assert min(p.quality for p in web.pages if p.host == 3) >= 0.5


def test_generate_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="same_host_links"):
        generate_web(2, 2, same_host_links=1.5)
    with pytest.raises(ValueError, match="host_profiles has 1 entries, expected 2"):
        generate_web(2, 2, host_profiles=[HostProfile()])
    with pytest.raises(ValueError, match="n_seeds"):
        generate_web(2, 2, n_seeds=3)


def test_web_module_imports_neither_scrapy_nor_twisted() -> None:
    # web.py loaded on its own, so the parent package's imports do not blur the check
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('web', {str(WEB_PY)!r})\n"
        "mod = sys.modules['web'] = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(mod)\n"
        "mod.generate_web(3, 3)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('scrapy', 'twisted'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_env(), timeout=TIMEOUT)


def test_importing_the_testing_package_installs_no_reactor() -> None:
    code = (
        "import sys, scrapy_twolevel.testing as t\n"
        "t.generate_web(3, 3); t.TestWebServer; t.TestWebSpider\n"
        "assert 'twisted.internet.reactor' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_env(), timeout=TIMEOUT)


# -- server over real sockets ----------------------------------------------------------------

KEEPALIVE, HTTP10, SLOW, FAST = 0, 1, 2, 3
PROFILES = [
    HostProfile(connect_delay=0, response_delay=0, max_requests_per_connection=3),
    HostProfile(connect_delay=0, response_delay=0, max_requests_per_connection=1, http10=True),
    HostProfile(connect_delay=0, response_delay=0.5, max_requests_per_connection=100),
    HostProfile(connect_delay=0.3, response_delay=0, max_requests_per_connection=100),
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
    web = generate_web(4, 5, seed=7, host_profiles=PROFILES, n_seeds=2)
    with ServerProcess(web, tmp_path, timeout=TIMEOUT, env=_env()) as server:
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
    address = served.address(FAST)  # connect_delay 0.3 s, response_delay 0
    with _connect(address) as sock, sock.makefile("rb") as f:
        took = []
        for path in ("/", "/p/1"):
            start = time.monotonic()
            sock.sendall(_request(path, address[0]))
            _read_response(f)
            took.append(time.monotonic() - start)
    assert took[0] >= 0.3
    assert took[1] < 0.25


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
    assert stats.max_concurrent_requests_per_host() == {KEEPALIVE: 0, HTTP10: 0, SLOW: 2, FAST: 0}
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


# -- spider ----------------------------------------------------------------------------------


def test_quality_to_priority() -> None:
    assert spider_mod.quality_to_priority(1.0) == 1_000_000
    assert spider_mod.quality_to_priority(0.123456) == 123_456
    assert spider_mod.quality_to_priority(0.5) > spider_mod.quality_to_priority(0.499999)


def test_spider_start_urls_from_argument_or_setting() -> None:
    cls = spider_mod.TestWebSpider
    seeds = ["http://127.0.1.1:1/", "http://127.0.1.2:1/"]
    crawler = get_crawler(cls, {spider_mod.SEEDS_SETTING: seeds})
    assert cls.from_crawler(crawler).start_urls == seeds
    spider = cls.from_crawler(crawler, start_urls="http://a.test/, http://b.test/")
    assert spider.start_urls == ["http://a.test/", "http://b.test/"]
    assert cls.from_crawler(get_crawler(cls), start_urls=["http://c.test/"]).start_urls == [
        "http://c.test/"
    ]


def test_spider_parse_gives_priorities_meta_and_item() -> None:
    web = generate_web(3, 4, seed=2)
    page = web.pages[5]
    url = web.url(page.id, 8080)
    body = server_mod.render_page(web, page.id, 8080)
    response = HtmlResponse(url, body=body, encoding="utf-8")
    out = list(spider_mod.TestWebSpider().parse(response))
    items = [o for o in out if isinstance(o, dict)]
    assert items == [{"url": url, "quality": page.quality, "host": web.hosts[page.host].address}]
    requests = [o for o in out if not isinstance(o, dict)]
    assert [r.url for r in requests] == [web.url(t, 8080) for t in page.links]
    for r, t in zip(requests, page.links, strict=True):
        assert r.priority == spider_mod.quality_to_priority(web.pages[t].quality)
        assert r.meta["twolevel_quality"] == web.pages[t].quality


def test_full_crawl_with_the_stock_scheduler(tmp_path: Path) -> None:
    profiles = [
        HostProfile(connect_delay=0.005, response_delay=0.005, max_requests_per_connection=4),
        HostProfile(
            connect_delay=0.005, response_delay=0.01, max_requests_per_connection=1, http10=True
        ),
        HostProfile(connect_delay=0.01, response_delay=0.02, max_requests_per_connection=50),
    ]
    web = generate_web(3, 5, seed=11, host_profiles=profiles, n_seeds=1)
    (tmp_path / "web.json").write_text(web.to_json())
    out = tmp_path / "result.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "scrapy_twolevel.testing",
            "crawl",
            "--web",
            str(tmp_path / "web.json"),
            "--output",
            str(out),
            "--set",
            "CONCURRENT_REQUESTS=4",
        ],
        check=True,
        env=_env(),
        timeout=60,
        stdout=subprocess.DEVNULL,
    )
    result = spider_mod.CrawlResult.from_dict(json.loads(out.read_text()))
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
