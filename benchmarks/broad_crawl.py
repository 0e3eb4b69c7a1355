"""Broad crawls at scale: Scrapy's default scheduler and ours, 1,000 to 100,000 hosts.

Real crawls (a ``scrapy crawl`` in a process of its own, :mod:`broadweb.crawl`) of a fast
generated web on loopback (:mod:`broadweb.web`, :mod:`broadweb.server`: every host
``h<i>.broad.test`` on one port of 127.0.0.1, Zipf host sizes, pages of ~4 KB with 15
links of which 30% go to other hosts, each response held ``--latency`` s), for a fixed
window after a pre-loaded frontier of P pending URLs over H hosts, in the same run for:

- **ours**: ``ADDONS = {"scrapy_twolevel.Addon": 0}`` (``TwoLevelScheduler``, its seen
  cache dupefilter, the host metrics middleware) with ``JOBDIR``;
- **stock**: Scrapy's defaults (``scrapy.core.scheduler.Scheduler``,
  ``DownloaderAwarePriorityQueue``, ``RFPDupeFilter``) with ``JOBDIR``. Its disk queues
  keep files open per host, so past some thousands of hosts it runs out of descriptors
  (the crawl's limit is the machine's ``ulimit -n``): that is recorded as a failure with
  its reason, and then
- **stock, memory**: the same without ``JOBDIR``, at that size only, as the issue's table did.

Both: ``CONCURRENT_REQUESTS = 64``, ``CONCURRENT_REQUESTS_PER_DOMAIN = 1``,
``DOWNLOAD_DELAY = 0``, ``ROBOTSTXT_OBEY = False``, ``LOG_LEVEL = "INFO"``,
``TELNETCONSOLE_ENABLED = False``, names resolved by a wildcard resolver
(``TWISTED_DNS_RESOLVER``; ``DNSCACHE_SIZE`` at least the hosts), the same spider: its
``start()`` yields the P URLs, host-interleaved, as a plain seed list (no pacing); ``parse``
yields a request per link (one regular expression).

Measured per run (the driver samples ``/proc/<pid>`` and the server's counters once a
second; every time is wall time on this machine):

- **start-up**: process start to the first request at the server;
- **load**: from ``start()``'s first request to its last yielded; pages/s during it, and
  the longest run of empty 5-s bins (bins from the load's start) in seconds;
- **steady pages/s**: pages the server answered from the first sample after the load
  ended until ``--window`` seconds later, per second. A load still running after
  ``--max-load`` s starts the window anyway (the row says "load capped");
- **CPU ms/page**: the crawler's ``utime + stime`` over the steady window / its pages;
- **peak RSS**: ``VmHWM`` at the end of the window; **JOBDIR**: bytes allocated under it
  then;
- **max in flight per host**: the most requests the server held at once for one host over
  the whole run (politeness: 1 means never two), and requests that overlapped another;
- **resume** (ours): after the window the crawl is killed (``SIGKILL``) and started again
  on the same ``JOBDIR`` with the same command: the time from the process start to the
  first request at the server, and pages/s over the next ``RESUME_RATE_S`` seconds. What
  was lost: every pre-loaded URL must be either served before the kill or among the
  ``JOBDIR``'s rows after it (leased rows included); the rows are also compared with
  ``scheduler/enqueued - scheduler/dequeued`` at the last sample before the kill;
- with ``--profile``: ``py-spy record --native`` (``--profile-rate`` Hz) over the load and
  over the window: the share of samples in the garbage collector (native ``gc_collect_*``
  frames), in the scheduler's code (``scrapy_twolevel``, or Scrapy's scheduler, queues and
  dupefilter for stock, and what they call, but not the spider's own code that the
  package's spider middlewares iterate) and the rest. py-spy takes a core too: rates are
  lower when profiled;
- with ``--set BROADWEB_CENSUS=SECONDS`` (ours): every SECONDS the crawler writes a
  ``census`` mark to its marks file (kept with ``--keep``): the objects the collector
  tracks, by type, its collections per generation and the seconds they took since the
  spider opened (``gc.callbacks``), and the process's CPU seconds.

Sizes (``--sizes HOSTSxPENDING,...``): 1,000 x 100k, 10,000 x 300k, 100,000 x 1M by
default (the issue's table); ``--sizes 100000x10000000`` for 10M (its load alone takes
many minutes). Two cores: the crawler, the server and py-spy share them, so figures move
with other load on the machine; the ratios within one run are what to compare.

Usage::

    python benchmarks/broad_crawl.py --profile    # the default matrix, ~15 min
    python benchmarks/broad_crawl.py --quick      # 1,000 hosts x 20k, 15-s window, ~1 min
    python benchmarks/broad_crawl.py --rerender benchmarks/results/broad_crawl.json

Writes ``benchmarks/results/broad_crawl.{json,md}``, ``docs/results/broad_crawl.inc`` and
``docs/results/broad_crawl.png`` (``--quick`` prints and writes nothing).
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broadweb.measure import (
    WORK_KINDS,
    Profile,
    WebServer,
    classify,
    dir_bytes,
    jobdir_rows,
    proc_sample,
)
from broadweb.web import CROSS_HOST_SHARE, LINKS_PER_PAGE, PAGES_PER_START, ZIPF_S, BroadWeb
from harness import DOCS_RESULTS, RESULTS, report
from harness.crawl import Snapshot, pythonpath, snapshot_package
from harness.env import environment

HERE = Path(__file__).resolve().parent
NAME = "broad_crawl"
DEFAULT_SIZES = ((1_000, 100_000), (10_000, 300_000), (100_000, 1_000_000))
QUICK_SIZES = ((1_000, 20_000),)
SEED = 0
TICK_S = 1.0
BIN_S = 5  # bins of the load's longest gap
RESUME_RATE_S = 10.0  # resume: pages/s over this long after the first request
STARTUP_TIMEOUT_S = 300.0  # no first request by then: a failure
FATAL = ("Too many open files", "Error while processing requests from start()")

VARIANTS = ("ours", "stock", "stock-memory")
LABELS = {
    "ours": "ours (JOBDIR)",
    "stock": "stock (JOBDIR)",
    "stock-memory": "stock, memory (no JOBDIR)",
}

DEFINITIONS = {
    "steady pages/s": "pages the server answered from the first sample after start() "
    "yielded its last request, over the window that follows, per second",
    "load pages/s": "pages answered while start() was yielding the pre-loaded frontier, "
    "per second of it",
    "load gap s": f"the longest run of {BIN_S}-s bins (from the load's start) with no page "
    "answered during the load, in seconds",
    "CPU ms/page": "the crawler's utime + stime over the steady window / pages in it",
    "peak RSS": "VmHWM of the crawler at the end of the window",
    "JOBDIR MB": "bytes allocated under JOBDIR at the end of the window",
    "start-up s": "process start to the first request at the server",
    "resume s": "ours, killed with SIGKILL after the window and started again on the same "
    "JOBDIR with the same command: process start to the first request at the server",
    "max in flight/host": "the most requests the server held at once for one host (1: "
    "never two at a host)",
    "CPU per page by kind of work": "with --profile: the window's CPU ms per page times the "
    "share of py-spy samples doing each (broadweb/measure.py WORK_KINDS, the first that "
    "matches: the collector, the scheduler's code as for its share, opening a connection, "
    "the spider's callback, the HTTP/1.1 download handler, Scrapy's middlewares, its "
    "engine, scraper and signals; other: the event loop and the rest); connections "
    "opened and pages answered over the whole crawl, from the server",
    "GC / scheduler share": "with --profile: py-spy samples over the window in the cyclic "
    "garbage collector / in the scheduler's code (scrapy_twolevel for ours; Scrapy's "
    "scheduler, priority and disk queues and dupefilter for stock; with what they call, "
    "but not the spider's callback or start() that the package's spider middlewares "
    "iterate), GC counted first",
}


def base_settings(hosts: int) -> dict[str, Any]:
    return {
        "CONCURRENT_REQUESTS": 64,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": 0,
        "ROBOTSTXT_OBEY": False,
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "DNSCACHE_SIZE": max(10_000, 2 * hosts),
    }


def variant_settings(variant: str, hosts: int, jobdir: Path) -> dict[str, Any]:
    settings = base_settings(hosts)
    if variant != "stock-memory":
        settings["JOBDIR"] = str(jobdir)
    if variant == "ours":
        settings["ADDONS"] = {"scrapy_twolevel.Addon": 0}
    return settings


# -- one crawl -------------------------------------------------------------------------------


@dataclass
class Crawl:
    """One crawler process, sampled once a second until it is stopped."""

    label: str
    workdir: Path
    config: Path
    snapshot: Path | None
    launched: float = 0.0
    proc: subprocess.Popen[bytes] | None = None
    ticks: list[dict[str, Any]] = field(default_factory=list)
    events: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``start_progress`` marks, in order.
    progress: list[dict[str, Any]] = field(default_factory=list)
    last_stats: dict[str, Any] = field(default_factory=dict)
    failure: str | None = None
    errors: list[str] = field(default_factory=list)
    _marks_at: int = 0
    _log_at: int = 0

    @property
    def marks(self) -> Path:
        return self.workdir / f"{self.label}.marks.jsonl"

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.label}.log"

    def launch(self) -> None:
        self.marks.unlink(missing_ok=True)
        with open(self.log, "ab") as log:
            self.launched = time.time()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "broadweb.crawl", str(self.config)],
                stdout=subprocess.DEVNULL,
                stderr=log,
                # Not the checkout as the current directory: ``-m`` puts it first on
                # sys.path, before the snapshot.
                cwd=self.workdir,
                env=pythonpath(self.snapshot, HERE),
            )

    def sample(self, server: WebServer) -> dict[str, Any] | None:
        """One tick: /proc, the server's totals, new marks and log lines; None if it died."""
        assert self.proc is not None
        proc = proc_sample(self.proc.pid)
        if proc is None or self.proc.poll() is not None:
            return None
        tick = {"t": time.time(), **proc, **server.json("/__count")}
        self.ticks.append(tick)
        self._read_marks()
        self._read_log()
        return tick

    def _read_marks(self) -> None:
        if not self.marks.exists():
            return
        with open(self.marks, "rb") as f:
            f.seek(self._marks_at)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._marks_at += end
        for line in data[:end].splitlines():
            event = json.loads(line)
            if event["event"] == "tick":
                self.last_stats = event
            elif event["event"] == "start_progress":
                self.progress.append(event)
            else:
                self.events.setdefault(event["event"], event)

    def _read_log(self) -> None:
        with open(self.log, "rb") as f:
            f.seek(self._log_at)
            data = f.read()
        self._log_at += len(data)
        for line in data.decode(errors="replace").splitlines():
            if " ERROR: " in line or "Error" in line[:40]:
                if len(self.errors) < 20:
                    self.errors.append(line.strip()[:300])
            if self.failure is None and any(f in line for f in FATAL):
                self.failure = line.strip()[:300]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()


