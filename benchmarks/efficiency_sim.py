"""Crawl efficiency in simulation: the reference study's web, its four policies and stock Scrapy.

Reproduces the *shape* of the two-level scheduling study (Cao, Jiang and Singh, *Scheduling
Web Crawl for Better Performance and Quality*, Princeton TR-682-03): a university domain of
500 servers and 30,000 pages crawled over at most K = 64 connections, one per server.
Everything runs on a virtual clock (:mod:`scrapy_twolevel.sim.des`) over a generated web
(:mod:`scrapy_twolevel.sim.webgen`), so a full run takes about a minute and is exactly
reproducible.

Variants: the project's real ``TwoLevelFrontier`` with each built-in policy
(breadth-first, performance-first, quality-first, crawl-capability), and a model of
Scrapy's stock scheduler + downloader (``ScrapyPriorityQueue`` over LIFO = ``scrapy-dfo``
and over FIFO = ``scrapy-bfo``; ``DownloaderAwarePriorityQueue`` = ``scrapy-dapq``) with
``CONCURRENT_REQUESTS = K`` and ``CONCURRENT_REQUESTS_PER_DOMAIN = 8``; every request
gets the page quality as its priority.

What is run:

- the main comparison for PageRank quality and for Zipf (a = 1) quality, in the session
  network model (the reference's: the crawler closes a server's connection when it has
  nothing more to send on it) and, as a sensitivity check, in the pool model (Scrapy's
  connection pool: idle connections live until the server's keep-alive timeout);
- the connections sweep: pages per second for K = 8 ... 128 (breadth-first,
  performance-first, crawl-capability);
- HTTP/1.0 vs HTTP/1.1: the same web with every server HTTP/1.0, then every server
  keeping 100 requests per connection alive;
- the same comparison on a web whose server sizes and speeds are independent (see the
  report's notes), and on two more seeds.

Definitions (also written into the results):

- quality fractions are of the web's total quality (every page is reachable);
- ``T_BF`` is the two-level breadth-first crawl's total time, in the same network model;
- efficiency ``E(t) = (Q(t) / Q_total) / (t / T_BF)``: quality gathered per second up to
  ``t``, relative to breadth-first's average rate over its whole crawl. A crawl gathering
  80% of the quality in 30% of ``T_BF`` has ``E = 2.67`` then; every crawl ends at
  ``E = T_BF / T``.

Usage::

    python benchmarks/efficiency_sim.py            # full scale, about a minute
    python benchmarks/efficiency_sim.py --quick    # 100 servers, 6,000 pages: a smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scrapy_twolevel.sim.des import STOCK_VARIANTS, VARIANTS, CrawlRun, simulate
from scrapy_twolevel.sim.webgen import generate_paper_web, web_stats
from scrapy_twolevel.testing.web import WebSpec

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "efficiency"

QUALITY_MODELS = ("pagerank", "zipf")
SWEEP_K = (8, 16, 32, 64, 96, 128)
SWEEP_VARIANTS = ("breadth-first", "performance-first", "crawl-capability")
STOCK = tuple(STOCK_VARIANTS)
LABELS = {
    "breadth-first": "breadth-first",
    "performance-first": "performance-first",
    "quality-first": "quality-first",
    "crawl-capability": "crawl-capability",
    "scrapy-dfo": "Scrapy PQ+LIFO (DFO)",
    "scrapy-bfo": "Scrapy PQ+FIFO (BFO)",
    "scrapy-dapq": "Scrapy DownloaderAwarePQ",
}
COLORS = {
    "breadth-first": "#1f77b4",
    "performance-first": "#ff7f0e",
    "quality-first": "#2ca02c",
    "crawl-capability": "#d62728",
    "scrapy-dfo": "#7f7f7f",
    "scrapy-bfo": "#bcbd22",
    "scrapy-dapq": "#9467bd",
}

STYLES = {"scrapy-dfo": ":", "scrapy-bfo": "--", "scrapy-dapq": "-."}

DEFINITIONS = {
    "quality": "fraction of the web's total quality (stored qualities renormalized to sum 1)",
    "T_BF": "total time of the two-level breadth-first crawl in the same network model",
    "efficiency": "E(t) = (Q(t)/Q_total) / (t/T_BF): quality per second up to t, relative "
    "to breadth-first's average over its whole crawl",
    "t50/t80/t90": "time at which the crawl holds 50/80/90% of the total quality",
    "pages_at_half_bf": "pages downloaded at 0.5 * T_BF",
    "quality_at_Xpct_bf": "fraction of the total quality downloaded at X% of T_BF",
    "quality_at_half_pages": "fraction of the total quality in the first half of the pages",
    "mean_quality_bf": "mean of the quality fraction Q(t) over [0, T_BF] (area under the "
    "quality curve / T_BF)",
    "politeness_violations": "requests sent to a server while another request to it was in flight",
    "session model": "the crawler closes a connection it has nothing to send on (two-level: "
    "when the host's session ends), as in the reference's T = 2*ConnectionTime + "
    "P*ResponseTime/p",
    "pool model": "idle connections stay open until the server's keep-alive timeout "
    "(30 s, the test web server's), as Scrapy's HTTP connection pool keeps them",
}


# -- running ------------------------------------------------------------------------------


def summaries(runs: dict[str, CrawlRun]) -> dict[str, dict[str, Any]]:
    baseline = runs["breadth-first"].total_time
    return {v: r.summary(baseline) for v, r in runs.items()}


def curves(runs: dict[str, CrawlRun], points: int) -> dict[str, dict[str, list[float]]]:
    """Every variant sampled on one time grid, up to the longest crawl."""
    until = max(r.total_time for r in runs.values())
    baseline = runs["breadth-first"].total_time
    out = {}
    for variant, run in runs.items():
        curve = run.curve(points, until)
        curve["efficiency"] = [
            round(q / (t / baseline), 4) if t > 0 else 0.0
            for t, q in zip(curve["t"], curve["quality"], strict=True)
        ]
        out[variant] = curve
    return out


def protocol_check(web: WebSpec, connections: int) -> dict[str, Any]:
    """Breadth-first and performance-first on the web with all servers HTTP/1.0, then 1.1."""

    def with_servers(max_requests: int) -> WebSpec:
        hosts = tuple(
            dataclasses.replace(
                h, max_requests_per_connection=max_requests, http10=max_requests == 1
            )
            for h in web.hosts
        )
        return WebSpec(hosts, web.pages, web.seeds)

    out: dict[str, Any] = {}
    http10, http11 = with_servers(1), with_servers(100)
    for variant in ("breadth-first", "performance-first"):
        r10 = simulate(http10, variant, connections=connections)
        r11 = simulate(http11, variant, connections=connections)
        out[variant] = {
            "http10_total_time": r10.total_time,
            "http11_total_time": r11.total_time,
            "http10_pages_per_s": r10.pages / r10.total_time,
            "http11_pages_per_s": r11.pages / r11.total_time,
            "throughput_ratio": r10.total_time / r11.total_time,
            # Throughput while the crawl is not yet tail-bound: the first half of the pages.
            "first_half_ratio": r10.time_to_pages(0.5) / r11.time_to_pages(0.5),
        }
    return out


def sweep(web: WebSpec, log: Callable[[str], None], **options: Any) -> dict[str, Any]:
    """Throughput and the reference's half-time figures for every K (BF first: the baseline)."""
    out: dict[str, Any] = {variant: {} for variant in SWEEP_VARIANTS}
    for k in SWEEP_K:
        baseline = 0.0
        for variant in SWEEP_VARIANTS:
            run = simulate(web, variant, connections=k, **options)
            if variant == "breadth-first":
                baseline = run.total_time
            out[variant][str(k)] = {
                "total_time": run.total_time,
                "pages_per_s": run.pages / run.total_time,
                "pages_per_s_first_half": 0.5 * run.pages / run.time_to_pages(0.5),
                "t80": run.time_to_quality(0.8),
                "pages_at_half_bf": run.pages_at(0.5 * baseline),
                "quality_at_30pct_bf": run.quality_at(0.3 * baseline),
            }
        log(f"    sweep K={k} done")
    return out


