"""Scheduler overhead: CPU per request and RAM/disk per pending request, side by side.

Compares, in one run and on one machine, Scrapy's stock scheduler
(``scrapy.core.scheduler.Scheduler``) over ``ScrapyPriorityQueue`` and over
``DownloaderAwarePriorityQueue`` (Scrapy's default since 2.14) with
``TwoLevelScheduler`` and its policies, each in memory and with ``JOBDIR``. The
dupefilter is off (``BaseDupeFilter``) so only the scheduler's own work is measured.

Method (also written into the results):

- Each configuration runs in a fresh subprocess, so RAM figures do not pollute each other.
- Requests ``http://h{i % H}.example.com/p/{i}`` get a priority drawn from a seeded
  ``random.Random`` (0..1000) and are enqueued round-robin over the H hosts. They are
  created in batches of 1,000 just before each batch is enqueued: creation is outside
  the timed region, and with ``JOBDIR`` a request pushed to disk is freed (streaming).
- Enqueue: CPU time (``time.process_time``) of the ``enqueue_request`` calls / N.
- RAM per pending request: growth of the process RSS (psutil) from before the first
  request is created (scheduler already open, ``gc.collect()``) to after all N are
  enqueued (``gc.collect()``), / N. It includes the ``Request`` objects kept in memory.
- Disk per pending request: bytes allocated under ``JOBDIR`` after the enqueue (scheduler
  open) and after ``close()``, / N. The JOBDIR variants then reopen the scheduler
  (a resume, timed) and dequeue from the reopened one.
- Dequeue: CPU time of ``next_request()`` until it returns ``None`` / requests dequeued.
  ``TwoLevelScheduler`` hands out one request per host at a time, so after each request
  the benchmark calls ``scheduler.outcomes.request_done(request)`` (what its
  ``request_left_downloader`` handler does, called directly: stock Scrapy pays the signal
  dispatch too) and counts it in the dequeue time. A variant that would take longer than
  ``--dequeue-cap`` CPU seconds is stopped there: its per-request figure is over the first
  requests dequeued (the table says how many).
- A real ``ExecutionEngine`` is created (not started) for every variant, because
  ``DownloaderAwarePriorityQueue`` reads the downloader's slots: they stay empty, so every
  slot has 0 active downloads.

Usage::

    python benchmarks/scheduler_overhead.py            # full: 100k and 1M over 1k and 50k hosts
    python benchmarks/scheduler_overhead.py --quick    # smoke run: 100k over 1k hosts
    python benchmarks/scheduler_overhead.py --profile twolevel-cc-mem --n 100000 --hosts 50000
"""

from __future__ import annotations

import argparse
import errno
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import DOCS_RESULTS, RESULTS, report
from harness.crawl import Snapshot, pythonpath, snapshot_package, worker_result
from harness.env import environment

BATCH = 1_000
SEED = 20240601
MAX_PRIORITY = 1000
CHECK_EVERY = 100  # dequeues between two looks at the CPU-time cap
FULL_SIZES = ((100_000, 1_000), (100_000, 50_000), (1_000_000, 1_000), (1_000_000, 50_000))
QUICK_SIZES = ((100_000, 1_000),)

STOCK_SCHEDULER = "scrapy.core.scheduler.Scheduler"
TWOLEVEL_SCHEDULER = "scrapy_twolevel.scheduler.TwoLevelScheduler"
SPQ = "scrapy.pqueues.ScrapyPriorityQueue"
DAPQ = "scrapy.pqueues.DownloaderAwarePriorityQueue"
METRICS_MW = {"scrapy_twolevel.middleware.HostMetricsMiddleware": 950}

# Targets from the issue.
TARGET_VS_DAPQ = 0.2
TARGET_VS_SPQ = 1.5
TARGET_FLAT = 1.25  # "nearly flat": 50k-host CPU/request at most this many times the 1k-host one
TARGET_JOBDIR_RAM = 150.0


@dataclass(frozen=True)
class Variant:
    key: str
    label: str
    family: str  # "spq", "dapq" or "twolevel"
    disk: bool
    settings: dict[str, Any]


def _stock(key: str, label: str, family: str, pq: str, disk: bool) -> Variant:
    return Variant(
        key, label, family, disk, {"SCHEDULER": STOCK_SCHEDULER, "SCHEDULER_PRIORITY_QUEUE": pq}
    )


def _ours(key: str, label: str, policy: str, disk: bool) -> Variant:
    return Variant(
        key,
        label,
        "twolevel",
        disk,
        {
            "SCHEDULER": TWOLEVEL_SCHEDULER,
            "TWOLEVEL_POLICY": policy,
            "DOWNLOADER_MIDDLEWARES": METRICS_MW,
        },
    )