def wait_tick(crawl: Crawl) -> None:
    """Sleep until the next whole tick since the launch."""
    elapsed = time.time() - crawl.launched
    time.sleep(max(0.0, TICK_S * (int(elapsed / TICK_S) + 1) - elapsed))


def pages_at(ticks: list[dict[str, Any]], t: float) -> float:
    """Pages answered by wall time ``t``, interpolated between samples."""
    before = [k for k in ticks if k["t"] <= t]
    after = [k for k in ticks if k["t"] > t]
    if not before:
        return 0.0
    if not after:
        return float(before[-1]["pages"])
    a, b = before[-1], after[0]
    return a["pages"] + (b["pages"] - a["pages"]) * (t - a["t"]) / (b["t"] - a["t"])


def load_figures(crawl: Crawl) -> dict[str, Any]:
    """Pages/s during the load and its longest gap (5-s and 1-s bins)."""
    begun = crawl.events.get("start_begun", {}).get("t")
    done = crawl.events.get("start_done", {}).get("t")
    if begun is None:
        return {}
    end = done if done is not None else crawl.ticks[-1]["t"]
    span = max(end - begun, 1e-9)
    pages = pages_at(crawl.ticks, end)
    inside = [k for k in crawl.ticks if begun <= k["t"] <= end]
    steps = [b["pages"] - a["pages"] for a, b in itertools.pairwise(inside)]

    def longest_gap(width: int) -> float:
        """Consecutive empty bins of ``width`` samples, in seconds (a last, partial bin
        counts for the samples it has)."""
        best = run = 0
        for i in range(0, len(steps), width):
            chunk = steps[i : i + width]
            run = run + len(chunk) if sum(chunk) == 0 else 0
            best = max(best, run)
        return best * TICK_S

    return {
        "load_s": span,
        "load_finished": done is not None,
        "load_pages": pages,
        "load_pages_per_s": pages / span,
        "load_gap_s": longest_gap(BIN_S),
        "load_gap_1s_bins_s": longest_gap(1),
    }


