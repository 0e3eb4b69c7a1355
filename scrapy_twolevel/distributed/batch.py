"""What one tick of a node sends to Redis (:class:`Batch`) and learns (:class:`SyncResult`).

Filled and applied on the reactor thread by the scheduler's distributed backend
(:mod:`.store`, :mod:`.admission`, :mod:`.sync`), carried to and from :meth:`.node.Node.sync` in the
background thread. No Scrapy, no Redis here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .history import HistoryWrites
from .inbox import Entry


class AfterCommit(Exception):
    """A tick failed after its batch was committed: only ``remaining`` (what the tick had
    not done yet) may be sent again, or the commit would be applied twice."""

    def __init__(self, remaining: Batch, result: SyncResult, cause: Exception) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.remaining = remaining
        self.result = result  # what the commit did, for the counts


@dataclass
class Batch:
    """What the scheduler changed since the last tick (filled on the reactor thread)."""

    #: ``(bucket, entry id, encoded request, 16-byte seen key)`` of held buckets; an
    #: empty entry id stores the key alone (a fetched request that had no copy in Redis).
    stores: list[tuple[int, str, bytes, bytes]] = field(default_factory=list)
    #: ``(bucket, host key, encoded request)`` for buckets this node does not hold.
    routes: list[tuple[int, str, bytes]] = field(default_factory=list)
    #: Inbox entry ids now stored (or forwarded, or dropped as seen).
    acks: list[bytes] = field(default_factory=list)
    #: ``(bucket, entry id)`` of finished requests: their leases.
    dones: list[tuple[int, str]] = field(default_factory=list)
    #: ``(bucket, host key) -> pages given`` of hosts with a page budget (the latest
    #: count), kept in ``pages:<bucket>`` so the bucket's next holder counts them too.
    pages: dict[tuple[int, str], int] = field(default_factory=dict)
    #: Held buckets this node no longer owns and has drained.
    release: list[int] = field(default_factory=list)
    #: Recrawl history records and seed plans (:mod:`.history`), with ``TWOLEVEL_RECRAWL``.
    history: HistoryWrites = field(default_factory=HistoryWrites)
    #: Ask whether the whole crawl is out of work (this node is).
    check_idle: bool = False

    def __bool__(self) -> bool:
        return bool(
            self.stores
            or self.routes
            or self.acks
            or self.dones
            or self.pages
            or self.release
            or self.history
        )

    def prepend(self, earlier: Batch) -> None:
        """Put a batch that failed back in front of what was collected since."""
        self.stores[:0], self.routes[:0] = earlier.stores, earlier.routes
        self.acks[:0], self.dones[:0] = earlier.acks, earlier.dones
        self.release[:0] = earlier.release
        for key, fetched in earlier.pages.items():  # counts only grow: keep the larger
            self.pages[key] = max(fetched, self.pages.get(key, 0))
        self.history.prepend(earlier.history)


@dataclass
class SyncResult:
    """What a tick learned, for the scheduler to apply on the reactor thread."""

    #: Buckets the table gives this node now.
    owned: frozenset[int] = frozenset()
    #: Buckets taken this tick: their pending entries ``(id, data)`` and seen keys.
    acquired: dict[int, tuple[list[tuple[str, bytes]], list[bytes]]] = field(default_factory=dict)
    #: The stored seed plans (``HGETALL plans:<bucket>``) of the buckets taken that have any.
    plans: dict[int, dict[bytes, bytes]] = field(default_factory=dict)
    #: The pages each budgeted host gave (``HGETALL pages:<bucket>``), of the buckets taken
    #: that have any: ``bucket -> {host key: pages}``.
    pages: dict[int, dict[str, int]] = field(default_factory=dict)
    released: list[int] = field(default_factory=list)
    received: list[Entry] = field(default_factory=list)
    stored: int = 0
    routed: int = 0
    #: Writes refused because this node does not hold the bucket (zombie results).
    refused: int = 0
    #: This node had been reaped; it has joined again with nothing held.
    rejoined: bool = False
    #: Finished leases and new requests of the batch dropped then (late results).
    dropped_leases: int = 0
    dropped_stores: int = 0
    reaped: list[str] = field(default_factory=list)
    rerouted: int = 0
    #: Whether the whole crawl is out of work (only when asked).
    idle: bool | None = None
    #: Whether seeds are planned anywhere in the crawl (asked when it is out of work).
    planned: bool | None = None
    #: Buckets this node (the leader) moved by measured load this tick.
    rebalanced: int = 0
    #: Damaged data skipped this tick: inbox entries dropped, buckets whose seen keys
    #: could not be read (loaded without them: their URLs may be fetched again).
    damaged_entries: int = 0
    damaged_seen: list[int] = field(default_factory=list)
    #: Duplicate seen keys removed from the buckets taken (:meth:`.SeenLog.compact`).
    seen_compacted: int = 0
    #: Entries in this node's inbox (read with the heartbeat; ``None``: not read).
    inbox_depth: int | None = None
    round_trips: int = 0
    #: CPU seconds the tick took in its thread (client-side cost of the Redis I/O).
    cpu: float = 0.0
