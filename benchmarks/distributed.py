"""Distributed crawling on Redis: scrapy_twolevel's distributed mode against scrapy-redis.

Every run crawls one local test web (served by its own process, so its counts are the
ground truth) with the example project's ``testweb`` spider, in ``n`` real ``scrapy
crawl`` processes on one private Redis (a ``redis-server`` started for the benchmark,
flushed between runs), with the same ``CONCURRENT_REQUESTS`` per node. Variants:

- ``twolevel``: ``TWOLEVEL_REDIS_URL`` with the two-level scheduler and the seen cache;
- ``scrapy-redis``: ``scrapy_redis.scheduler.Scheduler`` with its ``RFPDupeFilter``
  (defaults: one shared priority queue of pickled requests; ``SCHEDULER_PERSIST = True``,
  without which the first node to finish deletes the queue the others still use);
- ``stock``: one plain Scrapy process, for reference.

Scenarios: ``n`` nodes started together (``--nodes``), and a crash: 3 nodes, one killed
with SIGKILL after a sixth of the pages.

Measured per run: wall time (first start to last exit) and pages per second; duplicates
(fetches beyond the first of a page) and pages lost (reachable, never fetched), at the
server; politeness violations (requests that reached a host while another request to it
was in flight, from any node) and the most requests ever in flight at one host; Redis
commands per page (``INFO`` ``total_commands_processed``) and twolevel's own round trips
per page; Redis memory per page (peak ``used_memory`` over the run minus before); CPU
seconds per 1000 pages over all nodes (``rusage``) and the share spent in twolevel's
Redis thread; pages per node, and load balance as in the reference study: the variance
(and coefficient of variation) of pages per node per 1-second window, over the windows
in which every node was fetching.

Speed-up on this 2-core machine is bounded by CPU (each node is a Python process); the
DES in ``benchmarks/distributed_sim.py`` shows how throughput and balance scale to 16.

Usage::

    python benchmarks/distributed.py            # about 10 minutes; results + docs tables
    python benchmarks/distributed.py --quick    # a small web, one repeat; writes nothing
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import harness
from harness import BENCH as HERE
from harness import DOCS_RESULTS, RESULTS, ROOT
from harness.redis_server import PrivateRedis
from harness.report import columns, save_figure

harness.use_checkout()

from harness.env import environment  # noqa: E402
from harness.report import markdown, rst  # noqa: E402
from scrapy_twolevel.testweb.process import ServerProcess  # noqa: E402
from scrapy_twolevel.testweb.web import HostProfile, generate_web  # noqa: E402

PROJECT = ROOT / "example_project"
WINDOW = 1.0

VARIANT_SETTINGS: dict[str, dict[str, Any]] = {
    "twolevel": {},  # the example project's own settings, plus TWOLEVEL_REDIS_URL
    "scrapy-redis": {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,
        "DOWNLOADER_MIDDLEWARES": {},
    },
    "stock": {
        "SCHEDULER": "scrapy.core.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter",
        "DOWNLOADER_MIDDLEWARES": {},
    },
}


class MemoryPeak(threading.Thread):
    """Polls Redis ``used_memory`` every 0.1 s; ``peak`` is the highest seen."""

    def __init__(self, redis: PrivateRedis) -> None:
        super().__init__(daemon=True)
        self.redis = redis
        self.peak = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.1):
            self.peak = max(self.peak, self.redis.info()[1])


def start_node(
    variant: str,
    name: str,
    server: ServerProcess,
    redis: PrivateRedis,
    crawl_id: str,
    workdir: Path,
    concurrency: int,
    kill_after: int,
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    fetch_log = workdir / f"{name}.fetch"
    stats_file = workdir / f"{name}.stats.json"
    settings: dict[str, Any] = {
        "EXTENSIONS": {"node_probe.FetchLog": 0, "node_probe.StatsFile": 1},
        "PROBE_FETCH_LOG": str(fetch_log),
        "PROBE_KILL_AFTER": kill_after,
        "STATS_FILE": str(stats_file),
        "TWOLEVEL_TESTWEB_SEEDS": ",".join(server.seeds),
        "CONCURRENT_REQUESTS": concurrency,
        "LOG_LEVEL": "WARNING",
        **VARIANT_SETTINGS[variant],
    }
    if variant == "twolevel":
        settings.update(
            TWOLEVEL_REDIS_URL=redis.url, TWOLEVEL_CRAWL_ID=crawl_id, TWOLEVEL_NODE_ID=name
        )
    elif variant == "scrapy-redis":
        settings.update(REDIS_URL=redis.url)
    cmd = [sys.executable, "-m", "scrapy.cmdline", "crawl", "testweb"]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(PROJECT)])}
    log = open(workdir / f"{name}.log", "wb")  # closed below: the child has its own copy
    proc = subprocess.Popen(cmd, cwd=PROJECT, stdout=subprocess.DEVNULL, stderr=log, env=env)
    log.close()
    return proc, fetch_log, stats_file


def seen_set_bytes(variant: str, redis: PrivateRedis) -> int | None:
    """Bytes Redis uses for the crawl's seen set at the end (``MEMORY USAGE``): twolevel's
    packed per-bucket logs, or scrapy-redis's set of hex fingerprints."""
    client = redis.client
    if variant == "twolevel":
        keys = list(client.scan_iter("twolevel:*:seen:*", count=1000))
    elif variant == "scrapy-redis":
        keys = list(client.scan_iter("*:dupefilter", count=1000))
    else:
        return None
    return sum(int(client.memory_usage(k, samples=0) or 0) for k in keys)


