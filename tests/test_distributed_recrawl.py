"""Seed recrawling in a distributed crawl: real ``scrapy crawl news`` nodes on one Redis.

One news site (``python -m scrapy_twolevel.testweb news``, on the sped-up clock: a real
second is a site hour) serves every node. The node holding the site's bucket is killed
with SIGKILL; the other must take the bucket with its seed plans and go on refetching,
with the whole crawl's history in Redis, and never fetch a seed twice at once.
"""

from __future__ import annotations

import json
import selectors
import signal
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import pytest
from crawl_helpers import TTL, Node, scrapy_in_project
from helpers import record_archive, wait_until

from scrapy_twolevel.distributed.buckets import BucketTable
from scrapy_twolevel.distributed.history import RedisHistoryStore, RedisModelStore
from scrapy_twolevel.recrawl.clock import ScaledClock
from scrapy_twolevel.storage.model_store import load_stored_model
from scrapy_twolevel.testweb.news import NewsSite, parse_sections, seed_key_for

pytestmark = pytest.mark.redis

SCALE = 3600.0
SECTIONS = "day:120,night:120"
MIN_INTERVAL = 600.0  # the news spider's TWOLEVEL_RECRAWL_MIN_INTERVAL (planner seconds)
DURATION = 30  # real seconds each node stays open (TWOLEVEL_RECRAWL_DURATION): room for
# a slow start, the kill, the reaping (TTL) and refetches after it


@pytest.fixture
def news_site(tmp_path):
    """``(base URL, origin)`` of a news site served by a child process."""
    origin = time.time()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scrapy_twolevel.testweb",
            "news",
            "--sections",
            SECTIONS,
            "--time-scale",
            str(SCALE),
            "--time-origin",
            repr(origin),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            assert selector.select(30), "the news site did not start"
        ready = json.loads(proc.stdout.readline())
        yield ready["url"], origin
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        proc.stdout.close()


def news_node(tmp_path, name, redis_url, crawl_id, url, origin, **settings):
    return Node(
        tmp_path,
        name,
        None,
        redis_url,
        crawl_id,
        spider="news",
        EXTENSIONS={"scrapy_twolevel.testweb.news.EmbeddedNewsSite": 0},
        TWOLEVEL_TESTWEB_NEWS_URL=url,
        TWOLEVEL_TESTWEB_NEWS_SECTIONS=SECTIONS,
        TWOLEVEL_RECRAWL_TIME_ORIGIN=origin,
        TWOLEVEL_RECRAWL_DURATION=DURATION,
        **settings,
    )


