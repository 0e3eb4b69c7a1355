"""The one registry of requests handed to the engine, from hand-out until finished.

A handed-out request ends twice, and different parts wait for each end:

1. Its **outcome** is known: the host metrics middleware reported the response or the
   failure (or, without the middleware, the request left the downloader). Its host may
   then take its next request (:meth:`InFlight.outcome`). A request that left the
   downloader without an outcome (a middleware dropped it) frees its host too
   (:meth:`InFlight.release_dropped`).
2. The **engine is done** with it: the response's callback output, or the redirect or
   retry a middleware returned, is queued. Only then may what was kept for a crash be
   let go: the JOBDIR row, the copy in Redis, the seed fetch's record. Those are
   *leases* (:meth:`InFlight.lease`); :meth:`InFlight.collect` asks the engine once
   which requests it still holds and ends the leases of the others, calling each
   holder's ``finished(request, token)``.

Without an engine to ask (unit tests), a request is done when its outcome is known.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from scrapy import Request


class LeaseHolder(Protocol):
    """Keeps something for a request until the engine is done with it."""

    def finished(self, request: Request, token: Any) -> None:
        """The engine is done with ``request``; ``token`` is what :meth:`InFlight.lease`
        was given."""


class InFlight:
    """Requests handed out: their lanes until their outcome, their leases until done."""

    def __init__(
        self,
        *,
        in_progress: Callable[[], Container[Any] | None],
        in_downloader: Callable[[], Container[Any] | None],
    ) -> None:
        """``in_progress``: the requests the engine has not finished with; ``in_downloader``:
        those inside the downloader (its middlewares included); ``None``: unknown."""
        self._in_progress = in_progress
        self._in_downloader = in_downloader
        #: Handed out, outcome not yet known -> its lane.
        self._lanes: dict[Request, str] = {}
        #: Handed out, engine not yet done -> the leases held on it.
        self._leases: dict[Request, list[tuple[LeaseHolder, Any]]] = {}

    # -- the outcome: the lane is free again --------------------------------------------

    def handed_out(self, request: Request, lane: str) -> None:
        self._lanes[request] = lane

    def lane(self, request: Request) -> str | None:
        """The lane of ``request`` while its outcome is not known, else ``None``."""
        return self._lanes.get(request)

    def outcome(self, request: Request) -> str | None:
        """``request``'s outcome is known: its lane, or ``None`` if it held none."""
        return self._lanes.pop(request, None)

    def release_dropped(self) -> list[str]:
        """The lanes of requests that left the downloader without an outcome (dropped by a
        middleware before download); ``[]`` when the downloader cannot be inspected."""
        active = self._in_downloader()
        if active is None:
            return []
        dropped = [r for r in self._lanes if r not in active]
        return [self._lanes.pop(request) for request in dropped]

    @property
    def lanes_busy(self) -> int:
        return len(self._lanes)

    # -- the engine is done: leases end -------------------------------------------------

    def lease(self, request: Request, holder: LeaseHolder, token: Any) -> None:
        """Call ``holder.finished(request, token)`` once the engine is done with ``request``."""
        self._leases.setdefault(request, []).append((holder, token))

    def collect(self) -> None:
        """End the leases of every request the engine is done with."""
        if not self._leases:
            return
        for request in self._finished():
            for holder, token in self._leases.pop(request):
                holder.finished(request, token)

    def held_by(self, holder: LeaseHolder) -> Iterator[tuple[Request, Any]]:
        """``(request, token)`` of every lease ``holder`` still holds."""
        for request, leases in self._leases.items():
            for owner, token in leases:
                if owner is holder:
                    yield request, token

    def drop(self, holder: LeaseHolder) -> None:
        """Forget ``holder``'s leases without ending them (what they kept is gone)."""
        for request in list(self._leases):
            kept = [(h, t) for h, t in self._leases[request] if h is not holder]
            if kept:
                self._leases[request] = kept
            else:
                del self._leases[request]

    def _finished(self) -> list[Request]:
        active = self._in_progress()
        if active is None:
            active = self._lanes
        return [r for r in self._leases if r not in active]
