"""What the CPU-aware clairvoyant's time to half the quality owes to fetching ahead of its core.

Usage::

    python benchmarks/reference_study.py [--results NAME,NAME,...]

Crawls nothing: for committed real-server results (``benchmarks/results/NAME.json``; by
default the runs with the stall rule), it simulates the CPU-aware clairvoyant again with the
run's own CPU model, on one event loop (:func:`realweb.clairvoyant.schedule_loop`), with
backlogs of 5 MB (Scrapy's default ``SCRAPER_SLOT_MAX_ACTIVE_SIZE``) to 200 MB, handling
the received responses best first or as they arrived, and sets each beside the unbounded
reference the targets use and the run's crawl-capability. Writes
``results/reference_study.{json,md}`` and ``docs/results/reference_study.inc``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import real_servers
from harness import RESULTS, report
from realweb import clairvoyant, corpus

DEFAULT = [
    *(f"real_servers_stall_cpu_seed{s}" for s in (1, 2, 3)),
    *(f"real_servers_apache_stall_seed{s}" for s in (1, 2, 3)),
    *(f"real_servers_stall_seed{s}" for s in (1, 2, 3)),
    *(f"real_servers_apache_stall_politeness_seed{s}" for s in (1, 2, 3)),
    "real_servers_apache_stall_politeness_long_seed1",
]
BACKLOGS_MB = (5, 20, 50, 200)
NAME = "reference_study"


def study(name: str, workdir: Path) -> list[dict[str, Any]]:
    """Per regime of one committed run with a CPU model: the references' times to half."""
    saved = json.loads((RESULTS / f"{name}.json").read_text())
    web = "apache" if "--web apache" in saved["command"] else "nginx"
    data = corpus.build(workdir, corpus.load_sites(real_servers.WEBS[web].corpus))
    out = []
    for regime, result in saved["regimes"].items():
        model = real_servers.saved_model(result)
        if model is None:
            continue
        names, profiles = real_servers.saved_hosts(result)
        horizon = real_servers.horizon_of(result)
        loops = {}
        for mb in BACKLOGS_MB:
            for best_first in (True, False):
                curve = clairvoyant.schedule_loop(
                    data,
                    names,
                    profiles,
                    real_servers.CONNECTIONS,
                    horizon,
                    model,
                    mb * 1e6,
                    best_first,
                )
                summary = real_servers._reference_summary(curve, result["window_s"])
                loops[f"{mb} MB, {'best first' if best_first else 'as arrived'}"] = summary[
                    "time_to_half_s"
                ]
        out.append(
            {
                "run": name,
                "regime": regime,
                "web": web,
                "reference_s": result["clairvoyant_cpu"]["summary"]["time_to_half_s"],
                "crawl_capability_s": result["runs"]["crawl-capability"]["summary"][
                    "time_to_half_s"
                ],
                "one_loop_s": loops,
            }
        )
    return out


def table(rows: list[dict[str, Any]]) -> report.Table:
    keys = list(rows[0]["one_loop_s"]) if rows else []
    head = ["run", "regime", "reference s", *(f"one loop, {k} s" for k in keys)]
    head += ["crawl-capability s", "vs reference", "vs one loop, 5 MB, best first"]

    def cell(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    def x(a: float | None, b: float | None) -> str:
        return report.ratio(a / b) if a is not None and b else "-"

    body = []
    for r in rows:
        ours, ref = r["crawl_capability_s"], r["reference_s"]
        loop5 = r["one_loop_s"][keys[0]]
        body.append(
            [
                r["run"],
                r["regime"],
                cell(ref),
                *(cell(r["one_loop_s"][k]) for k in keys),
                cell(ours),
                x(ours, ref),
                x(ours, loop5),
            ]
        )
    return head, body


def main(argv: list[str] | None = None) -> int:
    parser = report.arg_parser(__doc__)
    parser.add_argument("--results", default=",".join(DEFAULT))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/twolevel-real-servers"))
    args = parser.parse_args(argv)
    clock = report.Clock()
    rows = [row for name in args.results.split(",") for row in study(name, args.workdir)]
    command = report.command_line(__file__, sys.argv[1:] if argv is None else argv)
    (RESULTS / f"{NAME}.json").write_text(
        report.compact_json({"command": command, "rows": rows}) + "\n"
    )
    report.publish(
        NAME,
        "The CPU-aware clairvoyant on one event loop",
        [
            f"Command: ``{command}``. Times to half the quality, in seconds, simulated with "
            "each run's own CPU model; crawl-capability's is the run's, from the server's log."
        ],
        [("Time to half the quality", "", [("", table(rows))])],
        {
            "reference": "the CPU-aware clairvoyant the targets use (one core apart from the "
            "network, no bound on the responses it has fetched but not handled)",
            "one loop": "the same crawler on one event loop: requests go out and replies come "
            "in only between two responses' handling, and none goes out while the responses "
            "not yet handled hold more than the backlog (Scrapy: 5 MB)",
        },
    )
    return report.finish("", clock.elapsed(), f"{RESULTS}/{NAME}*")


if __name__ == "__main__":
    raise SystemExit(main())