@pytest.mark.long
def test_seed_plans_move_to_the_survivor_when_their_holder_is_killed(
    tmp_path: Path, news_site, redis_crawl, redis_url
) -> None:
    client, crawl_id = redis_crawl
    url, origin = news_site
    clock = ScaledClock(SCALE, origin)
    prefix = f"twolevel:{crawl_id}:"
    first = news_node(tmp_path, "first", redis_url, crawl_id, url, origin)
    wait_until(lambda: client.scard(f"{prefix}planned") == 1, "the seeds' plans in Redis")
    (bucket,) = (int(b) for b in client.smembers(f"{prefix}planned"))
    assert len(client.hgetall(f"{prefix}plans:{bucket}")) == 2  # both sections, one host
    second = news_node(tmp_path, "second", redis_url, crawl_id, url, origin)

    def settled() -> bool:
        """Both nodes in the table, and the seeds' bucket held by its owner there."""
        table = BucketTable.from_json(client.get(f"{prefix}table"))
        holder = client.hget(f"{prefix}holders", bucket)
        return (
            len(table.nodes) == 2
            and holder is not None
            and (holder.decode() == table.owner(bucket))
        )

    wait_until(settled, "the seeds' bucket held by its owner in the two-node table")
    holder = client.hget(f"{prefix}holders", bucket).decode()
    victim, survivor = (first, second) if holder == "first" else (second, first)
    # Let the holder refetch a few times, then kill it.
    history = RedisHistoryStore(client, crawl_id)
    fetched_before = len(history.fetches())
    wait_until(lambda: len(history.fetches()) >= fetched_before + 3, "three more seed fetches")
    victim.proc.send_signal(signal.SIGKILL)
    assert victim.wait() == -signal.SIGKILL
    killed_at = clock()

    stats = survivor.finished()
    assert stats["twolevel/redis/reaped"] == 1
    assert stats["twolevel/redis/plans_loaded"] >= 2  # the survivor holds both plans now
    fetches = history.fetches()
    # Refetching went on after the victim was reaped (its ttl on the sped-up clock), for
    # both seeds: their plans moved.
    reaped_by = killed_at + TTL * SCALE
    for section in parse_sections(SECTIONS):
        key = seed_key_for(section.name)
        times = [at for seed, at, _ in fetches if seed == key]
        assert sum(1 for at in times if at > reaped_by) >= 2, (key, times, reaped_by)
        # Never fetched twice at once: not by two nodes, not by a plan and the reloaded
        # lease of the fetch the victim had in flight.
        gaps = [b - a for a, b in pairwise(times)]
        assert min(gaps) >= MIN_INTERVAL, (key, sorted(gaps)[:5])
    # The history in Redis is the whole crawl's: every article dated from its own page.
    site = NewsSite(parse_sections(SECTIONS), clock)
    articles = {url.decode(): v for url, v in client.hgetall(history.prefix + "articles").items()}
    published = client.hgetall(history.prefix + "published")
    assert len(articles) >= 20
    dated = 0
    for article_url, at in published.items():
        path = article_url.decode().split("/", 3)[3]
        section, _, article = path.partition("/a/")
        assert abs(float(at) - site.publish_time(section, article)) < 1e-3, article_url
        dated += article_url.decode() in articles
    assert dated >= 0.9 * len(articles)
    counts = history.counts()
    assert counts["plans"] == 2
    assert stats["twolevel/recrawl/history_fetches"] == counts["fetches"] == len(fetches)


def test_scrapy_recrawl_train_and_report_use_the_crawls_history_in_redis(
    redis_crawl, redis_url
) -> None:
    client, crawl_id = redis_crawl
    origin = time.time()
    shared = RedisHistoryStore(client, crawl_id)
    site = record_archive(shared, ScaledClock(SCALE, origin), days=14)
    shared.flush()
    common = [
        "-s", f"TWOLEVEL_REDIS_URL={redis_url}",
        "-s", f"TWOLEVEL_CRAWL_ID={crawl_id}",
        "-s", f"TWOLEVEL_RECRAWL_TIME_ORIGIN={origin}",
    ]  # fmt: skip
    train = scrapy_in_project("recrawl", "train", "news", *common)
    assert train.returncode == 0, train.stdout + train.stderr[-3000:]
    models = RedisModelStore(client, crawl_id)
    assert f"Trained on Redis, under twolevel-history:{crawl_id}:" in train.stdout
    assert f"model saved to Redis key {models.key}" in train.stdout
    model = load_stored_model(models)
    assert model is not None
    assert set(model.fits) == {seed_key_for(s) for s in site.sections}
    report = scrapy_in_project("recrawl", "report", "news", *common)
    assert report.returncode == 0, report.stderr[-3000:]
    assert train.stdout.split("\n\n", 1)[1].strip() == report.stdout.split("\n\n", 1)[1].strip()
    # No Redis there: one line naming the setting, no traceback.
    down = scrapy_in_project(
        "recrawl", "train", "news", "-s", "TWOLEVEL_REDIS_URL=redis://127.0.0.1:1/0"
    )
    assert down.returncode == 1
    assert "Cannot reach Redis at TWOLEVEL_REDIS_URL='redis://127.0.0.1:1/0'" in down.stdout
    assert "Traceback" not in down.stderr, down.stderr[-3000:]
