"""The local test web: generator (pure), server (real sockets, in a subprocess), spider.

The server and crawls run in subprocesses so that this process never installs or runs a
reactor; the tests talk to them with ``socket`` and ``http.client`` and read what the server
saw from its ``/_stats`` endpoint.
"""

from __future__ import annotations

import hashlib
import http.client
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import pytest
from crawl_helpers import crawl
from scrapy.http import HtmlResponse
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler
from twisted.internet.error import DNSLookupError

from scrapy_twolevel.testweb import server as server_mod
from scrapy_twolevel.testweb import spider as spider_mod
from scrapy_twolevel.testweb.process import ServerProcess
from scrapy_twolevel.testweb.resolver import HOSTS_MAP_SETTING, TestWebResolver
from scrapy_twolevel.testweb.web import (
    CONTROL_ADDRESS,
    FAILURES,
    HostProfile,
    HostSpec,
    WebSpec,
    generate_web,
    host_address,
    host_name,
)

ROOT = Path(__file__).resolve().parents[1]
WEB_PY = ROOT / "scrapy_twolevel" / "testweb" / "web.py"
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


# 20x30 seed 0, hashed before failures, redirects and names existed: the new options at
# their defaults must leave every existing test web (and benchmark) byte-for-byte the same.
PLAIN_20X30_SHA256 = "e4129b4f6ee9fe06c941cb63ee72074cc904a81b015ba6f5af61a3ce6d814763"


def test_new_options_at_their_defaults_leave_the_web_unchanged() -> None:
    plain = generate_web(20, 30, seed=0)
    assert hashlib.sha256(plain.to_json().encode()).hexdigest() == PLAIN_20X30_SHA256
    explicit = generate_web(
        20, 30, seed=0, failures={}, redirects=0, redirect_hops=1, hostnames=False, aliases={}
    )
    assert explicit == plain and explicit.to_json() == plain.to_json()
    assert plain.reachable() == plain.linked() == set(range(600))
    assert not plain.uses_hostnames and plain.hosts_map() == {}


def test_failure_kinds_are_validated() -> None:
    assert FAILURES == ("hang", "refuse", "reset")
    with pytest.raises(ValueError, match="failure must be None or one of"):
        HostProfile(failure="slow")
    with pytest.raises(ValueError, match=r"failures\[1\]: failure must be None or one of"):
        generate_web(3, 2, failures={1: "timeout"})
    with pytest.raises(ValueError, match=r"failures key 3 out of range 0\.\.2"):
        generate_web(3, 2, failures={3: "hang"})


def _reachable_by_hand(web: WebSpec, failing: set[int]) -> set[int]:
    """BFS from the seeds that never enters a page of a failing host."""
    seen: set[int] = set()
    todo = [s for s in web.seeds if web.pages[s].host not in failing]
    while todo:
        page = todo.pop()
        if page not in seen:
            seen.add(page)
            todo += [t for t in web.pages[page].links if web.pages[t].host not in failing]
    return seen


def test_reachable_leaves_out_failing_hosts_and_what_only_they_lead_to() -> None:
    base = generate_web(12, 6, seed=8, n_seeds=2)
    seed_hosts = {base.pages[s].host for s in base.seeds}
    failing = dict(zip([h for h in range(12) if h not in seed_hosts], FAILURES, strict=False))
    web = generate_web(12, 6, seed=8, n_seeds=2, failures=failing)
    assert [p.links for p in web.pages] == [p.links for p in base.pages]  # links unchanged
    assert {h.index: h.failure for h in web.hosts if h.failure} == failing
    assert not any(h.fetchable for h in web.hosts if h.index in failing)
    reachable = web.reachable()
    assert reachable == _reachable_by_hand(web, set(failing))
    assert len(reachable) < len(base.reachable())
    assert not any(web.pages[p].host in failing for p in reachable)
    # linked(): the reachable pages plus the failing pages they link to, which a crawl tries
    tried = web.linked() - reachable
    assert tried and {web.pages[p].host for p in tried} <= set(failing)
    assert tried == {
        t for p in reachable for t in web.pages[p].links if web.pages[t].host in failing
    }
    # a failing seed host: nothing is fetchable, only the seed is tried
    lone = generate_web(4, 3, seed=0, n_seeds=1)
    dead = generate_web(4, 3, seed=0, n_seeds=1, failures={lone.pages[lone.seeds[0]].host: "hang"})
    assert dead.reachable() == set() and dead.linked() == set(lone.seeds)