def wait_all(procs: list[subprocess.Popen[bytes]], timeout: float) -> tuple[list[int], float]:
    """Wait for every node; their exit codes and their CPU seconds (user + sys)."""
    killer = threading.Timer(timeout, lambda: [p.kill() for p in procs if p.poll() is None])
    killer.start()
    codes, cpu = [], 0.0
    try:
        for proc in procs:
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            codes.append(proc.returncode)
            cpu += usage.ru_utime + usage.ru_stime
    finally:
        killer.cancel()
    return codes, cpu


def read_fetch_log(path: Path) -> list[float]:
    if not path.exists():
        return []
    return [float(line.split(" ", 1)[0]) for line in path.read_text().splitlines() if line]


def balance(times_per_node: list[list[float]]) -> dict[str, float | None]:
    """Variance and CV of pages per node per window, over windows where all nodes fetch."""
    if len(times_per_node) < 2 or not all(times_per_node):
        return {"variance": None, "cv": None, "windows": 0}
    start = max(min(t) for t in times_per_node)
    end = min(max(t) for t in times_per_node)
    windows = int((end - start) // WINDOW)
    if windows < 1:
        return {"variance": None, "cv": None, "windows": 0}
    variances, cvs = [], []
    for w in range(windows):
        lo, hi = start + w * WINDOW, start + (w + 1) * WINDOW
        counts = [sum(lo <= t < hi for t in times) for times in times_per_node]
        mean = statistics.fmean(counts)
        variances.append(statistics.pvariance(counts))
        if mean:
            cvs.append(statistics.pstdev(counts) / mean)
    return {
        "variance": statistics.fmean(variances),
        "cv": statistics.fmean(cvs) if cvs else None,
        "windows": windows,
    }


def run_once(
    variant: str,
    nodes: int,
    web: Any,
    server: ServerProcess,
    redis: PrivateRedis,
    workdir: Path,
    *,
    concurrency: int,
    kill_after: int = 0,
    timeout: float = 600,
) -> dict[str, Any]:
    redis.client.flushall()
    server.reset()
    workdir.mkdir(parents=True)
    commands_before, memory_before = redis.info()
    peak = MemoryPeak(redis)
    peak.start()
    crawl_id = f"bench-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    launched = [
        start_node(
            variant,
            f"n{i}",
            server,
            redis,
            crawl_id,
            workdir,
            concurrency,
            kill_after if (kill_after and i == nodes - 1) else 0,
        )
        for i in range(nodes)
    ]
    codes, cpu = wait_all([p for p, _, _ in launched], timeout)
    wall = time.monotonic() - started
    peak.stopping.set()
    peak.join()
    commands_after, _ = redis.info()
    seen_bytes = seen_set_bytes(variant, redis)
    stats = server.stats()
    counts = stats.fetch_counts()
    reachable = web.reachable()
    fetches = sum(counts.values())
    node_stats = []
    for (_, _, stats_file), code in zip(launched, codes, strict=True):
        if stats_file.exists():
            node_stats.append(json.loads(stats_file.read_text()))
        elif code != -signal.SIGKILL:
            raise RuntimeError(f"{variant}: a node exited {code} without stats; see {workdir}")
    times = [read_fetch_log(fetch_log) for _, fetch_log, _ in launched]
    every = [t for node_times in times for t in node_times]
    span = max(every) - min(every) if len(every) > 1 else wall
    pages_per_node = [len(t) for t in times]
    surviving = [t for t, code in zip(times, codes, strict=True) if code != -signal.SIGKILL]
    round_trips = sum(s.get("twolevel/redis/round_trips", 0) for s in node_stats)
    sync_cpu = sum(s.get("twolevel/redis/sync_cpu_seconds", 0.0) for s in node_stats)
    commands = commands_after - commands_before - 1  # INFO's own
    return {
        "variant": variant,
        "nodes": nodes,
        "killed": bool(kill_after),
        "exit_codes": codes,
        "wall_s": wall,
        "pages": len(counts),
        "reachable": len(reachable),
        "pages_per_s": len(counts) / wall,
        "crawl_pages_per_s": fetches / span,
        "duplicates": fetches - len(counts),
        "lost": len(reachable - set(counts)),
        "leases_at_kill": sum(
            int(Path(f"{fetch_log}.leases").read_text())
            for _, fetch_log, _ in launched
            if Path(f"{fetch_log}.leases").exists()
        )
        if kill_after
        else None,
        "politeness_violations": stats.overlapping_requests(),
        "max_in_flight_per_host": max(stats.max_concurrent_requests_per_host().values()),
        "redis_commands_per_page": commands / max(fetches, 1) if variant != "stock" else None,
        "round_trips_per_page": round_trips / max(fetches, 1) if variant == "twolevel" else None,
        "redis_bytes_per_page": (
            (peak.peak - memory_before) / max(len(counts), 1) if variant != "stock" else None
        ),
        "seen_bytes_per_url": seen_bytes / max(len(counts), 1) if seen_bytes else None,
        "cpu_s_per_1000_pages": 1000 * cpu / max(fetches, 1),
        "redis_thread_cpu_share": sync_cpu / cpu if variant == "twolevel" and cpu else None,
        "pages_per_node": pages_per_node,
        "balance": balance(surviving),
    }


