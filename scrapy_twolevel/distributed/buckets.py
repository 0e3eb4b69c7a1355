"""Hosts to crawler nodes in two steps: host -> one of M logical buckets -> node.

The first step is a fixed hash, so a host never changes bucket. The second is an explicit
table ``owner[bucket]``, as in the Tianwang gatherer and Redis Cluster's slots: because
the table is data, a join, a leave or a rebalance moves exactly the buckets it names, and
nothing else. (Hashing the host modulo the node count would move about 3 in 4 hosts when
a third node becomes a fourth; a hash ring moves about a quarter but cannot be balanced
by measured load.)

- :meth:`BucketTable.join`: the newcomer takes ``floor(M / (n + 1))`` buckets, each from
  the node that holds the most at that moment, so every node keeps within one bucket of
  the others.
- :meth:`BucketTable.leave`: the leaver's buckets go, one at a time, to the node that holds
  the fewest.
- :meth:`BucketTable.rebalance`: with a measured load per bucket (pages per hour, say),
  buckets move from the busiest node to the idlest while that lowers the busiest node's
  load, up to a number of moves.

Each method returns the :class:`Move` list it applied; the caller hands each bucket's
pending requests and seen state over. Pure module: no Redis, no Scrapy; the table saves
to and loads from JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: Format marker of :meth:`BucketTable.to_json`.
FORMAT = "scrapy_twolevel.buckets/1"


def bucket_of(host_key: str, buckets: int) -> int:
    """The bucket of a host: a stable hash (BLAKE2b, not Python's per-process ``hash``)."""
    digest = hashlib.blake2b(host_key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % buckets


@dataclass(frozen=True)
class Move:
    """Bucket ``bucket`` passes from node ``source`` (``None``: unowned) to ``target``."""

    bucket: int
    source: str | None
    target: str


#: A bucket's measured load counts at most this many pending requests. A host is served
#: one request at a time, so a very large host is no more parallel work than a few
#: thousand pages; counted in full, it makes its node look busiest and rebalancing moves
#: that node's small hosts away, to a node that is then the busy one. In the simulation
#: (``benchmarks/distributed_sim.py``, Zipf hosts, 8 nodes) uncapped loads made the first
#: half of the crawl 7% slower than no rebalancing; capped at 1,000, 1.5% faster, with
#: every node busy 2.4x as long.
LOAD_CAP = 1000


class BucketTable:
    """``owner[bucket] -> node`` for ``size`` buckets; every bucket owned once while any
    node is in the table."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"the bucket count must be >= 1, got {size}")
        self.size = size
        self._owner: list[str | None] = [None] * size
        self._held: dict[str, set[int]] = {}

    # -- reading ----------------------------------------------------------------------

    def owner(self, bucket: int) -> str | None:
        return self._owner[bucket]

    def owner_of_host(self, host_key: str) -> str | None:
        return self._owner[bucket_of(host_key, self.size)]

    def buckets_of(self, node: str) -> frozenset[int]:
        return frozenset(self._held.get(node, ()))

    @property
    def nodes(self) -> list[str]:
        return sorted(self._held)

    def counts(self) -> dict[str, int]:
        return {node: len(held) for node, held in sorted(self._held.items())}

    def check(self) -> None:
        """Raise ``AssertionError`` unless every bucket has exactly one owner in the table."""
        seen: dict[int, str] = {}
        for node, held in self._held.items():
            for bucket in held:
                assert bucket not in seen, f"bucket {bucket} held by {seen[bucket]} and {node}"
                assert self._owner[bucket] == node, f"bucket {bucket}: table and node disagree"
                seen[bucket] = node
        if self._held:
            assert len(seen) == self.size, f"{self.size - len(seen)} buckets have no owner"
        else:
            assert all(o is None for o in self._owner)

    # -- changing -----------------------------------------------------------------------

    def join(self, node: str) -> list[Move]:
        """Add ``node``; it takes ``floor(size / n)`` buckets (all of them if it is the first)."""
        if node in self._held:
            raise ValueError(f"node {node!r} is already in the table")
        if not self._held:
            self._held[node] = set()
            return [self._assign(b, node) for b in range(self.size)]
        share = self.size // (len(self._held) + 1)
        # Each donor's buckets sorted once (a max() per move made a join of 16k buckets
        # take 2 s, longer than a flaky connection lasts); donors only lose buckets here.
        ascending = {n: sorted(held) for n, held in self._held.items()}
        self._held[node] = set()
        moves = []
        for _ in range(share):
            donor = max(ascending, key=lambda n: (len(self._held[n]), n))
            bucket = ascending[donor].pop()  # deterministic: the donor's highest bucket
            moves.append(self._assign(bucket, node))
        return moves

    def leave(self, node: str) -> list[Move]:
        """Remove ``node``; its buckets go to the others, fewest-held first."""
        if node not in self._held:
            raise ValueError(f"node {node!r} is not in the table")
        buckets = sorted(self._held[node])
        if len(self._held) == 1:
            raise ValueError(f"node {node!r} is the last node: nobody can take its buckets")
        moves = []
        for bucket in buckets:
            taker = min((n for n in self._held if n != node), key=lambda n: (len(self._held[n]), n))
            moves.append(self._assign(bucket, taker))
        del self._held[node]
        return moves

    def rebalance(
        self,
        load: Mapping[int, float],
        max_moves: int | None = None,
        tolerance: float = 0.0,
    ) -> list[Move]:
        """Move buckets from the busiest node to the idlest while it lowers the maximum.

        ``load``: measured load per bucket (missing buckets count 0). A move is made only
        when the bucket's load is below the gap between the two nodes, so the busiest
        node's load falls and no bucket bounces back and forth. ``tolerance``: stop once
        the gap is at most that share of the mean node load (each move costs a hand-over).
        """
        if len(self._held) < 2:
            return []
        node_load = {n: sum(load.get(b, 0.0) for b in held) for n, held in self._held.items()}
        allowed = tolerance * sum(node_load.values()) / len(node_load)
        moves: list[Move] = []
        while max_moves is None or len(moves) < max_moves:
            busiest = max(node_load, key=lambda n: (node_load[n], n))
            idlest = min(node_load, key=lambda n: (node_load[n], n))
            gap = node_load[busiest] - node_load[idlest]
            if gap <= allowed:
                break
            # The bucket that best halves the gap without reaching it.
            candidates = [b for b in self._held[busiest] if 0 < load.get(b, 0.0) < gap]
            if not candidates:
                break
            bucket = min(candidates, key=lambda b: (abs(gap / 2 - load.get(b, 0.0)), b))
            moves.append(self._assign(bucket, idlest))
            node_load[busiest] -= load.get(bucket, 0.0)
            node_load[idlest] += load.get(bucket, 0.0)
        return moves

    def apply(self, moves: Iterable[Move]) -> None:
        """Replay moves decided elsewhere (another node's join, read from the shared table)."""
        for move in moves:
            if move.target not in self._held:
                self._held[move.target] = set()
            self._assign(move.bucket, move.target)

    def _assign(self, bucket: int, node: str) -> Move:
        source = self._owner[bucket]
        if source is not None:
            self._held[source].discard(bucket)
        self._owner[bucket] = node
        self._held[node].add(bucket)
        return Move(bucket, source, node)

    # -- persistence --------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "size": self.size, "owner": self._owner})

    @classmethod
    def from_json(cls, text: str | bytes) -> BucketTable:
        """A table saved by :meth:`to_json`; ``ValueError`` for anything else (JSON only:
        the table is read from a shared store, so it is never unpickled)."""
        try:
            data = json.loads(text)
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            if found != FORMAT:
                raise ValueError(f"not a bucket table (format {found!r})")
            size, owner = data["size"], data["owner"]
            if not (isinstance(size, int) and isinstance(owner, list) and len(owner) == size):
                raise ValueError("size and owner list disagree")
            if not all(o is None or isinstance(o, str) for o in owner):
                raise ValueError("owners must be node names or null")
        except (
            KeyError,
            TypeError,
            AttributeError,
            UnicodeDecodeError,
            json.JSONDecodeError,
        ) as exc:
            raise ValueError(f"not a bucket table ({exc})") from exc
        table = cls(size)
        for bucket, node in enumerate(owner):
            if node is not None:
                table._held.setdefault(node, set())
                table._assign(bucket, node)
        table.check()
        return table
