"""The scheduler on real web servers: nginx serving 28 real documentation sites.

Each crawl is judged from nginx's own access log (:mod:`realweb.judge`), against Scrapy's
default scheduler and a clairvoyant reference, in one run:

- **the web**: 28 documentation sites from Debian's packages (6,499 pages, 12 to 1,936 per
  site; :mod:`realweb.corpus`), each served unchanged by one nginx on its own loopback
  address with its own request rate, keep-alive limit and, for a third of them, bandwidth
  cap, drawn from a seeded distribution (:mod:`realweb.servers`). Page quality is the
  PageRank of the sites' own link graph, handed to the spider as ``priority``.
- **the crawls**: each variant is a fresh ``scrapy crawl`` process (:mod:`realweb.crawl`)
  against a fresh nginx, with ``CONCURRENT_REQUESTS = 8`` and one request per host
  (``CONCURRENT_REQUESTS_PER_DOMAIN = 1``): Scrapy 2.19's defaults (``scrapy``), the
  add-on with each policy (``ADDONS = {"scrapy_twolevel.Addon": 0}``, ``TWOLEVEL_POLICY``),
  and crawl-capability without the duplicate-links middleware (what that middleware adds);
  on request (``--variants``), crawl-capability with sessions that end at P, and
  crawl-capability in two processes of one distributed crawl on a private
  ``redis-server``, 4 connections each (whether the machine's second core helps).
- **two regimes**: *politeness-bound* (36 to 600 requests per minute per host; every crawl
  stopped after ``--window`` seconds) and *CPU-bound* (the same rates x 20, so that the
  crawler's CPU sets the pace, not the largest site's rate; crawls run to the end, or
  ``--cpu-window``).
- **the reference**: the clairvoyant schedule (:mod:`realweb.clairvoyant`), simulated on the
  same graph, rates and sizes with the same 8 connections; and, when crawl-capability ran,
  the same with one core paying the CPU per page and per byte fitted on its crawl and (the
  second web) per TLS handshake measured apart (:mod:`realweb.handshake`)
  (:mod:`realweb.cpu_model`).

- **the second web** (``--web apache``): another corpus (``realweb/corpus2.json``) served
  by Apache httpd with another rate law: a latency per request instead of a request
  rate, a burst limit that refuses for the rest of a minute on half the hosts, short
  keep-alive timeouts on half, HTTPS on half
  (:mod:`realweb.apache`); same crawls, judge and references. Its results go to
  ``real_servers_apache`` by default.

Set-up (root, once; nginx and the 28 documentation packages, ~410 MiB)::

    apt-get install -y --no-install-recommends nginx $(python benchmarks/real_servers.py --packages)

Usage::

    python benchmarks/real_servers.py            # both regimes, every variant, ~40 min
    python benchmarks/real_servers.py --quick    # 60-s window, scrapy and crawl-capability

    # the second web
    apt-get install -y --no-install-recommends apache2 libapache2-mod-qos libpcre3 openssl \
        $(python benchmarks/real_servers.py --web apache --packages)
    python benchmarks/real_servers.py --web apache
"""

from __future__ import annotations

import functools
import json
import math
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import DOCS_RESULTS, RESULTS, report
from harness.crawl import Snapshot, pythonpath, snapshot_package
from harness.env import environment
from harness.redis_server import PrivateRedis
from realweb import apache, clairvoyant, corpus, cpu_model, handshake, judge, servers
from scrapy_twolevel.components import DUPLICATE_LINKS_PATH

HERE = Path(__file__).resolve().parent
NAME = "real_servers"
CONNECTIONS = 8
POLICIES = (
    "breadth-first",
    "performance-first",
    "quality-first",
    "crawl-capability",
    "resource-capability",
    "binding-capability",
)
#: crawl-capability without the duplicate-links middleware: what the middleware adds.
WITHOUT_EARLY_DROP = "crawl-capability-without-duplicate-links"
VARIANTS = ("scrapy", *POLICIES, WITHOUT_EARLY_DROP)
#: crawl-capability whose sessions end at P (TWOLEVEL_EXTEND_SESSIONS = False): what the
#: extension past P changes. Run on request (--variants), not by default.
SESSIONS_END_AT_P = "crawl-capability-sessions-end-at-p"
#: crawl-capability in two processes of one distributed crawl (a private redis-server),
#: half the connections each, so 8 in all as for every other variant: whether a crawl
#: bound by the crawler's CPU gains from the machine's second core. Run on request.
TWO_NODES = "crawl-capability-two-nodes"
NODES = 2
REGIMES = {"politeness": 1.0, "cpu": 20.0}  # rate scale
#: ``--set NAME=VALUE``: settings for the package's variants (not Scrapy's default).
EXTRA_SETTINGS: dict[str, Any] = {}
#: A variant ``POLICY@REV`` runs the package as committed at git revision ``REV``: a
#: change measured against the code before it in the same run. Its copy, by revision.
REVISIONS: dict[str, Snapshot] = {}
PRIORITY_SCALE = 1_000_000


