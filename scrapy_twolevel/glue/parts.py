"""The scheduler's parts, held together once built (:func:`~.assembly.assemble`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .jobdir import JobdirStore
from .seed_planner import close_seed_planner

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from scrapy.dupefilters import BaseDupeFilter

    from ..distributed.admission import SeenKeys
    from ..distributed.sync import ClusterSync
    from ..frontier import Frontier
    from .admission import Admission
    from .outcomes import Outcomes
    from .seed_planner import SeedPlanner
    from .store import RequestStore


@dataclass(frozen=True)
class Parts:
    """The scheduler's parts, built in the order :mod:`~.assembly` gives; frozen: nothing
    is rewired once built. Fans out the crawl's life cycle."""

    dupefilter: BaseDupeFilter
    seeds: SeedPlanner | None
    store: RequestStore
    frontier: Frontier
    admission: Admission
    outcomes: Outcomes
    #: The distributed mode's tick (``TWOLEVEL_REDIS_URL``), ``None`` on one machine.
    cluster: ClusterSync | None

    def start(self) -> Any:
        """The scheduler is open: open the dupefilter (its result is ``open``'s; the
        distributed mode opened it when it joined)."""
        if self.cluster is not None:
            return None
        if isinstance(self.store, JobdirStore):
            self.store.start(self.dupefilter)
        return self.dupefilter.open()

    def busy(self) -> bool:
        """Whether the crawl must stay open for the distributed mode's own work."""
        return self.cluster is not None and self.cluster.busy()

    def leave(self) -> Any:
        """First step of closing, while the rest is still open: the distributed mode's
        last commit and its leaving the crawl (a Deferred); ``None`` on one machine."""
        return None if self.cluster is None else self.cluster.leave()

    def close(self, reason: str) -> Any:
        """Save what a resumed crawl needs, close the frontier, the store and the
        dupefilter (its result is ``close``'s)."""
        self.store.save(self.frontier)
        self.frontier.close()
        self.store.close()
        if self.cluster is not None:
            return self.cluster.close(reason)
        return self.dupefilter.close(reason)


def abandon(
    crawler: Crawler,
    dupefilter: BaseDupeFilter | SeenKeys,
    seeds: SeedPlanner | None,
    frontier: Frontier | None,
    release: Callable[[], object],
) -> None:
    """The crawl refuses to start: release what was built, in the reverse of the order it
    was built (the frontier, then the store or Redis by ``release``, the seed planner, the
    dupefilter), touching no file. Both assemblies call it."""
    if frontier is not None:
        frontier.close()
    release()
    if seeds is not None:
        close_seed_planner(crawler, seeds)
    dupefilter.close("shutdown")