def sweep_shapes_table(data: dict[str, Any]) -> str:
    """Per K: performance-first / breadth-first pages at ½T_BF, crawl-capability Q at 30%."""
    bf, pf, cc = (data[v] for v in SWEEP_VARIANTS)
    rows = [
        "| K | T_BF s | BF pages @ ½T_BF | PF / BF pages @ ½T_BF | CC Q @ 30% T_BF |",
        "|---|---|---|---|---|",
    ]
    for k in map(str, SWEEP_K):
        rows.append(
            f"| {k} | {bf[k]['total_time']:.1f} | {bf[k]['pages_at_half_bf']:,} "
            f"| {pf[k]['pages_at_half_bf'] / bf[k]['pages_at_half_bf']:.2f} "
            f"| {cc[k]['quality_at_30pct_bf']:.3f} |"
        )
    return "\n".join(rows) + "\n"


# -- checks against the reference ---------------------------------------------------------


def _check(ident: str, text: str, target: str, measured: str, met: bool) -> dict[str, Any]:
    return {"id": ident, "shape": text, "target": target, "measured": measured, "met": met}


def checks(
    main: dict[str, dict[str, dict[str, Any]]], proto: dict[str, Any]
) -> list[dict[str, Any]]:
    """Each reference shape as a pass/fail on the measured summaries (session model)."""
    pr, zf = main["pagerank"], main["zipf"]
    t_bf = pr["breadth-first"]["total_time"]
    out = []
    cc = pr["crawl-capability"]
    out.append(
        _check(
            "pr-cc-80-at-30",
            "PageRank: crawl-capability gathers >= 80% of the quality in <= 30% of T_BF",
            "Q(0.3 T_BF) >= 0.80",
            f"{cc['quality_at_30pct_bf']:.3f} (t80 = {cc['t80'] / t_bf:.2f} T_BF)",
            cc["quality_at_30pct_bf"] >= 0.80,
        )
    )
    bf_pages, pf_pages = (
        pr["breadth-first"]["pages_at_half_bf"],
        pr["performance-first"]["pages_at_half_bf"],
    )
    out.append(
        _check(
            "pf-1.5x-pages",
            "performance-first downloads >= 1.5x breadth-first's pages at half of T_BF",
            "ratio >= 1.5",
            f"{pf_pages / bf_pages:.2f} ({pf_pages} vs {bf_pages})",
            pf_pages >= 1.5 * bf_pages,
        )
    )
    q_half = {v: pr[v]["quality_at_half_pages"] for v in ("quality-first", "crawl-capability")}
    out.append(
        _check(
            "pr-80-at-half-pages",
            "PageRank: quality-first and crawl-capability hold 80% of the quality after half "
            "the pages",
            ">= 0.80 each",
            ", ".join(f"{v} {q:.3f}" for v, q in q_half.items()),
            all(q >= 0.80 for q in q_half.values()),
        )
    )
    zcc, zqf = zf["crawl-capability"], zf["quality-first"]
    # Readings at one time saturate late in a crawl (both near 100% at T_BF/2), so compare
    # the whole curves: their mean over [0, T_BF], and when they reach 50% and 80%.
    above = (
        zcc["mean_quality_bf"] >= zqf["mean_quality_bf"]
        and zcc["t50"] <= zqf["t50"]
        and zcc["t80"] <= zqf["t80"]
    )
    out.append(
        _check(
            "zipf-cc-above-qf",
            "Zipf: crawl-capability above quality-first on quality",
            "mean Q over [0, T_BF] higher, t50 and t80 sooner",
            f"mean {zcc['mean_quality_bf']:.3f} vs {zqf['mean_quality_bf']:.3f}; "
            f"t50 {zcc['t50']:.1f} s vs {zqf['t50']:.1f} s; "
            f"t80 {zcc['t80']:.1f} s vs {zqf['t80']:.1f} s",
            above,
        )
    )
    out.append(
        _check(
            "zipf-cc-60-80",
            "Zipf: crawl-capability reaches 60% of the quality at 1/3 of T_BF, 80% at 1/2",
            "Q(T_BF/3) >= 0.60, Q(T_BF/2) >= 0.80",
            f"{zcc['quality_at_33pct_bf']:.3f}, {zcc['quality_at_50pct_bf']:.3f}",
            zcc["quality_at_33pct_bf"] >= 0.60 and zcc["quality_at_50pct_bf"] >= 0.80,
        )
    )
    for model, table in (("PageRank", pr), ("Zipf", zf)):
        best = min(STOCK, key=lambda v: table[v]["t80"])
        ratio = table["crawl-capability"]["t80"] / table[best]["t80"]
        out.append(
            _check(
                f"cc-vs-stock-{model.lower()}",
                f"{model}: crawl-capability reaches 80% of the quality in <= 0.6x the time "
                "of the best stock variant",
                "t80_CC / t80_best_stock <= 0.6",
                f"{ratio:.2f} ({table['crawl-capability']['t80']:.1f} s vs {best} "
                f"{table[best]['t80']:.1f} s)",
                ratio <= 0.6,
            )
        )
    ratio = proto["breadth-first"]["throughput_ratio"]
    out.append(
        _check(
            "http11-doubles",
            "HTTP/1.1 roughly doubles throughput over HTTP/1.0 (breadth-first)",
            "ratio in [1.6, 2.5]",
            f"{ratio:.2f} over the whole crawl "
            f"({proto['breadth-first']['first_half_ratio']:.2f} over the first half of the pages)",
            1.6 <= ratio <= 2.5,
        )
    )
    return out


