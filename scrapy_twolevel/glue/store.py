"""Where a queued request lives between its admission and its hand-out: the request store.

The frontier decides the order; a *store* decides what stands for a request in its host's
queue and keeps what a crash must not lose. Three stores, one interface
(:class:`RequestStore`): :class:`MemoryStore` (no ``JOBDIR``: the request itself),
:class:`~scrapy_twolevel.glue.jobdir.JobdirStore` (``JOBDIR``: a row of an SQLite file)
and :class:`~scrapy_twolevel.distributed.store.ClusterStore` (``TWOLEVEL_REDIS_URL``: the
encoded request, its copy in Redis). The store is built before the frontier, which queues
through the store's queue factory and tells it of the pages budgeted hosts give and the
items it drops; a request enters through the mode's admission
(:mod:`~scrapy_twolevel.glue.admission`), which wraps it and queues it with
:meth:`RequestStore.queue`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..frontier import memory_queue
from ..frontier.hosts import GIVEN_UP_BUDGET

if TYPE_CHECKING:
    from scrapy import Request

    from ..frontier import Frontier, HostQueue
    from .reporting import Reporter


def queue(frontier: Frontier, lane: str, quality: float, item: Any, reporter: Reporter) -> bool:
    """Queue ``item`` in ``lane``; whether it was queued. A host given up (failing, or at its
    budget) takes no more: counted by why."""
    if frontier.push(lane, quality, item):
        return True
    why = frontier.host(lane).given_up_for
    reporter.inc(
        "twolevel/dropped/budget" if why == GIVEN_UP_BUDGET else "twolevel/dropped/host_failed"
    )
    return False


class RequestStore(Protocol):
    """Where queued requests live; see the module docstring."""

    #: ``lane, fetched -> None``: a host with a page budget gave its ``fetched``-th page
    #: (kept so a resumed crawl does not give it its whole budget again); ``None``: not kept.
    on_page: Callable[[str, int], None] | None

    def make_queue(self, lane: str, by_quality: bool) -> HostQueue:
        """A host's queue (the frontier's queue factory)."""

    def restore(self, frontier: Frontier) -> None:
        """Give the new frontier what a resumed crawl kept (hosts, estimates, pages)."""

    def unwrap(self, lane: str, item: Any) -> Request | None:
        """The request to hand out for a popped item, leased until the engine is done with
        it; ``None``: nothing to hand out (the lane is freed and the next item popped)."""

    def discard(self, item: Any) -> None:
        """The frontier dropped a queued item (its host was given up, or had its budget)."""

    def may_dispatch(self) -> bool:
        """Whether requests may be handed out now."""

    def dispatched(self) -> None:
        """A request was handed out, or the frontier has none ready."""

    def save(self, frontier: Frontier) -> None:
        """The crawl stops: keep what a resumed crawl needs (before the frontier closes)."""

    def close(self) -> None:
        """Release the store (after the frontier closed)."""


class LocalStore(RequestStore, Protocol):
    """A store on one machine: the local admission wraps a request and queues it here."""

    def wrap(self, request: Request) -> Any:
        """What stands for ``request`` in its queue."""

    def queue(
        self, frontier: Frontier, lane: str, quality: float, item: Any, request: Request
    ) -> bool:
        """Queue ``item`` (``request`` wrapped) in ``lane``; whether it was queued (a host
        given up takes no more)."""


class MemoryStore:
    """Queued requests in memory, as themselves: no ``JOBDIR``, nothing kept for a crash."""

    on_page: Callable[[str, int], None] | None = None

    def __init__(self, reporter: Reporter) -> None:
        self._reporter = reporter

    def make_queue(self, lane: str, by_quality: bool) -> HostQueue:
        return memory_queue(lane, by_quality)

    def restore(self, frontier: Frontier) -> None:
        return None

    def wrap(self, request: Request) -> Request:
        return request

    def queue(
        self, frontier: Frontier, lane: str, quality: float, item: Any, request: Request
    ) -> bool:
        return queue(frontier, lane, quality, item, self._reporter)

    def unwrap(self, lane: str, item: Any) -> Request | None:
        self._reporter.inc("scheduler/dequeued/memory")
        request: Request = item
        return request

    def discard(self, item: Any) -> None:
        return None

    def may_dispatch(self) -> bool:
        return True

    def dispatched(self) -> None:
        return None

    def save(self, frontier: Frontier) -> None:
        return None

    def close(self) -> None:
        return None
