"""Scheduler contract, in the style of Scrapy's own tests/test_scheduler.py.

Built with ``get_crawler`` + ``from_crawler``: real settings, real stats, real signals.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from helpers import (
    MIDDLEWARE,
    ContractSpider,
    FakeClock,
    create_scheduler,
    dequeue_all,
    finish,
)
from scrapy import Request
from scrapy.utils.test import get_crawler

from scrapy_twolevel.errors import StateError
from scrapy_twolevel.frontier import Measurement
from scrapy_twolevel.frontier.binding import CpuPrice
from scrapy_twolevel.meta import HOST as HOST_META_KEY
from scrapy_twolevel.scheduler import TwoLevelScheduler

pytestmark = pytest.mark.glue

URLS = [f"http://h{i % 3}.example/{i}" for i in range(12)]


@pytest.fixture(params=[None, "jobdir"], ids=["memory", "jobdir"])
def jobdir(request, tmp_path):
    return tmp_path / "job" if request.param else None


def test_length_and_dequeue_everything(jobdir):
    scheduler, crawler = create_scheduler(jobdir=jobdir)
    for url in URLS:
        assert scheduler.enqueue_request(Request(url, callback=crawler.spider.parse))
    assert len(scheduler) == len(URLS)
    got = dequeue_all(scheduler, crawler)
    assert sorted(r.url for r in got) == sorted(URLS)
    assert len(scheduler) == 0 and not scheduler.has_pending_requests()
    stats = crawler.stats.get_stats()
    kind = "disk" if jobdir else "memory"
    assert stats["scheduler/enqueued"] == stats[f"scheduler/enqueued/{kind}"] == 12
    assert stats["scheduler/dequeued"] == stats[f"scheduler/dequeued/{kind}"] == 12
    scheduler.close("finished")


def test_duplicates_are_filtered_by_the_dupefilter(jobdir):
    scheduler, _ = create_scheduler(jobdir=jobdir)
    assert scheduler.enqueue_request(Request("http://a.example/x"))
    assert not scheduler.enqueue_request(Request("http://a.example/x"))
    assert scheduler.enqueue_request(Request("http://a.example/x", dont_filter=True))
    assert len(scheduler) == 2
    scheduler.close("finished")


def test_priority_order_within_one_host(jobdir):
    scheduler, crawler = create_scheduler({"TWOLEVEL_POLICY": "quality-first"}, jobdir)
    for priority in [1, 5, 3, 5, -2]:
        scheduler.enqueue_request(
            Request(f"http://a.example/{priority}/{len(scheduler)}", priority=priority)
        )
    got = [r.url for r in dequeue_all(scheduler, crawler)]
    assert got == [
        "http://a.example/5/1",
        "http://a.example/5/3",
        "http://a.example/3/2",
        "http://a.example/1/0",
        "http://a.example/-2/4",
    ]
    scheduler.close("finished")


def test_one_request_in_flight_per_host_until_it_leaves_the_downloader():
    scheduler, crawler = create_scheduler({"TWOLEVEL_POLICY": "breadth-first"})
    for i in range(3):
        scheduler.enqueue_request(Request(f"http://a.example/{i}"))
    first = scheduler.next_request()
    assert first.meta[HOST_META_KEY] == "a.example"
    assert scheduler.next_request() is None
    assert crawler.stats.get_value("twolevel/held_back") == 1
    finish(scheduler, crawler, first)
    assert scheduler.next_request().url == "http://a.example/1"
    scheduler.close("finished")


def test_requests_without_network_host_take_the_plain_lane(jobdir):
    scheduler, crawler = create_scheduler(jobdir=jobdir)
    scheduler.enqueue_request(Request("data:text/plain,hello"))
    scheduler.enqueue_request(Request("file:///etc/hostname"))
    scheduler.enqueue_request(Request("http://a.example/1"))
    got = dequeue_all(scheduler, crawler)
    assert {r.url for r in got} == {
        "data:text/plain,hello",
        "file:///etc/hostname",
        "http://a.example/1",
    }
    assert crawler.stats.get_value("twolevel/plain_lane") == 2
    scheduler.close("finished")


def test_http_url_without_host_is_not_lost():
    scheduler, crawler = create_scheduler()
    scheduler.enqueue_request(Request("http:///no-host"))
    scheduler.enqueue_request(Request("http://:80/no-host-either"))
    assert {r.url for r in dequeue_all(scheduler, crawler)} == {
        "http:///no-host",
        "http://:80/no-host-either",
    }
    assert crawler.stats.get_value("twolevel/plain_lane") == 2
    scheduler.close("finished")


def test_unparsable_url_takes_plain_lane_and_is_logged_once(caplog, monkeypatch):
    def unparsable(request):
        raise ValueError("cannot parse")

    monkeypatch.setattr("scrapy_twolevel.scheduler.make_request_host", lambda mode: unparsable)
    scheduler, crawler = create_scheduler()
    for i in range(3):
        scheduler.enqueue_request(Request(f"http://a.example/{i}"))
    assert len(dequeue_all(scheduler, crawler)) == 3
    assert crawler.stats.get_value("twolevel/malformed_url") == 3
    assert sum("Cannot work out the host" in r.message for r in caplog.records) == 1
    scheduler.close("finished")


def test_reopen_from_jobdir_loses_nothing_and_keeps_estimates(tmp_path):
    jobdir = tmp_path / "job"
    scheduler, crawler = create_scheduler({"TWOLEVEL_POLICY": "crawl-capability"}, jobdir)
    for i, url in enumerate(URLS):
        scheduler.enqueue_request(Request(url, priority=i, callback=crawler.spider.parse))
    first = [scheduler.next_request() for _ in range(2)]
    for request in first:
        finish(scheduler, crawler, request)
    scheduler.frontier.observe(
        "h1.example",
        Measurement(
            latency=0.5, new_connection=False, served_on_connection=2, closed_by_server=False
        ),
    )
    scheduler.close("shutdown")
    saved = json.loads((jobdir / "twolevel" / "hosts.json").read_text())
    assert saved["hosts"]["h1.example"]["response_time"] == pytest.approx(0.5)

    scheduler, crawler = create_scheduler({"TWOLEVEL_POLICY": "crawl-capability"}, jobdir)
    assert len(scheduler) == len(URLS) - 2
    assert scheduler.frontier.host("h1.example").estimate.response_time == pytest.approx(0.5)
    rest = dequeue_all(scheduler, crawler)
    assert sorted(r.url for r in first + rest) == sorted(URLS)
    assert all(r.callback == crawler.spider.parse for r in rest)
    scheduler.close("finished")


def test_damaged_stored_request_is_dropped_counted_and_frees_its_host(tmp_path, caplog):
    jobdir = tmp_path / "job"
    scheduler, crawler = create_scheduler({"TWOLEVEL_POLICY": "breadth-first"}, jobdir)
    for i in range(3):
        scheduler.enqueue_request(Request(f"http://a.example/{i}"))
    scheduler.enqueue_request(Request("http://b.example/0"))
    scheduler.close("shutdown")
    db = sqlite3.connect(jobdir / "twolevel" / "frontier.sqlite3")
    db.execute("UPDATE requests SET data = x'00ff' WHERE seq = (SELECT MIN(seq) FROM requests)")
    db.commit()
    db.close()

    scheduler, crawler = create_scheduler({"TWOLEVEL_POLICY": "breadth-first"}, jobdir)
    urls = [r.url for r in dequeue_all(scheduler, crawler)]
    assert urls == ["http://a.example/1", "http://a.example/2", "http://b.example/0"]
    assert crawler.stats.get_value("twolevel/undecodable") == 1
    assert crawler.stats.get_value("scheduler/dequeued") == 3
    assert "could not be rebuilt" in caplog.text
    scheduler.close("finished")


def test_a_long_run_of_items_with_nothing_to_hand_out_is_skipped_over_several_calls(tmp_path):
    """Stale copies of a bucket that moved away, or damaged rows, can be hundreds of
    thousands: one ``next_request`` skipped them all (200,000 took 0.48 s on the reactor).
    Now at most SKIPPED_PER_CALL per call; the next call goes on, and nothing is lost."""
    from scrapy_twolevel.scheduler import SKIPPED_PER_CALL

    jobdir = tmp_path / "job"
    damaged = 2 * SKIPPED_PER_CALL + 10
    settings = {"TWOLEVEL_POLICY": "breadth-first"}
    scheduler, crawler = create_scheduler(settings, jobdir)
    for i in range(damaged):
        scheduler.enqueue_request(Request(f"http://a.example/{i}"))
    scheduler.enqueue_request(Request("http://b.example/ok", priority=-1))
    scheduler.close("shutdown")
    db = sqlite3.connect(jobdir / "twolevel" / "frontier.sqlite3")
    db.execute("UPDATE requests SET data = x'00ff' WHERE seq < (SELECT MAX(seq) FROM requests)")
    db.commit()
    db.close()

    scheduler, crawler = create_scheduler(settings, jobdir)
    stats = crawler.stats
    handed, skipped_per_call = [], []
    while scheduler.has_pending_requests() and len(skipped_per_call) < 10:
        before = stats.get_value("twolevel/undecodable", 0)
        request = scheduler.next_request()
        skipped_per_call.append(stats.get_value("twolevel/undecodable", 0) - before)
        if request is not None:
            handed.append(request.url)
            finish(scheduler, crawler, request)
    assert handed == ["http://b.example/ok"]  # nothing lost
    assert sum(skipped_per_call) == damaged
    assert max(skipped_per_call) == SKIPPED_PER_CALL  # never more in one call
    assert stats.get_value("twolevel/skipped_per_call_reached") >= 1
    scheduler.close("finished")


def test_unserializable_request_falls_back_to_memory(tmp_path):
    scheduler, crawler = create_scheduler({"SCHEDULER_DEBUG": True}, tmp_path / "job")
    scheduler.enqueue_request(Request("http://a.example/1", callback=lambda r: None))
    scheduler.enqueue_request(Request("http://a.example/2", meta={"obj": object()}))
    assert crawler.stats.get_value("scheduler/unserializable") == 2
    assert len(dequeue_all(scheduler, crawler)) == 2
    assert crawler.stats.get_value("scheduler/enqueued/memory") == 2
    scheduler.close("finished")


def test_corrupt_hosts_file_names_the_file_and_is_not_overwritten(tmp_path):
    jobdir = tmp_path / "job"
    (jobdir / "twolevel").mkdir(parents=True)
    hosts = jobdir / "twolevel" / "hosts.json"
    hosts.write_text("{not json")
    with pytest.raises(StateError, match=r"hosts\.json is corrupt"):
        create_scheduler(jobdir=jobdir)
    assert hosts.read_text() == "{not json"
    hosts.write_text(json.dumps({"format": "other-tool/9", "hosts": {}}))
    with pytest.raises(StateError, match="other-tool/9"):
        create_scheduler(jobdir=jobdir)


MEASURED = Measurement(
    latency=0.3,
    new_connection=True,
    served_on_connection=1,
    closed_by_server=True,
    remaining_on_connection=0,
)


def test_estimates_the_middleware_reports_update_the_frontier():
    scheduler, crawler = create_scheduler()
    request = hand_out(scheduler, crawler, "http://a.example/1")
    scheduler.outcomes.measured(request, MEASURED)
    host = scheduler.frontier.host("a.example")
    est = host.estimate
    # First latency on a new connection, split in the defaults' ratio (0.01 : 0.01).
    assert est.connection_time == pytest.approx(0.15)
    assert est.response_time == pytest.approx(0.15)
    assert est.keepalive is False
    assert host.fetched == 1 and not host.busy
    scheduler.close("finished")


def test_a_response_the_scheduler_did_not_hand_out_is_not_a_page_of_its_host():
    """robots.txt, media pipelines, ``engine.download_async``: such a response counted
    toward the host's budget (1 page + 2 images gave up a host with budget 3)."""
    scheduler, _ = create_scheduler({"TWOLEVEL_HOST_BUDGET": 2})
    assert scheduler.enqueue_request(Request("http://a.example/1"))
    assert scheduler.enqueue_request(Request("http://a.example/2"))
    for path in ("/robots.txt", "/img1.png", "/img2.png"):
        scheduler.outcomes.measured(Request(f"http://a.example{path}"), MEASURED)
    host = scheduler.frontier.host("a.example")
    assert host.fetched == 0 and not host.given_up
    assert host.estimate is scheduler.frontier.host("b.example").estimate  # the prior
    assert [scheduler.next_request().url for _ in range(1)] == ["http://a.example/1"]
    scheduler.close("finished")