VARIANTS: dict[str, Variant] = {
    v.key: v
    for v in (
        _stock("stock-spq-mem", "stock ScrapyPriorityQueue", "spq", SPQ, False),
        _stock("stock-dapq-mem", "stock DownloaderAwarePQ", "dapq", DAPQ, False),
        _ours("twolevel-cc-mem", "twolevel crawl-capability", "crawl-capability", False),
        _ours("twolevel-bf-mem", "twolevel breadth-first", "breadth-first", False),
        Variant(
            "twolevel-cc-mem-objects",
            "twolevel crawl-capability, requests as objects",
            "twolevel",
            False,
            {
                **_ours("", "", "crawl-capability", False).settings,
                "TWOLEVEL_MEMORY_QUEUE": "objects",
            },
        ),
        _ours("twolevel-qf-mem", "twolevel quality-first", "quality-first", False),
        _ours("twolevel-pf-mem", "twolevel performance-first", "performance-first", False),
        _stock("stock-spq-disk", "stock ScrapyPriorityQueue", "spq", SPQ, True),
        _stock("stock-dapq-disk", "stock DownloaderAwarePQ", "dapq", DAPQ, True),
        _ours("twolevel-cc-disk", "twolevel crawl-capability", "crawl-capability", True),
        _ours("twolevel-bf-disk", "twolevel breadth-first", "breadth-first", True),
        Variant(
            "twolevel-cc-disk-c1",
            "twolevel crawl-capability, 1 MB SQLite cache",
            "twolevel",
            True,
            {
                **_ours("", "", "crawl-capability", True).settings,
                "TWOLEVEL_DISK_CACHE_MB": 1,
            },
        ),
    )
}
#: Run at every size. The extras (the other two policies; crawl-capability with a 1 MB SQLite
#: cache instead of the default 4 MB of TWOLEVEL_DISK_CACHE_MB, to show how much of the
#: JOBDIR RAM is that cache; in memory with requests kept as objects, as before
#: TWOLEVEL_MEMORY_QUEUE) run at 100k pending only, unless ``--all-policies``.
CORE_VARIANTS = (
    "stock-spq-mem",
    "stock-dapq-mem",
    "twolevel-cc-mem",
    "twolevel-bf-mem",
    "stock-spq-disk",
    "stock-dapq-disk",
    "twolevel-cc-disk",
    "twolevel-bf-disk",
)
EXTRA_VARIANTS = (
    "twolevel-qf-mem",
    "twolevel-pf-mem",
    "twolevel-cc-disk-c1",
    "twolevel-cc-mem-objects",
)

BASE_SETTINGS: dict[str, Any] = {
    "DUPEFILTER_CLASS": "scrapy.dupefilters.BaseDupeFilter",
    "LOG_LEVEL": "WARNING",
    "TELNETCONSOLE_ENABLED": False,
}


# -- worker side: one configuration in this process ------------------------------------


def request_batches(n: int, hosts: int, seed: int = SEED) -> Iterator[list[Any]]:
    """The workload, ``BATCH`` requests at a time; the same for every variant."""
    import random

    from scrapy import Request

    rng = random.Random(seed)
    randint = rng.randint
    for start in range(0, n, BATCH):
        yield [
            Request(f"http://h{i % hosts}.example.com/p/{i}", priority=randint(0, MAX_PRIORITY))
            for i in range(start, min(n, start + BATCH))
        ]


def dir_bytes(path: str) -> dict[str, int]:
    """Apparent size and allocated size (``du``) of everything under ``path``."""
    apparent = allocated = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            st = os.stat(os.path.join(root, name))
            apparent += st.st_size
            allocated += st.st_blocks * 512
            files += 1
    return {"apparent": apparent, "allocated": allocated, "files": files}


def make_crawler(settings: dict[str, Any]) -> tuple[Any, Any]:
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(Spider, settings)
    spider = Spider.from_crawler(crawler, name="bench")
    crawler.spider = spider
    # DownloaderAwarePriorityQueue reads crawler.engine.downloader.slots; built, not started.
    crawler.engine = crawler._create_engine()
    return crawler, spider


def open_scheduler(crawler: Any, spider: Any) -> Any:
    from scrapy.utils.misc import load_object

    scheduler = load_object(crawler.settings["SCHEDULER"]).from_crawler(crawler)
    scheduler.open(spider)
    return scheduler


