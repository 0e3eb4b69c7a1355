"""The local test web's generator: a pure function of its arguments and seed, and a
module that imports neither Scrapy nor Twisted (the server and crawls are in
test_testweb.py; the spider and resolver in test_testweb_spider.py)."""

from __future__ import annotations

import hashlib
import itertools
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from helpers import env_with_checkout

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

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
WEB_PY = ROOT / "scrapy_twolevel" / "testweb" / "web.py"
TIMEOUT = 20.0  # bound on every wait for a subprocess or a socket


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
    subprocess.run(
        [sys.executable, "-c", code], check=True, env=env_with_checkout(), timeout=TIMEOUT
    )


def test_importing_the_testing_package_installs_no_reactor() -> None:
    code = (
        "import sys, scrapy_twolevel.testweb as t\n"
        "t.generate_web(3, 3); t.TestWebServer; t.TestWebSpider; t.TestWebResolver\n"
        "assert 'twisted.internet.reactor' not in sys.modules\n"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, env=env_with_checkout(), timeout=TIMEOUT
    )