# -- lanes: a request's own URL decides, never a slot inherited from another request ----


def hand_out(scheduler, crawler, url):
    """Enqueue ``url``, dequeue it and let 'the downloader' write its slot, as Scrapy does."""
    assert scheduler.enqueue_request(Request(url))
    request = scheduler.next_request()
    assert request is not None and request.url == url
    request.meta["download_slot"] = request.meta[HOST_META_KEY]
    return request


def test_redirect_to_another_host_takes_that_hosts_lane():
    scheduler, crawler = create_scheduler({"TWOLEVEL_POLICY": "breadth-first"})
    on_b = hand_out(scheduler, crawler, "http://b.example/1")  # b is busy from now on
    on_a = hand_out(scheduler, crawler, "http://a.example/old")
    redirected = on_a.replace(url="http://b.example/new")  # what RedirectMiddleware builds
    assert redirected.meta["download_slot"] == "a.example"
    finish(scheduler, crawler, on_a)
    assert scheduler.enqueue_request(redirected)
    assert "download_slot" not in redirected.meta  # stale: the downloader must not reuse it
    assert scheduler.next_request() is None  # lane b.example is busy: never two in flight
    finish(scheduler, crawler, on_b)
    again = scheduler.next_request()
    assert again.url == redirected.url and again.meta[HOST_META_KEY] == "b.example"
    scheduler.close("finished")


