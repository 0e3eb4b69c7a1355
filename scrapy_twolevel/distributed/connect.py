"""Reaching the crawl's Redis: the one client a node uses, and the start-up check.

A Redis that cannot be reached, or holds this crawl with another bucket count, stops the
crawl at start-up with one message naming the setting (``SettingsError``) or the key and
the command that clears it (``StateError``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..config import node_name
from ..errors import SettingsError, StateError
from .buckets import BucketTable
from .keys import crawl_prefix

if TYPE_CHECKING:
    from ..config import ClusterConfig

T = TypeVar("T")
#: Tries of each start-up command when the connection drops (pauses 0.1, 0.2, 0.4, 0.8 s).
START_ATTEMPTS = 5


def connect(url: str) -> Any:
    """A Redis client for ``url``; a :class:`SettingsError` naming the setting if Redis
    cannot be reached or the client is not installed."""
    try:
        import redis
    except ImportError as exc:
        raise SettingsError(
            "TWOLEVEL_REDIS_URL is set, but the redis client is not installed: "
            "pip install 'scrapy_twolevel[distributed]'"
        ) from exc
    try:
        client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
        retrying(client.ping)
    except (redis.RedisError, ValueError) as exc:
        raise SettingsError(
            f"Cannot reach Redis at TWOLEVEL_REDIS_URL={url!r}: {exc}. Start Redis there, "
            "point TWOLEVEL_REDIS_URL at a running one, or unset it to crawl on one machine."
        ) from exc
    return client


def retrying(
    call: Callable[[], T],
    attempts: int = START_ATTEMPTS,
    pause: float = 0.1,
    longest: float = float("inf"),
) -> T:
    """``call()``, tried ``attempts`` times in all after connection errors, the pause
    between tries doubling from ``pause`` up to ``longest``: at start-up, a connection
    that drops (a Redis restarting, a proxy's idle cut) must not stop the crawl, and a
    Redis that is not there still fails soon (1.5 s with the defaults)."""
    import redis

    for attempt in range(attempts - 1):
        try:
            return call()
        except (redis.ConnectionError, redis.TimeoutError):
            # Start-up, before the reactor runs: nothing else waits.
            time.sleep(min(pause * 2**attempt, longest))
    return call()


def default_node_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def check_cluster_state(cluster: ClusterConfig, crawl_id: str | None) -> None:
    """Raise :class:`SettingsError` if the crawl's Redis is unreachable or disagrees."""
    assert cluster.redis_url is not None
    if crawl_id is not None:
        node_name("TWOLEVEL_CRAWL_ID (the spider's name when unset)", crawl_id)
    client = connect(cluster.redis_url)
    try:
        retrying(lambda: check_no_eviction(client))
        table_key = f"{crawl_prefix(crawl_id)}table" if crawl_id else None
        raw = retrying(lambda: client.get(table_key)) if table_key else None
        if raw:
            try:
                size = BucketTable.from_json(raw).size
            except ValueError as exc:
                raise StateError(
                    f"{table_key} in TWOLEVEL_REDIS_URL is damaged ({exc}); "
                    f"`scrapy twolevel reset --crawl-id {crawl_id}` clears the crawl."
                ) from exc
            if size != cluster.buckets:
                raise SettingsError(
                    f"TWOLEVEL_BUCKETS={cluster.buckets}, but crawl {crawl_id!r} in Redis has "
                    f"{size} buckets: every node of a crawl must use the same number."
                )
    finally:
        client.close()


def check_no_eviction(client: Any) -> None:
    """Raise :class:`SettingsError` if Redis may evict keys when full: an evicted queue,
    seen log or lease loses pages without a trace, and ``volatile-*`` policies evict the
    nodes' heartbeat keys first (they carry a ttl), which gets live nodes reaped."""
    memory = client.info("memory")
    policy = memory.get("maxmemory_policy", "noeviction")
    if int(memory.get("maxmemory", 0)) and policy != "noeviction":
        raise SettingsError(
            f"The Redis at TWOLEVEL_REDIS_URL evicts keys when full (maxmemory "
            f"{memory['maxmemory']} bytes, maxmemory-policy {policy}): the crawl's state "
            "would be lost silently. Set maxmemory-policy noeviction (CONFIG SET "
            "maxmemory-policy noeviction), or maxmemory 0, on that Redis."
        )
