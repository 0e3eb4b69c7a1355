"""A host that goes down for 5 minutes mid-crawl, on the real clock, under the defaults.

Issue 20's target: such a host loses no page under the defaults. The crawl tests show it
with the delays scaled down (a 2-s outage, back-offs of a fraction of a second); this
study runs it at full size, so the default back-off (``TWOLEVEL_BACKOFF`` 30 s doubling
to ``TWOLEVEL_BACKOFF_MAX`` 600 s) and ``TWOLEVEL_GIVE_UP_AFTER`` (3600 s) are what is
tested, with Scrapy's own defaults for everything else (RetryMiddleware on, 180-s timeout).

- **Web.** ``generate_web(3, 30, seed=7)``; host 0 answers in 0.3 s and resets every
  connection from 3 s after its first request for 300 s (the test web's outage); hosts 1
  and 2 answer in 10 ms.
- **Crawls.** The add-on with its defaults, and stock Scrapy for context.
- **Judged** from the server's log: pages of ``reachable()`` never served (lost), pages
  served twice, when host 0 served its first page after the outage, and whether it was
  given up.

Usage::

    python benchmarks/outage.py          # about 10 minutes

Writes ``benchmarks/results/outage.json``, ``benchmarks/results/outage.md`` and
``docs/results/outage.inc``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hostile_hosts as hh
import reporting
from harness import RESULTS, report
from scrapy_twolevel.testweb import HostProfile, WebSpec, generate_web

OUTAGE_START, OUTAGE_LENGTH = 3.0, 300.0
VARIANTS = ("crawl-capability", hh.STOCK)
CRAWL_TIMEOUT = 3600


def web() -> WebSpec:
    steady = HostProfile(connect_delay=0.002, response_delay=0.01, max_requests_per_connection=50)
    down = HostProfile(
        connect_delay=0.002,
        response_delay=0.3,
        max_requests_per_connection=50,
        outage_start=OUTAGE_START,
        outage_length=OUTAGE_LENGTH,
    )
    return generate_web(3, 30, seed=7, host_profiles=[down, steady, steady])


def settings(variant: str) -> dict[str, Any]:
    if variant == hh.STOCK:
        return {}
    return {"ADDONS": {"scrapy_twolevel.Addon": 0}, "TWOLEVEL_POLICY": variant}


def judge(result: Any, spec: WebSpec) -> dict[str, Any]:
    server = result.server
    start = server.first_request_at or 0.0
    served = [e.time for e in server.events if e.host == 0 and e.status == 200]
    # The outage is timed from host 0's first request; its first answer came 0.3 s later.
    outage_end = min(served, default=start) + OUTAGE_START + OUTAGE_LENGTH
    after = [t for t in served if t >= outage_end]
    counts = server.fetch_counts()
    stats = result.crawl_stats
    return {
        "total_s": stats.get("elapsed_time_seconds"),
        "lost": sorted(spec.reachable() - set(counts)),
        "refetches": sum(counts.values()) - len(counts),
        "host0_pages_before_outage": len(served) - len(after),
        "host0_pages_after_outage": len(after),
        "host0_back_at_s": round(min(after) - outage_end, 1) if after else None,
        "host0_requests_reset": server.hosts[0].requests_aborted,
        "hosts_given_up": stats.get("twolevel/hosts_given_up", 0),
        "retry/max_reached": stats.get("retry/max_reached", 0),
        "max_in_flight_per_host": max(
            server.max_concurrent_requests_per_host().values(), default=0
        ),
    }


def main() -> int:
    report.arg_parser(__doc__).parse_args()
    spec = web()
    started = time.monotonic()
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "web.json"
        path.write_text(spec.to_json())
        for variant in VARIANTS:
            result = hh.crawl(Path(tmp), path, settings(variant), CRAWL_TIMEOUT)
            runs[variant] = {"error": result} if isinstance(result, str) else judge(result, spec)
            print(variant, runs[variant], flush=True)
    elapsed = time.monotonic() - started
    head = report.columns(
        "variant | total s | pages lost | refetched | host 0 pages before / after the "
        "outage | first page after the outage ended, s | requests reset | "
        "given up | max in flight at a host | no page lost"
    )
    rows = []
    for variant, r in runs.items():
        if "error" in r:
            rows.append([variant, r["error"]] + [""] * 8)
            continue
        rows.append(
            [
                variant,
                f"{r['total_s']:.0f}",
                str(len(r["lost"])),
                str(r["refetches"]),
                f"{r['host0_pages_before_outage']} / {r['host0_pages_after_outage']}",
                hh._s(r["host0_back_at_s"]),
                str(r["host0_requests_reset"]),
                str(r["hosts_given_up"]),
                str(r["max_in_flight_per_host"]),
                ("context only: " if variant == hh.STOCK else "") + report.yes_no(not r["lost"]),
            ]
        )
    data = {
        "command": report.command_line(__file__, sys.argv[1:]),
        "environment": reporting.environment(),
        "outage": {"start_s": OUTAGE_START, "length_s": OUTAGE_LENGTH},
        "runs": runs,
        "run_time_s": round(elapsed, 1),
    }
    (RESULTS / "outage.json").write_text(report.compact_json(data) + "\n")
    report.publish(
        "outage",
        "A host down for 5 minutes",
        [
            f"Command: ``{data['command']}``; {data['environment']['date']}; the whole run "
            f"took {elapsed / 60:.0f} minutes.",
            "Web: ``generate_web(3, 30, seed=7)``; host 0 (30 pages, 0.3 s each) resets "
            f"every connection from {OUTAGE_START:g} s after its first request for "
            f"{OUTAGE_LENGTH:g} s. Every setting at its default (Scrapy's and the add-on's).",
        ],
        [("The crawl", "", [("", (head, rows))])],
        {"lost": "pages of the web's reachable() set the server never served"},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