def test_retry_in_domain_mode_stays_in_the_domains_one_lane():
    scheduler, crawler = create_scheduler(
        {"TWOLEVEL_POLICY": "breadth-first", "TWOLEVEL_HOST_KEY": "domain"}
    )
    first = hand_out(scheduler, crawler, "http://www.example.co.uk/1")
    first.meta["download_slot"] = "www.example.co.uk"  # the downloader keys by hostname
    assert scheduler.enqueue_request(Request("http://shop.example.co.uk/2"))
    retry = first.replace(dont_filter=True)  # what RetryMiddleware builds
    finish(scheduler, crawler, first)
    assert scheduler.enqueue_request(retry)
    assert scheduler.frontier.host_count == 1
    out = [scheduler.next_request()]
    assert scheduler.next_request() is None  # one lane: one request in flight
    finish(scheduler, crawler, out[0])
    out.append(scheduler.next_request())
    assert {r.meta[HOST_META_KEY] for r in out} == {"example.co.uk"}
    scheduler.close("finished")


def test_a_download_slot_the_user_set_is_the_lane_and_carries_over():
    scheduler, crawler = create_scheduler({"TWOLEVEL_POLICY": "breadth-first"})
    assert scheduler.enqueue_request(
        Request("http://a.example/1", meta={"download_slot": "shared"})
    )
    mine = scheduler.next_request()
    assert mine.meta[HOST_META_KEY] == "shared"
    derived = mine.replace(url="http://b.example/2")
    finish(scheduler, crawler, mine)
    scheduler.enqueue_request(derived)
    assert derived.meta["download_slot"] == "shared"
    assert scheduler.next_request().meta[HOST_META_KEY] == "shared"
    scheduler.close("finished")


