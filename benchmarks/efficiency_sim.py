"""Crawl efficiency in simulation: the reference study's web, its four policies and stock Scrapy.

Reproduces the *shape* of the two-level scheduling study (Cao, Jiang and Singh, *Scheduling
Web Crawl for Better Performance and Quality*, Princeton TR-682-03): a university domain of
500 servers and 30,000 pages crawled over at most K = 64 connections, one per server.
Everything runs on a virtual clock (:mod:`scrapy_twolevel.testweb.sim.des`) over a generated web
(:mod:`scrapy_twolevel.testweb.sim.webgen`), so a full run takes about a minute and is exactly
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

import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import efficiency as eff
from harness import report
from harness.efficiency import QUALITY_MODELS, STOCK
from harness.env import environment
from harness.report import Clock, arg_parser, command_line
from scrapy_twolevel.testweb.sim.des import VARIANTS, CrawlRun, simulate
from scrapy_twolevel.testweb.sim.webgen import generate_paper_web, web_stats
from scrapy_twolevel.testweb.web import WebSpec

SWEEP_K = (8, 16, 32, 64, 96, 128)
SWEEP_VARIANTS = ("breadth-first", "performance-first", "crawl-capability")

SIM_DEFINITIONS = {
    **eff.DEFINITIONS,
    "session model": "the crawler closes a connection it has nothing to send on (two-level: "
    "when the host's session ends), as in the reference's T = 2*ConnectionTime + "
    "P*ResponseTime/p",
    "pool model": "idle connections stay open until the server's keep-alive timeout "
    "(30 s, the test web server's), as Scrapy's HTTP connection pool keeps them",
}


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


def sweep_shapes_table(data: dict[str, Any]) -> report.Table:
    """Per K: performance-first / breadth-first pages at ½T_BF, crawl-capability Q at 30%."""
    bf, pf, cc = (data[v] for v in SWEEP_VARIANTS)
    rows = []
    for k in map(str, SWEEP_K):
        rows.append(
            [
                k,
                f"{bf[k]['total_time']:.1f}",
                f"{bf[k]['pages_at_half_bf']:,}",
                f"{pf[k]['pages_at_half_bf'] / bf[k]['pages_at_half_bf']:.2f}",
                f"{cc[k]['quality_at_30pct_bf']:.3f}",
            ]
        )
    head = ["K", "T_BF s", "BF pages @ ½T_BF", "PF / BF pages @ ½T_BF", "CC Q @ 30% T_BF"]
    return head, rows


def sweep_table(data: dict[str, Any]) -> report.Table:
    rows = []
    for variant, per_k in data.items():
        cells = [
            f"{per_k[str(k)]['pages_per_s']:.0f} ({per_k[str(k)]['pages_per_s_first_half']:.0f})"
            for k in SWEEP_K
        ]
        rows.append([eff.LABELS[variant], *cells])
    return ["variant", *(f"K={k}" for k in SWEEP_K)], rows


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
                color=eff.COLORS[variant],
                label=eff.LABELS[variant],
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
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick="100 servers, 6,000 pages; prints, writes nothing")
    parser.add_argument("--seed", type=int, default=0, help="web seed of the main run")
    parser.add_argument(
        "--extra-seeds", default="1,2", help="comma-separated seeds for the robustness table"
    )
    parser.add_argument("--connections", type=int, default=64, help="K (default 64)")
    parser.add_argument("--per-domain", type=int, default=8, help="stock per-server limit")
    parser.add_argument("--points", type=int, default=200, help="samples per stored curve")
    args = parser.parse_args(argv)

    n_servers, n_pages = (100, 6000) if args.quick else (500, 30_000)
    extra_seeds = [int(s) for s in args.extra_seeds.split(",") if s.strip()]
    command = command_line(__file__, sys.argv[1:])
    clock = Clock()
    log = clock.log

    k = args.connections
    stock = {"per_domain": args.per_domain}

    def run_variants(web: WebSpec, **extra: Any) -> dict[str, CrawlRun]:
        runs = {}
        for variant in VARIANTS:
            t0 = time.perf_counter()
            options = {**extra, **(stock if variant in STOCK else {})}
            runs[variant] = simulate(web, variant, connections=k, **options)
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
        reuse: {model: eff.summaries(runs) for model, runs in per_model.items()}
        for reuse, per_model in main_runs.items()
    }
    main_curves = {
        reuse: {model: eff.curves(runs, args.points) for model, runs in per_model.items()}
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
        independent[model] = {
            "web": web_stats(iweb),
            "summary": eff.summaries(run_variants(iweb)),
        }

    robustness: dict[str, Any] = {}
    for seed in extra_seeds:
        log(f"seed {seed}")
        per_model = {}
        for model in QUALITY_MODELS:
            sweb = generate_paper_web(n_servers, n_pages, seed=seed, quality=model)
            per_model[model] = eff.summaries(run_variants(sweb))
        robustness[str(seed)] = {"summary": per_model, "checks": eff.checks(per_model, proto)}

    main_checks = eff.checks(main_summary["session"], proto)
    pool_checks = eff.checks(main_summary["pool"], proto)
    independent_checks = eff.checks({m: independent[m]["summary"] for m in QUALITY_MODELS}, proto)
    pf_ratio = eff.pf_ratio_over_time(main_runs["session"]["pagerank"])
    elapsed = clock.elapsed()

    stats = web_info["pagerank"]
    web_text = (
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
        f"CONCURRENT_REQUESTS_PER_DOMAIN = {args.per_domain}."
    )
    pf_text = (
        "Performance-first / breadth-first pages over time: "
        + ", ".join(f"{r:.2f}x at {f:.0%} of T_BF" for f, r in pf_ratio)
        + "."
    )
    env = environment("numpy")
    header = (
        f"Command: ``{command}``; {env['date']}, Python {env['python']}; whole run "
        f"{elapsed:.0f} s (virtual-clock simulation: every figure is exactly reproducible)."
    )

    # (title, table) pairs, printed, written as Markdown and as the docs' reST fragment.
    sections: list[report.Section] = [
        ("Reference shapes (session model)", pf_text, [("", eff.checks_table(main_checks))])
    ]
    for model in QUALITY_MODELS:
        t_bf = main_summary["session"][model]["breadth-first"]["total_time"]
        sections.append(
            (
                f"{model} quality, session model (T_BF = {t_bf:.1f} s)",
                f"sim_{model}.png",
                [("", eff.main_table(main_summary["session"][model]))],
            )
        )
    for model in QUALITY_MODELS:
        sections.append(
            (
                f"{model} quality, pool model (sensitivity)",
                "",
                [("", eff.main_table(main_summary["pool"][model]))],
            )
        )
    sections.append(("Shapes in the pool model", "", [("", eff.checks_table(pool_checks))]))
    sections.append(
        (
            "Connections sweep (PageRank web, session model)",
            "sim_sweep.png",
            [
                (
                    "pages per second over the whole crawl (in brackets: over the first half "
                    "of the pages)",
                    sweep_table(sweep_data),
                ),
                ("the reference's half-time shapes at each K", sweep_shapes_table(sweep_data)),
            ],
        )
    )
    proto_rows = [
        [
            v,
            f"{p['http10_total_time']:.1f}",
            f"{p['http11_total_time']:.1f}",
            f"{p['throughput_ratio']:.2f}",
            f"{p['first_half_ratio']:.2f}",
        ]
        for v, p in proto.items()
    ]
    proto_head = ["variant", "HTTP/1.0 total s", "HTTP/1.1 total s", "ratio", "ratio (1st half)"]
    sections.append(
        (
            "HTTP/1.0 vs HTTP/1.1 (every server one or the other)",
            "",
            [("", (proto_head, proto_rows))],
        )
    )
    sections.append(
        (
            "Independent server sizes and speeds (size_speed_correlation = 0)",
            "",
            [(m, eff.main_table(independent[m]["summary"])) for m in QUALITY_MODELS]
            + [("shapes on that web", eff.checks_table(independent_checks))],
        )
    )
    sections.append(
        (
            "Other seeds (session model)",
            "",
            [(f"seed {seed}", eff.checks_table(e["checks"])) for seed, e in robustness.items()],
        )
    )

    md, inc = report.render(
        "Crawl efficiency in simulation (reference study's shapes)",
        [header, web_text],
        sections,
        SIM_DEFINITIONS,
    )
    print()
    report.print_sections(sections[:3])
    print(f"Whole run: {elapsed:.0f} s")
    if args.quick:
        return 0

    for model in QUALITY_MODELS:
        baseline = main_runs["session"][model]["breadth-first"].total_time
        eff.plot_model(
            model,
            main_curves["session"][model],
            baseline,
            report.DOCS_RESULTS / f"sim_{model}.png",
            f"Simulation: {n_servers} servers, {n_pages:,} pages, K={k}, seed {args.seed}, "
            "session model",
        )
    plot_sweep(
        sweep_data,
        report.DOCS_RESULTS / "sim_sweep.png",
        f"Simulation: throughput vs connections ({n_servers} servers, PageRank web)",
    )
    parameters = eff.web_parameters(
        n_servers,
        n_pages,
        args.seed,
        k,
        args.per_domain,
        generator="scrapy_twolevel.testweb.sim.webgen.generate_paper_web defaults",
    )
    checks = {"session": main_checks, "pool": pool_checks, "independent": independent_checks}
    data = eff.harness_record(
        command,
        env,
        elapsed,
        parameters,
        SIM_DEFINITIONS,
        web_info,
        checks,
        main_summary,
        main_curves,
        performance_first_over_breadth_first=[
            {"fraction_of_T_BF": f, "pages_ratio": r} for f, r in pf_ratio
        ],
        sweep=sweep_data,
        http10_vs_http11=proto,
        independent_sizes_and_speeds=independent,
        robustness=robustness,
    )
    eff.write_harness("sim", data, md, inc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