def drain(scheduler: Any, ours: bool, limit: int, cap_s: float) -> tuple[int, float, float]:
    """Dequeue until empty, ``limit`` requests, or ``cap_s`` CPU seconds; (count, cpu, wall)."""
    next_request = scheduler.next_request
    left: Callable[[Any], None] | None = scheduler.outcomes.request_done if ours else None
    count = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    empty = False
    while not empty and count < limit:
        chunk = min(CHECK_EVERY, limit - count)
        if left is None:
            for _ in range(chunk):
                if next_request() is None:
                    empty = True
                    break
                count += 1
        else:
            for _ in range(chunk):
                request = next_request()
                if request is None:
                    empty = True
                    break
                left(request)
                count += 1
        if time.process_time() - cpu0 > cap_s:
            break
    return count, time.process_time() - cpu0, time.perf_counter() - wall0


def rss() -> int:
    import psutil

    gc.collect()
    return psutil.Process().memory_info().rss


def run_config(variant_key: str, n: int, hosts: int, cap_s: float) -> dict[str, Any]:
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    variant = VARIANTS[variant_key]
    ours = variant.family == "twolevel"
    jobdir = tempfile.mkdtemp(prefix="twolevel-bench-") if variant.disk else None
    settings = {**BASE_SETTINGS, **variant.settings}
    if jobdir:
        settings["JOBDIR"] = jobdir
    import scrapy_twolevel

    result: dict[str, Any] = {
        "variant": variant_key,
        "n": n,
        "hosts": hosts,
        "scrapy_twolevel_from": str(Path(scrapy_twolevel.__file__).parent),
    }
    try:
        crawler, spider = make_crawler(settings)
        scheduler = open_scheduler(crawler, spider)
        enqueue = scheduler.enqueue_request
        rss_before = rss()
        enq_cpu = enq_wall = 0.0
        enqueued = 0
        try:
            for batch in request_batches(n, hosts):
                cpu0, wall0 = time.process_time(), time.perf_counter()
                for request in batch:
                    enqueue(request)
                enq_cpu += time.process_time() - cpu0
                enq_wall += time.perf_counter() - wall0
                enqueued += len(batch)
                del batch, request
        except OSError as exc:
            code = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
            result["error"] = f"{code} ({exc.strerror}) after {enqueued:,} enqueued"
            result["error_detail"] = str(exc)
            result["enqueued_before_error"] = enqueued
            return result
        pending = len(scheduler)
        if pending != n:
            raise AssertionError(f"{pending} pending after enqueuing {n}")
        rss_after = rss()
        result.update(
            enqueue_cpu_s=enq_cpu,
            enqueue_wall_s=enq_wall,
            enqueue_us=enq_cpu / n * 1e6,
            rss_before=rss_before,
            rss_after_enqueue=rss_after,
            ram_bytes_per_request=(rss_after - rss_before) / n,
        )
        if jobdir:
            open_size = dir_bytes(jobdir)
            cpu0 = time.process_time()
            scheduler.close("shutdown")
            result["close_cpu_s"] = time.process_time() - cpu0
            closed_size = dir_bytes(jobdir)
            result.update(
                disk_open=open_size,
                disk_closed=closed_size,
                disk_bytes_per_request_open=open_size["allocated"] / n,
                disk_bytes_per_request_closed=closed_size["allocated"] / n,
            )
            cpu0, wall0 = time.process_time(), time.perf_counter()
            scheduler = open_scheduler(crawler, spider)
            result["resume_cpu_s"] = time.process_time() - cpu0
            result["resume_wall_s"] = time.perf_counter() - wall0
            if len(scheduler) != n:
                raise AssertionError(f"{len(scheduler)} pending after resume, expected {n}")
        count, deq_cpu, deq_wall = drain(scheduler, ours, n, cap_s)
        result.update(
            dequeued=count,
            dequeue_capped=count < n,
            dequeue_cpu_s=deq_cpu,
            dequeue_wall_s=deq_wall,
            dequeue_us=deq_cpu / count * 1e6,
        )
        if count == n and len(scheduler):
            raise AssertionError(f"{len(scheduler)} requests left after dequeuing {n}")
        result["total_us"] = result["enqueue_us"] + result["dequeue_us"]
        scheduler.close("finished")
        if ours:
            stats = crawler.stats.get_stats()
            result["sessions"] = stats.get("twolevel/sessions", 0)
            result["held_back"] = stats.get("twolevel/held_back", 0)
        return result
    finally:
        if jobdir:
            shutil.rmtree(jobdir, ignore_errors=True)


