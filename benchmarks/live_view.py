"""What the live view costs: crawler CPU with the dashboard open in a browser, and the size
of a status snapshot at 100,000 hosts.

The question: crawler CPU with the dashboard open in a browser refreshing every 2 s,
against the same crawl without it (at most 3% more), and the size of a status snapshot at
100,000 hosts. Run again for the dashboard for people (its host events, its course of the
crawl every 2 s, its "held up by" list).

1. **CPU.** One test web (``HOSTS`` hosts x ``PAGES`` pages, served by its own process)
   is crawled by ``scrapy crawl testweb`` of ``example_project/`` (``CONCURRENT_REQUESTS``
   16), three ways, interleaved, ``--repeats`` times each:

   - ``no live view``: ``EXTENSIONS = {}`` (the extension is not loaded);
   - ``status line``: the extension, no dashboard (the add-on's default);
   - ``status.json polled``: ``TWOLEVEL_WEB_PORT = 0`` and ``/status.json`` read every 2 s
     by a thread of this script, as the page does but with no browser: the crawler's own
     cost of serving the dashboard, without a browser's load on the machine's other core;
   - ``dashboard open``: ``TWOLEVEL_WEB_PORT = 0`` and Debian's headless Chromium
     (Selenium, chromium-driver) showing the dashboard for the whole crawl, which
     fetches ``/status.json`` every 2 s by itself.

   The crawler's CPU (user + system) comes from ``wait4()``'s rusage of its process: the
   browser's and the server's are not in it. Reported per 1,000 pages, and as the ratio of
   each way's median to the median without the live view.
2. **Size.** A frontier of 100,000 hosts with one URL each (64 open): the time to take one
   snapshot (median of 5), its JSON size and its ``/metrics`` size, with the default 50
   top hosts. The extension serves one snapshot for a second to every reader
   (``REUSE``), so a dashboard refreshing every 2 s costs one snapshot per 2 s.

Usage::

    python benchmarks/live_view.py             # about 5 minutes
    python benchmarks/live_view.py --quick     # one repeat of a smaller web; writes nothing

Writes ``benchmarks/results/live_view.json``, ``benchmarks/results/live_view.md`` and
``docs/results/live_view.inc``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import RESULTS, ROOT, report

PROJECT = ROOT / "example_project"
HOSTS, PAGES = 60, 80
QUICK_HOSTS, QUICK_PAGES = 20, 40
TARGET = 1.03
WAYS = ("no live view", "status line", "status.json polled", "dashboard open")
#: The ways that serve the dashboard (TWOLEVEL_WEB_PORT = 0).
SERVED = ("status.json polled", "dashboard open")
LIVE = "scrapy_twolevel.live.extension.LiveView"


class Poller:
    """Reads ``url`` every 2 s from a thread until stopped; counts the answers."""

    def __init__(self, url: str) -> None:
        import threading

        self.url = url
        self.reads = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        import urllib.request

        while not self.done.wait(2.0):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as reply:
                    reply.read()
                self.reads += 1
            except OSError:
                return  # the crawl has ended

    def stop(self) -> int:
        self.done.set()
        self.thread.join()
        return self.reads


def crawl(server: Any, way: str, workdir: Path) -> dict[str, Any]:
    """One crawl of the served web; its CPU from wait4()."""
    log = workdir / f"{way.replace(' ', '-')}-{time.monotonic_ns()}.log"
    settings: dict[str, Any] = {
        "EXTENSIONS": {} if way == "no live view" else {LIVE: 500},
        "TWOLEVEL_TESTWEB_SEEDS": ",".join(server.seeds),
        "CONCURRENT_REQUESTS": 16,
        "LOG_LEVEL": "INFO",
    }
    if way in SERVED:
        settings["TWOLEVEL_WEB_PORT"] = 0
    cmd = [sys.executable, "-m", "scrapy.cmdline", "crawl", "testweb"]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=PROJECT, stdout=subprocess.DEVNULL, stderr=out, env=env)
    driver = None
    poller = None
    if way in SERVED:
        url = None
        while url is None and proc.poll() is None:
            for line in log.read_text().splitlines():
                if "Live view of this crawl: " in line:
                    url = line.rsplit(" ", 1)[1]
            time.sleep(0.05)  # polling the log for the URL, not a synchronisation
        if url is not None and way == "status.json polled":
            poller = Poller(url.replace("/?", "/status.json?"))
        elif url is not None:
            from scrapy_twolevel.testweb.browser import headless_chromium

            driver = headless_chromium(workdir / f"profile-{time.monotonic_ns()}")
            driver.get(url)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - started
    refreshes = None
    if poller is not None:
        refreshes = poller.stop()
    if driver is not None:
        refreshes = driver.execute_script("return refreshes")
        driver.quit()
    text = log.read_text()
    pages = sum(
        int(line.split("'downloader/response_count': ")[1].split(",")[0])
        for line in text.splitlines()
        if "'downloader/response_count': " in line
    )
    return {
        "way": way,
        "exit": proc.returncode,
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "wall_s": round(wall, 2),
        "pages": pages,
        "dashboard_refreshes": refreshes,
    }


def snapshot_size(hosts: int = 100_000) -> dict[str, Any]:
    from scrapy_twolevel.frontier import CostParams, CrawlCapability, TwoLevelFrontier
    from scrapy_twolevel.live.prometheus import render
    from scrapy_twolevel.live.snapshot import snapshot

    frontier = TwoLevelFrontier(CrawlCapability(), CostParams(), 64)
    for i in range(hosts):
        frontier.push(f"h{i}.example", (i % 997) / 997, f"u{i}")
    for _ in range(64):
        frontier.pop()
    times = []
    for _ in range(5):
        t = time.perf_counter()
        snap = snapshot(frontier, frontier.now(), top=50)
        times.append(time.perf_counter() - t)
    return {
        "hosts": hosts,
        "rows": len(snap["hosts"]),
        "snapshot_s": round(statistics.median(times), 4),
        "json_bytes": len(json.dumps(snap)),
        "metrics_bytes": len(render(snap, max_hosts=50)),
    }


def main() -> int:
    from scrapy_twolevel.testweb.process import ServerProcess
    from scrapy_twolevel.testweb.web import HostProfile, generate_web

    parser = report.arg_parser(__doc__, quick="one repeat of a smaller web; writes nothing")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    hosts, pages = (QUICK_HOSTS, QUICK_PAGES) if args.quick else (HOSTS, PAGES)
    repeats = 1 if args.quick else args.repeats
    clock = report.Clock()
    web = generate_web(
        hosts,
        pages,
        seed=41,
        n_seeds=8,
        links_per_page=6,
        host_profiles=[HostProfile(connect_delay=0.002, response_delay=0.02)] * hosts,
    )
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="twolevel-live-") as tmp:
        workdir = Path(tmp)
        server = ServerProcess(web, workdir)
        try:
            for repeat in range(repeats):
                for way in WAYS:
                    server.reset()
                    run = crawl(server, way, workdir)
                    run["repeat"] = repeat
                    runs.append(run)
                    clock.log(f"{way}: {run}")
                    if run["exit"] != 0:
                        raise SystemExit(f"the crawl failed: {run}")
        finally:
            server.stop()
    size = snapshot_size()
    clock.log(f"snapshot at 100k hosts: {size}")
    median = {way: statistics.median(r["cpu_s"] for r in runs if r["way"] == way) for way in WAYS}
    head = report.columns(
        "way | crawls | pages each | CPU s (median) | CPU s per 1,000 pages | vs no live view "
        "| vs status line | dashboard refreshes | within 3% of both"
    )
    rows = []
    for way in WAYS:
        mine = [r for r in runs if r["way"] == way]
        cpu = median[way]
        refreshes = [r["dashboard_refreshes"] for r in mine if r["dashboard_refreshes"]]
        worst = max(cpu / median["no live view"], cpu / median["status line"])
        rows.append(
            [
                way,
                str(len(mine)),
                str(mine[0]["pages"]),
                f"{cpu:.2f}",
                f"{1000 * cpu / max(mine[0]['pages'], 1):.2f}",
                report.ratio(cpu / median["no live view"]),
                report.ratio(cpu / median["status line"]),
                str(min(refreshes)) if refreshes else "-",
                report.yes_no(worst <= TARGET) if way == "dashboard open" else "-",
            ]
        )
    notes = [
        f"Web: {hosts} hosts x {pages} pages (20 ms per response), CONCURRENT_REQUESTS 16; "
        f"each way {repeats} times, interleaved. Target: at most 3% more crawler CPU with "
        "the dashboard open.",
        f"A snapshot of a frontier of {size['hosts']:,} hosts ({size['rows']} rows shown) "
        f"takes {size['snapshot_s'] * 1000:.0f} ms; its JSON is {size['json_bytes']:,} "
        f"bytes and its /metrics {size['metrics_bytes']:,} bytes. Served once a second to "
        "every reader, a dashboard refreshing every 2 s costs one every 2 s.",
    ]
    table = (head, rows)
    definitions = {
        "CPU s": "user + system seconds of the crawl process (wait4), browser and server excluded",
        "dashboard refreshes": "status.json reads the page (or the poller) made (the fewest "
        "over the crawls)",
    }
    command = report.command_line(__file__, sys.argv[1:])
    sections = [("Crawler CPU, the same crawl three ways", "\n\n".join(notes), [("", table)])]
    if args.quick:
        report.print_sections(sections)
        return 0
    intro = [f"Command: ``{command}``"]
    report.publish("live_view", "What the live view costs", intro, sections, definitions)
    (RESULTS / "live_view.json").write_text(
        report.compact_json(
            {
                "command": command,
                "elapsed_s": round(clock.elapsed(), 1),
                "crawls": runs,
                "snapshot_100k": size,
            }
        ),
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