def failure_reason(crawl: Crawl, last: dict[str, Any]) -> str:
    """The failure in a line: out of descriptors says so, with how far the crawl got."""
    time.sleep(1.0)  # the exception's own lines follow the engine's
    crawl._read_log()
    text = crawl.log.read_text(errors="replace")
    enqueued = crawl.last_stats.get("scheduler/enqueued")
    if "Too many open files" in text:
        return (
            f"out of file descriptors (EMFILE; limit {open_files_limit():,}) after "
            f"{fmt(enqueued, ',')} requests enqueued, {fmt(last.get('fds'), ',')} open"
        )
    return str(crawl.failure)


def run_crawl(
    label: str,
    settings: dict[str, Any],
    web: BroadWeb,
    server: WebServer,
    workdir: Path,
    snapshot: Snapshot | None,
    args: argparse.Namespace,
    *,
    resume: bool = False,
) -> tuple[Crawl, dict[str, Any]]:
    """One crawl from its launch to the end of its window (or, ``resume``, its first
    ``--resume-window`` seconds of pages); the process is left running."""
    config = workdir / f"{label}.json"
    web_args = {"hosts": web.hosts, "pending": web.pending, "seed": web.seed}
    marks = str(workdir / f"{label}.marks.jsonl")
    config.write_text(
        json.dumps({"settings": settings, "web": web_args, "port": server.port, "marks": marks})
    )
    server.get("/__reset")
    crawl = Crawl(label, workdir, config, snapshot.dir if snapshot else None)
    crawl.launch()
    ours = "ADDONS" in settings
    profiles: dict[str, Any] = {}
    profiler: Profile | None = None
    window_from: dict[str, Any] | None = None
    result: dict[str, Any] = {}
    while True:
        wait_tick(crawl)
        tick = crawl.sample(server)
        if tick is None:
            crawl.failure = crawl.failure or f"crawler exited ({crawl.proc and crawl.proc.poll()})"
            break
        if crawl.failure:
            break
        now, first = tick["t"], tick["first_at"]
        if first is None:
            if now - crawl.launched > STARTUP_TIMEOUT_S:
                crawl.failure = f"no request at the server after {STARTUP_TIMEOUT_S:.0f} s"
                break
            continue
        if resume:
            if now - first >= args.resume_window:
                break
            continue
        begun = crawl.events.get("start_begun")
        if args.profile and begun and profiler is None and not profiles:
            profiler = Profile(crawl.proc.pid, workdir / f"{label}.load.txt", args.profile_rate)
        if window_from is None:
            done = "start_done" in crawl.events
            capped = begun is not None and now - begun["t"] > args.max_load
            if done or capped:
                window_from = tick
                result["load_capped"] = capped and not done
                if profiler is not None:
                    profiles["load"] = profiler.stop(ours)
                    profiler = None
                if args.profile:
                    profiler = Profile(
                        crawl.proc.pid, workdir / f"{label}.window.txt", args.profile_rate
                    )
        elif now - window_from["t"] >= args.window - TICK_S / 2:
            break
    last = crawl.ticks[-1] if crawl.ticks else {}
    if crawl.failure:
        crawl.failure = failure_reason(crawl, last)
    jobdir = settings.get("JOBDIR")
    if jobdir and crawl.failure is None:
        result["jobdir_bytes"] = dir_bytes(Path(jobdir))
    if profiler is not None:
        profiles["window" if window_from else "load"] = profiler.stop(ours)
    stats = server.json("/__stats")
    result.update(
        {
            "label": label,
            "settings": settings,
            "failure": crawl.failure,
            "errors": crawl.errors,
            "startup_s": (stats["first_at"] - crawl.launched) if stats["first_at"] else None,
            "peak_rss_bytes": last.get("hwm"),
            "max_fds": max((k["fds"] for k in crawl.ticks), default=None),
            "max_in_flight_per_host": stats["max_in_flight"],
            "overlapping_requests": stats["overlapping"],
            "hosts_with_overlap": stats["hosts_with_overlap"],
            "refetched": stats["refetched"],
            "not_found": stats["not_found"],
            "hosts_requested": stats["hosts_requested"],
            "connections_opened": stats["connections_opened"],
            "max_open_connections": stats["max_open_connections"],
            "pages_total": stats["pages"],
            "last_stats": {k: v for k, v in crawl.last_stats.items() if k != "event"},
            "profile": profiles,
        }
    )
    if resume:
        first = stats["first_at"]
        if first is not None:
            got = pages_at(crawl.ticks, first + args.resume_window)
            result["resume_pages_per_s"] = got / args.resume_window
        # Where the time to the first request went: the process and the scheduler's
        # open (to spider_opened), then start() yielding the seed list again (each one
        # filtered as seen).
        for name, event in (("opened_s", "opened"), ("start_done_s", "start_done")):
            if event in crawl.events:
                result[name] = crawl.events[event]["t"] - crawl.launched
        return crawl, result
    result.update(load_figures(crawl))
    if window_from is not None and crawl.failure is None:
        a, b = window_from, last
        pages = b["pages"] - a["pages"]
        span = b["t"] - a["t"]
        result.update(
            {
                "window_s": span,
                "window_pages": pages,
                "steady_pages_per_s": pages / span if span > 0 else None,
                "cpu_ms_per_page": 1000 * (b["cpu_s"] - a["cpu_s"]) / pages if pages else None,
                "cpu_share_of_core": (b["cpu_s"] - a["cpu_s"]) / span if span > 0 else None,
                "rss_at_end_bytes": b["rss"],
            }
        )
    result["series"] = {
        "t": [round(k["t"] - crawl.launched, 2) for k in crawl.ticks],
        "pages": [k["pages"] for k in crawl.ticks],
        "cpu_s": [round(k["cpu_s"], 2) for k in crawl.ticks],
        "rss_mb": [round(k["rss"] / 2**20, 1) for k in crawl.ticks],
    }
    return crawl, result


