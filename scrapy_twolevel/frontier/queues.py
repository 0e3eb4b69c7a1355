"""Per-host URL queues kept in memory.

Each host has its own queue. Quality-ordered queues keep their best ``head_size`` entries
in a small sorted list (the URLs the host's next session will fetch) and the rest in a
heap, so the sum of the next P qualities — what crawl-capability ranks hosts by — is
known without scanning the queue. FIFO queues are plain deques: the cheapest thing
that works for breadth-first and performance-first.

Pure module: no Scrapy, no I/O. Items are opaque.
"""

from __future__ import annotations

import heapq
from bisect import insort
from typing import Any, Protocol


class HostQueue(Protocol):
    """What the frontier needs from one host's queue."""

    def push(self, quality: float, seq: int, item: Any) -> bool:
        """Queue ``item``; return whether the head (the next session's URLs) changed."""
        ...

    def pop(self) -> Any: ...

    def __len__(self) -> int: ...

    def best_quality(self) -> float:
        """Quality of the entry :meth:`pop` returns next (0.0 when empty)."""
        ...

    def head_sum(self) -> float:
        """Sum of the qualities of the first ``head_size`` entries, negatives as 0."""
        ...

    def set_head_size(self, size: int) -> None: ...

    def close(self) -> None: ...


class FifoHostQueue:
    """First in, first out; quality is ignored, so sums and bests are 0.

    A list with a moving start rather than a ``deque``: an empty deque costs ~600 bytes,
    which dominates RAM when many hosts have only a few URLs each.
    """

    __slots__ = ("_head_size", "_items", "_start")

    def __init__(self) -> None:
        self._items: list[Any] = []
        self._start = 0
        self._head_size = 1

    def push(self, quality: float, seq: int, item: Any) -> bool:
        self._items.append(item)
        return len(self._items) - self._start <= self._head_size

    def pop(self) -> Any:
        items, start = self._items, self._start
        item = items[start]
        items[start] = None
        start += 1
        if start == len(items):
            items.clear()
            start = 0
        elif start >= 32 and 2 * start >= len(items):
            del items[:start]
            start = 0
        self._start = start
        return item

    def __len__(self) -> int:
        return len(self._items) - self._start

    def best_quality(self) -> float:
        return 0.0

    def head_sum(self) -> float:
        return 0.0

    def set_head_size(self, size: int) -> None:
        self._head_size = max(1, size)

    def close(self) -> None:
        self._items.clear()
        self._start = 0


class QualityHostQueue:
    """Best quality first, FIFO among equal qualities.

    Entries are ``(-quality, seq, item)``: ``seq`` is unique, so items are never compared.
    ``_head`` is sorted and holds the best ``head_size`` entries; every entry in ``_tail``
    (a heap) sorts after every entry in ``_head``.
    """

    __slots__ = ("_head", "_head_size", "_head_sum", "_tail")

    def __init__(self, head_size: int = 1) -> None:
        self._head: list[tuple[float, int, Any]] = []
        self._tail: list[tuple[float, int, Any]] = []
        self._head_size = max(1, head_size)
        self._head_sum = 0.0  # of max(quality, 0) over _head, kept up to date

    def push(self, quality: float, seq: int, item: Any) -> bool:
        entry = (-quality, seq, item)
        head = self._head
        if len(head) < self._head_size:
            insort(head, entry)
            self._head_sum += max(quality, 0.0)
        elif entry < head[-1]:
            insort(head, entry)
            evicted = head.pop()
            heapq.heappush(self._tail, evicted)
            self._head_sum += max(quality, 0.0) - max(-evicted[0], 0.0)
        else:
            heapq.heappush(self._tail, entry)
            return False
        return True

    def pop(self) -> Any:
        head = self._head
        entry = head.pop(0)
        self._head_sum -= max(-entry[0], 0.0)
        if self._tail:
            refill = heapq.heappop(self._tail)
            head.append(refill)
            self._head_sum += max(-refill[0], 0.0)
        elif not head:
            self._head_sum = 0.0  # no drift survives an empty queue
        return entry[2]

    def __len__(self) -> int:
        return len(self._head) + len(self._tail)

    def best_quality(self) -> float:
        return -self._head[0][0] if self._head else 0.0

    def head_sum(self) -> float:
        return self._head_sum

    def set_head_size(self, size: int) -> None:
        size = max(1, size)
        self._head_size = size
        head, tail = self._head, self._tail
        while len(head) > size:
            heapq.heappush(tail, head.pop())
        while len(head) < size and tail:
            head.append(heapq.heappop(tail))
        self._head_sum = sum(-e[0] for e in head if e[0] < 0)

    def close(self) -> None:
        self._head.clear()
        self._tail.clear()
        self._head_sum = 0.0