def make_web(quick: bool) -> Any:
    hosts, pages = (12, 20) if quick else (64, 60)
    return generate_web(
        hosts,
        pages,
        seed=2026,
        n_seeds=6,
        links_per_page=8,
        host_profiles=[HostProfile(connect_delay=0.002, response_delay=0.03)] * hosts,
    )


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median wall time, plus the spread of the repeats."""
    runs = sorted(runs, key=lambda r: r["wall_s"])
    chosen = dict(runs[len(runs) // 2])
    chosen["repeats"] = len(runs)
    chosen["pages_per_s_all"] = [r["pages_per_s"] for r in runs]
    chosen["duplicates_all"] = [r["duplicates"] for r in runs]
    chosen["lost_all"] = [r["lost"] for r in runs]
    chosen["leases_at_kill_all"] = [r["leases_at_kill"] for r in runs]
    return chosen


def table(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    def f(x: Any, digits: int = 1) -> str:
        if x is None:
            return "-"
        return f"{x:.{digits}f}" if isinstance(x, float) else str(x)

    head = columns(
        "variant | nodes | pages/s (wall) | pages/s (crawling) | speed-up | duplicates | "
        "in flight at kill | lost | politeness viol. | max in flight/host | "
        "Redis cmds/page | round trips/page | Redis peak B/page | seen set B/URL | "
        "CPU s/1000 pages | Redis thread CPU | pages per node | balance CV"
    )
    base = {
        r["variant"]: r["crawl_pages_per_s"] for r in rows if r["nodes"] == 1 and not r["killed"]
    }
    body = []
    for r in rows:
        speedup = r["crawl_pages_per_s"] / base[r["variant"]] if r["variant"] in base else None
        share = r["redis_thread_cpu_share"]
        body.append(
            [
                r["variant"] + (" (1 killed)" if r["killed"] else ""),
                str(r["nodes"]),
                f(r["pages_per_s"]),
                f(r["crawl_pages_per_s"]),
                f(speedup, 2) if speedup and not r["killed"] else "-",
                "/".join(str(d) for d in r["duplicates_all"]),
                "/".join(str(d) for d in r["leases_at_kill_all"]) if r["killed"] else "-",
                "/".join(str(d) for d in r["lost_all"]),
                str(r["politeness_violations"]),
                str(r["max_in_flight_per_host"]),
                f(r["redis_commands_per_page"], 2),
                f(r["round_trips_per_page"], 2),
                f(r["redis_bytes_per_page"], 0),
                f(r["seen_bytes_per_url"], 1),
                f(r["cpu_s_per_1000_pages"], 2),
                f"{100 * share:.1f}%" if share is not None else "-",
                "/".join(str(p) for p in r["pages_per_node"]),
                f(r["balance"]["cv"], 2),
            ]
        )
    return head, body


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for variant, color in (("twolevel", "#d62728"), ("scrapy-redis", "#7f7f7f")):
        pts = sorted(
            (r["nodes"], r["crawl_pages_per_s"])
            for r in rows
            if r["variant"] == variant and not r["killed"]
        )
        axes[0].plot(*zip(*pts, strict=True), "o-", color=color, label=variant)
        viol = sorted(
            (r["nodes"], r["politeness_violations"])
            for r in rows
            if r["variant"] == variant and not r["killed"]
        )
        axes[1].plot(*zip(*viol, strict=True), "o-", color=color, label=variant)
    stock = [r for r in rows if r["variant"] == "stock"]
    if stock:
        axes[0].axhline(
            stock[0]["crawl_pages_per_s"], color="#9467bd", ls=":", label="stock Scrapy, 1 process"
        )
    axes[0].set(
        xlabel="nodes (processes on 2 cores)",
        ylabel="pages / s, first to last fetch",
        title="Throughput",
    )
    axes[1].set(
        xlabel="nodes", ylabel="requests overlapping at a host", title="Politeness violations"
    )
    for ax in axes:
        ax.legend()
        ax.grid(alpha=0.3)
    save_figure(fig, path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", default="1,2,3", help="node counts (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8, help="CONCURRENT_REQUESTS per node")
    parser.add_argument(
        "--quick", action="store_true", help="small web, one repeat; prints, writes nothing"
    )
    parser.add_argument("--name", default="distributed")
    parser.add_argument("--workdir", default="/tmp/twolevel-bench-distributed")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    node_counts = [int(n) for n in args.nodes.split(",")]
    workdir = Path(args.workdir, time.strftime("%Y%m%d-%H%M%S"))
    workdir.mkdir(parents=True)
    web = make_web(args.quick)
    redis = PrivateRedis(workdir)
    plan: list[tuple[str, int, bool]] = [("stock", 1, False)]
    for n in node_counts:
        plan += [("twolevel", n, False), ("scrapy-redis", n, False)]
    plan += [("twolevel", 3, True), ("scrapy-redis", 3, True)]
    rows = []
    try:
        with ServerProcess(web, workdir) as server:
            for variant, n, killed in plan:
                runs = []
                for rep in range(repeats):
                    run = run_once(
                        variant,
                        n,
                        web,
                        server,
                        redis,
                        workdir / f"{variant}-{n}-{killed}-{rep}",
                        concurrency=args.concurrency,
                        kill_after=len(web.reachable()) // 6 if killed else 0,
                    )
                    print(
                        f"{variant:>12} n={n} killed={killed}: {run['pages_per_s']:.1f} pages/s, "
                        f"dup {run['duplicates']}, lost {run['lost']}, "
                        f"violations {run['politeness_violations']}",
                        flush=True,
                    )
                    runs.append(run)
                rows.append(median_run(runs))
    finally:
        redis.stop()
    head, body = table(rows)
    md = markdown((head, body))
    print(md)
    if args.quick:
        return 0  # a smoke run: the committed results stay as they are
    data = {
        "command": "python benchmarks/distributed.py",
        "environment": environment("numpy"),
        "web": {"hosts": len(web.hosts), "pages": len(web.reachable())},
        "concurrency_per_node": args.concurrency,
        "repeats": repeats,
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(data, indent=1))
    (RESULTS / f"{args.name}.md").write_text(
        f"Regenerated with `{data['command']}`; web of {data['web']['hosts']} hosts, "
        f"{data['web']['pages']} pages; CONCURRENT_REQUESTS={args.concurrency} per node; "
        f"median of {repeats} repeats (duplicates and lost: every repeat).\n\n{md}\n"
    )
    DOCS_RESULTS.mkdir(exist_ok=True)
    (DOCS_RESULTS / f"{args.name}.inc").write_text(rst((head, body)))
    plot(rows, DOCS_RESULTS / f"{args.name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
