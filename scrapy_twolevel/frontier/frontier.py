"""The two-level frontier: a ranking of hosts over per-host URL queues.

At most ``max_open_hosts`` hosts are *open* at once. An open host serves a session of up
to ``P(s,i)`` URLs, one at a time (never two in flight to one host), over what the
downloader keeps as one kept-alive connection. Sessions are non-preemptive: a better
host that appears meanwhile waits until a session ends and frees a place. When a place
is free, the best-scored unopened host is opened.

Unopened hosts wait in a :class:`~.ranking.HostRanking` (ties: first come, first served).

Failures (reported with :meth:`TwoLevelFrontier.observe_failure`) end a session early,
back the host off, and finally give it up, as :class:`~.failures.FailurePolicy` says.
Refusals (429/503, :meth:`TwoLevelFrontier.observe_refusal`) park the host until the
server's ``Retry-After`` and teach it a gap between request starts; a host may also have a
least gap of its own (robots.txt ``Crawl-delay``, :meth:`TwoLevelFrontier.set_min_gap`).
A host that must wait, for any of these reasons, waits in a second heap, ``(retry_at,
seq, host)``, and is ranked again once the clock passes ``retry_at``: a hard wait, unlike
a pace (a request sent early is only held by the server; see ``_open_earliest_paced``).

A request's outcome may be reported before or after its :meth:`~TwoLevelFrontier.done`
(Scrapy 2.19 signals a request's end before its middlewares see how it ended), so a
failure that arrives late still ends the session it belongs to.

A host drained and idle for ``dormant_after`` seconds is kept as a few bytes
(:mod:`.dormant`) until it gets URLs again: a broad crawl meets far more hosts than it
keeps busy.

Pure module: no Scrapy, no I/O; items, host keys and the clock are the caller's.
"""

from __future__ import annotations

import heapq
import random
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from . import dormant
from .estimates import (
    IDLE_GAP,
    PACE_LEAD,
    REFUSAL_STREAK,
    CostParams,
    HostEstimate,
    Measurement,
    SharedPrior,
    TypicalPage,
)
from .failures import FailurePolicy, jittered
from .hosts import (
    GIVEN_UP_BUDGET,
    GIVEN_UP_FAILING,
    WAIT_BACKOFF,
    WAIT_DELAY,
    WAIT_REFUSED,
    Host,
    SeqCounter,
    SessionRecord,
)
from .policies import Policy
from .queues import FifoHostQueue, HostQueue, QualityHostQueue
from .ranking import HostRanking

#: Host key of the plain lane: requests with no network host (``data:``, ``file:``).
PLAIN_LANE = ""
#: Seconds a host stays drained and idle before it is packed (:mod:`.dormant`): long after
#: any outcome of its last session, and long enough that a host whose pages keep linking
#: to it is not packed and unpacked between two of its own responses.
DORMANT_AFTER = 60.0
#: Dormant-host checks one :meth:`TwoLevelFrontier.pop` makes at most (each a few µs).
DORMANT_PER_POP = 100

QueueFactory = Callable[[str, bool], HostQueue]


def memory_queue(host: str, by_quality: bool) -> HostQueue:
    """Default :data:`QueueFactory`: in-memory queues."""
    return QualityHostQueue() if by_quality else FifoHostQueue()


