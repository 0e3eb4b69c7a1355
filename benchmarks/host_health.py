"""Servers that refuse: nginx answering 429 + Retry-After to requests faster than a host's rate.

The same 28 documentation sites, rates, keep-alive limits and bandwidth caps as the
politeness-bound regime of :mod:`real_servers`, but each host *refuses* requests that come
faster than its rate (``limit_req`` without burst, ``limit_req_status 429``, a
``Retry-After`` of the host's request interval in whole seconds, at least 1) instead of
holding them. Scrapy's RetryMiddleware is on, as by default (it retries 429 twice).

- **the crawls**: Scrapy 2.19's defaults (``scrapy``) and the add-on with breadth-first and
  crawl-capability, each a fresh ``scrapy crawl`` process against a fresh nginx, with
  ``CONCURRENT_REQUESTS = 8`` and one request per host, stopped after ``--window`` seconds;
- **judged** from nginx's access log (:mod:`realweb.judge`): quality gathered in the window,
  requests refused, requests begun while another one to the host was being served;
- **the reference**: the clairvoyant schedule of :mod:`realweb.clairvoyant` (it never sends
  a request too soon, so it is the same as for the politeness-bound regime), and the rate
  bound (:func:`realweb.clairvoyant.rate_bound`): every host at its full rate from the
  first second, its best pages first, known in advance. With seed 1 and a 150-s window
  that bound is 0.694, so the issue's 0.70 cannot be met on this web by any schedule.

Targets (issue 20): at least 70% of the quality in the window and at least 2x Scrapy's
default; refused requests at most 10% of all requests; never two in flight at one host.

Set-up as for :mod:`real_servers` (nginx and the 28 documentation packages). Usage::

    python benchmarks/host_health.py            # 150-s window, ~10 min
    python benchmarks/host_health.py --quick    # 60-s window, scrapy and crawl-capability
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import scrapy

import scrapy_twolevel
from harness import DOCS_RESULTS, RESULTS, report
from harness.env import environment
from real_servers import draw_quality, installed, run_regime
from realweb import clairvoyant, corpus, servers

NAME = "host_health"
VARIANTS = ("scrapy", "breadth-first", "crawl-capability")
TARGETS = {"quality_in_window": 0.70, "vs_scrapy": 2.0, "refused_share": 0.10}


def refused(summary: dict[str, Any]) -> tuple[int, float]:
    """Requests refused (429 or 503) and their share of all requests."""
    count = summary["statuses"].get("429", 0) + summary["statuses"].get("503", 0)
    return count, count / max(1, summary["requests"])


def table(result: dict[str, Any]) -> report.Table:
    runs = result["runs"]
    base = runs.get("scrapy", {}).get("summary", {}).get("quality_at_window")
    head = report.columns(
        "variant | quality in window | vs scrapy | time to half s | pages | requests | "
        "refused (429/503) | refused share | overlapping | max in flight/host"
    )
    rows = []
    for variant, run in runs.items():
        s = run["summary"]
        count, share = refused(s)
        q = s["quality_at_window"]
        rows.append(
            [
                variant,
                f"{q:.3f}",
                report.ratio(q / base) if base else "-",
                "-" if s["time_to_half_s"] is None else f"{s['time_to_half_s']:.1f}",
                str(s["pages"]),
                str(s["requests"]),
                str(count),
                f"{100 * share:.1f}%",
                str(s["overlapping"]),
                str(s["max_in_flight_per_host"]),
            ]
        )
    ref = result["clairvoyant"]["summary"]
    q = ref["quality_at_window"]
    rows.append(
        ["clairvoyant (simulated)", f"{q:.3f}", report.ratio(q / base) if base else "-"]
        + [f"{ref['time_to_half_s']:.1f}" if ref["time_to_half_s"] else "-", str(ref["pages"])]
        + ["-"] * 5
    )
    if "rate_bound" in result:
        q = result["rate_bound"]
        rows.append(
            ["rate bound (no schedule passes it)", f"{q:.3f}"]
            + [report.ratio(q / base) if base else "-"]
            + ["-"] * 7
        )
    return head, rows


def targets(result: dict[str, Any]) -> tuple[report.Table, list[dict[str, Any]]]:
    runs = result["runs"]
    head = report.columns("target | crawl-capability | met")
    rows, items = [], []
    ours = runs.get("crawl-capability", {}).get("summary")
    base = runs.get("scrapy", {}).get("summary")
    if ours is None:
        return (head, rows), items
    q = ours["quality_at_window"]
    share = refused(ours)[1]
    overlaps = sum(r["summary"]["overlapping"] for v, r in runs.items() if v != "scrapy")
    bound = result.get("rate_bound")
    within = f" (rate bound {bound:.3f})" if bound is not None else ""
    checks = [
        (f"quality in the window ≥ 0.70{within}", f"{q:.3f}", q >= TARGETS["quality_in_window"]),
        ("refused ≤ 10% of requests", f"{100 * share:.1f}%", share <= TARGETS["refused_share"]),
        ("never two requests in flight at one host", str(overlaps), overlaps == 0),
    ]
    if base is not None and base["quality_at_window"]:
        ratio = q / base["quality_at_window"]
        most = (
            f" (rate bound {report.ratio(bound / base['quality_at_window'])})"
            if bound is not None
            else ""
        )
        checks.insert(1, (f"quality ≥ 2x scrapy's{most}", report.ratio(ratio), ratio >= 2.0))
    for what, figure, ok in checks:
        rows.append([what, figure, report.yes_no(ok)])
        items.append({"target": what, "value": figure, "met": ok})
    return (head, rows), items


def plot(
    result: dict[str, Any], out: Path, name: str = NAME, how: str = "429 + Retry-After"
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    draw_quality(ax, result, f"servers that refuse ({how}): quality over time")
    report.save_figure(fig, out / f"{name}_quality.png")


def main(argv: list[str] | None = None) -> int:
    parser = report.arg_parser(
        __doc__, quick="60-s window, scrapy and crawl-capability; writes nothing"
    )
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--window", type=float, default=150.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/twolevel-host-health"))
    parser.add_argument(
        "--status",
        type=int,
        choices=(429, 503),
        default=429,
        help="429: refusals with Retry-After; 503: nginx's default, a bare 503 (results: "
        "host_health_503.*)",
    )
    args = parser.parse_args(argv)
    name = NAME if args.status == 429 else f"{NAME}_{args.status}"
    how = "429 and Retry-After" if args.status == 429 else "a bare 503 (nginx's default)"
    sites = corpus.load_sites()
    if not installed(sites):
        return 2
    variants = args.variants.split(",")
    window = args.window
    if args.quick:
        variants = [v for v in variants if v in ("scrapy", "crawl-capability")]
        window = 60.0
    clock = report.Clock()
    command = report.command_line(__file__, sys.argv[1:] if argv is None else argv)
    data = corpus.build(args.workdir, sites)
    result = run_regime(
        "refusing",
        variants,
        sites,
        data,
        args.seed,
        window,
        args.workdir,
        clock,
        rate_scale=1.0,
        refuse=args.status,
    )
    # The rates of the run itself (its profiles table), not a second draw.
    rates = {p["site"]: p["rate_per_minute"] for p in result["profiles"]}
    result["rate_bound"] = clairvoyant.rate_bound(data, rates, window)
    (target_table, items) = targets(result)
    if args.quick:
        print(report.markdown(table(result)))
        print(report.markdown(target_table))
        return 0
    env = environment(
        {"scrapy": scrapy.__version__, "scrapy_twolevel": scrapy_twolevel.__version__},
        nginx=servers.nginx_version(),
    )
    elapsed = clock.elapsed()
    intro = [
        f"Generated by `{command}` on {env['date']} ({env['platform']}, {env['cpus']} CPUs); "
        f"Scrapy {env['scrapy']}, nginx {env['nginx']}; run time {elapsed / 60:.0f} min.",
        "The 28 documentation sites of the real-server benchmark, each host refusing "
        f"requests faster than its rate with {how}; Scrapy's RetryMiddleware "
        f"on; {servers.RATE_RANGE[0]:g}-{servers.RATE_RANGE[1]:g} requests per minute per "
        f"host; a {window:g}-s window.",
    ]
    sections: list[report.Section] = [
        (f"First {window:g} s", "", [("", table(result))]),
        ("Targets", "", [("", target_table)]),
        ("Quality over time", f"{NAME}_quality.png", []),
    ]
    definitions = {
        "quality in window": "sum of the qualities of the distinct pages served (200)",
        "refused share": "429 and 503 answers over all requests nginx logged",
        "overlapping": "requests begun while another one to the same host was being served",
        "rate bound": "every host served at its full rate from the first second, its best "
        "pages first, known in advance, no connection limit: what no schedule can pass",
    }
    figures = lambda: plot(result, DOCS_RESULTS, name, how)  # noqa: E731
    report.publish(name, "Servers that refuse", intro, sections, definitions, figures)
    record = {"command": command, "environment": env, "elapsed_s": elapsed, "targets": items}
    (RESULTS / f"{name}.json").write_text(report.compact_json({**record, "run": result}) + "\n")
    return report.finish(report.markdown(target_table), elapsed, f"{RESULTS}/{name}*")


if __name__ == "__main__":
    raise SystemExit(main())
