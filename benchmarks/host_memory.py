"""RAM per host with URLs queued: what a broad crawl's frontier costs per host it knows.

Each variant runs in a fresh subprocess: a ``TwoLevelScheduler`` (with the add-on's
``SeenCacheDupeFilter``, in memory or with ``JOBDIR``) is opened on Scrapy's test crawler,
one request per host is queued for a warm-up host, then ``--per-host`` requests for each
of ``--hosts`` hosts. Measured over that second step, after ``gc.collect()``: the bytes
``tracemalloc`` sees allocated and the objects the garbage collector tracks, each divided
by the hosts (and by the requests). A drained host is packed into bytes once it has been
idle a minute: its figure is in ``tests/test_dormant.py`` and :doc:`broad`.

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
from typing import Any

from harness import use_checkout
from harness.env import environment

use_checkout()

from harness import RESULTS, report  # noqa: E402

NAME = "host_memory"
VARIANTS = {"memory": "two-level, in memory (encoded)", "jobdir": "two-level, JOBDIR"}
SETTINGS = {
    "DUPEFILTER_CLASS": "scrapy_twolevel.dupefilter.SeenCacheDupeFilter",
    "DOWNLOADER_MIDDLEWARES": {"scrapy_twolevel.middleware.HostMetricsMiddleware": 950},
    # The collector left alone: gc.collect() runs before each reading anyway.
    "TWOLEVEL_GC_THRESHOLD": 0,
}


def worker(variant: str, hosts: int, per_host: int) -> dict[str, Any]:
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
    gc.collect()
    objects_before = len(gc.get_objects())
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for host in range(hosts):
        for page in range(per_host):
            scheduler.enqueue_request(Request(f"http://h{host}.example.com/p/{page}"))
    gc.collect()
    after = tracemalloc.take_snapshot()
    objects = len(gc.get_objects()) - objects_before
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    tracemalloc.stop()
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
    for hosts, per_host in sizes:
        for variant in VARIANTS:
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
            f"{r['bytes_per_request']:,.0f} B",
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