def start_read(crawl: Crawl, killed_at: float) -> int | None:
    """How many start requests the scheduler surely had before the kill: all of them if
    ``start()`` ended, else the last progress mark at least ``COMMITTED_AFTER`` seconds
    before the kill (the JOBDIR commits within a second: what came later may be in no
    commit, and a resumed crawl reads it from ``start()`` again); ``None``: none."""
    done = crawl.events.get("start_done")
    if done is not None and done["t"] <= killed_at - COMMITTED_AFTER:
        return int(done["yielded"])
    marks = [m for m in crawl.progress if m["t"] <= killed_at - COMMITTED_AFTER]
    return int(marks[-1]["yielded"]) if marks else None


#: Seconds after which a queued request is surely in a JOBDIR commit (the package's
#: ``TWOLEVEL_COMMIT_INTERVAL`` is 1 s).
COMMITTED_AFTER = 3.0


def check_resume(
    web: BroadWeb, jobdir: Path, fetched: bytes, before: dict[str, Any], read: int | None
) -> dict[str, Any]:
    """What the kill left: JOBDIR rows, and pre-loaded URLs neither served nor queued,
    among the first ``read`` of ``start()`` (what the scheduler surely had: see
    :func:`start_read`)."""
    import numpy as np

    rows = jobdir_rows(jobdir, web.offsets)
    if rows is None:
        return {"error": "no twolevel/frontier.sqlite3 in JOBDIR"}
    covered = np.frombuffer(fetched, dtype=np.uint8).astype(bool)
    covered[np.asarray(rows["positions"], dtype=np.int64)] = True
    lost = 0
    if read is None:
        read = 0
    for checked, (host, page) in enumerate(web.start_pages()):
        if checked >= read:
            break
        lost += not covered[web.offsets[host] + page]
    enqueued, dequeued = before.get("scheduler/enqueued"), before.get("scheduler/dequeued")
    return {
        "jobdir_rows": rows["rows"],
        "jobdir_leased_rows": rows["leased"],
        "pending_at_last_sample": (enqueued - dequeued) if enqueued is not None else None,
        "preloaded_checked": read,
        "preloaded_lost": lost,
    }


def run_size(
    hosts: int,
    pending: int,
    variants: list[str],
    args: argparse.Namespace,
    snapshot: Snapshot | None,
    clock: report.Clock,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    web = BroadWeb(hosts, pending, SEED)
    size = {"hosts": hosts, "pending": pending, "web_pages": web.pages}
    args.workdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"broad-{hosts}-", dir=args.workdir))
    server = WebServer(
        workdir, {"hosts": hosts, "pending": pending, "seed": SEED}, args.latency, args.idle_timeout
    )
    runs: list[dict[str, Any]] = []
    try:
        stock_failed = False
        for variant in variants:
            if variant == "stock-memory" and not stock_failed and not args.stock_memory:
                continue
            jobdir = workdir / f"{variant}.jobdir"
            settings = variant_settings(variant, hosts, jobdir)
            if variant == "ours":
                settings.update(args.ours_settings)
            clock.log(f"{hosts:,} hosts x {pending:,}: {LABELS[variant]} ...")
            crawl, result = run_crawl(variant, settings, web, server, workdir, snapshot, args)
            result.update(size, variant=variant)
            if snapshot is not None and "opened" in crawl.events:
                snapshot.check(crawl.events["opened"])
            if variant == "stock" and result["failure"]:
                stock_failed = True
            if variant == "ours" and not result["failure"] and not args.no_resume:
                crawl.kill()  # before reading the map: nothing is served after it
                killed_at = time.time()
                fetched = server.get("/__fetched", timeout=120)
                before = crawl.last_stats
                read = start_read(crawl, killed_at)
                result["resume_check"] = check_resume(web, jobdir, fetched, before, read)
                again, resumed = run_crawl(
                    "ours-resume",
                    {**settings, **args.resume_settings},
                    web,
                    server,
                    workdir,
                    snapshot,
                    args,
                    resume=True,
                )
                again.kill()
                result["resume"] = {
                    k: resumed.get(k)
                    for k in (
                        "startup_s",
                        "opened_s",
                        "start_done_s",
                        "resume_pages_per_s",
                        "failure",
                        "refetched",
                        "max_in_flight_per_host",
                        "errors",
                    )
                }
            crawl.kill()
            runs.append(result)
            clock.log("  " + progress(result))
            shutil.rmtree(jobdir, ignore_errors=True)
    finally:
        size.update(server.stop())
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return runs, size