def profile_config(variant_key: str, n: int, hosts: int, out: Path) -> None:
    """cProfile the enqueue and the dequeue of one configuration; write the top functions."""
    import cProfile
    import io
    import pstats

    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    variant = VARIANTS[variant_key]
    jobdir = tempfile.mkdtemp(prefix="twolevel-bench-") if variant.disk else None
    settings = {**BASE_SETTINGS, **variant.settings}
    if jobdir:
        settings["JOBDIR"] = jobdir
    import scrapy_twolevel

    text = io.StringIO()
    text.write(f"# scrapy_twolevel imported from {Path(scrapy_twolevel.__file__).parent}\n")
    try:
        crawler, spider = make_crawler(settings)
        scheduler = open_scheduler(crawler, spider)
        requests = [r for batch in request_batches(n, hosts) for r in batch]
        for phase in ("enqueue", "dequeue"):
            prof = cProfile.Profile()
            prof.enable()
            if phase == "enqueue":
                for request in requests:
                    scheduler.enqueue_request(request)
                del requests
            else:
                count, _, _ = drain(scheduler, variant.family == "twolevel", n, 600.0)
            prof.disable()
            text.write(f"## {variant_key}, {phase}, N={n:,}, hosts={hosts:,}\n")
            if phase == "dequeue":
                text.write(f"(dequeued {count:,})\n")
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
        scheduler.close("finished")
    finally:
        if jobdir:
            shutil.rmtree(jobdir, ignore_errors=True)
    out.write_text(text.getvalue(), encoding="utf-8")
    print(text.getvalue())


# -- parent side: run every configuration in a subprocess, then report ----------------


def run_subprocess(
    variant: str, n: int, hosts: int, cap_s: float, snapshot: Path | None = None
) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", variant]
    cmd += ["--n", str(n), "--hosts", str(hosts), "--dequeue-cap", str(cap_s)]
    wall0 = time.perf_counter()
    env = pythonpath(snapshot)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - wall0
    tail = proc.stderr or proc.stdout
    result = worker_result(proc.returncode, proc.stdout, tail, variant=variant, n=n, hosts=hosts)
    result["process_wall_s"] = wall
    return result


def _find(runs: list[dict[str, Any]], variant: str, n: int, hosts: int) -> dict[str, Any] | None:
    for run in runs:
        if run["variant"] == variant and run["n"] == n and run["hosts"] == hosts:
            return run
    return None


def _ok(run: dict[str, Any] | None) -> bool:
    return run is not None and "total_us" in run


def _progress(run: dict[str, Any]) -> str:
    return report.progress(
        " ",
        run,
        _ok(run),
        lambda: (
            f"enqueue {run['enqueue_us']:.1f} µs",
            f"dequeue {run['dequeue_us']:.1f} µs ({run['dequeued']:,})",
            f"RAM {run['ram_bytes_per_request']:.0f} B/req",
        ),
    )


def add_ratios(runs: list[dict[str, Any]]) -> None:
    """CPU and RAM ratios of every variant to the stock ones of the same size and storage."""
    for run in runs:
        if not _ok(run):
            continue
        variant = VARIANTS[run["variant"]]
        suffix = "disk" if variant.disk else "mem"
        for name in ("spq", "dapq"):
            ref = _find(runs, f"stock-{name}-{suffix}", run["n"], run["hosts"])
            if _ok(ref):
                assert ref is not None
                run[f"cpu_vs_{name}"] = run["total_us"] / ref["total_us"]
                run[f"ram_vs_{name}"] = run["ram_bytes_per_request"] / ref["ram_bytes_per_request"]


