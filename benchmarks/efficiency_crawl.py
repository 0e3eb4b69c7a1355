"""Crawl efficiency with real crawls: ``scrapy crawl`` against the local test web.

Harness 2 of the crawl-efficiency benchmark (``efficiency_sim.py`` is harness 1). The
reference study's web (:func:`scrapy_twolevel.testweb.sim.webgen.generate_paper_web`), scaled down
so that all seven variants of one quality model crawl it in about six minutes, is served by
the project's test web server in its own process (real sockets on 127.0.x.y, one address
per server, the generated connection and response delays and keep-alive limits). Each
variant is a fresh crawler process running Scrapy's ``AsyncCrawlerProcess`` with the test
web spider and the settings a user would write:

- two-level: ``ADDONS = {"scrapy_twolevel.Addon": 0}``, ``TWOLEVEL_POLICY = <policy>``;
- ``scrapy-dfo``: ``SCHEDULER_PRIORITY_QUEUE = "scrapy.pqueues.ScrapyPriorityQueue"``
  (memory queue LIFO, Scrapy's default order);
- ``scrapy-bfo``: the same with Scrapy's documented breadth-first queues
  (``SCHEDULER_MEMORY_QUEUE = FifoMemoryQueue``, ``SCHEDULER_DISK_QUEUE =
  PickleFifoDiskQueue``; ``DEPTH_PRIORITY`` stays 0 so that every variant sees the same
  priorities);
- ``scrapy-dapq``: Scrapy's defaults (``DownloaderAwarePriorityQueue`` since 2.14);

all with ``CONCURRENT_REQUESTS = K`` and Scrapy's default ``CONCURRENT_REQUESTS_PER_DOMAIN
= 8``. The spider gives every request ``priority = round(quality * 10**6)``, so the stock
queues and the two-level scheduler (``TWOLEVEL_QUALITY = "priority"``, the default) rank
by the same page quality.

Measured at the server: when each page's response was written (the curves; time 0 is the
first request the server received in that crawl), connections opened, and politeness
violations (requests that reached a server while another request to it was in flight).
Measured in the crawler: the share of its CPU time spent in the scheduler
(``enqueue_request``, ``next_request`` and, for the two-level scheduler, its signal
handlers) and in the host metrics middleware, by wrapping those methods with
``time.process_time`` meters (about a microsecond per call), next to the process's total.

Usage::

    python benchmarks/efficiency_crawl.py           # 100 servers, 3,000 pages, K = 16, ~12 min
    python benchmarks/efficiency_crawl.py --quick   # 30 servers, 600 pages, delays / 4: 2 min
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import efficiency as eff
from harness import report
from harness.efficiency import QUALITY_MODELS, STOCK
from harness.env import environment, version
from harness.report import Clock, arg_parser, columns, command_line
from scrapy_twolevel.testweb.process import ServerProcess
from scrapy_twolevel.testweb.sim.des import VARIANTS, CrawlRun, Fetch
from scrapy_twolevel.testweb.sim.webgen import generate_paper_web, web_stats
from scrapy_twolevel.testweb.stats import ServerStats
from scrapy_twolevel.testweb.web import WebSpec

HERE = Path(__file__).resolve().parent
CRAWL_TIMEOUT = 900.0

CRAWL_DEFINITIONS = {
    **eff.DEFINITIONS,
    "time": "wall-clock seconds at the test web server, from the first request it received "
    "in that crawl to each response it wrote",
    "scheduler CPU share": "CPU time inside the scheduler's methods (and, for the two-level "
    "scheduler, its signal handlers) / the crawler process's CPU time over the crawl",
}


# -- the crawler process ------------------------------------------------------------------


def variant_settings(variant: str, connections: int, per_domain: int | None) -> dict[str, Any]:
    """The settings a user would write for ``variant``."""
    settings: dict[str, Any] = {"CONCURRENT_REQUESTS": connections}
    if per_domain is not None:
        settings["CONCURRENT_REQUESTS_PER_DOMAIN"] = per_domain
    if variant == "scrapy-dfo":
        settings["SCHEDULER_PRIORITY_QUEUE"] = "scrapy.pqueues.ScrapyPriorityQueue"
    elif variant == "scrapy-bfo":
        settings["SCHEDULER_PRIORITY_QUEUE"] = "scrapy.pqueues.ScrapyPriorityQueue"
        settings["SCHEDULER_MEMORY_QUEUE"] = "scrapy.squeues.FifoMemoryQueue"
        settings["SCHEDULER_DISK_QUEUE"] = "scrapy.squeues.PickleFifoDiskQueue"
    elif variant == "scrapy-dapq":
        pass  # Scrapy's defaults
    else:
        settings["ADDONS"] = {"scrapy_twolevel.Addon": 0}
        settings["TWOLEVEL_POLICY"] = variant
    return settings


class CpuMeters:
    """Accumulate ``time.process_time`` spent inside chosen methods, per bucket."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, bucket: str, cls: type, name: str) -> None:
        original = getattr(cls, name)
        self.seconds.setdefault(bucket, 0.0)
        self.calls.setdefault(bucket, 0)
        clock = time.process_time

        @functools.wraps(original)
        def metered(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[bucket] += clock() - start
                self.calls[bucket] += 1

        setattr(cls, name, metered)


def run_worker(variant: str, ready_file: Path, connections: int, per_domain: int | None) -> None:
    """Crawl the served web once; print one JSON line with CPU figures and Scrapy stats."""
    from scrapy.core.scheduler import Scheduler
    from scrapy.crawler import AsyncCrawlerProcess

    from scrapy_twolevel.frontier import TwoLevelFrontier
    from scrapy_twolevel.middleware import HostMetricsMiddleware
    from scrapy_twolevel.scheduler import TwoLevelScheduler
    from scrapy_twolevel.testweb.spider import SEEDS_SETTING, TestWebSpider

    ready = json.loads(ready_file.read_text())
    meters = CpuMeters()
    if variant in STOCK:
        for name in ("enqueue_request", "next_request"):
            meters.wrap("scheduler", Scheduler, name)
    else:
        # The scheduler's signal handlers are metered through the frontier methods they
        # call: a wrapper taking **kwargs in their place would receive every argument of
        # the signal (pydispatcher reads the receiver's code object) and fail.
        for name in ("enqueue_request", "next_request"):
            meters.wrap("scheduler", TwoLevelScheduler, name)
        for name in ("done", "observe"):
            meters.wrap("scheduler", TwoLevelFrontier, name)
        for name in ("process_response", "process_exception"):
            meters.wrap("middleware", HostMetricsMiddleware, name)
    settings = {
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        **variant_settings(variant, connections, per_domain),
        SEEDS_SETTING: ready["seeds"],
    }
    process = AsyncCrawlerProcess(settings)
    crawler = process.create_crawler(TestWebSpider)
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    process.crawl(crawler)
    process.start()
    cpu = time.process_time() - cpu_start
    assert crawler.stats is not None
    stats = crawler.stats.get_stats()
    keep = ("item_scraped_count", "response_received_count", "scheduler/enqueued", "finish_reason")
    print(
        json.dumps(
            {
                "cpu_s": cpu,
                "wall_s": time.perf_counter() - wall_start,
                "meters_s": meters.seconds,
                "meter_calls": meters.calls,
                "stats": {k: stats.get(k) for k in keep}
                | {
                    k: v
                    for k, v in stats.items()
                    if k.startswith("twolevel/") and "/host/" not in k
                },
            },
            default=str,
        ),
        flush=True,
    )


# -- the driver ----------------------------------------------------------------------------


def crawl_run(variant: str, connections: int, web: WebSpec, stats: ServerStats) -> CrawlRun:
    """The server's record of one crawl as a :class:`CrawlRun` (time 0: first request)."""
    origin = stats.first_request_at or 0.0
    pages = [e for e in stats.events if e.page_id is not None and e.method == "GET"]
    pages.sort(key=lambda e: e.time)
    return CrawlRun(
        variant=variant,
        connections=connections,
        fetches=[Fetch(e.page_id, e.host, 0.0, e.time - origin, False, 0) for e in pages],
        quality=[web.pages[e.page_id].quality for e in pages],
        quality_total=sum(p.quality for p in web.pages),
        connections_opened=stats.total.connections_total,
        politeness_violations=stats.overlapping_requests(),
        max_parallel_per_server=max(stats.max_concurrent_requests_per_host().values(), default=0),
    )


def run_variant(
    served: ServerProcess, variant: str, connections: int, per_domain: int | None
) -> tuple[ServerStats, dict[str, Any]]:
    served.reset()
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        variant,
        "--ready-file",
        str(served.ready_file),
        "--connections",
        str(connections),
    ]
    if per_domain is not None:
        cmd += ["--per-domain", str(per_domain)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CRAWL_TIMEOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} crawl failed:\n{proc.stderr[-3000:]}")
    worker = json.loads(proc.stdout.strip().splitlines()[-1])
    # A host freed by the fallback instead of request_left_downloader, or a logged error,
    # means the crawl did not run as a user's would: refuse to report it.
    if worker["stats"].get("twolevel/released_without_download") or "Traceback" in proc.stderr:
        raise RuntimeError(f"{variant} crawl did not run cleanly:\n{proc.stderr[-3000:]}")
    return served.stats(), worker