def raises_key_error(request):
    return {"a": 1}[request.url]


def test_quality_function_raising_anything_gives_quality_zero_and_keeps_the_request(caplog):
    scheduler, crawler = create_scheduler(
        {"TWOLEVEL_POLICY": "quality-first", "TWOLEVEL_QUALITY": f"{__name__}.raises_key_error"}
    )
    for i in range(3):
        assert scheduler.enqueue_request(Request(f"http://a.example/{i}"))
    assert len(dequeue_all(scheduler, crawler)) == 3
    assert crawler.stats.get_value("twolevel/invalid_quality") == 3
    assert sum("TWOLEVEL_QUALITY gave no finite" in r.message for r in caplog.records) == 1
    scheduler.close("finished")


def test_stored_request_of_a_renamed_class_is_dropped_and_frees_its_host(tmp_path):
    from scrapy_twolevel import codec

    jobdir = tmp_path / "job"
    scheduler, crawler = create_scheduler({"TWOLEVEL_POLICY": "breadth-first"}, jobdir)
    for i in range(2):
        scheduler.enqueue_request(Request(f"http://a.example/{i}"))
    scheduler.close("shutdown")
    db = sqlite3.connect(jobdir / "twolevel" / "frontier.sqlite3")
    renamed = codec.encode({"url": "http://a.example/0", "_class": "no_such_module.OldRequest"})
    db.execute(
        "UPDATE requests SET data = ? WHERE seq = (SELECT MIN(seq) FROM requests)", (renamed,)
    )
    db.commit()
    db.close()
    scheduler, crawler = create_scheduler({"TWOLEVEL_POLICY": "breadth-first"}, jobdir)
    assert [r.url for r in dequeue_all(scheduler, crawler)] == ["http://a.example/1"]
    assert crawler.stats.get_value("twolevel/undecodable") == 1
    scheduler.close("finished")


