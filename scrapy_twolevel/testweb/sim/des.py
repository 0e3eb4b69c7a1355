"""A discrete-event crawl of a :class:`~scrapy_twolevel.testweb.web.WebSpec` on a virtual clock.

Two crawlers run in the same network model:

* :func:`simulate_twolevel` drives the project's **real** frontier
  (:class:`~scrapy_twolevel.frontier.TwoLevelFrontier` with one of the
  :data:`~scrapy_twolevel.frontier.BUILTIN_POLICIES`), measuring hosts the way
  :class:`~scrapy_twolevel.middleware.HostMetricsMiddleware` does: every reply's facts
  (``HTTP/1.0`` + ``Connection: close``; ``Keep-Alive: timeout=T, max=remaining``;
  ``Connection: close`` on the last request a connection allows) go through the real
  :class:`~scrapy_twolevel.frontier.connections.ConnectionTracker`, whose observation is
  passed to ``frontier.observe``.
* :func:`simulate_stock` models Scrapy's stock scheduler and downloader: a priority queue
  (``ScrapyPriorityQueue`` over LIFO or FIFO memory queues, or
  ``DownloaderAwarePriorityQueue``), ``CONCURRENT_REQUESTS`` requests in the downloader at
  most and ``CONCURRENT_REQUESTS_PER_DOMAIN`` transfers per server, extra requests waiting
  in the server's download slot.

Network model (the reference study's)
-------------------------------------
* A request on an open connection takes the server's response time. A request that
  needs a new connection takes the server's connection time plus its response time.
* The server closes a connection after its ``max_requests_per_connection``-th response
  (after every response for HTTP/1.0 servers); the next request pays the connection time
  again. Closing costs nothing (the frontier's own cost formula counts
  ``2 * ConnectionTime`` per session; the simulated network charges one).
* What happens to a connection the crawler has nothing to send on is ``reuse``:

  - ``"session"`` (default, the reference's model, whose session cost is
    ``T = 2 * ConnectionTime + P * ResponseTime / p``): the crawler closes it. For the
    two-level frontier that is when the host's session ends; a stock crawler closes a
    server's connection that no request starts on in the same instant it was freed. The
    crawler closed it, so it tells its connection tracker
    (:meth:`ConnectionTracker.connection_lost`, after the reply that ended the session has
    been measured), and the next reply is known to come on a new connection.
  - ``"pool"`` (what Scrapy's HTTP/1.1 connection pool does, so what a real crawl of the
    test web sees): an idle connection stays open until the server's keep-alive timeout
    (``idle_timeout``, default 30 s like the test web server's, also announced in the
    ``Keep-Alive`` header, so the tracker learns it).

Order of work when a response arrives at time ``t`` (Scrapy's order): the download slot
is freed and the frontier told (``request_left_downloader`` → ``frontier.done``), the
reply is measured (``frontier.observe``), the page's links are queued (the spider's
callback; a link is queued once, as with a dupefilter, with the linked page's quality,
as the test web's spider declares it), then the engine refills the downloader
(``frontier.pop`` until it returns ``None``). Events at equal times run in the order they
were scheduled, so a run is deterministic: same web and options, same events and times.

Quality: the frontier is given each page's stored quality (as
``TWOLEVEL_QUALITY = "meta:twolevel_quality"`` would), seeds :data:`SEED_QUALITY`; the stock
scheduler gets the test web spider's integer priority ``round(quality * 1e6)``, seeds as
start requests. Metrics renormalize qualities to sum to 1 over the whole web.

Pure module: no Scrapy, no Twisted, no I/O.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Literal

from scrapy_twolevel.frontier import (
    BUILTIN_POLICIES,
    CostParams,
    Measurement,
    ResourceCapability,
    SessionRecord,
    TwoLevelFrontier,
)
from scrapy_twolevel.frontier.connections import ConnectionTracker, ReplyFacts

from ..web import WebSpec, quality_to_priority
from .run import CrawlRun, Fetch

__all__ = [
    "SEED_QUALITY",
    "STOCK_VARIANTS",
    "TWOLEVEL_VARIANTS",
    "VARIANTS",
    "CrawlRun",
    "Fetch",
    "Reuse",
    "simulate",
    "simulate_stock",
    "simulate_twolevel",
]

Reuse = Literal["session", "pool"]

#: Quality the test web's spider gives seed requests (its ``SEED_QUALITY``).
SEED_QUALITY = 1.0

#: The two-level frontier's policies, by name.
#: The built-in policies but those that price the crawler's CPU: the simulation has none,
#: and without it they rank hosts as crawl-capability does.
TWOLEVEL_VARIANTS: tuple[str, ...] = tuple(
    p for p in BUILTIN_POLICIES if not issubclass(BUILTIN_POLICIES[p], ResourceCapability)
)
#: Scrapy's stock scheduler: ``ScrapyPriorityQueue`` over ``LifoMemoryQueue`` (depth-first
#: order among equal priorities), over ``FifoMemoryQueue`` (breadth-first order), and
#: ``DownloaderAwarePriorityQueue`` over ``LifoMemoryQueue`` (Scrapy's default since 2.14).
STOCK_VARIANTS: dict[str, str] = {
    "scrapy-dfo": "dfo",
    "scrapy-bfo": "bfo",
    "scrapy-dapq": "dapq",
}
VARIANTS: tuple[str, ...] = (*TWOLEVEL_VARIANTS, *STOCK_VARIANTS)


# -- the network --------------------------------------------------------------------


class _Conn:
    __slots__ = ("last_used", "served")

    def __init__(self) -> None:
        self.served = 0
        self.last_used = 0.0


class _Network:
    """Servers, their open connections, and what the crawler did to them."""

    def __init__(self, web: WebSpec, reuse: Reuse, idle_timeout: float) -> None:
        if reuse not in ("session", "pool"):
            raise ValueError(f"reuse must be 'session' or 'pool', got {reuse!r}")
        if idle_timeout < 0:
            raise ValueError(f"idle_timeout must be >= 0, got {idle_timeout}")
        self.reuse = reuse
        self.idle_timeout = idle_timeout
        self.connect = [h.connect_delay for h in web.hosts]
        self.respond = [h.response_delay for h in web.hosts]
        self.limit = [h.max_requests_per_connection for h in web.hosts]
        self.http10 = [h.http10 for h in web.hosts]
        n = len(web.hosts)
        self.idle: list[list[_Conn]] = [[] for _ in range(n)]
        self.in_flight = [0] * n
        self.opened = 0
        self.violations = 0
        self.max_parallel = 0
        keepalive = f"timeout={int(idle_timeout)}, max={{}}"
        self._facts_http10 = ReplyFacts.parse("HTTP/1.0", "close", None)
        self._facts_close = ReplyFacts.parse("HTTP/1.1", "close", None)
        self._facts_keepalive: dict[int, ReplyFacts] = {}
        self._keepalive_header = keepalive

    def send(self, host: int, now: float) -> tuple[_Conn, bool, float, int]:
        """Start a request: ``(connection, new, duration, requests already in flight)``."""
        idle = self.idle[host]
        conn = None
        while idle:
            candidate = idle.pop()  # the most recently used
            if self.reuse == "session" or now - candidate.last_used <= self.idle_timeout:
                conn = candidate
                break
            # else the server has closed it for being idle too long; try an older one
        new = conn is None
        if conn is None:
            conn = _Conn()
            self.opened += 1
        concurrent = self.in_flight[host]
        if concurrent:
            self.violations += 1
        self.in_flight[host] = concurrent + 1
        self.max_parallel = max(self.max_parallel, concurrent + 1)
        duration = self.respond[host] + (self.connect[host] if new else 0.0)
        return conn, new, duration, concurrent

    def reply(self, host: int, conn: _Conn, now: float) -> ReplyFacts:
        """A response arrived: the connection goes back idle unless the server closed it."""
        self.in_flight[host] -= 1
        conn.served += 1
        if self.http10[host]:
            return self._facts_http10
        remaining = self.limit[host] - conn.served
        if remaining <= 0:
            return self._facts_close
        conn.last_used = now
        self.idle[host].append(conn)
        facts = self._facts_keepalive.get(remaining)
        if facts is None:
            facts = self._facts_keepalive[remaining] = ReplyFacts.parse(
                "HTTP/1.1", "keep-alive", self._keepalive_header.format(remaining)
            )
        return facts

    def close_idle(self, host: int) -> bool:
        """The crawler closes the server's idle connections; return whether there were any."""
        had = bool(self.idle[host])
        self.idle[host].clear()
        return had


class _Web:
    """The parts of a :class:`WebSpec` the simulation reads, as flat lists."""

    def __init__(self, web: WebSpec) -> None:
        self.spec = web
        self.host_of = [p.host for p in web.pages]
        self.links = [p.links for p in web.pages]
        self.quality = [p.quality for p in web.pages]
        self.keys = [h.address for h in web.hosts]
        self.total_quality = math.fsum(self.quality)


class _Crawl:
    """What both crawlers share: the event queue, the seen-set and the records."""

    def __init__(self, web: WebSpec, reuse: Reuse, idle_timeout: float) -> None:
        self.web = _Web(web)
        self.net = _Network(web, reuse, idle_timeout)
        self.now = 0.0
        self._events: list[tuple[float, int, int, _Conn, float, bool, int]] = []
        self._seq = 0
        self.seen: set[int] = set()
        self.fetches: list[Fetch] = []
        self.quality: list[float] = []

    def clock(self) -> float:
        return self.now

    def start(self, page: int) -> None:
        host = self.web.host_of[page]
        conn, new, duration, concurrent = self.net.send(host, self.now)
        self._seq += 1
        heapq.heappush(
            self._events, (self.now + duration, self._seq, page, conn, self.now, new, concurrent)
        )

    def run(self) -> None:
        events = self._events
        while events:
            t, _, page, conn, started, new, concurrent = heapq.heappop(events)
            self.now = t
            if page < 0:  # a wake-up: a paced or backed-off host may be opened now
                self.woken()
                continue
            host = self.web.host_of[page]
            facts = self.net.reply(host, conn, t)
            self.fetches.append(Fetch(page, host, started, t, new, concurrent))
            self.quality.append(self.web.quality[page])
            self.finished(page, host, started, facts)

    def discover(self, page: int, push: Callable[[int], None]) -> None:
        seen = self.seen
        for target in self.web.links[page]:
            if target not in seen:
                seen.add(target)
                push(target)

    def finished(self, page: int, host: int, started: float, facts: ReplyFacts) -> None:
        raise NotImplementedError

    def woken(self) -> None:
        """A wake-up set by :meth:`wake_at` is due (the scheduler's wake timer)."""

    def wake_at(self, t: float) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, self._seq, -1, None, t, False, 0))  # type: ignore[misc]

    def result(self, variant: str, connections: int, sessions: int = 0) -> CrawlRun:
        return CrawlRun(
            variant=variant,
            connections=connections,
            fetches=self.fetches,
            quality=self.quality,
            quality_total=self.web.total_quality,
            connections_opened=self.net.opened,
            politeness_violations=self.net.violations,
            sessions=sessions,
            max_parallel_per_server=self.net.max_parallel,
        )


