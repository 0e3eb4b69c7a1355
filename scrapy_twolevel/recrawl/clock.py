"""The recrawl planner's clock: real time, or real time sped up for demos and tests.

A news site's rhythm is daily and weekly; watching a crawl follow it takes days. With a
``scale`` of 3600 one real second is one hour of *planner time*:
``planner_time = origin + scale * (time.time() - origin)``. A site that serves its
articles on the same clock (the test web's news site does) is then crawled a day in 24
seconds, and everything the planner stores, seed fetches, article times and plans, is in
planner time. With ``scale = 1`` planner time is the wall clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class ScaledClock:
    """``origin + scale * (real() - origin)``; ``to_real_delay`` converts durations back."""

    def __init__(
        self,
        scale: float = 1.0,
        origin: float | None = None,
        real: Callable[[], float] = time.time,
    ) -> None:
        if not scale > 0:
            raise ValueError(f"clock scale must be > 0, got {scale}")
        self.scale = float(scale)
        self.origin = real() if origin is None else float(origin)
        self._real = real

    def __call__(self) -> float:
        return self.origin + self.scale * (self._real() - self.origin)

    def to_real_delay(self, planner_seconds: float) -> float:
        """Real seconds until ``planner_seconds`` of planner time have passed."""
        return planner_seconds / self.scale