@dataclass(frozen=True)
class Web:
    """One real web: its sites, the server that serves them, how hosts are drawn."""

    packages: tuple[str, ...]  # the server's Debian packages
    available: Callable[[], bool]  # whether the server is installed
    #: ``(run folder, sites, profiles, refuse)`` -> the server for one crawl
    server: Callable[
        [Path, list[corpus.Site], list[servers.HostProfile], int], servers.LoopbackServer
    ]
    corpus: Path
    draw_profiles: Callable[[int, int], list[servers.HostProfile]]
    results: str  # default results stem
    describe: str  # the report's sentence on what serves the sites
    cpu_key: str  # the summary's key for the server's CPU seconds


WEBS = {
    "nginx": Web(
        ("nginx",),
        servers.available,
        servers.Nginx,
        corpus.CORPUS,
        servers.draw_profiles,
        NAME,
        "served by nginx, one loopback address each, with the rate, keep-alive and "
        "bandwidth limits in the JSON",
        "nginx_cpu_s",
    ),
    "apache": Web(
        ("apache2", "libapache2-mod-qos", "libpcre3", "openssl"),
        apache.available,
        lambda rundir, sites, profiles, refuse: apache.Apache(rundir, sites, profiles),
        corpus.CORPUS2,
        apache.draw_profiles,
        f"{NAME}_apache",
        "served by Apache httpd, one loopback address each, half of them over HTTPS, with "
        "the latency and burst limits (mod_qos), bandwidth (mod_ratelimit) and keep-alive "
        "limits in the JSON",
        "server_cpu_s",
    ),
}


TARGETS = {
    "politeness": {"time_to_half": 0.70, "quality_at_quarter": 1.15},
    "cpu": {"time_to_80pct": 1.0, "cpu_per_page": 1.05},
}


def installed(sites: list[corpus.Site], web: str = "nginx") -> bool:
    """Whether the web's server and the sites' packages are here; if not, say how to
    install them."""
    if WEBS[web].available() and not corpus.missing(sites):
        return True
    packages = " ".join(WEBS[web].packages)
    print(
        f"Needs {packages} and the sites' packages (root): apt-get install -y "
        f"--no-install-recommends {packages} {' '.join(corpus.packages(sites))}",
        file=sys.stderr,
    )
    return False


def variant_settings(variant: str, close_after: float) -> dict[str, Any]:
    variant = variant.partition("@")[0]
    settings: dict[str, Any] = {
        "CONCURRENT_REQUESTS": CONNECTIONS,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": 0,
        "ROBOTSTXT_OBEY": False,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "INFO",
        "CLOSESPIDER_TIMEOUT": close_after,
    }
    if variant == WITHOUT_EARLY_DROP:
        settings["SPIDER_MIDDLEWARES"] = {DUPLICATE_LINKS_PATH: None}
        variant = "crawl-capability"
    if variant == SESSIONS_END_AT_P:
        settings["TWOLEVEL_EXTEND_SESSIONS"] = False
        variant = "crawl-capability"
    if variant == TWO_NODES:
        settings["CONCURRENT_REQUESTS"] = CONNECTIONS // NODES
        variant = "crawl-capability"
    if variant != "scrapy":
        settings["ADDONS"] = {"scrapy_twolevel.Addon": 0}
        settings["TWOLEVEL_POLICY"] = variant
        settings.update(EXTRA_SETTINGS)
    return settings


def run_crawl(
    workdir: Path,
    variant: str,
    server: servers.LoopbackServer,
    seeds: list[str],
    priorities: dict[str, dict[str, int]],
    close_after: float,
) -> dict[str, Any]:
    """One crawl process (two nodes on a private Redis for :data:`TWO_NODES`): its stats,
    CPU seconds (summed over nodes) and wall seconds (the longest node's)."""
    settings = variant_settings(variant, close_after)
    if variant != TWO_NODES:
        return _run_nodes(workdir, variant, [settings], seeds, priorities, close_after)[0]
    with PrivateRedis(workdir) as redis:
        nodes = [
            {
                **settings,
                "TWOLEVEL_REDIS_URL": redis.url,
                "TWOLEVEL_CRAWL_ID": "realweb",
                "TWOLEVEL_NODE_ID": f"node{i}",
            }
            for i in range(NODES)
        ]
        results = _run_nodes(workdir, variant, nodes, seeds, priorities, close_after)
    stats: dict[str, Any] = {}
    for result in results:
        for key, value in result["stats"].items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                stats[key] = stats.get(key, 0) + value
            else:
                stats.setdefault(key, value)
    return {
        "stats": stats,
        "cpu_s": sum(r["cpu_s"] for r in results),
        "wall_s": max(r["wall_s"] for r in results),
        "nodes_cpu_s": [round(r["cpu_s"], 2) for r in results],
    }