def cpu_table(cpu: dict[str, dict[str, dict[str, Any]]]) -> report.Table:
    head = columns(
        "quality | variant | crawler CPU s | CPU ms / page | scheduler CPU s | "
        "scheduler share | middleware CPU s | crawl wall s"
    )
    rows = []
    for model, per_variant in cpu.items():
        for variant, c in per_variant.items():
            rows.append(
                [
                    model,
                    eff.LABELS[variant],
                    f"{c['cpu_s']:.1f}",
                    f"{1000 * c['cpu_s'] / max(1, c['pages']):.2f}",
                    f"{c['scheduler_s']:.2f}",
                    f"{100 * c['scheduler_share']:.1f}%",
                    f"{c['middleware_s']:.2f}" if variant not in STOCK else "-",
                    f"{c['wall_s']:.1f}",
                ]
            )
    return head, rows


def completeness_table(checks: dict[str, dict[str, dict[str, int]]]) -> report.Table:
    rows = [
        [
            model,
            eff.LABELS[v],
            f"{c['fetched']:,}",
            f"{c['missing']:,}",
            f"{c['duplicates']:,}",
            f"{c['max_in_flight_per_host']}",
        ]
        for model, per_variant in checks.items()
        for v, c in per_variant.items()
    ]
    head = ["quality", "variant", "pages fetched", "missing", "fetched twice", "max in flight/host"]
    return head, rows


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick="a small web; prints, writes nothing")
    parser.add_argument("--servers", type=int, default=100)
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--connections", type=int, default=16, help="K (default 16)")
    parser.add_argument(
        "--per-domain", type=int, default=None, help="stock CONCURRENT_REQUESTS_PER_DOMAIN"
    )
    parser.add_argument("--delay-scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--points", type=int, default=200, help="samples per stored curve")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--worker", metavar="VARIANT", help=argparse.SUPPRESS)
    parser.add_argument("--ready-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        run_worker(args.worker, args.ready_file, args.connections, args.per_domain)
        return 0
    if args.quick:
        args.servers, args.pages, args.connections, args.delay_scale = 30, 600, 6, 0.25
    variants = [v for v in args.variants.split(",") if v]
    if "breadth-first" not in variants:
        parser.error("--variants must include breadth-first (the baseline)")
    command = command_line(__file__, sys.argv[1:])
    clock = Clock()
    log = clock.log

    k = args.connections
    runs: dict[str, dict[str, CrawlRun]] = {}
    cpu: dict[str, dict[str, dict[str, Any]]] = {}
    complete: dict[str, dict[str, dict[str, int]]] = {}
    web_info: dict[str, Any] = {}
    for model in QUALITY_MODELS:
        web = generate_paper_web(args.servers, args.pages, seed=args.seed, quality=model)
        web_info[model] = web_stats(web)
        reachable = web.reachable()
        runs[model], cpu[model], complete[model] = {}, {}, {}
        with (
            tempfile.TemporaryDirectory(prefix="twolevel-efficiency-") as tmp,
            ServerProcess(web, Path(tmp), delay_scale=args.delay_scale) as served,
        ):
            for variant in variants:
                t0 = time.perf_counter()
                stats, worker = run_variant(served, variant, k, args.per_domain)
                run = crawl_run(variant, k, web, stats)
                runs[model][variant] = run
                counts = stats.fetch_counts()
                complete[model][variant] = {
                    "fetched": len(counts),
                    "missing": len(reachable - counts.keys()),
                    "duplicates": sum(1 for n in counts.values() if n > 1),
                    "max_in_flight_per_host": run.max_parallel_per_server,
                }
                scheduler_s = worker["meters_s"].get("scheduler", 0.0)
                cpu[model][variant] = {
                    "cpu_s": worker["cpu_s"],
                    "wall_s": worker["wall_s"],
                    "pages": run.pages,
                    "scheduler_s": scheduler_s,
                    "scheduler_share": scheduler_s / worker["cpu_s"],
                    "middleware_s": worker["meters_s"].get("middleware", 0.0),
                    "meter_calls": worker["meter_calls"],
                    "crawl_stats": worker["stats"],
                }
                log(
                    f"{model:8s} {variant:18s} {run.pages:5d} pages "
                    f"in {run.total_time:6.1f} s, "
                    f"t80 {run.time_to_quality(0.8):6.1f} s, "
                    f"{run.politeness_violations:5d} violations "
                    f"(crawl {time.perf_counter() - t0:.0f} s)"
                )

    summary = {model: eff.summaries(per_variant) for model, per_variant in runs.items()}
    full = set(variants) >= set(VARIANTS)
    main_checks = eff.checks(summary) if full else []
    elapsed = clock.elapsed()
    env = environment("numpy", scrapy=version("scrapy"))

    header = (
        f"Command: ``{command}``; {env['date']}, Python {env['python']}, Scrapy "
        f"{env['scrapy']}, {env['cpus']} CPUs; whole run {elapsed / 60:.1f} min. Real "
        "crawls over loopback: figures vary from run to run by a few percent."
    )
    stats0 = web_info["pagerank"]
    web_text = (
        f"Web (``generate_paper_web({args.servers}, {args.pages}, seed={args.seed})``, the "
        f"reference's shape at 1/{30_000 // args.pages} of its size): {stats0['servers']} servers, "
        f"{stats0['pages']:,} pages, {stats0['links']:,} links "
        f"({100 * stats0['same_server_link_share']:.0f}% same-server), "
        f"{100 * stats0['http10_share']:.0f}% of servers HTTP/1.0, median connection / "
        f"response time {stats0['median_connection_time']:.3f} / "
        f"{stats0['median_response_time']:.3f} s (delay scale {args.delay_scale}). "
        f"K = CONCURRENT_REQUESTS = {k}; CONCURRENT_REQUESTS_PER_DOMAIN = "
        f"{args.per_domain or 'Scrapy default (8)'}."
    )
    sections: list[report.Section] = []
    if main_checks:
        sections.append(("Reference shapes and targets", "", [("", eff.checks_table(main_checks))]))
    for model in QUALITY_MODELS:
        t_bf = summary[model]["breadth-first"]["total_time"]
        sections.append(
            (
                f"{model} quality (T_BF = {t_bf:.1f} s)",
                f"crawl_{model}.png",
                [("", eff.main_table(summary[model]))],
            )
        )
    sections.append(("CPU: the scheduler's share of the crawler's CPU", "", [("", cpu_table(cpu))]))
    sections.append(
        ("Every page once, one request per host", "", [("", completeness_table(complete))])
    )

    md, inc = report.render(
        "Crawl efficiency with real crawls (`scrapy crawl` on the local test web)",
        [header, web_text],
        sections,
        CRAWL_DEFINITIONS,
    )
    print()
    report.print_sections(sections)
    print(f"Whole run: {elapsed / 60:.1f} min")
    if args.quick:
        return 0

    curves = {model: eff.curves(per_variant, args.points) for model, per_variant in runs.items()}
    for model in QUALITY_MODELS:
        eff.plot_model(
            model,
            curves[model],
            runs[model]["breadth-first"].total_time,
            report.DOCS_RESULTS / f"crawl_{model}.png",
            f"Real crawls: {args.servers} servers, {args.pages:,} pages, K={k}, seed {args.seed}",
            clock="wall clock",
        )
    parameters = eff.web_parameters(
        args.servers,
        args.pages,
        args.seed,
        k,
        args.per_domain,
        delay_scale=args.delay_scale,
        settings={v: variant_settings(v, k, args.per_domain) for v in variants},
    )
    data = eff.harness_record(
        command, env, elapsed, parameters, CRAWL_DEFINITIONS,
        web_info, main_checks, summary, curves, cpu=cpu, completeness=complete,
    )  # fmt: skip
    eff.write_harness("crawl", data, md, inc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
