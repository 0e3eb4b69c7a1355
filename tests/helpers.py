"""What several test files share, short of running a crawl: the fake clock, waiting on a
condition, the node protocol driven directly, a Redis of a test's own, a news archive
written into a history, and a scheduler built with ``get_crawler``.

Crawls run in processes are in :mod:`crawl_helpers`; fixtures in ``conftest.py``. Importing
this module imports no ``redis``: the node helpers take the client the ``redis_crawl``
fixture made, and :func:`start_private_redis` imports it when called.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from scrapy import Spider, signals
from scrapy.utils.test import get_crawler

from scrapy_twolevel.distributed.node import Node
from scrapy_twolevel.recrawl.clock import ScaledClock
from scrapy_twolevel.scheduler import TwoLevelScheduler
from scrapy_twolevel.testweb.news import DEFAULT_SECTIONS, NewsSite, parse_sections, seed_key_for

ROOT = Path(__file__).resolve().parents[1]
DAY = 86400.0


class FakeClock:
    """A clock that stands still until a test moves it: ``clock.now = 110.0`` or
    ``clock.now += 5``. Pass it where the code takes ``clock`` (a callable returning
    seconds); tests never patch ``time.time``."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def env_with_checkout() -> dict[str, str]:
    """This process's environment with this checkout first on ``PYTHONPATH``: a process
    started with it imports this checkout's package."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def wait_until(condition: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    """Poll ``condition`` every 50 ms until it is true; fail naming ``what`` after
    ``timeout`` seconds. Tests wait on conditions with deadlines, never fixed sleeps."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# -- the node protocol, driven directly (the Redis layer) ---------------------------------

#: Buckets of a crawl whose nodes are driven directly: few, so tests can name them.
FEW_BUCKETS = 4


def node(client, crawl_id: str, name: str, clock: FakeClock | None = None, ttl: float = 10.0):
    """A :class:`~scrapy_twolevel.distributed.node.Node` of ``crawl_id`` that has joined,
    on ``clock`` (a fake clock at t = 1000 when not given)."""
    n = Node(client, crawl_id, name, buckets=FEW_BUCKETS, ttl=ttl, clock=clock or FakeClock(1000.0))
    n.join()
    return n


def key(n: int) -> bytes:
    """A 16-byte seen key."""
    return n.to_bytes(16, "big")


# -- a private Redis (the shared one serves other tests) -----------------------------------


def start_private_redis(data_dir, port=None, options=()):
    """A redis-server of this test's own (the shared one serves other tests), on ``port``
    (a free one if None), its data in ``data_dir``, with more command-line ``options``: its
    process and a client, once it answers."""
    import redis

    if port is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    data_dir.mkdir(exist_ok=True)
    args = ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir)]
    args += ["--save", "", "--appendonly", "no", *options]
    proc = subprocess.Popen(["redis-server", *args], stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    wait_until(lambda: pings(client), "the private Redis to start")
    return proc, client


def pings(client) -> bool:
    """Whether the Redis behind ``client`` answers (False while it is away)."""
    import redis

    try:
        return client.ping()
    except redis.ConnectionError:
        return False


# -- recrawl history ------------------------------------------------------------------------


def record_archive(history, clock: ScaledClock, days: float) -> NewsSite:
    """The news site's last ``days`` of articles (as of ``clock()``) recorded into any
    history store (the file's, or Redis's), as if they had been crawled; the site."""
    site = NewsSite(parse_sections(DEFAULT_SECTIONS), clock, seed=0)
    until = clock()
    for section in site.sections:
        for t in site.articles(section, until - days * DAY, until):
            url = f"http://archive.test/{section}/{t}"
            history.record_article(url, seed_key_for(section), t, None)
            history.record_published(url, t)
    return site


# -- a scheduler built with get_crawler (the glue layer) -----------------------------------

MIDDLEWARE = {"scrapy_twolevel.middleware.HostMetricsMiddleware": 950}


class ContractSpider(Spider):
    name = "contract"

    def parse(self, response):
        pass


def create_scheduler(settings=None, jobdir=None):
    settings = {"DOWNLOADER_MIDDLEWARES": MIDDLEWARE, **(settings or {})}
    if jobdir is not None:
        settings["JOBDIR"] = str(jobdir)
    crawler = get_crawler(ContractSpider, settings)
    spider = ContractSpider.from_crawler(crawler)
    crawler.spider = spider
    scheduler = TwoLevelScheduler.from_crawler(crawler)
    scheduler.open(spider)
    return scheduler, crawler


def finish(scheduler, crawler, request):
    """What Scrapy signals and the middleware reports (through the scheduler's view) when
    a request is done, in Scrapy's order."""
    crawler.signals.send_catch_log(
        signals.request_left_downloader, request=request, spider=crawler.spider
    )
    scheduler.outcomes.measured(request, None)


def dequeue_all(scheduler, crawler):
    """Dequeue everything, finishing each request as the downloader would."""
    out = []
    while scheduler.has_pending_requests():
        request = scheduler.next_request()
        assert request is not None, "idle hosts with pending work must hand out a request"
        out.append(request)
        finish(scheduler, crawler, request)
    return out


def promtool_check(text: str) -> tuple[int, str]:
    """``promtool check metrics`` on ``text``: its exit code and all it printed (``(0, "")``:
    nothing to say). Without promtool the test fails: the check is part of the suite."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail(
            "promtool not found: `apt-get install prometheus` (Debian's package ships it; "
            "scripts/test.sh installs it when missing)"
        )
    done = subprocess.run(
        [promtool, "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr
