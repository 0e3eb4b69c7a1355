"""The ranking of unopened hosts: which host opens when a place is free.

A heap of ``(-score, seq, host)`` entries with lazy deletion: a host whose score changes
gets a fresh entry and its old one is skipped when it surfaces (a host's ``rank_token``
names its live entry); the heap is rebuilt when stale entries outnumber live ones. Ties
go to the earlier ``seq``, so equal scores are served first come, first served. Re-scoring
a host in place would cost a heap search per change; a frontier re-scores hosts on every
response. Pure module: no Scrapy, no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from .hosts import Host, SeqCounter


class HostRanking:
    """Hosts by score, best first; ``hosts`` is the frontier's own host table."""

    def __init__(self, hosts: dict[str, Host], sequence: SeqCounter) -> None:
        self._hosts = hosts
        self._sequence = sequence
        self._heap: list[tuple[float, int, str]] = []
        self._live = 0

    def __len__(self) -> int:
        """Hosts ranked (live entries)."""
        return self._live

    def put(self, host: Host, score: float) -> None:
        """Rank ``host`` at ``score``; an unchanged score keeps its entry and place among ties."""
        key = -score
        if host.rank_token >= 0:
            if host.rank_key == key:
                return
            self._live -= 1
        host.rank_token = self._sequence.next()
        host.rank_key = key
        heapq.heappush(self._heap, (key, host.rank_token, host.key))
        self._live += 1
        if len(self._heap) > 2 * self._live + 64:
            self._compact()

    def remove(self, host: Host) -> None:
        """Take ``host`` out of the ranking (its entry goes stale)."""
        if host.rank_token >= 0:
            host.rank_token = -1
            self._live -= 1

    def peek_best(self) -> Host | None:
        """The best-ranked host, left in the ranking (stale entries on top are dropped)."""
        heap = self._heap
        while heap:
            if (host := self._live_host(heap[0])) is not None:
                return host
            heapq.heappop(heap)
        return None

    def pop_best(self, skip: Callable[[str], bool] | None = None) -> Host | None:
        """The best-ranked host, taken out of the ranking; hosts for which ``skip(key)``
        holds (open in another frontier) keep their entries and places."""
        heap = self._heap
        skipped: list[tuple[float, int, str]] = []
        best = None
        while heap:
            entry = heapq.heappop(heap)
            host = self._live_host(entry)
            if host is None:
                continue  # stale (a host packed since is not ranked)
            if skip is not None and skip(host.key):
                skipped.append(entry)
                continue
            best = host
            break
        for entry in skipped:
            heapq.heappush(heap, entry)
        if best is not None:
            self.remove(best)
        return best

    def rescore(self, score: Callable[[Host], float]) -> None:
        """Score every ranked host again (the policy's prices changed): one pass and a
        heapify, not a heap push per host; each keeps its place among ties."""
        entries = []
        for entry in self._heap:
            host = self._live_host(entry)
            if host is not None:
                host.rank_key = -score(host)
                entries.append((host.rank_key, entry[1], entry[2]))
        heapq.heapify(entries)
        self._heap = entries

    def _live_host(self, entry: tuple[float, int, str]) -> Host | None:
        """The host of a heap entry, or ``None`` if the entry is stale."""
        host = self._hosts.get(entry[2])
        return host if host is not None and host.rank_token == entry[1] else None

    def _compact(self) -> None:
        live = [e for e in self._heap if self._live_host(e) is not None]
        heapq.heapify(live)
        self._heap = live