def verdicts(
    runs: list[dict[str, Any]], sizes: tuple[tuple[int, int], ...]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per twolevel run: each target met or not, with the measured figure; then flatness."""
    per_run: list[dict[str, Any]] = []
    for run in runs:
        variant = VARIANTS[run["variant"]]
        if variant.family != "twolevel" or not _ok(run):
            continue
        row: dict[str, Any] = {"variant": run["variant"], "n": run["n"], "hosts": run["hosts"]}
        for name, target in (("dapq", TARGET_VS_DAPQ), ("spq", TARGET_VS_SPQ)):
            ratio = run.get(f"cpu_vs_{name}")
            row[f"cpu_vs_{name}"] = (
                {"ratio": ratio, "target": target, "met": ratio <= target}
                if ratio is not None
                else None
            )
        if variant.disk:
            ram = run["ram_bytes_per_request"]
            row["jobdir_ram"] = {
                "bytes": ram,
                "target": TARGET_JOBDIR_RAM,
                "met": ram <= TARGET_JOBDIR_RAM,
            }
        else:
            for name in ("spq", "dapq"):
                ratio = run.get(f"ram_vs_{name}")
                row[f"ram_vs_{name}"] = (
                    {"ratio": ratio, "target": 1.0, "met": ratio <= 1.0}
                    if ratio is not None
                    else None
                )
        per_run.append(row)
    flat: list[dict[str, Any]] = []
    host_counts = sorted({h for _, h in sizes})
    if len(host_counts) >= 2:
        low, high = host_counts[0], host_counts[-1]
        for n in sorted({n for n, _ in sizes}):
            for key, variant in VARIANTS.items():
                if variant.family != "twolevel":
                    continue
                a, b = _find(runs, key, n, low), _find(runs, key, n, high)
                if _ok(a) and _ok(b):
                    assert a is not None and b is not None
                    growth = b["total_us"] / a["total_us"]
                    flat.append(
                        {
                            "variant": key,
                            "n": n,
                            "hosts": [low, high],
                            "total_us": [a["total_us"], b["total_us"]],
                            "growth": growth,
                            "target": TARGET_FLAT,
                            "met": growth <= TARGET_FLAT,
                        }
                    )
    return per_run, flat


def verdict_tables(per_run: list[dict[str, Any]], flat: list[dict[str, Any]]) -> str:
    def cell(entry: dict[str, Any] | None) -> str:
        if entry is None:
            return "n/a (stock did not complete)"
        if "bytes" in entry:
            return report.verdict(entry["met"], f"{entry['bytes']:.0f} B")
        return report.verdict(entry["met"], report.ratio(entry["ratio"]))

    out = [
        f"| pending | hosts | scheduler | storage | CPU <= {TARGET_VS_DAPQ}x DAPQ "
        f"| CPU <= {TARGET_VS_SPQ}x SPQ | RAM <= stock SPQ (memory) "
        f"| RAM <= stock DAPQ (memory) | RAM <= {TARGET_JOBDIR_RAM:.0f} B (JOBDIR) |",
        "|---:|---:|---|---|---|---|---|---|---|",
    ]
    for row in per_run:
        variant = VARIANTS[row["variant"]]
        storage = "JOBDIR" if variant.disk else "memory"
        mem_cells = (
            ["-", "-", cell(row["jobdir_ram"])]
            if variant.disk
            else [cell(row["ram_vs_spq"]), cell(row["ram_vs_dapq"]), "-"]
        )
        out.append(
            f"| {row['n']:,} | {row['hosts']:,} | {variant.label} | {storage} "
            f"| {cell(row['cpu_vs_dapq'])} | {cell(row['cpu_vs_spq'])} | "
            + " | ".join(mem_cells)
            + " |"
        )
    if flat:
        out += [
            "",
            f"Nearly flat from {flat[0]['hosts'][0]:,} to {flat[0]['hosts'][1]:,} hosts "
            f"(target: CPU per request at most {TARGET_FLAT}x):",
            "",
            "| pending | scheduler | storage | µs/request, few hosts -> many | growth |",
            "|---:|---|---|---:|---|",
        ]
        for row in flat:
            variant = VARIANTS[row["variant"]]
            storage = "JOBDIR" if variant.disk else "memory"
            a, b = row["total_us"]
            growth = report.verdict(row["met"], report.ratio(row["growth"]))
            out.append(
                f"| {row['n']:,} | {variant.label} | {storage} | {a:.1f} -> {b:.1f} | {growth} |"
            )
    return "\n".join(out) + "\n"


def _fmt(value: Any, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def markdown_table(runs: list[dict[str, Any]]) -> str:
    head = (
        "| pending | hosts | scheduler | storage | enqueue µs | dequeue µs | total µs "
        "| dequeued (timed) | x SPQ | x DAPQ | RAM B/req | x SPQ RAM | disk B/req open / closed "
        "| resume s |\n"
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    rows = []
    for run in runs:
        variant = VARIANTS[run["variant"]]
        storage = "JOBDIR" if variant.disk else "memory"
        prefix = f"| {run['n']:,} | {run['hosts']:,} | {variant.label} | {storage} "
        if not _ok(run):
            rows.append(prefix + f"| not run to the end: {run.get('error', '?')} |" + " |" * 9)
            continue
        dequeued = f"{run['dequeued']:,}" + (" (capped)" if run["dequeue_capped"] else "")
        disk = "-"
        if variant.disk:
            disk = (
                f"{run['disk_bytes_per_request_open']:.0f} / "
                f"{run['disk_bytes_per_request_closed']:.0f}"
            )
        rows.append(
            prefix + f"| {run['enqueue_us']:.1f} | {run['dequeue_us']:.1f} | {run['total_us']:.1f} "
            f"| {dequeued} | {_fmt(run.get('cpu_vs_spq'), '.2f')} "
            f"| {_fmt(run.get('cpu_vs_dapq'), '.2g')} | {run['ram_bytes_per_request']:.0f} "
            f"| {_fmt(run.get('ram_vs_spq'), '.2f')} | {disk} | {_fmt(run.get('resume_wall_s'))} |"
        )
    return head + "\n".join(rows) + "\n"


def _short_label(key: str) -> str:
    variant = VARIANTS[key]
    return f"{variant.label} ({'JOBDIR' if variant.disk else 'memory'})"


def _bar_panels(
    runs: list[dict[str, Any]],
    path: Path,
    title: str,
    xlabel: str,
    bars: Callable[[dict[str, Any]], list[tuple[float, str, str | None]]],
) -> None:
    """One horizontal-bar panel per (pending, hosts), one row per variant, values printed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({(r["n"], r["hosts"]) for r in runs})
    keys = [k for k in VARIANTS if any(r["variant"] == k for r in runs)]
    cols = 2 if len(sizes) > 1 else 1
    rows = (len(sizes) + cols - 1) // cols
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(6.5 * cols + 2.5, 0.5 * len(keys) * rows + 1.6),
        squeeze=False,
        sharey=True,
    )
    colors = {"spq": "tab:blue", "dapq": "tab:orange", "twolevel": "tab:green"}
    for ax, (n, hosts) in zip(axes.flat, sizes, strict=False):
        values: list[float] = []
        failed: list[tuple[int, str]] = []
        for y, key in enumerate(keys):
            run = _find(runs, key, n, hosts)
            if run is None:
                failed.append((y, "not run at this size"))
                continue
            if not _ok(run):
                failed.append((y, "did not complete: " + run.get("error", "?")))
                continue
            variant = VARIANTS[key]
            height = 0.8 / max(1, len(bars(run)))
            for i, (value, text, hatch) in enumerate(bars(run)):
                offset = (i - (len(bars(run)) - 1) / 2) * height
                ax.barh(
                    y + offset,
                    value,
                    height,
                    color=colors[variant.family],
                    alpha=0.55 if variant.disk else 0.9,
                    hatch=hatch,
                    edgecolor="black",
                    linewidth=0.4,
                )
                ax.text(value, y + offset, " " + text, va="center", fontsize=8)
                values.append(value)
        ax.set_xscale("log")
        if values:
            ax.set_xlim(min(values) / 1.5, max(values) * 150)
        for y, text in failed:
            color = "gray" if text.startswith("not run") else "firebrick"
            ax.text(ax.get_xlim()[0], y, " " + text, va="center", fontsize=8, color=color)
        ax.set_yticks(range(len(keys)))
        ax.set_yticklabels([_short_label(k) for k in keys], fontsize=9)
        ax.set_ylim(len(keys) - 0.4, -0.6)
        ax.set_title(f"{n:,} pending requests over {hosts:,} hosts", fontsize=10)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.grid(axis="x", alpha=0.3, which="both")
    for ax in list(axes.flat)[len(sizes) :]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=11)
    report.save_figure(fig, path, dpi=90)


