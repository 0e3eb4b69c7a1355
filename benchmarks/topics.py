"""Topic priorities: do several topics share the crawl evenly, and is an urgent one fast?

One local test web (served by its own process) of 16 hosts of 40 pages, each host in one
topic: ``news`` (2 fast hosts), ``daily`` (10 fast hosts: most of the links) and
``reference`` (4 slow hosts, 0.15 s per response), every host a seed. Three schedulers
crawl it in the same run, with ``CONCURRENT_REQUESTS = 8``, as real ``scrapy runspider``
processes of ``benchmarks/topic_spider.py``:

- ``stock``: Scrapy's own scheduler (one shared priority queue);
- ``twolevel``: the two-level scheduler without topics;
- ``topics``: the two-level scheduler with ``TWOLEVEL_TOPICS`` (all three in one class,
  slices 4/8/8, a quota on ``daily``), plus an ``urgent`` topic in the class above.

Measured, per 1-second window while every topic still has pages left: the pages of each
topic, and their spread (coefficient of variation across the three topics; lower is more
even); windows in which a topic that still had pages fetched none (starvation). And five
times during the crawl the spider yields one urgent request (highest priority for every
scheduler): the time until it reaches the downloader, against one host session (the mean
pages per session times the slow hosts' response time).

Usage::

    python benchmarks/topics.py          # about 3 minutes; JSON, Markdown, a PNG
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import harness
from harness import BENCH as HERE
from harness import DOCS_RESULTS, RESULTS, ROOT
from harness.report import columns

harness.use_checkout()

from harness.env import environment  # noqa: E402
from harness.report import markdown, rst  # noqa: E402
from scrapy_twolevel.testweb.process import ServerProcess  # noqa: E402
from scrapy_twolevel.testweb.web import HostProfile, generate_web, host_address  # noqa: E402

TOPICS = ("news", "daily", "reference")
SLOW = 0.15
WINDOW = 1.0
TWOLEVEL = {
    "SCHEDULER": "scrapy_twolevel.scheduler.TwoLevelScheduler",
    "DUPEFILTER_CLASS": "scrapy_twolevel.dupefilter.SeenCacheDupeFilter",
    "DOWNLOADER_MIDDLEWARES": {"scrapy_twolevel.middleware.HostMetricsMiddleware": 950},
}
TOPIC_SETTINGS = {
    "urgent": {"priority": 0, "slice": 1},
    "news": {"priority": 1, "slice": 4},
    "daily": {"priority": 1, "slice": 8, "quota": 40, "period": 5},
    "reference": {"priority": 1, "slice": 8},
}
VARIANTS: dict[str, dict[str, Any]] = {
    "stock": {},
    "twolevel": TWOLEVEL,
    "topics": {
        **TWOLEVEL,
        "TWOLEVEL_TOPICS": TOPIC_SETTINGS,
        "SPIDER_MIDDLEWARES": {"scrapy_twolevel.topics.TopicMiddleware": 960},
    },
}


def topic_of_index(i: int) -> str:
    return "news" if i < 2 else "daily" if i < 12 else "reference"


def make_web() -> Any:
    profiles = [
        HostProfile(connect_delay=0.002, response_delay=SLOW if i >= 12 else 0.02)
        for i in range(16)
    ]
    return generate_web(16, 40, seed=3, n_seeds=16, links_per_page=6, host_profiles=profiles)


def run(variant: str, server: ServerProcess, web: Any, workdir: Path) -> dict[str, Any]:
    out = workdir / f"{variant}.json"
    stats_file = workdir / f"{variant}.stats.json"
    reachable = len(web.reachable())
    settings = {
        **VARIANTS[variant],
        "TWOLEVEL_TESTWEB_SEEDS": ",".join(server.seeds),
        "BENCH_TOPIC_OF_HOST": {host_address(i): topic_of_index(i) for i in range(16)},
        "BENCH_INJECT_AT": ",".join(str(reachable * k // 6) for k in range(1, 6)),
        "BENCH_URGENT_URL": f"http://{host_address(0)}:{server.port}/",
        "BENCH_OUTPUT": str(out),
        "EXTENSIONS": {"node_probe.StatsFile": 0},
        "STATS_FILE": str(stats_file),
        "CONCURRENT_REQUESTS": 8,
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
    }
    cmd = [sys.executable, "-m", "scrapy.cmdline", "runspider", str(HERE / "topic_spider.py")]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
    server.reset()
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"{variant} failed:\n{proc.stderr[-3000:]}")
    data = json.loads(out.read_text())
    stats = json.loads(stats_file.read_text())
    return summarise(variant, data, stats, web)


def summarise(variant: str, data: dict[str, Any], stats: dict[str, Any], web: Any) -> dict:
    fetches = data["fetches"]
    start = min(t for t, _ in fetches)
    total = {t: sum(1 for i in range(16) if topic_of_index(i) == t) * 40 for t in TOPICS}
    times = {t: sorted(s - start for s, topic in fetches if topic == t) for t in TOPICS}
    end_of = {t: (times[t][-1] if times[t] else 0.0) for t in TOPICS}
    windows = int(min(end_of.values()) // WINDOW)  # every topic still has pages left
    per_window = {
        t: [sum(1 for s in times[t] if w * WINDOW <= s < (w + 1) * WINDOW) for w in range(windows)]
        for t in TOPICS
    }
    cvs = []
    for w in range(windows):
        counts = [per_window[t][w] for t in TOPICS]
        mean = statistics.fmean(counts)
        cvs.append(statistics.pstdev(counts) / mean if mean else 0.0)
    starved = {
        t: sum(
            1
            for w in range(int(end_of[t] // WINDOW))
            if not any(w * WINDOW <= s < (w + 1) * WINDOW for s in times[t])
        )
        for t in TOPICS
    }
    sessions = stats.get("twolevel/sessions") or 0
    per_session = stats.get("twolevel/session_requests", 0) / sessions if sessions else None
    latencies = data["urgent_latencies"]
    curve_step = 0.5
    horizon = max(end_of.values())
    curve = {
        t: [
            sum(1 for s in times[t] if s <= k * curve_step) / total[t]
            for k in range(int(horizon / curve_step) + 2)
        ]
        for t in TOPICS
    }
    return {
        "variant": variant,
        "pages": len(fetches),
        "duration_s": horizon,
        "topic_done_at_s": end_of,
        "windows_all_topics": windows,
        "spread_cv": statistics.fmean(cvs) if cvs else None,
        "pages_per_window": {
            t: statistics.fmean(per_window[t]) if windows else None for t in TOPICS
        },
        "starved_windows": starved,
        "urgent_latency_median_s": statistics.median(latencies) if latencies else None,
        "urgent_latency_max_s": max(latencies) if latencies else None,
        "urgent_lost": data["urgent_lost"],
        "session_bound_s": per_session * SLOW if per_session else None,
        "preemptions": {
            t: stats.get(f"twolevel/topic/{t}/preemptions") for t in (*TOPICS, "urgent")
        },
        "quota_met_daily": stats.get("twolevel/topic/daily/quota_met"),
        "curve_step_s": curve_step,
        "curve": curve,
    }


def table(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    def f(x: Any, digits: int = 2) -> str:
        return "-" if x is None else f"{x:.{digits}f}"

    head = columns(
        "scheduler | pages/s news/daily/reference (all topics running) | spread (CV) | "
        "windows starved | topic done at (s) news/daily/reference | "
        "urgent latency median/max (s) | one session (s)"
    )
    body = []
    for r in rows:
        body.append(
            [
                r["variant"],
                "/".join(f(r["pages_per_window"][t], 1) for t in TOPICS),
                f(r["spread_cv"]),
                "/".join(str(r["starved_windows"][t]) for t in TOPICS),
                "/".join(f(r["topic_done_at_s"][t], 1) for t in TOPICS),
                f"{f(r['urgent_latency_median_s'], 3)}/{f(r['urgent_latency_max_s'], 3)}",
                f(r["session_bound_s"]),
            ]
        )
    return head, body


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rows), figsize=(4 * len(rows), 3.6), sharey=True)
    colors = {"news": "#d62728", "daily": "#1f77b4", "reference": "#2ca02c"}
    for ax, r in zip(axes, rows, strict=True):
        for t in TOPICS:
            ys = r["curve"][t]
            ax.plot([k * r["curve_step_s"] for k in range(len(ys))], ys, color=colors[t], label=t)
        ax.set(title=r["variant"], xlabel="seconds")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("share of the topic's pages fetched")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", default="/tmp/twolevel-bench-topics")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    web = make_web()
    rows = []
    with ServerProcess(web, workdir) as server:
        for variant in VARIANTS:
            row = run(variant, server, web, workdir)
            print(
                f"{variant:>9}: spread {row['spread_cv']:.2f}, starved {row['starved_windows']}, "
                f"urgent median {row['urgent_latency_median_s']}",
                flush=True,
            )
            rows.append(row)
    head, body = table(rows)
    md = markdown((head, body))
    print(md)
    command = "python benchmarks/topics.py"
    data = {
        "command": command,
        "environment": environment("numpy"),
        "topics": TOPIC_SETTINGS,
        "rows": rows,
    }
    (RESULTS / "topics.json").write_text(json.dumps(data, indent=1))
    (RESULTS / "topics.md").write_text(f"Regenerated with `{command}`.\n\n{md}")
    (DOCS_RESULTS / "topics.inc").write_text(rst((head, body)))
    plot(rows, DOCS_RESULTS / "topics.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
