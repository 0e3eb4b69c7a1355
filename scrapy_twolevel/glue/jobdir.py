"""The ``JOBDIR`` request store: queued requests in a file, so a killed crawl resumes.

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
from typing import TYPE_CHECKING, Any

from scrapy.dupefilters import BaseDupeFilter, RFPDupeFilter

from ..dupefilter import SeenCacheDupeFilter
from ..errors import StoreUnavailable
from ..frontier import PLAIN_LANE, HostEstimate, memory_queue
from ..frontier.topic_frontier import SEP
from ..storage.sqlite import Leased, SqliteStore
from ..storage.state_files import read_hosts, write_hosts
from .preflight import explained_mismatch
from .store import queue
from .timers import Timer

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request

    from ..codec import SpiderCodec
    from ..frontier import Frontier, HostQueue, Policy
    from .inflight import InFlight
    from .reporting import Reporter
    from .topic_tracker import TopicTracker


class JobdirStore:
    """Queued requests in ``JOBDIR/twolevel/frontier.sqlite3``; see the module docstring.

    Opens the file when built (a file that does not match the crawl's policy or shape is
    reported, never overwritten); if a write fails later, a request is kept in memory
    rather than lost (:meth:`queue`), and commits are retried by the commit timer.
    """

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
        reporter: Reporter,
    ) -> None:
        self.statedir = statedir
        self._commit_interval = commit_interval
        self._codec = codec
        self._inflight = inflight
        self._topics = topics
        self._reporter = reporter
        #: Commits the file within ``TWOLEVEL_COMMIT_INTERVAL`` of a write.
        self._commit = Timer(self._commit_tick)
        statedir.mkdir(parents=True, exist_ok=True)
        self._estimates: dict[str, HostEstimate] = read_hosts(statedir / "hosts.json")
        with explained_mismatch(policy):
            self.file = SqliteStore(
                statedir / "frontier.sqlite3",
                cache_mb=cache_mb,
                commit_interval=commit_interval,
                shape=shape,
                on_error=self._store_failing,
                on_recover=self._store_recovered,
            )
        if topics is not None:
            try:
                topics.load(statedir / "topics.json")
            except BaseException:
                self.file.close()
                raise
        self.on_page: Callable[[str, int], None] | None = self.file.record_pages

    def make_queue(self, lane: str, by_quality: bool) -> HostQueue:
        return self.file.queue(lane, by_quality)

    def restore(self, frontier: Frontier) -> None:
        for key, estimate in self._estimates.items():
            frontier.set_estimate(key, estimate)
        self._estimates = {}
        file = self.file
        frontier.restore((key for key, _ in file.stored_hosts()), file.max_seq())
        for lane, fetched in file.pages():
            frontier.restore_pages(lane, fetched)

    def start(self, dupefilter: BaseDupeFilter) -> None:
        """The crawl starts: leases resumed, the dupefilter's seen set in the same file."""
        file = self.file
        if file.resumed_leases:
            self._reporter.set("twolevel/leases_resumed", file.resumed_leases)
        file.before_commit(self._inflight.collect)
        if isinstance(dupefilter, SeenCacheDupeFilter):
            dupefilter.attach_store(file)
        elif isinstance(dupefilter, RFPDupeFilter):
            self._reporter.warning(
                "With JOBDIR, %(df)s records seen requests apart from the queue, so a "
                "killed crawl can lose URLs for good (marked seen, never fetched). Set "
                'DUPEFILTER_CLASS = "scrapy_twolevel.dupefilter.SeenCacheDupeFilter" '
                "(the add-on does) to keep both in one store.",
                {"df": type(dupefilter).__name__},
            )

    def _store_failing(self, exc: Exception) -> None:
        self._reporter.inc("twolevel/store_failures")
        self._reporter.warning(
            "The JOBDIR file cannot be written (%(error)s): every change is kept in memory "
            "and the crawl goes on; commits are retried every TWOLEVEL_COMMIT_INTERVAL. "
            "A crash before one succeeds loses what a crash would lose now: the changes since "
            "the last commit (their requests are fetched again on resume).",
            {"error": f"{type(exc).__name__}: {exc}"},
        )

    def _store_recovered(self, saved: int) -> None:
        # At the failure's level, so whoever saw the one sees the other.
        self._reporter.warning(
            "The JOBDIR file takes writes again: %(n)d kept changes saved.", {"n": saved}
        )

    def wrap(self, request: Request) -> Request | bytes:
        data = self._codec.encode(request)
        return request if data is None else data

    def queue(
        self, frontier: Frontier, lane: str, quality: float, item: Any, request: Request
    ) -> bool:
        """Queue ``item``; if the file fails (full disk, I/O error), ``request`` is kept in
        memory rather than lost after the dupefilter recorded it."""
        try:
            queued = queue(frontier, lane, quality, item, self._reporter)
        except Exception as exc:
            if item is request:
                raise
            self._reporter.count_once(
                "store_error",
                "The JOBDIR frontier could not store a request (%(request)s); it is kept "
                "in memory and will be lost if the crawl stops before it is fetched.",
                f"{type(exc).__name__}: {exc}",
            )
            if lane != PLAIN_LANE and not lane.endswith(SEP):
                frontier.host(lane, queue_factory=memory_queue)
            item = request
            queued = queue(frontier, lane, quality, request, self._reporter)
        if queued:
            self._reporter.inc(
                "scheduler/enqueued/disk" if item is not request else "scheduler/enqueued/memory"
            )
        return queued

    def unwrap(self, lane: str, item: Any) -> Request | None:
        if not isinstance(item, Leased):  # kept in memory (not encodable, or the disk failed)
            self._reporter.inc("scheduler/dequeued/memory")
            kept: Request = item
            return kept
        try:
            request = self._codec.decode(item.data)
        except Exception as exc:
            self.file.release(item.seq)
            # A damaged row, or a class or callback the spider no longer has (renamed
            # code raises anything from ValueError to ModuleNotFoundError): nothing to
            # hand out, so the host is free again; say so once, count every case.
            self._reporter.count_once(
                "undecodable",
                "A stored request could not be rebuilt and is dropped (%(request)s).",
                f"{type(exc).__name__}: {exc}",
            )
            return None
        self._reporter.inc("scheduler/dequeued/disk")
        self._inflight.lease(request, self, item.seq)
        return request

    def finished(self, request: Request, seq: int) -> None:
        """The engine is done with a request from the file: its row goes."""
        self.file.release(seq)

    def discard(self, item: Any) -> None:
        """A queued row the frontier dropped (its host was given up, or had its budget):
        the pop leased it; delete it, or a resumed crawl would queue it again."""
        if isinstance(item, Leased):
            self.file.release(item.seq)

    def may_dispatch(self) -> bool:
        """Not while the file can show no queued request (see SqliteStore.current)."""
        if not self.file.stale:
            return True
        try:
            self.file.current()
        except StoreUnavailable:
            self.dispatched()  # the commit timer retries
            return False
        return True

    def dispatched(self) -> None:
        """Commit the file within ``TWOLEVEL_COMMIT_INTERVAL`` of a write."""
        if self.file.uncommitted:
            self._commit.arm(self._commit_interval)

    def _commit_tick(self) -> None:
        if self.file.commit_if_due() is not None:
            if self._topics is not None:
                # With each commit, so a killed crawl resumes its topics' turns and counts
                # too (a few requests behind, which only shifts a slice).
                self._topics.save(self.statedir / "topics.json")
            self.dispatched()

    def save(self, frontier: Frontier) -> None:
        self._commit.cancel()
        self._inflight.collect()
        write_hosts(
            self.statedir / "hosts.json",
            {h.key: h.estimate for h in frontier.hosts() if h.estimate.samples},
        )
        if self._topics is not None:
            self._topics.save(self.statedir / "topics.json")

    def close(self) -> None:
        self._commit.cancel()  # not saved: the crawl refused to start
        self.file.close()
