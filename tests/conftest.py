"""The suite's layers (markers), the real Redis the distributed-mode tests talk to, and the
test web served by a process of its own.

Every test file names its layer in one line, ``pytestmark = pytest.mark.unit`` (or
``glue``, ``crawl``, ``redis``), so a contributor can run the fast part alone::

    pytest -m "unit or glue"     # pure structures, and components built with get_crawler
    pytest -m crawl              # real crawls of the local test web (subprocesses)
    pytest -m redis              # the distributed mode against a real Redis

unit: pure data structures and algorithms (a fake clock, no Scrapy crawl, no socket);
glue: Scrapy components built from real settings (get_crawler), or a process started to
import or check something; crawl: real crawls over loopback sockets; redis: anything that
talks to Redis. Shared helpers are in ``helpers.py`` (no process) and ``crawl_helpers.py``
(crawls run in processes, and the components they load).
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

LAYERS = ("unit", "glue", "crawl", "redis")


#: The order the layers run in: the slow ones first, so that under pytest-xdist a long
#: crawl does not start last while the other processes have nothing left, and the many
#: short tests fill the gaps at the end (files keep their order within a layer).
RUN_ORDER = ("redis", "crawl", "glue", "unit")
#: Before them all, the tests marked ``long`` (over 15 s on an idle machine, most of it
#: waiting for a crawl's clock): one of them started late is alone the suite's tail.


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank: dict[int, int] = {}
    for item in items:
        layers = {mark.name for mark in item.iter_markers() if mark.name in LAYERS}
        if len(layers) != 1:
            found = ", ".join(sorted(layers)) or "none"
            raise pytest.UsageError(
                f"{item.nodeid} needs exactly one layer marker ({', '.join(LAYERS)}); it has "
                f"{found}. Put `pytestmark = pytest.mark.<layer>` at the top of its file "
                "(tests/conftest.py says which layer is which)."
            )
        rank[id(item)] = RUN_ORDER.index(layers.pop()) + (
            0 if item.get_closest_marker("long") else len(RUN_ORDER)
        )
    items.sort(key=lambda item: rank[id(item)])  # stable: a layer's files keep their order


@pytest.fixture(autouse=True)
def reap_nodes() -> Iterator[None]:
    """Kill the distributed nodes a test started and left running (it failed before they
    finished): reaped here, not by a later test's garbage collection, which pytest reports
    as that test's failure."""
    yield
    helpers = sys.modules.get("crawl_helpers")  # imported only where nodes are started
    if helpers is not None:
        while helpers.STARTED_NODES:
            helpers.STARTED_NODES.pop().reap()


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


@pytest.fixture
def web_server(tmp_path) -> Iterator[Any]:
    """``start(web)``: serve a test web from a process of its own (several crawl processes
    can share it; its counts are the ground truth); every server is stopped afterwards."""
    from scrapy_twolevel.testweb.process import ServerProcess

    servers = []

    def start(web):
        workdir = tmp_path / f"server{len(servers)}"
        workdir.mkdir()
        server = ServerProcess(web, workdir)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