def test_redirects_cross_hosts_and_are_each_linked_once() -> None:
    base = generate_web(6, 8, seed=4)
    web = generate_web(6, 8, seed=4, redirects=5)
    assert web == generate_web(6, 8, seed=4, redirects=5)  # deterministic
    assert web != generate_web(6, 8, seed=5, redirects=5)
    plain, redirects = web.pages[:48], web.pages[48:]
    assert [(p.host, p.path, p.quality) for p in plain] == [
        (p.host, p.path, p.quality) for p in base.pages
    ]
    assert [p.path for p in redirects] == [f"/r/{k}" for k in range(5)]
    links_to = {r.id: [p.id for p in web.pages if r.id in p.links] for r in redirects}
    assert all(len(sources) == 1 for sources in links_to.values())
    for r in redirects:
        target = web.pages[r.redirect_to]
        assert r.links == () and target.redirect_to is None
        assert target.host != r.host and r.quality == target.quality
    # the plain pages keep their links, plus one redirect link on each linking page
    for p, b in zip(plain, base.pages, strict=True):
        assert [t for t in p.links if t < 48] == list(b.links)
    assert web.reachable() == set(range(len(web.pages)))


def test_redirect_chains_and_failing_targets() -> None:
    web = generate_web(5, 4, seed=2, redirects=2, redirect_hops=3)
    chains = [web.pages[20:23], web.pages[23:26]]
    for k, chain in enumerate(chains):
        assert [p.path for p in chain] == [f"/r/{k}", f"/r/{k}/1", f"/r/{k}/2"]
        assert [p.redirect_to for p in chain[:2]] == [chain[1].id, chain[2].id]
        end = web.pages[chain[2].redirect_to]
        assert end.redirect_to is None and end.id < 20
        hops = [p.host for p in chain] + [end.host]
        assert all(a != b for a, b in itertools.pairwise(hops))
    assert web.reachable() == set(range(26))
    # redirects live on working hosts; redirecting is no way around a failing one
    hosts = {h: "refuse" for h in range(1, 5)}
    with pytest.raises(ValueError, match="redirects need two working hosts"):
        generate_web(5, 4, seed=2, redirects=1, failures=hosts)
    web = generate_web(5, 4, seed=2, redirects=4, failures={3: "reset"})
    assert all(web.hosts[p.host].failure is None for p in web.pages if p.redirect_to is not None)
    assert not any(web.pages[p].host == 3 for p in web.reachable())


def test_hostnames_and_aliases() -> None:
    base = generate_web(4, 6, seed=1)
    web = generate_web(4, 6, seed=1, hostnames=True, aliases={2: 2})
    assert [p.links for p in web.pages] == [p.links for p in base.pages]
    assert [h.address for h in web.hosts] == [h.address for h in base.hosts]
    assert web.hosts[0].names == (host_name(0),) == ("h0.testweb.test",)
    assert web.hosts[2].names == ("h2.testweb.test", "h2-a1.testweb.test", "h2-a2.testweb.test")
    assert base.hosts[2].names == (base.hosts[2].address,)
    assert web.uses_hostnames
    assert web.hosts_map() == {name: h.address for h in web.hosts for name in h.names}
    assert len(set(web.hosts_map().values())) == 4  # 6 names, 4 addresses
    # each page has one URL; an aliased host's pages are spread over all its names
    assert web.url(0, 8000) == "http://h0.testweb.test:8000/"
    names_used = {urlsplit(web.url(p.id, 1)).hostname for p in web.pages if p.host == 2}
    assert names_used == set(web.hosts[2].names)
    for page in web.pages:
        host = web.host_by_name(urlsplit(web.url(page.id, 1)).hostname)
        assert host is web.hosts[page.host]
    assert WebSpec.from_json(web.to_json()) == web
    with pytest.raises(ValueError, match="aliases need hostnames=True"):
        generate_web(4, 6, aliases={1: 1})
    with pytest.raises(ValueError, match="not a lower-case DNS name"):
        HostSpec(0, "127.0.1.1", 0, 0, 1, True, hostname="10.0.0.1")
    with pytest.raises(ValueError, match="two hosts share a name"):
        twin = replace(web.hosts[1], hostname="h0.testweb.test", aliases=())
        WebSpec(hosts=(web.hosts[0], twin, *web.hosts[2:]), pages=web.pages, seeds=web.seeds)