# -- reporting ------------------------------------------------------------------------------


def _fmt(x: float, digits: int = 1) -> str:
    return "inf" if math.isinf(x) else f"{x:.{digits}f}"


def main_table(table: dict[str, dict[str, Any]]) -> str:
    head = (
        "| variant | total s | pages/s | t50 s | t80 s | t90 s | pages @ ½T_BF | Q @ 30% T_BF "
        "| Q @ ⅓T_BF | Q @ ½T_BF | mean Q [0, T_BF] | Q @ ½ pages | connections "
        "| politeness violations |"
    )
    rows = [head, "|" + "---|" * 14]
    for variant, s in table.items():
        rows.append(
            f"| {LABELS[variant]} | {_fmt(s['total_time'])} | {_fmt(s['pages_per_s'])} "
            f"| {_fmt(s['t50'])} | {_fmt(s['t80'])} | {_fmt(s['t90'])} "
            f"| {s['pages_at_half_bf']:,} | {s['quality_at_30pct_bf']:.3f} "
            f"| {s['quality_at_33pct_bf']:.3f} | {s['quality_at_50pct_bf']:.3f} "
            f"| {s['mean_quality_bf']:.3f} | {s['quality_at_half_pages']:.3f} "
            f"| {s['connections_opened']:,} | {s['politeness_violations']:,} |"
        )
    return "\n".join(rows) + "\n"


