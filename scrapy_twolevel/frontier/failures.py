"""What the frontier does with a host whose requests fail: end its session, back off, give up.

A host that times out or refuses connections must not keep one of the K open places for
hours, and must not win the ranking because it was never measured. Failures are folded
into the host's estimates (see :meth:`HostEstimate.observe_failure`), and this policy
decides the rest:

* a session ends early after ``session_failures`` failures in a row, and one that ends
  (budget spent, queue empty) with every request of it failed counts as failed too;
* such a *failed session* backs the host off for ``backoff * 2**(n - 1)`` seconds (``n``
  failed sessions in a row), capped at ``backoff_max``; its URLs stay queued;
* after ``failed_sessions`` failed sessions in a row the host is given up: its queued URLs
  are dropped and counted, and later URLs for it are dropped as they arrive.

Any successful response resets both streaks. Pure module: no Scrapy, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FailurePolicy:
    """The failure rules, all settings (see :mod:`scrapy_twolevel.config`)."""

    #: Failures in a row that end a host's session (``TWOLEVEL_SESSION_FAILURES``).
    session_failures: int = 2
    #: Seconds a host waits after its first failed session (``TWOLEVEL_BACKOFF``).
    backoff: float = 30.0
    #: Longest wait between two sessions of a failing host (``TWOLEVEL_BACKOFF_MAX``).
    backoff_max: float = 600.0
    #: Failed sessions in a row before the host is given up; 0: never
    #: (``TWOLEVEL_FAILED_SESSIONS``).
    failed_sessions: int = 3

    def backoff_delay(self, failed_in_a_row: int) -> float:
        """Seconds to wait after the ``failed_in_a_row``-th failed session (1, 2, ...)."""
        if failed_in_a_row < 1:
            return 0.0
        # min() before the power would overflow a float for a long streak.
        exponent = min(failed_in_a_row - 1, 64)
        return min(self.backoff * 2.0**exponent, self.backoff_max)

    def gives_up(self, failed_in_a_row: int) -> bool:
        """Whether a host with this many failed sessions in a row is given up."""
        return 0 < self.failed_sessions <= failed_in_a_row
