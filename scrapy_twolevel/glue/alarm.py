"""One cancellable timer that fires at the earliest of the times it is asked for.

The scheduler (wake the engine when a backed-off host may be opened again) and the host
gate of the metrics middleware (admit a request when its host's ``Retry-After`` ends) each
wait for the earliest of many future times: asking for a later time than the one armed
changes nothing, an earlier one re-arms. The timer runs on the crawl's event loop
(:func:`~scrapy_twolevel._engine.call_later`); without one (unit tests) nothing fires.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._engine import call_later


class Alarm:
    """Calls ``fire()`` once the ``clock`` reaches the earliest time given to :meth:`at`."""

    def __init__(self, fire: Callable[[], object], clock: Callable[[], float]) -> None:
        self._fire = fire
        self._clock = clock
        self._timer: Any = None
        self._when: float | None = None

    def at(self, when: float | None) -> None:
        """Fire at ``when`` (clock time) unless armed for no later; ``None``: no change."""
        if when is None or (self._when is not None and self._when <= when):
            return
        self.cancel()
        self._when = when
        self._timer = call_later(max(0.0, when - self._clock()), self._ring)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._when = None

    def _ring(self) -> None:
        self._timer = self._when = None
        self._fire()
