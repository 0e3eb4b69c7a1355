"""Dead hosts and cross-host redirects at realistic timeouts: what they cost a whole crawl.

Issue 20's target: on a web with 3 hosts that never answer (a 30-s download timeout) and
30% of the cross-host links going through 301 redirects, a crawl's total time must stay
within 1.5x, and its time to 80% of the quality within 1.3x, of the same web without the
dead hosts; no page may be lost. (:mod:`hostile_hosts` measures the same question with
every timeout scaled down to a 1-s crawl; this study keeps the defaults.)

- **Webs.** ``generate_web(30, 20, seed=1, redirects=R, failures={0, 1, 2: "hang"})``, R
  chosen so that redirects carry 30% of the cross-host links, is the *hostile* web; the
  *normal* web is the same spec with the three hosts working (same links, same redirects).
  The script checks that the hang hosts hide no other page.
- **Crawl length.** The test web's delays are multiplied by ``--delay-scale`` (default 10
  and 20: a normal crawl of about 75 s and 150 s), because a dead host costs a fixed time
  (its timeouts and back-offs), so the ratio depends on how long the crawl is; both are
  reported.
- **Variants.** crawl-capability (the add-on with its defaults: ``TWOLEVEL_BACKOFF`` 30 s,
  ``TWOLEVEL_BACKOFF_MAX`` 600 s, ``TWOLEVEL_FAILED_SESSIONS`` 3,
  ``TWOLEVEL_FIRST_ANSWER_TIMEOUT`` 10 s) and stock Scrapy for
  context; ``CONCURRENT_REQUESTS = 8``, ``DOWNLOAD_TIMEOUT = 30`` for both.
- **Metrics** as in :mod:`hostile_hosts`: total time (Scrapy's ``elapsed_time_seconds``),
  t80 over the hostile web's reachable pages, complete (every reachable page fetched).

Usage::

    python benchmarks/dead_hosts.py                   # scales 10 and 20, about 25 minutes
    python benchmarks/dead_hosts.py --delay-scale 10  # one scale

Writes ``benchmarks/results/dead_hosts.json``, ``benchmarks/results/dead_hosts.md`` and
``docs/results/dead_hosts.inc``.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hostile_hosts as hh
import reporting
from harness import RESULTS, report
from scrapy_twolevel.testweb import WebSpec, generate_web

SHAPE = {"n_hosts": 30, "pages_per_host": 20, "seed": 1}
HANG = [0, 1, 2]
REDIRECT_SHARE = 0.3
TIMEOUT = 30
TOTAL_TARGET, T80_TARGET = 1.5, 1.3
VARIANTS = ("crawl-capability", hh.STOCK)
CRAWL_TIMEOUT = 1800


def webs() -> tuple[WebSpec, WebSpec, int]:
    """The normal and hostile webs, and the number of redirects."""
    plain = generate_web(**SHAPE)
    cross = sum(1 for p in plain.pages for t in p.links if plain.pages[t].host != p.host)
    redirects = round(cross * REDIRECT_SHARE / (1 - REDIRECT_SHARE))
    hostile = generate_web(**SHAPE, redirects=redirects, failures=dict.fromkeys(HANG, "hang"))
    normal = dataclasses.replace(
        hostile, hosts=[dataclasses.replace(h, failure=None) for h in hostile.hosts]
    )
    if not hh.same_fetchable_pages(normal, hostile):
        raise SystemExit("the hang hosts hide other pages: the comparison would not be fair")
    return normal, hostile, redirects


def settings(variant: str) -> dict[str, Any]:
    base = {"CONCURRENT_REQUESTS": 8, "DOWNLOAD_TIMEOUT": TIMEOUT}
    if variant == hh.STOCK:
        return base
    return {**base, "ADDONS": {"scrapy_twolevel.Addon": 0}, "TWOLEVEL_POLICY": variant}


def row(scale: float, variant: str, pair: dict[str, Any]) -> list[str]:
    n, h = pair["normal"], pair["hostile"]
    if "error" in n or "error" in h:
        return [f"{scale:g}", variant, n.get("error", ""), h.get("error", "")] + [""] * 7
    total = h["total_s"] / n["total_s"]
    t80 = h["t80_s"] / n["t80_s"] if h["t80_s"] and n["t80_s"] else None
    met = total <= TOTAL_TARGET and t80 is not None and t80 <= T80_TARGET and h["complete"]
    return [
        f"{scale:g}",
        variant,
        f"{n['total_s']:.0f}",
        f"{h['total_s']:.0f}",
        report.ratio(total),
        hh._s(n["t80_s"]),
        hh._s(h["t80_s"]),
        "n/a" if t80 is None else report.ratio(t80),
        f"{h['pages_fetched']}/{h['reachable_pages']}",
        hh._s(h.get("hang_last_request_s"), 0),
        ("context only: " if variant == hh.STOCK else "") + report.yes_no(met),
    ]


def main() -> int:
    parser = report.arg_parser(__doc__)
    parser.add_argument("--delay-scale", type=float, action="append", help="default: 10 and 20")
    args = parser.parse_args()
    scales = args.delay_scale or [10.0, 20.0]
    normal, hostile, redirects = webs()
    common = hostile.reachable()
    quality_total = sum(hostile.pages[p].quality for p in common)
    watch = hh.watch_settings([hostile.hosts[h].address for h in HANG])
    print(f"{redirects} redirects; {len(normal.reachable())} vs {len(common)} reachable pages")
    started = time.monotonic()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        files = {"normal": Path(tmp) / "normal.json", "hostile": Path(tmp) / "hostile.json"}
        files["normal"].write_text(normal.to_json())
        files["hostile"].write_text(hostile.to_json())
        for scale in scales:
            for variant in VARIANTS:
                pair: dict[str, Any] = {"delay_scale": scale, "variant": variant}
                for name, web in (("normal", normal), ("hostile", hostile)):
                    result = hh.crawl(
                        Path(tmp), files[name], {**settings(variant), **watch}, CRAWL_TIMEOUT, scale
                    )
                    if isinstance(result, str):
                        pair[name] = {"error": result, "complete": False}
                    else:
                        pair[name] = hh.measure(result, web, common, quality_total, HANG)
                        pair[name].pop("curve")
                    print(f"scale {scale:g} {variant:17} {name:7} {pair[name].get('total_s')}")
                runs.append(pair)
    elapsed = time.monotonic() - started
    head = report.columns(
        "delay scale | variant | total s, normal | total s, hostile | total ratio | "
        "t80 s, normal | t80 s, hostile | t80 ratio | pages, hostile | "
        "last request to a dead host at s | targets met"
    )
    table = (head, [row(r["delay_scale"], r["variant"], r) for r in runs])
    data = {
        "command": report.command_line(__file__, sys.argv[1:]),
        "environment": reporting.environment(),
        "web": {**SHAPE, "hang_hosts": HANG, "redirects": redirects},
        "settings": {v: settings(v) for v in VARIANTS},
        "targets": {"total_ratio": TOTAL_TARGET, "t80_ratio": T80_TARGET},
        "runs": runs,
        "run_time_s": round(elapsed, 1),
    }
    (RESULTS / "dead_hosts.json").write_text(report.compact_json(data) + "\n")
    intro = [
        f"Command: ``{data['command']}``; {data['environment']['date']}; "
        f"the whole run took {elapsed / 60:.0f} minutes.",
        f"Web: ``generate_web(30, 20, seed=1, redirects={redirects})``, hosts {HANG} hang "
        "(accept connections, never answer) on the hostile web and work on the normal one; "
        f"{len(common)} and {len(normal.reachable())} reachable pages. "
        f"DOWNLOAD_TIMEOUT = {TIMEOUT} s, CONCURRENT_REQUESTS = 8, the add-on's failure "
        f"settings at their defaults. Targets: total ratio <= {TOTAL_TARGET}, t80 ratio <= "
        f"{T80_TARGET}, no page lost. One crawl of each web per row.",
    ]
    report.publish(
        "dead_hosts",
        "Dead hosts and redirects at a 30-s timeout",
        intro,
        [("Hostile / normal", "", [("", table)])],
        {
            "delay scale": "the test web's connection and response delays multiplied by this",
            "t80": "seconds from the first request until the pages served (of the hostile "
            "web's reachable set) hold 80% of that set's quality",
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
