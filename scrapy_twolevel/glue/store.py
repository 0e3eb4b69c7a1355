"""Where a queued request lives between its admission and its hand-out: the request store.

The frontier decides the order; a *store* decides what stands for a request in its host's
queue and keeps what a crash must not lose. Three stores, one interface
(:class:`RequestStore`): :class:`MemoryStore` (no ``JOBDIR``: the request encoded, or itself),
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

from ..codec import decode_request, encode_request
from ..frontier import memory_queue
from ..frontier.hosts import GIVEN_UP_BUDGET

if TYPE_CHECKING:
    from scrapy import Request, Spider

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
        given up takes no more). Counts it in ``scheduler/enqueued/memory`` or ``/disk``."""


class MemoryStore:
    """Queued requests in memory; nothing kept for a crash (no ``JOBDIR``).

    ``encoded`` (``TWOLEVEL_MEMORY_QUEUE``, the default): a request is queued as its
    encoded bytes (:mod:`~scrapy_twolevel.codec`, as the ``JOBDIR`` and Redis stores hold
    it): a bytes object instead of a ``Request`` and its dicts, and nothing the garbage
    collector walks (see :doc:`broad` for the figures). A request that
    cannot be encoded exactly (a callback that is no spider method, an object in ``meta``)
    is kept as itself, as Scrapy's disk queues keep it in memory; so is every request of a
    ``Request`` subclass that does not come back from its encoding. The request handed
    out is then a copy: ``meta`` shared between queued requests is no longer shared.
    ``objects``: every request as itself, as Scrapy's memory queues keep it.
    """

    on_page: Callable[[str, int], None] | None = None

    def __init__(self, reporter: Reporter, spider: Spider | None, *, encoded: bool) -> None:
        self._reporter = reporter
        self._spider = spider
        self._encoded = encoded
        #: Request classes by whether their requests come back from their encoding
        #: (checked once per class: a subclass's ``__init__`` may not take its own fields).
        self._class_ok: dict[type[Request], bool] = {}

    def make_queue(self, lane: str, by_quality: bool) -> HostQueue:
        return memory_queue(lane, by_quality)

    def restore(self, frontier: Frontier) -> None:
        return None

    def wrap(self, request: Request) -> Request | bytes:
        if not self._encoded:
            return request
        try:
            data = encode_request(request, self._spider)
        except Exception:  # to_dict runs user code (callbacks, Request subclasses)
            self._reporter.inc("twolevel/memory_queue/objects")
            return request
        kind = type(request)
        ok = self._class_ok.get(kind)
        if ok is None:
            ok = self._class_ok[kind] = self._comes_back(data, kind)
        if not ok:
            self._reporter.inc("twolevel/memory_queue/objects")
            return request
        return data

    def _comes_back(self, data: bytes, kind: type[Request]) -> bool:
        try:
            return type(decode_request(data, self._spider)) is kind
        except Exception:
            return False

    def queue(
        self, frontier: Frontier, lane: str, quality: float, item: Any, request: Request
    ) -> bool:
        if not queue(frontier, lane, quality, item, self._reporter):
            return False
        self._reporter.inc("scheduler/enqueued/memory")
        return True

    def unwrap(self, lane: str, item: Any) -> Request | None:
        self._reporter.inc("scheduler/dequeued/memory")
        if type(item) is not bytes:
            request: Request = item
            return request
        try:
            return decode_request(item, self._spider)
        except Exception as exc:
            # Encoded by this process a moment ago, so only a request whose fields its
            # class does not take back (checked once per class) gets here.
            self._reporter.count_once(
                "undecodable",
                "A queued request could not be rebuilt and is dropped (%(request)s).",
                f"{type(exc).__name__}: {exc}",
            )
            return None

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
