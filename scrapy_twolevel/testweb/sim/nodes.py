"""The distributed mode's nodes on a virtual clock: how a crawl scales from 1 to 16 nodes.

A discrete-event simulation for ``benchmarks/distributed_sim.py`` (which states its model
and assumptions) and ``tests/test_distributed_sim.py``: hosts go to nodes exactly as in a
crawl, host -> bucket -> node through the real
:class:`~scrapy_twolevel.distributed.BucketTable`; each node keeps ``open_hosts`` hosts
open with one request in flight each, and parses every response on one core (``cpu``
seconds, FIFO); with ``rebalance_every``, the table is rebalanced by remaining pages per
bucket as the leader node does.

Pure module: no Scrapy, no Twisted, no Redis, no I/O.
"""

from __future__ import annotations

import heapq
import random
import statistics
from collections import deque
from typing import Any

from scrapy_twolevel.distributed.buckets import LOAD_CAP, BucketTable, bucket_of

__all__ = ["T_PAGE", "T_SYNC", "WINDOW", "make_hosts", "simulate"]

#: Seconds per window of the load-balance measure.
WINDOW = 10.0
#: Redis time per node sync and per page (stated assumptions; see the benchmark).
T_SYNC = 100e-6
T_PAGE = 10e-6


def make_hosts(count: int, pages: int, seed: int) -> list[tuple[str, int, float]]:
    """``(name, pages, response time)`` per host; page counts Zipf(1) scaled to ``pages``."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(count)]
    scale = pages / sum(weights)
    hosts = []
    for i, weight in enumerate(weights):
        response = rng.lognormvariate(mu=-1.2, sigma=0.6)  # median 0.30 s
        hosts.append((f"host{i}.example", max(1, round(weight * scale)), response))
    rng.shuffle(hosts)
    return hosts


def simulate(
    hosts: list[tuple[str, int, float]],
    nodes: int,
    *,
    open_hosts: int,
    cpu: float,
    buckets: int,
    sync_interval: float,
    rebalance_every: float | None = None,
    tolerance: float = 0.25,
) -> dict[str, Any]:
    """One crawl of ``hosts`` by ``nodes`` nodes; with ``rebalance_every``, the table is
    rebalanced by remaining pages per bucket (up to ``LOAD_CAP``) at that interval, as the
    leader node does
    (``BucketTable.rebalance``, at most ``M / (4 n)`` moves, ``tolerance``). A moved host
    not yet opened goes to its new node's queue at once; an open one after the request
    in flight (the drain), with its remaining pages."""
    table = BucketTable(buckets)
    names = [f"n{i}" for i in range(nodes)]
    for name in names:
        table.join(name)
    bucket = [bucket_of(name, buckets) for name, _, _ in hosts]
    unopened: dict[str, deque[int]] = {name: deque() for name in names}
    for index, (name, _, _) in enumerate(hosts):
        owner = table.owner_of_host(name)
        assert owner is not None
        unopened[owner].append(index)
    hosts_per_node = [len(unopened[name]) for name in names]
    remaining = [pages for _, pages, _ in hosts]
    open_on: dict[int, str] = {}  # open host -> its node
    moving: dict[int, str] = {}  # open host whose bucket moved -> the new node
    events: list[tuple[float, int, str, int]] = []  # (time, seq, node, host index)
    seq = 0
    cpu_free = dict.fromkeys(names, 0.0)
    done: dict[str, list[float]] = {name: [] for name in names}
    next_rebalance = rebalance_every if rebalance_every else float("inf")
    moves_made = 0

    def open_next(node: str, now: float) -> None:
        nonlocal seq
        if not unopened[node]:
            return
        index = unopened[node].popleft()
        open_on[index] = node
        seq += 1
        heapq.heappush(events, (now + hosts[index][2], seq, node, index))

    def rebalance(now: float) -> None:
        nonlocal moves_made
        load: dict[int, float] = {}
        for index, left in enumerate(remaining):
            if left:
                load[bucket[index]] = load.get(bucket[index], 0.0) + left
        load = {b: min(value, LOAD_CAP) for b, value in load.items()}  # as the node counts
        moved = table.rebalance(load, max_moves=max(1, buckets // (4 * nodes)), tolerance=tolerance)
        moves_made += len(moved)
        targets = {m.bucket: m.target for m in moved}
        for move in moved:
            assert move.source is not None
            queue = unopened[move.source]
            keep = deque(i for i in queue if bucket[i] != move.bucket)
            unopened[move.target].extend(i for i in queue if bucket[i] == move.bucket)
            unopened[move.source] = keep
        for index, node in open_on.items():
            if targets.get(bucket[index], node) != node:
                moving[index] = targets[bucket[index]]
        open_count = {name: 0 for name in names}
        for node in open_on.values():
            open_count[node] += 1
        for move in moved:  # a node that had run dry opens what it was given
            for _ in range(open_hosts - open_count[move.target]):
                if not unopened[move.target]:
                    break
                open_next(move.target, now)
                open_count[move.target] += 1

    for node in names:
        for _ in range(open_hosts):
            open_next(node, 0.0)
    while events:
        now, _, node, index = heapq.heappop(events)
        if now >= next_rebalance:
            rebalance(now)
            next_rebalance += rebalance_every  # type: ignore[operator]
        parsed = max(cpu_free[node], now) + cpu
        cpu_free[node] = parsed
        done[node].append(parsed)
        remaining[index] -= 1
        target = moving.pop(index, None)
        if remaining[index] and target is None:
            seq += 1
            heapq.heappush(events, (parsed + hosts[index][2], seq, node, index))
            continue
        del open_on[index]
        if remaining[index]:  # drained here: the new owner opens it when it has room
            assert target is not None
            unopened[target].appendleft(index)
            if sum(1 for n in open_on.values() if n == target) < open_hosts:
                open_next(target, parsed)
        open_next(node, parsed)
    end = max(max(times) for times in done.values() if times)
    total = sum(len(times) for times in done.values())
    # Throughput while every node has work (the reference's pages per hour); after that
    # the crawl's tail is the largest hosts, one request at a time whatever n is.
    steady = min(max(times) for times in done.values() if times)
    return {
        "nodes": nodes,
        "rebalance_every": rebalance_every,
        "moves": moves_made,
        "time_s": end,
        "steady_s": steady,
        "pages": total,
        "completions": sorted(t for times in done.values() for t in times),
        "pages_per_s_whole": total / end,
        "pages_per_node": [len(done[name]) for name in names],
        "hosts_per_node": hosts_per_node,
        "balance_cv": _balance(list(done.values())),
        "cpu_busy": sum(len(t) for t in done.values()) * cpu / (end * nodes),
        "redis_utilisation": nodes / sync_interval * T_SYNC + total / end * T_PAGE,
    }


def _balance(times_per_node: list[list[float]]) -> float | None:
    """Mean CV of pages per node per window, over windows in which every node works."""
    if len(times_per_node) < 2:
        return None
    end = min(max(t) for t in times_per_node if t)
    cvs = []
    for w in range(int(end // WINDOW)):
        lo, hi = w * WINDOW, (w + 1) * WINDOW
        counts = [sum(lo <= t < hi for t in times) for times in times_per_node]
        if min(counts) > 0:
            cvs.append(statistics.pstdev(counts) / statistics.fmean(counts))
    return statistics.fmean(cvs) if cvs else None