def test_a_store_refusing_every_write_holds_requests_until_it_takes_them(tmp_path):
    """A file that refuses even the writes kept in its open transaction (query_only, as a
    file system gone read-only): the request is kept in memory, nothing is handed out
    while queued requests cannot be read back, and all of it comes out once writes work."""
    scheduler, crawler = create_scheduler({"TWOLEVEL_POLICY": "breadth-first"}, tmp_path / "j")
    store = scheduler.parts.store.file
    store.commit()
    store.db.execute("PRAGMA query_only=ON")  # every write now fails, for real
    assert scheduler.enqueue_request(Request("http://a.example/1"))
    assert scheduler.has_pending_requests()  # which adds the counts kept to the stats
    assert crawler.stats.get_value("twolevel/store_failures") == 1
    assert scheduler.next_request() is None  # cannot read it back yet; not lost
    store.db.execute("PRAGMA query_only=OFF")
    assert [r.url for r in dequeue_all(scheduler, crawler)] == ["http://a.example/1"]
    scheduler.close("finished")


# -- JOBDIR: what shaped the frontier file ------------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        (
            {"TWOLEVEL_HOST_KEY": "hostname"},
            {"TWOLEVEL_HOST_KEY": "domain"},
            r"TWOLEVEL_HOST_KEY='hostname', but this crawl has TWOLEVEL_HOST_KEY='domain'",
        ),
        (
            {"TWOLEVEL_POLICY": "crawl-capability"},
            {"TWOLEVEL_POLICY": "breadth-first"},
            r"quality order, but TWOLEVEL_POLICY='breadth-first' needs fifo order",
        ),
    ],
)
def test_resuming_with_another_shape_stops_with_the_setting_named(tmp_path, first, second, message):
    jobdir = tmp_path / "job"
    scheduler, _ = create_scheduler(first, jobdir)
    scheduler.enqueue_request(Request("http://a.example/1"))
    scheduler.close("shutdown")
    path = jobdir / "twolevel" / "frontier.sqlite3"
    before = path.read_bytes()
    crawler = get_crawler(
        ContractSpider, {"DOWNLOADER_MIDDLEWARES": MIDDLEWARE, **second, "JOBDIR": str(jobdir)}
    )
    scheduler = TwoLevelScheduler.from_crawler(crawler)
    with pytest.raises(StateError, match=message):
        scheduler.open(ContractSpider.from_crawler(crawler))
    scheduler.close("shutdown")  # clean after a failed open: no signal to disconnect
    assert path.read_bytes() == before
    # a policy of the same order resumes fine
    same = {"TWOLEVEL_POLICY": "quality-first"} if "TWOLEVEL_POLICY" in first else first
    scheduler, crawler = create_scheduler(same, jobdir)
    assert [r.url for r in dequeue_all(scheduler, crawler)] == ["http://a.example/1"]
    scheduler.close("finished")


@pytest.mark.parametrize("topics", [False, True])
def test_a_resumed_jobdir_crawl_remembers_the_pages_each_host_gave(tmp_path, topics):
    """``Host.fetched`` was not saved: every resume gave every host its whole budget again."""

    settings = {"TWOLEVEL_HOST_BUDGET": 3}
    if topics:
        settings["TWOLEVEL_TOPICS"] = {"news": {"priority": 0}}
        settings["SPIDER_MIDDLEWARES"] = {"scrapy_twolevel.topics.TopicMiddleware": 960}
    jobdir = tmp_path / "job"
    scheduler, crawler = create_scheduler(settings, jobdir=jobdir)
    for i in range(6):
        assert scheduler.enqueue_request(Request(f"http://a.example/{i}"))
    for _ in range(2):  # two pages of a.example, then the crawl stops
        request = scheduler.next_request()
        scheduler.outcomes.measured(request, MEASURED)
    scheduler.close("shutdown")

    scheduler, crawler = create_scheduler(settings, jobdir=jobdir)
    assert len(scheduler) == 4
    request = scheduler.next_request()  # its third page: its budget
    scheduler.outcomes.measured(request, MEASURED)
    assert scheduler.next_request() is None and len(scheduler) == 0
    assert crawler.stats.get_value("twolevel/hosts_at_budget") == 1
    scheduler.close("finished")

    scheduler, crawler = create_scheduler(settings, jobdir=jobdir)  # nothing comes back
    assert len(scheduler) == 0
    assert scheduler.enqueue_request(Request("http://a.example/late")) is False
    scheduler.close("finished")


