"""The two-level frontier: a ranking of hosts over per-host URL queues.

At most ``max_open_hosts`` hosts are *open* at once. An open host serves a session of up
to ``P(s,i)`` URLs, one at a time (never two in flight to one host), over what the
downloader keeps as one kept-alive connection. Sessions are non-preemptive: a better
host that appears meanwhile waits until a session ends and frees a place. When a place
is free, the best-scored unopened host is opened.

Host ranking is a heap of ``(-score, seq, host)`` entries with lazy deletion: a host whose
score changes gets a fresh entry and its old one is skipped when it surfaces; the heap
is rebuilt when stale entries outnumber live ones. Ties go to the earlier ``seq``, so
equal scores are served first come, first served.

Pure module: no Scrapy, no I/O; items, host keys and the clock are the caller's.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .estimates import CostParams, HostEstimate, SharedPrior
from .policies import Policy
from .queues import FifoHostQueue, HostQueue, QualityHostQueue

#: Host key of the plain lane: requests with no network host (``data:``, ``file:``).
PLAIN_LANE = ""

QueueFactory = Callable[[str, bool], HostQueue]


def memory_queue(host: str, by_quality: bool) -> HostQueue:
    """Default :data:`QueueFactory`: in-memory queues."""
    return QualityHostQueue() if by_quality else FifoHostQueue()


class Host:
    """A host's queue, estimates and session state.

    Hosts never measured share one :class:`HostEstimate` (the prior): change a host's
    estimate through :meth:`TwoLevelFrontier.observe` or :meth:`TwoLevelFrontier.set_estimate`,
    never in place.
    """

    __slots__ = (
        "busy",
        "estimate",
        "key",
        "open",
        "queue",
        "rank_key",
        "rank_token",
        "session_budget",
        "session_served",
        "session_started",
        "sessions",
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


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One finished host session, for stats and tests."""

    host: str
    served: int
    budget: int
    started: float
    ended: float


