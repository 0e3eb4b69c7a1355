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
utilisation. Hosts have Zipf-distributed page counts (a few large sites), which is what
makes balance hard.

Usage::

    python benchmarks/distributed_sim.py     # about a minute; JSON, Markdown, a PNG
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from reporting import environment, markdown, rst  # noqa: E402
from scrapy_twolevel.distributed import BucketTable  # noqa: E402

RESULTS = HERE / "results"
DOCS_RESULTS = ROOT / "docs" / "results"
WINDOW = 10.0
T_SYNC = 100e-6
T_PAGE = 10e-6


def make_hosts(count: int, pages: int, seed: int) -> list[tuple[str, int, float]]:
    """``(name, pages, response time)`` per host; page counts Zipf(1) scaled to ``pages``."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(count)]
    scale = pages / sum(weights)
    hosts = []
    for i, weight in enumerate(weights):
        response = rng.lognormvariate(mu=-1.2, sigma=0.6)  # median 0.30 s
        hosts.append((f"host{i}.example", max(1, round(weight * scale)), response))
    rng.shuffle(hosts)
    return hosts


def simulate(
    hosts: list[tuple[str, int, float]],
    nodes: int,
    *,
    open_hosts: int,
    cpu: float,
    buckets: int,
    sync_interval: float,
) -> dict[str, Any]:
    table = BucketTable(buckets)
    names = [f"n{i}" for i in range(nodes)]
    for name in names:
        table.join(name)
    queues: dict[str, list[tuple[str, int, float]]] = {name: [] for name in names}
    for host in hosts:
        owner = table.owner_of_host(host[0])
        assert owner is not None
        queues[owner].append(host)
    events: list[tuple[float, int, str, int]] = []  # (time, seq, node, host index)
    seq = 0
    remaining: dict[tuple[str, int], int] = {}
    cpu_free = dict.fromkeys(names, 0.0)
    next_host = dict.fromkeys(names, 0)
    done: dict[str, list[float]] = {name: [] for name in names}

    def open_next(node: str, now: float) -> None:
        nonlocal seq
        index = next_host[node]
        if index >= len(queues[node]):
            return
        next_host[node] = index + 1
        _, pages, response = queues[node][index]
        remaining[(node, index)] = pages
        seq += 1
        heapq.heappush(events, (now + response, seq, node, index))

    for node in names:
        for _ in range(open_hosts):
            open_next(node, 0.0)
    while events:
        now, _, node, index = heapq.heappop(events)
        parsed = max(cpu_free[node], now) + cpu
        cpu_free[node] = parsed
        done[node].append(parsed)
        key = (node, index)
        remaining[key] -= 1
        if remaining[key]:
            seq += 1
            heapq.heappush(events, (parsed + queues[node][index][2], seq, node, index))
        else:
            open_next(node, parsed)
    end = max(max(times) for times in done.values() if times)
    total = sum(len(times) for times in done.values())
    # Throughput while every node has work (the reference's pages per hour); after that
    # the crawl's tail is the largest hosts, one request at a time whatever n is.
    steady = min(max(times) for times in done.values() if times)
    return {
        "nodes": nodes,
        "time_s": end,
        "steady_s": steady,
        "pages": total,
        "completions": sorted(t for times in done.values() for t in times),
        "pages_per_s_whole": total / end,
        "pages_per_node": [len(done[name]) for name in names],
        "hosts_per_node": [len(queues[name]) for name in names],
        "balance_cv": _balance(list(done.values())),
        "cpu_busy": sum(len(t) for t in done.values()) * cpu / (end * nodes),
        "redis_utilisation": nodes / sync_interval * T_SYNC + total / end * T_PAGE,
    }


def _balance(times_per_node: list[list[float]]) -> float | None:
    """Mean CV of pages per node per window, over windows in which every node works."""
    if len(times_per_node) < 2:
        return None
    end = min(max(t) for t in times_per_node if t)
    cvs = []
    for w in range(int(end // WINDOW)):
        lo, hi = w * WINDOW, (w + 1) * WINDOW
        counts = [sum(lo <= t < hi for t in times) for times in times_per_node]
        if min(counts) > 0:
            cvs.append(statistics.pstdev(counts) / statistics.fmean(counts))
    return statistics.fmean(cvs) if cvs else None


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

    ns = [r["nodes"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    axes[0].plot(ns, [r["speedup"] for r in rows], "o-", color="#d62728", label="simulated")
    axes[0].plot(ns, ns, ":", color="#7f7f7f", label="linear")
    ref = {2: 1.71, 4: 3.36, 8: 5.97}
    axes[0].plot(list(ref), list(ref.values()), "s", color="#1f77b4", label="Tianwang (measured)")
    axes[0].set(xlabel="nodes", ylabel="speed-up over 1 node", title="Throughput")
    axes[1].plot(ns[1:], [r["balance_cv"] for r in rows[1:]], "o-", color="#d62728")
    axes[1].set(
        xlabel="nodes",
        ylabel="CV of pages per node per 10-s window",
        title="Load balance (lower is better)",
    )
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
        simulate(hosts, n, open_hosts=args.open_hosts, cpu=cpu, buckets=16384, sync_interval=0.1)
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
        row["speedup"] = row["pages_per_s"] / rows[0]["pages_per_s"]
    for row in rows:
        n = row["nodes"]
        print(
            f"n={n:2d}: {row['pages_per_s']:7.1f} pages/s, speed-up {row['speedup']:.2f}, "
            f"CV {row['balance_cv'] if row['balance_cv'] is None else round(row['balance_cv'], 3)}"
            f", CPU busy {row['cpu_busy']:.2f}, Redis {100 * row['redis_utilisation']:.2f}%",
            flush=True,
        )
    head = [
        "nodes",
        "pages/s (first window, all nodes working)",
        "speed-up",
        "whole crawl (s)",
        "CPU busy",
        "balance CV",
        "largest/smallest node (pages)",
        "Redis utilisation",
    ]
    body = [
        [
            str(r["nodes"]),
            f"{r['pages_per_s']:.1f}",
            f"{r['speedup']:.2f}",
            f"{r['time_s']:.0f}",
            f"{r['cpu_busy']:.2f}",
            "-" if r["balance_cv"] is None else f"{r['balance_cv']:.3f}",
            f"{max(r['pages_per_node'])}/{min(r['pages_per_node'])}",
            f"{100 * r['redis_utilisation']:.2f}%",
        ]
        for r in rows
    ]
    command = "python benchmarks/distributed_sim.py"
    data = {
        "command": command,
        "environment": environment(),
        "parameters": {**vars(args), "cpu": cpu, "t_sync": T_SYNC, "t_page": T_PAGE},
        "rows": rows,
    }
    (RESULTS / "distributed_sim.json").write_text(json.dumps(data, indent=1))
    md = markdown((head, body))
    (RESULTS / "distributed_sim.md").write_text(
        f"Regenerated with `{command}`: {args.hosts} hosts, {args.pages} pages (Zipf), "
        f"{args.open_hosts} open hosts per node, {cpu * 1000:.1f} ms CPU per page.\n\n{md}"
    )
    (DOCS_RESULTS / "distributed_sim.inc").write_text(rst((head, body)))
    plot(rows, DOCS_RESULTS / "distributed_sim.png")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
