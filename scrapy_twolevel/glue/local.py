"""Where a crawl on one machine keeps its queued requests: memory, or the JOBDIR file.

The scheduler talks to one *backend* (:class:`~scrapy_twolevel.glue.backend.Backend`):
this module's :class:`MemoryBackend` (no ``JOBDIR``) and :class:`JobdirBackend`
(``JOBDIR``), or the distributed mode's :class:`~scrapy_twolevel.glue.cluster.Cluster`.

Job directory contents (with ``JOBDIR``), under ``JOBDIR/twolevel/``:

- ``frontier.sqlite3``: pending requests per host, the requests handed out and not yet
  finished (leases), and, with the seen cache, the seen set, all in one transaction
  stream (:mod:`scrapy_twolevel.storage.sqlite`); requests are JSON, never pickled;
- ``hosts.json``: host estimates, written when the crawl stops;
- ``topics.json``: the topics' counts and turns (``TWOLEVEL_TOPICS``), with every commit;
- ``recrawl.sqlite3`` and ``recrawl-model.json``: the seed history and the recrawl model
  (``TWOLEVEL_RECRAWL``; :mod:`scrapy_twolevel.glue.seed_planner`);
- ``seen.bloom``: the seen cache's filter in ``bloom-only`` mode
  (:mod:`scrapy_twolevel.dupefilter`);
- ``seen.sqlite3``: the seen cache's own store when another scheduler is used.

Each carries a format marker; a file that does not match is reported, never overwritten.
A request handed out stays leased in the file until the engine has finished with it (its
response handled and the requests it produced queued, or its redirect or retry queued;
:mod:`scrapy_twolevel.glue.inflight` tells), so a crawl killed at any moment resumes
with its leased requests queued again.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .._engine import call_later
from ..dupefilter import SeenCacheDupeFilter
from ..errors import StoreUnavailable
from ..frontier import PLAIN_LANE, HostEstimate, memory_queue
from ..frontier.topic_frontier import SEP
from ..storage.sqlite import Leased, SqliteStore
from ..storage.state_files import read_hosts, write_hosts
from .intake import queue
from .preflight import explained_mismatch

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.dupefilters import BaseDupeFilter

    from ..codec import SpiderCodec
    from ..frontier import Frontier, Policy
    from .backend import FrontierMaker
    from .inflight import InFlight
    from .intake import Intake
    from .reporting import Reporter
    from .seed_planner import SeedPlanner
    from .topic_tracker import TopicTracker


class MemoryBackend:
    """Queued requests in memory, the dupefilter's verdict before each: no ``JOBDIR``."""

    def __init__(
        self,
        *,
        dupefilter: BaseDupeFilter,
        intake: Intake,
        reporter: Reporter,
        seeds: SeedPlanner | None = None,
    ) -> None:
        """``seeds``: the seed planner (``TWOLEVEL_RECRAWL``), told of every request queued."""
        self.df = dupefilter
        # Only the seen cache can test a request without recording it.
        self._seen_cache = dupefilter if isinstance(dupefilter, SeenCacheDupeFilter) else None
        self.intake = intake
        self.reporter = reporter
        self.seeds = seeds
        self.frontier: Frontier | None = None

    def open(self, make_frontier: FrontierMaker) -> Frontier:
        self.frontier = make_frontier(memory_queue)
        return self.frontier

    def join(self) -> None:
        return None

    def start(self) -> Any:
        return self.df.open()

    def enqueue(self, request: Request) -> bool:
        if not request.dont_filter and self.df.request_seen(request):
            self.df.log(request, cast("Spider", self.reporter.spider))
            return False
        # After the dupefilter (most links are duplicates): nothing here can fail.
        host, lane, quality = self.intake.place(request)
        if self.seeds is not None:
            self.seeds.accepting(request)
        if host == PLAIN_LANE:
            self.reporter.inc("twolevel/plain_lane")
        item = self._item(request)
        if not self.queue(lane, quality, item, request):
            return False
        self.reporter.inc(
            "scheduler/enqueued/disk" if isinstance(item, bytes) else "scheduler/enqueued/memory"
        )
        return True

    @property
    def can_peek(self) -> bool:
        """Whether :meth:`drop_if_seen` can answer: the dupefilter is the seen cache."""
        return self._seen_cache is not None

    def drop_if_seen(self, request: Request) -> bool:
        """Whether :meth:`enqueue` would filter ``request``, asked without recording it
        (logged as filtered if so; the caller counts it): the duplicate-links middleware
        drops such requests as the spider yields them. ``False`` when the dupefilter is not
        the seen cache, which has no test that records nothing."""
        seen = self._seen_cache
        if request.dont_filter or seen is None:
            return False
        if not seen.has_key(seen.request_key(request)):
            return False
        seen.log(request, cast("Spider", self.reporter.spider), count=False)
        return True

    def _item(self, request: Request) -> Any:
        """What stands for ``request`` in its queue."""
        return request

    def queue(self, lane: str, quality: float, item: Any, request: Request) -> bool:
        """Queue ``item`` (``request`` or what stands for it) in ``lane``; whether queued."""
        assert self.frontier is not None
        return queue(self.frontier, lane, quality, item, self.reporter)

    def dropped(self, item: Any) -> None:
        return None

    def may_dispatch(self) -> bool:
        return True

    def unpack(self, lane: str, item: Any) -> Request | None:
        self.reporter.inc("scheduler/dequeued/memory")
        request: Request = item
        return request

    def dispatched(self) -> None:
        return None

    def busy(self) -> bool:
        return False

    def leave(self) -> Any:
        return None

    def close(self, reason: str) -> Any:
        if self.frontier is not None:
            self.frontier.close()
        return self.df.close(reason)

    def abort(self) -> None:
        if self.frontier is not None:
            self.frontier.close()
            self.frontier = None


