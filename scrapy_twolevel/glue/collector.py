"""The garbage collector's young generation, sized for a crawl (``TWOLEVEL_GC_THRESHOLD``).

Why: with Python's default threshold (a young collection every 700 net allocations of
container objects), a request's objects — its Deferreds, its connection, its Response —
outlive two young collections while the server answers, so they reach the oldest
generation. A full collection runs whenever a quarter of that generation is new, and each
one walks the whole heap, which grows with the crawl (the frontier's hosts, idle
connections). On the broad-crawl benchmark (:doc:`broad`) full collections took a third of
the crawler's CPU at 100,000 hosts, 300 ms each; with a young generation of 50,000 objects a
request's objects mostly die young, and the collector's share fell to a few percent at
every size.

The threshold is the process's, not the crawl's: it is set when the first crawl of the
process opens its scheduler and Python's own is put back when the last one closes (unless
someone else changed it meanwhile). ``0`` leaves the collector alone.
"""

from __future__ import annotations

import gc
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .reporting import Reporter

#: Stats: the young generation's threshold in effect, the collections that ran while the
#: crawl was open and the seconds they took (all generations).
THRESHOLD_STAT = "twolevel/gc/threshold"
COLLECTIONS_STAT = "twolevel/gc/collections"
SECONDS_STAT = "twolevel/gc/seconds"


class _ProcessThreshold:
    """Who holds the process's threshold, and what to put back when the last one leaves."""

    def __init__(self) -> None:
        self.holders = 0
        self.saved: tuple[int, int, int] | None = None
        self.ours: tuple[int, int, int] | None = None

    def take(self, young: int) -> None:
        if self.holders == 0:
            saved = gc.get_threshold()
            self.saved, self.ours = saved, (young, saved[1], saved[2])
            gc.set_threshold(*self.ours)
        self.holders += 1

    def give_back(self) -> None:
        self.holders -= 1
        if self.holders == 0 and self.saved is not None:
            if gc.get_threshold() == self.ours:
                gc.set_threshold(*self.saved)
            self.saved = self.ours = None


_PROCESS = _ProcessThreshold()


class CollectorTuning:
    """Sets the young generation's threshold while a crawl is open and counts the
    collections that run meanwhile, and their seconds (stats :data:`COLLECTIONS_STAT`,
    :data:`SECONDS_STAT`, kept current: the live view and the log's stats show them)."""

    def __init__(self, threshold: int, reporter: Reporter) -> None:
        """``threshold``: the young generation's, in container objects (``0``: Python's)."""
        self.threshold = threshold
        self.reporter = reporter
        self.seconds = 0.0
        self._began = 0.0
        self._open = False

    def start(self) -> None:
        if self._open:
            return
        self._open = True
        if self.threshold:
            _PROCESS.take(self.threshold)
        self.reporter.set(THRESHOLD_STAT, gc.get_threshold()[0])
        self.reporter.set(COLLECTIONS_STAT, 0)
        self.reporter.set(SECONDS_STAT, 0.0)
        gc.callbacks.append(self._timed)

    def stop(self) -> None:
        if not self._open:
            return
        self._open = False
        gc.callbacks.remove(self._timed)
        if self.threshold:
            _PROCESS.give_back()

    def _timed(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._began
        self.reporter.inc(COLLECTIONS_STAT)
        self.reporter.set(SECONDS_STAT, round(self.seconds, 3))