def test_json_round_trip_with_every_option() -> None:
    web = generate_web(
        6,
        4,
        seed=3,
        failures={5: "hang"},
        redirects=3,
        redirect_hops=2,
        hostnames=True,
        aliases={0: 1},
    )
    again = WebSpec.from_json(web.to_json())
    assert again == web and again.to_dict() == json.loads(web.to_json())
    assert again.hosts_map() == web.hosts_map() and again.reachable() == web.reachable()


def test_web_module_imports_neither_scrapy_nor_twisted() -> None:
    # Imported with its packages (scrapy_twolevel, .testweb, .frontier.host_keys): none of
    # them may import Scrapy or Twisted either.
    code = (
        "import sys\n"
        "import scrapy_twolevel.testweb.web as mod\n"
        f"assert mod.__file__ == {str(WEB_PY)!r}\n"
        "mod.generate_web(3, 3)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('scrapy', 'twisted'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_env(), timeout=TIMEOUT)


def test_importing_the_testing_package_installs_no_reactor() -> None:
    code = (
        "import sys, scrapy_twolevel.testweb as t\n"
        "t.generate_web(3, 3); t.TestWebServer; t.TestWebSpider; t.TestWebResolver\n"
        "assert 'twisted.internet.reactor' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_env(), timeout=TIMEOUT)


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
    with ServerProcess(web, tmp_path, timeout=TIMEOUT, env=_env()) as server:
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
        env=_env(),
        timeout=TIMEOUT * 2,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "clean\n", "")


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


# -- resolver ----------------------------------------------------------------------------------


@pytest.fixture
def dnscache() -> Iterator[Any]:
    """Scrapy's process-wide DNS cache, restored afterwards."""
    from scrapy.resolver import dnscache

    saved, limit = dict(dnscache), dnscache.limit
    yield dnscache
    dnscache.clear()
    dnscache.update(saved)
    dnscache.limit = limit


def _resolve(resolver: TestWebResolver, name: str) -> Any:
    """The resolver answers synchronously (no DNS, no thread): the result or the failure."""
    outcome: list[Any] = []
    resolver.getHostByName(name).addBoth(outcome.append)
    assert len(outcome) == 1, "the answer should be immediate"
    return outcome[0]


def test_resolver_maps_names_and_fills_scrapy_dnscache(dnscache: Any) -> None:
    web = generate_web(3, 2, seed=0, hostnames=True, aliases={1: 1})
    crawler = get_crawler(settings_dict={HOSTS_MAP_SETTING: web.hosts_map()})
    resolver = build_from_crawler(TestWebResolver, crawler, reactor=None)
    names = ["h0.testweb.test", "h1.testweb.test", "h1-a1.testweb.test", "h2.testweb.test"]
    assert list(web.hosts_map()) == names
    assert {n: _resolve(resolver, n) for n in names} == web.hosts_map()
    assert _resolve(resolver, "h1-a1.testweb.test") == _resolve(resolver, "h1.testweb.test")
    # stored like CachingThreadedResolver does: name -> address string
    assert {n: dnscache[n] for n in names} == web.hosts_map()
    assert all(isinstance(dnscache[n], str) for n in names)
    assert _resolve(resolver, "127.0.3.3") == "127.0.3.3"  # an IP literal is its own answer
    # a name outside the map fails at once, never reaching real DNS, and is not cached
    failure = _resolve(resolver, "h9.testweb.test")
    assert failure.check(DNSLookupError) and HOSTS_MAP_SETTING in str(failure.value)
    assert "h9.testweb.test" not in dnscache


def test_resolver_honours_dnscache_enabled_and_rejects_bad_maps(dnscache: Any) -> None:
    settings = {HOSTS_MAP_SETTING: {"a.testweb.test": "127.0.1.1"}, "DNSCACHE_ENABLED": False}
    crawler = get_crawler(settings_dict=settings)
    resolver = build_from_crawler(TestWebResolver, crawler, reactor=None)
    assert _resolve(resolver, "a.testweb.test") == "127.0.1.1"
    assert "a.testweb.test" not in dnscache
    for bad in ({"a.testweb.test": "nowhere"}, {"a.testweb.test": "::1"}):
        crawler = get_crawler(settings_dict={HOSTS_MAP_SETTING: bad})
        with pytest.raises(ValueError, match=f"{HOSTS_MAP_SETTING}: 'a.testweb.test' -> "):
            build_from_crawler(TestWebResolver, crawler, reactor=None)


# -- crawls of webs with failures, redirects and names -----------------------------------------


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