def plot(runs: list[dict[str, Any]], out_dir: Path, name: str) -> list[Path]:
    """Two PNGs: CPU per request, and RAM / disk per pending request."""
    cpu_png, mem_png = out_dir / f"{name}_cpu.png", out_dir / f"{name}_memory.png"

    def cpu_bars(run: dict[str, Any]) -> list[tuple[float, str, str | None]]:
        capped = " (capped)" if run["dequeue_capped"] else ""
        text = f"{run['total_us']:.1f} = {run['enqueue_us']:.1f} + {run['dequeue_us']:.1f}{capped}"
        return [(run["total_us"], text, None)]

    def mem_bars(run: dict[str, Any]) -> list[tuple[float, str, str | None]]:
        out = [
            (
                max(1.0, run["ram_bytes_per_request"]),
                f"RAM {run['ram_bytes_per_request']:.0f} B",
                None,
            )
        ]
        if "disk_bytes_per_request_closed" in run:
            disk = run["disk_bytes_per_request_closed"]
            out.append((disk, f"disk {disk:.0f} B", "//"))
        return out

    _bar_panels(
        runs,
        cpu_png,
        "Scheduler CPU per request (same run): total = enqueue + dequeue",
        "CPU µs per request (log)",
        cpu_bars,
    )
    _bar_panels(
        runs,
        mem_png,
        "Per pending request: RAM (RSS growth / N, Request objects included) "
        "and JOBDIR disk after close (hatched)",
        "bytes per pending request (log)",
        mem_bars,
    )
    return [cpu_png, mem_png]


