"""Fixtures shared by the distributed-mode tests: the real Redis they talk to."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis


@pytest.fixture
def redis_url() -> str:
    """``TWOLEVEL_REDIS_URL``, default 127.0.0.1:6379/0 (Redis runs on these machines)."""
    return os.environ.get("TWOLEVEL_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def redis_crawl(redis_url: str) -> Iterator[tuple[redis.Redis, str]]:
    """``(client, crawl_id)`` of a crawl of its own; its ``twolevel:<crawl_id>:*`` keys (and
    its recrawl history's, ``twolevel-history:<crawl_id>:*``) are deleted afterwards."""
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
