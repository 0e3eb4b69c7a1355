"""The crawl-efficiency figures both efficiency harnesses share: metrics, checks, plots.

``efficiency_sim.py`` (discrete-event simulation) and ``efficiency_crawl.py`` (real
``scrapy crawl`` runs against the local test web) both turn a crawl into a
:class:`~scrapy_twolevel.testweb.sim.run.CrawlRun` and report it here, so the two harnesses
print the same figures, check the same reference shapes and draw the same three-panel
plots. Tables, docs fragments and figures are rendered by :mod:`harness.report`.

Outputs, per crawl-efficiency harness (``sim`` or ``crawl``):

- ``benchmarks/results/efficiency.json``: one section per harness with every curve and
  summary figure (a harness rewrites only its own section);
- ``benchmarks/results/efficiency_<harness>.md``: the tables, as printed;
- ``docs/results/efficiency_<harness>.inc``: the same tables in reStructuredText, included
  by ``docs/efficiency.rst``, and ``docs/results/<harness>_*.png``: the figures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import DOCS_RESULTS, RESULTS
from harness.report import Table, columns, save_figure, write_docs_fragment
from scrapy_twolevel.testweb.sim.des import STOCK_VARIANTS
from scrapy_twolevel.testweb.sim.run import CrawlRun

RESULTS_JSON = RESULTS / "efficiency.json"

QUALITY_MODELS = ("pagerank", "zipf")
STOCK = tuple(STOCK_VARIANTS)
LABELS = {
    "breadth-first": "breadth-first",
    "performance-first": "performance-first",
    "quality-first": "quality-first",
    "crawl-capability": "crawl-capability",
    "scrapy-dfo": "Scrapy PQ+LIFO (DFO)",
    "scrapy-bfo": "Scrapy PQ+FIFO (BFO)",
    "scrapy-dapq": "Scrapy DownloaderAwarePQ (default)",
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
    "T_BF": "total time of the two-level breadth-first crawl in the same run",
    "efficiency": "E(t) = (Q(t)/Q_total) / (t/T_BF): quality per second up to t, relative "
    "to breadth-first's average over its whole crawl",
    "t50/t80/t90": "time at which the crawl holds 50/80/90% of the total quality",
    "pages_at_half_bf": "pages downloaded at 0.5 * T_BF",
    "quality_at_Xpct_bf": "fraction of the total quality downloaded at X% of T_BF",
    "quality_at_half_pages": "fraction of the total quality in the first half of the pages",
    "mean_quality_bf": "mean of the quality fraction Q(t) over [0, T_BF] (area under the "
    "quality curve / T_BF)",
    "politeness_violations": "requests sent to a server while another request to it was in flight",
}


# -- figures --------------------------------------------------------------------------------


def summaries(runs: dict[str, CrawlRun]) -> dict[str, dict[str, Any]]:
    """Every run's summary, with breadth-first's total time as the baseline."""
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


def pf_ratio_over_time(runs: dict[str, CrawlRun]) -> list[tuple[float, float]]:
    """Performance-first's pages over breadth-first's at a few fractions of T_BF."""
    bf, pf = runs["breadth-first"], runs["performance-first"]
    out = []
    for frac in (0.05, 0.1, 0.2, 0.3, 0.5):
        t = frac * bf.total_time
        out.append((frac, pf.pages_at(t) / max(1, bf.pages_at(t))))
    return out


# -- checks against the reference ---------------------------------------------------------


def _check(ident: str, text: str, target: str, measured: str, met: bool) -> dict[str, Any]:
    return {"id": ident, "shape": text, "target": target, "measured": measured, "met": met}


def checks(
    main: dict[str, dict[str, dict[str, Any]]], proto: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Each reference shape and target as a pass/fail on the measured summaries.

    ``proto`` is the HTTP/1.0 vs HTTP/1.1 comparison, when the harness made one.
    """
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
            f"{pf_pages / max(1, bf_pages):.2f} ({pf_pages} vs {bf_pages})",
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
                f"{ratio:.2f} ({table['crawl-capability']['t80']:.1f} s vs {LABELS[best]} "
                f"{table[best]['t80']:.1f} s)",
                ratio <= 0.6,
            )
        )
    polite = {
        v: s["politeness_violations"]
        for table in (pr, zf)
        for v, s in table.items()
        if v not in STOCK
    }
    out.append(
        _check(
            "one-in-flight",
            "the two-level policies keep at most one request in flight per host",
            "0 politeness violations",
            f"{sum(polite.values())} violations over {len(polite)} two-level crawls",
            not any(polite.values()),
        )
    )
    if proto is not None:
        ratio = proto["breadth-first"]["throughput_ratio"]
        first_half = proto["breadth-first"]["first_half_ratio"]
        out.append(
            _check(
                "http11-doubles",
                "HTTP/1.1 roughly doubles throughput over HTTP/1.0 (breadth-first)",
                "ratio in [1.6, 2.5]",
                f"{ratio:.2f} over the whole crawl ({first_half:.2f} over the first half "
                "of the pages)",
                1.6 <= ratio <= 2.5,
            )
        )
    return out


