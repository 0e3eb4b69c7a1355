"""The package's timers on the crawl's event loop, with their bookkeeping in one place.

Two kinds:

- :class:`Timer`: one pending call at a time (a commit within an interval, the next
  tick, the next slice of a bucket being loaded): arming it while it is armed changes
  nothing.
- :class:`Alarm`: fires at the earliest of many future times (the scheduler waking the
  engine when a backed-off host may be opened again, the host gate admitting a request
  when its host's ``Retry-After`` ends, the seed planner's next due refetch): asking for
  a later time than the one armed changes nothing, an earlier one re-arms.

Both run on the crawl's event loop (:func:`~scrapy_twolevel._engine.call_later`); without
one (unit tests) nothing fires.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._engine import call_later


class Timer:
    """Calls ``fire()`` once, ``delay`` seconds after :meth:`arm`, unless cancelled."""

    def __init__(self, fire: Callable[[], object]) -> None:
        self._fire = fire
        self._timer: Any = None

    @property
    def armed(self) -> bool:
        return self._timer is not None

    def arm(self, delay: float) -> None:
        """Fire in ``delay`` seconds, unless already armed."""
        if self._timer is None:
            self._timer = call_later(delay, self._ring)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _ring(self) -> None:
        self._timer = None
        self._fire()


class Alarm:
    """Calls ``fire()`` once the ``clock`` reaches the earliest time given to :meth:`at`.

    ``delay_until(when)``: the real seconds to wait for clock time ``when`` (default
    ``when - clock()``; the seed planner's clock may run faster than real time)."""

    def __init__(
        self,
        fire: Callable[[], object],
        clock: Callable[[], float],
        delay_until: Callable[[float], float] | None = None,
    ) -> None:
        self._fire = fire
        self._clock = clock
        self._delay_until = delay_until
        self._timer: Any = None
        self._when: float | None = None

    def at(self, when: float | None) -> None:
        """Fire at ``when`` (clock time) unless armed for no later; ``None``: no change."""
        if when is None or (self._when is not None and self._when <= when):
            return
        self.cancel()
        self._when = when
        delay = self._clock_delay(when) if self._delay_until is None else self._delay_until(when)
        self._timer = call_later(max(0.0, delay), self._ring)

    def _clock_delay(self, when: float) -> float:
        return when - self._clock()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._when = None

    def _ring(self) -> None:
        self._timer = self._when = None
        self._fire()
