"""Per-host URL queues kept in memory.

Each host has its own queue. Quality-ordered queues are sorted lists (in blocks) that
keep the sum of their best ``head_size`` qualities (the URLs the host's next session will
fetch) up to date, so the sum of the next P qualities — what crawl-capability ranks hosts
by — is known without scanning the queue. FIFO queues are a list with a moving start: the
cheapest thing that works for breadth-first and performance-first.

Pure module: no Scrapy, no I/O. Items are opaque.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
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

    def peek(self, n: int) -> list[tuple[float | None, Any]]:
        """The first ``n`` entries :meth:`pop` would return, as ``(quality, item)``, without
        taking them (``None``: a queue that keeps no qualities). For people: the live
        view's host page shows a host's best queued pages."""
        ...

    def clear(self) -> list[Any]:
        """Empty the queue (its host was given up); the items that must be told to the
        request store (all of them in memory; on disk only those kept in memory: the rows
        go in one statement)."""
        ...

    def close(self) -> None: ...


def pop_all(queue: HostQueue) -> list[Any]:
    """Every item of ``queue``, popped in order: :meth:`HostQueue.clear` of the memory
    queues."""
    return [queue.pop() for _ in range(len(queue))]


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

    def peek(self, n: int) -> list[tuple[float | None, Any]]:
        start = self._start
        return [(None, item) for item in self._items[start : start + max(n, 0)]]

    def head_sum(self) -> float:
        return 0.0

    def set_head_size(self, size: int) -> None:
        self._head_size = max(1, size)

    def clear(self) -> list[Any]:
        return pop_all(self)

    def close(self) -> None:
        self._items.clear()
        self._start = 0


class QualityHostQueue:
    """Best quality first, FIFO among equal qualities, in sorted lists.

    Qualities and items are kept in parallel lists sorted by ascending quality, so the
    best entry is the last one and :meth:`pop` is a ``list.pop()``. A new entry goes
    *before* the entries of equal quality already queued (``bisect_left``), so among
    equals the oldest is popped first without storing a sequence number.

    The best entries live in one *top* list. When it grows past ``2 * block_size``, its
    worse half moves to a list of *lower* blocks (each sorted, each before the next), so
    an insert moves at most a block, never the whole queue of a huge host; when the top
    list runs empty, the last lower block becomes the top list. A host with a few URLs
    costs an object and two short lists.

    Why not a heap of ``(-quality, seq, item)`` tuples: a tuple and a sequence number cost
    ~100 bytes per pending request; two list slots cost 16 (and the quality object is
    shared when the caller reuses it, as the scheduler does for integer priorities).

    ``head_sum`` (the sum of the best ``head_size`` qualities, negatives as 0: what
    crawl-capability ranks by) is kept up to date on every push and pop.
    """

    __slots__ = (
        "_block_size",
        "_head_size",
        "_head_sum",
        "_items",
        "_len",
        "_lower_items",
        "_lower_maxes",
        "_lower_qs",
        "_qs",
    )

    def __init__(self, head_size: int = 1, *, block_size: int = 256) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self._qs: list[float] = []  # the top list: the best entries, ascending
        self._items: list[Any] = []
        # Lower blocks, created when the top list first overflows. ``_lower_maxes[b]`` is
        # the last (largest) quality of block ``b``, for routing pushes with bisect.
        self._lower_qs: list[list[float]] | None = None
        self._lower_items: list[list[Any]] | None = None
        self._lower_maxes: list[float] | None = None
        self._len = 0
        self._block_size = block_size
        self._head_size = max(1, head_size)
        self._head_sum = 0.0

    def push(self, quality: float, seq: int, item: Any) -> bool:
        self._len += 1
        maxes = self._lower_maxes
        if maxes and quality <= maxes[-1]:
            rank = self._push_lower(quality, item)
        else:
            qs = self._qs
            i = bisect_left(qs, quality)
            qs.insert(i, quality)
            self._items.insert(i, item)
            rank = len(qs) - 1 - i  # from the best end: 0 is the best entry
            if len(qs) > 2 * self._block_size:
                self._spill()
        head_size = self._head_size
        if rank >= head_size:
            return False
        self._head_sum += max(quality, 0.0)
        if self._len > head_size:
            self._head_sum -= max(self._at_rank(head_size), 0.0)
        return True

    def _push_lower(self, quality: float, item: Any) -> int:
        """Insert below the top list; return the entry's rank, counted only up to the head."""
        maxes, blocks = self._lower_maxes, self._lower_qs
        assert maxes is not None and blocks is not None and self._lower_items is not None
        b = bisect_left(maxes, quality)  # < len(maxes): quality <= maxes[-1]
        block, items = blocks[b], self._lower_items[b]
        i = bisect_left(block, quality)  # <= len(block) - 1, so maxes[b] is unchanged
        block.insert(i, quality)
        items.insert(i, item)
        rank = len(self._qs) + len(block) - 1 - i
        j = len(blocks) - 1
        while j > b and rank < self._head_size:
            rank += len(blocks[j])
            j -= 1
        if len(block) > 2 * self._block_size:
            half = self._block_size
            blocks.insert(b, block[:half])
            self._lower_items.insert(b, items[:half])
            maxes.insert(b, block[half - 1])
            del block[:half]
            del items[:half]
        return rank

    def _spill(self) -> None:
        """Move the worse half of the top list to a new last lower block."""
        if self._lower_qs is None:
            self._lower_qs, self._lower_items, self._lower_maxes = [], [], []
        assert self._lower_items is not None and self._lower_maxes is not None
        half, qs, items = self._block_size, self._qs, self._items
        self._lower_qs.append(qs[:half])
        self._lower_items.append(items[:half])
        self._lower_maxes.append(qs[half - 1])
        del qs[:half]
        del items[:half]

    def _blocks_from_best(self) -> Iterator[list[float]]:
        yield self._qs
        if self._lower_qs:
            yield from reversed(self._lower_qs)

    def _at_rank(self, rank: int) -> float:
        """Quality of the entry at ``rank`` from the best end (0: the best)."""
        top = self._qs
        if rank < len(top):
            return top[-1 - rank]
        for block in self._blocks_from_best():
            if rank < len(block):
                return block[-1 - rank]
            rank -= len(block)
        raise IndexError(rank)

    def pop(self) -> Any:
        quality = self._qs.pop()
        item = self._items.pop()
        if not self._qs and self._lower_maxes:
            assert self._lower_qs is not None and self._lower_items is not None
            self._qs = self._lower_qs.pop()
            self._items = self._lower_items.pop()
            self._lower_maxes.pop()
        self._len -= 1
        if not self._len:
            self._head_sum = 0.0  # no drift survives an empty queue
        else:
            self._head_sum -= max(quality, 0.0)
            if self._len >= self._head_size:
                self._head_sum += max(self._at_rank(self._head_size - 1), 0.0)
        return item

    def __len__(self) -> int:
        return self._len

    def best_quality(self) -> float:
        return self._qs[-1] if self._qs else 0.0

    def head_sum(self) -> float:
        return self._head_sum

    def peek(self, n: int) -> list[tuple[float | None, Any]]:
        # Best first: each list from its end (the oldest of equals is last), the top list
        # first, then the lower blocks from the best.
        found: list[tuple[float | None, Any]] = []
        lists = [(self._qs, self._items)]
        if self._lower_qs and self._lower_items:
            lists += list(zip(reversed(self._lower_qs), reversed(self._lower_items), strict=True))
        for qs, items in lists:
            for i in range(len(qs) - 1, -1, -1):
                if len(found) >= n:
                    return found
                found.append((qs[i], items[i]))
        return found

    def set_head_size(self, size: int) -> None:
        """Called after every response (the session length follows the host's estimate):
        only the entries between the old and the new size are summed, not the whole head."""
        old, new = self._head_size, max(1, size)
        if new == old:
            return
        self._head_size = new
        if not self._len:
            return  # a new host's queue: nothing to sum
        if new > old:
            self._head_sum += self._sum_ranks(old, new)
        else:
            self._head_sum -= self._sum_ranks(new, old)

    def _sum_ranks(self, start: int, stop: int) -> float:
        """Sum of the positive qualities at ranks ``start`` to ``stop - 1`` (0: the best)."""
        total, offset = 0.0, 0  # offset: rank of the block's best entry
        for block in self._blocks_from_best():
            n = len(block)
            if offset + n > start:
                first = max(start - offset, 0)  # ranks within the block, from its best
                last = min(stop - offset, n)
                for quality in block[n - last : n - first]:
                    if quality > 0:
                        total += quality
            offset += n
            if offset >= stop:
                break
        return total

    def clear(self) -> list[Any]:
        return pop_all(self)

    def close(self) -> None:
        self._qs.clear()
        self._items.clear()
        self._lower_qs = self._lower_items = self._lower_maxes = None
        self._len = 0
        self._head_sum = 0.0