class TwoLevelFrontier:
    """Hosts ranked by a :class:`Policy`, each served in non-preemptive sessions."""

    def __init__(
        self,
        policy: Policy,
        params: CostParams,
        max_open_hosts: int,
        *,
        queue_factory: QueueFactory = memory_queue,
        clock: Callable[[], float] = time.monotonic,
        on_session_end: Callable[[SessionRecord], None] | None = None,
    ) -> None:
        if max_open_hosts < 1:
            raise ValueError(f"max_open_hosts must be >= 1, got {max_open_hosts}")
        self.policy = policy
        self._by_quality = policy.orders_urls_by_quality
        self.params = params
        self.max_open_hosts = max_open_hosts
        self._queue_factory = queue_factory
        self._clock = clock
        self._on_session_end = on_session_end
        self._hosts: dict[str, Host] = {}
        self._ranking: list[tuple[float, int, str]] = []
        self._ranked = 0  # live entries in _ranking
        self._ready: deque[Host] = deque()  # open, idle, with URLs and budget left
        # Unopened hosts whose next session changed since they were last scored; scored
        # once, at the next pop, however many pushes changed them (one heap entry, not one
        # per push). A dict, used as an ordered set, keeps first-come order for ties.
        self._dirty: dict[str, Host] = {}
        #: Finished sessions and the requests they served (for stats).
        self.sessions_ended = 0
        self.session_requests = 0
        self._open = 0
        self._seq = 0
        self._pending = 0
        self._plain: HostQueue = queue_factory(PLAIN_LANE, False)
        # One estimate shared by every host never measured (copied on its first
        # observation): ~100 bytes per host saved in a frontier of many small hosts.
        self._prior = SharedPrior(params)
        self._prior_head_size = self._prior.batch_size(1 << 30)

    # -- queueing ---------------------------------------------------------------

    def push(self, host_key: str, quality: float, item: Any) -> None:
        """Queue ``item`` for ``host_key`` (``PLAIN_LANE`` for requests with no host)."""
        self._seq += 1
        self._pending += 1
        if host_key == PLAIN_LANE:
            self._plain.push(quality, self._seq, item)
            return
        host = self._hosts.get(host_key) or self.host(host_key)
        if host.queue.push(quality if self._by_quality else 0.0, self._seq, item) and not host.open:
            # Scores depend on the host's next session (its first P URLs) and estimates
            # only, so a URL queued behind that session leaves the score as it was.
            self._dirty[host_key] = host

    def pop(self) -> tuple[str, Any] | None:
        """Next ``(host_key, item)`` to fetch, or ``None`` when every open host is busy.

        The returned host is busy until :meth:`done` is called for it.
        """
        if len(self._plain):
            self._pending -= 1
            return PLAIN_LANE, self._plain.pop()
        if self._ready:
            host = self._ready.popleft()
        elif self._open < self.max_open_hosts and (self._ranked or self._dirty):
            if self._dirty:
                for dirty in self._dirty.values():
                    self._rank(dirty)
                self._dirty.clear()
            if not self._ranked:
                return None
            host = self._open_best()
        else:
            return None
        host.busy = True
        host.session_served += 1
        self._pending -= 1
        return host.key, host.queue.pop()

    def done(self, host_key: str) -> None:
        """The request last popped for ``host_key`` has finished (fetched or failed)."""
        host = self._hosts.get(host_key)
        if host is None or not host.busy:
            return
        host.busy = False
        if host.session_served >= host.session_budget or not len(host.queue):
            self._end_session(host)
        else:
            self._ready.append(host)

    # -- host estimates ---------------------------------------------------------

    def host(self, host_key: str) -> Host:
        """The :class:`Host` for ``host_key``, created on first use."""
        host = self._hosts.get(host_key)
        if host is None:
            queue = self._queue_factory(host_key, self._by_quality)
            queue.set_head_size(self._prior_head_size)
            host = self._hosts[host_key] = Host(host_key, queue, self._prior)
        return host

    def observe(self, host_key: str, **observation: Any) -> None:
        """Fold a measured response into the host's estimates (see :meth:`HostEstimate.observe`)."""
        host = self.host(host_key)
        if host.estimate is self._prior:
            host.estimate = HostEstimate.new(self.params)
        host.estimate.observe(self.params, **observation)
        self.estimates_changed(host)

    def set_estimate(self, host_key: str, estimate: HostEstimate) -> None:
        """Install a saved estimate (resuming a crawl)."""
        host = self.host(host_key)
        host.estimate = estimate
        self.estimates_changed(host)

    def restore(self, host_keys: Iterable[str], max_seq: int) -> None:
        """Adopt queues that already hold items (a resumed disk store).

        ``max_seq`` is the largest sequence number stored, so new items sort after old ones.
        """
        self._seq = max(self._seq, max_seq)
        for key in host_keys:
            if key != PLAIN_LANE:
                self._rank(self.host(key))
        self._pending = len(self._plain) + sum(len(h.queue) for h in self._hosts.values())

    def estimates_changed(self, host: Host) -> None:
        """Re-size the host's session head and re-rank it after its estimate changed."""
        host.queue.set_head_size(host.estimate.batch_size(1 << 30))
        if not host.open:
            self._dirty[host.key] = host

    # -- introspection ----------------------------------------------------------

    def __len__(self) -> int:
        return self._pending

    def hosts(self) -> Iterator[Host]:
        return iter(self._hosts.values())

    @property
    def host_count(self) -> int:
        return len(self._hosts)

    @property
    def open_hosts(self) -> int:
        return self._open

    @property
    def busy_hosts(self) -> list[str]:
        return [h.key for h in self._hosts.values() if h.busy]

    def close(self) -> None:
        self._plain.close()
        for host in self._hosts.values():
            host.queue.close()

    # -- internals --------------------------------------------------------------

    def _rank(self, host: Host) -> None:
        if not len(host.queue):
            if host.rank_token >= 0:
                host.rank_token = -1
                self._ranked -= 1
            return
        key = -self.policy.score(host.queue, host.estimate, self.params)
        if host.rank_token >= 0:
            # Keep the old entry (and its place among ties) if the score is unchanged.
            if host.rank_key == key:
                return
            self._ranked -= 1
        self._seq += 1
        host.rank_token = self._seq
        host.rank_key = key
        heapq.heappush(self._ranking, (key, self._seq, host.key))
        self._ranked += 1
        if len(self._ranking) > 2 * self._ranked + 64:
            self._compact()

    def _open_best(self) -> Host:
        ranking = self._ranking
        while True:
            _, token, key = heapq.heappop(ranking)
            host = self._hosts[key]
            if host.rank_token == token:
                break
        host.rank_token = -1
        self._ranked -= 1
        host.open = True
        host.sessions += 1
        host.session_served = 0
        host.session_budget = host.estimate.batch_size(len(host.queue))
        host.session_started = self._clock()
        self._open += 1
        return host

    def _end_session(self, host: Host) -> None:
        host.open = False
        self._open -= 1
        self.sessions_ended += 1
        self.session_requests += host.session_served
        if self._on_session_end is not None:
            self._on_session_end(
                SessionRecord(
                    host.key,
                    host.session_served,
                    host.session_budget,
                    host.session_started,
                    self._clock(),
                )
            )
        self._rank(host)

    def _compact(self) -> None:
        live = [e for e in self._ranking if self._hosts[e[2]].rank_token == e[1]]
        heapq.heapify(live)
        self._ranking = live
