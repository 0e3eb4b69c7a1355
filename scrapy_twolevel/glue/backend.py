"""The interfaces the scheduler's parts meet at: the storage backend and the seen keys.

A *backend* keeps the scheduler's queued requests and what a crash must not lose:
:class:`~scrapy_twolevel.glue.local.MemoryBackend` (no ``JOBDIR``),
:class:`~scrapy_twolevel.glue.local.JobdirBackend` (the ``JOBDIR`` file) and
:class:`~scrapy_twolevel.glue.cluster.Cluster` (Redis, the distributed mode). The scheduler
tells them apart nowhere: it builds one from the settings and talks to it through
:class:`Backend`. A backend builds the frontier over its queues, admits new requests (the
dupefilter, then the queue), turns a popped queue item back into a request, and keeps a
copy of each handed-out request until the engine is done with it (a lease in
:mod:`~scrapy_twolevel.glue.inflight`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from scrapy import Request, Spider

    from ..frontier import Frontier

#: Builds the frontier over a queue factory (``(lane, by_quality) -> queue``).
#: ``make_frontier(queue_factory, on_page=None)``: the frontier over a backend's queues;
#: ``on_page(lane, fetched)`` keeps the pages of hosts with a budget (see
#: :class:`~scrapy_twolevel.frontier.TwoLevelFrontier`).
FrontierMaker = Callable[..., "Frontier"]


class Backend(Protocol):
    """Where the scheduler's queued requests live; see the module docstring."""

    def open(self, make_frontier: FrontierMaker) -> Frontier:
        """Build the frontier over this backend's queues, with what a resumed crawl kept."""

    def join(self) -> None:
        """Start the backend's own work, once the frontier is built."""

    def start(self) -> Any:
        """The scheduler is open: open the dupefilter (its result is ``open``'s)."""

    def enqueue(self, request: Request) -> bool:
        """Admit a new request (the dupefilter, then the queue); whether it was queued."""

    def dropped(self, item: Any) -> None:
        """The frontier dropped a queued item (its host was given up)."""

    def may_dispatch(self) -> bool:
        """Whether requests may be handed out now."""

    def unpack(self, lane: str, item: Any) -> Request | None:
        """The request for a popped queue item; ``None``: nothing to hand out (its lane is
        freed and the next item popped)."""

    def dispatched(self) -> None:
        """A request was handed out, or the frontier has none ready."""

    def busy(self) -> bool:
        """Whether the crawl must stay open for this backend's own work."""

    def leave(self) -> Any:
        """First step of closing, while the rest is still open; may return a Deferred."""

    def close(self, reason: str) -> Any:
        """Close the frontier, the store and the dupefilter (its result is ``close``'s)."""

    def abort(self) -> None:
        """Release what :meth:`open` or :meth:`join` took after one of them failed."""


class SeenKeys(Protocol):
    """What the distributed mode asks of the dupefilter
    (:class:`~scrapy_twolevel.dupefilter.SeenCacheDupeFilter`): keys that move with their
    bucket."""

    def request_key(self, request: Request) -> bytes: ...

    def key_seen(self, key: bytes) -> bool: ...

    def has_key(self, key: bytes) -> bool: ...

    def add_keys(self, keys: Iterable[bytes]) -> None: ...

    def forget(self) -> None: ...

    def log(self, request: Request, spider: Spider) -> None: ...

    def open(self) -> Any: ...

    def close(self, reason: str) -> Any: ...
