"""The two-level scheduler as this package's middlewares and extensions see it.

Scrapy builds middlewares and extensions before the scheduler and hands them no reference
to it, so they look it up when they need it: :func:`view_of` gives the open
:class:`~scrapy_twolevel.scheduler.TwoLevelScheduler` as a :class:`CrawlView` (``None``
under another scheduler, or before it opened). The view is the one way in: the host
metrics middleware reports each request's outcome through it (its ``outcomes``) and
reads the scheduler's answer from the call (whether to send a request back), the
duplicate-links middleware asks it whether a link was seen, the live view reads the
frontier and the cluster's status. Nothing else of the scheduler is an interface.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from ._engine import scheduler_of
from .scheduler import TwoLevelScheduler

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from .frontier import Frontier
    from .frontier.hosts import SessionRecord
    from .glue.outcomes import Outcomes


class CrawlView(Protocol):
    """What the open two-level scheduler answers; see the module docstring."""

    @property
    def frontier(self) -> Frontier | None:
        """The frontier: hosts, their queues, estimates and states (``None`` once closed)."""

    def seed_rows(self, top: int) -> list[dict[str, Any]] | None:
        """The seed planner's next refetches (``TWOLEVEL_RECRAWL``), ``None`` without one."""

    def cluster_status(self) -> dict[str, Any] | None:
        """The distributed mode as this node knows it, ``None`` on one machine."""

    def recent_sessions(self, lane: str) -> list[SessionRecord]:
        """The host's sessions among the crawl's last few thousand, oldest first."""

    def queued_pages(self, lane: str, n: int) -> list[dict[str, Any]]:
        """The first ``n`` URLs the host's queue would hand out (``url``, ``quality``:
        ``None`` where the policy keeps no qualities); ``[]`` for a host it does not know."""

    def quality(self, request: Request) -> float:
        """``TWOLEVEL_QUALITY`` of ``request`` (may raise what the user's function raises)."""

    def seen_test(self) -> Callable[[Request], bool] | None:
        """``request -> bool``: whether the scheduler would filter ``request`` as seen, asked
        without recording it (a request dropped so is logged as filtered); ``None`` when
        the dupefilter cannot be asked that (not the seen cache, or the distributed mode)."""

    @property
    def outcomes(self) -> Outcomes | None:
        """Where each handed-out request's outcome goes (a response's ``Measurement``, a
        failure, a refusal, a robots.txt ``Crawl-delay``; see
        :class:`~scrapy_twolevel.glue.outcomes.Outcomes`); its answers say whether a request
        is worth sending back. ``None`` once closed."""


def view_of(crawler: Crawler) -> CrawlView | None:
    """The crawl's open two-level scheduler, ``None`` under another or before it opened."""
    scheduler = scheduler_of(crawler)
    # Not isinstance: Scrapy's BaseScheduler metaclass takes any class with the
    # scheduler's three methods (Scrapy's own Scheduler too) for a subclass of it.
    if TwoLevelScheduler not in type(scheduler).__mro__:
        return None
    ours = cast("TwoLevelScheduler", scheduler)
    return ours if ours.frontier is not None else None
