"""RAM per host with URLs queued: what a broad crawl's frontier costs per host it knows.

Each variant runs in a fresh subprocess: a ``TwoLevelScheduler`` (with the add-on's
``SeenCacheDupeFilter``, in memory or with ``JOBDIR``) is opened on Scrapy's test crawler,
one request per host is queued for a warm-up host, then ``--per-host`` requests for each
of ``--hosts`` hosts. Measured over that second step, after ``gc.collect()``: the bytes
``tracemalloc`` sees allocated and the objects the garbage collector tracks, each divided
by the hosts (and by the requests).

``drained``: the frontier alone (no Scrapy, a fake clock), each host served one page, then
the clock moved past ``DORMANT_AFTER`` and the frontier popped until every host is packed
into bytes (``frontier/dormant.py``): the bytes a drained host keeps, against the same
hosts just served and still kept as objects.

Usage::

    python benchmarks/host_memory.py             # 20,000 hosts x 1 and 1,000 hosts x 100
    python benchmarks/host_memory.py --quick     # 2,000 hosts x 1
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from typing import Any, TypeVar

from harness import use_checkout
from harness.env import environment

use_checkout()

from harness import RESULTS, report  # noqa: E402

NAME = "host_memory"
VARIANTS = {
    "memory": "two-level, in memory (encoded)",
    "jobdir": "two-level, JOBDIR",
    "served": "frontier: hosts served one page, kept as objects",
    "drained": "frontier: the same hosts, drained and packed",
}
SETTINGS = {
    "DUPEFILTER_CLASS": "scrapy_twolevel.dupefilter.SeenCacheDupeFilter",
    "DOWNLOADER_MIDDLEWARES": {"scrapy_twolevel.middleware.HostMetricsMiddleware": 950},
    # The collector left alone: gc.collect() runs before each reading anyway.
    "TWOLEVEL_GC_THRESHOLD": 0,
}


T = TypeVar("T")


class _Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def growth(step: Callable[[], T]) -> tuple[T, int, int]:
    """``step()``'s result, and the bytes ``tracemalloc`` saw allocated and the objects the
    collector tracks more after it than before (each after ``gc.collect()``; the first
    snapshot's own objects counted on both sides, the second's on neither)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    objects_before = len(gc.get_objects())
    result = step()
    gc.collect()
    objects = len(gc.get_objects()) - objects_before
    after = tracemalloc.take_snapshot()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    tracemalloc.stop()
    return result, grown, objects


def frontier_worker(variant: str, hosts: int) -> dict[str, Any]:
    """RAM per host of a frontier whose hosts were served one page each, before and after
    they were packed."""
    from scrapy_twolevel.frontier import CostParams, CrawlCapability, Measurement, TwoLevelFrontier
    from scrapy_twolevel.frontier.frontier import DORMANT_AFTER

    page = Measurement(
        latency=0.02, new_connection=True, served_on_connection=1, closed_by_server=False
    )
    clock = _Clock()
    keys = [f"h{host}.example.com" for host in range(hosts)]  # made before measuring

    def serve() -> TwoLevelFrontier:
        frontier = TwoLevelFrontier(CrawlCapability(), CostParams(), 64, clock=clock)
        for key in keys:
            frontier.push(key, 1.0, None)
        while (popped := frontier.pop()) is not None:
            clock.now += 0.001
            frontier.observe(popped[0], page)
            frontier.done(popped[0])
        if variant == "drained":
            clock.now += DORMANT_AFTER + 1
            while frontier.dormant_count < hosts:
                assert frontier.pop() is None
        return frontier

    frontier, grown, objects = growth(serve)
    assert frontier.host_count == hosts
    return {
        "variant": variant,
        "hosts": hosts,
        "per_host": 0,
        "queued": len(frontier),
        "bytes_per_host": grown / hosts,
        "bytes_per_request": None,
        "objects_per_host": objects / hosts,
    }


def worker(variant: str, hosts: int, per_host: int) -> dict[str, Any]:
    if variant in ("served", "drained"):
        return frontier_worker(variant, hosts)
    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler

    from scrapy_twolevel.scheduler import TwoLevelScheduler

    settings = dict(SETTINGS)
    if variant == "jobdir":
        settings["JOBDIR"] = tempfile.mkdtemp(prefix="host-memory-")
    crawler = get_crawler(Spider, settings)
    spider = Spider.from_crawler(crawler, name="host_memory")
    crawler.spider = spider
    scheduler = TwoLevelScheduler.from_crawler(crawler)
    scheduler.open(spider)
    scheduler.enqueue_request(Request("http://warm-up.example.com/"))

    def queue() -> None:
        for host in range(hosts):
            for page in range(per_host):
                scheduler.enqueue_request(Request(f"http://h{host}.example.com/p/{page}"))

    _, grown, objects = growth(queue)
    queued = len(scheduler)
    scheduler.close("finished")
    return {
        "variant": variant,
        "hosts": hosts,
        "per_host": per_host,
        "queued": queued,
        "bytes_per_host": grown / hosts,
        "bytes_per_request": grown / (hosts * per_host),
        "objects_per_host": objects / hosts,
    }


def main(argv: list[str]) -> int:
    parser = report.arg_parser(__doc__, quick="2,000 hosts x 1 only, nothing written")
    parser.add_argument("--worker", nargs=3, metavar=("VARIANT", "HOSTS", "PER_HOST"))
    args = parser.parse_args(argv)
    if args.worker:
        variant, hosts, per_host = args.worker
        print(json.dumps(worker(variant, int(hosts), int(per_host))))
        return 0
    clock = report.Clock()
    sizes = [(2_000, 1)] if args.quick else [(20_000, 1), (1_000, 100)]
    runs = []
    for hosts, per_host in [*sizes, (sizes[0][0], 0)]:
        for variant in VARIANTS:
            if (variant in ("served", "drained")) != (per_host == 0):
                continue
            clock.log(f"{variant}: {hosts:,} hosts x {per_host}")
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", variant, str(hosts), str(per_host)],
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(json.loads(proc.stdout.splitlines()[-1]))
    header = [
        "frontier",
        "hosts",
        "requests per host",
        "RAM per host",
        "RAM per request",
        "tracked objects per host",
    ]
    rows = [
        [
            VARIANTS[r["variant"]],
            f"{r['hosts']:,}",
            str(r["per_host"]),
            f"{r['bytes_per_host']:,.0f} B",
            "-" if r["bytes_per_request"] is None else f"{r['bytes_per_request']:,.0f} B",
            f"{r['objects_per_host']:.2f}",
        ]
        for r in runs
    ]
    command = report.command_line(__file__, argv)
    intro = [
        f"Command: ``{command}``; {time.strftime('%Y-%m-%dT%H:%M:%S%z')}. "
        "RAM: bytes tracemalloc sees allocated while the hosts' requests were queued, "
        "after gc.collect(), per host and per request (the seen filter's share included)."
    ]
    definitions = {
        "RAM per host": "tracemalloc's growth over the queueing of every host's requests / hosts",
        "tracked objects per host": "growth of len(gc.get_objects()) / hosts",
    }
    sections: list[report.Section] = [("Runs", "", [("", (header, rows))])]
    if args.quick:
        report.print_sections(sections)
        return 0
    report.publish(NAME, "RAM per host with URLs queued", intro, sections, definitions)
    (RESULTS / f"{NAME}.json").write_text(
        report.compact_json(
            {"command": command, "environment": environment("scrapy"), "runs": runs}
        )
    )
    return report.finish("", clock.elapsed(), str(RESULTS / NAME))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
