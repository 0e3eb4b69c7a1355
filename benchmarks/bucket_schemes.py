"""Hosts to nodes: what a join or a leave moves, and how even the load is, per scheme.

Compares, on one synthetic set of hosts with Zipf-distributed page counts (a host's load):

- ``mod-N``: ``crc32(host) mod n`` (Frontera's partitioning);
- ``ring``: a consistent-hash ring with 100 virtual nodes per node;
- ``rendezvous``: highest-random-weight hashing;
- ``jump``: Lamping and Veach's jump consistent hash;
- ``table``: :class:`scrapy_twolevel.distributed.BucketTable` (host -> one of M buckets ->
  node through an explicit table), and ``table+rebalance``: the same after one
  :meth:`~scrapy_twolevel.distributed.BucketTable.rebalance` by measured bucket load.

For every n from 1 to 16 (joins n -> n+1, leaves n+1 -> n of the last node) it measures the
share of hosts and of load that changes node (the minimum possible is 1/(n+1)) and the
spread of load over nodes, ``(max - min) / mean``. Deterministic (seeded); pure CPU, so
it needs no quiet machine.

Usage::

    python benchmarks/bucket_schemes.py          # about a minute; writes results and a plot
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import hashlib
import json
import random
import statistics
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import harness
from harness import DOCS_RESULTS, RESULTS
from harness.report import save_figure

harness.use_checkout()

from scrapy_twolevel.distributed.buckets import BucketTable, bucket_of  # noqa: E402

NAME = "bucket_schemes"
SEED = 20261123
BUCKETS = 16384
VNODES = 100
MAX_NODES = 16


def _h64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def make_hosts(count: int, seed: int) -> tuple[list[str], list[float]]:
    """Host names and loads (pages), Zipf with exponent 1 over a shuffled rank order."""
    rng = random.Random(seed)
    ranks = list(range(1, count + 1))
    rng.shuffle(ranks)
    return [f"h{i}.example" for i in range(count)], [1000.0 / r + 1.0 for r in ranks]


def mod_n(hosts: Sequence[str], nodes: Sequence[str]) -> list[str]:
    return [nodes[zlib.crc32(h.encode()) % len(nodes)] for h in hosts]


def ring(hosts: Sequence[str], nodes: Sequence[str]) -> list[str]:
    points = sorted((_h64(f"{n}#{v}"), n) for n in nodes for v in range(VNODES))
    keys = [p for p, _ in points]
    return [points[bisect.bisect(keys, _h64(h)) % len(points)][1] for h in hosts]


def rendezvous(hosts: Sequence[str], nodes: Sequence[str]) -> list[str]:
    return [max(nodes, key=lambda n: _h64(f"{n}|{h}")) for h in hosts]


def jump(hosts: Sequence[str], nodes: Sequence[str]) -> list[str]:
    """Jump consistent hash: node index from a 64-bit key; nodes join and leave at the end."""
    out = []
    for h in hosts:
        key, b, j = _h64(h), -1, 0
        while j < len(nodes):
            b = j
            key = (key * 2862933555777941757 + 1) % (1 << 64)
            j = int((b + 1) * ((1 << 31) / ((key >> 33) + 1)))
        out.append(nodes[b])
    return out


def table_assign(hosts: Sequence[str], table: BucketTable) -> list[str]:
    return [table.owner(bucket_of(h, table.size)) or "" for h in hosts]


def moved(
    before: Sequence[str], after: Sequence[str], load: Sequence[float]
) -> tuple[float, float]:
    hosts = sum(1 for a, b in zip(before, after, strict=True) if a != b) / len(before)
    pages = sum(w for a, b, w in zip(before, after, load, strict=True) if a != b) / sum(load)
    return hosts, pages


def spread(owner: Sequence[str], load: Sequence[float]) -> float:
    per: dict[str, float] = {}
    for node, w in zip(owner, load, strict=True):
        per[node] = per.get(node, 0.0) + w
    values = list(per.values())
    return (max(values) - min(values)) / statistics.mean(values) if len(values) > 1 else 0.0


def run(hosts_count: int, seed: int) -> dict:
    hosts, load = make_hosts(hosts_count, seed)
    bucket_load: dict[int, float] = {}
    for h, w in zip(hosts, load, strict=True):
        b = bucket_of(h, BUCKETS)
        bucket_load[b] = bucket_load.get(b, 0.0) + w
    hashers: dict[str, Callable[[Sequence[str], Sequence[str]], list[str]]] = {
        "mod-N": mod_n,
        "ring": ring,
        "rendezvous": rendezvous,
        "jump": jump,
    }
    rows = []
    table = BucketTable(BUCKETS)
    balanced = BucketTable(BUCKETS)
    names = [f"node{i}" for i in range(MAX_NODES)]
    table.join(names[0])
    balanced.join(names[0])
    for n in range(1, MAX_NODES):
        nodes, grown = names[:n], names[: n + 1]
        row: dict = {"n": n, "ideal": 1 / (n + 1)}
        for scheme, assign in hashers.items():
            before, after = assign(hosts, nodes), assign(hosts, grown)
            row[scheme] = {
                "join_hosts_moved": moved(before, after, load)[0],
                "join_load_moved": moved(before, after, load)[1],
                "spread": spread(after, load),
            }
        before = table_assign(hosts, table)
        table.join(names[n])
        after = table_assign(hosts, table)
        row["table"] = {
            "join_hosts_moved": moved(before, after, load)[0],
            "join_load_moved": moved(before, after, load)[1],
            "spread": spread(after, load),
        }
        before = table_assign(hosts, balanced)
        balanced.join(names[n])
        balanced.rebalance(bucket_load)
        after = table_assign(hosts, balanced)
        row["table+rebalance"] = {
            "join_hosts_moved": moved(before, after, load)[0],
            "join_load_moved": moved(before, after, load)[1],
            "spread": spread(after, load),
        }
        rows.append(row)
    # Leave: the n+1 -> n case for n = 3 (a node of four leaves), per scheme.
    leave: dict[str, dict[str, float]] = {}
    four, three = names[:4], names[:3]
    for scheme, assign in hashers.items():
        h, p = moved(assign(hosts, four), assign(hosts, three), load)
        leave[scheme] = {"hosts_moved": h, "load_moved": p}
    t = BucketTable(BUCKETS)
    for node in four:
        t.join(node)
    before = table_assign(hosts, t)
    t.leave(four[-1])
    h, p = moved(before, table_assign(hosts, t), load)
    leave["table"] = {"hosts_moved": h, "load_moved": p}
    return {"rows": rows, "leave_4_to_3": leave}


SCHEMES = ("mod-N", "ring", "rendezvous", "jump", "table", "table+rebalance")


def report(data: dict) -> str:
    lines = [
        "# Hosts to nodes: moves and balance per scheme",
        "",
        f"Command: ``python benchmarks/bucket_schemes.py``; {data['date']}; "
        f"{data['hosts']:,} hosts, Zipf loads; table: {BUCKETS:,} buckets; ring: {VNODES} "
        f"virtual nodes per node; {data['seconds']:.0f} s.",
        "",
        "## A join, 3 -> 4 nodes (the least possible move is 25%)",
        "",
        "| scheme | hosts moved | load moved | load spread after, (max-min)/mean |",
        "|---|---|---|---|",
    ]
    row = next(r for r in data["rows"] if r["n"] == 3)
    for s in SCHEMES:
        m = row[s]
        lines.append(
            f"| {s} | {m['join_hosts_moved']:.1%} | {m['join_load_moved']:.1%} | "
            f"{m['spread']:.3f} |"
        )
    lines += ["", "## A leave, 4 -> 3 nodes (the least possible move is 25%)", ""]
    lines += ["| scheme | hosts moved | load moved |", "|---|---|---|"]
    for s, m in data["leave_4_to_3"].items():
        lines.append(f"| {s} | {m['hosts_moved']:.1%} | {m['load_moved']:.1%} |")
    lines += ["", "## Load spread with n nodes", ""]
    lines += ["| n | " + " | ".join(SCHEMES) + " |", "|---" * (len(SCHEMES) + 1) + "|"]
    for r in data["rows"]:
        lines.append(
            f"| {r['n'] + 1} | " + " | ".join(f"{r[s]['spread']:.3f}" for s in SCHEMES) + " |"
        )
    return "\n".join(lines) + "\n"


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ns = [r["n"] + 1 for r in data["rows"]]
    for s in SCHEMES:
        ax1.plot(ns, [r[s]["join_hosts_moved"] for r in data["rows"]], marker=".", label=s)
        ax2.plot(ns, [r[s]["spread"] for r in data["rows"]], marker=".", label=s)
    ax1.plot(ns, [r["ideal"] for r in data["rows"]], "k--", label="1/n (least possible)")
    ax1.set(xlabel="nodes after the join", ylabel="share of hosts moved", yscale="log")
    ax2.set(xlabel="nodes", ylabel="load spread (max-min)/mean")
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    data = run(args.hosts, args.seed)
    data.update(
        date=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        hosts=args.hosts,
        seconds=time.perf_counter() - started,
    )
    RESULTS.mkdir(exist_ok=True)
    DOCS_RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{NAME}.json").write_text(json.dumps(data, indent=1))
    text = report(data)
    (RESULTS / f"{NAME}.md").write_text(text)
    plot(data, DOCS_RESULTS / f"{NAME}.png")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