# -- the two-level frontier ---------------------------------------------------------


class _TwoLevelCrawl(_Crawl):
    def __init__(
        self,
        web: WebSpec,
        policy: str,
        max_open_hosts: int,
        params: CostParams,
        reuse: Reuse,
        idle_timeout: float,
        tracker_idle_timeout: float,
    ) -> None:
        super().__init__(web, reuse, idle_timeout)
        try:
            policy_cls = BUILTIN_POLICIES[policy]
        except KeyError:
            raise ValueError(
                f"unknown policy {policy!r}; use one of: {', '.join(BUILTIN_POLICIES)}"
            ) from None
        self.frontier = TwoLevelFrontier(
            policy_cls(),
            params,
            max_open_hosts,
            clock=self.clock,
            on_session_end=self._session_ended,
        )
        self.tracker = ConnectionTracker(tracker_idle_timeout)
        self._host_index = {key: i for i, key in enumerate(self.web.keys)}
        self._ended: list[int] = []
        self._wake: float | None = None
        self.sessions = 0

    def _session_ended(self, record: SessionRecord) -> None:
        self.sessions += 1
        self._ended.append(self._host_index[record.host])

    def _push(self, page: int) -> None:
        self.frontier.push(self.web.keys[self.web.host_of[page]], self.web.quality[page], page)

    def crawl(self) -> None:
        for seed in self.web.spec.seeds:
            if seed not in self.seen:
                self.seen.add(seed)
                self.frontier.push(self.web.keys[self.web.host_of[seed]], SEED_QUALITY, seed)
        self._fill()
        self.run()
        if len(self.frontier):
            raise RuntimeError(f"frontier stalled with {len(self.frontier)} requests pending")

    def _fill(self) -> None:
        frontier = self.frontier
        while (popped := frontier.pop()) is not None:
            self.start(popped[1])
        retry_at = frontier.next_retry_at()
        if len(frontier) and retry_at is not None and retry_at != self._wake:
            self._wake = retry_at
            self.wake_at(max(retry_at, self.now))

    def woken(self) -> None:
        self._wake = None
        self._fill()

    def finished(self, page: int, host: int, started: float, facts: ReplyFacts) -> None:
        key = self.web.keys[host]
        self.frontier.done(key)  # request_left_downloader
        obs = self.tracker.observe(key, facts, sent_at=started, replied_at=self.now)
        self.frontier.observe(
            key,
            Measurement(
                latency=self.now - started,
                new_connection=obs.new_connection,
                served_on_connection=obs.served_on_connection,
                closed_by_server=obs.closed_by_server,
                remaining_on_connection=obs.remaining_on_connection,
            ),
        )
        if self._ended:
            if self.net.reuse == "session":
                for ended in self._ended:
                    if self.net.close_idle(ended):
                        self.tracker.connection_lost(self.web.keys[ended])
            self._ended.clear()
        self.discover(page, self._push)
        self._fill()


