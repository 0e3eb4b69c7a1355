"""What a few hosts that accept connections and never answer cost a whole crawl.

The acceptance criterion measured here: on the local test web, with a few such hosts
present, a crawl's total time and its time to 80% of the quality must stay within 1.3x of
the same web without them, under every policy.

- **Webs.** ``generate_web(30, 20, seed=1)`` with the default random host profiles (the
  *normal* web), and the same call with ``failures={i: "hang"}`` for three hosts (the
  *hostile* web): a ``"hang"`` host accepts TCP connections, reads the requests and never
  answers. The three hosts are picked by :func:`pick_hang_hosts`: going through the
  hosts in index order, skipping seed hosts, it keeps a host when the hostile web's
  ``reachable()`` is still exactly the normal web's reachable set minus the hang hosts'
  pages, i.e. no working host is reached only through a hang host. With seed 1 the first
  three hosts (0, 1, 2) pass; the script checks this again at every run and stops if it
  does not hold. So every page the hostile crawl can fetch is one the normal crawl fetches
  too, and the normal crawl fetches the hang hosts' pages besides (they work there).
- **Variants.** The four policies, each with ``ADDONS = {"scrapy_twolevel.Addon": 0}``,
  ``TWOLEVEL_POLICY = <policy>``, ``CONCURRENT_REQUESTS = 8``; and stock Scrapy for context
  (its default scheduler, ``CONCURRENT_REQUESTS = 8``, default ``CONCURRENT_REQUESTS_PER_DOMAIN
  = 8``).
- **Failure settings, scaled to the crawl.** ``DOWNLOAD_TIMEOUT = 1`` (all variants),
  ``TWOLEVEL_BACKOFF = 0.5``, ``TWOLEVEL_BACKOFF_MAX = 2``; ``TWOLEVEL_SESSION_FAILURES``
  and ``TWOLEVEL_FAILED_SESSIONS`` (2 and 3) and Scrapy's ``RETRY_TIMES`` (2) stay at their
  defaults. The defaults (180 s, 30 s, 600 s) suit crawls of hours; this crawl lasts
  seconds, and a 180 s timeout alone would be twenty of them.
- **Runs.** Each crawl is its own process, ``python -m scrapy_twolevel.testweb crawl``
  (server and crawler on one reactor, real loopback sockets). Each variant crawls the
  normal and the hostile web ``--repeats`` times (default 3); the two crawls of a pair run
  back to back, in alternating order, so machine noise hits both alike.
- **Metrics.** Total time: Scrapy's ``elapsed_time_seconds`` (start to finish, what a user
  waits). t80: seconds from the server's first request until the served quality reaches
  80% of the quality of the hostile web's ``reachable()`` set, the same total for both
  webs, counting only pages of that set (so the normal crawl gets no credit for the pages
  the hostile web cannot serve). Also pages fetched, whether each crawl fetched every page
  of its own web's ``reachable()``, the hostile crawls' failure stats and what the hang
  hosts' server saw. Ratios are hostile / normal per pair: median, min and max.

Usage::

    python benchmarks/hostile_hosts.py              # 3 repeats, about 5 minutes
    python benchmarks/hostile_hosts.py --quick      # 15 hosts x 10 pages, 1 repeat; writes nothing

Writes ``benchmarks/results/hostile_hosts.json`` (every setting and per-run number),
``benchmarks/results/hostile_hosts.md``, ``docs/results/hostile_hosts.inc`` and
``docs/results/hostile_hosts.png``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import reporting
from harness import report
from harness.crawl import crawl_test_web
from scrapy_twolevel.config import DEFAULTS
from scrapy_twolevel.testweb import WebSpec, generate_web
from scrapy_twolevel.testweb.spider import CrawlResult

POLICIES = ("breadth-first", "performance-first", "quality-first", "crawl-capability")
STOCK = "stock Scrapy"
VARIANTS = (*POLICIES, STOCK)
COLORS = {**reporting.COLORS, STOCK: reporting.COLORS["scrapy-dapq"]}
TARGET = 1.3
QUALITY_FRACTION = 0.8
CRAWL_TIMEOUT = 120  # seconds; a crawl of this web takes 5-15 s, so this one never finished

FULL = {"n_hosts": 30, "pages_per_host": 20, "seed": 1, "n_hang": 3, "repeats": 3}
QUICK = {"n_hosts": 15, "pages_per_host": 10, "seed": 1, "n_hang": 3, "repeats": 1}

CONCURRENCY = {"CONCURRENT_REQUESTS": 8}
#: The failure settings, scaled down from the defaults (see the module docstring).
TIMEOUTS = {"DOWNLOAD_TIMEOUT": 1}
TWOLEVEL_FAILURES = {"TWOLEVEL_BACKOFF": 0.5, "TWOLEVEL_BACKOFF_MAX": 2}

HERE = Path(__file__).resolve().parent
#: Instrumentation added to every crawl (both webs, every variant): see :class:`WatchHosts`.
WATCH_SETTING = "HOSTILE_HOSTS_WATCH"
WATCH_STAT = "hostile_hosts"


def variant_settings(variant: str) -> dict[str, Any]:
    """The settings one crawl of ``variant`` runs with (the same on both webs)."""
    if variant == STOCK:
        return {**CONCURRENCY, **TIMEOUTS}
    return {
        "ADDONS": {"scrapy_twolevel.Addon": 0},
        "TWOLEVEL_POLICY": variant,
        **CONCURRENCY,
        **TIMEOUTS,
        **TWOLEVEL_FAILURES,
    }


def pick_hang_hosts(n_hosts: int, pages_per_host: int, seed: int, count: int) -> list[int]:
    """The first ``count`` non-seed hosts, in index order, whose hanging hides no other page.

    A host is kept when, with it and the hosts kept before it hanging, ``reachable()`` is
    the normal web's reachable set minus the hanging hosts' pages.
    """
    normal = generate_web(n_hosts, pages_per_host, seed=seed)
    seed_hosts = {normal.pages[p].host for p in normal.seeds}
    chosen: list[int] = []
    for host in range(n_hosts):
        if host in seed_hosts:
            continue
        if same_fetchable_pages(
            normal, hostile_web(n_hosts, pages_per_host, seed, [*chosen, host])
        ):
            chosen.append(host)
            if len(chosen) == count:
                return chosen
    raise SystemExit(f"no {count} hang hosts keep the rest of web seed={seed} reachable")


def hostile_web(n_hosts: int, pages_per_host: int, seed: int, hang: list[int]) -> WebSpec:
    return generate_web(n_hosts, pages_per_host, seed=seed, failures=dict.fromkeys(hang, "hang"))


def hang_pages(web: WebSpec) -> set[int]:
    return {p.id for p in web.pages if not web.hosts[p.host].fetchable}


def same_fetchable_pages(normal: WebSpec, hostile: WebSpec) -> bool:
    return hostile.reachable() == normal.reachable() - hang_pages(hostile)


# -- one crawl ---------------------------------------------------------------------------------


class WatchHosts:
    """Crawl extension: when requests for the watched hosts reached the downloader.

    Loaded inside each crawl's process from this file (the crawl runs with ``benchmarks/``
    on ``PYTHONPATH``). It writes ``time.monotonic()`` readings, the clock the test web's
    server stamps its events with in that same process, to the crawl's stats as
    ``hostile_hosts/first_request/<address>`` and ``hostile_hosts/last_request/<address>``,
    so a hang host's activity can be placed on the crawl's timeline although the server
    never answers it. One dict lookup per request.
    """

    def __init__(self, stats: Any, addresses: set[str]) -> None:
        self.stats = stats
        self.addresses = addresses

    @classmethod
    def from_crawler(cls, crawler: Any) -> WatchHosts:
        from scrapy import signals

        ext = cls(crawler.stats, set(crawler.settings.getlist(WATCH_SETTING)))
        crawler.signals.connect(
            ext.request_reached_downloader, signal=signals.request_reached_downloader
        )
        return ext

    def request_reached_downloader(self, request: Any, **kwargs: Any) -> None:
        host = urlsplit(request.url).hostname
        if host in self.addresses:
            now = time.monotonic()
            first = f"{WATCH_STAT}/first_request/{host}"
            if self.stats.get_value(first) is None:
                self.stats.set_value(first, now)
            self.stats.set_value(f"{WATCH_STAT}/last_request/{host}", now)


def watch_settings(addresses: list[str]) -> dict[str, Any]:
    return {"EXTENSIONS": {"hostile_hosts.WatchHosts": 0}, WATCH_SETTING: addresses}


def crawl(
    workdir: Path,
    web_file: Path,
    settings: dict[str, Any],
    timeout: float = CRAWL_TIMEOUT,
    delay_scale: float = 1.0,
) -> CrawlResult | str:
    """One crawl in its own process: its result, or why there is none."""
    out = workdir / "result.json"
    try:
        proc = crawl_test_web(web_file, out, settings, timeout, delay_scale)
    except subprocess.TimeoutExpired:
        return f"did not finish within {timeout} s (killed)"
    if proc.returncode != 0:
        return f"exit status {proc.returncode}: {proc.stderr[-500:]}"
    return CrawlResult.from_dict(json.loads(out.read_text()))


def measure(
    result: CrawlResult, web: WebSpec, common: set[int], quality_total: float, hang: list[int]
) -> dict[str, Any]:
    """The per-run numbers (and the quality curve) of one crawl."""
    server = result.server
    start = server.first_request_at or 0.0
    served: set[int] = set()
    curve: list[tuple[float, float]] = [(0.0, 0.0)]
    quality = 0.0
    t80 = None
    last_page_at = 0.0
    for e in server.events:
        # A page counts when served: 200, or 301 for a redirecting page (its only answer).
        if e.method != "GET" or e.status not in (200, 301) or e.page_id is None:
            continue
        t = e.time - start
        last_page_at = max(last_page_at, t)
        if e.page_id in served:
            continue
        served.add(e.page_id)
        if e.page_id not in common:
            continue
        quality += web.pages[e.page_id].quality
        curve.append((round(t, 4), round(quality / quality_total, 5)))
        if t80 is None and quality >= QUALITY_FRACTION * quality_total * (1 - 1e-12):
            t80 = t
    stats = result.crawl_stats
    reachable = web.reachable()
    missing = sorted(reachable - served)
    counts = server.fetch_counts()
    run = {
        "total_s": stats.get("elapsed_time_seconds"),
        "t80_s": t80,
        "last_page_at_s": round(last_page_at, 4),
        "pages_fetched": len(served),
        "reachable_pages": len(reachable),
        "complete": not missing,
        "missing_pages": missing,
        "refetches": sum(counts.values()) - len(counts),
        "finish_reason": stats.get("finish_reason"),
        "twolevel/hosts_given_up": stats.get("twolevel/hosts_given_up", 0),
        "twolevel/dropped/host_failed": stats.get("twolevel/dropped/host_failed", 0),
        "twolevel/metrics/failures": stats.get("twolevel/metrics/failures", 0),
        "retry/count": stats.get("retry/count", 0),
        "retry/max_reached": stats.get("retry/max_reached", 0),
        "downloader/exception_count": stats.get("downloader/exception_count", 0),
        "hang_hosts_connections_total": sum(server.hosts[h].connections_total for h in hang),
        "hang_hosts_requests_total": sum(server.hosts[h].requests_total for h in hang),
        "hang_hosts_requests_aborted": sum(server.hosts[h].requests_aborted for h in hang),
        "max_concurrent_requests_per_host": max(
            server.max_concurrent_requests_per_host().values(), default=0
        ),
        "curve": curve,
    }
    if run["total_s"] is not None:
        run["tail_s"] = round(run["total_s"] - last_page_at, 4)
    firsts, lasts = [], []
    for h in hang:
        address = web.hosts[h].address
        first = stats.get(f"{WATCH_STAT}/first_request/{address}")
        if first is not None:
            firsts.append(round(first - start, 4))
            lasts.append(round(stats[f"{WATCH_STAT}/last_request/{address}"] - start, 4))
    run["hang_first_request_s"] = firsts
    if firsts:
        run["hang_earliest_first_request_s"] = min(firsts)
        run["hang_latest_first_request_s"] = max(firsts)
        run["hang_last_request_s"] = max(lasts)
    return run


# -- summaries ---------------------------------------------------------------------------------


def pair_ratios(pairs: list[dict[str, Any]], key: str) -> list[float]:
    """hostile / normal of ``key`` for each pair in which both crawls are complete."""
    out = []
    for p in pairs:
        n, h = p["normal"], p["hostile"]
        if n.get("complete") and h.get("complete") and n.get(key) and h.get(key) is not None:
            out.append(h[key] / n[key])
    return out


def median_of(pairs: list[dict[str, Any]], web: str, key: str) -> float | None:
    values = [p[web][key] for p in pairs if p[web].get("complete") and p[web].get(key) is not None]
    return statistics.median(values) if values else None


def summarize(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "complete_pairs": sum(
            1 for p in pairs if p["normal"].get("complete") and p["hostile"].get("complete")
        ),
        "pairs": len(pairs),
    }
    for key in ("total_s", "t80_s"):
        ratios = pair_ratios(pairs, key)
        out[key] = {
            "normal_median": median_of(pairs, "normal", key),
            "hostile_median": median_of(pairs, "hostile", key),
            "ratios": [round(r, 4) for r in ratios],
            "ratio_median": statistics.median(ratios) if ratios else None,
            "ratio_min": min(ratios, default=None),
            "ratio_max": max(ratios, default=None),
        }
    for key in (
        "last_page_at_s",
        "tail_s",
        "hang_earliest_first_request_s",
        "hang_latest_first_request_s",
        "hang_last_request_s",
    ):
        out[key] = {web: median_of(pairs, web, key) for web in ("normal", "hostile")}
    total = out["total_s"]["ratio_median"]
    t80 = out["t80_s"]["ratio_median"]
    out["target_met"] = (
        None if total is None or t80 is None else (total <= TARGET and t80 <= TARGET)
    )
    out["incomplete_runs"] = [
        f"repeat {i + 1}, {web} web"
        for i, p in enumerate(pairs)
        for web in p["order"]
        if not p[web].get("complete")
    ]
    # Complete pairs in which the total-time or the t80 ratio is over the target.
    out["pairs_over"] = sum(
        1
        for p in pairs
        if any(r > TARGET for key in ("total_s", "t80_s") for r in pair_ratios([p], key))
    )
    # The pair drawn in the figure: the one with the median total-time ratio.
    ratios = [(pair_ratios([p], "total_s") or [None])[0] for p in pairs]
    measured = sorted((r, i) for i, r in enumerate(ratios) if r is not None)
    out["plotted_repeat"] = measured[(len(measured) - 1) // 2][1] if measured else 0
    return out


def _s(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _signed(x: float) -> str:
    return f"{round(x, 1) or 0.0:+.1f}"  # no "-0.0"


def _ratio(r: dict[str, Any]) -> str:
    if r["ratio_median"] is None:
        return "n/a"
    if len(r["ratios"]) == 1:
        return f"{r['ratio_median']:.2f}"
    return f"{r['ratio_median']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})"


def _verdict(variant: str, s: dict[str, Any]) -> str:
    if s["target_met"] is None:
        return "not measured (no complete pair)"
    over = [
        name
        for name, key in (("total", "total_s"), ("t80", "t80_s"))
        if s[key]["ratio_median"] > TARGET
    ]
    single = s["pairs_over"]
    if variant == STOCK:
        word = "within" if not over else f"over on {', '.join(over)}"
        return f"context only ({word})"
    if over:
        return f"**not met** ({', '.join(over)})"
    if single:
        return f"met on the median ({single} of {s['complete_pairs']} repeats over)"
    return "met"


def main_table(summary: dict[str, dict[str, Any]]) -> reporting.Table:
    head = report.columns(
        "variant | total s, normal | total s, hostile | total ratio | t80 s, normal | "
        f"t80 s, hostile | t80 ratio | {TARGET}x target | complete pairs"
    )
    rows = []
    for variant, s in summary.items():
        rows.append(
            [
                variant,
                _s(s["total_s"]["normal_median"]),
                _s(s["total_s"]["hostile_median"]),
                _ratio(s["total_s"]),
                _s(s["t80_s"]["normal_median"]),
                _s(s["t80_s"]["hostile_median"]),
                _ratio(s["t80_s"]),
                _verdict(variant, s),
                f"{s['complete_pairs']}/{s['pairs']}",
            ]
        )
    return head, rows


def phase_table(summary: dict[str, dict[str, Any]], cycle: float) -> reporting.Table:
    head = report.columns(
        "variant | last page at s, normal | last page at s, hostile | "
        "after the last page s, normal | after the last page s, hostile | "
        "hang hosts first requested at s (first-last host) | "
        f"last hang host's first request + {cycle:g} s | last request to a hang host at s"
    )
    rows = []
    for variant, s in summary.items():
        latest = s["hang_latest_first_request_s"]["hostile"]
        rows.append(
            [
                variant,
                _s(s["last_page_at_s"]["normal"]),
                _s(s["last_page_at_s"]["hostile"]),
                _s(s["tail_s"]["normal"], 2),
                _s(s["tail_s"]["hostile"], 2),
                f"{_s(s['hang_earliest_first_request_s']['hostile'])}-{_s(latest)}",
                "-" if variant == STOCK else _s(None if latest is None else latest + cycle),
                _s(s["hang_last_request_s"]["hostile"]),
            ]
        )
    return head, rows


HANDLING = (
    ("twolevel/hosts_given_up", "hosts given up"),
    ("twolevel/dropped/host_failed", "dropped (host failed)"),
    ("twolevel/metrics/failures", "failures seen"),
    ("retry/count", "retries"),
    ("hang_hosts_connections_total", "hang hosts: connections"),
    ("hang_hosts_requests_total", "hang hosts: requests"),
)


def handling_table(results: dict[str, list[dict[str, Any]]]) -> reporting.Table:
    head = ["variant (hostile web, per repeat)", *[label for _, label in HANDLING]]
    rows = [
        [
            variant,
            *[", ".join(str(p["hostile"].get(key, "-")) for p in pairs) for key, _ in HANDLING],
        ]
        for variant, pairs in results.items()
    ]
    return head, rows


def runs_table(results: dict[str, list[dict[str, Any]]]) -> reporting.Table:
    head = ["variant", "repeat", "web", "total s", "t80 s", "last page at s", "pages", "complete"]
    rows = []
    for variant, pairs in results.items():
        for i, pair in enumerate(pairs):
            for web in pair["order"]:
                r = pair[web]
                if "error" in r:
                    rows.append([variant, str(i + 1), web, "-", "-", "-", "-", f"**{r['error']}**"])
                    continue
                complete = (
                    "yes"
                    if r["complete"]
                    else f"**no: {r['pages_fetched']}/{r['reachable_pages']}**"
                )
                rows.append(
                    [
                        variant,
                        str(i + 1),
                        web,
                        _s(r["total_s"], 2),
                        _s(r["t80_s"], 2),
                        _s(r["last_page_at_s"], 2),
                        str(r["pages_fetched"]),
                        complete,
                    ]
                )
    return head, rows


def settings_table() -> reporting.Table:
    from scrapy.settings import default_settings

    rows = [
        ["DOWNLOAD_TIMEOUT", "1", f"{default_settings.DOWNLOAD_TIMEOUT}", "all variants"],
        ["TWOLEVEL_BACKOFF", "0.5", f"{DEFAULTS['TWOLEVEL_BACKOFF']:g}", "two-level"],
        ["TWOLEVEL_BACKOFF_MAX", "2", f"{DEFAULTS['TWOLEVEL_BACKOFF_MAX']:g}", "two-level"],
        [
            "TWOLEVEL_SESSION_FAILURES",
            f"{DEFAULTS['TWOLEVEL_SESSION_FAILURES']} (default)",
            f"{DEFAULTS['TWOLEVEL_SESSION_FAILURES']}",
            "two-level",
        ],
        [
            "TWOLEVEL_FAILED_SESSIONS",
            f"{DEFAULTS['TWOLEVEL_FAILED_SESSIONS']} (default)",
            f"{DEFAULTS['TWOLEVEL_FAILED_SESSIONS']}",
            "two-level",
        ],
        [
            "RETRY_TIMES",
            f"{default_settings.RETRY_TIMES} (default)",
            f"{default_settings.RETRY_TIMES}",
            "all variants",
        ],
        ["CONCURRENT_REQUESTS", "8", f"{default_settings.CONCURRENT_REQUESTS}", "all variants"],
    ]
    return ["setting", "here", "default", "applies to"], rows


def give_up_cycle() -> float:
    """Shortest time from a hang host's first request to its being given up.

    ``FAILED_SESSIONS`` failed sessions (one request in flight per host): the first of
    ``SESSION_FAILURES`` timeouts, each later one a one-request probe, with a back-off
    after each failed session but the last.
    """
    timeout = TIMEOUTS["DOWNLOAD_TIMEOUT"]
    sessions = DEFAULTS["TWOLEVEL_FAILED_SESSIONS"]
    requests = DEFAULTS["TWOLEVEL_SESSION_FAILURES"] + (sessions - 1)
    backoffs = sum(
        min(TWOLEVEL_FAILURES["TWOLEVEL_BACKOFF"] * 2**i, TWOLEVEL_FAILURES["TWOLEVEL_BACKOFF_MAX"])
        for i in range(sessions - 1)
    )
    return requests * timeout + backoffs


# -- figure ------------------------------------------------------------------------------------


def plot(
    results: dict[str, list[dict[str, Any]]], summary: dict[str, Any], hang: list[int], path: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(15, 8.4), sharey=True)
    flat = axes.flatten()
    for ax, variant in zip(flat, results, strict=False):
        repeat = summary[variant]["plotted_repeat"]
        pair = results[variant][repeat]
        color = COLORS[variant]
        for web, style in (("normal", "-"), ("hostile", "--")):
            run = pair[web]
            if "curve" not in run:
                continue
            t, q = zip(*run["curve"], strict=True)
            ax.step(
                t,
                [100 * x for x in q],
                where="post",
                color=color,
                linestyle=style,
                label=f"{web}: total {run['total_s']:.1f} s",
            )
            ax.axvline(run["total_s"], color=color, linestyle=style, linewidth=0.8, alpha=0.6)
        ax.axhline(100 * QUALITY_FRACTION, color="#999999", linewidth=0.8)
        ax.set_title(f"{variant} (repeat {repeat + 1})", fontsize=10)
        ax.set_xlabel("seconds since the first request")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("% of the reachable quality served")
    for ax in flat[len(results) :]:
        ax.axis("off")
    fig.suptitle(
        f"Served quality vs time, normal web (solid) and with {len(hang)} hang hosts (dashed); "
        "the pair "
        "with the median total-time ratio; vertical lines: crawl finished",
        fontsize=10,
    )
    report.save_figure(fig, path)


# -- report ------------------------------------------------------------------------------------


def findings(summary: dict[str, dict[str, Any]], cycle: float) -> list[str]:
    """What the numbers show, in words generated from them."""
    policies = [v for v in summary if v in POLICIES]
    met = [v for v in policies if summary[v]["target_met"]]
    narrow = [v for v in met if summary[v]["pairs_over"]]
    missed = [v for v in policies if summary[v]["target_met"] is False]
    unmeasured = [v for v in policies if summary[v]["target_met"] is None]
    out = []
    if met:
        out.append(f"Within {TARGET}x on both total time and t80 (median ratio): {', '.join(met)}.")
    for v in narrow:
        s = summary[v]
        out.append(
            f"{v} only just: total {s['total_s']['ratio_median']:.3f} "
            f"({s['total_s']['ratio_min']:.2f}-{s['total_s']['ratio_max']:.2f}), t80 "
            f"{s['t80_s']['ratio_median']:.3f} ({s['t80_s']['ratio_min']:.2f}-"
            f"{s['t80_s']['ratio_max']:.2f}); {s['pairs_over']} of {s['complete_pairs']} "
            f"repeats were over {TARGET}."
        )
    if missed:
        out.append(f"**Target not met** by: {', '.join(missed)}.")
    if unmeasured:
        out.append(f"Not measured (no pair of complete crawls): {', '.join(unmeasured)}.")
    for v, s in summary.items():
        if s["incomplete_runs"]:
            out.append(
                f"**{v}: crawls that did not fetch every reachable page or failed** (their "
                f"pairs are left out of the ratios; see Every run): "
                f"{'; '.join(s['incomplete_runs'])}."
            )
    for v in [*missed, *narrow]:
        s = summary[v]
        normal, hostile = s["total_s"]["normal_median"], s["total_s"]["hostile_median"]
        before = s["last_page_at_s"]["hostile"] - s["last_page_at_s"]["normal"]
        after = s["tail_s"]["hostile"] - s["tail_s"]["normal"]
        text = (
            f"{v}: the hostile crawl took {hostile - normal:.1f} s longer (medians, "
            f"{hostile:.1f} s vs {normal:.1f} s); {_signed(before)} s of that came before its "
            f"last page was served and {_signed(after)} s after it, with no page left to fetch."
        )
        latest = s["hang_latest_first_request_s"]["hostile"]
        if latest is not None:
            text += (
                f" Its hang hosts were first requested at "
                f"{s['hang_earliest_first_request_s']['hostile']:.1f}-{latest:.1f} s; with URLs "
                f"queued, the last of them is given up about {cycle:g} s after that, at "
                f"{latest + cycle:.1f} s."
            )
        out.append(text)
    hostile = [summary[v]["total_s"]["hostile_median"] for v in policies]
    normal = [summary[v]["total_s"]["normal_median"] for v in policies]
    if len(policies) > 1 and None not in hostile and None not in normal:
        text = (
            f"The policies' hostile totals lie within {min(hostile):.1f}-{max(hostile):.1f} s, "
            f"their normal totals within {min(normal):.1f}-{max(normal):.1f} s"
        )
        if max(hostile) - min(hostile) < max(normal) - min(normal):
            text += ": the hang hosts set a floor under the crawl's end"
            by_speed = sorted(policies, key=lambda v: summary[v]["total_s"]["normal_median"])
            ratios = [summary[v]["total_s"]["ratio_median"] for v in by_speed]
            if ratios == sorted(ratios, reverse=True):
                text += ", so the faster a policy is without them, the higher its ratio"
        out.append(
            text + f". The {cycle:g} s give-up cycle (below) is "
            f"{cycle / max(normal):.1f}-{cycle / min(normal):.1f}x a whole normal crawl here."
        )
    out.append(
        f"With these settings, a hang host with URLs queued is given up "
        f"{cycle:.1f} s after its first request: {DEFAULTS['TWOLEVEL_FAILED_SESSIONS']} "
        f"failed sessions, the first of {DEFAULTS['TWOLEVEL_SESSION_FAILURES']} timeouts of "
        f"{TIMEOUTS['DOWNLOAD_TIMEOUT']} s, the others a one-request probe each (one request "
        "in flight per host), and the back-offs between them; sooner when its queue runs "
        "dry first, which also ends a session. The crawl cannot finish while a discovered "
        "hang host still holds queued URLs."
    )
    if STOCK in summary and summary[STOCK]["total_s"]["ratio_median"] is not None:
        from scrapy.settings.default_settings import RETRY_TIMES

        s = summary[STOCK]
        out.append(
            f"Stock Scrapy, for context: total ratio {s['total_s']['ratio_median']:.2f}, t80 "
            f"ratio {s['t80_s']['ratio_median']:.2f}; it requests every linked page of a hang "
            f"host {1 + RETRY_TIMES} times (RETRY_TIMES = {RETRY_TIMES}) and never gives a "
            "host up."
        )
    return out


def write_outputs(
    data: dict[str, Any],
    summary: dict[str, dict[str, Any]],
    results: dict[str, list[dict[str, Any]]],
    intro: list[str],
) -> None:
    # The raw numbers first, so that a failure below loses none of them.
    reporting.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (reporting.RESULTS_DIR / "hostile_hosts.json").write_text(
        report.compact_json(data) + "\n", encoding="utf-8"
    )
    cycle = give_up_cycle()
    sections: list[reporting.Section] = [
        ("What the numbers show", " ".join(findings(summary, cycle)), []),
        (
            "Ratios, hostile / normal",
            "Medians over the repeats; a ratio is the median over pairs (min-max in "
            "parentheses). The target is judged on the median ratio. A t80 ratio below 1 is "
            "possible: the normal crawl also spends some of its 8 requests at a time on the "
            "hang hosts' pages (they answer there), which t80 does not count.",
            [("", main_table(summary))],
        ),
        ("Quality over time", "hostile_hosts.png", []),
        (
            "Where the time goes",
            "Medians; seconds since the server's first request. 'After the last page' is "
            "Scrapy's elapsed time minus the time of the last page served: the crawl's end "
            "game, when only failing hosts (or nothing) remain (Scrapy's clock starts a few "
            "tens of ms before the first request, on both webs alike). The normal web also "
            "serves the hang hosts' pages, which the hostile web cannot. The hang-host "
            "columns are for the hostile web: when a request for a hang host reached "
            "Scrapy's downloader (request_reached_downloader), recorded by this script's "
            "WatchHosts extension; stock Scrapy queues requests in its downloader, so its "
            "requests may be sent later.",
            [("", phase_table(summary, cycle))],
        ),
        (
            "How the hang hosts were handled",
            "Per repeat, hostile web only; stock Scrapy has no twolevel/* stats. Connections "
            "and requests are counted by the server on the three hang hosts.",
            [("", handling_table(results))],
        ),
        ("Every run", "", [("", runs_table(results))]),
        (
            "Settings",
            "The failure settings are scaled to the crawl: a normal crawl here lasts 5-10 s "
            "and the slowest host answers within about 0.3 s, so DOWNLOAD_TIMEOUT = 1 s is "
            "still several times the slowest response, and the back-off is scaled with it. "
            "The defaults (180 s, 30 s, 600 s) are sized for crawls of hours; with them a "
            "single timeout would outlast this whole crawl many times over.",
            [("", settings_table())],
        ),
    ]
    definitions = {
        "total": "Scrapy's elapsed_time_seconds: the crawler's own clock from start to finish",
        "t80": "seconds from the server's first request until the pages served (of the "
        "hostile web's reachable set, counted once each) hold 80% of that set's quality; "
        "the same total for both webs",
        "ratio": "hostile / normal within one pair of back-to-back crawls",
        "complete": "the crawl fetched every page of its own web's reachable() set",
        "last page at": "time of the last page served, since the first request",
    }
    hang, png = data["web"]["hang_hosts"], reporting.DOCS_RESULTS / "hostile_hosts.png"
    report.publish(
        "hostile_hosts",
        "Hosts that never answer",
        intro,
        sections,
        definitions,
        figures=lambda: plot(results, summary, hang, png),
    )


def main() -> int:
    parser = report.arg_parser(__doc__, quick="a small web, 1 repeat; writes nothing")
    parser.add_argument("--repeats", type=int, help="pairs of crawls per variant (default 3)")
    args = parser.parse_args()
    params = dict(QUICK if args.quick else FULL)
    if args.repeats is not None:
        if args.repeats < 1:
            parser.error("--repeats must be >= 1")
        params["repeats"] = args.repeats
    n_hosts, pages, seed = params["n_hosts"], params["pages_per_host"], params["seed"]
    hang = pick_hang_hosts(n_hosts, pages, seed, params["n_hang"])
    webs = {"normal": generate_web(n_hosts, pages, seed=seed)}
    webs["hostile"] = hostile_web(n_hosts, pages, seed, hang)
    if not same_fetchable_pages(webs["normal"], webs["hostile"]):
        raise SystemExit("the hang hosts hide other pages: the comparison would not be fair")
    common = webs["hostile"].reachable()
    quality_total = sum(webs["hostile"].pages[p].quality for p in common)
    print(
        f"web: {n_hosts} hosts x {pages} pages, seed {seed}; hang hosts {hang}; "
        f"{len(webs['normal'].reachable())} vs {len(common)} reachable pages; "
        f"{params['repeats']} repeat(s)",
        flush=True,
    )

    watch = watch_settings([webs["hostile"].hosts[h].address for h in hang])
    started = time.monotonic()
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, web in webs.items():
            files[name] = Path(tmp) / f"{name}.json"
            files[name].write_text(web.to_json())
        for repeat in range(params["repeats"]):
            for k, variant in enumerate(VARIANTS):
                order = ("normal", "hostile") if (repeat + k) % 2 == 0 else ("hostile", "normal")
                pair: dict[str, Any] = {"order": list(order)}
                for name in order:
                    t0 = time.monotonic()
                    settings = {**variant_settings(variant), **watch}
                    result = crawl(Path(tmp), files[name], settings)
                    wall = time.monotonic() - t0
                    if isinstance(result, str):
                        run: dict[str, Any] = {"error": result, "complete": False}
                    else:
                        run = measure(result, webs[name], common, quality_total, hang)
                    run["wall_s"] = round(wall, 2)
                    pair[name] = run
                    print(
                        f"[{repeat + 1}] {variant:17} {name:7}  "
                        + (
                            run["error"]
                            if "error" in run
                            else f"total {run['total_s']:6.2f} s  t80 {_s(run['t80_s'], 2):>6} s"
                            f"  pages {run['pages_fetched']}/{run['reachable_pages']}"
                        )
                        + f"  (wall {wall:.1f} s)",
                        flush=True,
                    )
                results[variant].append(pair)
    run_time = time.monotonic() - started
    summary = {v: summarize(pairs) for v, pairs in results.items()}
    print(reporting.markdown(main_table(summary)))
    if args.quick:
        print(f"--quick: nothing written ({run_time:.0f} s)")
        return 0

    import scrapy

    # Keep the curves only for the plotted pairs: they are what the figure draws.
    for variant, pairs in results.items():
        for i, pair in enumerate(pairs):
            if i != summary[variant]["plotted_repeat"]:
                for web in ("normal", "hostile"):
                    pair[web].pop("curve", None)
    command = report.command_line(__file__, sys.argv[1:])
    env = {**reporting.environment(), "scrapy": scrapy.__version__}
    intro = [
        f"Command: ``{command}``; {env['date']}, Scrapy {scrapy.__version__}, "
        f"{env['cpus']} CPUs; the whole run took {run_time / 60:.1f} minutes.",
        f"Web: ``generate_web({n_hosts}, {pages}, seed={seed})`` with the default random host "
        f"profiles; the hostile web makes hosts {', '.join(map(str, hang))} hang (accept "
        "connections, never answer). No other page depends on them: the hostile web's "
        f"{len(common)} reachable pages are the normal web's {len(webs['normal'].reachable())} "
        f"minus the hang hosts' {len(hang_pages(webs['hostile']))}; "
        f"{len(webs['hostile'].linked()) - len(common)} of those are linked, so a crawl "
        "requests them. Each variant crawled both webs "
        f"{params['repeats']} times, in back-to-back pairs (order alternating); "
        f"CONCURRENT_REQUESTS = 8, DOWNLOAD_TIMEOUT = 1 s, and for the two-level scheduler "
        "TWOLEVEL_BACKOFF = 0.5 s, TWOLEVEL_BACKOFF_MAX = 2 s (see Settings). Target: "
        f"hostile / normal <= {TARGET} for both total time and t80, under every policy; "
        "stock Scrapy is shown for context.",
    ]
    data = {
        "command": command,
        "environment": env,
        "run_time_s": round(run_time, 1),
        "web": {
            "n_hosts": n_hosts,
            "pages_per_host": pages,
            "seed": seed,
            "host_profiles": "default (random, from the seed)",
            "hang_hosts": hang,
            "reachable_normal": len(webs["normal"].reachable()),
            "reachable_hostile": len(common),
            "linked_hostile": len(webs["hostile"].linked()),
            "quality_total_reachable_hostile": round(quality_total, 6),
        },
        "repeats": params["repeats"],
        "target_ratio": TARGET,
        "settings": {v: variant_settings(v) for v in VARIANTS},
        "instrumentation_settings": watch,
        "library_defaults": {
            k: DEFAULTS[k]
            for k in (
                "TWOLEVEL_BACKOFF",
                "TWOLEVEL_BACKOFF_MAX",
                "TWOLEVEL_SESSION_FAILURES",
                "TWOLEVEL_FAILED_SESSIONS",
            )
        },
        "give_up_cycle_s": give_up_cycle(),
        "summary": summary,
        "runs": results,
    }
    write_outputs(data, summary, results, intro)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