def progress(run: dict[str, Any]) -> str:
    if run["failure"]:
        return f"FAILED: {run['failure']}"
    bits = [
        f"steady {fmt(run.get('steady_pages_per_s'), '.0f')} pages/s",
        f"load {fmt(run.get('load_s'), '.0f')} s at {fmt(run.get('load_pages_per_s'), '.0f')}/s",
        f"CPU {fmt(run.get('cpu_ms_per_page'), '.2f')} ms/page",
        f"peak RSS {fmt(mb(run.get('peak_rss_bytes')), '.0f')} MB",
        f"max in flight/host {run['max_in_flight_per_host']}",
    ]
    if "resume" in run:
        bits.append(f"resume {fmt(run['resume'].get('startup_s'), '.1f')} s")
        bits.append(f"lost {run['resume_check'].get('preloaded_lost')}")
    return ", ".join(bits)


# -- the report ------------------------------------------------------------------------------


def fmt(value: Any, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def mb(value: float | None) -> float | None:
    return None if value is None else value / 2**20


def share(run: dict[str, Any], kind: str) -> str:
    shares = run.get("profile", {}).get("window", {}).get("shares")
    return "-" if not shares else f"{100 * shares[kind]:.0f}%"


def notes(run: dict[str, Any]) -> str:
    if run["failure"]:
        return f"**failed**: {run['failure'][-160:]}"
    out = []
    if run.get("load_capped"):
        out.append("load capped")
    if run.get("errors"):
        out.append(f"{len(run['errors'])} error lines")
    check = run.get("resume_check")
    if check:
        lost, checked = check.get("preloaded_lost"), check.get("preloaded_checked")
        of = "" if checked is None else f" of the {checked:,} pre-loaded it had read"
        out.append(f"lost after kill: {lost}{of}")
    return "; ".join(out)


def main_table(runs: list[dict[str, Any]]) -> report.Table:
    head = report.columns(
        "scheduler | hosts | pending | steady pages/s | load pages/s | load s | load gap s "
        "| CPU ms/page | peak RSS MB | JOBDIR MB | start-up s | resume s | resume pages/s "
        "| max in flight/host | GC share | scheduler share | notes"
    )
    rows = []
    for r in runs:
        resume = r.get("resume", {})
        failed = bool(r["failure"])
        rows.append(
            [
                LABELS[r["variant"]],
                f"{r['hosts']:,}",
                f"{r['pending']:,}",
                "-" if failed else fmt(r.get("steady_pages_per_s"), ".0f"),
                fmt(r.get("load_pages_per_s"), ".0f"),
                fmt(r.get("load_s"), ".0f"),
                fmt(r.get("load_gap_s"), ".0f"),
                "-" if failed else fmt(r.get("cpu_ms_per_page"), ".2f"),
                fmt(mb(r.get("peak_rss_bytes")), ".0f"),
                fmt(mb(r.get("jobdir_bytes")), ".0f"),
                fmt(r.get("startup_s"), ".1f"),
                fmt(resume.get("startup_s"), ".1f"),
                fmt(resume.get("resume_pages_per_s"), ".0f"),
                str(r["max_in_flight_per_host"]),
                share(r, "gc"),
                share(r, "scheduler"),
                notes(r),
            ]
        )
    return head, rows


def _find(runs: list[dict[str, Any]], variant: str, hosts: int) -> dict[str, Any] | None:
    for r in runs:
        if r["variant"] == variant and r["hosts"] == hosts and not r["failure"]:
            return r
    return None


METRICS = (
    ("steady pages/s", "steady_pages_per_s"),
    ("CPU ms/page", "cpu_ms_per_page"),
    ("peak RSS", "peak_rss_bytes"),
    ("load s", "load_s"),
)


def ratios(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Ours / stock at each size (stock with JOBDIR if it ran, else in memory), and ours at
    the most hosts / ours at the fewest."""
    out: dict[str, Any] = {"vs_stock": [], "scaling": None}
    for hosts in sorted({r["hosts"] for r in runs}):
        ours = _find(runs, "ours", hosts)
        stock = _find(runs, "stock", hosts) or _find(runs, "stock-memory", hosts)
        if ours and stock:
            out["vs_stock"].append(
                {
                    "hosts": hosts,
                    "stock": stock["variant"],
                    **{key: _ratio(ours.get(key), stock.get(key)) for _, key in METRICS},
                }
            )
    mine = sorted(
        (r for r in runs if r["variant"] == "ours" and not r["failure"]), key=lambda r: r["hosts"]
    )
    if len(mine) >= 2:
        low, high = mine[0], mine[-1]
        out["scaling"] = {
            "hosts": [low["hosts"], high["hosts"]],
            **{key: _ratio(high.get(key), low.get(key)) for _, key in METRICS},
        }
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def ratio_tables(found: dict[str, Any]) -> list[tuple[str, report.Table]]:
    head = ["hosts", "stock run", *[name for name, _ in METRICS]]
    rows = [
        [
            f"{r['hosts']:,}",
            LABELS[r["stock"]],
            *[report.ratio(r[key]) if r[key] is not None else "-" for _, key in METRICS],
        ]
        for r in found["vs_stock"]
    ]
    tables = [("Ours / stock, same size, same run", (head, rows))]
    scaling = found["scaling"]
    if scaling:
        low, high = scaling["hosts"]
        row = [
            f"{high:,} / {low:,}",
            *[
                report.ratio(scaling[key]) if scaling[key] is not None else "-"
                for _, key in METRICS
            ],
        ]
        tables.append(
            (
                f"Ours at {high:,} hosts / ours at {low:,}",
                (["hosts", *[n for n, _ in METRICS]], [row]),
            )
        )
    return tables


def profile_table(runs: list[dict[str, Any]]) -> report.Table | None:
    rows = []
    for r in runs:
        for phase in ("load", "window"):
            p = r.get("profile", {}).get(phase)
            if not p or not p.get("samples"):
                continue
            s = p["shares"]
            top = "; ".join(f"{name} {100 * v:.0f}%" for name, v in p["top"][:3])
            rows.append(
                [
                    LABELS[r["variant"]],
                    f"{r['hosts']:,}",
                    phase,
                    f"{p['samples']:,}",
                    f"{100 * s['gc']:.0f}%",
                    f"{100 * s['scheduler']:.0f}%",
                    f"{100 * s['rest']:.0f}%",
                    top,
                ]
            )
    if not rows:
        return None
    head = report.columns(
        "scheduler | hosts | phase | samples | GC | scheduler | rest | top frames"
    )
    return head, rows


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (
        ("steady pages/s", lambda r: r.get("steady_pages_per_s")),
        ("crawler CPU ms per page", lambda r: r.get("cpu_ms_per_page")),
        ("peak RSS, MB", lambda r: mb(r.get("peak_rss_bytes"))),
    )
    styles = {
        "ours": ("tab:green", "o"),
        "stock": ("tab:blue", "s"),
        "stock-memory": ("tab:orange", "^"),
    }
    sizes = sorted({(r["hosts"], r["pending"]) for r in runs})
    pending = " / ".join(f"{p / 1000:,.0f}k" for _, p in sizes)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for ax, (title, value) in zip(axes, panels, strict=True):
        for variant in VARIANTS:
            mine = sorted((r for r in runs if r["variant"] == variant), key=lambda r: r["hosts"])
            ok = [(r["hosts"], value(r)) for r in mine if not r["failure"] and value(r)]
            color, marker = styles[variant]
            if ok:
                ax.plot(*zip(*ok, strict=True), marker=marker, color=color, label=LABELS[variant])
            for r in mine:
                if r["failure"]:
                    ax.axvline(r["hosts"], color=color, linestyle=":", alpha=0.6)
                    ax.annotate(
                        f"{LABELS[variant]}: failed",
                        (r["hosts"], 0.02),
                        xycoords=("data", "axes fraction"),
                        rotation=90,
                        fontsize=7,
                        color=color,
                        ha="right",
                    )
        ax.set_xscale("log")
        ax.set_xlabel(f"hosts (log); pre-loaded {pending}")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.set_ylim(bottom=0)
    axes[0].legend(fontsize=8)
    fig.suptitle(
        "Broad crawls: pre-loaded frontier, 64 connections, 1 per host (same run)", fontsize=11
    )
    report.save_figure(fig, path)


#: A window at least this long also gets a figure over time (RSS and pages/s by minute).
LONG_WINDOW_S = 600


def plot_over_time(runs: list[dict[str, Any]], path: Path) -> None:
    """RSS and pages/s (per minute) against the time since the crawler started: whether
    memory levels off and the rate holds over a long window."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rss_ax, rate_ax) = plt.subplots(1, 2, figsize=(13, 4.2))
    for r in runs:
        series = r.get("series") or {}
        t, pages, rss = series.get("t") or [], series.get("pages") or [], series.get("rss_mb")
        if not t:
            continue
        label = f"{LABELS[r['variant']]}, {r['hosts']:,} hosts, {r['pending']:,} pre-loaded"
        rss_ax.plot([x / 60 for x in t], rss, label=label)
        minutes, rates, i = [], [], 0
        for j, x in enumerate(t):
            if x - t[i] >= 60:
                minutes.append(x / 60)
                rates.append((pages[j] - pages[i]) / (x - t[i]))
                i = j
        rate_ax.plot(minutes, rates, label=label)
        if r.get("load_s"):
            for ax in (rss_ax, rate_ax):
                ax.axvline((t[-1] - r.get("window_s", 0)) / 60, color="grey", linestyle=":")
    rss_ax.set_title("crawler RSS, MB (dotted: the window starts)", fontsize=10)
    rate_ax.set_title("pages/s, per minute", fontsize=10)
    for ax in (rss_ax, rate_ax):
        ax.set_xlabel("minutes since the crawler started")
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    rss_ax.legend(fontsize=8)
    report.save_figure(fig, path)


def record(
    runs: list[dict[str, Any]],
    sizes: list[dict[str, Any]],
    env: dict[str, Any],
    command: str,
    elapsed: float,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Everything the run measured, as the results JSON holds it."""
    return {
        "command": command,
        "environment": env,
        "elapsed_s": elapsed,
        "parameters": {
            "window_s": args.window,
            "max_load_s": args.max_load,
            "latency_s": args.latency,
            "idle_timeout_s": args.idle_timeout,
            "seed": SEED,
            "profile_rate": args.profile_rate if args.profile else None,
            "web": f"broadweb.web: Zipf s = {ZIPF_S}, {LINKS_PER_PAGE} links per page, "
            f"{CROSS_HOST_SHARE:.0%} to other hosts, host size {PAGES_PER_START} x "
            "(pre-loaded pages + 1)",
        },
        "definitions": DEFINITIONS,
        "sizes": sizes,
        "runs": runs,
    }


def resume_table(runs: list[dict[str, Any]]) -> report.Table:
    head = report.columns(
        "scheduler | hosts | load s | no page, 1-s samples | resume: scheduler open s "
        "| seed list re-read s | first request s | pages/s | JOBDIR rows (leased) "
        "| pending at last sample | pre-loaded URLs lost"
    )
    rows = []
    for r in runs:
        if r["failure"]:
            continue
        resume, check = r.get("resume", {}), r.get("resume_check", {})
        rows.append(
            [
                LABELS[r["variant"]],
                f"{r['hosts']:,}",
                fmt(r.get("load_s"), ".0f"),
                fmt(r.get("load_gap_1s_bins_s"), ".0f"),
                fmt(resume.get("opened_s"), ".1f"),
                fmt(resume.get("start_done_s"), ".1f"),
                fmt(resume.get("startup_s"), ".1f"),
                fmt(resume.get("resume_pages_per_s"), ".0f"),
                f"{check['jobdir_rows']:,} ({check['jobdir_leased_rows']})" if check else "-",
                fmt(check.get("pending_at_last_sample"), ","),
                fmt(check.get("preloaded_lost"), ","),
            ]
        )
    return head, rows


#: A long window is also reported in this many equal slices.
SLICES = 4


def slice_table(runs: list[dict[str, Any]]) -> report.Table:
    """Pages/s and CPU per page in each quarter of the window: whether the rate right after
    the pre-load (what a short window measures) is the crawl's rate later on."""
    head = report.columns(
        "scheduler | hosts | "
        + " | ".join(f"window {i + 1}/{SLICES}: pages/s, CPU ms/page" for i in range(SLICES))
    )
    rows = []
    for r in runs:
        series, span = r.get("series") or {}, r.get("window_s")
        t, pages, cpu = series.get("t") or [], series.get("pages") or [], series.get("cpu_s")
        if r["failure"] or not t or not span or not cpu:
            continue
        end = t[-1]
        bounds = [end - span + span * i / SLICES for i in range(SLICES + 1)]
        marks = [min(range(len(t)), key=lambda k, b=b: abs(t[k] - b)) for b in bounds]
        cells = []
        for i, j in itertools.pairwise(marks):
            got = pages[j] - pages[i]
            rate = got / (t[j] - t[i]) if t[j] > t[i] else None
            ms = 1000 * (cpu[j] - cpu[i]) / got if got else None
            cells.append(f"{fmt(rate, '.0f')}, {fmt(ms, '.2f')}")
        rows.append([LABELS[r["variant"]], f"{r['hosts']:,}", *cells])
    return head, rows


def reclassify(runs: list[dict[str, Any]], workdir: Path) -> None:
    """Classify each run's kept profiles (``WORKDIR/broad-<hosts>-*/<label>.<phase>.txt``)
    again, in place."""
    for r in runs:
        for phase in r.get("profile") or {}:
            found = sorted(workdir.glob(f"broad-{r['hosts']}-*/{r['label']}.{phase}.txt"))
            if found:
                r["profile"][phase] = classify(found[0], r["variant"] == "ours")


def work_table(runs: list[dict[str, Any]]) -> report.Table | None:
    """CPU ms per page in the window by what the crawler was doing (py-spy's shares of
    ``classify``'s ``work`` times the run's CPU per page)."""
    kinds = ["gc", "scheduler", *(kind for kind, _ in WORK_KINDS), "other"]
    rows = []
    for r in runs:
        work = r.get("profile", {}).get("window", {}).get("work")
        per_page = r.get("cpu_ms_per_page")
        if not work or not per_page:
            continue
        rows.append(
            [
                LABELS[r["variant"]],
                f"{r['hosts']:,}",
                f"{per_page:.2f}",
                *(f"{per_page * work.get(k, 0.0):.2f}" for k in kinds),
                fmt(r.get("connections_opened"), ","),
                fmt(r.get("pages_total"), ","),
            ]
        )
    if not rows:
        return None
    head = report.columns(
        "scheduler | hosts | CPU ms/page | "
        + " | ".join(kinds)
        + " | connections opened | pages answered"
    )
    return head, rows


def write(data: dict[str, Any], out_dir: Path, name: str, *, figure: bool = True) -> str:
    """The results JSON, its Markdown, the docs fragment and the figure (for the canonical
    run; another ``--out-dir`` or ``--name`` keeps its figure beside its JSON; none
    without ``figure``)."""
    runs, env, params = data["runs"], data["environment"], data["parameters"]
    data["ratios"] = found = ratios(runs)
    code = env.get("code", {})
    servers = ", ".join(f"{s['server_cpu_s']:.1f}" for s in data["sizes"])
    intro = [
        f"Command: ``{data['command']}``; {env['date']}; Python {env['python']}, Scrapy "
        f"{env['scrapy']}, Twisted {env['twisted']}; {env['cpu_count']} CPUs, "
        f"{env['memory_gib']} GiB, open-files limit {env['open_files_limit']:,}; "
        f"scrapy_twolevel at commit {str(code.get('commit'))[:10]}; whole run "
        f"{data['elapsed_s'] / 60:.1f} min. Two cores shared by the crawler, the server"
        + (", py-spy" if params["profile_rate"] else "")
        + " and whatever else ran: compare the ratios within this run.",
        f"Web: {params['web']}; the server holds each response {1000 * params['latency_s']:g} "
        f"ms and used {servers} CPU s at each size in all (the crawler uses about one core "
        f"throughout). Window {params['window_s']:g} s after the pre-load.",
    ]
    sections: list[report.Section] = [
        ("Runs", "", [("", main_table(runs))]),
        ("Ratios", "", ratio_tables(found)),
        ("Pre-load and resume", "", [("", resume_table(runs))]),
    ]
    profiles = profile_table(runs)
    if profiles:
        sections.append(("Where the crawler's time goes (py-spy)", "", [("", profiles)]))
    work = work_table(runs)
    if work:
        sections.append(("CPU per page by kind of work (window, py-spy)", "", [("", work)]))
    committed = out_dir.resolve() == RESULTS.resolve()
    canonical = committed and name == NAME
    png = (DOCS_RESULTS if canonical else out_dir) / f"{name}.png"
    if canonical:
        sections.append(("Against the number of hosts", png.name, []))
    over_time = (DOCS_RESULTS if committed else out_dir) / f"{name}_over_time.png"
    if params["window_s"] >= LONG_WINDOW_S:
        sections.append(("Over time", over_time.name, [("", slice_table(runs))]))
    md, inc = report.render(
        "Broad crawls: stock Scrapy and the two-level scheduler, 1,000 to 100,000 hosts",
        intro,
        sections,
        DEFINITIONS,
    )
    report.print_sections(sections)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(report.compact_json(data) + "\n", encoding="utf-8")
    (out_dir / f"{name}.md").write_text("\n".join(md), encoding="utf-8")
    if canonical:
        report.write_docs_fragment(name, inc)
    if figure:
        if len({r["hosts"] for r in runs}) > 1:
            plot(runs, png)
        if params["window_s"] >= LONG_WINDOW_S:
            plot_over_time(runs, over_time)
    return report.markdown(main_table(runs))


def _setting(text: str) -> tuple[str, Any]:
    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name, json.loads(raw)
    except ValueError:
        return name, raw


def estimate_min(sizes: list[tuple[int, int]], args: argparse.Namespace) -> float:
    """A rough wall-time estimate from runs on this 2-core machine: a load at ~8,000 URLs/s,
    the window, a resume re-reading the seed list at ~14,000/s; stock with JOBDIR failing
    within ~15 s from 10,000 hosts on, then stock in memory."""
    total = 0.0
    for hosts, pending in sizes:
        crawl = 5 + min(pending / 8000, args.max_load) + args.window
        total += crawl  # ours
        if not args.no_resume:
            total += 15 + pending / 14000
        fails = hosts >= 10_000
        total += 15 if fails else crawl  # stock
        if fails or args.stock_memory:
            total += crawl
    return total / 60


def open_files_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def main(argv: list[str] | None = None) -> int:
    parser = report.arg_parser(
        __doc__, quick="1,000 hosts x 20,000 pending, 15-s window; prints, writes nothing"
    )
    parser.add_argument(
        "--sizes",
        default=None,
        help="comma-separated HOSTSxPENDING (default "
        + ",".join(f"{h}x{p}" for h, p in DEFAULT_SIZES)
        + ")",
    )
    parser.add_argument(
        "--variants",
        default="ours,stock,stock-memory",
        help="comma-separated subset of " + ", ".join(VARIANTS),
    )
    parser.add_argument("--window", type=float, default=60.0, help="steady window, s")
    parser.add_argument(
        "--resume-window",
        type=float,
        default=RESUME_RATE_S,
        help=f"resume: pages/s over this long after its first request ({RESUME_RATE_S:g} s)",
    )
    parser.add_argument(
        "--set",
        dest="ours_settings",
        action="append",
        default=[],
        type=_setting,
        metavar="NAME=VALUE",
        help="a setting for ours' crawls (VALUE as JSON if it parses), e.g. TWOLEVEL_START_SHARE=1",
    )
    parser.add_argument(
        "--resume-set",
        dest="resume_settings",
        action="append",
        default=[],
        type=_setting,
        metavar="NAME=VALUE",
        help="a setting for ours' resumed crawl only, over --set's (e.g. a pre-load read "
        "unpaced with TWOLEVEL_START_SHARE=1, resumed as a user would, with the default)",
    )
    parser.add_argument(
        "--no-figure", action="store_true", help="write no PNG (no matplotlib needed)"
    )
    parser.add_argument(
        "--max-load",
        type=float,
        default=300.0,
        help="start the window after this long even if start() has not finished, s (default 300)",
    )
    parser.add_argument(
        "--latency",
        type=float,
        default=0.02,
        help="the server holds each response this long, s (default 0.02)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=5.0,
        help="the server closes keep-alive connections idle this long, s",
    )
    parser.add_argument(
        "--stock-memory",
        action="store_true",
        help="run stock without JOBDIR at every size, not only after a failure",
    )
    parser.add_argument("--no-resume", action="store_true", help="skip the kill-and-resume")
    parser.add_argument(
        "--profile", action="store_true", help="py-spy over the load and the window of every run"
    )
    parser.add_argument("--profile-rate", type=int, default=20, help="py-spy samples/s")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(tempfile.gettempdir()),
        help="where JOBDIRs and logs go (removed unless --keep)",
    )
    parser.add_argument("--keep", action="store_true", help="keep JOBDIRs, logs and profiles")
    report.output_options(parser, code="head", name=NAME)
    parser.add_argument(
        "--reclassify",
        type=Path,
        metavar="WORKDIR",
        help="with --rerender: classify the py-spy profiles kept in WORKDIR (a --keep "
        "run's) again, as this script now does",
    )
    parser.add_argument(
        "--rerender",
        type=Path,
        metavar="JSON",
        help="rewrite the report, docs fragment and figure from a results JSON, no crawl",
    )
    args = parser.parse_args(argv)
    args.ours_settings = dict(args.ours_settings)
    args.resume_settings = dict(args.resume_settings)
    if args.rerender:
        data = json.loads(args.rerender.read_text(encoding="utf-8"))
        if args.reclassify:
            reclassify(data["runs"], args.reclassify)
        print(write(data, args.rerender.parent, args.rerender.stem))
        return 0

    sizes = list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    if args.quick:
        args.window = 15.0
    if args.sizes:
        sizes = [(int(h), int(p)) for h, p in (s.split("x") for s in args.sizes.split(","))]
    variants = [v for v in args.variants.split(",") if v]
    if unknown := [v for v in variants if v not in VARIANTS]:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    if "stock-memory" in variants and "stock" not in variants:
        args.stock_memory = True
    command = report.command_line(__file__, sys.argv[1:] if argv is None else argv)
    clock = report.Clock()
    clock.log(
        f"sizes {', '.join(f'{h:,} hosts x {p:,}' for h, p in sizes)}; window "
        f"{args.window:g} s; estimate ~{estimate_min(sizes, args):.0f} min"
    )
    env = environment("scrapy", "twisted", detailed=True, open_files_limit=open_files_limit())
    snapshot = Snapshot("twolevel-broad-src-", lambda copy: snapshot_package(copy, args.code))
    env["code"] = snapshot.code
    runs: list[dict[str, Any]] = []
    size_info: list[dict[str, Any]] = []
    try:
        for hosts, pending in sizes:
            got, info = run_size(hosts, pending, variants, args, snapshot, clock)
            runs += got
            size_info.append(info)
    finally:
        snapshot.remove()
    elapsed = clock.elapsed()
    if args.quick:
        print()
        report.print_sections(
            [("Runs", "", [("", main_table(runs))]), ("Ratios", "", ratio_tables(ratios(runs)))]
        )
        print(f"Whole run: {elapsed / 60:.1f} min")
        return 0
    data = record(runs, size_info, env, command, elapsed, args)
    text = write(data, args.out_dir, args.name or NAME, figure=not args.no_figure)
    return report.finish(text, elapsed, f"{args.out_dir}/{args.name or NAME}*")


if __name__ == "__main__":
    raise SystemExit(main())