# -- tables: rows once, rendered as Markdown (console, .md) or reStructuredText (docs) --------


def _fmt(x: float, digits: int = 1) -> str:
    return "inf" if math.isinf(x) else f"{x:.{digits}f}"


def main_table(table: dict[str, dict[str, Any]]) -> Table:
    head = columns(
        "variant | total s | pages/s | t50 s | t80 s | t90 s | pages @ ½T_BF | "
        "Q @ 30% T_BF | Q @ ⅓T_BF | Q @ ½T_BF | mean Q [0, T_BF] | Q @ ½ pages | "
        "connections | politeness violations"
    )
    rows = []
    for variant, s in table.items():
        rows.append(
            [
                LABELS[variant],
                _fmt(s["total_time"]),
                _fmt(s["pages_per_s"]),
                _fmt(s["t50"]),
                _fmt(s["t80"]),
                _fmt(s["t90"]),
                f"{s['pages_at_half_bf']:,}",
                f"{s['quality_at_30pct_bf']:.3f}",
                f"{s['quality_at_33pct_bf']:.3f}",
                f"{s['quality_at_50pct_bf']:.3f}",
                f"{s['mean_quality_bf']:.3f}",
                f"{s['quality_at_half_pages']:.3f}",
                f"{s['connections_opened']:,}",
                f"{s['politeness_violations']:,}",
            ]
        )
    return head, rows


def checks_table(items: list[dict[str, Any]]) -> Table:
    rows = [
        [c["shape"], c["target"], c["measured"], "yes" if c["met"] else "**no**"] for c in items
    ]
    return ["shape", "target", "measured", "met"], rows


# -- plots ----------------------------------------------------------------------------------


def plot_model(
    model: str,
    data: dict[str, dict[str, list[float]]],
    baseline: float,
    path: Path,
    title: str,
    clock: str = "virtual",
) -> None:
    """The reference's three panels: pages, quality and efficiency vs time, one curve each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for variant, curve in data.items():
        kwargs = {
            "color": COLORS[variant],
            "linestyle": STYLES.get(variant, "-"),
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
        ax.set_xlabel(f"time (s, {clock})")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("pages downloaded")
    axes[0].set_title("pages vs time")
    axes[1].set_ylabel("% of total quality")
    axes[1].set_title(f"quality ({model}) vs time")
    axes[2].set_ylabel("E(t) = (Q(t)/Q) / (t/T_BF)")
    axes[2].set_title("efficiency vs time")
    axes[1].legend(loc="lower right", fontsize=8)
    fig.suptitle(title + "  (grey lines: 30%, 50%, 100% of T_BF)", fontsize=10)
    save_figure(fig, path)


# -- result files ---------------------------------------------------------------------------


def harness_record(
    command: str,
    environment: dict[str, Any],
    elapsed: float,
    parameters: dict[str, Any],
    definitions: dict[str, Any],
    *results: Any,
    **more: Any,
) -> dict[str, Any]:
    """One harness's section of efficiency.json: how it ran, then ``webs, checks,
    summary, curves`` (``results``, in that order), then its own keys (``more``)."""
    record = {
        "command": command,
        "environment": environment,
        "elapsed_s": elapsed,
        "parameters": parameters,
        "definitions": definitions,
    }
    record.update(zip(("webs", "checks", "summary", "curves"), results, strict=True))
    return {**record, **more}


def web_parameters(
    n_servers: int, n_pages: int, seed: int, connections: int, per_domain: int | None, **more: Any
) -> dict[str, Any]:
    """The web and crawl both harnesses record (``more``: each one's own)."""
    common = (n_servers, n_pages, seed, connections, per_domain)
    names = ("n_servers", "n_pages", "seed", "connections", "per_domain")
    return {**dict(zip(names, common, strict=True)), **more}


def write_harness(
    harness: str, data: dict[str, Any], md: Sequence[str], inc: Sequence[str]
) -> None:
    """Store one harness's results: its section of efficiency.json, its .md and docs fragment.

    The other harness's section of ``efficiency.json`` is kept as it is.
    """
    combined: dict[str, Any] = {}
    if RESULTS_JSON.exists():
        combined = json.loads(RESULTS_JSON.read_text(encoding="utf-8"))
    combined[harness] = data
    RESULTS_JSON.write_text(json.dumps(combined, indent=1) + "\n", encoding="utf-8")
    (RESULTS / f"efficiency_{harness}.md").write_text("\n".join(md), encoding="utf-8")
    write_docs_fragment(f"efficiency_{harness}", inc)
    print(f"Results: {RESULTS_JSON} (section {harness!r}), {DOCS_RESULTS}/")
