"""A handed-out request's outcome: folded into its host's estimates, its host freed.

The host metrics middleware reports every request's outcome through the scheduler's view
(:mod:`scrapy_twolevel.view`): a response (:meth:`Outcomes.measured`), a failure
(:meth:`Outcomes.failed`), a refusal (:meth:`Outcomes.refused`). Without the middleware,
the request leaving the downloader is the outcome (:meth:`Outcomes.request_done`). Either
way a request that is no longer in the downloader and was never reported (dropped by
another middleware) frees its host when the frontier next runs dry
(:meth:`Outcomes.release_dropped`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .politeness import refused_before

if TYPE_CHECKING:
    from scrapy import Request

    from ..frontier import Frontier, Measurement
    from .inflight import InFlight
    from .reporting import Reporter


class Outcomes:
    """Turns each handed-out request's outcome into its host's estimates and freedom."""

    def __init__(
        self,
        *,
        frontier: Frontier,
        inflight: InFlight,
        reporter: Reporter,
        wake: Callable[[], object],
    ) -> None:
        """``wake``: ask the engine for requests (a host was freed after the frontier had
        none ready)."""
        self._frontier = frontier
        self._inflight = inflight
        self._reporter = reporter
        self._wake = wake
        self._held_back = False

    def held_back(self) -> None:
        """The frontier had requests but none ready: wake the engine when a host is freed."""
        self._held_back = True

    def measured(self, request: Request, measurement: Measurement | None) -> None:
        lane = self._inflight.lane(request)
        # A response the scheduler did not hand out (robots.txt, media, download_async) is
        # not one of the host's pages: it counts toward no budget and ends no session.
        if measurement is not None and lane is not None:
            self._frontier.observe(lane, measurement)
        self.request_done(request)

    def failed(
        self,
        request: Request,
        *,
        elapsed: float,
        timeout: bool,
        kind: str,
        repeat: bool,
        silent: bool,
    ) -> bool:
        """Whether the host is backed off (the middleware then sends the request back without
        using up a RetryMiddleware attempt). A download the scheduler did not hand out
        (``engine.download``: robots.txt, media) is counted, not held against the host."""
        self._reporter.inc(f"twolevel/failures/{kind}")
        self._reporter.inc("twolevel/failures/repeat", int(repeat))
        lane = self._inflight.lane(request)
        if lane is None:
            return False
        self._frontier.observe_failure(
            lane, elapsed=elapsed, timeout=timeout, repeat=repeat, silent=silent
        )
        self.request_done(request)
        return self._frontier.backed_off(lane)

    def refused(self, request: Request, host: str, retry_after: float | None) -> bool:
        lane = self._inflight.lane(request)
        if lane is None:
            # Not handed out by the scheduler: the host waits as the server asked, and the
            # copy the middleware sends waits at the host's gate as long (with no time
            # given, nothing would hold the copy back: RetryMiddleware decides, as usual).
            if retry_after is None:
                return False
            self._frontier.hold(host, retry_after)
            return True
        again = self._frontier.observe_refusal(
            lane, retry_after=retry_after, refused_before=refused_before(request.meta)
        )
        self.request_done(request)
        return again

    def crawl_delay(self, host: str, delay: float) -> None:
        self._frontier.set_min_gap(host, delay)
        self._reporter.crawl_delay(host, delay)

    def request_done(self, request: Request) -> None:
        """``request``'s outcome is known: its host may take its next one."""
        lane = self._inflight.outcome(request)
        if lane is None:
            return
        self._frontier.done(lane)
        if self._held_back:
            self._held_back = False
            self._wake()

    def release_dropped(self) -> bool:
        """Free hosts whose request never reached the downloader (dropped by a middleware)."""
        lanes = self._inflight.release_dropped()
        for lane in lanes:
            self._frontier.done(lane)
            self._reporter.inc("twolevel/released_without_download")
        return bool(lanes)