def _open_files_limit() -> int | None:
    try:
        import resource

        return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError):
        return None


def method_notes(cap_s: float) -> list[str]:
    return [
        "Each configuration runs in a fresh subprocess, importing a copy of scrapy_twolevel "
        "taken at the start of the run; CPU time is time.process_time().",
        "Requests http://h{i % H}.example.com/p/{i}, priority = seeded random "
        f"0..{MAX_PRIORITY}, created in batches of {BATCH:,} outside the timed region "
        "(streamed: a request pushed to disk is freed).",
        "RAM per pending request = RSS growth (psutil, after gc.collect()) from before the "
        "first request is created to after all are enqueued, / N; Request objects included.",
        "Disk per pending request = bytes allocated under JOBDIR (st_blocks x 512) / N, with "
        "the scheduler open after the enqueue and after close(); JOBDIR variants are then "
        "reopened (resume, timed) and dequeued from the reopened scheduler.",
        "TwoLevelScheduler dequeue time includes scheduler.outcomes.request_done(request) "
        "after each request (its request_left_downloader handler, called directly).",
        f"Dequeue is stopped after {cap_s:g} CPU seconds: '(capped)' rows give µs/request over "
        "the first requests dequeued.",
        "A real ExecutionEngine is built (not started) so DownloaderAwarePriorityQueue sees "
        "the downloader; its slots stay empty (0 active downloads each).",
        "Python's cyclic GC stays enabled, as in a crawl.",
    ]


