"""The garbage collector's young generation, sized for a crawl (``TWOLEVEL_GC_THRESHOLD``).

Why: with Python's default threshold (a young collection every 700 net allocations of
container objects), a request's objects — its Deferreds, its connection, its Response —
outlive two young collections while the server answers, so they reach the oldest
generation. A full collection runs whenever a quarter of that generation is new, and each
one walks the whole heap, which grows with the crawl (the frontier's hosts, idle
connections). On the broad-crawl benchmark (:doc:`broad`) the collector took a fifth to a
quarter of the crawler's CPU at 1,000 and at 100,000 hosts (full collections of 300 ms each
at 100,000); with a young generation of 50,000 objects a request's objects mostly die
young, and the collector's share fell to about 4% at both sizes.

The threshold is the process's, not the crawl's: it is set when the first crawl of the
process opens its scheduler and Python's own is put back when the last one closes (unless
someone else changed it meanwhile). ``0`` leaves the collector alone.
"""

from __future__ import annotations

import gc
import time
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .reporting import Reporter

#: Stats: the young generation's threshold in effect, the collections that ran while the
#: crawl was open and the seconds they took (all generations).
THRESHOLD_STAT = "twolevel/gc/threshold"
COLLECTIONS_STAT = "twolevel/gc/collections"
SECONDS_STAT = "twolevel/gc/seconds"


class _Process:
    """What the process's crawls share: who holds the threshold and what to put back when
    the last one leaves, and the one collector callback that times collections for every
    open crawl. Crawls are held weakly: a scheduler never closed (a test, a crash) does not
    stay alive through ``gc.callbacks``, and its hold on the threshold ends when it is
    collected."""

    def __init__(self) -> None:
        self.holders = 0
        self.saved: tuple[int, int, int] | None = None
        self.ours: tuple[int, int, int] | None = None
        self.open: weakref.WeakSet[CollectorTuning] = weakref.WeakSet()
        self._began = 0.0

    def hold(self, young: int) -> None:
        if self.holders == 0:
            saved = gc.get_threshold()
            self.saved, self.ours = saved, (young, saved[1], saved[2])
            gc.set_threshold(*self.ours)
        self.holders += 1

    def release(self) -> None:
        self.holders -= 1
        if self.holders == 0 and self.saved is not None:
            if gc.get_threshold() == self.ours:
                gc.set_threshold(*self.saved)
            self.saved = self.ours = None

    def watch(self, tuning: CollectorTuning) -> None:
        if self._timed not in gc.callbacks:
            gc.callbacks.append(self._timed)
        self.open.add(tuning)

    def unwatch(self, tuning: CollectorTuning) -> None:
        self.open.discard(tuning)
        if not self.open and self._timed in gc.callbacks:
            gc.callbacks.remove(self._timed)

    def _timed(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        spent = time.perf_counter() - self._began
        for tuning in list(self.open):
            tuning.collected(spent)


_PROCESS = _Process()


class CollectorTuning:
    """Sets the young generation's threshold while a crawl is open and counts the
    collections that run meanwhile, and their seconds (stats :data:`COLLECTIONS_STAT`,
    :data:`SECONDS_STAT`, kept current: the live view and the log's stats show them)."""

    def __init__(self, threshold: int, reporter: Reporter) -> None:
        """``threshold``: the young generation's, in container objects (``0``: Python's)."""
        self.threshold = threshold
        self.reporter = reporter
        self.seconds = 0.0
        self._open = False
        #: Ends this crawl's hold on the threshold: at :meth:`stop`, or when collected.
        self._release: weakref.finalize[[], CollectorTuning] | None = None

    def start(self) -> None:
        if self._open:
            return
        self._open = True
        if self.threshold:
            _PROCESS.hold(self.threshold)
            self._release = weakref.finalize(self, _PROCESS.release)
        self.reporter.set(THRESHOLD_STAT, gc.get_threshold()[0])
        self.reporter.set(COLLECTIONS_STAT, 0)
        self.reporter.set(SECONDS_STAT, 0.0)
        _PROCESS.watch(self)

    def stop(self) -> None:
        if not self._open:
            return
        self._open = False
        _PROCESS.unwatch(self)
        if self._release is not None:
            self._release()
            self._release = None

    def collected(self, seconds: float) -> None:
        """A collection ran while the crawl was open; it took ``seconds``."""
        self.seconds += seconds
        self.reporter.inc(COLLECTIONS_STAT)
        self.reporter.set(SECONDS_STAT, round(self.seconds, 3))