def simulate_twolevel(
    web: WebSpec,
    policy: str,
    *,
    max_open_hosts: int = 64,
    params: CostParams | None = None,
    reuse: Reuse = "session",
    idle_timeout: float = 30.0,
    tracker_idle_timeout: float = 15.0,
) -> CrawlRun:
    """Crawl ``web`` with the real :class:`TwoLevelFrontier` and the named policy.

    ``max_open_hosts`` is K, the number of connections (one per server); ``params`` the
    cost model's constants (default: the plugin's defaults); ``reuse`` and
    ``idle_timeout`` the network model (see the module docstring);
    ``tracker_idle_timeout`` is ``TWOLEVEL_IDLE_TIMEOUT``.
    """
    crawl = _TwoLevelCrawl(
        web,
        policy,
        max_open_hosts,
        params or CostParams(connections=max_open_hosts or 1),
        reuse,
        idle_timeout,
        tracker_idle_timeout,
    )
    crawl.crawl()
    run = crawl.result(policy, max_open_hosts, crawl.sessions)
    run.estimates = {host.key: host.estimate for host in crawl.frontier.hosts()}
    return run


# -- Scrapy's stock scheduler -------------------------------------------------------


class _PriorityQueue:
    """``ScrapyPriorityQueue``: one queue per priority, highest first.

    Start requests (the seeds) go to a FIFO start queue per priority, served after the
    regular queue of the same priority, as in Scrapy >= 2.13.
    """

    __slots__ = ("_len", "_lifo", "_prios", "_queues", "_starts")

    def __init__(self, lifo: bool) -> None:
        self._lifo = lifo
        self._queues: dict[int, deque[int]] = {}
        self._starts: dict[int, deque[int]] = {}
        self._prios: list[int] = []  # heap of -priority, lazily cleaned
        self._len = 0

    def push(self, priority: int, item: int, start: bool = False) -> None:
        queues = self._starts if start else self._queues
        q = queues.get(priority)
        if q is None:
            q = queues[priority] = deque()
            if priority not in (self._queues if start else self._starts):
                heapq.heappush(self._prios, -priority)
        q.append(item)
        self._len += 1

    def pop(self) -> int | None:
        prios = self._prios
        while prios:
            priority = -prios[0]
            q = self._queues.get(priority)
            if q:
                item = q.pop() if self._lifo else q.popleft()
            else:
                q = self._starts.get(priority)
                if not q:
                    heapq.heappop(prios)
                    self._queues.pop(priority, None)
                    self._starts.pop(priority, None)
                    continue
                item = q.popleft()
            self._len -= 1
            return item
        return None

    def __len__(self) -> int:
        return self._len


