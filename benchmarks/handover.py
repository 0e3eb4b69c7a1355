"""A hand-over of 500,000 pending requests between two nodes: the longest reactor stall.

Issue 21, item 2: taking over a large bucket set was one Lua script (HGETALL of every
bucket) and one reactor callback (~50 µs per request): above ~200k requests a node missed
its heartbeat, was reaped, rejoined and loaded again, in a loop, while the other nodes got
``BUSY`` from Redis. Now the requests are read with HSCAN, a slice per command, and loaded
on the reactor a slice per turn (``scrapy_twolevel/glue/bucket_loader.py``).

The run, on the Redis at ``TWOLEVEL_REDIS_URL`` (default 127.0.0.1:6379/0), under a crawl
id of its own that it deletes at the end:

1. node ``n0`` (this process, :class:`Node` driven directly) holds every bucket and
   stores ``--requests`` encoded requests (1,000,000) over 2,000 hosts, in commits of
   10,000;
2. node ``n1`` (a worker process: the real :class:`Cluster` on a Twisted reactor, with
   Scrapy's codec, the seen cache and a frontier, as in a crawl) joins: the table gives
   it half the buckets; ``n0`` releases them, and ``n1``'s ticks take them over (500,000
   requests);
3. in ``n1``, a 10-ms looping call measures how late the reactor runs it (the longest
   stall, and when it came), until all of its share is queued in its frontier; Python's
   longest full garbage collection in that time is recorded beside it (a collection
   holds every thread). Nobody reaps ``n1`` here (``n0`` is driven by hand): a stall
   longer than the ttl (10 s) would get a node reaped in a crawl.

Both ways are run in the same invocation: ``sliced`` (as shipped) and ``one callback``
(``SLICE`` set above the request count, so the reactor loads everything at once as it
used to; the Redis side stays sliced).

Usage::

    python benchmarks/handover.py                    # 500,000 move, a few minutes
    python benchmarks/handover.py --requests 50000   # a quick look; writes nothing

Writes ``benchmarks/results/handover.json``, ``benchmarks/results/handover.md`` and
``docs/results/handover.inc``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from harness import report

FULL = 1_000_000
BUCKETS = 1024
HOSTS = 2000
STALL = 1.0
VARIANTS = {"sliced": None, "one callback": 10**9}


def redis_url() -> str:
    return os.environ.get("TWOLEVEL_REDIS_URL", "redis://127.0.0.1:6379/0")


def fill(crawl_id: str, n: int) -> Any:
    """Node n0 holding every bucket with ``n`` stored requests; returns the node."""
    import redis
    from scrapy import Request

    from scrapy_twolevel.codec import encode_request
    from scrapy_twolevel.distributed.buckets import bucket_of
    from scrapy_twolevel.distributed.node import Batch, Node
    from scrapy_twolevel.seen.fingerprints import key_function

    client = redis.Redis.from_url(redis_url())
    n0 = Node(client, crawl_id, "n0", buckets=BUCKETS, ttl=600)
    n0.join()
    n0.sync(Batch())
    key = key_function(False)
    batch = Batch()
    for i in range(n):
        host = f"h{i % HOSTS}.test"
        url = f"http://{host}/page/{i}"
        data = encode_request(Request(url))
        batch.stores.append((bucket_of(host, BUCKETS), f"e{i}", data, key(url.encode())))
        if len(batch.stores) == 10_000:
            n0.sync(batch)
            batch = Batch()
    n0.sync(batch)
    return n0


def worker(crawl_id: str, n: int, slice_size: int | None) -> dict[str, Any]:
    """Node n1: join, take its half over, measure the reactor's lateness meanwhile."""
    from scrapy import Spider
    from scrapy.utils.test import get_crawler
    from twisted.internet import reactor, task

    from scrapy_twolevel.codec import SpiderCodec
    from scrapy_twolevel.config import ClusterConfig
    from scrapy_twolevel.dupefilter import SeenCacheDupeFilter
    from scrapy_twolevel.frontier import BreadthFirst, CostParams, TwoLevelFrontier
    from scrapy_twolevel.glue import bucket_loader
    from scrapy_twolevel.glue.cluster import Cluster
    from scrapy_twolevel.glue.inflight import InFlight
    from scrapy_twolevel.glue.intake import Intake, make_quality, make_request_host
    from scrapy_twolevel.glue.reporting import Reporter

    if slice_size is not None:
        bucket_loader.SLICE = slice_size
    crawler = get_crawler(Spider)
    spider = Spider("bench")
    reporter = Reporter(crawler.stats)
    intake = Intake(
        host_of=make_request_host("hostname"),
        quality_of=make_quality("priority"),
        reporter=reporter,
    )
    config = ClusterConfig.from_settings(
        {
            "TWOLEVEL_REDIS_URL": redis_url(),
            "TWOLEVEL_CRAWL_ID": crawl_id,
            "TWOLEVEL_NODE_ID": "n1",
            "TWOLEVEL_BUCKETS": BUCKETS,
        }
    )
    seen = SeenCacheDupeFilter.from_crawler(crawler)
    cluster = Cluster(
        config,
        "bench",
        intake=intake,
        codec=SpiderCodec(spider, crawler.stats, logunser=False),
        reporter=reporter,
        seen=seen,
        inflight=InFlight(in_progress=lambda: None, in_downloader=lambda: None),
        queued=lambda: len(frontier),
        wake=lambda: None,
    )
    frontier = intake.frontier = cluster.open(
        lambda queues: TwoLevelFrontier(BreadthFirst(), CostParams(), None, queue_factory=queues)
    )
    out: dict[str, Any] = {"longest_stall_s": 0.0}
    state = {"last": 0.0, "started": 0.0}

    def beat() -> None:
        now = time.perf_counter()
        if now - state["last"] - 0.01 > out["longest_stall_s"]:
            out["stall_at_s"] = round(now - state["started"], 2)
        out["longest_stall_s"] = max(out["longest_stall_s"], now - state["last"] - 0.01)
        state["last"] = now
        owned = out.get("owned")
        if owned and len(frontier) >= owned and not cluster._loader.loading:
            out["taken_after_s"] = round(now - state["started"], 2)
            reactor.stop()
        elif now - state["started"] > 600:
            out["error"] = "not all taken within 600 s"
            reactor.stop()

    def start() -> None:
        cluster.join()  # n0 still holds everything: nothing to load yet
        owned = cluster._owned
        out["buckets"] = len(owned)
        # Counted before the clock starts: a million hashes here held the reactor for
        # 2 s, which earlier runs counted as a stall of the take-over.
        out["owned"] = sum(1 for i in range(n) if hash_bucket(i) in owned)
        state["started"] = state["last"] = time.perf_counter()
        task.LoopingCall(beat).start(0.01)

    def hash_bucket(i: int) -> int:
        from scrapy_twolevel.distributed.buckets import bucket_of

        return bucket_of(f"h{i % HOSTS}.test", BUCKETS)

    import gc

    gc_state = {"t": 0.0}

    def gc_timer(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            gc_state["t"] = time.perf_counter()
        elif info.get("generation") == 2:
            spent = time.perf_counter() - gc_state["t"]
            out["longest_full_gc_s"] = round(max(out.get("longest_full_gc_s", 0.0), spent), 4)

    gc.callbacks.append(gc_timer)
    reactor.callWhenRunning(start)
    reactor.run()
    cluster._pool.stop()  # its thread would keep the process alive
    out["rejoined"] = cluster.counts["rejoined"]
    out["queued"] = len(frontier)
    out["longest_stall_s"] = round(out["longest_stall_s"], 4)
    return out


def run_variant(name: str, slice_size: int | None, n: int) -> dict[str, Any]:
    import redis

    from scrapy_twolevel.distributed.node import Batch, clear_crawl

    crawl_id = f"bench-handover-{os.getpid()}-{abs(hash(name)) % 10**6}"
    client = redis.Redis.from_url(redis_url())
    try:
        t0 = time.monotonic()
        n0 = fill(crawl_id, n)
        filled = time.monotonic() - t0
        cmd = [sys.executable, __file__, "--worker", crawl_id, "--requests", str(n)]
        if slice_size is not None:
            cmd += ["--slice", str(slice_size)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        # n0 follows the table: once n1 is in it, release what n1 owns (drained: nothing
        # of n0 is in flight here), as a node's ticks do.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            n0.registry.refresh()
            if "n1" in n0.registry.table.nodes:
                break
            time.sleep(0.05)
        n0.sync(Batch(release=sorted(n0.held - n0.registry.owned())))
        stdout, _ = proc.communicate(timeout=900)
        result = json.loads(stdout.strip().splitlines()[-1])
        result["fill_s"] = round(filled, 1)
        n0.leave()
        return result
    finally:
        clear_crawl(client, crawl_id)


def main() -> int:
    parser = report.arg_parser(__doc__)
    parser.add_argument("--requests", type=int, default=FULL)
    parser.add_argument("--worker", metavar="CRAWL_ID", help="internal")
    parser.add_argument("--slice", type=int, default=None, help="internal")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.requests, args.slice)))
        return 0
    started = time.monotonic()
    runs = {}
    for name, slice_size in VARIANTS.items():
        runs[name] = run_variant(name, slice_size, args.requests)
        print(name, runs[name], flush=True)
    elapsed = time.monotonic() - started
    head = report.columns(
        "variant | requests stored | taken by n1 | buckets taken | longest reactor stall s | "
        "all queued after s | rejoined (reaped) | no stall over 1 s"
    )
    rows = [
        [
            name,
            f"{args.requests:,}",
            f"{r.get('queued', 0):,}",
            str(r.get("buckets", "-")),
            f"{r['longest_stall_s']:.3f}",
            str(r.get("taken_after_s", r.get("error", "-"))),
            str(r.get("rejoined", "-")),
            report.yes_no(r["longest_stall_s"] <= STALL and not r.get("rejoined")),
        ]
        for name, r in runs.items()
    ]
    report.publish_runs(
        __file__,
        sys.argv[1:],
        "handover",
        "Taking over 500,000 pending requests",
        runs=runs,
        elapsed=elapsed,
        table=(head, rows),
        full=args.requests == FULL,
        notes=[
            f"{BUCKETS} buckets, {HOSTS} hosts; node n1 takes the half of the buckets the "
            "table gives it from n0."
        ],
        caption="Node n1 during the take-over",
        definitions={
            "longest reactor stall": "how much later than due a 10-ms looping call ran, "
            "at worst, from n1's join until its share was all queued",
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
