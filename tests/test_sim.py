"""The pure crawl simulation: the reference web's generator, PageRank and the event engine.

Event orders and times are computed by hand in each test's docstring or comments; the
engine drives the real frontier, so these tests also pin how the frontier, the connection
tracker and the cost model behave together on a virtual clock.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_twolevel.frontier import CostParams
from scrapy_twolevel.testweb.sim.des import (
    VARIANTS,
    CrawlRun,
    Fetch,
    simulate,
    simulate_stock,
    simulate_twolevel,
)
from scrapy_twolevel.testweb.sim.webgen import generate_paper_web, pagerank, web_stats
from scrapy_twolevel.testweb.web import HostSpec, PageSpec, WebSpec, host_address, page_path

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent

D = 0.85


def tiny_web(
    hosts: list[tuple[float, float, int]],
    pages: list[tuple[int, float, tuple[int, ...]]],
    seeds: tuple[int, ...],
) -> WebSpec:
    """``hosts``: (connect, respond, max per connection); ``pages``: (host, quality, links)."""
    host_specs = tuple(
        HostSpec(i, host_address(i), c, r, m, http10=m == 1) for i, (c, r, m) in enumerate(hosts)
    )
    counter = [0] * len(hosts)
    page_specs = []
    for pid, (h, q, links) in enumerate(pages):
        page_specs.append(PageSpec(pid, h, page_path(counter[h]), q, links))
        counter[h] += 1
    return WebSpec(host_specs, tuple(page_specs), seeds)


def order_and_times(run: CrawlRun) -> list[tuple[int, float]]:
    return [(f.page, f.finished) for f in run.fetches]


def assert_events(run: CrawlRun, expected: list[tuple[int, float]]) -> None:
    """The pages in this exact order, finishing at these times (to float rounding)."""
    assert [f.page for f in run.fetches] == [page for page, _ in expected]
    assert [f.finished for f in run.fetches] == pytest.approx([t for _, t in expected])


# -- PageRank ------------------------------------------------------------------------


def test_pagerank_cycle_is_uniform():
    assert pagerank([[1], [2], [0]]) == pytest.approx([1 / 3] * 3, abs=1e-12)


def test_pagerank_dangling_page_closed_form():
    # 0 -> 1, 1 has no links (its rank is spread over both pages):
    # r0 = (1-d)/2 + d*r1/2 and r0 + r1 = 1 give r0 = 1/(2+d).
    r = pagerank([[1], []])
    assert r == pytest.approx([1 / (2 + D), (1 + D) / (2 + D)], abs=1e-12)
    assert sum(r) == pytest.approx(1.0, abs=1e-12)


def test_pagerank_star_closed_form():
    # 0 -> 1, 0 -> 2, 1 -> 0, 2 -> 0: r0 = (1-d)/3 + d*(1 - r0), so r0 = ((1-d)/3 + d)/(1+d).
    r0 = ((1 - D) / 3 + D) / (1 + D)
    r = pagerank([[1, 2], [0], [0]])
    assert r == pytest.approx([r0, (1 - r0) / 2, (1 - r0) / 2], abs=1e-12)


def test_pagerank_isolated_pages_and_errors():
    assert pagerank([], 4) == pytest.approx([0.25] * 4)
    with pytest.raises(ValueError, match="outside"):
        pagerank([[5]], 2)
    with pytest.raises(ValueError, match="damping"):
        pagerank([[0]], d=1.0)


# -- the generator ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_web() -> WebSpec:
    return generate_paper_web(100, 3000, seed=7)


def test_generator_server_mix(small_web: WebSpec):
    stats = web_stats(small_web)
    assert stats["http10_share"] == 0.24
    assert stats["keepalive_max_share"] == 0.66
    assert stats["middle_share"] == pytest.approx(0.10)
    for host in small_web.hosts:
        m = host.max_requests_per_connection
        assert host.http10 == (m == 1)
        assert 1 <= m <= 100


def test_generator_links_stay_on_the_server(small_web: WebSpec):
    assert web_stats(small_web)["same_server_link_share"] == pytest.approx(0.9, abs=0.02)


def test_generator_heavy_tails(small_web: WebSpec):
    stats = web_stats(small_web)
    sizes = sorted(
        (sum(1 for p in small_web.pages if p.host == h.index) for h in small_web.hosts),
        reverse=True,
    )
    assert sum(sizes[:10]) >= 0.25 * sum(sizes)  # the biggest 10% of servers: 2.5x their share
    assert stats["max_in_degree"] >= 20 * max(1, stats["median_in_degree"])
    resp = [h.response_delay for h in small_web.hosts]
    assert 0 < sum(r < 0.1 for r in resp) < len(resp) / 2  # a minority of fast servers
    assert max(resp) > 1.0  # and a slow tail of seconds


def test_generator_every_page_reachable_from_the_home_pages(small_web: WebSpec):
    assert len(small_web.reachable()) == len(small_web.pages)
    assert all(small_web.pages[s].path == "/" for s in small_web.seeds)
    assert len(small_web.seeds) == len(small_web.hosts)
    few = generate_paper_web(60, 1200, seed=3, n_seeds=3)
    assert len(few.seeds) == 3
    assert len(few.reachable()) == 1200


def test_generator_quality_is_scaled_pagerank(small_web: WebSpec):
    pr = pagerank([p.links for p in small_web.pages])
    assert sum(pr) == pytest.approx(1.0, abs=1e-9)
    top = max(pr)
    stored = [p.quality for p in small_web.pages]
    assert max(stored) == 1.0
    assert stored == pytest.approx([q / top for q in pr], rel=1e-9)
    # Resolution: the test web spider's round(q * 1e6) keeps every page above priority 100.
    assert min(round(q * 1e6) for q in stored) > 100


def test_generator_zipf_quality():
    web = generate_paper_web(20, 400, seed=1, quality="zipf")
    stored = sorted((p.quality for p in web.pages), reverse=True)
    assert stored == pytest.approx([1 / r for r in range(1, 401)], rel=1e-9)


def test_generator_is_deterministic_per_seed():
    a = generate_paper_web(40, 800, seed=5).to_json()
    assert generate_paper_web(40, 800, seed=5).to_json() == a
    assert generate_paper_web(40, 800, seed=6).to_json() != a


def test_generator_rejects_bad_parameters():
    with pytest.raises(ValueError, match="n_servers <= n_pages"):
        generate_paper_web(10, 5)
    with pytest.raises(ValueError, match="same_server_links"):
        generate_paper_web(10, 50, same_server_links=1.5)
    with pytest.raises(ValueError, match="quality_scale"):
        generate_paper_web(10, 50, quality_scale=1e9)


def test_sim_package_imports_neither_scrapy_nor_twisted():
    """In a fresh interpreter (as when a benchmark script runs), the simulator and the
    frontier it drives load without Scrapy or Twisted."""
    code = (
        "import json, sys; import scrapy_twolevel.testweb.sim as sim; "
        "import scrapy_twolevel.testweb.sim.nodes; "
        "print(json.dumps([sim.__file__, 'scrapy_twolevel.frontier' in sys.modules, "
        "sorted({m.split('.')[0] for m in sys.modules} & {'scrapy', 'twisted'})]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    sim_file, frontier_loaded, framework_modules = json.loads(out.stdout)
    assert Path(sim_file).parent == ROOT / "scrapy_twolevel" / "testweb" / "sim"
    assert frontier_loaded
    assert framework_modules == []


# -- the event engine, two-level frontier ------------------------------------------------

#: One server: connection 1 s, response 0.5 s, 2 requests per connection; the home page
#: links to two pages.
ONE_SERVER = tiny_web([(1.0, 0.5, 2)], [(0, 0.5, (1, 2)), (0, 0.3, ()), (0, 0.2, ())], (0,))


def test_one_server_session_model_exact_times():
    """Connections close when a session ends.

    t=0    session 1 (budget 1: the queue holds the seed): page 0, new connection: 1 + 0.5.
    t=1.5  the reply says ``max=1``, so the host serves 2 per connection; the session ends
           and its connection is closed. Pages 1, 2 are queued; session 2 (budget 2):
           page 1 on a new connection: 1.5 + 1.5 = 3.0.
    t=3.0  page 2 on the same connection: 3.0 + 0.5 = 3.5 (the server then closes it).
    """
    run = simulate_twolevel(ONE_SERVER, "breadth-first", max_open_hosts=1)
    assert order_and_times(run) == [(0, 1.5), (1, 3.0), (2, 3.5)]
    assert [f.new_connection for f in run.fetches] == [True, True, False]
    assert run.connections_opened == 2
    assert run.sessions == 2
    assert run.politeness_violations == 0
    # The estimates the real HostEstimate learnt. First reply: latency 1.5 on a new
    # connection, split 1:1 as the default times are equal -> 0.75 + 0.75; 1 + max=1 -> 2
    # per connection. Second: a new connection (the tracker was told the crawler closed
    # the last one) -> connection 1.5 - 0.75 = 0.75. Third: reused -> response
    # 0.8 * 0.75 + 0.2 * 0.5 = 0.7.
    est = run.estimates[host_address(0)]
    assert est.connection_time == pytest.approx(0.75)
    assert est.response_time == pytest.approx(0.7)
    assert est.requests_per_connection == pytest.approx(2.0)
    assert est.connection_samples == 2


def test_one_server_pool_model_keeps_idle_connections():
    """Connections survive between sessions until the server's idle timeout.

    t=1.5  page 1 reuses the first connection: 1.5 + 0.5 = 2.0, its second request, so
           the server closes it; page 2 opens a new one: 2.0 + 1.5 = 3.5.
    """
    run = simulate_twolevel(ONE_SERVER, "breadth-first", max_open_hosts=1, reuse="pool")
    assert order_and_times(run) == [(0, 1.5), (1, 2.0), (2, 3.5)]
    assert [f.new_connection for f in run.fetches] == [True, False, True]
    assert run.connections_opened == 2


def test_pool_model_idle_timeout_closes_connections():
    """K = 1, breadth-first, connections pooled (see the two-server tests for the order).

    t=2.2  server 0's connection has been idle 0.2 s: page 1 reuses it -> 3.2, page 2 -> 4.2.
    t=4.2  server 1's connection has been idle 2.0 s: within a 30 s timeout page 4 reuses it
           (-> 4.3, page 5 -> 4.4); past a 1 s timeout the server has closed it, page 4
           opens a new one (-> 4.4, page 5 -> 4.5).
    """
    kept = simulate_twolevel(TWO_SERVERS, "breadth-first", max_open_hosts=1, reuse="pool")
    assert_events(kept, [(0, 2.0), (3, 2.2), (1, 3.2), (2, 4.2), (4, 4.3), (5, 4.4)])
    timed_out = simulate_twolevel(
        TWO_SERVERS, "breadth-first", max_open_hosts=1, reuse="pool", idle_timeout=1.0
    )
    assert_events(timed_out, [(0, 2.0), (3, 2.2), (1, 3.2), (2, 4.2), (4, 4.4), (5, 4.5)])
    assert (kept.connections_opened, timed_out.connections_opened) == (2, 3)


def test_http10_server_pays_a_connection_per_page():
    web = tiny_web([(1.0, 0.5, 1)], [(0, 0.5, (1, 2)), (0, 0.3, ()), (0, 0.2, ())], (0,))
    run = simulate_twolevel(web, "crawl-capability", max_open_hosts=1)
    assert order_and_times(run) == [(0, 1.5), (1, 3.0), (2, 4.5)]
    assert run.connections_opened == 3
    assert run.estimates[host_address(0)].keepalive is False


#: Server 0 slow (connection 1 s, response 1 s), server 1 fast (0.1 s, 0.1 s), both keep
#: 100 requests per connection; each home page links to two pages of its server.
TWO_SERVERS = tiny_web(
    [(1.0, 1.0, 100), (0.1, 0.1, 100)],
    [
        (0, 0.5, (1, 2)),
        (0, 0.9, ()),
        (0, 0.8, ()),
        (1, 0.5, (4, 5)),
        (1, 0.1, ()),
        (1, 0.2, ()),
    ],
    (0, 3),
)


def test_two_servers_one_connection_performance_first_takes_the_fast_one():
    """K = 1. Both homes look alike before any measurement, so the first seed goes first.

    t=0    home 0 (slow): 1 + 1 = 2.0.
    t=2.0  server 0 is measured (P=2, T = 2*1 + 2*1/1.2 = 3.67 -> score 0.55); server 1 is
           not (prior score 1/(0.02 + 0.01/1.2) = 35): home 3 on a new connection -> 2.2.
    t=2.2  server 1 measured: P=2, T = 2*0.1 + 2*0.1/1.2 = 0.37 -> score 5.45 > 0.55:
           page 4 (new connection) -> 2.4, page 5 (same connection) -> 2.5.
    t=2.5  server 0: page 1 -> 4.5, page 2 -> 5.5.
    """
    run = simulate_twolevel(TWO_SERVERS, "performance-first", max_open_hosts=1)
    assert_events(run, [(0, 2.0), (3, 2.2), (4, 2.4), (5, 2.5), (1, 4.5), (2, 5.5)])


def test_two_servers_one_connection_breadth_first_is_first_come_first_served():
    """Same web: breadth-first serves server 0 (queued at 2.0) before server 1 (at 2.2)."""
    run = simulate_twolevel(TWO_SERVERS, "breadth-first", max_open_hosts=1)
    assert_events(run, [(0, 2.0), (3, 2.2), (1, 4.2), (2, 5.2), (4, 5.4), (5, 5.5)])


def test_two_servers_quality_first_orders_urls_by_quality():
    """Quality-first: server 0 holds the best URL (0.9); its URLs go best first (1 then 2)."""
    run = simulate_twolevel(TWO_SERVERS, "quality-first", max_open_hosts=1)
    assert [f.page for f in run.fetches] == [0, 3, 1, 2, 5, 4]


def test_two_servers_two_connections_run_in_parallel():
    run = simulate_twolevel(TWO_SERVERS, "breadth-first", max_open_hosts=2)
    assert_events(run, [(3, 0.2), (4, 0.4), (5, 0.5), (0, 2.0), (1, 4.0), (2, 5.0)])
    assert run.max_parallel_per_server == 1


# -- the event engine, Scrapy's stock scheduler -----------------------------------------

#: One server (connection 1 s, response 0.5 s); the home links to pages of quality
#: 0.3, 0.9, 0.6.
FAN_OUT = tiny_web(
    [(1.0, 0.5, 100)],
    [(0, 0.5, (1, 2, 3)), (0, 0.3, ()), (0, 0.9, ()), (0, 0.6, ())],
    (0,),
)


def test_stock_politeness_violations_counted():
    """CONCURRENT_REQUESTS_PER_DOMAIN = 2, CONCURRENT_REQUESTS = 4.

    t=0    home: new connection -> 1.5.
    t=1.5  pages 2, 3, 1 (by priority) enter the downloader; page 2 reuses the connection
           -> 2.0; page 3 opens a second one while page 2 is in flight (violation 1)
           -> 3.0; page 1 waits in the slot.
    t=2.0  page 1 takes the freed connection while page 3 is in flight (violation 2) -> 2.5.
    """
    run = simulate_stock(FAN_OUT, "dfo", concurrent_requests=4, per_domain=2)
    assert order_and_times(run) == [(0, 1.5), (2, 2.0), (1, 2.5), (3, 3.0)]
    assert run.politeness_violations == 2
    assert run.connections_opened == 2
    assert run.max_parallel_per_server == 2
    assert [f.concurrent for f in run.fetches] == [0, 0, 1, 1]


def test_stock_with_one_request_per_domain_is_polite():
    run = simulate_stock(FAN_OUT, "bfo", concurrent_requests=4, per_domain=1)
    assert order_and_times(run) == [(0, 1.5), (2, 2.0), (3, 2.5), (1, 3.0)]
    assert run.politeness_violations == 0
    assert run.connections_opened == 1


#: Three servers, all alike; each home links to one page: qualities 0.5, 0.2, 0.8.
THREE_SERVERS = tiny_web(
    [(0.5, 0.5, 100)] * 3,
    [(0, 0.5, (1,)), (0, 0.5, ()), (1, 0.5, (3,)), (1, 0.2, ()), (2, 0.5, (5,)), (2, 0.8, ())],
    (0, 2, 4),
)


def test_stock_priority_queue_serves_best_priority_first():
    run = simulate_stock(THREE_SERVERS, "dfo", concurrent_requests=1)
    assert [f.page for f in run.fetches] == [0, 2, 4, 5, 1, 3]


def test_stock_downloader_aware_queue_round_robins_over_slots():
    # All slots have 0 requests in the downloader: Scrapy's _next_slot takes the first key
    # after the last one served, so the servers take turns whatever the priorities.
    run = simulate_stock(THREE_SERVERS, "dapq", concurrent_requests=1)
    assert [f.page for f in run.fetches] == [0, 2, 4, 1, 3, 5]


def test_stock_session_model_closes_idle_connections():
    # The queue moves to another server after every request, so in the session model every
    # request opens a connection (6 x 1.0 s); pooled, the child pages reuse their server's
    # connection (3 x 1.0 s + 3 x 0.5 s).
    pool = simulate_stock(THREE_SERVERS, "dapq", concurrent_requests=1, reuse="pool")
    session = simulate_stock(THREE_SERVERS, "dapq", concurrent_requests=1)
    assert session.connections_opened == 6
    assert pool.connections_opened == 3
    assert pool.total_time == pytest.approx(3 * 1.0 + 3 * 0.5)
    assert session.total_time == pytest.approx(6 * 1.0)


# -- whole crawls ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def mid_web() -> WebSpec:
    return generate_paper_web(60, 2400, seed=11)


def _max_in_flight(fetches: list[Fetch]) -> int:
    edges = sorted([(f.started, 1) for f in fetches] + [(f.finished, -1) for f in fetches])
    level = peak = 0
    for _, step in edges:  # at equal times, -1 sorts first: a freed slot is reused at once
        level += step
        peak = max(peak, level)
    return peak


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_fetches_every_page_once_within_k(mid_web: WebSpec, variant: str):
    run = simulate(mid_web, variant, connections=16)
    assert sorted(f.page for f in run.fetches) == list(range(len(mid_web.pages)))
    assert _max_in_flight(run.fetches) <= 16
    assert run.quality_at(run.total_time) == pytest.approx(1.0)
    assert run.connections_opened == sum(f.new_connection for f in run.fetches)
    if variant in ("breadth-first", "performance-first", "quality-first", "crawl-capability"):
        assert run.politeness_violations == 0
        assert run.max_parallel_per_server == 1
    else:
        assert run.max_parallel_per_server <= 8


def test_runs_are_deterministic(mid_web: WebSpec):
    for variant in ("crawl-capability", "scrapy-dapq"):
        a = simulate(mid_web, variant, connections=16)
        b = simulate(mid_web, variant, connections=16)
        assert a.fetches == b.fetches


def test_quality_policies_gather_quality_sooner_than_breadth_first(mid_web: WebSpec):
    bf = simulate(mid_web, "breadth-first", connections=16)
    for variant in ("quality-first", "crawl-capability"):
        run = simulate(mid_web, variant, connections=16)
        assert run.time_to_quality(0.5) < bf.time_to_quality(0.5)


def test_run_metrics_on_a_hand_computed_crawl():
    run = simulate_twolevel(ONE_SERVER, "breadth-first", max_open_hosts=1)
    # Qualities 0.5, 0.3, 0.2 (sum 1) finish at 1.5, 3.0, 3.5.
    assert run.pages_at(1.49) == 0
    assert run.pages_at(3.0) == 2
    assert run.quality_at(3.2) == pytest.approx(0.8)
    assert run.time_to_quality(0.5) == 1.5
    assert run.time_to_quality(0.8) == 3.0
    assert run.time_to_quality(0.81) == 3.5
    assert math.isinf(run.time_to_quality(1.5))
    assert run.quality_at_pages(2 / 3) == pytest.approx(0.8)
    # Area under the quality curve over [0, 7]: 0.5 * 5.5 + 0.3 * 4 + 0.2 * 3.5 = 4.65.
    assert run.mean_quality(7.0) == pytest.approx(4.65 / 7)
    summary = run.summary(baseline_time=7.0)
    assert summary["mean_quality_bf"] == pytest.approx(4.65 / 7)
    assert summary["pages_at_half_bf"] == 3
    assert summary["quality_at_30pct_bf"] == pytest.approx(0.5)
    curve = run.curve(points=8)
    assert curve["t"][-1] == 3.5
    assert curve["pages"] == [0, 0, 0, 1, 1, 1, 2, 3]


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="unknown variant"):
        simulate(ONE_SERVER, "depth-first")
    with pytest.raises(ValueError, match="reuse"):
        simulate(ONE_SERVER, "breadth-first", reuse="forever")
    with pytest.raises(ValueError, match="CONCURRENT_REQUESTS"):
        simulate(ONE_SERVER, "scrapy-dfo", per_domain=0)


def test_custom_cost_params_reach_the_frontier():
    # A pessimistic prior of 1 request per connection makes the first session's budget 1
    # whatever the queue holds; the run still completes with the same pages.
    run = simulate_twolevel(
        TWO_SERVERS,
        "crawl-capability",
        max_open_hosts=1,
        params=CostParams(default_requests_per_connection=1),
    )
    assert sorted(f.page for f in run.fetches) == list(range(6))