def _run_nodes(
    workdir: Path,
    variant: str,
    node_settings: list[dict[str, Any]],
    seeds: list[str],
    priorities: dict[str, dict[str, int]],
    close_after: float,
) -> list[dict[str, Any]]:
    """Start one ``realweb.crawl`` process per settings, together; wait for all."""
    snapshot = REVISIONS.get(variant.partition("@")[2])
    env = pythonpath(None if snapshot is None else snapshot.dir, HERE)
    procs = []
    for i, settings in enumerate(node_settings):
        name = variant if len(node_settings) == 1 else f"{variant}.node{i}"
        config = workdir / f"{name}.config.json"
        output = workdir / f"{name}.result.json"
        output.unlink(missing_ok=True)
        config.write_text(
            json.dumps(
                {
                    "settings": settings,
                    "seeds": seeds,
                    "priorities": priorities,
                    "output": str(output),
                }
            )
        )
        log = workdir / f"{name}.log"
        with open(log, "w") as stderr:  # the child keeps its own copy
            proc = subprocess.Popen(
                [sys.executable, "-m", "realweb.crawl", str(config)],
                stderr=stderr,
                stdout=subprocess.DEVNULL,
                env=env,
                cwd=HERE,  # with -m, the working directory comes first on sys.path
            )
        procs.append((proc, output, log))
    results = []
    for proc, output, log in procs:
        try:
            code = proc.wait(timeout=close_after + 600)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if code != 0 or not output.exists():
            raise RuntimeError(f"{variant} failed:\n{log.read_text()[-3000:]}")
        result = json.loads(output.read_text())
        if snapshot is not None:
            snapshot.check(result)
        results.append(result)
    return results


def run_regime(
    regime: str,
    variants: list[str],
    sites: list[corpus.Site],
    data: dict[str, Any],
    seed: int,
    window: float | None,
    workdir: Path,
    clock: report.Clock,
    *,
    rate_scale: float | None = None,
    refuse: int = 0,
    web: str = "nginx",
) -> dict[str, Any]:
    """Crawl the corpus with each variant against a fresh server (``web``: nginx, or
    Apache for the second web); judge each from its log.

    ``rate_scale`` defaults to the regime's; ``refuse``: hosts answer requests faster than
    their rate with 429 + Retry-After (429) or nginx's bare 503 (503) instead of holding
    them (0; used by the archived ``host_health`` study, benchmarks/ARCHIVE.md).
    """
    scale = REGIMES[regime] if rate_scale is None else rate_scale
    profiles = [p.scaled(scale) for p in WEBS[web].draw_profiles(len(sites), seed)]
    table = servers.profiles_table(sites, profiles)
    quality = host_qualities(data, table)
    best = max(q for pages in quality.values() for q in pages.values())
    priorities = {
        host: {page: round(PRIORITY_SCALE * q / best) for page, q in pages.items()}
        for host, pages in quality.items()
    }
    index_of = {name: site["index"] for name, site in data["sites"].items()}
    close_after = window if window is not None else 1800.0
    runs: dict[str, Any] = {}
    model: cpu_model.CpuModel | None = None  # fitted on crawl-capability's crawl
    order: list[tuple[str, str]] | None = None  # crawl-capability's pages, as it sent them
    for variant in variants:
        rundir = workdir / web / regime / variant
        with WEBS[web].server(rundir, sites, profiles, refuse) as server:
            clock.log(f"{regime}: {variant} ...")
            cpu_before = server.cpu_seconds()
            result = run_crawl(
                rundir, variant, server, server.seeds(index_of), priorities, close_after
            )
            server_cpu = server.cpu_seconds() - cpu_before
        requests = judge.read_log(server.log)
        verdict = judge.judge(requests, quality, window)
        origin = judge.origin(server.log)
        if variant == "crawl-capability":
            order = crawl_order(requests, table)
        if variant == "crawl-capability" and origin is not None and result.get("cpu_series"):
            tls_hosts = {p.address for p in profiles if p.tls}
            measured_handshake = handshake_cost(workdir, clock) if tls_hosts else {}
            model = cpu_model.fit(
                result["cpu_series"],
                requests,
                origin,
                tls_hosts,
                measured_handshake.get("per_handshake_s", 0.0),
            )
        summary = verdict.summary(window)
        summary["crawler_cpu_s"] = round(result["cpu_s"], 2)
        summary["crawler_wall_s"] = round(result["wall_s"], 2)
        summary["cpu_ms_per_page"] = round(1000 * result["cpu_s"] / max(1, verdict.pages), 3)
        summary[WEBS[web].cpu_key] = round(server_cpu, 2)
        summary["finish_reason"] = result["stats"].get("finish_reason")
        if "nodes_cpu_s" in result:
            summary["nodes_cpu_s"] = result["nodes_cpu_s"]
        runs[variant] = {
            "summary": summary,
            "curve": _thin(verdict.curve),
            "in_flight": verdict.in_flight,
            "hosts": {
                h: {k: v for k, v in d.items() if k != "spans"} for h, d in verdict.per_host.items()
            },
            "spans": {h: d["spans"] for h, d in verdict.per_host.items()},
            "stats": {
                k: v
                for k, v in result["stats"].items()
                if k.startswith(("twolevel/", "scheduler/", "downloader/response_count", "finish"))
            },
        }
        clock.log(
            f"  {summary['pages']} pages, quality {summary['quality']:.3f}, "
            f"half at {summary['time_to_half_s']} s, CPU {summary['crawler_cpu_s']} s, "
            f"{summary['overlapping']} overlapping"
        )
    horizon = (
        window if window is not None else max(r["summary"]["last_end_s"] for r in runs.values())
    )
    names = [s.name for s in sites]
    reference = clairvoyant.schedule(data, names, profiles, CONNECTIONS, horizon)
    result = {
        "profiles": table,
        "host_quality": {host: round(sum(pages.values()), 6) for host, pages in quality.items()},
        "host_quarter_quality": quarter_quality(quality, table, horizon / 4),
        "window_s": window,
        "runs": runs,
        "clairvoyant": {
            "curve": _thin(reference),
            "summary": _reference_summary(reference, window),
        },
    }
    if model is not None:
        with_cpu = clairvoyant.schedule_cpu(data, names, profiles, CONNECTIONS, horizon, model)
        result["clairvoyant_cpu"] = {
            "cpu_model": {
                "per_page_ms": round(1e3 * model.per_page_s, 4),
                "per_kb_ms": round(1e6 * model.per_byte_s, 5),
                "per_handshake_ms": round(1e3 * model.per_handshake_s, 4),
                "bins": model.bins,
                "handshake_measured": measured_handshake,
            },
            "curve": _thin(with_cpu),
            "summary": _reference_summary(with_cpu, window),
        }
        result["clairvoyant_loop"] = loop_reference(data, result, model)
        if order is not None:
            result["crawl_capability_replayed"] = loop_reference(data, result, model, order)
    return result


