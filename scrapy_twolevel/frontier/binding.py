"""Which of the crawl's scarce resources binds now: the price of a second of crawler CPU.

A crawl spends two things a host's session needs: a connection (``K`` of them, one per
open host) for the session's service time, and the crawler's one core for parsing what
comes back. Which one runs out depends on the web and the machine, and changes while the
crawl runs (a burst of big pages, hosts that slow down). Binding-capability
(:class:`~.policies.BindingCapability`) prices a CPU second at ``r`` seconds of the
crawl's whole connection capacity; :class:`CpuPrice` moves ``r`` by what the process did
over the last second, as a price follows demand:

- the core was busy at least :data:`SATURATED` of the time: connections are left idle
  waiting on it, so CPU is dearer: ``r`` times :data:`STEP`, up to :data:`HIGHEST`;
- busy at most :data:`SLACK`: responses are handled as they come, connections are what
  the crawl waits on: ``r`` divided by :data:`STEP`, down to ``1 / K`` (one CPU second
  costs what a connection second does: crawl-capability's ranking);
- in between: ``r`` stays (the gap keeps it from flapping).

The crawler's process time over wall time is the measure: Scrapy runs its callbacks,
parsing and scheduling on one thread, so 1.0 means a saturated core (threads of the
process, DNS say, count too; they are small beside it). Pure module: both clocks are the
caller's.
"""

from __future__ import annotations

from collections.abc import Callable

#: Share of a second on the CPU from which the core counts as saturated.
SATURATED = 0.9
#: Share of a second on the CPU up to which the core counts as having room.
SLACK = 0.7
#: Factor by which the price moves per :data:`INTERVAL`.
STEP = 4.0
#: The highest price: a CPU second worth 64 seconds of all connections (hosts then rank
#: by quality per CPU second, their connection time a tie-break).
HIGHEST = 64.0
#: Seconds between two looks at the clocks.
INTERVAL = 1.0
#: A re-scoring of every ranked host may cost at most this share of the time since the
#: last one: a frontier of 100,000 hosts re-scores every few tens of seconds, not per second.
RESCORE_SHARE = 0.01


class CpuPrice:
    """The crawl's price of a CPU second (``r``), from its process's CPU share.

    ``clock()``: wall seconds (monotonic); ``cpu_clock()``: the process's CPU seconds;
    ``connections``: ``K``, the lowest price's denominator. Starts at 1
    (resource-capability's fixed price).
    """

    def __init__(
        self,
        clock: Callable[[], float],
        cpu_clock: Callable[[], float],
        connections: int,
        *,
        start: float = 1.0,
    ) -> None:
        self._clock = clock
        self._cpu = cpu_clock
        self.lowest = 1.0 / max(1, connections)
        self.price = min(HIGHEST, max(self.lowest, start))
        self._at = clock()
        self._cpu_at = cpu_clock()
        self._next_at = self._at + INTERVAL
        #: The CPU share over the last interval (``None`` before the first).
        self.busy: float | None = None
        #: Times the price changed.
        self.changes = 0

    def sample(self) -> float | None:
        """Look at the clocks if an interval has passed; the new price if it changed,
        ``None`` otherwise. Cheap when called often (one clock read)."""
        now = self._clock()
        if now < self._next_at:
            return None
        cpu = self._cpu()
        busy = (cpu - self._cpu_at) / max(1e-9, now - self._at)
        self.busy = busy
        self._at, self._cpu_at = now, cpu
        self._next_at = now + INTERVAL
        price = self.price
        if busy >= SATURATED:
            price = min(HIGHEST, price * STEP)
        elif busy <= SLACK:
            price = max(self.lowest, price / STEP)
        if price == self.price:
            return None
        self.price = price
        self.changes += 1
        return price

    def rescored(self, seconds: float) -> None:
        """A re-scoring after a price change took ``seconds``: the next look waits until
        it is at most :data:`RESCORE_SHARE` of the time between them."""
        self._next_at = max(self._next_at, self._at + seconds / RESCORE_SHARE)
