"""How long the crawler's own event loop kept replies waiting: its stalls.

Scrapy runs callbacks, parsing and scheduling on one thread. A callback that parses a
2.7-MB page holds the loop for 1.8 s, and a reply that came meanwhile is read only after
it: the request looks held by the server for that long, and a host whose pace is 6 ms
learnt one of 1.5 s from it (measured on the real-server benchmark's CPU-bound web). A
saturated loop does the same in small steps: a request over TLS waits for the loop at
each of its round trips, and on the second real-server web replies 7 to 14 ms away came
0.3 to 0.9 s late, the loop stalled for all but 20 to 60 ms of it. The crawler's CPU time
over the request cannot tell those waits from work done while the loop still read every
reply at once (the tests' own web serves pages from the crawler's process); the loop's
lateness can: a timer due every :data:`TICK` seconds that fires ``s`` seconds late was
kept waiting behind ``s`` seconds of work, and so was any reply that came meanwhile.

:class:`LoopStalls` keeps the stalls (a late tick's lateness, and when it ended); their
total within a request's time is the most the crawler itself can have delayed its reply
(:attr:`~.estimates.Measurement.lag`). Pure module: the clock is the caller's, and so is
the timer that calls :meth:`LoopStalls.tick`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

#: Seconds between two ticks: the resolution of a stall (the shortest hold a server's
#: pace gives that matters, 0.1 s, is several ticks long; see ``estimates.DELAY_MIN``).
TICK = 0.02
#: A tick later than this is a stall worth keeping (shorter ones are a loop at work).
STALL_MIN = 0.01
#: Stalls are kept this many seconds: longer than a request takes (Scrapy's download
#: timeout is 180 s), and at most :data:`STALLS_KEPT` of them.
KEEP = 300.0
STALLS_KEPT = 20_000


class LoopStalls:
    """The event loop's recent stalls, from a tick the caller runs every :data:`TICK`.

    ``clock()``: seconds, the same clock the request times are on."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        #: When the next tick is due (``None``: not ticking).
        self._due: float | None = None
        #: ``(ended, seconds)`` of each stall, oldest first.
        self._stalls: deque[tuple[float, float]] = deque(maxlen=STALLS_KEPT)

    def start(self) -> float:
        """Ticking starts: the seconds until the first tick."""
        self._due = self._clock() + TICK
        return TICK

    def stop(self) -> None:
        self._due = None

    def tick(self) -> float:
        """The timer fired: note how late it was; the seconds until the next tick."""
        now = self._clock()
        if self._due is not None:
            late = now - self._due
            if late >= STALL_MIN:
                self._stalls.append((now, late))
            stalls = self._stalls
            while stalls and stalls[0][0] < now - KEEP:
                stalls.popleft()
        self._due = now + TICK
        return TICK

    def stalled(self, since: float) -> float:
        """Seconds the loop stalled between ``since`` and now (of a stall that began
        before ``since``, the part after it); one going on now counts for as long as the
        tick due has waited. 0 when not ticking."""
        due = self._due
        if due is None:
            return 0.0
        now = self._clock()
        total = max(0.0, min(now - due, now - since))
        for ended, seconds in reversed(self._stalls):
            if ended < since:
                break
            total += min(seconds, ended - since)
        return total