def test_counts_reach_the_stats_after_each_next_request_and_at_close():
    """The reporter keeps counts between calls (one Scrapy 2.19 inc_value costs 2-3 µs);
    after each next_request, and once the scheduler is closed, the stats are exact."""
    scheduler, crawler = create_scheduler()
    for i in range(3):
        scheduler.enqueue_request(Request(f"http://a{i}.example/"))
    assert crawler.stats.get_value("scheduler/enqueued") is None  # kept, not yet added
    request = scheduler.next_request()
    assert request is not None
    assert crawler.stats.get_value("scheduler/enqueued") == 3
    assert crawler.stats.get_value("scheduler/dequeued") == 1
    scheduler.enqueue_request(Request("http://b.example/"))
    scheduler.close("shutdown")
    assert crawler.stats.get_value("scheduler/enqueued") == 4
    scheduler.reporter.inc("twolevel/after_close")  # a late count goes straight through
    assert crawler.stats.get_value("twolevel/after_close") == 1


def test_binding_capability_ranks_at_the_measured_price_of_cpu():
    scheduler, crawler = create_scheduler(
        {"TWOLEVEL_POLICY": "binding-capability", "CONCURRENT_REQUESTS": 8}
    )
    assert scheduler.cpu_price is not None and scheduler.cpu_price.lowest == 1 / 8
    # The crawl's clocks, driven by the test: a second with the core saturated.
    wall, cpu = FakeClock(100.0), FakeClock(5.0)
    scheduler.cpu_price = CpuPrice(wall, cpu, 8)
    for i in range(3):
        scheduler.enqueue_request(Request(f"http://h{i}.example/"))
    assert scheduler.next_request() is not None
    assert scheduler.frontier.params.cpu_price == 1.0
    wall.now += 1.0
    cpu.now += 1.0
    assert scheduler.next_request() is not None
    assert scheduler.frontier.params.cpu_price == 4.0
    stats = crawler.stats.get_stats()
    assert stats["twolevel/cpu_price"] == 4.0 and stats["twolevel/cpu_price_changes"] == 1
    scheduler.close("finished")
    # A policy with a fixed price measures nothing.
    other, _ = create_scheduler({"TWOLEVEL_POLICY": "resource-capability"})
    assert other.cpu_price is None
    other.close("finished")


def test_the_view_shows_a_hosts_next_urls_and_its_finished_sessions(jobdir):
    """What the live view's host page reads: the URLs a host's queue hands out next (best
    first, with their quality, in memory and from the JOBDIR file) and its sessions."""
    scheduler, crawler = create_scheduler({"TWOLEVEL_POLICY": "quality-first"}, jobdir)
    for priority in [1, 5, 3]:
        scheduler.enqueue_request(Request(f"http://a.example/{priority}", priority=priority))
    scheduler.enqueue_request(Request("http://b.example/x"))
    assert scheduler.queued_pages("a.example", 2) == [
        {"url": "http://a.example/5", "quality": 5.0},
        {"url": "http://a.example/3", "quality": 3.0},
    ]
    assert scheduler.queued_pages("nowhere.example", 2) == []
    assert scheduler.recent_sessions("a.example") == []
    got = dequeue_all(scheduler, crawler)
    assert len(got) == 4 and scheduler.queued_pages("a.example", 2) == []
    sessions = scheduler.recent_sessions("a.example")
    assert sum(s.served for s in sessions) == 3 and {s.host for s in sessions} == {"a.example"}
    assert all(s.ended >= s.started for s in sessions)
    scheduler.close("finished")
