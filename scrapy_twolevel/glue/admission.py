"""How a new request is admitted: one path per mode, written over the same steps.

On one machine (:class:`LocalAdmission`) a request goes through, in this order:

1. the **dupefilter** (most links are duplicates, so it goes first, before any work);
2. :meth:`Intake.place <scrapy_twolevel.glue.intake.Intake.place>`: its host, lane and
   quality, each with a fallback, so nothing after the dupefilter can lose it;
3. the **seed planner** is told (``TWOLEVEL_RECRAWL``: a seed's fetch is named in meta);
4. the store **wraps** it (the request itself, or its encoded bytes);
5. the store **queues** it in its lane (:meth:`LocalStore.queue
   <scrapy_twolevel.glue.store.LocalStore.queue>`), which refuses a given-up host's.

The distributed mode (:class:`~scrapy_twolevel.distributed.admission.ClusterAdmission`)
works out the host first, since a request whose bucket another node holds goes to that
node's inbox, unfiltered (the seen keys of a bucket live with its holder); a request of a
bucket held here then takes steps 1, 3, 4 and 5 as above.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

from ..dupefilter import SeenCacheDupeFilter
from ..frontier import PLAIN_LANE

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.dupefilters import BaseDupeFilter

    from ..frontier import Frontier
    from .intake import Intake
    from .reporting import Reporter
    from .seed_planner import SeedPlanner
    from .store import LocalStore


class Admission(Protocol):
    """Admits new requests; see the module docstring."""

    def admit(self, request: Request) -> bool:
        """Whether ``request`` was queued (or sent to the node that queues it)."""

    def seen_test(self) -> Callable[[Request], bool] | None:
        """``request -> bool``: whether :meth:`admit` would filter ``request`` as seen,
        asked without recording it; ``None`` when that cannot be asked."""


class LocalAdmission:
    """The dupefilter, then the queue: a crawl on one machine (memory or ``JOBDIR``)."""

    def __init__(
        self,
        *,
        dupefilter: BaseDupeFilter,
        intake: Intake,
        store: LocalStore,
        frontier: Frontier,
        seeds: SeedPlanner | None,
        reporter: Reporter,
    ) -> None:
        self._df = dupefilter
        self._intake = intake
        self._store = store
        self._frontier = frontier
        self._seeds = seeds
        self._reporter = reporter
        # Only the seen cache can test a request without recording it.
        self._seen_cache = dupefilter if isinstance(dupefilter, SeenCacheDupeFilter) else None

    def admit(self, request: Request) -> bool:
        if not request.dont_filter and self._df.request_seen(request):
            self._df.log(request, cast("Spider", self._reporter.spider))
            return False
        host, lane, quality = self._intake.place(request)
        if self._seeds is not None:
            self._seeds.accepting(request)
        if host == PLAIN_LANE:
            self._reporter.inc("twolevel/plain_lane")
        item = self._store.wrap(request)
        return self._store.queue(self._frontier, lane, quality, item, request)

    def seen_test(self) -> Callable[[Request], bool] | None:
        return None if self._seen_cache is None else self._drop_if_seen

    def _drop_if_seen(self, request: Request) -> bool:
        """Whether :meth:`admit` would filter ``request``, asked without recording it
        (logged as filtered if so; the caller counts it): the duplicate-links middleware
        drops such requests as the spider yields them."""
        seen = self._seen_cache
        if request.dont_filter or seen is None:
            return False
        if not seen.has_key(seen.request_key(request)):
            return False
        seen.log(request, cast("Spider", self._reporter.spider), count=False)
        return True
