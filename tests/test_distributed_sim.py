"""The distributed-mode simulation (``scrapy_twolevel.testweb.sim.nodes``, which
``benchmarks/distributed_sim.py`` runs at full size): what its rebalancing does.

Small webs, so it runs in a second; the benchmark's own figures come from the script.
"""

from __future__ import annotations

import pytest

from scrapy_twolevel.testweb.sim.nodes import make_hosts, simulate

pytestmark = pytest.mark.unit


def run(nodes, every):
    hosts = make_hosts(300, 20_000, seed=3)
    return hosts, simulate(
        hosts,
        nodes,
        open_hosts=8,
        cpu=0.01,
        buckets=1024,
        sync_interval=0.1,
        rebalance_every=every,
    )


def test_every_page_is_crawled_once_with_or_without_rebalancing() -> None:
    for every in (None, 5.0):
        hosts, row = run(4, every)
        assert row["pages"] == sum(pages for _, pages, _ in hosts)
        assert sum(row["pages_per_node"]) == row["pages"]
        assert sum(row["hosts_per_node"]) == len(hosts)


def test_rebalancing_evens_out_the_pages_per_node() -> None:
    _, joins_only = run(4, None)
    _, rebalanced = run(4, 5.0)
    assert joins_only["moves"] == 0 and rebalanced["moves"] > 0

    def spread(row):
        return max(row["pages_per_node"]) / min(row["pages_per_node"])

    assert spread(rebalanced) < spread(joins_only)
    # Every node keeps working for longer before the first one runs dry.
    assert rebalanced["steady_s"] > joins_only["steady_s"]