class _DownloaderAwareQueue:
    """``DownloaderAwarePriorityQueue``: a priority queue per slot (server).

    ``pop`` serves the slot with the fewest requests in the downloader; among equals, the
    first slot key after the last one served (keys compared as strings), else the first
    key: Scrapy's ``_next_slot`` round robin.
    """

    def __init__(self, keys: Sequence[str], active: list[int]) -> None:
        self._keys = keys
        self._active = active
        self._queues: dict[int, _PriorityQueue] = {}
        self._buckets: dict[int, list[str]] = {}  # active count -> sorted keys of non-empty
        self._index = {key: i for i, key in enumerate(keys)}
        self._last: str | None = None
        self._len = 0

    def push(self, slot: int, priority: int, item: int, start: bool = False) -> None:
        q = self._queues.get(slot)
        if q is None:
            q = self._queues[slot] = _PriorityQueue(lifo=True)
            insort(self._buckets.setdefault(self._active[slot], []), self._keys[slot])
        q.push(priority, item, start)
        self._len += 1

    def active_changed(self, slot: int, before: int) -> None:
        if slot in self._queues:
            self._remove(before, self._keys[slot])
            insort(self._buckets.setdefault(self._active[slot], []), self._keys[slot])

    def _remove(self, count: int, key: str) -> None:
        bucket = self._buckets[count]
        del bucket[bisect_left(bucket, key)]
        if not bucket:
            del self._buckets[count]

    def pop(self) -> int | None:
        if not self._buckets:
            return None
        bucket = self._buckets[min(self._buckets)]
        key = bucket[0]
        if self._last is not None:
            i = bisect_right(bucket, self._last)
            if i < len(bucket):
                key = bucket[i]
        self._last = key
        slot = self._index[key]
        q = self._queues[slot]
        item = q.pop()
        assert item is not None
        self._len -= 1
        if not len(q):
            del self._queues[slot]
            self._remove(self._active[slot], key)
        return item

    def __len__(self) -> int:
        return self._len


