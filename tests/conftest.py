"""The suite's layers (markers), and the real Redis the distributed-mode tests talk to.

Every test file belongs to one layer, so a contributor can run the fast part alone::

    pytest -m "unit or glue"     # pure structures, and components built with get_crawler
    pytest -m crawl              # real crawls of the local test web (subprocesses)
    pytest -m redis              # the distributed mode against a real Redis
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: Layer of each test file. unit: pure data structures and algorithms (a fake clock, no
#: Scrapy crawl); glue: Scrapy components built from real settings (get_crawler), or a
#: process started to import or check something; crawl: real crawls over loopback sockets;
#: redis: anything that talks to Redis.
LAYERS = {
    "unit": (
        "architecture buckets codec distributed_sim failures frontier gate header_parsers inflight "
        "intake "
        "live_snapshot "
        "local_only ownership "
        "politeness "
        "publish_time recrawl_history recrawl_model recrawl_planner recrawl_samples seen sim "
        "store_contract topics"
    ),
    "glue": "config dupefilter meta_keys packaging request_stores scheduler_contract view",
    "crawl": (
        "conformance crash crawl disk_faults duplicate_links example_project live_browser "
        "live_crawl politeness_crawl recrawl_crawl startup "
        "testweb "
        "testweb_cli topics_crawl"
    ),
    "redis": (
        "cluster distributed_chaos distributed_crawl distributed_history distributed_recrawl "
        "inbox node registry seen_log"
    ),
}
LAYER_OF = {f"test_{name}.py": layer for layer, names in LAYERS.items() for name in names.split()}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        name = Path(str(item.fspath)).name
        if name not in LAYER_OF:
            raise pytest.UsageError(f"{name} has no layer: add it to LAYERS in tests/conftest.py")
        item.add_marker(LAYER_OF[name])


@pytest.fixture
def redis_url() -> str:
    """``TWOLEVEL_REDIS_URL``, default 127.0.0.1:6379/0 (Redis runs on these machines)."""
    return os.environ.get("TWOLEVEL_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def redis_crawl(redis_url: str) -> Iterator[tuple[Any, str]]:
    """``(client, crawl_id)`` of a crawl of its own; its ``twolevel:<crawl_id>:*`` keys (and
    its recrawl history's, ``twolevel-history:<crawl_id>:*``) are deleted afterwards. Redis
    is imported here: only the Redis layer needs the client."""
    import redis

    client = redis.Redis.from_url(redis_url)
    crawl_id = f"test-{uuid.uuid4().hex[:10]}"
    yield client, crawl_id
    keys = [
        *client.scan_iter(f"twolevel:{crawl_id}:*"),
        *client.scan_iter(f"twolevel-history:{crawl_id}:*"),
    ]
    if keys:
        client.delete(*keys)
    client.close()