def crawl_order(
    requests: list[judge.Request], table: list[dict[str, Any]]
) -> list[tuple[str, str]]:
    """The pages a crawl was served, ``(site, page)``, in the order it sent them."""
    site = {p["address"]: p["site"] for p in table}
    ordered = sorted(requests, key=lambda r: r.start)
    return [
        (site[r.host], r.uri.lstrip("/")) for r in ordered if r.status == 200 and r.host in site
    ]


def loop_reference(
    data: dict[str, Any],
    result: dict[str, Any],
    model: cpu_model.CpuModel,
    order: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """The CPU-aware clairvoyant on one event loop with Scrapy's backlog
    (:func:`clairvoyant.schedule_loop`): information beside the reference the targets use.
    With ``order``, that crawler sends a crawl's requests in the crawl's order instead of
    choosing: how much of the crawl's time its choices explain."""
    names, profiles = saved_hosts(result)
    curve = clairvoyant.schedule_loop(
        data, names, profiles, CONNECTIONS, horizon_of(result), model, order=order
    )
    return {
        "backlog_bytes": clairvoyant.SCRAPY_BACKLOG,
        "curve": _thin(curve),
        "summary": _reference_summary(curve, result["window_s"]),
    }


def saved_hosts(result: dict[str, Any]) -> tuple[list[str], list[servers.HostProfile]]:
    """A regime's sites and their hosts' profiles, back from its profiles table
    (:func:`servers.profiles_table`), for the references."""
    table = result["profiles"]
    profiles = [servers.HostProfile(**{k: v for k, v in p.items() if k != "site"}) for p in table]
    return [p["site"] for p in table], profiles


def saved_model(result: dict[str, Any]) -> cpu_model.CpuModel | None:
    """The CPU model a committed regime's CPU-aware clairvoyant paid (``None``: none)."""
    saved = result.get("clairvoyant_cpu", {}).get("cpu_model")
    if saved is None:
        return None
    return cpu_model.CpuModel(
        saved["per_page_ms"] / 1e3,
        saved["per_kb_ms"] / 1e6,
        saved["bins"],
        saved["per_handshake_ms"] / 1e3,
    )


@functools.cache
def handshake_cost(workdir: Path, clock: report.Clock) -> dict[str, Any]:
    """The crawler's CPU per TLS handshake (:mod:`realweb.handshake`): a property of the
    machine, measured once per run, for every regime that needs it."""
    clock.log("  the CPU of a TLS handshake ...")
    return handshake.measure(workdir / "handshake")


def _thin(curve: list[tuple[float, float]], points: int = 400) -> list[list[float]]:
    if len(curve) <= points:
        return [[round(t, 3), round(q, 6)] for t, q in curve]
    step = len(curve) / points
    picked = [curve[int(i * step)] for i in range(points)] + [curve[-1]]
    return [[round(t, 3), round(q, 6)] for t, q in picked]


def _reference_summary(curve: list[tuple[float, float]], window: float | None) -> dict[str, Any]:
    j = judge.Judgement(
        curve, len(curve), len(curve), 0, {}, 0, 1, 0, curve[-1][0] if curve else 0.0, []
    )
    return j.summary(window)


# -- the report -----------------------------------------------------------------------------


def _x(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "-"
    return report.ratio(value / base)


def _s(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _gathered_cells(name: str, s: dict[str, Any], base: dict[str, Any], quarter: bool) -> list[str]:
    """A row's first cells: what was gathered when, against Scrapy's (``base``)."""
    cells = [name]
    if quarter:
        q = s["quality_at_quarter"]
        cells += [f"{q:.3f}", _x(q, base.get("quality_at_quarter"))]
    return [
        *cells,
        _s(s["time_to_half_s"]),
        _x(s["time_to_half_s"], base.get("time_to_half_s")),
        _s(s["time_to_80pct_s"]),
        _x(s["time_to_80pct_s"], base.get("time_to_80pct_s")),
        f"{s['quality']:.3f}",
        str(s["pages"]),
    ]


def regime_table(regime: str, result: dict[str, Any]) -> report.Table:
    runs = result["runs"]
    base = runs.get("scrapy", {}).get("summary", {})
    quarter = result["window_s"] is not None
    head = report.columns(
        ("variant | quality at ¼ window | vs scrapy | " if quarter else "variant | ")
        + "time to half s | vs scrapy | time to 80% s | vs scrapy | quality | pages | "
        "duplicates | overlapping | max in flight/host | crawler CPU s | CPU ms/page | "
        "vs scrapy | 404s | 429s"
    )
    rows = []
    for variant, run in runs.items():
        s = run["summary"]
        rows.append(
            [
                *_gathered_cells(variant, s, base, quarter),
                str(s["duplicates"]),
                str(s["overlapping"]),
                str(s["max_in_flight_per_host"]),
                _s(s["crawler_cpu_s"]),
                _s(s["cpu_ms_per_page"], 2),
                _x(s["cpu_ms_per_page"], base.get("cpu_ms_per_page")),
                str(s["statuses"].get("404", 0)),
                str(s["statuses"].get("429", 0)),
            ]
        )
    for key, label in REFERENCES.items():
        if key in result:
            cells = _gathered_cells(label, result[key]["summary"], base, quarter)
            rows.append(cells + ["-"] * (len(head) - len(cells)))
    return head, rows


#: The simulated references a regime's result may hold, and their rows' labels.
REFERENCES = {
    "clairvoyant": "clairvoyant (simulated)",
    "clairvoyant_cpu": "clairvoyant, CPU-aware (simulated)",
    "clairvoyant_loop": "clairvoyant, CPU-aware, one loop, Scrapy's backlog (simulated)",
    "crawl_capability_replayed": (
        "crawl-capability's requests, replayed on that one loop (simulated)"
    ),
}


def host_qualities(data: dict[str, Any], profiles: list[dict[str, Any]]) -> dict[str, Any]:
    """Host address -> {page path: quality}, from the corpus (:func:`corpus.build`) and the
    hosts' profiles (:func:`servers.profiles_table`: which site each address serves)."""
    return {
        p["address"]: {page: v[0] for page, v in data["sites"][p["site"]]["pages"].items()}
        for p in profiles
    }


def horizon_of(result: dict[str, Any]) -> float:
    """A regime's judged span: its window, or (run to the end) the longest crawl's."""
    return result["window_s"] or max(r["summary"]["last_end_s"] for r in result["runs"].values())


#: How many of the most valuable hosts :func:`use_table` shows.
VALUABLE_HOSTS = 4


def allowance(profile: dict[str, Any], until: float) -> float:
    """The most requests a host lets one serial client begin in ``[0, until]``: ``1 + rate
    x until`` for a rate limit (a leaky bucket, the first one free), ``until / latency``
    for a latency per request (the bandwidth cap and the transfer aside), and no more than
    its burst in each window a burst limit opens."""
    allowed = math.inf
    if profile.get("rate_per_minute"):
        allowed = 1 + profile["rate_per_minute"] * until / 60.0
    elif profile.get("latency"):
        allowed = until / profile["latency"]
    if profile.get("burst"):
        windows = 1 + int(until // profile["burst_window"])
        allowed = min(allowed, profile["burst"] * windows)
    return allowed


def quarter_quality(
    quality: dict[str, dict[str, float]], profiles: list[dict[str, Any]], quarter: float
) -> dict[str, float]:
    """Per host, the most quality it can give in the first quarter: its best pages, as
    many as it allows then (:func:`allowance`), as if all were known. Which hosts a
    crawl should keep busy early: a host of many pages of little value each holds much
    quality in all but little per request."""
    out = {}
    for p in profiles:
        pages = sorted(quality[p["address"]].values(), reverse=True)
        allowed = allowance(p, quarter)
        out[p["address"]] = round(sum(pages if math.isinf(allowed) else pages[: int(allowed)]), 6)
    return out


def use_table(result: dict[str, Any]) -> report.Table:
    """Whether a valuable host was kept busy: for the hosts that can give the most quality
    in the first quarter (:func:`quarter_quality`; the most in all, for older results), the
    requests each variant began there in the first quarter of the window (of the crawl,
    CPU-bound), and their share of what the host allows (:func:`allowance`)."""
    rank = result.get("host_quarter_quality") or result["host_quality"]
    hosts = sorted(rank, key=rank.get, reverse=True)[:VALUABLE_HOSTS]
    profiles = {p["address"]: p for p in result["profiles"]}
    runs = result["runs"]
    quarter = horizon_of(result) / 4
    head = report.columns(
        "site | quality held | of it in ¼ at most | limit | allows | "
        + " | ".join(f"{v} requests" for v in runs)
    )
    rows = []
    for host in hosts:
        p = profiles[host]
        limit = f"{p['latency']:.3f} s latency" if p.get("latency") else ""
        limit = limit or f"{p['rate_per_minute']:.0f}/min"
        if p.get("bandwidth"):
            limit += f", {p['bandwidth'] / 1000:.0f} kB/s"
        if p.get("burst"):
            limit += f", {p['burst']} per {p['burst_window']:.0f} s"
        allowed = allowance(p, quarter)
        cells = []
        for run in runs.values():
            n = sum(1 for s, _ in run["spans"].get(host, []) if s < quarter)
            cells.append(f"{n} ({n / allowed:.0%})" if math.isfinite(allowed) else str(n))
        rows.append(
            [
                p["site"],
                f"{result['host_quality'][host]:.3f}",
                f"{result.get('host_quarter_quality', {}).get(host, math.nan):.3f}",
                limit,
                f"{allowed:.0f}" if math.isfinite(allowed) else "-",
                *cells,
            ]
        )
    return head, rows


def targets(results: dict[str, Any]) -> tuple[report.Table, list[dict[str, Any]]]:
    head = report.columns("regime | target | crawl-capability | met")
    rows, items = [], []

    def add(
        regime: str,
        what: str,
        value: float | None,
        limit: float,
        lower: bool,
        against: str = "scrapy",
    ) -> None:
        ok = value is not None and (value <= limit if lower else value >= limit)
        figure = "-" if value is None else report.ratio(value)
        bound = f"{'≤' if lower else '≥'} {limit:.2f}x {against}"
        rows.append([regime, f"{what} {bound}", figure, report.yes_no(ok)])
        items.append({"regime": regime, "target": what, "limit": limit, "value": value, "met": ok})

    for regime, result in results.items():
        runs = result["runs"]
        if "scrapy" not in runs or "crawl-capability" not in runs:
            continue
        ours, base = runs["crawl-capability"]["summary"], runs["scrapy"]["summary"]

        def ratio(key: str, ours: dict = ours, base: dict = base) -> float | None:
            a, b = ours.get(key), base.get(key)
            return a / b if a is not None and b else None

        if regime == "politeness":
            limits = TARGETS["politeness"]
            add(
                regime,
                "time to half the quality",
                ratio("time_to_half_s"),
                limits["time_to_half"],
                True,
            )
            add(
                regime,
                "quality at ¼ window",
                ratio("quality_at_quarter"),
                limits["quality_at_quarter"],
                False,
            )
        else:
            limits = TARGETS["cpu"]
            add(
                regime,
                "time to 80% of quality",
                ratio("time_to_80pct_s"),
                limits["time_to_80pct"],
                True,
            )
            add(
                regime,
                "crawler CPU per page",
                ratio("cpu_ms_per_page"),
                limits["cpu_per_page"],
                True,
            )
        if "clairvoyant_cpu" in result:
            ref = result["clairvoyant_cpu"]["summary"]
            for key, what, limit, lower in (
                ("time_to_half_s", "time to half the quality", 1.25, True),
                ("quality_at_quarter", "quality at ¼ window", 0.85, False),
            ):
                if key not in ours:  # no window: no quarter
                    continue
                a, b = ours.get(key), ref.get(key)
                if a is not None and b is None and result["window_s"]:
                    # The reference never got there in the window: its time is longer
                    # than the window, so a / window bounds the ratio from above.
                    what, b = (
                        f"{what} (clairvoyant: not in the window; a bound)",
                        float(result["window_s"]),
                    )
                add(
                    regime,
                    what,
                    a / b if a is not None and b else None,
                    limit,
                    lower,
                    "the CPU-aware clairvoyant",
                )
        overlaps = sum(r["summary"]["overlapping"] for v, r in runs.items() if v != "scrapy")
        rows.append(
            [
                regime,
                "never two requests in flight at one host (two-level)",
                str(overlaps),
                report.yes_no(overlaps == 0),
            ]
        )
        items.append(
            {"regime": regime, "target": "no overlap", "value": overlaps, "met": overlaps == 0}
        )
    return (head, rows), items


def draw_quality(ax: Any, result: dict[str, Any], title: str) -> None:
    """Each variant's quality over time, and the clairvoyant reference's, on ``ax``."""
    for variant, run in result["runs"].items():
        t, q = zip(*run["curve"], strict=True) if run["curve"] else ((), ())
        ax.step(t, q, where="post", label=variant, lw=1.4)
    ref = result["clairvoyant"]["curve"]
    if ref:
        t, q = zip(*ref, strict=True)
        ax.step(t, q, where="post", label="clairvoyant", color="black", ls="--", lw=1)
    ref = result.get("clairvoyant_cpu", {}).get("curve")
    if ref:
        t, q = zip(*ref, strict=True)
        ax.step(t, q, where="post", label="clairvoyant, CPU-aware", color="black", ls=":", lw=1)
    ref = result.get("clairvoyant_loop", {}).get("curve")
    if ref:
        t, q = zip(*ref, strict=True)
        ax.step(
            t,
            q,
            where="post",
            label="clairvoyant, CPU-aware, one loop",
            color="grey",
            ls="-.",
            lw=1,
        )
    ax.set_title(title)
    ax.set_xlabel("seconds (the server's access log)")
    ax.set_ylabel("quality gathered (1 = every page)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def plots(results: dict[str, Any], out: Path, name: str = NAME) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6.5 * len(results), 4.2), squeeze=False)
    for ax, (regime, result) in zip(axes[0], results.items(), strict=True):
        draw_quality(ax, result, f"{regime}-bound: quality over time")
    report.save_figure(fig, out / f"{name}_quality.png")

    fig, axes = plt.subplots(1, len(results), figsize=(6.5 * len(results), 3.6), squeeze=False)
    for ax, (regime, result) in zip(axes[0], results.items(), strict=True):
        for variant, run in result["runs"].items():
            ax.plot(range(len(run["in_flight"])), run["in_flight"], label=variant, lw=1)
        ax.axhline(CONNECTIONS, color="grey", ls=":", lw=1)
        ax.set_title(f"{regime}-bound: requests being served")
        ax.set_xlabel("seconds")
        ax.set_ylabel("in flight (mean per second)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    report.save_figure(fig, out / f"{name}_in_flight.png")

    shown = [
        v
        for v in ("scrapy", "crawl-capability")
        if v in results.get("politeness", {}).get("runs", {})
    ]
    if shown:
        result = results["politeness"]
        hosts = [p["address"] for p in result["profiles"]]
        names = [p["site"] for p in result["profiles"]]
        limit = (result["window_s"] or 60) / 2
        fig, axes = plt.subplots(1, len(shown), figsize=(7 * len(shown), 6), squeeze=False)
        for ax, variant in zip(axes[0], shown, strict=True):
            spans = result["runs"][variant]["spans"]
            for y, host in enumerate(hosts):
                bars = [(s, e - s) for s, e in spans.get(host, []) if s <= limit]
                ax.broken_barh(bars, (y - 0.4, 0.8), lw=0)
            ax.set_yticks(range(len(hosts)), names, fontsize=7)
            ax.set_xlim(0, limit)
            ax.set_title(f"politeness-bound, {variant}: each host's requests")
            ax.set_xlabel("seconds")
        report.save_figure(fig, out / f"{name}_hosts.png")


def write(
    results: dict[str, Any],
    env: dict[str, Any],
    command: str,
    elapsed: float,
    name: str = NAME,
    web: str = "nginx",
) -> str:
    sections: list[report.Section] = []
    for regime, result in results.items():
        window = result["window_s"]
        title = f"{regime}-bound" + (f", first {window:g} s" if window else ", to the end")
        sections.append((title, "", [("", regime_table(regime, result))]))
        if "host_quality" in result:
            sections.append((f"{title}: the most valuable hosts", "", [("", use_table(result))]))
    table, items = targets(results)
    sections.append(("Targets", "", [("", table)]))
    sections.append(("Quality over time", f"{name}_quality.png", []))
    sections.append(("Requests in flight", f"{name}_in_flight.png", []))
    sections.append(("Each host's requests (politeness-bound)", f"{name}_hosts.png", []))
    intro = [
        f"Generated by `{command}` on {env['date']} ({env['platform']}, {env['cpus']} CPUs); "
        f"Scrapy {env['scrapy']}, {web} {env[web]}; run time {elapsed / 60:.0f} min.",
        f"{len(next(iter(results.values()))['profiles'])} documentation sites from Debian's "
        f"packages {WEBS[web].describe}; quality "
        f"is PageRank of the sites' own link graph; judged from {web}'s access log. "
        f"{CONNECTIONS} connections, one request per host.",
    ]
    definitions = {
        "quality at ¼ window": "sum of the qualities of the distinct pages served (200) by then",
        "time to half": "seconds until half of the whole web's quality was served",
        "time to 80%": "seconds until 80% of what the crawl gathered in all was served",
        "of it in ¼ at most": "the quality of the host's best pages, as many as it allows "
        "a serial client in the first quarter: what it can give early if kept busy; the "
        "hosts shown are those where this is largest",
        "requests (most valuable hosts)": "requests the variant began at the host in the "
        "first quarter of the window (of the crawl, CPU-bound), from its access log, and "
        "their share of what the host allows a serial client then (1 + rate x time, or "
        "time / latency, at most the burst per window opened; a bandwidth cap lowers it "
        "further)",
        "overlapping": "requests begun while another one to the same host was being served",
        "429s": "requests the server refused (the Apache web's burst limits)",
        "clairvoyant": "knows every quality, size, rate and link; no CPU cost (see realweb)",
        "clairvoyant, CPU-aware": "the same with one core that pays, per page and per byte, "
        "the CPU fitted on crawl-capability's crawl in the same run, and per TLS handshake "
        "(HTTPS hosts) the CPU measured apart (realweb.cpu_model, realweb.handshake; the "
        "JSON's clairvoyant_cpu.cpu_model)",
    }
    report.publish(
        name,
        "Real web servers",
        intro,
        sections,
        definitions,
        lambda: plots(results, DOCS_RESULTS, name),
    )
    data = {
        "command": command,
        "environment": env,
        "elapsed_s": elapsed,
        "targets": items,
        "regimes": results,
    }
    (RESULTS / f"{name}.json").write_text(report.compact_json(data) + "\n")
    return report.markdown(table)


def render(name: str, web: str, sites: list[corpus.Site], workdir: Path) -> None:
    """Write a committed run's report again from its JSON, with what the report has
    learnt to show since (the hosts' quarter quality, from the corpus; the one-loop
    reference, from the run's CPU model); the measurements are the run's."""
    saved = json.loads((RESULTS / f"{name}.json").read_text())
    data = corpus.build(workdir, sites)
    for result in saved["regimes"].values():
        quality = host_qualities(data, result["profiles"])
        result.setdefault(
            "host_quarter_quality",
            quarter_quality(quality, result["profiles"], horizon_of(result) / 4),
        )
        model = saved_model(result)
        if model is not None and "clairvoyant_loop" not in result:
            result["clairvoyant_loop"] = loop_reference(data, result, model)
    write(saved["regimes"], saved["environment"], saved["command"], saved["elapsed_s"], name, web)


def main(argv: list[str] | None = None) -> int:
    parser = report.arg_parser(
        __doc__, quick="60-s window, scrapy and crawl-capability; writes nothing"
    )
    parser.add_argument(
        "--packages", action="store_true", help="print the Debian packages and exit"
    )
    parser.add_argument("--regimes", default="politeness,cpu")
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated; POLICY@REV runs the package as committed at git revision REV",
    )
    parser.add_argument("--window", type=float, default=180.0, help="politeness-bound window, s")
    parser.add_argument(
        "--cpu-window", type=float, default=None, help="CPU-bound window, s (default: to the end)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the package's variants (VALUE as JSON if it parses)",
    )
    parser.add_argument(
        "--web",
        choices=sorted(WEBS),
        default="nginx",
        help="nginx: the first web (28 sites); apache: the second (another corpus, latency "
        "per request, burst limits, HTTPS on half the hosts, short keep-alive timeouts)",
    )
    parser.add_argument(
        "--name",
        default=None,
        help=f"results file stem (default {NAME}, or {NAME}_apache for --web apache)",
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/twolevel-real-servers"))
    parser.add_argument(
        "--render",
        action="store_true",
        help="crawl nothing: write the report of results/NAME.json again with this code",
    )
    args = parser.parse_args(argv)
    web = WEBS[args.web]
    name = args.name or web.results
    sites = corpus.load_sites(web.corpus)
    if args.packages:
        print(" ".join(corpus.packages(sites)))
        return 0
    if args.render:
        render(name, args.web, sites, args.workdir)
        return 0
    if not installed(sites, args.web):
        return 2
    for item in args.set:
        key, _, raw = item.partition("=")
        try:
            EXTRA_SETTINGS[key] = json.loads(raw)
        except ValueError:
            EXTRA_SETTINGS[key] = raw
    variants = args.variants.split(",")
    regimes = args.regimes.split(",")
    windows = {"politeness": args.window, "cpu": args.cpu_window}
    if args.quick:
        variants = [v for v in variants if v in ("scrapy", "crawl-capability")]
        windows = {"politeness": 60.0, "cpu": 60.0}
    clock = report.Clock()
    command = report.command_line(__file__, sys.argv[1:] if argv is None else argv)
    data = corpus.build(args.workdir, sites)
    clock.log(f"corpus: {sum(len(s['pages']) for s in data['sites'].values())} pages")
    for rev in {v.partition("@")[2] for v in variants} - {""}:
        REVISIONS[rev] = Snapshot(
            "twolevel-real-servers-src-", lambda copy, rev=rev: snapshot_package(copy, rev=rev)
        )
    try:
        results = {
            regime: run_regime(
                regime,
                variants,
                sites,
                data,
                args.seed,
                windows[regime],
                args.workdir,
                clock,
                web=args.web,
            )
            for regime in regimes
        }
    finally:
        for snapshot in REVISIONS.values():
            snapshot.remove()
    if args.web == "apache":
        env = environment("scrapy", "scrapy_twolevel", apache=apache.apache_version())
    else:
        env = environment("scrapy", "scrapy_twolevel", nginx=servers.nginx_version())
    if args.quick:
        for regime, result in results.items():
            print(report.markdown(regime_table(regime, result)))
        print(report.markdown(targets(results)[0]))
        return 0
    for rev, snapshot in REVISIONS.items():
        env[f"scrapy_twolevel@{rev}"] = snapshot.code
    text = write(results, env, command, clock.elapsed(), name, args.web)
    return report.finish(text, clock.elapsed(), f"{RESULTS}/{name}*")


if __name__ == "__main__":
    raise SystemExit(main())
