"""How the distributed mode scales from 1 to 16 nodes: a discrete-event simulation.

This machine has 2 cores, so real crawls of more than 2 nodes measure CPU contention, not
scaling. The simulation gives each node a core of its own and keeps what limits a
polite, partitioned crawl:

- hosts are assigned to nodes exactly as in a crawl: host -> bucket (BLAKE2b) -> node
  through :class:`~scrapy_twolevel.distributed.BucketTable`, nodes joining one by one;
- a node keeps at most ``C`` hosts open (``TWOLEVEL_MAX_OPEN_HOSTS``), one request in
  flight per host; a fetch takes the host's response time (lognormal, median 0.3 s);
- a response costs ``cpu`` seconds of the node's one core (FIFO), measured on this
  machine by ``benchmarks/distributed.py`` (CPU seconds per page of one twolevel node);
  the host's next request starts when its page is parsed;
- Redis is one server: every node syncs every ``TWOLEVEL_SYNC_INTERVAL``; its utilisation
  is ``n / interval * t_sync + pages/s * t_page`` (``t_sync`` = 100 µs per sync, ``t_page``
  = 10 µs of script work per page: stated assumptions, an order of magnitude above what
  Redis needs for these commands, so the estimate is pessimistic).

Per n it reports the crawl time, throughput and speed-up over one node, the load balance
as in the reference study (coefficient of variation of pages per node per 10-s window,
over the windows in which every node is busy), each node's share, and the Redis
utilisation; once with buckets moved by joins only, once also rebalanced by remaining
pages per bucket every 30 s of simulated time, as the leader node does
(``TWOLEVEL_REBALANCE_INTERVAL``; a moved host that is open moves after its request in
flight, as a drained bucket does). Hosts have Zipf-distributed page counts (a few large
sites), which is what makes balance hard.

Usage::

    python benchmarks/distributed_sim.py     # about a minute; JSON, Markdown, a PNG
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from pathlib import Path
from typing import Any

import harness
from harness import DOCS_RESULTS, RESULTS
from harness.report import columns

harness.use_checkout()

from harness.env import environment  # noqa: E402
from harness.report import markdown, rst  # noqa: E402
from scrapy_twolevel.testweb.sim.nodes import T_PAGE, T_SYNC, make_hosts, simulate  # noqa: E402

#: The rebalanced runs: the leader's interval (TWOLEVEL_REBALANCE_INTERVAL's default).
REBALANCE_EVERY = 30.0
#: Node counts whose rebalanced run is shown in the table (all are in the JSON).
SHOWN = (2, 4, 8, 16)


def measured_cpu_per_page() -> float | None:
    """CPU seconds per page of one twolevel node, from ``benchmarks/distributed.py``."""
    path = RESULTS / "distributed.json"
    if not path.exists():
        return None
    rows = json.loads(path.read_text())["rows"]
    for row in rows:
        if row["variant"] == "twolevel" and row["nodes"] == 1 and not row["killed"]:
            return row["cpu_s_per_1000_pages"] / 1000
    return None


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    styles = {None: ("o-", "#d62728", "joins only"), REBALANCE_EVERY: ("^--", "#2ca02c", "")}
    for every, (marker, color, label) in styles.items():
        part = [r for r in rows if r["rebalance_every"] == every]
        label = label or f"rebalanced every {every:.0f} s"
        ns = [r["nodes"] for r in part]
        axes[0].plot(ns, [r["speedup"] for r in part], marker, color=color, label=label)
        axes[1].plot(
            ns[1:],
            [max(r["pages_per_node"]) / min(r["pages_per_node"]) for r in part[1:]],
            marker,
            color=color,
            label=label,
        )
    ns = sorted({r["nodes"] for r in rows})
    axes[0].plot(ns, ns, ":", color="#7f7f7f", label="linear")
    ref = {2: 1.71, 4: 3.36, 8: 5.97}
    axes[0].plot(list(ref), list(ref.values()), "s", color="#1f77b4", label="Tianwang (measured)")
    axes[0].set(xlabel="nodes", ylabel="speed-up over 1 node", title="Throughput (first window)")
    axes[1].set(
        xlabel="nodes",
        ylabel="pages of the busiest node / the idlest",
        title="Load balance (lower is better)",
    )
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def at_share(times: list[float], share: float) -> float:
    """When ``share`` of the pages were done (``times`` sorted)."""
    return times[min(len(times) - 1, int(share * len(times)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=4000)
    parser.add_argument("--pages", type=int, default=200_000)
    parser.add_argument("--open-hosts", type=int, default=64, help="open hosts per node")
    parser.add_argument(
        "--cpu", type=float, default=None, help="CPU s per page (default: measured)"
    )
    parser.add_argument("--max-nodes", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    cpu = args.cpu or measured_cpu_per_page() or 0.018
    hosts = make_hosts(args.hosts, args.pages, args.seed)
    rows = [
        simulate(
            hosts,
            n,
            open_hosts=args.open_hosts,
            cpu=cpu,
            buckets=16384,
            sync_interval=0.1,
            rebalance_every=every,
        )
        for every in (None, REBALANCE_EVERY)
        for n in range(1, args.max_nodes + 1)
    ]
    # Throughput over a common window in which every node of every run still has work:
    # the reference's pages per hour. (After it, the largest hosts, served one request at a
    # time, make the tail of the crawl whatever the number of nodes.)
    window = min(row["steady_s"] for row in rows)
    for row in rows:
        times = row.pop("completions")
        row["window_s"] = window
        row["pages_per_s"] = bisect.bisect_right(times, window) / window
        row["t50_s"] = at_share(times, 0.5)
        row["t90_s"] = at_share(times, 0.9)
    for row in rows:
        one = next(r for r in rows if r["nodes"] == 1 and r["rebalance_every"] is None)
        row["speedup"] = row["pages_per_s"] / one["pages_per_s"]
        n = row["nodes"]
        print(
            f"n={n:2d} rebalance={row['rebalance_every']}: {row['pages_per_s']:7.1f} pages/s, "
            f"speed-up {row['speedup']:.2f}, t90 {row['t90_s']:.0f} s, all busy until "
            f"{row['steady_s']:.0f} s, largest/smallest "
            f"{max(row['pages_per_node'])}/{min(row['pages_per_node'])}, moves {row['moves']}",
            flush=True,
        )
    head = columns(
        "nodes | rebalance | pages/s (first window, all nodes working) | speed-up | "
        "half / 90% of pages done (s) | all nodes busy until (s) | whole crawl (s) | "
        "balance CV | largest/smallest node (pages) | buckets moved by load | "
        "Redis utilisation"
    )
    body = [
        [
            str(r["nodes"]),
            "-" if r["rebalance_every"] is None else f"every {r['rebalance_every']:.0f} s",
            f"{r['pages_per_s']:.1f}",
            f"{r['speedup']:.2f}",
            f"{r['t50_s']:.0f} / {r['t90_s']:.0f}",
            f"{r['steady_s']:.0f}",
            f"{r['time_s']:.0f}",
            "-" if r["balance_cv"] is None else f"{r['balance_cv']:.3f}",
            f"{max(r['pages_per_node'])}/{min(r['pages_per_node'])}",
            str(r["moves"]),
            f"{100 * r['redis_utilisation']:.2f}%",
        ]
        for r in rows
        if r["nodes"] in SHOWN or r["rebalance_every"] is None
    ]
    command = "python benchmarks/distributed_sim.py" + (f" --cpu {args.cpu}" if args.cpu else "")
    data = {
        "command": command,
        "environment": environment("numpy"),
        "parameters": {
            **vars(args),
            "cpu": cpu,
            "t_sync": T_SYNC,
            "t_page": T_PAGE,
            "rebalance_every": REBALANCE_EVERY,
        },
        "rows": rows,
    }
    (RESULTS / "distributed_sim.json").write_text(json.dumps(data, indent=1))
    md = markdown((head, body))
    (RESULTS / "distributed_sim.md").write_text(
        f"Regenerated with `{command}`: {args.hosts} hosts, {args.pages} pages (Zipf), "
        f"{args.open_hosts} open hosts per node, {cpu * 1000:.1f} ms CPU per page; "
        f"rebalanced runs every {REBALANCE_EVERY:.0f} s of simulated time (shown for "
        f"{', '.join(map(str, SHOWN))} nodes; all in the JSON).\n\n{md}"
    )
    (DOCS_RESULTS / "distributed_sim.inc").write_text(rst((head, body)))
    plot(rows, DOCS_RESULTS / "distributed_sim.png")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