class JobdirBackend(MemoryBackend):
    """Queued requests in ``JOBDIR/twolevel/frontier.sqlite3``; see the module docstring."""

    def __init__(
        self,
        *,
        statedir: Path,
        policy: Policy,
        shape: dict[str, str],
        cache_mb: int,
        commit_interval: float,
        codec: SpiderCodec,
        inflight: InFlight,
        topics: TopicTracker | None,
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.statedir = statedir
        self._policy = policy
        self._shape = shape
        self._cache_mb = cache_mb
        self._commit_interval = commit_interval
        self._codec = codec
        self._inflight = inflight
        self._topics = topics
        self.store: SqliteStore | None = None
        self._commit_timer: Any = None

    def dropped(self, item: Any) -> None:
        """A queued row the frontier dropped (its host was given up, or had its budget):
        the pop leased it; delete it, or a resumed crawl would queue it again."""
        if isinstance(item, Leased) and self.store is not None:
            self.store.release(item.seq)

    def open(self, make_frontier: FrontierMaker) -> Frontier:
        self.statedir.mkdir(parents=True, exist_ok=True)
        estimates: dict[str, HostEstimate] = read_hosts(self.statedir / "hosts.json")
        with explained_mismatch(self._policy):
            self.store = store = SqliteStore(
                self.statedir / "frontier.sqlite3",
                cache_mb=self._cache_mb,
                commit_interval=self._commit_interval,
                shape=self._shape,
                on_error=self._store_failing,
                on_recover=self._store_recovered,
            )
        if self._topics is not None:
            self._topics.load(self.statedir / "topics.json")
        self.frontier = frontier = make_frontier(store.queue, on_page=store.record_pages)
        for key, estimate in estimates.items():
            frontier.set_estimate(key, estimate)
        frontier.restore((key for key, _ in store.stored_hosts()), store.max_seq())
        for lane, fetched in store.pages():
            frontier.restore_pages(lane, fetched)
        return frontier

    def start(self) -> Any:
        store = self.store
        assert store is not None
        if store.resumed_leases:
            self.reporter.set("twolevel/leases_resumed", store.resumed_leases)
        store.before_commit(self._inflight.collect)
        if isinstance(self.df, SeenCacheDupeFilter):
            self.df.attach_store(store)
        else:
            from scrapy.dupefilters import RFPDupeFilter

            if isinstance(self.df, RFPDupeFilter):
                self.reporter.warning(
                    "With JOBDIR, %(df)s records seen requests apart from the queue, so a "
                    "killed crawl can lose URLs for good (marked seen, never fetched). Set "
                    'DUPEFILTER_CLASS = "scrapy_twolevel.dupefilter.SeenCacheDupeFilter" '
                    "(the add-on does) to keep both in one store.",
                    {"df": type(self.df).__name__},
                )
        return self.df.open()

    def _store_failing(self, exc: Exception) -> None:
        self.reporter.inc("twolevel/store_failures")
        self.reporter.warning(
            "The JOBDIR file cannot be written (%(error)s): every change is kept in memory "
            "and the crawl goes on; commits are retried every TWOLEVEL_COMMIT_INTERVAL. "
            "A crash before one succeeds loses what a crash would lose now: the changes since "
            "the last commit (their requests are fetched again on resume).",
            {"error": f"{type(exc).__name__}: {exc}"},
        )

    def _store_recovered(self, saved: int) -> None:
        # At the failure's level, so whoever saw the one sees the other.
        self.reporter.warning(
            "The JOBDIR file takes writes again: %(n)d kept changes saved.", {"n": saved}
        )

    def may_dispatch(self) -> bool:
        """Not while the file can show no queued request (see SqliteStore.current)."""
        if self.store is None or not self.store.stale:
            return True
        try:
            self.store.current()
        except StoreUnavailable:
            self.dispatched()  # the commit timer retries
            return False
        return True

    def _item(self, request: Request) -> Any:
        data = self._codec.encode(request)
        return request if data is None else data

    def queue(self, lane: str, quality: float, item: Any, request: Request) -> bool:
        """As in memory; if the disk store fails (full disk, I/O error) the request is kept
        in memory rather than lost after the dupefilter recorded it."""
        frontier = self.frontier
        assert frontier is not None
        try:
            return queue(frontier, lane, quality, item, self.reporter)
        except Exception as exc:
            if item is request:
                raise
            self.reporter.count_once(
                "store_error",
                "The JOBDIR frontier could not store a request (%(request)s); it is kept "
                "in memory and will be lost if the crawl stops before it is fetched.",
                f"{type(exc).__name__}: {exc}",
            )
            if lane != PLAIN_LANE and not lane.endswith(SEP):
                frontier.host(lane, queue_factory=memory_queue)
            return queue(frontier, lane, quality, request, self.reporter)

    def unpack(self, lane: str, item: Any) -> Request | None:
        if not isinstance(item, Leased):
            return super().unpack(lane, item)
        try:
            request = self._codec.decode(item.data)
        except Exception as exc:
            assert self.store is not None
            self.store.release(item.seq)
            # A damaged row, or a class or callback the spider no longer has (renamed
            # code raises anything from ValueError to ModuleNotFoundError): nothing to
            # hand out, so the host is free again; say so once, count every case.
            self.reporter.count_once(
                "undecodable",
                "A stored request could not be rebuilt and is dropped (%(request)s).",
                f"{type(exc).__name__}: {exc}",
            )
            return None
        self.reporter.inc("scheduler/dequeued/disk")
        self._inflight.lease(request, self, item.seq)
        return request

    def finished(self, request: Request, seq: int) -> None:
        """The engine is done with a request from the file: its row goes."""
        if self.store is not None:
            self.store.release(seq)

    def dispatched(self) -> None:
        """Commit the file within ``TWOLEVEL_COMMIT_INTERVAL`` of a write."""
        store = self.store
        if store is None or self._commit_timer is not None or not store.uncommitted:
            return
        self._commit_timer = call_later(self._commit_interval, self._commit_tick)

    def _commit_tick(self) -> None:
        self._commit_timer = None
        if self.store is not None and self.store.commit_if_due() is not None:
            if self._topics is not None:
                # With each commit, so a killed crawl resumes its topics' turns and counts
                # too (a few requests behind, which only shifts a slice).
                self._topics.save(self.statedir / "topics.json")
            self.dispatched()

    def close(self, reason: str) -> Any:
        if self._commit_timer is not None:
            self._commit_timer.cancel()
            self._commit_timer = None
        if self.store is not None:
            self._inflight.collect()
        if self.frontier is not None:
            write_hosts(
                self.statedir / "hosts.json",
                {h.key: h.estimate for h in self.frontier.hosts() if h.estimate.samples},
            )
            if self._topics is not None:
                self._topics.save(self.statedir / "topics.json")
            self.frontier.close()
            self.frontier = None
        if self.store is not None:
            self.store.close()
            self.store = None
        return self.df.close(reason)

    def abort(self) -> None:
        super().abort()
        if self.store is not None:
            self.store.close()
            self.store = None