def write_reports(
    runs: list[dict[str, Any]],
    sizes: tuple[tuple[int, int], ...],
    env: dict[str, Any],
    command: str,
    cap_s: float,
    elapsed: float,
    out_dir: Path,
    name: str,
) -> str:

    add_ratios(runs)
    code = env.get("code", {})
    table = markdown_table(runs)
    per_run, flat = verdicts(runs, sizes)
    targets = verdict_tables(per_run, flat)
    # The committed run's figures go where the docs show them; other runs keep theirs.
    canonical = out_dir.resolve() == RESULTS.resolve() and name == "scheduler"
    pngs = plot(runs, DOCS_RESULTS if canonical else out_dir, name)
    data = {
        "command": command,
        "environment": env,
        "elapsed_s": elapsed,
        "dequeue_cap_cpu_s": cap_s,
        "method": method_notes(cap_s),
        "targets": {
            "cpu_vs_dapq_max": TARGET_VS_DAPQ,
            "cpu_vs_spq_max": TARGET_VS_SPQ,
            "flat_50k_vs_1k_hosts_max": TARGET_FLAT,
            "ram_vs_stock_memory_max": 1.0,
            "jobdir_ram_bytes_per_request_max": TARGET_JOBDIR_RAM,
        },
        "verdicts": {"per_run": per_run, "flat": flat},
        "runs": runs,
    }
    (out_dir / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    md = [
        "# Scheduler overhead: stock Scrapy vs TwoLevelScheduler",
        "",
        f"Command: `{command}`  ",
        f"Date: {env['date']}; Python {env['python']}, Scrapy {env['scrapy']}, "
        f"Twisted {env['twisted']}; {env['cpu_count']} CPUs, {env['memory_gib']} GiB; "
        f"open-files limit {env['open_files_limit']}; whole run {elapsed / 60:.1f} min.  ",
        f"Code: scrapy_twolevel at commit {code.get('commit') or '?'}"
        + (" plus uncommitted changes" if code.get("source") == "worktree" else "")
        + f" (sources sha256 {str(code.get('package_sha256'))[:12]}), copied at the start "
        "so every configuration ran the same code.",
        "",
        "CPU figures are µs per request (CPU time / requests). x SPQ / x DAPQ: total CPU "
        "per request relative to the stock scheduler with ScrapyPriorityQueue / "
        "DownloaderAwarePriorityQueue of the same size and storage, in the same run.",
        "",
        table,
        "## Targets",
        "",
        targets,
        "## Method",
        "",
        *[f"- {note}" for note in method_notes(cap_s)],
        "",
        *[f"![{png.stem}]({os.path.relpath(png, out_dir)})" for png in pngs],
        "",
    ]
    (out_dir / f"{name}.md").write_text("\n".join(md), encoding="utf-8")
    if canonical:
        table_rst, *target_rst = [
            report.rst(t) for t in report.tables_from_markdown(table + "\n" + targets)
        ]
        report.write_docs_fragment(
            "scheduler",
            [
                f"Command: ``{command}``; {env['date']}; Python {env['python']}, Scrapy "
                f"{env['scrapy']}; {env['cpu_count']} CPUs; whole run {elapsed / 60:.1f} min; "
                f"scrapy_twolevel at commit {code.get('commit') or '?'}"
                + (" plus uncommitted changes." if code.get("source") == "worktree" else "."),
                "",
                *[f".. image:: results/{png.name}\n   :width: 100%\n" for png in pngs],
                "Measurements (µs per request; x SPQ / x DAPQ: total CPU relative to the stock "
                "scheduler of the same size and storage):",
                "",
                table_rst,
                "Targets:",
                "",
                *target_rst,
                "Method:",
                "",
                *[f"- {note}" for note in method_notes(cap_s)],
                "",
            ],
        )
    return table + "\n" + targets


def main(argv: list[str] | None = None) -> int:
    parser = report.arg_parser(__doc__, quick="100k pending over 1k hosts only")
    parser.add_argument(
        "--sizes",
        default=None,
        help="comma-separated PENDINGxHOSTS, e.g. 100000x1000,100000x50000 (default: all four)",
    )
    parser.add_argument(
        "--variants", default=None, help=f"comma-separated subset of: {', '.join(VARIANTS)}"
    )
    parser.add_argument(
        "--all-policies",
        action="store_true",
        help="run the extra variants at every size too (default: at 100k pending only)",
    )
    parser.add_argument(
        "--dequeue-cap",
        type=float,
        default=20.0,
        help="stop a dequeue after this many CPU seconds (default 20)",
    )
    report.output_options(parser, code="head", name="scheduler")
    parser.add_argument(
        "--rerender",
        type=Path,
        metavar="JSON",
        help="rewrite the .md and .png from a results .json, without measuring",
    )
    parser.add_argument("--worker", metavar="VARIANT", help=argparse.SUPPRESS)
    parser.add_argument("--profile", metavar="VARIANT", help="cProfile one configuration")
    parser.add_argument("--n", type=int, default=100_000, help="with --profile: pending requests")
    parser.add_argument("--hosts", type=int, default=50_000, help="with --profile: hosts")
    args = parser.parse_args(argv)

    if args.worker:
        print(json.dumps(run_config(args.worker, args.n, args.hosts, args.dequeue_cap)))
        return 0
    if args.profile:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        out = args.out_dir / f"profile_{args.profile}_{args.n}_{args.hosts}.txt"
        profile_config(args.profile, args.n, args.hosts, out)
        return 0

    if args.rerender:
        data = json.loads(args.rerender.read_text(encoding="utf-8"))
        runs = data["runs"]
        sizes = tuple(sorted({(r["n"], r["hosts"]) for r in runs}))
        print(
            write_reports(
                runs,
                sizes,
                data["environment"],
                data["command"],
                data["dequeue_cap_cpu_s"],
                data["elapsed_s"],
                args.rerender.parent,
                args.rerender.stem,
            )
        )
        return 0
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    if args.sizes:
        sizes = tuple(
            (int(n), int(h)) for n, h in (size.split("x") for size in args.sizes.split(","))
        )
    chosen = args.variants.split(",") if args.variants else [*CORE_VARIANTS, *EXTRA_VARIANTS]
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    name = args.name or ("scheduler_quick" if args.quick else "scheduler")
    command = report.command_line(__file__, sys.argv[1:])
    args.out_dir.mkdir(parents=True, exist_ok=True)
    env = environment("scrapy", "twisted", detailed=True, open_files_limit=_open_files_limit())
    snapshot = Snapshot("twolevel-bench-src-", lambda copy: snapshot_package(copy, args.code))
    env["code"] = snapshot.code
    started = time.perf_counter()
    runs: list[dict[str, Any]] = []
    for n, hosts in sizes:
        for key in chosen:
            if key in EXTRA_VARIANTS and n > 100_000 and not args.all_policies:
                continue
            print(f"[{time.perf_counter() - started:7.1f}s] {key} N={n:,} H={hosts:,}", end="")
            print(" ...", end="", flush=True)
            run = run_subprocess(key, n, hosts, args.dequeue_cap, snapshot.dir)
            snapshot.check(run)
            runs.append(run)
            print(_progress(run), flush=True)
    elapsed = time.perf_counter() - started
    snapshot.remove()
    text = write_reports(runs, sizes, env, command, args.dequeue_cap, elapsed, args.out_dir, name)
    return report.finish(text, elapsed, f"{args.out_dir}/{name}*")


if __name__ == "__main__":
    raise SystemExit(main())
