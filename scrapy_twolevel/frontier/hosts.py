"""A host as the frontier sees it: its queue, its estimates and where its session stands.

Kept apart from :mod:`.frontier` so the state a host carries (sessions, failure streaks,
waits) reads in one place. Pure module: no Scrapy, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from .estimates import HostEstimate
from .queues import HostQueue


class Host:
    """A host's queue, estimates and session state.

    Hosts never measured share one :class:`HostEstimate` (the prior): change a host's
    estimate through :meth:`TwoLevelFrontier.observe` or :meth:`TwoLevelFrontier.set_estimate`,
    never in place.
    """

    __slots__ = (
        "answered",
        "budget",
        "busy",
        "estimate",
        "failed_sessions",
        "failing_since",
        "failures",
        "fetched",
        "given_up",
        "given_up_for",
        "key",
        "last_end",
        "min_gap",
        "open",
        "paced_until",
        "previous_sent_at",
        "queue",
        "rank_key",
        "rank_token",
        "ready_at",
        "refused_in_a_row",
        "retry_at",
        "sent_at",
        "session_budget",
        "session_failed",
        "session_failures",
        "session_ok",
        "session_served",
        "session_started",
        "sessions",
        "wait_reason",
    )

    def __init__(self, key: str, queue: HostQueue, estimate: HostEstimate) -> None:
        self.key = key
        self.queue = queue
        self.estimate = estimate
        self.open = False
        self.busy = False
        self.session_budget = 0
        self.session_served = 0
        self.session_started = 0.0
        self.sessions = 0
        self.rank_token = -1  # seq of the live ranking entry, -1 when not ranked
        self.rank_key = 0.0  # -score of that entry: the same float object as in the heap
        self.failures = 0  # failed requests in a row
        self.failed_sessions = 0  # sessions in a row ended by failures
        self.retry_at = 0.0  # > 0 while it must wait: not ranked before this time
        self.wait_reason = ""  # why: WAIT_BACKOFF, WAIT_REFUSED or WAIT_DELAY
        self.answered = False  # a request of it ever got a response (a refusal too)
        self.refused_in_a_row = 0  # refusals since its last response
        self.failing_since = 0.0  # when its current streak of failures began
        self.min_gap: float | None = None  # its own least gap between request starts
        self.given_up = False  # no more URLs for it: failing (GIVEN_UP_FAILING), or budget
        self.given_up_for = ""
        self.fetched = 0  # responses it gave (refusals not counted)
        self.budget: int | None = None  # pages it may give (see frontier/budgets.py)
        self.session_failures = 0  # failed requests in the current (or last) session
        self.session_ok = False  # a request of that session got a response
        self.session_failed = False  # that session ended (or was marked) failed
        self.sent_at: float | None = None  # when its last request was handed out
        self.previous_sent_at: float | None = None  # and the one before
        self.last_end: float | None = None  # when its last response arrived
        self.ready_at = 0.0  # its pace: the server holds a request sent before this time
        self.paced_until = 0.0  # > 0 while waiting out its pace: not ranked before this time

    def waiting(self, now: float) -> tuple[float, str] | None:
        """``(until, why)`` while it may not be served at ``now``: parked (``retry_at``,
        ``wait_reason``) or waiting out its pace (``WAIT_PACING``); else ``None``."""
        if self.retry_at > now:
            return self.retry_at, self.wait_reason
        if self.paced_until > now:
            return self.paced_until, WAIT_PACING
        return None

    def probe_failed(self) -> bool:
        """Its current (or last) session was a probe after a back-off, and failed.

        An ordinary session that ends with fewer failures than ``session_failures`` is not
        failed, even if all of it failed: one URL that fails (and fails again when retried)
        does not back off a host; the next URL that fails does.
        """
        return (
            self.failed_sessions > 0
            and not self.session_ok
            and self.session_failures >= max(self.session_served, 1)
        )


#: Why a host waits until its ``retry_at``: its sessions failed (back-off), the server
#: refused a request (429/503, ``Retry-After``), or its requests must start at least a gap
#: apart (a learnt refusal gap, robots.txt ``Crawl-delay``, ``TWOLEVEL_HOST_DELAY``).
WAIT_BACKOFF = "backoff"
WAIT_REFUSED = "refused"
WAIT_DELAY = "delay"
#: Why a host waits until its ``paced_until``: the server's own pace, learnt from the
#: responses it held.
WAIT_PACING = "pacing"
#: Why a host takes no more URLs: it kept failing, or it has had its page budget.
GIVEN_UP_FAILING = "failing"
GIVEN_UP_BUDGET = "budget"


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One finished host session, for stats and tests."""

    host: str
    served: int
    budget: int
    started: float
    ended: float
    #: Ended early by failures in a row (the host is backed off or given up).
    failed: bool = False
    #: What the host waits for when the session ends: until when (the frontier's clock)
    #: and why (``backoff``, ``refused``, ``delay``, ``pacing``); ``None`` and "" when it
    #: may be served again at once.
    wait_until: float | None = None
    wait_reason: str = ""


class SeqCounter:
    """A counter: 1, 2, 3, ..."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def next(self) -> int:
        self.value += 1
        return self.value

    def at_least(self, value: int) -> None:
        self.value = max(self.value, value)