def checks_table(items: list[dict[str, Any]]) -> str:
    rows = ["| shape | target | measured | met |", "|---|---|---|---|"]
    for c in items:
        rows.append(
            f"| {c['shape']} | {c['target']} | {c['measured']} "
            f"| {'yes' if c['met'] else '**no**'} |"
        )
    return "\n".join(rows) + "\n"


def sweep_table(data: dict[str, Any]) -> str:
    rows = [
        "| variant | " + " | ".join(f"K={k}" for k in SWEEP_K) + " |",
        "|---|" + "---|" * len(SWEEP_K),
    ]
    for variant, per_k in data.items():
        cells = [
            f"{per_k[str(k)]['pages_per_s']:.0f} ({per_k[str(k)]['pages_per_s_first_half']:.0f})"
            for k in SWEEP_K
        ]
        rows.append(f"| {LABELS[variant]} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def pf_ratio_over_time(runs: dict[str, CrawlRun]) -> list[tuple[float, float]]:
    bf, pf = runs["breadth-first"], runs["performance-first"]
    out = []
    for frac in (0.05, 0.1, 0.2, 0.3, 0.5):
        t = frac * bf.total_time
        out.append((frac, pf.pages_at(t) / max(1, bf.pages_at(t))))
    return out


def plot_model(
    model: str, data: dict[str, dict[str, list[float]]], baseline: float, path: Path, title: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for variant, curve in data.items():
        style = STYLES.get(variant, "-")
        kwargs = {
            "color": COLORS[variant],
            "linestyle": style,
            "label": LABELS[variant],
            "zorder": 3 if variant == "scrapy-dfo" else 2,
        }
        axes[0].plot(curve["t"], curve["pages"], **kwargs)
        axes[1].plot(curve["t"], [100 * q for q in curve["quality"]], **kwargs)
        start = next((i for i, t in enumerate(curve["t"]) if t >= 0.02 * baseline), 1)
        axes[2].plot(curve["t"][start:], curve["efficiency"][start:], **kwargs)
    for ax in axes:
        for frac in (0.3, 0.5, 1.0):
            ax.axvline(frac * baseline, color="#cccccc", linewidth=0.8, zorder=0)
        ax.set_xlabel("time (s, virtual)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("pages downloaded")
    axes[0].set_title("pages vs time")
    axes[1].set_ylabel("% of total quality")
    axes[1].set_title(f"quality ({model}) vs time")
    axes[2].set_ylabel("E(t) = (Q(t)/Q) / (t/T_BF)")
    axes[2].set_title("efficiency vs time")
    axes[1].legend(loc="lower right", fontsize=8)
    fig.suptitle(title + "  (grey lines: 30%, 50%, 100% of T_BF)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sweep(data: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for variant, per_k in data.items():
        ks = list(SWEEP_K)
        for ax, key in zip(axes, ("pages_per_s", "pages_per_s_first_half"), strict=True):
            ax.plot(
                ks,
                [per_k[str(k)][key] for k in ks],
                marker="o",
                color=COLORS[variant],
                label=LABELS[variant],
            )
    axes[0].set_title("whole crawl: pages / total time")
    axes[1].set_title("first half of the pages: pages / 2 / time to reach them")
    for ax in axes:
        ax.set_xlabel("K (open connections)")
        ax.set_ylabel("pages per second (virtual)")
        ax.set_xticks(list(SWEEP_K))
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def environment() -> dict[str, Any]:
    import numpy

    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 servers, 6,000 pages")
    parser.add_argument("--seed", type=int, default=0, help="web seed of the main run")
    parser.add_argument(
        "--extra-seeds", default="1,2", help="comma-separated seeds for the robustness table"
    )
    parser.add_argument("--connections", type=int, default=64, help="K (default 64)")
    parser.add_argument("--per-domain", type=int, default=8, help="stock per-server limit")
    parser.add_argument("--points", type=int, default=200, help="samples per stored curve")
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    n_servers, n_pages = (100, 6000) if args.quick else (500, 30_000)
    name = "sim_quick" if args.quick else "sim"
    extra_seeds = [int(s) for s in args.extra_seeds.split(",") if s.strip()]
    command = "python " + " ".join(
        shlex.quote(a) for a in [os.path.relpath(__file__), *sys.argv[1:]]
    )
    out_dir: Path = args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {msg}", flush=True)

    k = args.connections
    stock = {"per_domain": args.per_domain}

    def opts(variant: str, **extra: Any) -> dict[str, Any]:
        return {**extra, **(stock if variant in STOCK else {})}

    def run_variants(web: WebSpec, **extra: Any) -> dict[str, CrawlRun]:
        runs = {}
        for variant in VARIANTS:
            t0 = time.perf_counter()
            runs[variant] = simulate(web, variant, connections=k, **opts(variant, **extra))
            log(f"    {variant:18s} {time.perf_counter() - t0:5.2f}s")
        return runs

    webs: dict[str, WebSpec] = {}
    web_info: dict[str, Any] = {}
    main_runs: dict[str, dict[str, dict[str, CrawlRun]]] = {"session": {}, "pool": {}}
    for model in QUALITY_MODELS:
        t0 = time.perf_counter()
        webs[model] = generate_paper_web(n_servers, n_pages, seed=args.seed, quality=model)
        web_info[model] = {**web_stats(webs[model]), "generate_s": time.perf_counter() - t0}
        for reuse in ("session", "pool"):
            log(f"{model}, {reuse} model")
            main_runs[reuse][model] = run_variants(webs[model], reuse=reuse)

    main_summary = {
        reuse: {model: summaries(runs) for model, runs in per_model.items()}
        for reuse, per_model in main_runs.items()
    }
    main_curves = {
        reuse: {model: curves(runs, args.points) for model, runs in per_model.items()}
        for reuse, per_model in main_runs.items()
    }

    log("connections sweep (PageRank web, session model)")
    sweep_data = sweep(webs["pagerank"], log)
    log("HTTP/1.0 vs HTTP/1.1")
    proto = protocol_check(webs["pagerank"], k)

    log("independent sizes and speeds (size_speed_correlation=0)")
    independent: dict[str, Any] = {}
    for model in QUALITY_MODELS:
        iweb = generate_paper_web(
            n_servers, n_pages, seed=args.seed, quality=model, size_speed_correlation=0.0
        )
        independent[model] = {"web": web_stats(iweb), "summary": summaries(run_variants(iweb))}

    robustness: dict[str, Any] = {}
    for seed in extra_seeds:
        log(f"seed {seed}")
        per_model = {}
        for model in QUALITY_MODELS:
            sweb = generate_paper_web(n_servers, n_pages, seed=seed, quality=model)
            per_model[model] = summaries(run_variants(sweb))
        robustness[str(seed)] = {"summary": per_model, "checks": checks(per_model, proto)}

    main_checks = checks(main_summary["session"], proto)
    pool_checks = checks(main_summary["pool"], proto)
    independent_checks = checks({m: independent[m]["summary"] for m in QUALITY_MODELS}, proto)
    pf_ratio = pf_ratio_over_time(main_runs["session"]["pagerank"])
    elapsed = time.perf_counter() - started

    pngs = []
    for model in QUALITY_MODELS:
        png = out_dir / f"{name}_{model}.png"
        baseline = main_runs["session"][model]["breadth-first"].total_time
        plot_model(
            model,
            main_curves["session"][model],
            baseline,
            png,
            f"{n_servers} servers, {n_pages:,} pages, K={k}, seed {args.seed}, session model",
        )
        pngs.append(png)
    png = out_dir / f"{name}_sweep.png"
    plot_sweep(sweep_data, png, f"Throughput vs connections ({n_servers} servers, PageRank web)")
    pngs.append(png)

    data = {
        "command": command,
        "environment": environment(),
        "elapsed_s": elapsed,
        "parameters": {
            "n_servers": n_servers,
            "n_pages": n_pages,
            "seed": args.seed,
            "connections": k,
            "per_domain": args.per_domain,
            "generator": "scrapy_twolevel.sim.webgen.generate_paper_web defaults",
        },
        "definitions": DEFINITIONS,
        "webs": web_info,
        "checks": {"session": main_checks, "pool": pool_checks, "independent": independent_checks},
        "summary": main_summary,
        "curves": main_curves,
        "performance_first_over_breadth_first": [
            {"fraction_of_T_BF": f, "pages_ratio": r} for f, r in pf_ratio
        ],
        "sweep": sweep_data,
        "http10_vs_http11": proto,
        "independent_sizes_and_speeds": independent,
        "robustness": robustness,
    }
    (out_dir / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")

    stats = web_info["pagerank"]
    md = [
        "# Crawl efficiency in simulation (reference study's shapes)",
        "",
        f"Command: `{command}`; {data['environment']['date']}, Python "
        f"{data['environment']['python']}; whole run {elapsed:.0f} s (virtual-clock "
        "simulation: every figure below is exactly reproducible).",
        "",
        f"Web (seed {args.seed}): {stats['servers']} servers, {stats['pages']:,} pages, "
        f"{stats['links']:,} links ({100 * stats['same_server_link_share']:.1f}% same-server), "
        f"seeds = the {stats['seeds']} home pages; servers: "
        f"{100 * stats['http10_share']:.0f}% HTTP/1.0, "
        f"{100 * stats['keepalive_max_share']:.0f}% 100 requests per connection, "
        f"{100 * stats['middle_share']:.0f}% in between; median connection / response time "
        f"{stats['median_connection_time']:.3f} / {stats['median_response_time']:.3f} s, "
        f"{100 * stats['fast_server_share']:.0f}% of servers answer in < 100 ms, "
        f"{100 * stats['slow_server_share']:.1f}% take > 1 s; pages per server median "
        f"{stats['median_pages_per_server']}, max {stats['max_pages_per_server']}; in-degree "
        f"median {stats['median_in_degree']}, max {stats['max_in_degree']}. K = {k} "
        f"connections; stock Scrapy: CONCURRENT_REQUESTS = {k}, "
        f"CONCURRENT_REQUESTS_PER_DOMAIN = {args.per_domain}.",
        "",
        "## Reference shapes (session model)",
        "",
        checks_table(main_checks),
        "Performance-first / breadth-first pages over time: "
        + ", ".join(f"{r:.2f}x at {f:.0%} of T_BF" for f, r in pf_ratio)
        + ".",
        "",
    ]
    for model in QUALITY_MODELS:
        md += [
            f"## {model} quality, session model (T_BF = "
            f"{main_summary['session'][model]['breadth-first']['total_time']:.1f} s)",
            "",
            main_table(main_summary["session"][model]),
            f"![{model}]({name}_{model}.png)",
            "",
        ]
    for model in QUALITY_MODELS:
        md += [
            f"## {model} quality, pool model (sensitivity)",
            "",
            main_table(main_summary["pool"][model]),
        ]
    md += ["Shapes in the pool model:", "", checks_table(pool_checks)]
    md += [
        "## Connections sweep (PageRank web, session model)",
        "",
        "Pages per second over the whole crawl (in brackets: over the first half of the "
        "pages, before the crawl is bound by the last servers' single connections).",
        "",
        sweep_table(sweep_data),
        f"![sweep]({name}_sweep.png)",
        "",
        "The reference's half-time shapes at each K (T_BF: breadth-first's total time at that K):",
        "",
        sweep_shapes_table(sweep_data),
        "## HTTP/1.0 vs HTTP/1.1 (same web, every server one or the other)",
        "",
        "| variant | HTTP/1.0 total s | HTTP/1.1 total s | ratio (whole) | ratio (first half) |",
        "|---|---|---|---|---|",
        *[
            f"| {v} | {p['http10_total_time']:.1f} | {p['http11_total_time']:.1f} "
            f"| {p['throughput_ratio']:.2f} | {p['first_half_ratio']:.2f} |"
            for v, p in proto.items()
        ],
        "",
        "## Independent server sizes and speeds (size_speed_correlation = 0)",
        "",
    ]
    for model in QUALITY_MODELS:
        md += [f"### {model}", "", main_table(independent[model]["summary"])]
    md += ["Shapes on that web:", "", checks_table(independent_checks)]
    md += ["## Other seeds (session model)", ""]
    for seed, entry in robustness.items():
        md += [f"### seed {seed}", "", checks_table(entry["checks"])]
    md += ["## Definitions", "", *[f"- **{k_}**: {v}" for k_, v in DEFINITIONS.items()], ""]
    (out_dir / f"{name}.md").write_text("\n".join(md), encoding="utf-8")

    print()
    for model in QUALITY_MODELS:
        print(f"## {model} (session model)\n")
        print(main_table(main_summary["session"][model]))
    print(checks_table(main_checks))
    print(sweep_table(sweep_data))
    print(sweep_shapes_table(sweep_data))
    print(f"Whole run: {elapsed:.0f} s; results in {out_dir}/{name}*")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