class TwoLevelFrontier:
    """Hosts ranked by a :class:`Policy`, each served in non-preemptive sessions."""

    def __init__(
        self,
        policy: Policy,
        params: CostParams,
        max_open_hosts: int | None,
        *,
        failures: FailurePolicy | None = None,
        queue_factory: QueueFactory = memory_queue,
        clock: Callable[[], float] = time.monotonic,
        on_session_end: Callable[[SessionRecord], None] | None = None,
        on_give_up: Callable[[str, int, str], None] | None = None,
        on_dropped: Callable[[Any], None] | None = None,
        host_lock: Any = None,
        lock_owner: str = "",
        sequence: SeqCounter | None = None,
        min_gap: float = 0.0,
        jitter: Callable[[], float] | None = None,
        budget: Callable[[str], int | None] | None = None,
        on_page: Callable[[str, int], None] | None = None,
        dormant_after: float | None = DORMANT_AFTER,
        extend_sessions: bool = True,
    ) -> None:
        """``max_open_hosts=None`` opens as many hosts as have URLs (the downloader limits).

        ``min_gap``: the least seconds between the starts of two requests to one host
        (``TWOLEVEL_HOST_DELAY``); ``jitter()`` draws from [0, 1) the share by which waits
        are lengthened (see :func:`~.failures.jittered`; default: random). ``budget(host)``:
        the pages a host may give (``None``: no limit; see :mod:`.budgets`).

        ``on_give_up(host_key, dropped, why)`` is called once per host given up (``why``:
        ``GIVEN_UP_FAILING`` or ``GIVEN_UP_BUDGET``), and
        ``on_dropped(item)`` for each queued item it drops (the distributed mode keeps a
        copy of every queued request in Redis, which must go too). ``on_page(host_key,
        fetched)`` is called after each page of a host that has a budget, so a store can
        keep the count (:meth:`restore_pages` gives it back). ``dormant_after``: seconds
        a host stays drained and idle before it is packed (``None``: never).
        ``extend_sessions``: a session that has served its ``P`` URLs goes on while no
        other host wants its place (see :meth:`_session_goes_on`).
        """
        if max_open_hosts is not None and max_open_hosts < 1:
            raise ValueError(f"max_open_hosts must be >= 1 or None, got {max_open_hosts}")
        self.policy = policy
        self._by_quality = policy.orders_urls_by_quality
        self.params = params
        self.max_open_hosts = max_open_hosts
        self._max_open: float = float("inf") if max_open_hosts is None else max_open_hosts
        self.failure_policy = failures if failures is not None else FailurePolicy()
        self._on_give_up = on_give_up
        self._on_dropped = on_dropped
        #: Shared with other frontiers (topics): a host open in one is not opened in another.
        self._lock = host_lock
        self._lock_owner = lock_owner
        self._queue_factory = queue_factory
        self._clock = clock
        self.min_gap = min_gap
        self._budget = budget
        self._on_page = on_page
        self._jitter = jitter if jitter is not None else random.Random().random
        self._on_session_end = on_session_end
        self._hosts: dict[str, Host] = {}
        #: Hosts drained and idle, packed (see :mod:`.dormant`); a key is in one table only.
        self._dormant: dict[str, bytes] = {}
        #: ``(when, key)`` of hosts found drained, oldest first (checked again when due).
        self._drained: deque[tuple[float, str]] = deque()
        self._dormant_after = dormant_after
        self._extend_sessions = extend_sessions and max_open_hosts is not None
        self._ready: deque[Host] = deque()  # open, idle, with URLs and budget left
        # Unopened hosts whose next session changed since they were last scored; scored
        # once, at the next pop, however many pushes changed them (one heap entry, not one
        # per push). A dict, used as an ordered set, keeps first-come order for ties.
        self._dirty: dict[str, Host] = {}
        self._backoff: list[tuple[float, int, str]] = []  # backed-off hosts by retry time
        self._paced: list[tuple[float, int, str]] = []  # hosts waiting out their pace
        #: Finished sessions and the requests they served (for stats).
        self.sessions_ended = 0
        self.session_requests = 0
        #: Requests served past a session's ``P`` because no other host wanted its place.
        self.session_extensions = 0
        #: Failures reported, sessions ended by them, hosts given up, URLs dropped with them.
        self.failures = 0
        self.failed_sessions = 0
        self.hosts_given_up = 0
        self.dropped_host_failed = 0
        #: Hosts that had their page budget, and the URLs dropped for it.
        self.hosts_at_budget = 0
        self.dropped_budget = 0
        #: Failures of URLs that had failed before (counted once against their host), and
        #: requests refused (429/503).
        self.repeat_failures = 0
        self.refusals = 0
        self._open = 0
        #: Numbers items (and ranking entries) in order; shared by frontiers that share a
        #: store keyed by it (topics), so their numbers never collide.
        self._sequence = sequence if sequence is not None else SeqCounter()
        self._ranking = HostRanking(self._hosts, self._sequence)
        self._pending = 0
        self._plain: HostQueue = queue_factory(PLAIN_LANE, False)
        # One estimate shared by every host never measured (copied on its first
        # observation): ~100 bytes per host saved in a frontier of many small hosts.
        self._prior = SharedPrior(params)
        #: The crawl's typical page, which a host's first page is weighed against.
        self.typical_page = TypicalPage()
        self._prior_head_size = policy.session_length(1 << 30, self._prior)

    # -- queueing ---------------------------------------------------------------

    def push(self, host_key: str, quality: float, item: Any) -> bool:
        """Queue ``item`` for ``host_key`` (``PLAIN_LANE`` for requests with no host).

        Returns ``False`` (and counts it in :attr:`dropped_host_failed` or
        :attr:`dropped_budget`) when the host was given up after failing or has had its
        budget: the item is dropped.
        """
        # Counted once queued: a queue that raises (a failing store) has not taken it.
        if host_key == PLAIN_LANE:
            self._plain.push(quality, self._sequence.next(), item)
            self._pending += 1
            return True
        host = self._hosts.get(host_key) or self.host(host_key)
        if host.given_up:
            if host.given_up_for == GIVEN_UP_BUDGET:
                self.dropped_budget += 1
            else:
                self.dropped_host_failed += 1
            return False
        head_changed = host.queue.push(
            quality if self._by_quality else 0.0, self._sequence.next(), item
        )
        self._pending += 1
        if head_changed and not host.open and not host.retry_at and not host.paced_until:
            # Scores depend on the host's next session (its first P URLs) and estimates
            # only, so a URL queued behind that session leaves the score as it was.
            self._dirty[host_key] = host
        return True

    def pop(self) -> tuple[str, Any] | None:
        """Next ``(host_key, item)`` to fetch, or ``None`` when every open host is busy.

        The returned host is busy until :meth:`done` is called for it.
        """
        if len(self._plain):
            self._pending -= 1
            return PLAIN_LANE, self._plain.pop()
        if self._backoff:
            self._release(self._backoff, backoff=True)
        if self._paced:
            self._release(self._paced, backoff=False)
        if self._drained:
            self._pack_drained()
        if self._ready:
            host = self._ready.popleft()
        elif self._open < self._max_open:
            if self._dirty:
                for dirty in self._dirty.values():
                    self._rank(dirty)
                self._dirty.clear()
            opened = self._open_best() if len(self._ranking) else None
            if opened is None:
                # No host is ready: rather than leave a connection idle, send the request
                # the server will take soonest (it holds it until the host's pace has passed).
                opened = self._open_earliest_paced()
                if opened is None:
                    if not self._open and self._backoff:
                        self._end_game()
                    return None
            host = opened
        else:
            return None
        try:
            item = host.queue.pop()
        except BaseException:
            self._ready.appendleft(host)  # a store that cannot read now: the host waits
            raise
        host.busy = True
        host.session_served += 1
        host.previous_sent_at, host.sent_at = host.sent_at, self._clock()
        self._pending -= 1
        return host.key, item

    def done(self, host_key: str) -> None:
        """The request last popped for ``host_key`` has finished (fetched or failed).

        Report a failure with :meth:`observe_failure` *before* calling this, so a session
        that has failed ``session_failures`` times in a row ends here.
        """
        host = self._hosts.get(host_key)
        if host is None or not host.busy:
            return
        host.busy = False
        over = (
            not len(host.queue)
            # paced: the server would hold the next one (see _end_session)
            or host.ready_at - PACE_LEAD > self._clock()
            or host.retry_at  # must wait (refused, or its gap between requests)
        )
        if not over and host.session_served >= host.session_budget:
            if self._session_goes_on(host):
                host.session_budget += 1
                self.session_extensions += 1
            else:
                over = True
        if self._failures_end_session(host) or (over and host.probe_failed()):
            self._end_session(host, failed=True)
        elif over:
            self._end_session(host)
        else:
            self._ready.append(host)

    def now(self) -> float:
        """The frontier's clock (the one back-off times are measured on)."""
        return self._clock()

    def next_retry_at(self) -> float | None:
        """Clock time at which the earliest backed-off (or paced) host may be opened again."""
        times = [heap[0][0] for heap in (self._backoff, self._paced) if heap]
        return min(times) if times else None

    # -- host estimates ---------------------------------------------------------

    def host(self, host_key: str, queue_factory: QueueFactory | None = None) -> Host:
        """The :class:`Host` for ``host_key``, created on first use.

        ``queue_factory`` overrides the frontier's for a host created now (a caller whose
        disk store failed can still queue in memory).
        """
        host = self._hosts.get(host_key)
        if host is None:
            queue = (queue_factory or self._queue_factory)(host_key, self._by_quality)
            packed = self._dormant.pop(host_key, None)
            if packed is None:
                host = Host(host_key, queue, self._prior)
            else:
                host = dormant.unpack(host_key, packed, queue, self._prior)
            queue.set_head_size(self._head_size(host.estimate))
            self._hosts[host_key] = host
            if self._budget is not None:
                host.budget = self._budget(host_key)
        return host

    def observe(self, host_key: str, measured: Measurement) -> None:
        """Fold a measured response into the host's estimates (see :meth:`HostEstimate.observe`).

        A response ends the host's failure streaks.
        """
        host, now, sent, gap = self._answered(host_key)
        idle = host.last_end is None or sent - host.last_end >= IDLE_GAP
        delay = host.estimate.observe(
            self.params, measured, gap=gap, idle=idle, typical_page=self.typical_page.size
        )
        self.typical_page.add(measured.size)
        # The server's rate limit, if it has one: its next request waits until the pace has
        # passed since this one's service began (sent, then held for ``delay``).
        host.ready_at = sent + delay + host.estimate.pace if host.estimate.pace else 0.0
        host.last_end = now
        host.refused_in_a_row = 0
        host.session_ok = True
        host.fetched += 1
        if host.budget is not None:
            if self._on_page is not None:
                self._on_page(host_key, host.fetched)
            if host.fetched >= host.budget and not host.given_up:
                self._give_up(host, GIVEN_UP_BUDGET)
        self.estimates_changed(host)
        # The gap counts from when the request really went out: the downloader may have
        # held it after the frontier handed it out (robots.txt first, DOWNLOAD_DELAY).
        elapsed = measured.elapsed
        self._keep_gap(host, sent if elapsed is None else max(sent, now - elapsed))

    def observe_refusal(
        self, host_key: str, *, retry_after: float | None, refused_before: int = 0
    ) -> bool:
        """The host refused a request (429, 503): park it until ``retry_after`` seconds
        from now (the server's ``Retry-After``; ``None``: it gave none) and at least its
        learnt refusal gap after the refused request's start. Call :meth:`done` as usual.

        A refusal is not a failure: the server is up. Returns whether the request is worth
        sending again: not after ``REFUSAL_STREAK`` refusals in a row (the host refuses
        everything), nor once this request was refused ``REFUSAL_STREAK`` times before
        (``refused_before``): the URL is refused (one 503 page), and the gap stays.
        """
        host, now, sent, gap = self._answered(host_key)
        host.refused_in_a_row += 1
        urls_own = refused_before >= REFUSAL_STREAK
        host.estimate.observe_refusal(gap, grow=not urls_own)
        self.refusals += 1
        self.estimates_changed(host)
        until = sent + jittered(host.estimate.refusal_gap, self._jitter())
        if retry_after is not None:
            until = max(until, now + max(0.0, retry_after))
        self._park(host, until, WAIT_REFUSED)
        return not urls_own and host.refused_in_a_row <= REFUSAL_STREAK

    def _answered(self, host_key: str) -> tuple[Host, float, float, float | None]:
        """The host answered (a response or a refusal: it is up, its failure streaks end):
        it, the time now, when its request was sent, and the gap since the one before."""
        host = self.host(host_key)
        if host.estimate is self._prior:
            host.estimate = HostEstimate.new(self.params)
        host.failures = 0
        host.failed_sessions = 0
        host.answered = True
        now = self._clock()
        sent = now if host.sent_at is None else host.sent_at
        gap = None if host.previous_sent_at is None else sent - host.previous_sent_at
        return host, now, sent, gap

    def set_min_gap(self, host_key: str, seconds: float) -> None:
        """Start the host's requests at least ``seconds`` apart (robots.txt ``Crawl-delay``);
        it replaces the frontier's ``min_gap`` for this host."""
        self.host(host_key).min_gap = max(0.0, seconds)

    def hold(self, host_key: str, seconds: float, reason: str = WAIT_REFUSED) -> None:
        """Serve the host no request for ``seconds``, and change nothing else about it: the
        server asked so in its answer to a request the frontier did not hand out (a 429
        with ``Retry-After`` on robots.txt or a media download), or another topic's
        frontier served the host and its gap holds here too (``reason``: the wait's name,
        as :attr:`Host.wait_reason` shows it)."""
        if seconds > 0:
            self._park(self.host(host_key), self._clock() + seconds, reason)

    def observe_failure(
        self,
        host_key: str,
        *,
        elapsed: float,
        timeout: bool,
        repeat: bool = False,
        silent: bool = False,
    ) -> None:
        """Fold a failed request into the host's estimates and its failure streak.

        See :meth:`HostEstimate.observe_failure`; call :meth:`done` afterwards as usual.
        ``repeat``: the request's URL had failed before (a retry). With nothing else of the
        host queued that may be the URL's problem alone (and Scrapy retries it at once), so
        the streak is left as it is; with other URLs waiting, failing again before any of
        them is the host's too (a host that went down). A repeat still fails a probe.
        ``silent``: a timeout within the shortened time given a host that never answered
        (``TWOLEVEL_FIRST_ANSWER_TIMEOUT``); while other hosts wait for a place it ends the
        session at once, so a host that is most likely down does not hold that place
        through its retries (they wait for its probe).
        """
        host = self.host(host_key)
        if host.estimate is self._prior:
            host.estimate = HostEstimate.new(self.params)
        host.estimate.observe_failure(self.params, elapsed=elapsed, timeout=timeout)
        self.estimates_changed(host)
        host.session_failures += 1
        self.repeat_failures += repeat
        if not repeat or len(host.queue):
            if not host.failures and not host.failed_sessions:
                host.failing_since = self._clock()
            host.failures += 1
            self.failures += 1
        if silent and not host.answered and self._hosts_waiting():
            host.failures = max(host.failures, self.failure_policy.session_failures)
        if host.busy or host.given_up:
            return  # done() decides, as usual
        # The failure arrived after done(): decide now what done() could not.
        limit_hit = self._failures_end_session(host)
        if host.open:  # idle between two requests of its session
            if limit_hit:
                self._ready.remove(host)
                self._end_session(host, failed=True)
        elif host.sessions and not host.session_failed and (limit_hit or host.probe_failed()):
            # Its session already ended as if it had gone well: mark it failed after all.
            self._unrank(host)
            self._session_failed(host)

    def backed_off(self, host_key: str) -> bool:
        """Whether the host is failing as a whole: backed off (or probed) after a failed
        session, and not given up. Its requests' failures are then the host's, not theirs."""
        host = self._peek(host_key)
        return host is not None and host.failed_sessions > 0 and not host.given_up

    def set_estimate(self, host_key: str, estimate: HostEstimate) -> None:
        """Install a saved estimate (resuming a crawl)."""
        host = self.host(host_key)
        host.estimate = estimate
        self.estimates_changed(host)

    def restore(self, host_keys: Iterable[str], max_seq: int) -> None:
        """Adopt queues that already hold items (a resumed disk store).

        ``max_seq`` is the largest sequence number stored, so new items sort after old ones.
        """
        self._sequence.at_least(max_seq)
        for key in host_keys:
            if key != PLAIN_LANE:
                self._rank(self.host(key))
        self._pending = len(self._plain) + sum(len(h.queue) for h in self._hosts.values())

    def restore_pages(self, host_key: str, fetched: int) -> None:
        """The host gave ``fetched`` pages before this run (a resumed crawl): they count
        toward its budget, and a host that had its budget is given up again (its queued
        URLs dropped). Call after :meth:`restore`."""
        host = self.host(host_key)
        host.fetched = max(host.fetched, fetched)
        if host.budget is not None and host.fetched >= host.budget and not host.given_up:
            self._unrank(host)
            self._give_up(host, GIVEN_UP_BUDGET)

    def reprice(self, cpu_price: float) -> None:
        """The crawl's price of a CPU second changed (:mod:`.binding`): rank every host
        again at it. Hosts not ranked now (open, waiting) are scored when they are."""
        self.params = replace(self.params, cpu_price=cpu_price)
        if self.policy.prices_cpu:
            policy, params = self.policy, self.params
            self._ranking.rescore(lambda host: policy.score(host.queue, host.estimate, params))

    def estimates_changed(self, host: Host) -> None:
        """Re-size the host's session head and re-rank it after its estimate changed."""
        host.queue.set_head_size(self._head_size(host.estimate))
        if not host.open and not host.retry_at and not host.paced_until:
            self._dirty[host.key] = host

    # -- introspection ----------------------------------------------------------

    def __len__(self) -> int:
        return self._pending

    def hosts(self) -> Iterator[Host]:
        """Every host; dormant ones as read-only copies with an empty queue."""
        yield from self._hosts.values()
        for key, packed in list(self._dormant.items()):
            yield self._copy(key, packed)

    @property
    def host_count(self) -> int:
        return len(self._hosts) + len(self._dormant)

    @property
    def dormant_count(self) -> int:
        """Hosts kept packed (see :mod:`.dormant`)."""
        return len(self._dormant)

    @property
    def open_hosts(self) -> int:
        return self._open

    def close(self) -> None:
        self._plain.close()
        for host in self._hosts.values():
            host.queue.close()

    # -- internals --------------------------------------------------------------

    def _rank(self, host: Host) -> None:
        if host.retry_at or host.given_up or host.paced_until:
            return  # ranked again when its back-off or pace ends; never once given up
        if not len(host.queue):
            self._ranking.remove(host)
            self._note_drained(host)
            return
        self._ranking.put(host, self.policy.score(host.queue, host.estimate, self.params))

    def _open_best(self) -> Host | None:
        lock, owner = self._lock, self._lock_owner
        skip = None if lock is None else (lambda key: lock.locked(key, owner))
        best = self._ranking.pop_best(skip)
        return None if best is None else self._open_host(best)

    def _open_earliest_paced(self) -> Host | None:
        """Open the paced host whose pace ends first (see :meth:`pop`)."""
        paced = self._paced
        lock = self._lock
        skipped: list[tuple[float, int, str]] = []
        opened = None
        while paced:
            entry = heapq.heappop(paced)
            host = self._hosts.get(entry[2])
            if host is None or host.paced_until != entry[0]:
                continue  # stale (a dormant host waits for nothing)
            if host.retry_at or host.given_up or not len(host.queue):
                host.paced_until = 0.0  # backed off since, or nothing left to send
                continue
            if lock is not None and lock.locked(host.key, self._lock_owner):
                skipped.append(entry)
                continue
            host.paced_until = 0.0
            opened = self._open_host(host)
            break
        for entry in skipped:
            heapq.heappush(paced, entry)
        return opened

    def _open_host(self, host: Host) -> Host:
        if self._lock is not None:
            self._lock.acquire(host.key, self._lock_owner)
        host.open = True
        host.sessions += 1
        host.session_served = 0
        host.session_failures = 0
        host.session_ok = False
        host.session_failed = False
        host.session_budget = self.policy.session_length(len(host.queue), host.estimate)
        if host.failed_sessions:
            # Back from a back-off: one request (a probe) tells whether the host answers again.
            host.session_budget = 1
        host.session_started = self._clock()
        self._open += 1
        return host

    def _end_session(self, host: Host, *, failed: bool = False) -> None:
        host.open = False
        self._open -= 1
        if self._lock is not None:
            self._lock.release(host.key, self._lock_owner)
        self.sessions_ended += 1
        self.session_requests += host.session_served
        ended = self._clock()
        if failed:
            self._session_failed(host)
        elif host.ready_at - PACE_LEAD > ended and len(host.queue):
            # Paced: ranked again just before the server will take its next request at
            # once (PACE_LEAD: the crawler's own delay between a decision and the send).
            host.paced_until = host.ready_at - PACE_LEAD
            heapq.heappush(self._paced, (host.paced_until, self._sequence.next(), host.key))
        if self._on_session_end is not None:
            # After the back-off or the pace is set: the record says what the host waits for.
            waiting = None if host.given_up or not len(host.queue) else host.waiting(ended)
            wait: tuple[float | None, str] = waiting or (None, "")
            self._on_session_end(
                SessionRecord(
                    host.key,
                    host.session_served,
                    host.session_budget,
                    host.session_started,
                    ended,
                    failed,
                    *wait,
                )
            )
        self._rank(host)

    def _session_goes_on(self, host: Host) -> bool:
        """Whether a session that has served its ``P`` URLs serves one more.

        ``P = 1`` (crawl-capability, unless a session was measured to save host time) keeps
        a place free for a better host; but where no host waits for a place (fewer hosts
        open than ``max_open_hosts``, or none ranked), ending the session frees nothing,
        and the next request to this host, sent later over a new connection, costs a
        connection's set-up on both sides. At 100,000 hosts a host comes up again long
        after the server closed its idle connection, so every page paid one. So the session
        goes on, over its kept-alive connection, while: no host wants its place; the host
        keeps connections alive and has served fewer than ``RequestsPerConnection`` in it;
        it is not failing; and its next URL gathers at least as much quality per second of
        the crawler's CPU as the best ranked host's next URL would (where places are free,
        the crawler's CPU is what a request spends: a host of heavy pages does not go on
        ahead of a better use of it).
        """
        if not self._extend_sessions:
            return False
        if self._open >= self._max_open and self._hosts_waiting():
            return False  # its place is wanted
        estimate = host.estimate
        if not estimate.keepalive or host.failures or host.failed_sessions:
            return False
        if host.session_served >= estimate.batch_size(host.session_served + len(host.queue)):
            return False
        best = self._ranking.peek_best()
        if best is None:
            return True
        # q / X >= q_best / X_best, multiplied out; negative qualities count as 0, as in
        # crawl-capability's sum. X is 0 until measured: two such hosts cost alike.
        quality, best_quality = (
            max(0.0, host.queue.best_quality()),
            max(0.0, best.queue.best_quality()),
        )
        cpu, best_cpu = estimate.processing_time, best.estimate.processing_time
        if not (cpu or best_cpu):
            return quality >= best_quality
        return quality * best_cpu >= best_quality * cpu

    def _failures_end_session(self, host: Host) -> bool:
        return host.failures >= self.failure_policy.session_failures

    def _hosts_waiting(self) -> bool:
        """Unopened hosts wait for a place: ranked, to be ranked, or waiting out a pace."""
        return bool(len(self._ranking) or self._dirty or self._paced)

    def _only_failing_hosts_left(self) -> bool:
        """Nothing to fetch but at hosts that keep failing (backed off, or open with a
        failure and no answer yet): the crawl would only wait for their probes."""
        if self._hosts_waiting() or len(self._plain):
            return False
        if not all(
            host.failed_sessions
            for _, _, key in self._backoff
            if (host := self._hosts.get(key)) is not None  # else stale: dormant
        ):
            return False
        return not self._open or all(  # (a scan of every host: only if one is open)
            not h.answered and (h.failures or h.failed_sessions)
            for h in self._hosts.values()
            if h.open
        )

    def _end_game(self) -> None:
        """Nothing is open and nothing else is left: give up now the backed-off hosts that
        never answered and would be given up at their next failed session (the end game of
        :meth:`FailurePolicy.gives_up`) rather than hold the crawl open for their probes."""
        if not self._only_failing_hosts_left():
            return
        for _, _, key in list(self._backoff):
            host = self._hosts.get(key)
            if host is None or host.given_up or host.answered:
                continue
            if self.failure_policy.gives_up(
                host.failed_sessions, answered=False, failing_for=0.0, end_game=True
            ):
                host.retry_at = 0.0  # its heap entry is stale from now on
                self._give_up(host, GIVEN_UP_FAILING)

    def _unrank(self, host: Host) -> None:
        self._ranking.remove(host)
        self._dirty.pop(host.key, None)

    def _session_failed(self, host: Host) -> None:
        """Back the host off, or give it up after too many failed sessions in a row."""
        host.session_failed = True
        self.failed_sessions += 1
        host.failed_sessions += 1
        host.failures = 0  # each session after a back-off gets the full allowance again
        policy = self.failure_policy
        now = self._clock()
        failing_for = now - host.failing_since
        end_game = not host.answered and self._only_failing_hosts_left()
        if policy.gives_up(
            host.failed_sessions, answered=host.answered, failing_for=failing_for, end_game=end_game
        ):
            self._give_up(host, GIVEN_UP_FAILING)
            return
        delay = policy.backoff_delay(host.failed_sessions, self._jitter())
        if delay > 0:
            self._park(host, now + delay, WAIT_BACKOFF)

    def _keep_gap(self, host: Host, sent: float) -> None:
        """After a response: the host's next request starts its least gap after ``sent``."""
        gap = max(
            self.min_gap if host.min_gap is None else host.min_gap,
            host.estimate.refusal_gap,
        )
        if gap > 0:
            self._park(host, sent + jittered(gap, self._jitter()), WAIT_DELAY)

    def _park(self, host: Host, until: float, reason: str) -> None:
        """Keep the host from being served before ``until`` (see the module docstring)."""
        if until <= self._clock() or until <= host.retry_at:
            return
        # max() keeps retry_at truthy even on a clock that starts at 0.
        host.retry_at = max(until, 1e-9)
        host.wait_reason = reason
        heapq.heappush(self._backoff, (host.retry_at, self._sequence.next(), host.key))
        if host.busy:
            return  # done() ends its session
        if host.open:  # idle in its session: the wait ends it
            self._ready.remove(host)
            self._end_session(host)
        else:
            self._unrank(host)

    def _give_up(self, host: Host, why: str) -> None:
        host.given_up = True
        host.given_up_for = why
        dropped = len(host.queue)
        for item in host.queue.clear():  # on disk: one statement for every row
            if self._on_dropped is not None:
                self._on_dropped(item)
        self._pending -= dropped
        if why == GIVEN_UP_BUDGET:
            self.hosts_at_budget += 1
            self.dropped_budget += dropped
        else:
            self.hosts_given_up += 1
            self.dropped_host_failed += dropped
        self._dirty.pop(host.key, None)
        if host.open and not host.busy:
            # Idle in its session (its last outcome came after done()): the session ends
            # now, or the host would stay ready with nothing to hand out.
            self._ready.remove(host)
            self._end_session(host)
        self._note_drained(host)
        if self._on_give_up is not None:
            self._on_give_up(host.key, dropped, why)

    def _release(self, heap: list[tuple[float, int, str]], *, backoff: bool) -> None:
        """Rank again the hosts whose wait in ``heap`` (back-off, else pace) has passed.

        The host's own record of that wait (``retry_at``, else ``paced_until``) tells
        whether an entry is stale (the wait was renewed or cleared): it is then skipped.
        """
        now = self._clock()
        while heap and heap[0][0] <= now:
            until, _, key = heapq.heappop(heap)
            host = self._hosts.get(key)
            if host is not None and (host.retry_at if backoff else host.paced_until) == until:
                if backoff:
                    host.retry_at = 0.0
                else:
                    host.paced_until = 0.0
                self._dirty[key] = host

    def _peek(self, host_key: str) -> Host | None:
        """The host, a read-only copy if dormant; ``None`` if never seen."""
        host = self._hosts.get(host_key)
        if host is None and (packed := self._dormant.get(host_key)) is not None:
            host = self._copy(host_key, packed)
        return host

    def _copy(self, host_key: str, packed: bytes) -> Host:
        """A read-only copy of a dormant host (its queue empty, taking nothing)."""
        return dormant.unpack(host_key, packed, _NO_QUEUE, self._prior)

    def _head_size(self, estimate: HostEstimate) -> int:
        """The head a host's queue sums: its next session (the prior's, computed once)."""
        if estimate is self._prior:
            return self._prior_head_size
        return self.policy.session_length(1 << 30, estimate)

    def _note_drained(self, host: Host) -> None:
        """``host`` has nothing queued: pack it once it has stayed so for a while."""
        if self._dormant_after is not None:
            self._drained.append((self._clock(), host.key))

    def _pack_drained(self) -> None:
        """Pack the hosts drained ``dormant_after`` seconds ago that are still drained and
        idle (a host that got URLs since, or was served, is checked again when it drains)."""
        assert self._dormant_after is not None
        drained, hosts = self._drained, self._hosts
        due = self._clock() - self._dormant_after
        for _ in range(DORMANT_PER_POP):
            if not drained or drained[0][0] > due:
                return
            since, key = drained.popleft()
            host = hosts.get(key)
            if (
                host is None
                or host.open
                or host.busy
                or len(host.queue)
                or host.retry_at
                or host.paced_until
                or host.rank_token >= 0
                or key in self._dirty
                or (host.sent_at is not None and host.sent_at > since)
            ):
                continue
            self._dormant[key] = dormant.pack(host, self._prior)
            del hosts[key]
            host.queue.close()


class _NoQueue(FifoHostQueue):
    """The queue of a dormant host's read-only copy: empty, and takes nothing."""

    __slots__ = ()

    def push(self, quality: float, seq: int, item: Any) -> bool:
        raise TypeError("a dormant host's copy is read-only: queue through the frontier")


_NO_QUEUE = _NoQueue()