class _StockCrawl(_Crawl):
    def __init__(
        self,
        web: WebSpec,
        queue: str,
        concurrent_requests: int,
        per_domain: int,
        reuse: Reuse,
        idle_timeout: float,
    ) -> None:
        super().__init__(web, reuse, idle_timeout)
        if queue not in ("dfo", "bfo", "dapq"):
            raise ValueError(f"queue must be 'dfo', 'bfo' or 'dapq', got {queue!r}")
        if concurrent_requests < 1 or per_domain < 1:
            raise ValueError(
                "CONCURRENT_REQUESTS and CONCURRENT_REQUESTS_PER_DOMAIN must be >= 1, got "
                f"{concurrent_requests}, {per_domain}"
            )
        self.total = concurrent_requests
        self.per_domain = per_domain
        n = len(web.hosts)
        self.active = [0] * n  # requests in the downloader, per slot (queued + transferring)
        self.transferring = [0] * n
        self.slot_queue: list[deque[int]] = [deque() for _ in range(n)]
        self.in_downloader = 0
        self.dapq = _DownloaderAwareQueue(self.web.keys, self.active) if queue == "dapq" else None
        self.pq = None if self.dapq else _PriorityQueue(lifo=queue == "dfo")

    def _push(self, page: int, quality: float | None = None, start: bool = False) -> None:
        priority = quality_to_priority(self.web.quality[page] if quality is None else quality)
        if self.dapq is not None:
            self.dapq.push(self.web.host_of[page], priority, page, start)
        else:
            assert self.pq is not None
            self.pq.push(priority, page, start)

    def _pending(self) -> int:
        return len(self.dapq) if self.dapq is not None else len(self.pq or ())

    def _set_active(self, host: int, delta: int) -> None:
        before = self.active[host]
        self.active[host] = before + delta
        if self.dapq is not None:
            self.dapq.active_changed(host, before)

    def crawl(self) -> None:
        for seed in self.web.spec.seeds:
            if seed not in self.seen:
                self.seen.add(seed)
                self._push(seed, SEED_QUALITY, start=True)
        self._fill()
        self.run()
        if self._pending():
            raise RuntimeError(f"stock crawl stalled with {self._pending()} requests pending")

    def _fill(self) -> None:
        """The engine: pull requests while the downloader has fewer than CONCURRENT_REQUESTS."""
        queue = self.dapq if self.dapq is not None else self.pq
        assert queue is not None
        while self.in_downloader < self.total:
            page = queue.pop()
            if page is None:
                return
            host = self.web.host_of[page]
            self.in_downloader += 1
            self._set_active(host, +1)
            self.slot_queue[host].append(page)
            self._process_queue(host)

    def _process_queue(self, host: int) -> None:
        queue = self.slot_queue[host]
        while queue and self.transferring[host] < self.per_domain:
            self.transferring[host] += 1
            self.start(queue.popleft())

    def finished(self, page: int, host: int, started: float, facts: ReplyFacts) -> None:
        self.transferring[host] -= 1
        self._process_queue(host)  # a request waiting in the slot takes the free connection
        self.in_downloader -= 1
        self._set_active(host, -1)
        self.discover(page, self._push)
        self._fill()
        if self.net.reuse == "session":
            self.net.close_idle(host)


def simulate_stock(
    web: WebSpec,
    queue: str = "dapq",
    *,
    concurrent_requests: int = 64,
    per_domain: int = 8,
    reuse: Reuse = "session",
    idle_timeout: float = 30.0,
    name: str | None = None,
) -> CrawlRun:
    """Crawl ``web`` as Scrapy's stock scheduler and downloader would.

    ``queue``: ``"dfo"`` (``ScrapyPriorityQueue`` + ``LifoMemoryQueue``), ``"bfo"``
    (+ ``FifoMemoryQueue``) or ``"dapq"`` (``DownloaderAwarePriorityQueue``).
    ``concurrent_requests`` is ``CONCURRENT_REQUESTS`` (K), ``per_domain``
    ``CONCURRENT_REQUESTS_PER_DOMAIN``: up to that many connections to one server at once.
    Every request sent while another to the same server is in flight counts as a
    politeness violation.
    """
    crawl = _StockCrawl(web, queue, concurrent_requests, per_domain, reuse, idle_timeout)
    crawl.crawl()
    return crawl.result(name or f"scrapy-{queue}", concurrent_requests)


def simulate(web: WebSpec, variant: str, *, connections: int = 64, **options: Any) -> CrawlRun:
    """Run one of :data:`VARIANTS` with K = ``connections``.

    ``options`` go to :func:`simulate_twolevel` or :func:`simulate_stock` (``reuse``,
    ``idle_timeout``, ``params``, ``per_domain``, ...).
    """
    if variant in BUILTIN_POLICIES:
        return simulate_twolevel(web, variant, max_open_hosts=connections, **options)
    if variant in STOCK_VARIANTS:
        return simulate_stock(
            web, STOCK_VARIANTS[variant], concurrent_requests=connections, name=variant, **options
        )
    raise ValueError(f"unknown variant {variant!r}; use one of: {', '.join(VARIANTS)}")
